// A measured verdict that noise cannot flip. A limit is checked on a teacher and a student
// measured in the same interleaved rounds (a round: one request of each, the order alternating
// between rounds); every round gives one use of the limit, u_r <= 1 within it:
//
//   u_r = student_r / limit                          a maximum (TTFT, TPOT, memory)
//   u_r = limit / student_r                          the throughput minimum
//   limit = fraction x teacher_r                     a relative limit ("0.6 x the teacher's TPOT")
//   student_r, teacher_r: the round's figures as measure_native summarizes a run (p10 latency)
//
//   ratio:    the median of u_r over the rounds
//   interval: percentile bootstrap of that median (2000 resamples of the rounds; 2.5th and
//             97.5th percentiles: 95%)
//   verdict:  holds when the interval's upper end <= 1, broken when its lower end > 1, else
//             "not yet certain"; the fit loop and the final check treat "not yet certain" as
//             broken.
//
// Why per-round ratios: a machine's speed drifts between minutes, and both sides of a round see
// the same drift, which cancels in their ratio. Why the median rather than a mean: a teacher run
// is longer than its student's, so interference that lasts seconds hits it more often, and a
// round whose teacher alone was slowed gives a ratio that favours the student (seen: the mean
// of per-round ratios 0.71 where the pooled figures gave 0.91); the median ignores such rounds
// while they are a minority.
//
// Why paired: a shared machine's speed moves by 10-30% between minutes. A teacher measured at
// one minute and its student at another carry different slowdowns, and the ratio a relative
// limit checks moves with them (a verdict once flipped on the teacher's measurement alone: 8.24
// ms in one minute, 6.62 ms in another). In one round both see the same machine, and the
// slowdown cancels in their ratio; what is left is the spread of the ratio, which the interval
// states. Rounds are added until every limit is certain and the interval is narrow, or a cap.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/scenario.h"

namespace ac {

/// Teacher and student measured in the same rounds: teacher[r] and student[r] come from round
/// r (one timed request each, measure_native with repeats = 1, or a synthetic source in tests).
struct PairedRounds {
  std::vector<Measurement> teacher, student;  // [round]

  int rounds() const { return int(teacher.size()); }
  /// Every round of `more` after these (e.g. the rounds before distillation, then after).
  void append(const PairedRounds& more);
  /// The teacher's / student's samples of every round pooled (merge_measurements). Throws
  /// ConfigError when there are no rounds.
  Measurement teacher_pooled() const;
  Measurement student_pooled() const;
};

/// One limit judged on paired rounds.
struct MeasuredLimit {
  enum class Status { holds, broken, uncertain };

  std::string name;                 // "ttft_ms", "tpot_ms", "peak_memory_bytes",
                                    // "min_throughput_tokens_per_s"
  std::optional<double> fraction;   // a relative limit: the fraction of the teacher as written
  double limit = 0;   // absolute limit: as written, or fraction x the teacher's pooled figure
  double value = 0;   // the student's pooled figure (ms, bytes or tokens/s)
  double ratio = 0;   // the median over rounds of u_r (<= 1: within the limit)
  double ratio_low = 0, ratio_high = 0;  // its 95% bootstrap interval
  int rounds = 0;
  Status status = Status::uncertain;

  /// The slack the fit loop tightens by, from the interval's unfavourable end: 1 - ratio_high
  /// for a maximum, 1 / ratio_high - 1 for the minimum (LimitSlack's sign: >= 0 holds).
  LimitSlack conservative_slack() const;
  nlohmann::json to_json() const;
};

/// The verdict on every limit of a scenario.
struct PairedVerdict {
  std::vector<MeasuredLimit> limits;
  int rounds = 0;

  /// Every limit holds with 95% confidence.
  bool holds() const;
  /// "" when every limit holds, else one clause per limit that does not, e.g.
  /// "tpot_ms: expected <= 3.97, found 4.29 (ratio 1.079, 95% CI 1.064-1.094 over 8 rounds)"
  /// or "... not yet certain: ratio 0.996, 95% CI 0.981-1.011 over 20 rounds"; joined by "; ".
  std::string failures() const;
  /// conservative_slack() of every limit, for tighten_search_limits.
  std::vector<LimitSlack> conservative_slack() const;
  nlohmann::json to_json() const;
};

/// Judges every limit in `limits_as_written` (absolute or relative to the teacher) on `rounds`
/// (see the file comment). With fewer than 3 rounds the interval is unbounded and every limit
/// is "not yet certain". Throws ConfigError when `rounds` is empty or its two sides have different
/// lengths, and as merge_measurements.
PairedVerdict judge_paired(const PairedRounds& rounds, const Limits& limits_as_written);

/// How many rounds to measure.
struct PairedOptions {
  int min_rounds = 5;    // rounds always measured (beside those already in `prior`)
  int max_rounds = 20;   // the cap, counting `prior`'s rounds
  double max_half_width = 0.02;  // keep adding rounds while a limit's interval is wider than
                                 // +-2% of its ratio (as well as while it is uncertain)
  bool show_progress = true;     // a progress line over the rounds (common/progress.h)
};

/// One interleaved round: {teacher, student}, each one timed request. `student_first`
/// alternates between rounds so that a drift within a round falls on both sides alike.
using PairedRoundFn = std::function<std::pair<Measurement, Measurement>(bool student_first)>;

/// Measures `round` at least opt.min_rounds times after `prior`, then more while a limit is
/// "not yet certain" or its interval is wider than opt.max_half_width, up to opt.max_rounds in
/// all; returns prior's rounds followed by the new ones. Throws ConfigError when min_rounds < 2
/// or max_rounds < min_rounds.
PairedRounds measure_paired(const PairedRoundFn& round, const Limits& limits_as_written,
                            const PairedOptions& opt, PairedRounds prior = {});

/// One interleaved round of the teacher and every student: returns {teacher, student 0,
/// student 1, ...}, one timed request each, in the order that starts at position `rotation`
/// of that list (so that over rounds every model runs first, last and between alike).
using GroupRoundFn = std::function<std::vector<Measurement>(int rotation)>;

/// The teacher and `students` models measured in the same rounds: one PairedRounds per student,
/// each holding the round's one teacher measurement beside that student's. Rounds continue as
/// measure_paired's (at least opt.min_rounds new ones; more while a limit of any student is
/// uncertain or wide, up to opt.max_rounds counting the largest prior). `priors`: rounds of each
/// student measured before (empty, or one per student). Throws ConfigError on bad rounds
/// options, students < 1 or priors of the wrong count.
std::vector<PairedRounds> measure_paired_group(const GroupRoundFn& round, int students,
                                               const Limits& limits_as_written,
                                               const PairedOptions& opt,
                                               std::vector<PairedRounds> priors = {});

/// measure_paired_group on the native engine, on the device of each model's weights.
std::vector<PairedRounds> measure_paired_group(const LlamaModel& teacher,
                                               const std::vector<const LlamaModel*>& students,
                                               const Workload& workload,
                                               const Limits& limits_as_written,
                                               const PairedOptions& opt,
                                               std::vector<PairedRounds> priors = {});

/// measure_paired on the native engine: each side of a round is measure_native(model,
/// workload, 1) on the device of the model's weights.
PairedRounds measure_paired(const LlamaModel& teacher, const LlamaModel& student,
                            const Workload& workload, const Limits& limits_as_written,
                            const PairedOptions& opt, PairedRounds prior = {});

}  // namespace ac
