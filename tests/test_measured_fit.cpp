// Fit to the measurement (pipeline/measured_fit.h): the limit tightening by hand, and the
// search -> measure loop on a fake device whose measurements the cost model misjudges.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "pipeline/measured_fit.h"
#include "synthetic_measure.h"
#include "test_util.h"

using namespace ac;

TEST(MeasuredFit, TightenedLimitIsTheMeasuredOvershootPlusTheMargin) {
  Limits search;
  search.tpot_ms = 4.0;
  search.ttft_ms = 30.0;
  search.min_throughput_tokens_per_s = 100.0;
  search.peak_memory_bytes = 1000;
  // Measured: TPOT 8.1% over its limit, throughput 10% under its minimum, TTFT and memory hold.
  std::vector<LimitSlack> slack = {{"ttft_ms", 20, 10, 0.5},
                                   {"tpot_ms", 2.0, 2.162, -0.081},
                                   {"peak_memory_bytes", 500, 600, -0.2},
                                   {"min_throughput_tokens_per_s", 50, 45, -0.1}};
  Limits t = tighten_search_limits(search, slack, 0.02);
  EXPECT_DOUBLE_EQ(*t.ttft_ms, 30.0);                      // held: kept
  EXPECT_DOUBLE_EQ(*t.tpot_ms, 4.0 * 0.98 / 1.081);        // 3.62627...
  EXPECT_EQ(*t.peak_memory_bytes, int64_t(1000 * 0.98 / 1.2));  // 816
  EXPECT_DOUBLE_EQ(*t.min_throughput_tokens_per_s, 100.0 * 1.02 / 0.9);  // 113.33...
  // Margin 0: exactly the overshoot.
  EXPECT_DOUBLE_EQ(*tighten_search_limits(search, slack, 0).tpot_ms, 4.0 / 1.081);

  Limits relative = search;
  relative.tpot_fraction = 0.6;
  test::expect_error<ConfigError>([&] { tighten_search_limits(relative, slack, 0.02); }, {"fractions"});
  Limits no_tpot = search;
  no_tpot.tpot_ms.reset();
  test::expect_error<ConfigError>([&] { tighten_search_limits(no_tpot, slack, 0.02); },
                                  {"tpot_ms is broken"});
  test::expect_error<ConfigError>([&] { tighten_search_limits(search, slack, 0.5); }, {"margin"});
}

namespace {

// A fake device and search. Candidates are hidden sizes 8, 16, ..., 288; the cost model
// predicts TPOT = D / 10 ms, the device measures the teacher (D = 288) as predicted but every
// candidate `slowdown` x its prediction (the cost model misjudges pruned widths) plus
// `overhead_ms`. The search
// returns the largest D whose predicted TPOT meets its limit.
struct FakeDevice {
  double slowdown = 1.15;
  double overhead_ms = 0;  // added to every candidate's measured TPOT (no tightening removes it)
  int searches = 0;
  double infeasible_below_ms = 0;  // the search finds nothing under a tighter limit

  static ModelConfig config(int64_t d) {
    return ModelConfig::uniform(/*V=*/32, d, /*L=*/1, LayerConfig{1, 1, 8, 16});
  }
  static CostEstimate tpot(double ms) {
    CostEstimate e;
    e.tpot_ms = ms;
    return e;
  }
  FitCallbacks callbacks() {
    FitCallbacks cb;
    cb.search = [this](const Limits& l) {
      ++searches;
      if (*l.tpot_ms < infeasible_below_ms) throw InfeasibleError("[search] no architecture meets the limits");
      int64_t d = 8;
      while (d + 8 <= 288 && (d + 8) / 10.0 <= *l.tpot_ms) d += 8;
      return config(d);
    };
    cb.predict = [](const ModelConfig& c) { return tpot(c.hidden_size / 10.0); };
    cb.measure = [this](const ModelConfig& c) {
      // Three paired rounds without noise: every round measures the same.
      PairedRounds r;
      for (int i = 0; i < 3; ++i) {
        r.teacher.push_back(test::synthetic_request(100, 28.8));
        r.student.push_back(test::synthetic_request(50, slowdown * c.hidden_size / 10.0 + overhead_ms));
      }
      return r;
    };
    return cb;
  }
};


}  // namespace

TEST(MeasuredFit, AMeasuredMissIsSearchedAgainUnderTheTightenedLimit) {
  FakeDevice dev;
  const Limits scenario = test::relative_tpot(0.6);
  const Limits first = resolve_limits(scenario, FakeDevice::tpot(28.8));  // tpot_ms 17.28
  std::vector<FitAttempt> a = fit_to_measurement(scenario, first, dev.callbacks(), 3, 0.02);
  // Attempt 1: D = 168 (16.8 <= 17.28), measured 1.15 x 16.8 = 19.32 > 17.28: 11.806% over.
  // Attempt 2: limit 17.28 x 0.98 / (19.32 / 17.28) = 15.147 -> D = 144, measured 16.56: holds.
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(dev.searches, 2);
  EXPECT_EQ(a[0].config.hidden_size, 168);
  EXPECT_NEAR(*a[0].limits.tpot_ms, 17.28, 1e-12);
  EXPECT_NEAR(a[0].measured.tpot_ms, 19.32, 1e-12);
  EXPECT_NE(a[0].broken.find("tpot_ms"), std::string::npos) << a[0].broken;
  EXPECT_NEAR(*a[1].search_limits.tpot_ms, 17.28 * 0.98 * 17.28 / 19.32, 1e-9);
  EXPECT_EQ(a[1].config.hidden_size, 144);
  EXPECT_NEAR(a[1].predicted.tpot_ms, 14.4, 1e-12);
  EXPECT_EQ(a[1].broken, "");
  EXPECT_EQ(&fitted_attempt(a), &a[1]);
  const nlohmann::json j = a[1].to_json();
  EXPECT_EQ(j["broken"], "");
  EXPECT_NEAR(j["measured"]["tpot_ms"].get<double>(), 16.56, 1e-9);
}

