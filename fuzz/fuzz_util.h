// Shared by the libFuzzer targets (fuzz/fuzz_*.cpp; docs/fuzzing.md).
//
// Each target feeds the input to one parser. The parser may reject it, but only with ac::Error
// (a typed error naming the file and field): that is caught here. Anything else (another
// exception type, an ASan or UBSan report, a leak, a timeout, more than the memory limit) ends
// the run and is a bug. AC_FUZZ_ASSERT checks a promise of the parser on accepted input.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/error.h"

#define AC_FUZZ_ASSERT(cond)                                                          \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                            \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace ac::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Runs `f`; a typed ac::Error is an accepted outcome, and its message must name `file` (or,
/// when given, `other`: a file the input refers to, such as a scenario's device file).
template <typename F>
void expect_ok_or_error(F&& f, const char* file, const char* other = nullptr) {
  try {
    f();
  } catch (const ac::Error& e) {
    const std::string_view m = e.what();
    if (m.find(file) == std::string_view::npos &&
        (!other || m.find(other) == std::string_view::npos)) {
      std::fprintf(stderr, "error message does not name %s: %s\n", file, e.what());
      std::abort();
    }
  }
}

}  // namespace ac::fuzz
