// The cost model: TTFT, TPOT, throughput and peak memory of an architecture in a scenario
// (docs/design.md, "The cost model").
//
// Latency is the sum of the layers' costs. With a profile of the device (engine "native"),
// each op of the native forward is looked up in the profile's tables (interpolated):
//   layer = attention part + FFN part (a removed part costs nothing)
//   attention part = rmsnorm(M, D) + gemm(M, H*Hd, D) + 2 gemm(M, G*Hd, D)
//                    + attention(B, Hd, G, H, T or C) + gemm(M, D, H*Hd) + add(M, D)
//   FFN part       = rmsnorm(M, D) + 2 gemm(M, F, D) + silu_mul(M, F) + gemm(M, D, F) + add(M, D)
//   step           = embedding(M, D) + rmsnorm(B, D) + lm_head(B, V, D) + step(B, T or 1, Hd, V)
//                    (+ the profile's calibration residual, when it has one)
// On a CPU profile with residency tables (profile.h), each GEMM and the head of a decode step
// cost their cold entry less h = Profile::residency(weight + KV-cache bytes) of what the warm
// entry saves (the prefill's, bound by arithmetic, their cold entry):
// a model whose weights fit the last-level cache runs its GEMMs from there, one that does not
// streams them from memory.
// When the profile holds a fitted correction (hardware/correction.h), each table entry is
// scaled by its class's factor (gemm, attention, elementwise = rmsnorm/silu_mul/add/embedding,
// lm_head), each attention or FFN part present adds per_part_ms and each step per_step_ms.
// with M = B*T for the prefill (TTFT) and M = B for a decode step (TPOT, at the median
// context C = T + ceil(output/2)). Without a profile (GPUs here), each op costs the roofline
// max(FLOPs / (peak * gemm_efficiency), bytes / (bandwidth * bandwidth_efficiency)) plus one
// kernel launch per kernel the engine does not fuse, plus the engine's per-step overhead.
//
// An engine other than the native one that was measured on this CPU (Profile::engines, e.g.
// llama.cpp at the scenario's threads and weight type) is costed from the same tables with its
// own fitted correction, and its memory is its own buffers (hardware/engine_calibration.h).
//
// Hybrid layer kinds (a layer's mixer is attention or a Mamba-2 mixer, its channel part a dense
// FFN or an MoE: model/config.h) are costed by their own files on the device roofline:
// hardware/mamba2_cost.h (the chunked scan in the prefill, the recurrence in a decode step, a
// constant state per sequence) and hardware/moe_cost.h (router, latent projections, the experts a
// batch touches, shared expert); a relu² dense FFN (Nemotron-H "-") has two GEMMs, not three.
//
// Memory: weights (parameters x weight dtype bytes) + KV cache (2 * B * G * Hd * capacity *
// KV dtype bytes per attention layer; capacity = prompt + output rounded up to the engine's
// block size; layers without attention hold none) + Mamba-2 state (per layer and sequence,
// whatever the context) + activations (the largest live set of one
// layer at the prefill, plus the logits; over the engine's prefill chunk, without [T, T] scores
// where the engine fuses the attention) + engine reserve (reserve_bytes + reserved fraction of
// device memory). Tensor parallelism divides weights, KV cache and per-GPU work.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "model/config.h"

namespace ac {

/// Cost of one part of a layer (or of the fixed per-step work).
struct PartCost {
  double ttft_ms = 0;  // share of the prefill
  double tpot_ms = 0;  // share of one decode step, weights streamed from memory
  double tpot_warm_ms = 0;  // the same with every weight in the last-level cache (a CPU profile
                            // with residency tables, profile.h); = tpot_ms elsewhere. combine()
                            // mixes the two by the model's residency
  int64_t weight_bytes = 0;
  int64_t kv_cache_bytes = 0;
  int64_t state_bytes = 0;       // a Mamba-2 layer's recurrent state of the B sequences
  int64_t activation_bytes = 0;  // live bytes at this part's peak (prefill), not summed

