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
//   does: the whole text "context + delimiter + c" is encoded (with BOS), and the tokens after
//   the first len(encode(context)) are the continuation.
//   multiple_choice: acc      = [argmax_c ll_c = gold]
//                    acc_norm = [argmax_c ll_c / bytes(c) = gold]   (UTF-8 bytes of the choice,
//                               without the delimiter; lm-eval divides by len(c), the same for
//                               ASCII text)
//   loglikelihood:   acc           = [greedy continuation = target, token for token]
//                    loglikelihood = mean ll of the target, nats
//                    perplexity    = exp(-mean ll)  (lm-eval's per-item perplexity of loglikelihood tasks)
//   stderr of a mean over n items = sample standard deviation / sqrt(n) (lm_eval.api.metrics
//   mean_stderr), which for an accuracy p is sqrt(p (1 - p) / (n - 1)).
// Ties in argmax go to the first choice (numpy.argmax).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
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

/// task_requests + loglikelihoods + score_task.
TaskResult evaluate_task(const LlamaModel& model, const TextTokenizer& tokenizer, const Task& task,
                         const LoglikelihoodOptions& opt = {});

}  // namespace ac
