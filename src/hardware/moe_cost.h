// The cost of an MoE layer (model/moe_config.h) in a scenario: the router, the latent
// projections, the routed experts a batch touches, the shared expert.
//
// Per layer, on the device roofline (hardware/roofline.h), M rows (B*T prefill, B decode), per
// GPU (tensor or expert parallelism splits the experts' weights and work over the GPUs):
//   rmsnorm(M, D) + router GEMM(M, E, D) and its top-k over [M, E]
//   + fc1_latent_proj GEMM(M, Lt, D) (latent MoE only)
//   + routed experts: 2 M k (matrices Din Fe) FLOPs; the weights of the experts the rows touch,
//     read once per pass over them (a prefill in passes of the engine's prefill chunk reads
//     them once a pass); the k copies of each row in and out ([M k, Din], [M k, Fe]); 4 kernels
//     (vLLM fused_moe: align/permute, the two grouped GEMMs, the weighted sum of the k outputs)
//   + fc2_latent_proj GEMM(M, D, Lt)
//   + shared expert: GEMM(M, Fs (x2 gated), D), its activation, GEMM(M, D, Fs)
//   + the sum of the routed and shared outputs, and the residual add (unless the engine fuses
//     add + rmsnorm).
// Memory holds every expert (all E in weight_bytes); a decode step reads only the touched ones.
// Activations at the prefill's peak over one prefill pass's rows: x, h [M, D], the router's fp32
// logits [M, E], the latent [M, Lt], the dispatched rows [M k, Din] in and out, the experts'
// intermediates [M k, Fe] (x3 gated: gate, up, product; x2 relu²), the shared expert's.
#pragma once
#include <cstdint>

#include "hardware/cost_model.h"

namespace ac {

/// The expected number of distinct experts `tokens` rows touch when each picks k of E experts:
///   E (1 - (1 - k / E)^tokens)
/// (an expert is missed by one row with probability 1 - k/E, by independent rows with its
/// power). This is the uniform case, which load-balanced routers aim for (Nemotron-H's
/// e_score_correction_bias is DeepSeek-V3's auxiliary-loss-free balancing, arXiv 2412.19437
/// §2.1.2; Qwen3-MoE and Mixtral train with a load-balancing loss); skewed or correlated routing
/// touches fewer (1 - (1 - p)^n is concave in p), so it bounds the bytes a step reads from above.
/// Throws ConfigError unless 1 <= k <= E and tokens >= 0.
double expected_distinct_experts(int64_t num_experts, int64_t num_experts_per_tok, double tokens);

/// The cost of layer `l`'s MoE (l.moe must be set) with its RMSNorm, on the device roofline.
/// Throws ConfigError when the scenario would be costed from a profile's op tables (the native
/// engine, or an engine measured on this CPU): the tables hold no MoE op.
PartCost moe_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                       const Profile* p);

}  // namespace ac
