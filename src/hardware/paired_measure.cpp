#include "hardware/paired_measure.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "common/error.h"
#include "common/progress.h"

namespace ac {

using json = nlohmann::json;

void PairedRounds::append(const PairedRounds& more) {
  teacher.insert(teacher.end(), more.teacher.begin(), more.teacher.end());
  student.insert(student.end(), more.student.begin(), more.student.end());
}

Measurement PairedRounds::teacher_pooled() const { return merge_measurements(teacher); }
Measurement PairedRounds::student_pooled() const { return merge_measurements(student); }

double student_t95(int df) {
  if (df < 1) throw ConfigError(msg("student_t95", "degrees of freedom: expected >= 1, found {}", df));
  // t(0.975, df), df = 1..30 (any statistics table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
  static constexpr double kTable[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                        2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                        2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                        2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  return df <= 30 ? kTable[df - 1] : 1.96 + 2.4 / df;
}

namespace {

// One limit of the scenario as written: which figure, maximum or minimum, relative or absolute.
struct LimitSpec {
  const char* name;
  double (*figure)(const Measurement&);
  bool minimum;
  std::optional<double> fraction, absolute;
};

double ttft(const Measurement& m) { return m.ttft_ms; }
double tpot(const Measurement& m) { return m.tpot_ms; }
double memory(const Measurement& m) { return double(m.peak_memory_bytes); }
double throughput(const Measurement& m) { return m.throughput_tokens_per_s; }

std::optional<double> as_double(const std::optional<int64_t>& v) {
  return v ? std::optional<double>(double(*v)) : std::nullopt;
}

std::vector<LimitSpec> limit_specs(const Limits& l) {
  std::vector<LimitSpec> out;
  auto add = [&](const char* name, double (*f)(const Measurement&), bool minimum,
                 std::optional<double> fraction, std::optional<double> absolute) {
    if (fraction || absolute) out.push_back({name, f, minimum, fraction, absolute});
  };
  add("ttft_ms", ttft, false, l.ttft_fraction, l.ttft_ms);
  add("tpot_ms", tpot, false, l.tpot_fraction, l.tpot_ms);
  add("peak_memory_bytes", memory, false, l.memory_fraction, as_double(l.peak_memory_bytes));
  add("min_throughput_tokens_per_s", throughput, true, l.throughput_fraction,
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

MeasuredLimit judge_one(const LimitSpec& spec, const PairedRounds& rounds,
                        const Measurement& teacher, const Measurement& student) {
  MeasuredLimit out;
  out.name = spec.name;
  out.fraction = spec.fraction;
  out.rounds = rounds.rounds();
  out.limit = spec.fraction ? *spec.fraction * spec.figure(teacher) : *spec.absolute;
  out.value = spec.figure(student);
  // log u_r for each round (see the file comment of paired_measure.h).
  std::vector<double> logs;
  for (int r = 0; r < rounds.rounds(); ++r) {
    const double s = spec.figure(rounds.student[size_t(r)]);
    const double lim = spec.fraction ? *spec.fraction * spec.figure(rounds.teacher[size_t(r)])
                                     : *spec.absolute;
    if (!(s > 0) || !(lim > 0))
      throw ConfigError(msg("judge_paired", "{}: round {} measured {} against a limit of {}: "
                                            "a ratio needs both above 0", spec.name, r + 1, s, lim));
    logs.push_back(spec.minimum ? std::log(lim / s) : std::log(s / lim));
  }
  double mean = 0;
  for (double v : logs) mean += v;
  mean /= double(logs.size());
  out.ratio = std::exp(mean);
  if (logs.size() < 2) {  // no spread to estimate: an unbounded interval
    out.ratio_low = 0;
    out.ratio_high = std::numeric_limits<double>::infinity();
  } else {
    double ss = 0;
    for (double v : logs) ss += (v - mean) * (v - mean);
    const double n = double(logs.size());
    const double half = student_t95(int(logs.size()) - 1) * std::sqrt(ss / (n - 1) / n);
    out.ratio_low = std::exp(mean - half);
    out.ratio_high = std::exp(mean + half);
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
        "{}: expected {} {:.6g}, found {:.6g} ({}ratio {:.3f}, {} over {} rounds)", l.name,
        minimum ? ">=" : "<=", l.limit, l.value,
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
  const Measurement teacher = rounds.teacher_pooled(), student = rounds.student_pooled();
  PairedVerdict v;
  v.rounds = rounds.rounds();
  for (const LimitSpec& spec : limit_specs(limits_as_written))
    v.limits.push_back(judge_one(spec, rounds, teacher, student));
  return v;
}

PairedRounds measure_paired(const PairedRoundFn& round, const Limits& limits_as_written,
                            const PairedOptions& opt, PairedRounds prior) {
  if (opt.min_rounds < 2 || opt.max_rounds < opt.min_rounds)
    throw ConfigError(msg("measure_paired", "rounds: expected 2 <= min_rounds <= max_rounds, "
                                            "found {} and {}", opt.min_rounds, opt.max_rounds));
  PairedRounds out = std::move(prior);
  std::optional<Progress> progress;
  if (opt.show_progress) progress.emplace("measure", opt.max_rounds, "rounds");
  auto more_needed = [&](int added) {
    if (added < opt.min_rounds) return true;
    if (out.rounds() >= opt.max_rounds) return false;
    for (const MeasuredLimit& l : judge_paired(out, limits_as_written).limits)
      if (l.status == MeasuredLimit::Status::uncertain ||
          relative_half_width(l) > opt.max_half_width)
        return true;
    return false;
  };
  for (int added = 0; more_needed(added); ++added) {
    auto [t, s] = round(out.rounds() % 2 == 1);
    out.teacher.push_back(std::move(t));
    out.student.push_back(std::move(s));
    if (progress) progress->update(std::min(out.rounds(), opt.max_rounds));
  }
  if (progress) progress->finish();
  return out;
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
