// Blockwise local distillation (BLD): each changed block of a pruned student is trained, alone,
// to reproduce what its teacher blocks do to the teacher's own residual stream.
//
// Sources: Puzzle (Bercovich et al., 2024, arXiv 2411.19146, section 4.1 "Blockwise local
// distillation", Table 12: without it MMLU drops 78.4 -> 75.4), and Model-Optimizer's
// Minitron-vs-Puzzletron guide (examples/pruning/minitron_vs_puzzletron: the candidate that
// removes attention in many layers leads before distillation and trails after it, and BLD of the
// attention-removed blocks' FFNs brings it back). Every block sees the teacher's input, not the
// student's, so the blocks train independently and in parallel, and a block whose attention was
// removed learns to make up for it in its FFN.
//
// For student layer i, mapped to teacher layer t_i (prune/pruning_map.h, `layers`), with the
// teacher's residual stream x_t entering teacher layer t (x_0: the embedding) and x_L after its
// last layer (before the final norm), both restricted to the student's hidden channels
// (`hidden_channels`):
//   input  X_i = x_{t_i}       (x_0 for i = 0: the student's first block reads the embedding)
//   target Y_i = x_{t_{i+1}}   (x_L for the last student layer)
// so a block also stands in for the teacher layers that depth pruning dropped after it (and the
// first block for those dropped before it), and the blocks' spans tile [0, L). The loss
// of block i is hidden_state_loss({block_i(X_i)}, {Y_i}, normalize = true) (distill/hidden_loss.h:
// the share of the teacher's per-channel variance the block misses); the blocks' losses are
// summed and minimised by AdamW (no weight decay: the block imitates, nothing pulls it toward
// zero) under distill()'s warm-up + cosine schedule (lr_at). Embedding, final norm and head stay
// as pruned.
//
// A block is trained when it differs from its teacher layer: other widths (heads, KV groups,
// FFN width, attention or FFN removed), a narrower hidden size (every block then), or a span of
// more than one teacher layer. A block equal to its teacher layer on the full hidden size that
// stands in for that layer alone would start at zero loss and is left alone.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/accelerator.h"
#include "data/dataset.h"
#include "distill/distill.h"
#include "model/llama.h"
#include "prune/pruning_map.h"

namespace ac {

/// Options of blockwise_local_distill(). Defaults suit a stories15M-sized student on a CPU.
struct BldOptions {
  int64_t token_budget = 8192;  // teacher tokens every trained block sees; steps = budget / (B*T)
  int64_t batch_size = 2;       // B sequences per step
  int64_t seq_len = 256;        // T
  double lr = 1e-3;             // peak learning rate (AdamW)
  double min_lr = 1e-4;         // end of the cosine decay
  int64_t warmup_steps = 1;     // linear warm-up steps
  uint64_t seed = 0;            // data order (TokenDataset::batch)
  c10::Device device = c10::kCPU;  // where the teacher forward and the blocks run
  bool show_progress = true;
};

/// One trained block.
struct BldBlock {
  int64_t student_layer = 0;     // i
  int64_t teacher_first = 0;     // t_i (0 for i = 0)
  int64_t teacher_end = 0;       // t_{i+1} (L for the last): the block stands in for [first, end)
  double loss_before = 0;        // L_hid of the block on the evaluation batch, before training
  double loss_after = 0;         // the same after training
};

/// What blockwise_local_distill() did.
struct BldResult {
  std::vector<BldBlock> blocks;  // the trained blocks, in layer order (empty: none differed)
  int64_t steps = 0;
  int64_t tokens = 0;            // teacher tokens seen (steps x B x T); 0 when no block trained
  /// Tokens of the training batches the teacher was run on in this call (a batch whose
  /// residual stream a BldTeacherCache already held costs none): tokens without a cache.
  int64_t teacher_tokens = 0;
  double wall_s = 0;
};

/// The teacher's residual stream on the blockwise distillation's batches, at the teacher's full
/// hidden size, kept across calls of blockwise_local_distill() on the same data, options and
/// teacher: several students (the search's finalists, however they are pruned) are trained on
/// the teacher's states of the same batches, so the teacher runs once per batch, not once per
/// student. Each call takes its student's hidden channels from the kept states. A batch whose
/// states would take the cache past max_bytes is not kept (computed again when asked again).
/// Bound to the first call's seed, batch size, sequence length and teacher; a call with others
/// throws InternalError.
struct BldTeacherCache {
  int64_t max_bytes = int64_t(1) << 30;  // host or device bytes the kept states may take
  int64_t bytes = 0;                     // taken so far
  /// Step -> x_0 .. x_L, [B, T, D] float each (step -1: the evaluation batch).
  std::map<int64_t, std::vector<at::Tensor>> states;
  const LlamaModel* teacher = nullptr;   // the teacher of the first call
  uint64_t seed = 0;
  int64_t batch_size = 0, seq_len = 0;
};

/// Trains the changed blocks of `student` (in place; requires_grad left off) to map the
/// teacher's residual stream into the teacher's, as the header says. `map`: student -> teacher
/// (checked with check_pruning_map). `data`: the teacher's text (the distillation's). The
/// evaluation batch of loss_before / loss_after is the batch of step 0 of seed + 1 (not trained
/// on when the budget is one step). Throws ConfigError on a map that does not fit, a budget
/// below one step (B x T tokens), or what the forward throws; Interrupted (distill/distill.h)
/// on SIGINT / SIGTERM, at the next step (the student is then part-trained: the caller redoes it).
/// `cache` (optional): the teacher's states of earlier calls, reused and added to (the same
/// result as without it: the same states, computed once).
BldResult blockwise_local_distill(const LlamaModel& teacher, LlamaModel& student,
                                  const PruningMap& map, const TokenDataset& data,
                                  const BldOptions& opt, BldTeacherCache* cache = nullptr);

/// The options of a blockwise distillation of `tokens` tokens that starts a distillation with
/// `d`: its sequence length, data seed and device (the rest: BldOptions' defaults), no progress.
BldOptions bld_options_for(const DistillOptions& d, int64_t tokens);

/// The student layers blockwise_local_distill() would train (ascending).
std::vector<int64_t> bld_changed_blocks(const ModelConfig& teacher, const ModelConfig& student,
                                        const PruningMap& map);

/// The teacher layers [first, end) student layer i stands in for (the header's X_i, Y_i).
std::pair<int64_t, int64_t> bld_span(const PruningMap& map, int64_t i, int64_t teacher_layers);

}  // namespace ac
