// `autocompress prune`: slice a checkpoint down to arch.json using importance scores
// (prune/prune.h), written as a new checkpoint folder (atomically) with pruning_map.json
// (prune/pruning_map.h: which teacher channels and layers the student kept).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/runtime.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
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

void run(const PruneArgs& a) {
  check_not_overwriting_input(a.model, a.out, "prune");
  check_output_flag("prune", "--out", a.out, OutputKind::kFolder);
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
  s->add_option("--importance", a->importance, "importance.safetensors of the parent")
      ->required();
  s->add_option("--arch", a->arch, "arch.json with the target config")->required();
  s->add_option("--out", a->out, "Output checkpoint folder")->required();
  s->add_flag("--keep-removed-blocks", a->keep_removed_blocks,
              "Keep fully removed blocks as no-op layers (default: drop them)");
  add_device_options(s, a->compute, /*with_precision=*/false);
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
