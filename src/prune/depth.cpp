#include "prune/depth.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ac {

ModelConfig drop_removed_blocks(const ModelConfig& c) {
  ModelConfig out = c;
  out.layers.clear();
  for (const auto& l : c.layers)
    if (l.has_attention() || l.has_ffn()) out.layers.push_back(l);
  if (out.layers.empty())
    throw ConfigError("[drop_removed_blocks] every block is removed; at least one must remain");
  return out;
}

LlamaModel drop_removed_blocks(const LlamaModel& m) {
  LlamaModel out{drop_removed_blocks(m.config), m.weights};
  out.weights.layers.clear();
  for (size_t i = 0; i < m.config.layers.size(); ++i)
    if (m.config.layers[i].has_attention() || m.config.layers[i].has_ffn())
      out.weights.layers.push_back(m.weights.layers[i]);
  return out;
}

ModelConfig remove_least_important_blocks(const ModelConfig& c, const at::Tensor& block_influence,
                                          int64_t n_drop) {
  if (block_influence.numel() != c.num_layers())
    throw ConfigError(fmt::format("[depth] block_influence has {} entries, the model {} layers",
                                  block_influence.numel(), c.num_layers()));
  if (n_drop < 0 || n_drop >= c.num_layers())
    throw ConfigError(fmt::format("[depth] cannot remove {} of {} blocks", n_drop,
                                  c.num_layers()));
  ModelConfig out = c;
  at::Tensor order = block_influence.to(at::kDouble).argsort();  // ascending influence
  for (int64_t i = 0; i < n_drop; ++i) {
    LayerConfig& l = out.layers[size_t(order[i].item<int64_t>())];
    l.attention_no_op = l.ffn_no_op = true;
    l.num_attention_heads = l.num_key_value_heads = 0;
    l.intermediate_size = 0;
  }
  return out;
}

}  // namespace ac
