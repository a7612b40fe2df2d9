// The machine's load while something is timed (hardware/machine_load.h): /proc/stat's aggregate
// line read as proc(5) lays it out (hand-computed), the load between two readings, the warning's
// threshold, its place in a profile's JSON, and a real reading against the clock.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "hardware/machine_load.h"
#include "hardware/profile.h"
#include "hardware/validate.h"
#include "test_util.h"

namespace ac {
namespace {

// proc(5): "cpu  user nice system idle iowait irq softirq steal guest guest_nice", USER_HZ ticks.
constexpr const char* kProcStat =
    "cpu  1000 20 300 4000 50 6 7 80 0 0\n"
    "cpu0 500 10 150 2000 25 3 3 40 0 0\n"
    "cpu1 500 10 150 2000 25 3 4 40 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 678\n";

TEST(MachineLoad, ReadsTheAggregateCpuLineOfProcStat) {
  const CpuTimes t = parse_proc_stat(kProcStat, 100.0);
  ASSERT_TRUE(t.valid);
  EXPECT_DOUBLE_EQ(t.busy_s, (1000 + 20 + 300 + 6 + 7) / 100.0);  // user nice system irq softirq
  EXPECT_DOUBLE_EQ(t.idle_s, (4000 + 50) / 100.0);                // idle iowait
  EXPECT_DOUBLE_EQ(t.steal_s, 80 / 100.0);
  // A kernel before 2.6.11 has no steal field: none counted.
  const CpuTimes old = parse_proc_stat("cpu  10 0 5 100 1 0 0\n", 100.0);
  EXPECT_DOUBLE_EQ(old.busy_s, 0.15);
  EXPECT_DOUBLE_EQ(old.steal_s, 0.0);
  test::expect_error<FormatError>([] { parse_proc_stat("cpu0 1 2 3 4\nintr 5\n", 100.0); },
                                  {"/proc/stat", "\"cpu\" line", "found none"});
  test::expect_error<FormatError>([] { parse_proc_stat("cpu  1 2 x 4\n", 100.0); },
                                  {"/proc/stat", "non-negative integers", "'x'"});
  test::expect_error<FormatError>([] { parse_proc_stat("cpu  1 2 3\n", 100.0); },
                                  {"at least 4 fields", "found 3"});
}

TEST(MachineLoad, OtherProcessesAreTheMachinesBusyTimeLessOurOwn) {
  CpuTimes a, b;
  a.valid = b.valid = true;
  a.busy_s = 10, a.own_s = 1, a.steal_s = 0.2, a.wall_s = 100;
  b.busy_s = 14, b.own_s = 2, b.steal_s = 0.7, b.wall_s = 102;
  const MachineLoad l = load_between(a, b);
  ASSERT_TRUE(l.measured);
  EXPECT_DOUBLE_EQ(l.seconds, 2.0);
  EXPECT_DOUBLE_EQ(l.other_cores, (4.0 - 1.0) / 2.0);
  EXPECT_DOUBLE_EQ(l.steal_cores, 0.5 / 2.0);
  const std::string w = busy_machine_warning(l, "the profile", 2);
  for (const char* needle : {"the profile shared the machine", "1.5 of its 2 cores", "over 2 s",
                             "hypervisor took 0.2", "nothing else running"})
    EXPECT_NE(w.find(needle), std::string::npos) << needle << " in: " << w;

  // Our own time alone (tick rounding may put it a little above the machine's): quiet, not < 0.
  b.busy_s = 10.9, b.steal_s = 0.2;
  const MachineLoad quiet = load_between(a, b);
  EXPECT_EQ(quiet.other_cores, 0.0);
  EXPECT_EQ(busy_machine_warning(quiet, "the profile", 2), "");
  // Just above the threshold in steal alone: busy.
  b.steal_s = 0.2 + 2 * (kBusyMachineCores + 0.01);
  EXPECT_NE(busy_machine_warning(load_between(a, b), "the profile", 2), "");
  // Invalid or reversed readings measure nothing.
  CpuTimes bad;
  EXPECT_FALSE(load_between(a, bad).measured);
  EXPECT_FALSE(load_between(b, a).measured);
  EXPECT_EQ(busy_machine_warning(load_between(a, bad), "the profile", 2), "");
}

TEST(MachineLoad, IsKeptInTheProfileAndReadBackOrAbsentInOlderOnes) {
  Profile p;
  p.machine_load.measured = true;
  p.machine_load.seconds = 41;
  p.machine_load.other_cores = 1.6;
  p.machine_load.steal_cores = 0.05;
  const Profile back = Profile::from_json(p.to_json(), "p.json");
  EXPECT_TRUE(back.machine_load.measured);
  EXPECT_DOUBLE_EQ(back.machine_load.seconds, 41);
  EXPECT_DOUBLE_EQ(back.machine_load.other_cores, 1.6);
  EXPECT_DOUBLE_EQ(back.machine_load.steal_cores, 0.05);
  json older = p.to_json();
  older.erase("machine_load");
  EXPECT_FALSE(Profile::from_json(older, "old.json").machine_load.measured);
  json broken = p.to_json();
  broken["machine_load"]["other_cores"] = -1;
  test::expect_error<FormatError>([&] { Profile::from_json(broken, "b.json"); },
                                  {"b.json: machine_load.other_cores", "non-negative", "-1"});
}

TEST(MachineLoad, ValidationSaysWhetherItsMeasurementSharedTheMachine) {
  ValidationReport rep;
  rep.cores = 2;
  EXPECT_EQ(rep.table().find("Machine load"), std::string::npos);  // not measured: no line
  rep.machine_load.measured = true;
  rep.machine_load.seconds = 60;
  rep.machine_load.other_cores = 0.05;
  EXPECT_NE(rep.table().find("other processes 0.05 cores on average, steal 0.00 (quiet)"),
            std::string::npos) << rep.table();
  rep.machine_load.other_cores = 1.2;
  const std::string t = rep.table();
  EXPECT_NE(t.find("The validation shared the machine: other processes kept 1.2 of its 2 cores"),
            std::string::npos) << t;
  EXPECT_DOUBLE_EQ(rep.to_json().at("machine_load").at("other_cores").get<double>(), 1.2);
}

// The machine's time over an interval, every kind together, is its cores times the wall clock:
// /proc/stat read as laid out, and summed over every CPU.
TEST(MachineLoad, ARealReadingAccountsForEveryCoreOverTheInterval) {
  const CpuTimes a = read_cpu_times();
  if (!a.valid) GTEST_SKIP() << "no /proc/stat here";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const CpuTimes b = read_cpu_times();
  ASSERT_TRUE(b.valid);
  // The CPUs /proc/stat sums over: its "cpuN" lines.
  double cores = 0;
  {
    std::ifstream f("/proc/stat");
    for (std::string line; std::getline(f, line);)
      cores += line.size() > 3 && line.rfind("cpu", 0) == 0 && std::isdigit(line[3]);
  }
  ASSERT_GT(cores, 0);
  const double accounted = (b.busy_s - a.busy_s) + (b.idle_s - a.idle_s) + (b.steal_s - a.steal_s);
  const double expected = cores * (b.wall_s - a.wall_s);
  // Ticks of 10 ms per CPU at each end, and a reading not taken at one instant.
  EXPECT_NEAR(accounted, expected, 0.15 * expected + 0.04 * cores);
  const MachineLoad l = load_between(a, b);
  EXPECT_TRUE(l.measured);
  EXPECT_GE(l.other_cores, 0.0);
  EXPECT_LE(l.other_cores, cores + 0.1);
}

}  // namespace
}  // namespace ac
