// The clock every latency of the profile and of measure_native is read from.
//
// Wall-clock time by default (what a user waits). With AC_TIMER=cpu, the process CPU time
// (CLOCK_PROCESS_CPUTIME_ID): on a machine shared with other jobs and with one torch thread
// (AC_NUM_THREADS=1) it does not count the time other processes held the core, so the cost
// model can be checked while the machine is busy. With more threads, CPU time adds every
// thread's time (and OpenMP's spinning), so it is only meaningful with one thread.
#pragma once
#include <string>

namespace ac {

/// "wall" or "cpu" (from AC_TIMER; anything else is "wall").
const std::string& timer_kind();

/// Milliseconds since an arbitrary origin on the clock of timer_kind().
double timer_ms();

}  // namespace ac
