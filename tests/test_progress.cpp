// Progress events (common/progress.h): what the Python package's progress callback receives.
// A bar's updates and a compress run's completed stages reach the innermost scope's callback;
// scopes restore the previous callback; an exception thrown by the callback leaves the caller.
#include <gtest/gtest.h>

#include <stdexcept>
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
