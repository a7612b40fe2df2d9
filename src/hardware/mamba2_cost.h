// The cost of a Mamba-2 mixer layer (model/mamba2_config.h) in a scenario: what the hardware does
// in the prefill (the chunked SSD scan) and in a decode step (the recurrence), the weights, and
// the constant recurrent state each sequence holds instead of a KV cache.
//
// Per layer, on the device roofline (hardware/roofline.h), M rows (B*T prefill, B decode), per
// GPU (tensor parallelism shards the heads, as vLLM's MambaMixer2 does):
//   rmsnorm(M, D) + in_proj GEMM(M, d_inner + conv_dim + nh, D)
//   + causal conv1d with SiLU over xBC: 2 M conv_dim Kc FLOPs, the [M, conv_dim] input read and
//     output written (decode: the conv state read and written besides)
//   + the SSM:
//       prefill, the SSD chunked scan (Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060,
//       §6: diagonal blocks, chunk states, state passing, off-diagonal output), per sequence of
//       T tokens in chunks of Q = min(chunk_size, T):
//         FLOPs = 2 T (Q N Gm  [C Bᵀ within a chunk, per group]
//                      + Q P nh [the masked scores times x, per head]
//                      + 2 N P nh [chunk states Bᵀ x, and C times the passed states])
//         bytes = x, B, C, dt read and y written [T, 2 d_inner + 2 Gm N + nh], the chunk states
//                 [T/Q, nh, P, N] in fp32 written and read, the final state written;
//         5 kernels (mamba_chunk_scan_combined: chunk_cumsum, chunk_state, state_passing,
//         bmm_chunk, chunk_scan; mamba_ssm ops/triton/ssd_combined.py, copied in vLLM
//         model_executor/layers/mamba/ops/ssd_combined.py);
//       decode, the recurrence h = exp(dt A) h + dt x Bᵀ, y = h C + D x (selective_state_update,
//         mamba_ssm ops/triton/selective_state_update.py): 5 nh P N FLOPs a token, the state
//         [nh, P, N] read and written in ssm_state_dtype, one kernel;
//   + gated RMSNorm (y silu(z)) over [M, d_inner] + out_proj GEMM(M, D, d_inner) + residual add
//     (unless the engine fuses add + rmsnorm).
// State (per sequence, whatever the context; vLLM mamba_utils.py
// MambaStateShapeCalculator.mamba2_state_shape): conv (Kc - 1) x conv_dim in the activation
// dtype + SSM nh x P x N in ssm_state_dtype.
// Activations at the prefill's peak, over the rows of one prefill pass: x, h [M, D], the
// in_proj output, the conv output and y, and the pass's chunk states in fp32.
#pragma once
#include <cstdint>

#include "hardware/cost_model.h"

namespace ac {

/// Bytes of one sequence's recurrent state in one Mamba-2 layer: (Kc - 1) conv_dim
/// `conv_bytes` + nh P N bytes of ssm_state_dtype. Throws ConfigError on an unknown dtype.
int64_t mamba2_state_bytes_per_sequence(const Mamba2Config& m, double conv_bytes);

/// The cost of layer `l`'s Mamba-2 mixer (l.mamba must be set) with its RMSNorm, on the device
/// roofline; the recurrent state of the workload's B sequences in PartCost::state_bytes.
/// Throws ConfigError when the scenario would be costed from a profile's op tables (the
/// native engine, or an engine measured on this CPU): the tables hold no Mamba-2 op.
PartCost mamba2_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                          const Profile* p);

}  // namespace ac