  PartCost& operator+=(const PartCost& o);
};

struct CostEstimate {
  double ttft_ms = 0;                  // prefill of B x prompt tokens, incl. first logits
  double tpot_ms = 0;                  // one decode step at the median context
  double throughput_tokens_per_s = 0;  // B * output / (TTFT + output * TPOT)
  int64_t weight_bytes = 0, kv_cache_bytes = 0, activation_bytes = 0, reserve_bytes = 0;
  int64_t state_bytes = 0;             // Mamba-2 conv + SSM state of the B sequences (constant
                                       // in the context; 0 for a model without Mamba-2 layers)
  int64_t peak_memory_bytes = 0;       // sum of the five above
  std::vector<double> layer_ttft_ms, layer_tpot_ms;         // [L]
  std::vector<int64_t> layer_weight_bytes, layer_kv_cache_bytes, layer_state_bytes;  // [L]
  PartCost fixed;      // embedding, final norm, head, step overhead
  double residency = 0;  // Profile::residency of weight + KV-cache bytes: the share of the
                         // decode step's weights costed as cache-resident (0 without one)
  std::string source;  // "profile", "profile+ENGINE" (an engine measured on this CPU: its
                       // calibration in the profile) or "roofline"

  json to_json() const;
};

/// The cost of `config` in `scenario`. With `profile` (must come from scenario.device) the
/// native engine's ops are looked up in its tables; without, the roofline of the device spec
/// is used (a CPU has no spec peaks: its profile is required).
/// Throws ConfigError on a profile of another device, a CPU without profile, or a dtype the
/// device does not support; ConfigError from config.validate on a bad config.
CostEstimate predict(const ModelConfig& config, const Scenario& scenario, const Profile* profile);

/// Cost of one layer's attention part / FFN part (D = hidden size); for the search's tables.
PartCost attention_part_cost(const ModelConfig& config, const LayerConfig& layer,
                             const Scenario& scenario, const Profile* profile);
PartCost ffn_part_cost(const ModelConfig& config, const LayerConfig& layer,
                       const Scenario& scenario, const Profile* profile);
/// Cost of what every step does once: embedding, final norm, head, engine overhead.
PartCost fixed_cost(const ModelConfig& config, const Scenario& scenario, const Profile* profile);
/// Combines parts into an estimate (sums, activation peak = max, engine reserve, throughput).
/// With `profile`, each part's decode cost is tpot_ms - h (tpot_ms - tpot_warm_ms), h =
/// profile->residency(weight + KV-cache bytes of all parts): the share of the weights that stays
/// in the CPU's last-level cache from one step to the next.
CostEstimate combine(const std::vector<PartCost>& attention, const std::vector<PartCost>& ffn,
                     const PartCost& fixed, const Scenario& scenario, const std::string& source,
                     const Profile* profile = nullptr);

/// KV-cache capacity in tokens: prompt + output, rounded up to the engine's block size.
int64_t kv_capacity_tokens(const Workload& w, const EngineSpec& engine);

/// One limit against one estimate. slack = (limit - value) / limit for maxima, (value - limit)
/// / limit for the throughput minimum: >= 0 when the limit holds.
struct LimitSlack {
  std::string name;  // "ttft_ms", "tpot_ms", "peak_memory_bytes", "min_throughput_tokens_per_s"
  double limit = 0, value = 0, slack = 0;
  bool holds() const { return slack >= 0; }
};

/// Slack of every absolute limit that is set. Throws ConfigError if relative limits are left
/// (resolve them with pipeline/limits.h first).
std::vector<LimitSlack> limit_slack(const CostEstimate& estimate, const Limits& limits);

/// "" when every limit holds, else one clause per broken limit, e.g.
/// "tpot_ms: expected <= 12.5, found 13.2 (5.6% over)"; clauses joined by "; ".
std::string check_limits(const CostEstimate& estimate, const Limits& limits);

}  // namespace ac
