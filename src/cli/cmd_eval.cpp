// `autocompress eval`: perplexity and bits per byte of one or more checkpoints, their KL /
// top-1 / top-k agreement to a teacher, and benchmark tasks (JSONL, eval/tasks.h), side by side.
// Nemotron-H checkpoints (config.json's model_type nemotron_h / nemotron_h_puzzle) and Qwen3-MoE /
// Mixtral ones are scored on the held-out data by the same evaluation (eval/eval.h,
// model/trainable.h); the task scorer and the sliding window run the Llama family's forward only
// and are refused for them by flag.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/checkpoint_kind.h"
#include "cli/command.h"
#include "cli/data_options.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "eval/eval.h"
#include "eval/tasks.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/text_tokenizer.h"
#include "pipeline/steps.h"

namespace ac::cli {
namespace {

struct EvalArgs {
  std::vector<std::string> models, tasks;
  std::string teacher, json_out, samples_out;
  DataArgs data;
  bool print_json = false;
  int64_t batch_size = 8, seq_len = 256, max_batches = -1, stride = 0, top_k = 5;
  int64_t max_batch_tokens = 4096;
  DeviceArgs compute;
};

// One model's results: the stream metrics (when --data) and the tasks.
struct ModelResult {
  std::string model;
  std::optional<EvalResult> stream;
  json data_source;  // what --data read for this model
  std::vector<TaskResult> tasks;
};

std::unique_ptr<TextTokenizer> find_tokenizer(const std::string& dir, int64_t vocab_size) {
  if (!fs::exists(fs::path(dir) / "tokenizer.json") && !fs::exists(fs::path(dir) / "tokenizer.bin"))
    return nullptr;
  return load_tokenizer(dir, vocab_size);
}

template <class M>
EvalResult eval_stream(const EvalArgs& a, const std::string& dir, const M& m, const M* teacher,
                       const TextTokenizer* tok, json* source) {
  EvalOptions opt;
  opt.batch_size = a.batch_size;
  opt.seq_len = a.seq_len;
  opt.max_batches = a.max_batches;
  opt.top_k = a.top_k;
  opt.device = a.compute.resolve();
  std::optional<TokenBytes> bytes;
  if (tok) bytes = TokenBytes::from_tokenizer(*tok);
  opt.token_bytes = bytes ? &*bytes : nullptr;
  TokenDataset data = load_dataset(a.data.spec(DataSplit::kHeldout), dir, m.config.vocab_size,
                                   int32_t(m.config.bos_token_id), "eval", source);
  return eval_step(m, teacher, data, opt, a.stride);
}

ModelResult eval_model(const EvalArgs& a, const std::string& dir, const LlamaModel* teacher,
                       const std::vector<Task>& tasks) {
  ModelResult r{dir, std::nullopt, nullptr, {}};
  LlamaModel m = load_checkpoint(dir);
  const std::unique_ptr<TextTokenizer> tok = find_tokenizer(dir, m.config.vocab_size);
  if (!a.data.path.empty()) {
    check_seq_len_fits(a.seq_len, m.config, dir, "eval",
                       "; a longer text is scored in windows of --seq-len with --stride");
    r.stream = eval_stream(a, dir, m, teacher, tok.get(), &r.data_source);
  }
  if (!tasks.empty() && !tok)
    throw ConfigError(msg("eval", "{}: --tasks needs the model's tokenizer (tokenizer.json or "
                          "tokenizer.bin)", dir));
  LoglikelihoodOptions lo;
  lo.max_batch_tokens = a.max_batch_tokens;
  const LlamaModel on_device{m.config, to_device(m.config, m.weights, a.compute.resolve())};
  for (const Task& t : tasks) {
    r.tasks.push_back(evaluate_task(on_device, *tok, t, lo));
    log_info(fmt::format("[eval] {}: task {} done in {:.1f} s", dir, t.name, r.tasks.back().wall_s));
  }
  return r;
}

std::string cell(double v, int digits) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "—"; }

// Rows = metrics, columns = models.
void print_table(const std::vector<ModelResult>& rs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto add = [&](const std::string& name, auto&& get) {
    std::vector<std::string> cells;
    for (const ModelResult& r : rs) cells.push_back(get(r));
    rows.emplace_back(name, std::move(cells));
  };
  const ModelResult& first = rs.front();
  if (first.stream) {
    auto stream = [&](const char* name, auto&& f, bool teacher_only = false, bool bytes_only = false) {
      if ((teacher_only && !first.stream->has_teacher) || (bytes_only && !first.stream->has_bytes)) return;
      add(name, [&](const ModelResult& r) { return f(*r.stream); });
    };
    stream("perplexity", [](const EvalResult& e) { return cell(e.perplexity, 4); });
    stream("bits_per_byte", [](const EvalResult& e) { return cell(e.bits_per_byte, 4); }, false, true);
    stream("mean_nll (nats/token)", [](const EvalResult& e) { return cell(e.mean_nll, 5); });
    stream("kl_to_teacher (nats/token)", [](const EvalResult& e) { return cell(e.kl_to_teacher, 5); }, true);
    stream("top1_agreement", [](const EvalResult& e) { return cell(e.top1_agreement, 4); }, true);
    stream(fmt::format("top{}_overlap", first.stream->top_k).c_str(),
           [](const EvalResult& e) { return cell(e.topk_overlap, 4); }, true);
    stream("tokens", [](const EvalResult& e) { return std::to_string(e.tokens); });
  }
  for (size_t t = 0; t < first.tasks.size(); ++t) {
    for (const auto& [name, _] : first.tasks[t].metrics)
      add(fmt::format("{} {}", first.tasks[t].name, name), [&, t, name = name](const ModelResult& r) {
        const MetricValue& v = r.tasks[t].metric(name);
        return std::isfinite(v.std_error) ? fmt::format("{} ± {}", cell(v.value, 4), cell(v.std_error, 4))
                                          : cell(v.value, 4);
      });
  }
  size_t w0 = 6;
  std::vector<size_t> w(rs.size());
  for (size_t c = 0; c < rs.size(); ++c) w[c] = rs[c].model.size();
  for (const auto& [name, cells] : rows) {
    w0 = std::max(w0, name.size());
    for (size_t c = 0; c < cells.size(); ++c) w[c] = std::max(w[c], cells[c].size());
  }
  std::string line = fmt::format("{:<{}}", "metric", w0);
  for (size_t c = 0; c < rs.size(); ++c) line += fmt::format("  {:>{}}", rs[c].model, w[c]);
  std::printf("%s\n", line.c_str());
  for (const auto& [name, cells] : rows) {
    line = fmt::format("{:<{}}", name, w0);
    for (size_t c = 0; c < cells.size(); ++c) line += fmt::format("  {:>{}}", cells[c], w[c]);
    std::printf("%s\n", line.c_str());
  }
  for (const TaskResult& t : first.tasks)
    std::printf("%s: n = %lld, baseline (%s) %.4f\n", t.name.c_str(), (long long)t.n,
                t.baseline_kind.c_str(), t.baseline);
}

// One JSON line per model and item (eval/tasks.h task_sample_json, plus "model"), written
// atomically: what a judge such as lm-eval's --log_samples output is compared with, item by item.
void write_samples(const std::string& path, const std::vector<Task>& tasks,
                   const std::vector<ModelResult>& results) {
  std::string out;
  for (const ModelResult& r : results)
    for (size_t t = 0; t < tasks.size(); ++t)
      for (size_t k = 0; k < tasks[t].items.size(); ++k) {
        nlohmann::json j = {{"model", r.model}};
        j.update(task_sample_json(tasks[t], r.tasks[t], k));
        out += j.dump() + "\n";
      }
  write_file_atomic(path, out);
}

// The table (or --json), --samples-out and --out of the results, one entry per --model.
void write_results(const EvalArgs& a, const std::vector<Task>& tasks,
                   const std::vector<ModelResult>& results) {
  if (!a.print_json) print_table(results);
  if (!a.samples_out.empty()) write_samples(a.samples_out, tasks, results);
  if (a.json_out.empty() && !a.print_json) return;
  nlohmann::json j = {{"teacher", a.teacher.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.teacher)},
                      {"data", a.data.path.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.data.path)},
                      {"seq_len", a.seq_len},
                      {"stride", a.stride},
                      {"models", nlohmann::json::array()}};
  for (const ModelResult& r : results) {
    nlohmann::json m = {{"model", r.model}, {"tasks", nlohmann::json::array()}};
    if (r.stream) m["eval"] = r.stream->to_json();
    if (r.stream) m["data_source"] = r.data_source;
    for (const TaskResult& t : r.tasks) m["tasks"].push_back(t.to_json());
    j["models"].push_back(m);
  }
  if (a.print_json) std::printf("%s\n", j.dump(2).c_str());
  if (!a.json_out.empty()) write_json_file(a.json_out, j);
}

