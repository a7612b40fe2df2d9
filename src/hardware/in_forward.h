// The decode step's operator classes timed inside a real forward, and their ratio to the
// profile's tables (docs/design.md, "In-forward ratios").
//
// Why: each table entry times one operator alone, in a loop, with its inputs and weights in
// whatever cache the loop leaves them; inside a decode step the same operator follows others
// that streamed their own weights. On machine C (docs/benchmarks.md, 2026-12-06) attention cost
// 1.3-2.8x its table inside a step, the norms, SwiGLU and residual adds 2-5.5x, the output head
// 0.7-0.9x, and the ratios move with the hidden size. A correction fitted on whole forwards
// alone could not separate the classes (their sums are collinear over the calibration set) and
// moved cost from the per-layer operators onto the head and the GEMMs, so a model that removes
// layers was predicted cheaper, relative to the teacher, than it is. Here each class's cost is
// measured where it is spent: the base's layers at a ladder of hidden sizes, one decode step
// written out op for op (as LlamaModel's forward runs it), each op timed alone inside the step.
// The ratio in-forward / table, interpolated in the hidden size, scales the tables of the
// decode phase (cost_model.cpp); the correction is then fitted around it (calibration.h).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "hardware/correction.h"
#include "hardware/profile.h"
#include "model/llama.h"

namespace ac {

/// One decode step of the native forward split by operator class, wall-clock ms: gemm (the
/// q/k/v/o and gate/up/down projections), attention (native_ops::attention: RoPE, cache write,
/// scores, softmax, weighted sum), elementwise (embedding, RMSNorms, SwiGLU, residual adds),
/// lm_head (the output head), total (the whole step, including what lies between the timed
/// ops). logits: [1, 1, V] fp32, the step's output.
struct DecodeStepSplit {
  double gemm = 0, attention = 0, elementwise = 0, lm_head = 0, total = 0;
  at::Tensor logits;
};

/// One decode step of `m` (fp32, on the CPU, no masks) for `token` [1, 1] int64 at position
/// `pos`, op for op as LlamaModel::forward runs it, each operator timed alone. cache_k /
/// cache_v: per layer [1, G, T_max, Hd] with positions [0, pos) filled (KVCache's layout;
/// written at pos). The logits equal LlamaModel::forward's through a KVCache of the same
/// content (tested). Throws ConfigError when a layer's cache is missing or pos >= T_max.
DecodeStepSplit timed_decode_step(const LlamaModel& m, std::vector<at::Tensor>& cache_k,
                                  std::vector<at::Tensor>& cache_v, int64_t pos,
                                  const at::Tensor& token);

/// What measure_in_forward does.
struct InForwardOptions {
  std::vector<int64_t> hidden_sizes;  // the base's layers at these widths (empty: in_forward_widths)
  int rounds = 3;       // interleaved rounds over the widths (a drift hits them alike)
  int steps = 0;        // timed decode steps per width and round (after 2 untimed), at the
                        // positions of a real decode: prompt, prompt + 1, ... (wrapping after
                        // the output's length); 0: as many as the workload's output tokens
  uint64_t weight_seed = 1000;
  bool progress = false;
};

/// Whether timed_decode_step mirrors `c`'s forward: a plain Llama-family decoder (no qk_norm,
/// sliding window, Mamba-2 or MoE layers), the only kind measure_in_forward measures.
bool in_forward_measures(const ModelConfig& c);

/// The hidden sizes measure_in_forward times by default: multiples of `step` from 0.4 x the
/// base's hidden size to it, thinned to at most `max_count` (the base's own always included).
std::vector<int64_t> in_forward_widths(int64_t base_hidden_size, int64_t step, int max_count = 12);

/// Per hidden size D of `opt`, the base (`base` with hidden_size D, its layers as they are)
/// run for the decode steps of a request (its positions after the prompt, as measure_native
/// times them) in interleaved rounds; per class the 10th percentile of the timed steps (the
/// statistic of a measured TPOT) divided by the same class's sum of `profile`'s decode tables
/// for that model (correction_features of the profile without its in-forward ratios), with the
/// time between the ops spread over the classes (InForwardRatio). Needs a CPU profile with
/// tables; the weights are random (seed weight_seed + width index). Throws ConfigError on an
/// empty ladder, rounds < 1, steps < 0, or a base that is not a plain Llama-family decoder.
std::vector<InForwardRatio> measure_in_forward(const Profile& profile, const ModelConfig& base,
                                               const Workload& workload,
                                               const InForwardOptions& opt);

}  // namespace ac