TEST(MeasuredFit, AFitOnTheFirstAttemptSearchesOnce) {
  FakeDevice dev;
  dev.slowdown = 1.0;
  const Limits scenario = test::relative_tpot(0.6);
  std::vector<FitAttempt> a =
      fit_to_measurement(scenario, resolve_limits(scenario, FakeDevice::tpot(28.8)), dev.callbacks(), 3, 0.02);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(dev.searches, 1);
  EXPECT_EQ(a[0].config.hidden_size, 168);
  EXPECT_EQ(a[0].broken, "");
}

TEST(MeasuredFit, ANeverFittingDeviceStopsAfterMaxAttemptsWithTheLastOne) {
  FakeDevice dev;
  dev.slowdown = 1.0;
  dev.overhead_ms = 20;  // measured D / 10 + 20 > 17.28 for every D
  const Limits scenario = test::relative_tpot(0.6);
  std::vector<FitAttempt> a =
      fit_to_measurement(scenario, resolve_limits(scenario, FakeDevice::tpot(28.8)), dev.callbacks(), 2, 0.0);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(dev.searches, 2);
  EXPECT_NE(a[1].broken, "");
  EXPECT_LT(a[1].config.hidden_size, a[0].config.hidden_size);
  EXPECT_EQ(&fitted_attempt(a), &a[1]);
  test::expect_error<ConfigError>(
      [&] { fit_to_measurement(scenario, resolve_limits(scenario, FakeDevice::tpot(28.8)), dev.callbacks(), 0, 0.02); },
      {"max_attempts"});
}

TEST(MeasuredFit, NothingUnderTheTightenedLimitKeepsThePreviousAttempt) {
  FakeDevice dev;
  dev.infeasible_below_ms = 16.0;  // attempt 2's limit (15.15) finds nothing
  const Limits scenario = test::relative_tpot(0.6);
  const Limits first = resolve_limits(scenario, FakeDevice::tpot(28.8));
  std::vector<FitAttempt> a = fit_to_measurement(scenario, first, dev.callbacks(), 3, 0.02);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[1].search_error.find("no architecture"), std::string::npos);
  EXPECT_EQ(&fitted_attempt(a), &a[0]);
  EXPECT_TRUE(a[1].to_json().contains("search_error"));
  // Nothing at all under the scenario's own limits: the search's error, unchanged.
  dev.infeasible_below_ms = 100;
  EXPECT_THROW(fit_to_measurement(scenario, first, dev.callbacks(), 3, 0.02), InfeasibleError);
}

TEST(MeasuredFit, ALimitNotYetCertainCountsAsBrokenAndTightensByTheIntervalsUpperEnd) {
  // The candidate's per-round TPOT ratio to the teacher straddles the limit 0.6: rounds at
  // 0.56, 0.59, 0.63 (median 0.59, inside the limit by the median alone).
  int searches = 0;
  FitCallbacks cb;
  cb.search = [&](const Limits& l) {
    ++searches;
    return FakeDevice::config(*l.tpot_ms >= 17.0 ? 168 : 144);
  };
  cb.predict = [](const ModelConfig& c) { return FakeDevice::tpot(c.hidden_size / 10.0); };
  cb.measure = [](const ModelConfig& c) {
    PairedRounds r;
    const std::vector<double> ratio = c.hidden_size == 168 ? std::vector<double>{0.56, 0.59, 0.63}
                                                           : std::vector<double>{0.50, 0.51, 0.52};
    for (double u : ratio) {
      r.teacher.push_back(test::synthetic_request(100, 28.8));
      r.student.push_back(test::synthetic_request(50, u * 28.8));
    }
    return r;
  };
  const Limits scenario = test::relative_tpot(0.6);
  std::vector<FitAttempt> a =
      fit_to_measurement(scenario, resolve_limits(scenario, FakeDevice::tpot(28.8)), cb, 3, 0.0);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(searches, 2);
  ASSERT_EQ(a[0].verdict.limits.size(), 1u);
  const MeasuredLimit& l = a[0].verdict.limits[0];
  EXPECT_EQ(l.status, MeasuredLimit::Status::uncertain);
  EXPECT_LT(l.ratio, 1.0);  // the median alone would have passed it
  EXPECT_NE(a[0].broken.find("not yet certain"), std::string::npos) << a[0].broken;
  // Tightened by the interval's upper end, not by the (favourable) mean.
  EXPECT_NEAR(*a[1].search_limits.tpot_ms, 17.28 / l.ratio_high, 1e-9);
  EXPECT_EQ(a[1].config.hidden_size, 144);
  EXPECT_EQ(a[1].broken, "");
  EXPECT_EQ(a[1].to_json()["verdict"]["limits"][0]["status"], "holds");
}