// Whether the teacher or any --model is of `kind`.
template <class M>
bool any_of_kind(const EvalArgs& a, const CheckpointKind<M>& kind) {
  if (!a.teacher.empty() && kind.is_kind(a.teacher)) return true;
  for (const std::string& dir : a.models)
    if (kind.is_kind(dir)) return true;
  return false;
}

// Checkpoints of another kind: held-out metrics from the same evaluation; the flags of what runs
// the Llama family's forward alone refused by name, and every model of one kind with its teacher.
template <class M>
void run_kind(const EvalArgs& a, const CheckpointKind<M>& kind) {
  std::vector<std::string> why;
  if (!a.tasks.empty())
    why.push_back("--tasks: the task scorer (eval/tasks.h, eval/loglikelihood.h) runs the Llama "
                  "family's forward and KV cache only");
  if (a.stride > 0)
    why.push_back(fmt::format("--stride {}: the sliding-window evaluation runs the Llama "
                              "family's forward only; leave it out for packed windows", a.stride));
  for (const std::string& dir : a.models)
    if (!kind.is_kind(dir))
      why.push_back(fmt::format("--model {} is not a {} checkpoint: evaluate each kind in its "
                                "own command", dir, kind.name));
  if (!a.teacher.empty() && !kind.is_kind(a.teacher))
    why.push_back(fmt::format("--teacher {} is not a {} checkpoint: the KL compares models of "
                              "one kind", a.teacher, kind.name));
  if (!why.empty())
    throw ConfigError(msg("eval", "{} checkpoints:\n  - {}", kind.name,
                          fmt::join(why, "\n  - ")));
  std::optional<M> teacher;
  if (!a.teacher.empty()) {
    teacher = kind.load(a.teacher);
    check_seq_len_fits(a.seq_len, teacher->config, a.teacher, "eval");
  }
  std::vector<ModelResult> results;
  for (const std::string& dir : a.models) {
    ModelResult r{dir, std::nullopt, nullptr, {}};
    const M m = kind.load(dir);
    check_seq_len_fits(a.seq_len, m.config, dir, "eval");
    const std::unique_ptr<TextTokenizer> tok = find_tokenizer(dir, m.config.vocab_size);
    r.stream = eval_stream(a, dir, m, teacher ? &*teacher : nullptr, tok.get(), &r.data_source);
    results.push_back(std::move(r));
  }
  write_results(a, {}, results);
}

