// `autocompress sample`: teacher-sampled token data (calibration, training, held-out sets).
// In-domain text is sampled from the teacher with fixed seeds; held-out sets use other seeds,
// and --exclude drops any held-out document that also occurs in a training file.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/data_source.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "eval/make_tasks.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"

namespace ac::cli {
namespace {

struct SampleArgs {
  std::string model, out, text_out, exclude;
  int64_t count = 0, seq_len = 256, batch_size = 32;
  uint64_t seed = 0;
  double temperature = 1.0, top_p = 0.9;
  DeviceArgs compute;
};

/// Writes the decoded documents to --text-out: JSON Lines, one {"text": ...} per document, for a
/// .jsonl / .json name (what the data readers take as separate documents, data/text_corpus.h);
/// plain text otherwise, documents separated by a blank line (which a reader takes as ONE
/// document: fine to read, not to feed back as several).
void write_text(const SampleArgs& a, const TextTokenizer& tok, const std::vector<int32_t>& ids) {
  const std::string ext = fs::path(a.text_out).extension().string();
  const bool jsonl = ext == ".jsonl" || ext == ".json";
  std::string text;
  for (const std::string& doc : decode_documents(ids, tok)) {
    if (!jsonl) {
      text += doc + "\n\n";
      continue;
    }
    // A sampled story may end inside a multi-byte character: replaced, not refused.
    text += nlohmann::json{{"text", doc}}.dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace);
    text += "\n";
  }
  write_file_atomic(a.text_out, text);
}

void run(const SampleArgs& a) {
  check_not_overwriting_inputs({a.model, a.exclude}, a.out, "sample");
  check_not_overwriting_inputs({a.model, a.exclude, a.out}, a.text_out, "sample");
  check_output_flag("sample", "--out", a.out);
  check_output_flag("sample", "--text-out", a.text_out);
  const c10::Device device = a.compute.resolve();
  LlamaModel m = load_checkpoint(a.model);
  m.weights = to_device(m.config, m.weights, device);
  std::unique_ptr<TextTokenizer> tok;  // loaded before sampling: a missing one fails first
  if (!a.text_out.empty()) tok = load_tokenizer(a.model, m.config.vocab_size);
  const int32_t bos = int32_t(m.config.bos_token_id);
  std::vector<int32_t> ids =
      sample_corpus(m, a.count, a.seq_len, a.temperature, a.top_p, a.seed, a.batch_size);
  if (!a.exclude.empty()) {
    TokenDataset train = TokenDataset::load(a.exclude, bos);
    int64_t removed = 0;
    ids = remove_overlap(ids, train.ids(), bos, &removed);
    log_info(fmt::format("[sample] dropped {} documents that also occur in {}", removed,
                         a.exclude));
  }
  // The tokenizer recorded in the file, so that a model of another tokenizer refuses it.
  write_token_file(a.out, ids, m.config.vocab_size,
                   model_tokenizer_fingerprint(a.model, m.config.vocab_size));
  if (tok) write_text(a, *tok, ids);
  log_info(fmt::format("[sample] {} documents, {} tokens -> {}",
                       split_documents(ids, bos).size(), ids.size(), a.out));
}

RegisterCommand reg(20, [](CLI::App& app) {
  auto* s = app.add_subcommand("sample", "Sample in-domain token data from a (teacher) model");
  auto a = std::make_shared<SampleArgs>();
  s->add_option("--model", a->model, "Checkpoint folder")->required();
  s->add_option("--count", a->count, "Number of sequences to sample")->required();
  s->add_option("--seq-len", a->seq_len, "New tokens per sequence (cut at EOS)")
      ->check(positive_tokens())
      ->capture_default_str();
  s->add_option("--seed", a->seed, "Sampling seed (held-out sets: use another seed)")
      ->required();
  s->add_option("--temperature", a->temperature, "Softmax temperature")->capture_default_str();
  s->add_option("--top-p", a->top_p, "Nucleus sampling threshold")->capture_default_str();
  s->add_option("--batch-size", a->batch_size, "Sequences sampled together (the output "
                                               "depends on it)")->capture_default_str();
  s->add_option("--out", a->out, "Output token file (data/token_file.h)")->required();
  s->add_option("--text-out", a->text_out, "Also write the decoded text here: NAME.jsonl gives "
                                           "one {\"text\": ...} line per story (readable as "
                                           "--data, one document each), any other name plain "
                                           "text (read back as one document)");
  s->add_option("--exclude", a->exclude, "Token file whose documents must not appear in the "
                                         "output (held-out vs training)");
  add_device_options(s, a->compute, /*with_precision=*/false);
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
