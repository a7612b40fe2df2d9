// Non-finite weights (NaN, +-Inf): a checkpoint from a diverged run or a corrupt download.
//
// Loading warns (load_checkpoint names every such tensor); the stages whose results would be
// meaningless refuse them: importance (every score of a NaN layer is NaN, and ranking NaNs is
// arbitrary) and distillation (a NaN teacher gives NaN targets; a NaN student never recovers).
// Both accept them when forced (--allow-nonfinite, ImportanceOptions / DistillOptions
// allow_nonfinite), e.g. to distill a student whose pruned-away rows held the NaNs.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/llama.h"

namespace ac {

/// One tensor holding non-finite values, by its Hugging Face name.
struct NonFiniteTensor {
  std::string name;  // e.g. "model.layers.3.mlp.up_proj.weight"
  int64_t nan = 0, inf = 0, numel = 0;
};

/// Every weight of `m` that holds a NaN or an Inf (any float dtype; the tied head once).
std::vector<NonFiniteTensor> find_nonfinite(const LlamaModel& m);

/// "tensor 'a' has 3 NaN and 0 Inf of 4096 values; tensor 'b' ..." (at most 8 named).
std::string describe_nonfinite(const std::vector<NonFiniteTensor>& bad);

/// Logs one warning naming `file` and the tensors when there are any.
void warn_nonfinite(const std::vector<NonFiniteTensor>& bad, const std::string& file);

/// Throws FormatError "[stage] FILE: non-finite weights (...): refusing to run stage; pass
/// --allow-nonfinite to run anyway" when `m` holds NaN or Inf and `allow` is false; with
/// `allow`, only warns.
void require_finite(const LlamaModel& m, const std::string& file, const char* stage, bool allow);

/// The same rule on named tensors (any model kind: model/trainable.h named_parameters).
void require_finite(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                    const std::string& file, const char* stage, bool allow);

}  // namespace ac
