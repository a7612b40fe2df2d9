// Errors of autocompress.
//
// Caller mistakes and bad files throw typed exceptions whose message starts with the function
// in brackets, names the file and the field or tensor, and says what was expected and what was
// found, e.g.
//   [load_checkpoint] model.safetensors: tensor 'model.layers.3.mlp.up_proj.weight' has shape
//   [11008, 4096], expected [14336, 4096] from config.json intermediate_size
// Internal invariants use AC_CHECK, which is always on and reports file:line.
// The library never exits; main() catches Error, prints its message on one line, returns 1.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace ac {

/// Base of every error the library throws on purpose.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A file is missing, truncated, corrupt or inconsistent (safetensors, GGUF, config.json, ...).
struct FormatError : Error {
  using Error::Error;
};
/// The caller asked for something invalid (bad option, bad architecture, unknown device).
struct ConfigError : Error {
  using Error::Error;
};
/// No architecture meets the deployment limits; the message gives the smallest reachable cost.
struct InfeasibleError : Error {
  using Error::Error;
};
/// An internal invariant failed: a bug in autocompress, not in the input.
struct InternalError : Error {
  using Error::Error;
};

/// Builds "[where] message" with fmt formatting.
template <typename... Args>
std::string msg(const char* where, fmt::format_string<Args...> f, Args&&... args) {
  return fmt::format("[{}] {}", where, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ac

/// Always-on internal invariant check: throws ac::InternalError with file:line.
#define AC_CHECK(cond, ...)                                                                    \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::ac::InternalError(::fmt::format("internal check failed at {}:{}: {} ({})",       \
                                              __FILE__, __LINE__, #cond,                       \
                                              ::fmt::format(__VA_ARGS__)));                    \
  } while (0)
