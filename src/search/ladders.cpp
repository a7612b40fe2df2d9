#include "search/ladders.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace ac {

void require_width_granularity(int64_t g, const char* where) {
  if (g == 0)
    throw ConfigError(msg(where, "width_granularity is unset (0): pass the device's width step, "
                                 "width_granularity_for(profile, device_spec) in "
                                 "hardware/granularity.h (the profile's derived step, else "
                                 "devices/<name>.json \"width_granularity\")"));
  if (g < 0)
    throw ConfigError(msg(where, "width_granularity: expected >= 1, found {}", g));
}

int64_t smallest_count(int64_t full, double min_fraction) {
  return std::max<int64_t>(1, int64_t(std::ceil(min_fraction * double(full))));
}

int64_t mamba_head_dim_step(int64_t P) { return std::max<int64_t>(8, P / 4 / 8 * 8); }

std::vector<int64_t> count_ladder(int64_t full, double min_fraction) {
  std::vector<int64_t> out;
  for (int64_t n = full; n >= smallest_count(full, min_fraction); --n) out.push_back(n);
  return out;
}

std::vector<int64_t> widths_below(int64_t full, int64_t g, double min_fraction) {
  std::vector<int64_t> out;
  const int64_t lo = smallest_count(full, min_fraction);
  for (int64_t w = (full - 1) / g * g; w >= lo; w -= g) out.push_back(w);
  return out;
}

std::vector<int64_t> spread_width_ladder(int64_t full, int64_t g, double min_fraction,
                                         int64_t max_options) {
  const std::vector<int64_t> below = widths_below(full, g, min_fraction);
  std::vector<int64_t> out{full};
  const int64_t k = max_options - 1, n = int64_t(below.size());
  if (k <= 0 || n == 0) return out;
  if (n <= k) {
    out.insert(out.end(), below.begin(), below.end());
    return out;
  }
  for (int64_t i = 0; i < k; ++i) {
    const int64_t idx = k == 1 ? 0 : int64_t(std::lround(double(i) * double(n - 1) / double(k - 1)));
    if (out.back() != below[size_t(idx)]) out.push_back(below[size_t(idx)]);
  }
  return out;
}

std::vector<int64_t> stepped_width_ladder(int64_t full, int64_t g, double min_fraction,
                                          int64_t step, FirstRung first) {
  std::vector<int64_t> out{full};
  step = std::max<int64_t>(g, step / g * g);
  const int64_t lo = smallest_count(full, min_fraction);
  const int64_t top = first == FirstRung::nearest ? (full - 1) / g * g : (full - step) / g * g;
  for (int64_t w = top; w >= lo; w -= step) out.push_back(w);
  return out;
}

int64_t ffn_width_step(int64_t g, const EngineStructure& structure, int64_t tensor_parallel) {
  const bool sharded = structure.tensor_parallel_divides.count("intermediate_size") > 0;
  return std::lcm(std::lcm(g, structure.ffn_width_multiple), sharded ? tensor_parallel : 1);
}

std::vector<int64_t> hidden_sizes_the_engine_loads(std::vector<int64_t> hidden_sizes,
                                                   const ModelConfig& parent,
                                                   const EngineStructure& structure) {
  if (structure.head_dim_explicit || hidden_sizes.empty()) return hidden_sizes;
  auto changes_head_dim = [&](int64_t D) {
    return std::any_of(parent.layers.begin(), parent.layers.end(), [&](const LayerConfig& p) {
      return p.has_attention() && D / p.num_attention_heads != p.head_dim;
    });
  };
  hidden_sizes.erase(
      std::remove_if(hidden_sizes.begin() + 1, hidden_sizes.end(), changes_head_dim),
      hidden_sizes.end());
  return hidden_sizes;
}

const LayerConfig& reference_layer(const ModelConfig& c, const char* where) {
  for (const auto& l : c.layers)
    if (l.has_attention() && l.has_ffn()) return l;
  throw ConfigError(msg(where, "the config has no layer with both attention and FFN: nothing to "
                               "take a uniform shape from"));
}

bool UniformShape::operator==(const UniformShape& o) const {
  return hidden_size == o.hidden_size && num_key_value_heads == o.num_key_value_heads &&
         heads_per_group == o.heads_per_group && intermediate_size == o.intermediate_size &&
         num_layers == o.num_layers;
}

UniformShape uniform_shape_of(const ModelConfig& c, const char* where) {
  const LayerConfig& ref = reference_layer(c, where);
  return {c.hidden_size, ref.num_key_value_heads,
          ref.num_attention_heads / ref.num_key_value_heads, ref.intermediate_size,
          c.num_layers()};
}

int64_t UniformSpace::size() const {
  return int64_t(hidden_sizes.size() * heads_per_group.size() * kv_groups.size() *
                 ffn_widths.size() * num_layers.size());
}

UniformShape UniformSpace::smallest() const {
  return {hidden_sizes.back(), kv_groups.back(), heads_per_group.back(), ffn_widths.back(),
          num_layers.back()};
}

bool covers(const UniformShape& a, const UniformShape& b) {
  return a.hidden_size >= b.hidden_size && a.num_key_value_heads >= b.num_key_value_heads &&
         a.heads_per_group >= b.heads_per_group && a.intermediate_size >= b.intermediate_size &&
         a.num_layers >= b.num_layers;
}

bool covers_counts(const UniformShape& a, const UniformShape& b) {
  return a.hidden_size >= b.hidden_size && a.num_attention_heads() >= b.num_attention_heads() &&
         a.num_key_value_heads >= b.num_key_value_heads &&
         a.intermediate_size >= b.intermediate_size && a.num_layers >= b.num_layers;
}

}  // namespace ac
