// `autocompress prune`: slice a checkpoint down to arch.json using importance scores
// (prune/prune.h), written as a new checkpoint folder (atomically) with pruning_map.json
// (prune/pruning_map.h: which teacher channels and layers the student kept). A Nemotron-H
// checkpoint is pruned by prune/nemotron_h_prune.h from its own importance file and written in
// the HF layout of export/nemotron_h_export.h, without a pruning map (pipeline/nemotron_h_steps.h);
// a Qwen3-MoE / Mixtral one has its experts pruned by prune/moe_prune.h and is written by
// export/moe_hf_export.h (pipeline/moe_steps.h).
#include <fmt/format.h>

#include "cli/checkpoint_kind.h"
#include "cli/command.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/runtime.h"
#include "export/moe_hf_export.h"
#include "export/nemotron_h_export.h"
#include "importance/importance.h"
#include "importance/nemotron_h_importance.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "pipeline/moe_steps.h"
#include "pipeline/nemotron_h_steps.h"
#include "pipeline/steps.h"
#include "prune/arch.h"
#include "prune/prune.h"

namespace ac::cli {
namespace {

struct PruneArgs {
  std::string model, importance, arch, out;
  bool keep_removed_blocks = false;
  DeviceArgs compute;
};

// A checkpoint of another kind than the Llama family's (cli/checkpoint_kind.h): pruned on the
// CPU from the kind's own importance file by `prune_step`, written in the kind's HF layout by
// `write`, without a pruning map. `no_removed_blocks` says why --keep-removed-blocks means
// nothing for it.
template <class M, class Imp, class Inputs>
void run_kind(const PruneArgs& a, const CheckpointKind<M>& kind, const char* no_removed_blocks,
              Imp (*load_importance)(const fs::path&),
              M (*prune_step)(const M&, const Imp&, const ModelConfig&, const Inputs&, const char*),
              void (*write)(const fs::path&, const M&, const fs::path&)) {
  if (a.keep_removed_blocks)
    throw ConfigError(msg("prune", "--keep-removed-blocks: {} is a {} checkpoint, {}", a.model,
                          kind.name, no_removed_blocks));
  if (!a.compute.resolve().is_cpu())
    throw ConfigError(msg("prune", "--device {}: a {} checkpoint ({}) is pruned on the CPU; "
                          "leave --device out", a.compute.device, kind.name, a.model));
  const M m = kind.load(a.model);
  Inputs names;
  names.importance = "--importance " + a.importance;
  names.target = "--arch " + a.arch;
  names.parent = (fs::path(a.model) / "config.json").string();
  const Imp imp = load_importance(a.importance);
  const M pruned = prune_step(m, imp, read_arch(a.arch), names, "prune");
  StagingDir staging(a.out);
  write(staging.path(), pruned, /*tokenizer_from=*/a.model);
  staging.commit();
  log_info(fmt::format("[prune] {} ({} parameters) -> {} ({} parameters) in {}",
                       describe(m.config), m.config.num_parameters(), describe(pruned.config),
                       pruned.config.num_parameters(), a.out));
}

void run(const PruneArgs& a) {
  check_not_overwriting_input(a.model, a.out, "prune");
  check_output_flag("prune", "--out", a.out, OutputKind::kFolder);
  if (kNemotronH.is_kind(a.model))
    return run_kind(a, kNemotronH,
                    "whose HF layout leaves removed blocks out (export/nemotron_h_export.h)",
                    load_nemotron_h_importance, nemotron_h_prune_step, write_nemotron_h_files);
  if (kMoe.is_kind(a.model))
    return run_kind(a, kMoe, "whose pruning shrinks experts and removes no block",
                    load_moe_importance, moe_prune_step, write_moe_files);
  const c10::Device device = a.compute.resolve();
  LlamaModel m = load_checkpoint(a.model);
  m.weights = to_device(m.config, m.weights, device);  // the slicing runs there
  // Both inputs checked against the parent before any slicing, naming their flags and files.
  const std::string parent_config = (fs::path(a.model) / "config.json").string();
  Importance imp = load_importance(a.importance);
  check_importance_matches(m.config, imp, "prune", "--importance " + a.importance, parent_config);
  ModelConfig target = read_arch(a.arch);
  validate_target(m.config, target, "--arch " + a.arch, parent_config);
  const PrunedModel pruned = prune_step(m, imp, target, a.keep_removed_blocks);
  // The checkpoint and pruning_map.json (for distill's hidden-state loss) appear together.
  StagingDir staging(a.out);
  write_pruned(staging.path(), pruned, a.model);
  staging.commit();
  log_info(fmt::format("[prune] {} ({} parameters) -> {} ({} parameters) in {}",
                       describe(m.config), m.config.num_parameters(),
                       describe(pruned.model.config), pruned.model.config.num_parameters(),
                       a.out));
}

RegisterCommand reg(60, [](CLI::App& app) {
  auto* s = app.add_subcommand("prune", "Prune a checkpoint to the architecture of arch.json, "
                                        "keeping the most important channels");
  auto a = std::make_shared<PruneArgs>();
  s->add_option("--model", a->model, "Parent checkpoint folder")->required();
  s->add_option("--importance", a->importance, "importance.safetensors of the parent (from "
                                               "`importance` on the same checkpoint)")
      ->required();
  s->add_option("--arch", a->arch, "arch.json with the target config (a Nemotron-H target: its "
                                   "config.json and the parent's indices of the removed layers, "
                                   "\"removed_layers\")")
      ->required();
  s->add_option("--out", a->out, "Output checkpoint folder")->required();
  s->add_flag("--keep-removed-blocks", a->keep_removed_blocks,
              "Keep fully removed blocks as no-op layers (default: drop them)");
  add_device_options(s, a->compute, /*with_precision=*/false);
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
