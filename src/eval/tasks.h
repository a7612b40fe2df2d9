// Benchmark tasks in the lm-evaluation-harness style, read from JSONL files (docs/eval.md).
//
// A task file is JSON Lines: line 1 is a header object that names the format, every other
// non-blank line is one item.
//   {"format": "multiple_choice", "name": "story_ending", "target_delimiter": " "}
//   {"context": "Tom had a red ball.", "choices": ["He liked it.", "The sky fell."], "gold": 0}
//   {"format": "loglikelihood", "name": "cloze"}
//   {"context": "Lily went to the", "target": "park"}
// Header keys: format (required: "multiple_choice" or "loglikelihood"), name (default: the
// file's stem), description, target_delimiter (default " "), meta (any JSON). Item keys:
// context (non-empty string), choices (>= 2 non-empty strings) and gold (index) for
// multiple_choice, target (non-empty string) for loglikelihood; optional id, and optional
// format, which must repeat the header's. Any other key is an error.
//
// Scoring (lm-evaluation-harness, lm_eval/api/task.py ConfigurableTask.process_results):
//   each choice c is the request (context, target_delimiter + c), tokenized as HFLM._encode_pair
//   (lm_eval/api/model.py) does: trailing white space of the context (Python's str.rstrip) moves
//   to the continuation, the context is encode(context) (with BOS), and the continuation is
//   encode(context + delimiter + c) after its first len(encode(context)) tokens.
//   multiple_choice: acc      = [argmax_c ll_c = gold]
//                    acc_norm = [argmax_c ll_c / chars(c) = gold]   (code points of the choice
//                               without the delimiter: lm-eval's len(c) of a Python str; its
//                               acc_bytes divides by UTF-8 bytes instead)
//   loglikelihood:   acc           = [greedy continuation = target, token for token]
//                    loglikelihood = mean ll of the target, nats
//                    perplexity    = exp(-mean ll)  (lm-eval's per-item perplexity of loglikelihood tasks)
//   stderr of a mean over n items = sample standard deviation / sqrt(n) (lm_eval.api.metrics
//   mean_stderr), which for an accuracy p is sqrt(p (1 - p) / (n - 1)).
// Ties in argmax go to the first choice (numpy.argmax).
#pragma once
#include <nlohmann/json.hpp>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/fs.h"
#include "eval/loglikelihood.h"

namespace ac {

class TextTokenizer;

enum class TaskFormat { kMultipleChoice, kLoglikelihood };

/// "multiple_choice" / "loglikelihood".
const char* task_format_name(TaskFormat f);

/// One item. For loglikelihood tasks `choices` holds the target alone and gold is 0.
struct TaskItem {
  std::string context;
  std::vector<std::string> choices;
  int64_t gold = 0;
  nlohmann::json id;  // optional, null when absent
  int64_t line = 0;   // 1-based line in the file it came from (0 = built in memory)
};

struct Task {
  std::string name;
  TaskFormat format = TaskFormat::kMultipleChoice;
  std::string description;
  std::string target_delimiter = " ";
  nlohmann::json meta;  // null when absent
  std::vector<TaskItem> items;
  std::string file;  // where it was read from ("" when built in memory)
};

/// Reads and validates a task file. Throws FormatError "[tasks] FILE:LINE: what is wrong"
/// (invalid JSON, a missing or unknown key, a wrong type, gold out of range, a format that
/// disagrees with the header, no items).
Task read_task_file(const fs::path& path);

/// Writes a task atomically in the format read_task_file reads (keys in a fixed order).
/// Throws ConfigError if a string is not valid UTF-8.
void write_task_file(const fs::path& path, const Task& task);

/// The task's requests, item by item and choice by choice (so request k of a
/// multiple-choice task with C choices per item is item k / C when every item has C choices).
/// Throws FormatError naming the file and line if a choice adds no token to its context.
std::vector<LoglikelihoodRequest> task_requests(const Task& task, const TextTokenizer& tokenizer);

/// A metric's mean over the items and its standard error (NaN when undefined, n < 2).
struct MetricValue {
  double value = 0;
  double std_error = 0;
};

/// One item's scores: what lm-eval's per-sample log (`--log_samples`: `resps`, `acc`,
/// `acc_norm`) holds for it, and the token ids each request was scored on. C = the number of
/// choices (1 for a loglikelihood task: its target).
struct TaskItemScore {
  std::vector<double> loglikelihoods;                     // [C] ll of delimiter + choice, nats
  std::vector<bool> is_greedy;                            // [C]
  std::vector<int64_t> context_tokens;                    // [Tc] ids, BOS first (evaluate_task)
  std::vector<std::vector<int64_t>> continuation_tokens;  // [C][Tn_c] ids (evaluate_task)
  double acc = 0;                                         // 0 or 1
  double acc_norm = std::nan("");                         // 0 or 1; multiple choice only
};

struct TaskResult {
  std::string name;
  TaskFormat format = TaskFormat::kMultipleChoice;
  std::string file;
  int64_t n = 0;                                           // items
  std::vector<std::pair<std::string, MetricValue>> metrics;  // in report order
  double baseline = 0;        // chance (mean 1/C) or the most frequent target's share
  std::string baseline_kind;  // "chance" / "most frequent target"
  int64_t requests = 0;
  int64_t continuation_tokens = 0;
  double wall_s = 0;
  std::vector<TaskItemScore> items;  // [n], in file order (not in to_json: task_sample_json)

  /// The metric named `name`; throws ConfigError if the task has none.
  const MetricValue& metric(const std::string& name) const;
  /// {"task", "format", "file", "n", "metrics": {name: {"value", "stderr"}}, "baseline":
  /// {"value", "kind"}, "requests", "continuation_tokens", "wall_s"}; NaN is written as null.
  nlohmann::json to_json() const;
};

/// Standard error of a mean of per-item values x [n]: sample standard deviation (n - 1) /
/// sqrt(n); NaN for n < 2.
double mean_stderr(const std::vector<double>& x);

/// Metrics of a task from the results of task_requests(task) (same order). Throws
/// ConfigError if the counts disagree.
TaskResult score_task(const Task& task, const std::vector<LoglikelihoodResult>& results);

/// task_requests + loglikelihoods + score_task; the items' scores carry their token ids.
TaskResult evaluate_task(const LlamaModel& model, const TextTokenizer& tokenizer, const Task& task,
                         const LoglikelihoodOptions& opt = {});

/// Item k of `task` with its scores from `result` (score_task or evaluate_task of that task), one
/// line of `eval --samples-out` (docs/eval.md): {"task", "doc_id": k (0-based, lm-eval's
/// doc_id), "line", "id", "gold" (multiple choice), "choices" ([target] for loglikelihood),
/// "context_tokens", "continuation_tokens", "loglikelihoods", "is_greedy", "acc", "acc_norm"
/// (multiple choice)}. Throws ConfigError if `result` has no scores for item k.
nlohmann::json task_sample_json(const Task& task, const TaskResult& result, size_t k);

/// Python's str.rstrip() on UTF-8: the byte length of `s` without its trailing white space as
/// str.isspace() defines it (Unicode White_Space and U+001C..U+001F). `s` must be valid UTF-8.
size_t python_rstrip_length(std::string_view s);

/// Python's len() of the str that UTF-8 `s` decodes to: its code points.
int64_t code_points(std::string_view s);

}  // namespace ac
