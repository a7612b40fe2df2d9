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

/// Returns the allocator's freed-but-resident pages to the system: under jemalloc (the CLI's
/// allocator, found at run time through dlsym so the library does not depend on it) every
/// arena's dirty and muzzy pages are purged (mallctl "arena.<MALLCTL_ARENAS_ALL>.purge"); under
/// any other allocator it does nothing. Called between the batches of a streaming stage so that
/// its peak memory is one batch's working set however many batches it runs (issue #4);
/// a purge costs the page faults of re-touching the next batch's buffers. Returns true if it
/// purged.
bool release_free_memory();

/// Monotonic seconds since an arbitrary origin.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Today's date, UTC, "YYYY-MM-DD".
std::string today_utc();

}  // namespace ac
