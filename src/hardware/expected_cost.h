// Differentiable expected cost for the search (docs/design.md, "The expected cost, for the
// search": the expected cost under the search's choice probabilities is a sum of table entries
// weighted by those probabilities).
//
// Per layer, the search picks one attention choice (a LayerConfig's heads / KV heads, or
// removed) and one FFN choice (a width, or removed); globally, one hidden size. Every choice's
// cost is computed once by the cost model (attention_part_cost, ffn_part_cost, fixed_cost),
// giving tables [nD, A] and [nD, F] per layer. For independent choices with probabilities
// p_D [nD], p_attn[l] [A], p_ffn[l] [F]:
//   E[TTFT] = sum_d p_D[d] (fixed[d] + sum_l p_attn[l] . attn[l][d] + p_ffn[l] . ffn[l][d])
// and the same for TPOT and for weight + KV bytes, which are linear in every probability.
// Activation bytes are a maximum over layers: E is replaced by the max over layers of each
// layer's expected activation bytes (exact for one-hot probabilities, a subgradient elsewhere).
// On a CPU profile with residency tables, TPOT mixes each part's cold and warm decode cost by
// the residency of the expected weight + KV bytes at that hidden size (cost_model.h combine):
//   E[TPOT | d] = cold[d] - h(bytes[d]) (cold[d] - warm[d]),
// h the profile's piecewise-linear residency curve, so that one-hot probabilities give predict()
// exactly (the same mix at the same bytes).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "hardware/cost_model.h"

namespace ac {

/// The choices of one layer and their costs.
struct LayerChoiceTable {
  std::vector<LayerConfig> attention_choices;  // [A]; only the attention fields matter
  std::vector<LayerConfig> ffn_choices;        // [F]; only intermediate_size / ffn_no_op matter
  // Costs, float64, [nD, A] and [nD, F]:
  at::Tensor attn_ttft_ms, attn_tpot_ms, attn_bytes, attn_activation_bytes;
  at::Tensor ffn_ttft_ms, ffn_tpot_ms, ffn_bytes, ffn_activation_bytes;
  at::Tensor attn_tpot_warm_ms, ffn_tpot_warm_ms;  // PartCost::tpot_warm_ms, [nD, A] / [nD, F]
};

struct ChoiceTables {
  std::vector<int64_t> hidden_sizes;  // [nD]
  std::vector<LayerChoiceTable> layers;  // [L]
  at::Tensor fixed_ttft_ms, fixed_tpot_ms, fixed_bytes, fixed_activation_bytes;  // [nD] float64
  at::Tensor fixed_tpot_warm_ms;                                                  // [nD]
  std::vector<std::pair<double, double>> residency_curve;  // Profile::residency_curve; empty: 0
  double reserve_bytes = 0;
  int64_t batch_size = 1, output_tokens = 1;
};

/// Costs every choice with the cost model. attention_choices / ffn_choices: one list per layer
/// of `base` (a LayerConfig with attention_no_op / ffn_no_op set means "removed");
/// hidden_sizes: the global choices (empty = {base.hidden_size}).
/// Throws what predict throws (profile of another device, CPU without profile, ...).
ChoiceTables build_choice_tables(const ModelConfig& base,
                                 const std::vector<std::vector<LayerConfig>>& attention_choices,
                                 const std::vector<std::vector<LayerConfig>>& ffn_choices,
                                 const std::vector<int64_t>& hidden_sizes, const Scenario& scenario,
                                 const Profile* profile);

/// Expected costs as 0-d float64 tensors that carry gradients to the probabilities.
struct ExpectedCost {
  at::Tensor ttft_ms, tpot_ms, peak_memory_bytes, throughput_tokens_per_s;
};

/// p_hidden [nD]; p_attention[l] [A_l]; p_ffn[l] [F_l]: probabilities (rows summing to 1, any
/// float dtype, may require grad). Throws ConfigError naming the layer on a size mismatch.
ExpectedCost expected_cost(const ChoiceTables& tables, const at::Tensor& p_hidden,
                           const std::vector<at::Tensor>& p_attention,
                           const std::vector<at::Tensor>& p_ffn);

}  // namespace ac
