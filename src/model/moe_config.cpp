#include "model/moe_config.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/config.h"

namespace ac {

int64_t MoeConfig::dense_parameters(int64_t D) const {
  const int64_t router = num_experts * D + (router_bias ? num_experts : 0);
  const int64_t shared = matrices() * D * shared_expert_intermediate_size;
  const int64_t latent = moe_latent_size > 0 ? 2 * D * moe_latent_size : 0;
  return router + shared + latent;
}

void MoeConfig::validate(const std::string& where) const {
  auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw ConfigError(fmt::format("[{}] {} must be in {}..{}, found {}", where, field, lo, hi, v));
  };
  range("num_experts", num_experts, 1, 1 << 16);
  range("num_experts_per_tok", num_experts_per_tok, 1, num_experts);
  range("moe_intermediate_size", moe_intermediate_size, 1, kMaxIntermediateSize);
  range("moe_shared_expert_intermediate_size", shared_expert_intermediate_size, 0,
        kMaxIntermediateSize);
  range("moe_latent_size", moe_latent_size, 0, kMaxHiddenSize);
  if (scoring_func != "softmax" && scoring_func != "sigmoid")
    throw ConfigError(fmt::format("[{}] scoring_func must be softmax or sigmoid, found '{}'",
                                  where, scoring_func));
}

bool MoeConfig::operator==(const MoeConfig& o) const {
  return num_experts == o.num_experts && num_experts_per_tok == o.num_experts_per_tok &&
         moe_intermediate_size == o.moe_intermediate_size &&
         shared_expert_intermediate_size == o.shared_expert_intermediate_size &&
         moe_latent_size == o.moe_latent_size && gated == o.gated &&
         router_bias == o.router_bias && scoring_func == o.scoring_func;
}

}  // namespace ac
