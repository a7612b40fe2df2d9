#include "pipeline/nemotron_h_steps.h"

#include "common/error.h"
#include "model/trainable.h"
#include "prune/nemotron_h_prune.h"

namespace ac {

NemotronHImportance nemotron_h_importance_step(const NemotronHModel& teacher,
                                               const TokenDataset& calibration,
                                               const NemotronHImportanceStep& opt,
                                               const char* who) {
  std::vector<at::Tensor> batches =
      calibration.sequential_batches(opt.batch_size, opt.seq_len, opt.max_batches);
  if (batches.empty())
    throw ConfigError(msg(who, "the calibration set's {} tokens make no window of --seq-len {}",
                          calibration.num_tokens(), opt.seq_len));
  for (at::Tensor& b : batches) b = b.to(opt.device);
  return compute_nemotron_h_importance(model_to_device(teacher, opt.device), batches);
}

NemotronHModel nemotron_h_prune_step(const NemotronHModel& parent, const NemotronHImportance& imp,
                                     const ModelConfig& target, const NemotronHPruneInputs& names,
                                     const char* who) {
  check_nemotron_h_importance_matches(parent.config, imp, who, names.importance, names.parent);
  try {
    validate_nemotron_h_target(parent.config, target, parent.router.n_group);
  } catch (const ConfigError& e) {
    // The library's list names layers and fields; say which files they come from.
    throw ConfigError(msg(who, "{} cannot be pruned from {}: {}", names.target, names.parent,
                          e.what()));
  }
  return prune_nemotron_h_model(parent, imp, target);
}

}  // namespace ac
