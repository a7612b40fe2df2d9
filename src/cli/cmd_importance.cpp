// `autocompress importance`: activation importance of a checkpoint on calibration tokens
// (importance/importance.h), written to importance.safetensors. A Nemotron-H checkpoint
// (config.json's model_type nemotron_h / nemotron_h_puzzle) is scored by
// importance/nemotron_h_importance.h instead, into its own format (pipeline/nemotron_h_steps.h),
// and a Qwen3-MoE / Mixtral one (model_type qwen3_moe, mixtral) by importance/moe_importance.h
// (pipeline/moe_steps.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/data_options.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/safetensors.h"
#include "model/finite.h"
#include "model/trainable.h"
#include "pipeline/moe_steps.h"
#include "pipeline/nemotron_h_steps.h"
#include "pipeline/steps.h"

namespace ac::cli {
namespace {

struct ImportanceArgs {
  std::string model, out, aggregation = "mean";
  DataArgs data;
  int64_t batch_size = 8, seq_len = 256, max_batches = -1, save_every = 16;
  bool layer_drop_loss = false, resume = false, allow_nonfinite = false, stream_layers = false;
  DeviceArgs compute;
};

// The flags of the Llama family's importance (importance/importance.h ImportanceOptions) that the
// importance of another kind (`kind`: "Nemotron-H (hybrid)", "Qwen3-MoE / Mixtral") has no
// counterpart for, each refused by name rather than ignored; `on_device`: whether it runs on
// --device.
void refuse_for_kind(const ImportanceArgs& a, const char* kind, bool on_device) {
  const ImportanceArgs defaults;
  std::vector<std::string> why;
  if (a.aggregation != defaults.aggregation)
    why.push_back(fmt::format("--aggregation {}: these scores are means over the calibration "
                              "tokens only", a.aggregation));
  if (a.layer_drop_loss)
    why.push_back("--layer-drop-loss: the loss of dropping a layer is measured for the Llama "
                  "family only");
  if (a.resume || a.save_every != defaults.save_every)
    why.push_back("--resume / --save-every: this importance keeps no resumable state (one pass, "
                  "written at the end)");
  if (a.stream_layers)
    why.push_back("--stream-layers: the model is brought to --device whole");
  if (!on_device && !a.compute.resolve().is_cpu())
    why.push_back(fmt::format("--device {}: this importance runs on the CPU; leave --device out",
                              a.compute.device));
  if (!why.empty())
    throw ConfigError(msg("importance", "{} is a {} checkpoint:\n  - {}", a.model, kind,
                          fmt::join(why, "\n  - ")));
}

// A Nemotron-H checkpoint: its own scores and file (pipeline/nemotron_h_steps.h).
void run_nemotron_h(const ImportanceArgs& a) {
  refuse_for_kind(a, "Nemotron-H (hybrid)", /*on_device=*/true);
  const c10::Device device = a.compute.resolve();
  NemotronHModel m = load_nemotron_h_checkpoint(a.model);
  require_finite(m, a.model, "importance", a.allow_nonfinite);
  check_seq_len_fits(a.seq_len, m.config, a.model, "importance");
  const TokenDataset data =
      load_dataset(a.data.spec(DataSplit::kTrain), a.model, m.config.vocab_size,
                   int32_t(m.config.bos_token_id), "importance");
  NemotronHImportanceStep step;
  step.batch_size = a.batch_size;
  step.seq_len = a.seq_len;
  step.max_batches = a.max_batches;
  step.device = device;
  const NemotronHImportance imp = nemotron_h_importance_step(m, data, step, "importance");
  save_nemotron_h_importance(a.out, imp);
  log_info(fmt::format("[importance] Nemotron-H, {} tokens -> {}", imp.num_tokens, a.out));
}

// A Qwen3-MoE / Mixtral checkpoint: its experts' scores and file (pipeline/moe_steps.h).
void run_moe(const ImportanceArgs& a) {
  refuse_for_kind(a, "Qwen3-MoE / Mixtral", /*on_device=*/false);
  const MoeModel m = load_moe_checkpoint(a.model);
  require_finite(m, a.model, "importance", a.allow_nonfinite);
  check_seq_len_fits(a.seq_len, m.config, a.model, "importance");
  const TokenDataset data =
      load_dataset(a.data.spec(DataSplit::kTrain), a.model, m.config.vocab_size,
                   int32_t(m.config.bos_token_id), "importance");
  MoeImportanceStep step;
  step.batch_size = a.batch_size;
  step.seq_len = a.seq_len;
  step.max_batches = a.max_batches;
  const MoeImportance imp = moe_importance_step(m, data, step, "importance");
  save_moe_importance(a.out, imp);
  log_info(fmt::format("[importance] {}, {} tokens -> {}", model_kind_name(m), imp.num_tokens,
                       a.out));
}

void run(const ImportanceArgs& a) {
  check_not_overwriting_inputs({a.model, a.data.path}, a.out, "importance");
  check_output_flag("importance", "--out", a.out);
  if (is_nemotron_h_checkpoint(a.model)) return run_nemotron_h(a);
  if (is_moe_family_checkpoint(a.model)) return run_moe(a);
  if (a.aggregation != "mean" && a.aggregation != "batch_l2")
    throw ConfigError(fmt::format("[importance] --aggregation: expected mean or batch_l2, found "
                                  "'{}'", a.aggregation));
  const c10::Device device = a.compute.resolve();
  LlamaModel m = load_checkpoint(a.model);
  if (!a.allow_nonfinite) require_finite(m, a.model, "importance", /*allow=*/false);
  check_seq_len_fits(a.seq_len, m.config, a.model, "importance");
  TokenDataset data = load_dataset(a.data.spec(DataSplit::kTrain), a.model, m.config.vocab_size,
                                   int32_t(m.config.bos_token_id), "importance");
  ImportanceStep step;
  step.batch_size = a.batch_size;
  step.seq_len = a.seq_len;
  step.max_batches = a.max_batches;
  ImportanceOptions& opt = step.importance;
  opt.aggregation = a.aggregation == "mean" ? Aggregation::kMean : Aggregation::kBatchL2;
  opt.layer_drop_loss = a.layer_drop_loss;
  opt.state_path = a.out + ".state";
  opt.save_every = a.save_every;
  opt.resume = a.resume;
  opt.allow_nonfinite = a.allow_nonfinite;
  opt.device = device;
  opt.stream_layers = a.stream_layers;
  Importance imp = importance_step(m, data, step, "importance");
  save_importance(a.out, imp);
  fs::remove(opt.state_path);
  log_info(fmt::format("[importance] {} tokens -> {}", imp.num_tokens, a.out));
}

RegisterCommand reg(40, [](CLI::App& app) {
  auto* s = app.add_subcommand("importance",
                               "Score hidden channels, heads, KV groups, FFN neurons and layers "
                               "by activations on calibration tokens (Minitron)");
  auto a = std::make_shared<ImportanceArgs>();
  s->add_option("--model", a->model, "Checkpoint folder (Llama family; Nemotron-H, Qwen3-MoE "
                                      "and Mixtral scored and written in their own formats)")
      ->required();
  add_data_options(s, a->data, "Calibration data", DataSplit::kTrain)->required();
  s->add_option("--out", a->out, "Output importance.safetensors")->required();
  s->add_option("--batch-size", a->batch_size, "Sequences per batch")->capture_default_str();
  s->add_option("--seq-len", a->seq_len, "Tokens per sequence")
      ->check(positive_tokens())
      ->capture_default_str();
  s->add_option("--max-batches", a->max_batches, "Batches to use (-1 = all)")
      ->capture_default_str();
  s->add_option("--aggregation", a->aggregation, "mean | batch_l2")->capture_default_str();
  s->add_flag("--layer-drop-loss", a->layer_drop_loss,
              "Also measure the loss increase of dropping each block (L extra passes per batch)");
  s->add_option("--save-every", a->save_every, "Save resumable state every N batches "
                                               "(OUT.state)")->capture_default_str();
  s->add_flag("--resume", a->resume, "Continue from OUT.state if present");
  s->add_flag("--allow-nonfinite", a->allow_nonfinite,
              "Score a model with NaN/Inf weights anyway (refused by default)");
  add_device_options(s, a->compute, /*with_precision=*/false);
  s->add_flag("--stream-layers", a->stream_layers,
              "Bring the model to --device one block at a time (a model larger than the GPU; "
              "taken anyway when the whole pass does not fit it); not with --layer-drop-loss");
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
