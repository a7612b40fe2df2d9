// `autocompress eval`: perplexity of a checkpoint, and its KL / top-1 agreement to a teacher.
#include <fmt/format.h>

#include <cstdio>

#include "cli/command.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "eval/eval.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"

namespace ac::cli {
namespace {

struct EvalArgs {
  std::string model, teacher, data, text, json_out;
  int64_t batch_size = 8, seq_len = 256, max_batches = -1, stride = 0;
};

std::vector<int32_t> text_ids(const EvalArgs& a, const LlamaModel& m) {
  Tokenizer tok = Tokenizer::from_checkpoint(a.model, m.config.vocab_size);
  return tokenize_text_file(a.text, tok);
}

EvalResult run_eval(const EvalArgs& a, const LlamaModel& m, const LlamaModel* teacher) {
  if (a.data.empty() == a.text.empty())
    throw ConfigError("[eval] give exactly one of --data and --text");
  EvalOptions opt;
  opt.batch_size = a.batch_size;
  opt.seq_len = a.seq_len;
  opt.max_batches = a.max_batches;
  const int32_t bos = int32_t(m.config.bos_token_id);
  TokenDataset data = a.data.empty() ? TokenDataset(text_ids(a, m), m.config.vocab_size, bos)
                                     : TokenDataset::load(a.data, bos);
  if (a.stride > 0) {
    if (teacher) throw ConfigError("[eval] --stride (sliding window) does not take --teacher");
    data.check_vocab(m.config.vocab_size, "eval", a.model);
    return sliding_window_perplexity(m, data.ids(), a.seq_len, a.stride);
  }
  return evaluate(m, teacher, data, opt);
}

void run(const EvalArgs& a) {
  LlamaModel m = load_checkpoint(a.model);
  std::optional<LlamaModel> teacher;
  if (!a.teacher.empty()) teacher = load_checkpoint(a.teacher);
  EvalResult r = run_eval(a, m, teacher ? &*teacher : nullptr);
  std::printf("perplexity      %.4f\n", r.perplexity);
  std::printf("mean_nll        %.5f nats/token\n", r.mean_nll);
  if (r.has_teacher) {
    std::printf("kl_to_teacher   %.5f nats/token\n", r.kl_to_teacher);
    std::printf("top1_agreement  %.4f\n", r.top1_agreement);
  }
  std::printf("tokens          %lld in %lld sequences (%.1f s)\n", (long long)r.tokens,
              (long long)r.sequences, r.wall_s);
  if (!a.json_out.empty()) {
    nlohmann::json j = r.to_json();
    j["model"] = a.model;
    if (teacher) j["teacher"] = a.teacher;
    j["data"] = a.data.empty() ? a.text : a.data;
    j["seq_len"] = a.seq_len;
    if (a.stride > 0) j["stride"] = a.stride;
    write_json_file(a.json_out, j);
  }
}

RegisterCommand reg(80, [](CLI::App& app) {
  auto* s = app.add_subcommand("eval", "Perplexity, and KL / top-1 agreement to a teacher");
  auto a = std::make_shared<EvalArgs>();
  s->add_option("--model", a->model, "Checkpoint folder")->required();
  s->add_option("--teacher", a->teacher, "Teacher checkpoint (adds KL and top-1 agreement)");
  s->add_option("--data", a->data, "Token file (data/token_file.h)");
  s->add_option("--text", a->text, "UTF-8 text file, tokenized with the model's tokenizer.bin");
  s->add_option("--json", a->json_out, "Write the results as JSON here");
  s->add_option("--batch-size", a->batch_size, "Sequences per batch")->capture_default_str();
  s->add_option("--seq-len", a->seq_len, "Tokens per window (the context with --stride)")
      ->capture_default_str();
  s->add_option("--max-batches", a->max_batches, "Batches to score (-1 = all)")
      ->capture_default_str();
  s->add_option("--stride", a->stride, "Sliding-window perplexity with this stride (< seq-len); "
                                       "0 = packed windows")->capture_default_str();
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
