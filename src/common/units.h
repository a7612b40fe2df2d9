// How the CLI prints a quantity (docs/cli.md): bytes with binary prefixes (B, KiB, MiB, GiB),
// every other value as it is. JSON keeps bytes as integers; only text goes through here.
#pragma once
#include <fmt/format.h>

#include <string>

namespace ac {

/// `bytes` with the largest binary prefix that keeps it at or above 1: "500 B", "1.500 KiB",
/// "12.000 GiB" (IEC 80000-13). Never throws.
inline std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024.0) bytes /= 1024.0, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.3f} {}", bytes, units[u]);
}

/// A limit's value as a message prints it: bytes_text for "peak_memory_bytes", else 6
/// significant digits (milliseconds, tokens/s).
inline std::string limit_value_text(const std::string& limit_name, double v) {
  return limit_name == "peak_memory_bytes" ? bytes_text(v) : fmt::format("{:.6g}", v);
}

}  // namespace ac
