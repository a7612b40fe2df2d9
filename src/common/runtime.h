// Process-wide runtime settings: torch threads, logging, timing.
#pragma once
#include <chrono>
#include <string>

namespace ac {

/// Sets torch's intra-op threads to the core count (libtorch 1.13 defaults to 1), unless
/// AC_NUM_THREADS is set. Returns the count used. Safe to call more than once.
int init_torch_threads();

/// Number of online CPU cores.
int cpu_cores();

/// Informational line on stderr ("[stage] text"); silenced by AC_QUIET=1.
void log_info(const std::string& line);
void log_warn(const std::string& line);

/// Monotonic seconds since an arbitrary origin.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Today's date, UTC, "YYYY-MM-DD".
std::string today_utc();

}  // namespace ac
