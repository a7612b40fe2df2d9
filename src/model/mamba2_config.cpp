#include "model/mamba2_config.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/config.h"

namespace ac {

int64_t Mamba2Config::num_parameters(int64_t D) const {
  const int64_t in_proj = D * in_proj_width() + (use_bias ? in_proj_width() : 0);
  const int64_t conv = conv_dim() * conv_kernel + (use_conv_bias ? conv_dim() : 0);
  const int64_t per_head = 3 * mamba_num_heads;  // dt_bias, A_log, D
  const int64_t norm = d_inner();
  const int64_t out_proj = d_inner() * D + (use_bias ? D : 0);
  return in_proj + conv + per_head + norm + out_proj;
}

void Mamba2Config::validate(const std::string& where) const {
  auto range = [&](const char* field, int64_t v, int64_t hi) {
    if (v < 1 || v > hi)
      throw ConfigError(fmt::format("[{}] {} must be in 1..{}, found {}", where, field, hi, v));
  };
  range("mamba_num_heads", mamba_num_heads, kMaxAttentionWidth);
  range("mamba_head_dim", mamba_head_dim, kMaxHeadDim);
  range("ssm_state_size", ssm_state_size, kMaxHeadDim);
  range("n_groups", n_groups, mamba_num_heads);
  range("conv_kernel", conv_kernel, 64);
  range("chunk_size", chunk_size, kMaxPositionEmbeddings);
  if (d_inner() > kMaxIntermediateSize)
    throw ConfigError(fmt::format("[{}] mamba_num_heads {} x mamba_head_dim {} = {} exceeds {}",
                                  where, mamba_num_heads, mamba_head_dim, d_inner(),
                                  kMaxIntermediateSize));
  // Each group's B and C serve nh / Gm heads (MambaMixer2 repeats the groups over the heads).
  if (mamba_num_heads % n_groups)
    throw ConfigError(fmt::format("[{}] mamba_num_heads {} is not a multiple of n_groups {}",
                                  where, mamba_num_heads, n_groups));
}

bool Mamba2Config::operator==(const Mamba2Config& o) const {
  return mamba_num_heads == o.mamba_num_heads && mamba_head_dim == o.mamba_head_dim &&
         ssm_state_size == o.ssm_state_size && n_groups == o.n_groups &&
         conv_kernel == o.conv_kernel && chunk_size == o.chunk_size &&
         use_conv_bias == o.use_conv_bias && use_bias == o.use_bias &&
         ssm_state_dtype == o.ssm_state_dtype;
}

}  // namespace ac
