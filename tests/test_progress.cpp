// Progress events (common/progress.h): what the Python package's progress callback receives.
// A bar's updates and a compress run's completed stages reach the innermost scope's callback;
// scopes restore the previous callback; an exception thrown by the callback leaves the caller.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/progress.h"
#include "pipeline/run_folder.h"
#include "common/json_io.h"
#include "test_support.h"

using namespace ac;

TEST(Progress, UpdatesReachTheInnermostCallbackAndScopesRestore) {
  std::vector<ProgressEvent> outer, inner;
  {
    ProgressCallbackScope a([&](const ProgressEvent& e) { outer.push_back(e); });
    Progress bar("distill", 100, "tok");
    bar.update(40, "loss 2.5");
    {
      ProgressCallbackScope b([&](const ProgressEvent& e) { inner.push_back(e); });
      bar.update(70);
    }
    bar.finish();
  }
  Progress("after", 1, "x").update(1);  // no scope: nobody is called
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(outer[0].stage, "distill");
  EXPECT_EQ(outer[0].done, 40);
  EXPECT_EQ(outer[0].total, 100);
  EXPECT_EQ(outer[0].unit, "tok");
  EXPECT_EQ(outer[0].message, "loss 2.5");
  EXPECT_EQ(outer[1].done, 100);  // finish()
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].done, 70);
}

TEST(Progress, ACallbackThatThrowsStopsTheCaller) {
  ProgressCallbackScope scope([](const ProgressEvent&) { throw std::runtime_error("stop"); });
  Progress bar("importance", 4, "blocks");
  EXPECT_THROW(bar.update(1), std::runtime_error);
}

TEST(Progress, EachCompleteStageOfARunFolderIsAnEvent) {
  ac::test::TempDir tmp;
  std::vector<ProgressEvent> events;
  ProgressCallbackScope scope([&](const ProgressEvent& e) { events.push_back(e); });
  RunFolder folder = RunFolder::create(tmp.path / "run", nlohmann::json::object());
  write_json_file(folder.path() / "a.json", nlohmann::json::object());
  folder.complete("profile", {"a.json"}, nlohmann::json::object(), 1.0);
  folder.complete("data", {}, nlohmann::json::object(), 1.0);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].stage, "compress");
  EXPECT_EQ(events[0].message, "profile");
  EXPECT_EQ(events[0].done, 1);
  EXPECT_EQ(events[0].total, 0);  // not known in advance
  EXPECT_EQ(events[1].message, "data");
  EXPECT_EQ(events[1].done, 2);
  EXPECT_EQ(events[1].unit, "stages");
}

// In a log (stderr not a terminal), the line at 100% is printed once: update(total) followed by
// finish(), as every stage ends, printed it twice ("[sample] 100.0% 8/8 seq" two times). An end
// not yet shown, or shown with another message, is printed by finish().
TEST(Progress, TheEndIsShownOnceInALog) {
  const char* quiet = std::getenv("AC_QUIET");
  const std::string saved = quiet ? quiet : "";
  unsetenv("AC_QUIET");
  auto count_ends = [](const std::function<void(Progress&)>& work) {
    testing::internal::CaptureStderr();
    Progress bar("sample", 8, "seq");
    work(bar);
    const std::string err = testing::internal::GetCapturedStderr();
    size_t n = 0;
    for (size_t at = err.find("100.0%"); at != std::string::npos; at = err.find("100.0%", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count_ends([](Progress& p) {
              for (int i = 1; i <= 8; ++i) p.update(i);
              p.finish();
            }), 1u);
  EXPECT_EQ(count_ends([](Progress& p) {
              p.update(7);
              p.finish();
            }), 1u);
  EXPECT_EQ(count_ends([](Progress& p) {
              p.update(8, "loss 2.5");
              p.finish("loss 2.4");  // new information: shown
            }), 2u);
  if (quiet) setenv("AC_QUIET", saved.c_str(), 1);
}

// The first line of a log has no ETA ("--"): the first unit carries the stage's warm-up, and an
// ETA from it once read "1h12m" for a 90-second profile. Later lines have one.
TEST(Progress, TheFirstLineHasNoEtaAndLaterOnesDo) {
  const char* quiet = std::getenv("AC_QUIET");
  const std::string saved = quiet ? quiet : "";
  unsetenv("AC_QUIET");
  testing::internal::CaptureStderr();
  {
    Progress bar("profile", 20, "shapes");
    bar.update(1);  // 5%: the first line
    bar.update(3);  // 15%: the next decile, a second line
    bar.finish();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  if (quiet) setenv("AC_QUIET", saved.c_str(), 1);
  const size_t first_end = err.find('\n');
  ASSERT_NE(first_end, std::string::npos) << err;
  const std::string first = err.substr(0, first_end);
  EXPECT_NE(first.find("1/20 shapes"), std::string::npos) << err;
  EXPECT_NE(first.find("ETA --"), std::string::npos) << err;
  const size_t second_end = err.find('\n', first_end + 1);
  ASSERT_NE(second_end, std::string::npos) << err;
  const std::string second = err.substr(first_end + 1, second_end - first_end - 1);
  EXPECT_NE(second.find("3/20 shapes"), std::string::npos) << err;
  EXPECT_EQ(second.find("ETA --"), std::string::npos) << err;
  EXPECT_NE(second.find("ETA 0m"), std::string::npos) << err;  // microseconds a unit
}
