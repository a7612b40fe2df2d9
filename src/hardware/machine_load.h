// How busy the machine was while something was timed: the CPU time other processes used, and
// the time a hypervisor gave this guest's virtual CPUs to others (steal), both in cores on
// average over the interval. A profile or a validation taken while they are high times a shared
// machine: its tables carry whatever the neighbours did, and the next profile will disagree
// with it (docs/benchmarks.md: profiles minutes apart 1.3-6.3% apart on a shared 2-core guest).
//
// Source: Linux's /proc/stat, the aggregate "cpu" line (proc(5): user nice system idle iowait
// irq softirq steal guest guest_nice, in USER_HZ ticks since boot, summed over every CPU; guest
// time is already inside user and nice), and this process's own CPU time (getrusage(2),
// RUSAGE_SELF: every thread, user and system). Elsewhere (no /proc/stat) nothing is measured.
#pragma once
#include <string>

#include "common/json_io.h"

namespace ac {

/// The machine's CPU time since boot, summed over its CPUs, read together with this process's
/// own CPU time and the monotonic clock. Seconds.
struct CpuTimes {
  double busy_s = 0;   // user + nice + system + irq + softirq
  double idle_s = 0;   // idle + iowait
  double steal_s = 0;  // given by the hypervisor to other guests
  double own_s = 0;    // this process's user + system time
  double wall_s = 0;   // now_s() when read
  bool valid = false;  // false where /proc/stat could not be read
};

/// The times of /proc/stat's text (its aggregate "cpu" line; at least the first 4 fields, steal
/// counted when present), in seconds at `ticks_per_s` (sysconf(_SC_CLK_TCK), 100 on Linux).
/// own_s and wall_s are left 0. Throws FormatError naming /proc/stat when the line is missing
/// or a field is not a non-negative integer.
CpuTimes parse_proc_stat(const std::string& text, double ticks_per_s);

/// /proc/stat, getrusage and the clock now; valid = false (and zeros) where /proc/stat cannot be
/// read. Does not throw.
CpuTimes read_cpu_times();

/// What happened on the machine between two readings.
struct MachineLoad {
  bool measured = false;    // both readings valid and later than one another
  double seconds = 0;       // the interval (wall clock)
  double other_cores = 0;   // CPU time of every other process / seconds: cores kept busy by them
  double steal_cores = 0;   // steal / seconds
  json to_json() const;     // {"measured", "seconds", "other_cores", "steal_cores"}
  /// Reads to_json's object; a missing or null value gives measured = false (files written
  /// before 2026-12-07). Throws FormatError naming `where` on a malformed one.
  static MachineLoad from_json(const json& j, const std::string& where);
};

/// The load between `a` (earlier) and `b`. other_cores is clamped at 0 (tick rounding can make
/// it slightly negative on an idle machine). Not measured when either reading is invalid or
/// b is not after a.
MachineLoad load_between(const CpuTimes& a, const CpuTimes& b);

/// Other processes above this many cores on average, or steal above it, make a busy machine.
inline constexpr double kBusyMachineCores = 0.2;

/// One line for the user: "" on a quiet machine (or when not measured); else what `what`
/// measured ("the profile", "the validation") shared its `cores` with, e.g. "the profile shared
/// the machine: other processes kept 1.6 of its 2 cores busy on average over 41 s (steal 0.0):
/// its times are not this machine's when quiet; measure again with nothing else running".
std::string busy_machine_warning(const MachineLoad& load, const std::string& what, int cores);

}  // namespace ac
