#include "pipeline/moe_steps.h"

#include "common/error.h"
#include "prune/moe_prune.h"

namespace ac {

MoeImportance moe_importance_step(const MoeModel& teacher, const TokenDataset& calibration,
                                  const MoeImportanceStep& opt, const char* who) {
  const std::vector<at::Tensor> batches =
      calibration.sequential_batches(opt.batch_size, opt.seq_len, opt.max_batches);
  if (batches.empty())
    throw ConfigError(msg(who, "the calibration set's {} tokens make no window of --seq-len {}",
                          calibration.num_tokens(), opt.seq_len));
  return compute_moe_importance(teacher, batches);
}

MoeModel moe_prune_step(const MoeModel& parent, const MoeImportance& imp,
                        const ModelConfig& target, const MoePruneInputs& names, const char* who) {
  check_moe_importance_matches(parent.config, imp, who, names.importance, names.parent);
  validate_moe_target(parent.config, target, names.target, names.parent);
  return prune_moe_model(parent, imp, target);
}

}  // namespace ac
