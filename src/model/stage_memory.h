// How much memory a stage holds on its compute device, by part, said before the stage starts
// (the `plan`-style arithmetic of a run: docs/gpu.md, "Memory"). A stage on a GPU whose plan
// does not fit the free memory is refused with the parts and the numbers, before it allocates.
//
// The estimate (bytes; e = 4 for fp32 activations, 2 under bf16 autocast):
//   weights            4 N per model held (fp32 master weights), + 2 N_matrices per model
//                      under bf16 autocast (its cache of bf16 copies)
//   gradients, AdamW   4 N + 8 N of the trained model (exp_avg, exp_avg_sq: Loshchilov & Hutter
//                      2019, "Decoupled Weight Decay Regularization", Algorithm 2)
//   saved activations  per token and layer: (7 D + 3 H Hd + 3 G Hd + 4 F) e, plus the attention
//                      scores and probabilities 2 H T e (the generic attention materialises
//                      both); a forward without gradients holds one layer's worth, not all
//   logits             per token: 6 V x 4 (teacher and student logits, both log-softmaxes,
//                      the teacher's probabilities, the gradient: distill_loss_reference, the
//                      path off the CPU); a forward without gradients 3 V x 4
// with N, D, H, Hd, G, F, V of model/config.h. The counting allocator's peak of a distillation
// step on the CPU's generic path stays under this estimate (tests/test_device_path.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/accelerator.h"
#include "model/config.h"

namespace ac {

/// The parts of a stage's memory on its device, in bytes.
struct MemoryPlan {
  std::vector<std::pair<std::string, int64_t>> parts;  // name -> bytes, in order
  int64_t total() const;
  /// "teacher weights 4.40 GiB, ... = 35.1 GiB".
  std::string describe() const;
};

/// A distillation step (distill/distill.h) on `batch` sequences of `seq_len` tokens per rank:
/// both models' weights, the student's gradients and AdamW state, its saved activations, the
/// teacher's working set and the logits path.
MemoryPlan distill_memory(const ModelConfig& teacher, const ModelConfig& student, int64_t batch,
                          int64_t seq_len, Precision precision);

/// A forward of `model` on `batch` x `seq_len` tokens: with_grad (the search's supernet, whose
/// masks take gradients) holds every layer's activations, otherwise one layer's (importance,
/// evaluation, the search's candidates).
MemoryPlan forward_memory(const ModelConfig& model, int64_t batch, int64_t seq_len,
                          bool with_grad, Precision precision);

/// FLOPs of one token of a forward with T-token windows (PaLM's accounting, Chowdhery et al.
/// 2022, appendix B): 2 per weight of every matrix product (the layers' projections and the
/// output head; the embedding lookup computes nothing) plus 4 T H Hd per attention layer
/// (q k^T and the weighted sum of v over T keys, the causal half not subtracted).
double forward_flops_per_token(const ModelConfig& c, int64_t T);

/// FLOPs of one distillation token: the student's forward and backward (3 forwards) and the
/// teacher's forward. The numerator of the distillation's MFU (report.json "compute").
double distill_flops_per_token(const ModelConfig& teacher, const ModelConfig& student, int64_t T);

/// Throws ConfigError naming `who`, the device, every part and the free bytes when
/// plan.total() exceeds 90% of `free_bytes` (the rest for the caching allocator's
/// fragmentation and the CUDA context); does nothing when free_bytes is 0 (unknown).
void check_fits(const MemoryPlan& plan, const c10::Device& device, int64_t free_bytes,
                const std::string& who);

/// Whether `plan` fits 90% of the free memory of `device`: always on the CPU and when the free
/// memory is unknown.
bool fits_device(const MemoryPlan& plan, const c10::Device& device);

/// check_fits against device_free_bytes(device) on a CUDA device; nothing on the CPU, whose
/// tensors are in memory already when a stage starts (the models are loaded).
void check_fits_device(const MemoryPlan& plan, const c10::Device& device, const std::string& who);

}  // namespace ac
