#include "search/placement.h"

#include <algorithm>

#include "common/error.h"

namespace ac {

namespace {

// Whether `l`'s attention (its heads, KV heads, or none) is one of `options`.
bool offered(const LayerConfig& l, const std::vector<LayerConfig>& options) {
  return std::any_of(options.begin(), options.end(), [&](const LayerConfig& o) {
    if (!l.has_attention()) return !o.has_attention();
    return o.has_attention() && o.num_attention_heads == l.num_attention_heads &&
           o.num_key_value_heads == l.num_key_value_heads;
  });
}

void exchange_attention(LayerConfig& a, LayerConfig& b) {
  std::swap(a.num_attention_heads, b.num_attention_heads);
  std::swap(a.num_key_value_heads, b.num_key_value_heads);
  std::swap(a.attention_no_op, b.attention_no_op);
}

}  // namespace

std::vector<ModelConfig> attention_placement_variants(const ModelConfig& target,
                                                      const SearchSpace& space) {
  if (target.num_layers() != space.num_layers())
    throw ConfigError(msg("search", "attention placement: the architecture has {} layers, the "
                          "search space {}", target.num_layers(), space.num_layers()));
  std::vector<size_t> kept;
  for (size_t l = 0; l < target.layers.size(); ++l)
    if (target.layers[l].is_present()) kept.push_back(l);
  // Each variant differs from `target` in exactly its pair's two layers, so no two are alike.
  std::vector<ModelConfig> out;
  for (size_t k = 0; k + 1 < kept.size(); ++k) {
    const size_t i = kept[k], j = kept[k + 1];
    if (target.layers[i].has_attention() == target.layers[j].has_attention()) continue;
    ModelConfig v = target;
    exchange_attention(v.layers[i], v.layers[j]);
    // A layer left with neither attention nor FFN would be a removed block: another structure.
    if (!v.layers[i].is_present() || !v.layers[j].is_present()) continue;
    if (!offered(v.layers[i], space.attention[i]) || !offered(v.layers[j], space.attention[j]))
      continue;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ac
