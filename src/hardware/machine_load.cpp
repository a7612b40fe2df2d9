#include "hardware/machine_load.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/runtime.h"

namespace ac {

CpuTimes parse_proc_stat(const std::string& text, double ticks_per_s) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;  // the aggregate line; "cpu0".. are per CPU
    std::istringstream fields(line.substr(4));
    std::vector<double> v;
    std::string f;
    while (fields >> f) {
      if (f.find_first_not_of("0123456789") != std::string::npos)
        throw FormatError(msg("machine_load", "/proc/stat: the \"cpu\" line: expected "
                                              "non-negative integers, found '{}'", f));
      v.push_back(std::stod(f) / ticks_per_s);
    }
    if (v.size() < 4)
      throw FormatError(msg("machine_load", "/proc/stat: the \"cpu\" line: expected at least 4 "
                                            "fields (user nice system idle), found {}", v.size()));
    v.resize(std::max<size_t>(v.size(), 8), 0.0);
    CpuTimes t;
    t.busy_s = v[0] + v[1] + v[2] + v[5] + v[6];
    t.idle_s = v[3] + v[4];
    t.steal_s = v[7];
    t.valid = true;
    return t;
  }
  throw FormatError(msg("machine_load", "/proc/stat: expected an aggregate \"cpu\" line, found "
                                        "none"));
}

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream f("/proc/stat");
  if (!f) return t;
  std::stringstream ss;
  ss << f.rdbuf();
  const long hz = sysconf(_SC_CLK_TCK);
  try {
    t = parse_proc_stat(ss.str(), hz > 0 ? double(hz) : 100.0);
  } catch (const Error&) {
    return CpuTimes{};
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  t.own_s = double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
            1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  t.wall_s = now_s();
  return t;
}

MachineLoad load_between(const CpuTimes& a, const CpuTimes& b) {
  MachineLoad l;
  if (!a.valid || !b.valid || !(b.wall_s > a.wall_s)) return l;
  l.measured = true;
  l.seconds = b.wall_s - a.wall_s;
  l.other_cores = std::max(0.0, ((b.busy_s - a.busy_s) - (b.own_s - a.own_s)) / l.seconds);
  l.steal_cores = std::max(0.0, (b.steal_s - a.steal_s) / l.seconds);
  return l;
}

json MachineLoad::to_json() const {
  return {{"measured", measured}, {"seconds", seconds}, {"other_cores", other_cores},
          {"steal_cores", steal_cores}};
}

MachineLoad MachineLoad::from_json(const json& j, const std::string& where) {
  MachineLoad l;
  if (j.is_null()) return l;
  if (!j.is_object())
    throw FormatError(msg("load", "{}: expected an object, found {}", where, j.type_name()));
  l.measured = json_get_or<bool>(j, "measured", false, where);
  l.seconds = json_get_or<double>(j, "seconds", 0.0, where);
  l.other_cores = json_get_or<double>(j, "other_cores", 0.0, where);
  l.steal_cores = json_get_or<double>(j, "steal_cores", 0.0, where);
  for (const auto& [key, v] : {std::pair{"seconds", l.seconds}, std::pair{"other_cores", l.other_cores},
                               std::pair{"steal_cores", l.steal_cores}})
    if (!(v >= 0 && v < 1e9))
      throw FormatError(msg("load", "{}.{}: expected a non-negative number, found {}", where, key,
                            v));
  return l;
}

std::string busy_machine_warning(const MachineLoad& load, const std::string& what, int cores) {
  if (!load.measured ||
      (load.other_cores <= kBusyMachineCores && load.steal_cores <= kBusyMachineCores))
    return "";
  return fmt::format("{} shared the machine: other processes kept {:.1f} of its {} cores busy "
                     "on average over {:.0f} s (the hypervisor took {:.1f} more): its times are "
                     "not this machine's when quiet; measure again with nothing else running",
                     what, load.other_cores, cores, load.seconds, load.steal_cores);
}

}  // namespace ac
