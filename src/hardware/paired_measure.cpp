#include "hardware/paired_measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <limits>
#include <optional>

#include "common/error.h"
#include "common/progress.h"
#include "common/units.h"

namespace ac {

using json = nlohmann::json;

void PairedRounds::append(const PairedRounds& more) {
  teacher.insert(teacher.end(), more.teacher.begin(), more.teacher.end());
  student.insert(student.end(), more.student.begin(), more.student.end());
}

Measurement PairedRounds::teacher_pooled() const { return merge_measurements(teacher); }
Measurement PairedRounds::student_pooled() const { return merge_measurements(student); }

namespace {

constexpr int kMinRoundsForInterval = 3;
constexpr int kBootstrapResamples = 2000;

// One limit of the scenario as written: which figure, maximum or minimum, relative or absolute.
enum class Figure { ttft, tpot, memory, throughput };
struct LimitSpec {
  const char* name;
  Figure figure;
  bool minimum;
  std::optional<double> fraction, absolute;
};

std::optional<double> as_double(const std::optional<int64_t>& v) {
  return v ? std::optional<double>(double(*v)) : std::nullopt;
}

std::vector<LimitSpec> limit_specs(const Limits& l) {
  std::vector<LimitSpec> out;
  auto add = [&](const char* name, Figure f, bool minimum, std::optional<double> fraction,
                 std::optional<double> absolute) {
    if (fraction || absolute) out.push_back({name, f, minimum, fraction, absolute});
  };
  add("ttft_ms", Figure::ttft, false, l.ttft_fraction, l.ttft_ms);
  add("tpot_ms", Figure::tpot, false, l.tpot_fraction, l.tpot_ms);
  add("peak_memory_bytes", Figure::memory, false, l.memory_fraction, as_double(l.peak_memory_bytes));
  add("min_throughput_tokens_per_s", Figure::throughput, true, l.throughput_fraction,
      l.min_throughput_tokens_per_s);
  return out;
}

const char* status_name(MeasuredLimit::Status s) {
  switch (s) {
    case MeasuredLimit::Status::holds: return "holds";
    case MeasuredLimit::Status::broken: return "broken";
    case MeasuredLimit::Status::uncertain: return "not yet certain";
  }
  return "?";
}

// The samples of one request (round) that `f` is computed from (Measurement's field comments).
std::vector<double> round_samples(Figure f, const Measurement& m) {
  switch (f) {
    case Figure::ttft: return m.samples.ttft_ms;
    case Figure::tpot: {
      std::vector<double> steps;
      for (const auto& run : m.samples.step_ms) steps.insert(steps.end(), run.begin(), run.end());
      return steps;
    }
    case Figure::memory: return {double(m.peak_memory_bytes)};
    case Figure::throughput: return m.samples.request_ms;
  }
  return {};
}

// Figure `f` of pooled samples, as measure_native's summary computes it: the p10 (nearest
// rank) of the latencies, output tokens over the p10 request, the peak memory. `v` is reordered.
double pooled_figure(Figure f, std::vector<double>& v, int64_t tokens_per_request) {
  if (v.empty()) return 0;
  if (f == Figure::memory) return *std::max_element(v.begin(), v.end());
  const size_t k = size_t(std::lround(kLatencyQuantile * double(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return f == Figure::throughput ? double(tokens_per_request) / (v[k] * 1e-3) : v[k];
}

MeasuredLimit judge_one(const LimitSpec& spec, const PairedRounds& rounds) {
  const int n = rounds.rounds();
  // The pooled figures (what the report prints) and each round's use of the limit.
  auto use = [&](const Measurement& t, const Measurement& st, double* limit, double* value) {
    std::vector<double> tv = round_samples(spec.figure, t), sv = round_samples(spec.figure, st);
    *value = pooled_figure(spec.figure, sv, st.tokens_per_request);
    *limit = spec.fraction ? *spec.fraction * pooled_figure(spec.figure, tv, t.tokens_per_request)
                           : *spec.absolute;
    if (!(*value > 0) || !(*limit > 0))
      throw ConfigError(msg("judge_paired", "{}: measured {} against a limit of {}: a ratio "
                                            "needs both above 0", spec.name, *value, *limit));
    return spec.minimum ? *limit / *value : *value / *limit;
  };
  MeasuredLimit out;
  out.name = spec.name;
  out.fraction = spec.fraction;
  out.rounds = n;
  use(rounds.teacher_pooled(), rounds.student_pooled(), &out.limit, &out.value);
  std::vector<double> u;  // [round]
  for (int r = 0; r < n; ++r) {
    double limit = 0, value = 0;
    u.push_back(use(rounds.teacher[size_t(r)], rounds.student[size_t(r)], &limit, &value));
  }
  auto median = [](std::vector<double> v) { return sample_median(std::move(v)); };
  out.ratio = median(u);
  if (n < kMinRoundsForInterval) {  // too few rounds to resample: an unbounded interval
    out.ratio_low = 0;
    out.ratio_high = std::numeric_limits<double>::infinity();
  } else {
    // Percentile bootstrap of the median over rounds (Efron & Tibshirani 1993, ch. 13); fixed
    // seed: the same rounds give the same interval.
    std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ uint64_t(n));
    std::uniform_int_distribution<int> any_round(0, n - 1);
    std::vector<double> medians, pick(static_cast<size_t>(n));
    medians.reserve(kBootstrapResamples);
    for (int b = 0; b < kBootstrapResamples; ++b) {
      for (double& x : pick) x = u[size_t(any_round(rng))];
      medians.push_back(median(pick));
    }
    std::sort(medians.begin(), medians.end());
    auto at = [&](double q) { return medians[size_t(std::lround(q * double(medians.size() - 1)))]; };
    out.ratio_low = std::min(at(0.025), out.ratio);
    out.ratio_high = std::max(at(0.975), out.ratio);
  }
  out.status = out.ratio_high <= 1   ? MeasuredLimit::Status::holds
               : out.ratio_low > 1 ? MeasuredLimit::Status::broken
                                   : MeasuredLimit::Status::uncertain;
  return out;
}

// The interval's half width relative to the ratio (infinite with one round).
double relative_half_width(const MeasuredLimit& l) {
  return 0.5 * (l.ratio_high - l.ratio_low) / l.ratio;
}

}  // namespace

LimitSlack MeasuredLimit::conservative_slack() const {
  const bool minimum = name == "min_throughput_tokens_per_s";
  const double slack = minimum ? 1 / ratio_high - 1 : 1 - ratio_high;
  return {name, limit, value, slack};
}

json MeasuredLimit::to_json() const {
  auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return {{"name", name},
          {"fraction_of_teacher", fraction ? json(*fraction) : json(nullptr)},
          {"limit", limit},
          {"value", value},
          {"ratio", ratio},
          {"ratio_ci95", {finite(ratio_low), finite(ratio_high)}},
          {"rounds", rounds},
          {"status", status_name(status)}};
}

bool PairedVerdict::holds() const {
  for (const MeasuredLimit& l : limits)
    if (l.status != MeasuredLimit::Status::holds) return false;
  return true;
}

std::string PairedVerdict::failures() const {
  std::string out;
  for (const MeasuredLimit& l : limits) {
    if (l.status == MeasuredLimit::Status::holds) continue;
    const bool minimum = l.name == "min_throughput_tokens_per_s";
    const std::string ci = std::isfinite(l.ratio_high)
                               ? fmt::format("95% CI {:.3f}-{:.3f}", l.ratio_low, l.ratio_high)
                               : std::string("no interval from one round");
    const std::string clause = fmt::format(
        "{}: expected {} {}, found {} ({}ratio {:.3f}, {} over {} rounds)", l.name,
        minimum ? ">=" : "<=", limit_value_text(l.name, l.limit), limit_value_text(l.name, l.value),
        l.status == MeasuredLimit::Status::uncertain ? "not yet certain: " : "", l.ratio, ci,
        l.rounds);
    out += (out.empty() ? "" : "; ") + clause;
  }
  return out;
}

std::vector<LimitSlack> PairedVerdict::conservative_slack() const {
  std::vector<LimitSlack> out;
  for (const MeasuredLimit& l : limits) out.push_back(l.conservative_slack());
  return out;
}

json PairedVerdict::to_json() const {
  json j = {{"rounds", rounds}, {"holds", holds()}, {"limits", json::array()}};
  for (const MeasuredLimit& l : limits) j["limits"].push_back(l.to_json());
  return j;
}

PairedVerdict judge_paired(const PairedRounds& rounds, const Limits& limits_as_written) {
  if (rounds.teacher.empty() || rounds.teacher.size() != rounds.student.size())
    throw ConfigError(msg("judge_paired", "expected the same number (>= 1) of teacher and "
                                          "student rounds, found {} and {}",
                          rounds.teacher.size(), rounds.student.size()));
  PairedVerdict v;
  v.rounds = rounds.rounds();
  for (const LimitSpec& spec : limit_specs(limits_as_written))
    v.limits.push_back(judge_one(spec, rounds));
  return v;
}

std::vector<PairedRounds> measure_paired_group(const GroupRoundFn& round, int students,
                                               const Limits& limits_as_written,
                                               const PairedOptions& opt,
                                               std::vector<PairedRounds> priors) {
  if (opt.min_rounds < 2 || opt.max_rounds < opt.min_rounds)
    throw ConfigError(msg("measure_paired", "rounds: expected 2 <= min_rounds <= max_rounds, "
                                            "found {} and {}", opt.min_rounds, opt.max_rounds));
  if (students < 1 || (!priors.empty() && int(priors.size()) != students))
    throw ConfigError(msg("measure_paired", "expected at least one student and one prior per "
                                            "student (or none), found {} and {}",
                          students, priors.size()));
  std::vector<PairedRounds> out = priors.empty() ? std::vector<PairedRounds>(size_t(students))
                                                 : std::move(priors);
  auto longest = [&] {
    int n = 0;
    for (const PairedRounds& r : out) n = std::max(n, r.rounds());
    return n;
  };
  std::optional<Progress> progress;
  if (opt.show_progress) progress.emplace("measure", opt.max_rounds, "rounds");
  auto settled = [&](const PairedRounds& r) {
    for (const MeasuredLimit& l : judge_paired(r, limits_as_written).limits)
      if (l.status == MeasuredLimit::Status::uncertain ||
          relative_half_width(l) > opt.max_half_width)
        return false;
    return true;
  };
  auto more_needed = [&](int added) {
    if (added < opt.min_rounds) return true;
    if (longest() >= opt.max_rounds) return false;
    for (const PairedRounds& r : out)
      if (!settled(r)) return true;
    return false;
  };
  for (int added = 0; more_needed(added); ++added) {
    std::vector<Measurement> m = round(longest() % (students + 1));
    if (int(m.size()) != students + 1)
      throw InternalError(fmt::format("[measure_paired] a round gave {} measurements, expected {}",
                                      m.size(), students + 1));
    for (int i = 0; i < students; ++i) {
      out[size_t(i)].teacher.push_back(m[0]);
      out[size_t(i)].student.push_back(std::move(m[size_t(i) + 1]));
    }
    if (progress) progress->update(std::min(longest(), opt.max_rounds));
  }
  if (progress) progress->finish();
  return out;
}

std::vector<PairedRounds> measure_paired_group(const LlamaModel& teacher,
                                               const std::vector<const LlamaModel*>& students,
                                               const Workload& workload,
                                               const Limits& limits_as_written,
                                               const PairedOptions& opt,
                                               std::vector<PairedRounds> priors) {
  std::vector<const LlamaModel*> models{&teacher};
  models.insert(models.end(), students.begin(), students.end());
  GroupRoundFn round = [&](int rotation) {
    std::vector<Measurement> m(models.size());
    for (size_t k = 0; k < models.size(); ++k) {
      const size_t i = (size_t(rotation) + k) % models.size();
      m[i] = measure_native(*models[i], workload, 1);
    }
    return m;
  };
  return measure_paired_group(round, int(students.size()), limits_as_written, opt,
                              std::move(priors));
}

PairedRounds measure_paired(const PairedRoundFn& round, const Limits& limits_as_written,
                            const PairedOptions& opt, PairedRounds prior) {
  GroupRoundFn group = [&](int rotation) {
    auto [t, s] = round(rotation == 1);  // rotation 1: the student first
    return std::vector<Measurement>{std::move(t), std::move(s)};
  };
  std::vector<PairedRounds> priors;
  priors.push_back(std::move(prior));
  return std::move(measure_paired_group(group, 1, limits_as_written, opt, std::move(priors)).front());
}

PairedRounds measure_paired(const LlamaModel& teacher, const LlamaModel& student,
                            const Workload& workload, const Limits& limits_as_written,
                            const PairedOptions& opt, PairedRounds prior) {
  PairedRoundFn round = [&](bool student_first) {
    Measurement s, t;
    if (student_first) s = measure_native(student, workload, 1);
    t = measure_native(teacher, workload, 1);
    if (!student_first) s = measure_native(student, workload, 1);
    return std::make_pair(std::move(t), std::move(s));
  };
  return measure_paired(round, limits_as_written, opt, std::move(prior));
}

}  // namespace ac