void run(const EvalArgs& a) {
  if (a.data.path.empty() && a.tasks.empty())
    throw ConfigError("[eval] nothing to evaluate: give --data or --tasks");
  std::vector<fs::path> inputs{a.teacher, a.data.path};
  inputs.insert(inputs.end(), a.models.begin(), a.models.end());
  inputs.insert(inputs.end(), a.tasks.begin(), a.tasks.end());
  check_not_overwriting_inputs(inputs, a.json_out, "eval");
  check_not_overwriting_inputs(inputs, a.samples_out, "eval");
  check_output_flag("eval", "--out", a.json_out);
  check_output_flag("eval", "--samples-out", a.samples_out);
  if (!a.samples_out.empty() && a.tasks.empty())
    throw ConfigError("[eval] --samples-out writes the tasks' items: give --tasks too");
  a.compute.resolve();  // a bad --device is refused before any model loads
  if (any_of_kind(a, kNemotronH)) return run_kind(a, kNemotronH);
  if (any_of_kind(a, kMoe)) return run_kind(a, kMoe);
  std::vector<Task> tasks;
  for (const std::string& t : a.tasks) tasks.push_back(read_task_file(t));
  std::optional<LlamaModel> teacher;
  if (!a.teacher.empty()) teacher = load_checkpoint(a.teacher);
  if (teacher && !a.data.path.empty())
    check_seq_len_fits(a.seq_len, teacher->config, a.teacher, "eval",
                       "; a longer text is scored in windows of --seq-len with --stride");
  std::vector<ModelResult> results;
  for (const std::string& dir : a.models)
    results.push_back(eval_model(a, dir, teacher ? &*teacher : nullptr, tasks));
  write_results(a, tasks, results);
}

RegisterCommand reg(80, [](CLI::App& app) {
  auto* s = app.add_subcommand("eval", "Perplexity, bits per byte, agreement with a teacher and "
                                       "benchmark tasks, for one or more models side by side");
  auto a = std::make_shared<EvalArgs>();
  s->add_option("--model", a->models, "Checkpoint folder (repeat to compare models; Nemotron-H, "
                                      "Qwen3-MoE and Mixtral checkpoints on --data only, with a "
                                      "teacher of their kind)")
      ->required();
  s->add_option("--teacher", a->teacher, "Teacher checkpoint (adds KL, top-1 agreement and "
                                         "top-k overlap)");
  add_data_options(s, a->data, "Evaluation data",
                   DataSplit::kHeldout);
  s->add_option("--tasks", a->tasks, "Task file (JSONL, docs/eval.md); repeat for more");
  s->add_option("--out", a->json_out, "Write the results as JSON to this file");
  s->add_option("--samples-out", a->samples_out, "Write each task item's scores and token ids "
                                                 "as JSON Lines to this file (docs/eval.md)");
  s->add_flag("--json", a->print_json, "Print the results as JSON instead of the table");
  s->add_option("--batch-size", a->batch_size, "Sequences per batch")->capture_default_str();
  s->add_option("--seq-len", a->seq_len, "Tokens per window (the context with --stride)")
      ->check(positive_tokens())
      ->capture_default_str();
  s->add_option("--max-batches", a->max_batches, "Batches to score (-1 = all)")
      ->capture_default_str();
  s->add_option("--stride", a->stride, "Sliding-window evaluation with this stride (< seq-len); "
                                       "0 = packed windows")->capture_default_str();
  s->add_option("--top-k", a->top_k, "k of the top-k overlap with the teacher")
      ->capture_default_str();
  s->add_option("--max-batch-tokens", a->max_batch_tokens, "Tasks: padded tokens per forward "
                                                           "pass")->capture_default_str();
  add_device_options(s, a->compute, /*with_precision=*/false);
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
