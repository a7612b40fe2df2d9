// The choices a search offers along each dimension (docs/design.md, "The architecture space"),
// written once for every method: the differentiable search's space (search_space.h), Minitron's
// uniform grid (minitron.h) and `plan` (plan/plan.h).
//
//   width ladder   the parent's own width first, then multiples of the width granularity g
//                  below it, descending, down to min_fraction x the parent's (at least 1); each
//                  method takes a subset of that grid (spread evenly, or every step-th).
//   count ladder   full, full - 1, ..., max(1, ceil(min_fraction x full)): KV heads, query heads
//                  per KV head, layers.
//   engine rules   FFN widths also step by what the engine's loader expresses and by the tensor
//                  parallelism when the loader shards them; a loader that derives head_dim as
//                  hidden_size / num_attention_heads only reads back hidden sizes that give the
//                  parent's head_dim (hardware/engine.h EngineStructure).
//   uniform shape  one shape for every layer (D, G, H/G, F, L), as Minitron's grid and `plan`'s
//                  uniform suggestions enumerate it, with the dominance rules that prune them.
//
// The granularity g is hardware data, never a literal (the idea of Model-Optimizer's
// `hidden_size_divisor`): callers take it from the device, width_granularity_for(profile,
// device_spec) in hardware/granularity.h. The option structs hold 0 for "unset", and every
// builder refuses it (require_width_granularity).
#pragma once
#include <cstdint>
#include <vector>

#include "hardware/engine.h"
#include "model/config.h"

namespace ac {

/// Checks a width granularity before a ladder is built. Throws ConfigError
/// "[where] width_granularity is unset (0): ..." when g == 0 (the option structs' "unset", so a
/// caller that forgot the device's value is told where to get it), and "[where]
/// width_granularity: expected >= 1, found g" when g < 0.
void require_width_granularity(int64_t g, const char* where);

/// The fewest of `full` a ladder keeps: max(1, ceil(min_fraction x full)).
int64_t smallest_count(int64_t full, double min_fraction);

/// The step of a Mamba-2 head_dim ladder below the parent's P: max(8, about P / 4 in multiples
/// of 8), Minitron's head_dim grid (search/nemotron_h_minitron.h) and the hybrid plan's move.
int64_t mamba_head_dim_step(int64_t P);

/// full, full - 1, ..., smallest_count(full, min_fraction): counts of KV heads, query heads per
/// KV head or layers, descending. Empty when full < 1.
std::vector<int64_t> count_ladder(int64_t full, double min_fraction);

/// The grid of widths below `full`: multiples of `g` (>= 1) in
/// [smallest_count(full, min_fraction), full), descending.
std::vector<int64_t> widths_below(int64_t full, int64_t g, double min_fraction);

/// The differentiable search's ladder: {full}, then at most max_options - 1 entries of
/// widths_below(full, g, min_fraction) spread evenly over it (its largest and smallest kept),
/// descending. E.g. full 100, g 16, 0.4, 4 options: {100, 96, 64, 48}.
std::vector<int64_t> spread_width_ladder(int64_t full, int64_t g, double min_fraction,
                                         int64_t max_options);

/// Where a stepped ladder's first width below the parent's lies.
enum class FirstRung {
  nearest,        // the largest multiple of g below full (Minitron's grid)
  one_step_down,  // the largest multiple of g at or below full - step (`plan`'s)
};

/// A ladder of fixed step: {full}, then multiples of `g` (>= 1) from the first rung down by
/// step' = max(g, step rounded down to a multiple of g) while >= smallest_count(full,
/// min_fraction). E.g. full 100, g 16, 0.4, step 32: {100, 96, 64} (nearest), {100, 64}
/// (one_step_down).
std::vector<int64_t> stepped_width_ladder(int64_t full, int64_t g, double min_fraction,
                                          int64_t step, FirstRung first);

/// The step of the FFN widths: lcm(g, structure.ffn_width_multiple, and tensor_parallel when
/// the loader shards intermediate_size over the GPUs).
int64_t ffn_width_step(int64_t g, const EngineStructure& structure, int64_t tensor_parallel);

/// `hidden_sizes` (descending, [0] = the parent's own) without the later entries D at which a
/// loader that derives head_dim as D / num_attention_heads reads, in some attention layer of
/// `parent`, a head_dim other than that layer's. Unchanged when structure.head_dim_explicit.
std::vector<int64_t> hidden_sizes_the_engine_loads(std::vector<int64_t> hidden_sizes,
                                                   const ModelConfig& parent,
                                                   const EngineStructure& structure);

/// The first layer with both attention and FFN: the shape a uniform architecture copies.
/// Throws ConfigError "[where] the config has no layer with both attention and FFN" when none.
const LayerConfig& reference_layer(const ModelConfig& config, const char* where);

/// One shape for every layer.
struct UniformShape {
  int64_t hidden_size = 0;          // D
  int64_t num_key_value_heads = 0;  // G
  int64_t heads_per_group = 0;      // H / G: query heads per KV head
  int64_t intermediate_size = 0;    // F
  int64_t num_layers = 0;           // L
  int64_t num_attention_heads() const { return num_key_value_heads * heads_per_group; }
  bool operator==(const UniformShape& o) const;
};

/// A grid of uniform shapes: every shape is one entry of each ladder (descending, [0] = the
/// parent's).
struct UniformSpace {
  std::vector<int64_t> hidden_sizes;       // D' choices
  std::vector<int64_t> heads_per_group;    // query heads kept per KV group (H'/G')
  std::vector<int64_t> kv_groups;          // G' choices
  std::vector<int64_t> ffn_widths;         // F' choices
  std::vector<int64_t> num_layers;         // L' choices
  /// Shapes in the grid: the product of the ladders' lengths.
  int64_t size() const;
  /// The shape of the last entry of every ladder.
  UniformShape smallest() const;
};

/// The shape of `config`'s reference layer, with its hidden size and layer count. Throws as
/// reference_layer.
UniformShape uniform_shape_of(const ModelConfig& config, const char* where);

/// True if `a` keeps at least as much as `b` on every lever (D, G, H/G, F, L): with nested
/// importance order, `b`'s kept channels are a subset of `a`'s (`plan`'s dominance).
bool covers(const UniformShape& a, const UniformShape& b);

/// True if `a` keeps at least as many hidden channels, query heads, KV heads, FFN neurons and
/// layers as `b`, so that it costs at least as much (Minitron's dominance: unlike covers, more
/// KV heads with fewer query heads per KV head can cover `b`).
bool covers_counts(const UniformShape& a, const UniformShape& b);

}  // namespace ac
