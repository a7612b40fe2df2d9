// `autocompress prune`: slice a checkpoint down to arch.json using importance scores
// (prune/prune.h), written as a new checkpoint folder (atomically) with pruning_map.json
// (prune/pruning_map.h: which teacher channels and layers the student kept).
#include <fmt/format.h>

#include "cli/command.h"
#include "common/runtime.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "prune/arch.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "prune/pruning_map.h"

namespace ac::cli {
namespace {

struct PruneArgs {
  std::string model, importance, arch, out;
  bool keep_removed_blocks = false;
};

void run(const PruneArgs& a) {
  check_not_overwriting_input(a.model, a.out, "prune");
  LlamaModel m = load_checkpoint(a.model);
  Importance imp = load_importance(a.importance);
  ModelConfig target = read_arch(a.arch);
  PrunePlan plan = plan_pruning(m.config, imp, target);
  LlamaModel pruned = apply_plan(m, plan);
  // A block whose attention and FFN are both removed is the identity: drop it (as `compress`
  // does) unless asked to keep the parent's layer numbering.
  if (!a.keep_removed_blocks) pruned = drop_removed_blocks(pruned);
  // The checkpoint and pruning_map.json (for distill's hidden-state loss) appear together.
  PruningMap map = pruning_map_from_plan(m.config, plan, !a.keep_removed_blocks);
  check_pruning_map(map, m.config, pruned.config, kPruningMapFile);
  StagingDir staging(a.out);
  save_checkpoint(staging.path(), pruned, a.model);
  write_pruning_map(staging.path() / kPruningMapFile, map);
  staging.commit();
  log_info(fmt::format("[prune] {} ({} parameters) -> {} ({} parameters) in {}",
                       describe(m.config), m.config.num_parameters(), describe(pruned.config),
                       pruned.config.num_parameters(), a.out));
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
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
