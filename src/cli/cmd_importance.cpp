// `autocompress importance`: activation importance of a checkpoint on calibration tokens
// (importance/importance.h), written to importance.safetensors.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/data_options.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/finite.h"
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

void run(const ImportanceArgs& a) {
  if (a.aggregation != "mean" && a.aggregation != "batch_l2")
    throw ConfigError(fmt::format("[importance] --aggregation: expected mean or batch_l2, found "
                                  "'{}'", a.aggregation));
  check_not_overwriting_inputs({a.model, a.data.path}, a.out, "importance");
  check_output_flag("importance", "--out", a.out);
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
  s->add_option("--model", a->model, "Checkpoint folder")->required();
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
