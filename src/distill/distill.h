// Knowledge distillation of a (pruned) student toward its teacher: the `distill` stage.
//
// Method: logit distillation as in Minitron (Muralidharan et al., 2024, section 3.3; Sreenivas
// et al., 2024, "LLM Pruning and Distillation in Practice"): the student minimises
// KL(teacher || student) on the teacher's own data, optionally mixed with next-token CE
// (distill/loss.h). AdamW (Loshchilov & Hutter, 2019) with decoupled weight decay on matrices
// only, linear warm-up then cosine decay to min_lr, global-norm gradient clipping, gradient
// accumulation. fp32 throughout. Optionally a hidden-state loss between mapped layers
// (hidden_loss_weight > 0; distill/hidden_loss.h, the map from prune/pruning_map.h).
//
// Resumable: the state (student weights, AdamW moments, step, records) is written atomically
// to state_dir every `checkpoint_every` steps, at the end, and at the first step boundary after
// SIGINT or SIGTERM (a second signal kills the process as usual). The data order is a pure
// function of (seed, step) (data/dataset.h), so a resumed run continues bit for bit: same
// losses, same weights, given the same thread count.
//
// Non-finite steps: a non-finite loss or gradient skips the update; `max_consecutive_skips`
// skips in a row restore the last checkpoint (in memory; the one on disk when resuming) and
// multiply the learning rate by `skip_lr_factor` from then on; all of it is logged.
//
// Data-parallel (`parallel`, distill/data_parallel.h): each rank takes its contiguous shard of
// every global micro-batch (rows [r B/W, (r+1) B/W)), gradients are all-reduced (mean) before
// clipping and the step, rank 0 alone writes the state and the log.
//
// Vocabularies: teacher and student must have the same vocab_size, unless `shared_vocab` says
// how many leading ids they share (the caller checked that one token table is a prefix of the
// other): then both distributions are renormalised over ids [0, shared_vocab).
#pragma once
#include <cstdint>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "data/dataset.h"
#include "common/accelerator.h"
#include "model/llama.h"
#include "model/moe_model.h"
#include "model/nemotron_h_model.h"
#include "prune/pruning_map.h"

namespace ac {

class DataParallel;

/// One optimizer step, as logged in the CSV (one row per step).
struct StepRecord {
  int64_t step = 0;          // 0-based
  int64_t tokens = 0;        // tokens consumed after this step (B * T * grad_accum per step)
  double loss = 0;           // total loss (mean over micro-batches); NaN/inf when skipped
  double kl = 0;             // tau^2-scaled KL(teacher || student), nats per token
  double ce = 0;             // next-token CE (NaN when ce_weight == 0)
  double hidden = NAN;       // hidden-state loss L_hid (NaN when hidden_loss_weight == 0)
  double lr = 0;             // learning rate used
  double grad_norm = 0;      // global L2 norm before clipping
  double tokens_per_s = 0;   // throughput of this step (teacher forward + student fwd/bwd)
  bool skipped = false;      // non-finite loss or gradient: no update was made
};

/// Options of distill(). Defaults suit a stories15M-sized student on a CPU.
struct DistillOptions {
  int64_t token_budget = 1'000'000;  // training tokens; steps = budget / (B * T * grad_accum)
  int64_t batch_size = 8;            // B sequences per micro-batch
  int64_t seq_len = 256;             // T
  double lr = 3e-4;                  // peak learning rate
  double min_lr = 3e-5;              // end of the cosine decay
  int64_t warmup_steps = 10;         // linear warm-up from lr / warmup_steps to lr
  double weight_decay = 0.1;         // AdamW decoupled decay, matrices only (not norms/biases)
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  double grad_clip = 1.0;            // max global L2 norm; <= 0 disables clipping
  int64_t grad_accum = 1;            // micro-batches per optimizer step
  double temperature = 1.0;          // tau of the KL
  double ce_weight = 0.0;            // loss = (1 - w) KL + w CE (+ w_h L_hid, below)
  /// w_h: adds w_h * L_hid, the hidden-state loss between mapped layers (distill/hidden_loss.h);
  /// 0 = off (the default; the teacher's intermediate states are then not even captured).
  double hidden_loss_weight = 0.0;
  bool hidden_loss_normalize = true; // L_hid divides each layer's MSE by the teacher's variance
  /// Student -> teacher layers and kept hidden channels (prune/pruning_map.h); required when
  /// hidden_loss_weight > 0, checked against both models (ConfigError).
  std::optional<PruningMap> hidden_map;
  fs::path log_path;                 // CSV, one row per step; empty = none
  int64_t checkpoint_every = 100;    // steps between state saves; 0 = only at signal / end
  fs::path state_dir;                // folder of the resumable state; empty = not resumable
  uint64_t seed = 0;                 // data order
  bool resume = false;               // continue from state_dir (fresh start if no state there)
  int64_t stop_after_steps = -1;     // stop (saving state) after this many steps of this call
  bool show_progress = true;
  bool allow_nonfinite = false;      // run on NaN/Inf weights (else FormatError; model/finite.h)
  int64_t max_consecutive_skips = 3; // this many skipped steps in a row restore the checkpoint
  double skip_lr_factor = 0.5;       // ... and scale the learning rate by this from then on
  int64_t max_restores = 4;          // more restores than this: Error (the run diverges)
  int64_t shared_vocab = 0;          // > 0: compare over ids [0, shared_vocab) (prefix vocabs)
  /// Where the teacher, the student, the batches, the gradients and the optimizer state live
  /// (common/accelerator.h, --device): the models are copied there when they are elsewhere, and
  /// the trained weights copied back into `student` at the end.
  c10::Device device = c10::kCPU;
  /// bf16: the forwards under autocast (fp32 master weights and optimizer state; the loss on
  /// fp32 logits). fp32: every op in float.
  Precision precision = Precision::fp32;
  DataParallel* parallel = nullptr;  // data-parallel group; null = this process alone
  /// Called after backward (and the all-reduce), before clipping, with the gradients in
  /// parameter order; may modify them (tests inject non-finite values).
  std::function<void(int64_t step, std::vector<at::Tensor>& grads)> after_backward;
  /// Called after every step (tests, external monitors). May raise SIGINT to test shutdown.
  std::function<void(const StepRecord&)> on_step;
  /// Learning-curve checkpoints: after the first step whose tokens consumed (steps x B x T x
  /// grad_accum) reach a value of eval_at_tokens, on_eval is called once with that step, the
  /// tokens consumed and the student as it is then (on the run's device; the caller evaluates it
  /// without autograd, e.g. held-out KL for bench/ranking.sh). Values passed before a resume are
  /// not called again. Empty, or no on_eval: none.
  std::vector<int64_t> eval_at_tokens;
  std::function<void(int64_t step, int64_t tokens, const LlamaModel& student)> on_eval;
};

/// What distill() did, over the whole run (resumed parts included).
struct DistillResult {
  std::vector<StepRecord> steps;  // every step so far, in order
  std::vector<double> loss_curve; // steps[i].loss
  int64_t total_steps = 0;        // planned
  int64_t steps_done = 0;
  int64_t tokens = 0;             // tokens consumed so far
  int64_t skipped_steps = 0;
  int64_t restores = 0;           // checkpoint restores after repeated non-finite steps
  double lr_scale = 1.0;          // product of skip_lr_factor over the restores
  double wall_s = 0;              // seconds spent in training, all runs together
  bool interrupted = false;       // stopped early (signal or stop_after_steps); state saved
  int stop_signal = 0;            // the signal that stopped it (SIGINT, SIGTERM); 0 otherwise
  int64_t device_peak_bytes = 0;  // on a CUDA device: the caching allocator's peak of this call
                                  // (models, optimizer state, activations); 0 on the CPU
};

/// A stage stopped on SIGINT or SIGTERM with its state saved. `signal` is the signal's number (0
/// when the stop came otherwise, e.g. from another rank); the CLI exits with 128 + signal, the
/// shell's status for a process a signal ended (POSIX sh, "Exit Status"), so scripts and
/// schedulers see an interruption, not a failure.
struct Interrupted : Error {
  Interrupted(const std::string& what, int sig) : Error(what), signal(sig) {}
  int signal = 0;
};

/// Distills `student` toward `teacher` on `data`; `student.weights` are updated in place (and
/// left with requires_grad off). The teacher runs under InferenceMode (no autograd) and must not
/// share storage with the student. Throws ConfigError on incompatible models (vocab), a budget smaller than
/// one step, data ids outside the vocabulary, a batch that does not split over the ranks, an
/// existing state without `resume`, or a state saved with other options; FormatError on a
/// corrupt state file; Error when more than max_restores restores did not stop the divergence.
DistillResult distill(const LlamaModel& teacher, LlamaModel& student, const TokenDataset& data,
                      const DistillOptions& opt);

/// The same loop for a sparse MoE student (Qwen3-MoE, Mixtral) and for a Nemotron-H student
/// (Mamba-2, attention, relu² MLP, MoE layers), on the kind's own differentiable forward
/// (model/trainable.h: its parameters, e_score_correction_bias excepted, as transformers trains
/// them). Everything above holds (resume, non-finite steps, data parallel, precision, shared
/// vocabularies) except what reads the Llama forward's hidden states: the fused head is not used
/// (the loss takes the [B, T, V] logits), and ConfigError refuses hidden_loss_weight > 0 and
/// learning-curve evaluations (on_eval with eval_at_tokens). The GPU memory check before the copy
/// is the Llama family's only.
DistillResult distill(const MoeModel& teacher, MoeModel& student, const TokenDataset& data,
                      const DistillOptions& opt);
DistillResult distill(const NemotronHModel& teacher, NemotronHModel& student,
                      const TokenDataset& data, const DistillOptions& opt);

/// distill() inside a longer stage (compress, a subcommand, a search's retraining): a
/// distillation stopped by SIGINT / SIGTERM stops the whole stage, where distill() alone
/// returns with its state saved. Throws Interrupted (common/error.h, with r.stop_signal) naming
/// `stage`, the step and `how_to_resume` (default: nothing is kept) when `r.interrupted`.
void stop_if_interrupted(const DistillResult& r, const std::string& stage,
                         const std::string& how_to_resume = "stopped, nothing written");

/// Learning rate at step s of n: linear warm-up over warmup_steps to lr, then cosine decay to
/// min_lr at the last step.
double lr_at(int64_t step, int64_t total_steps, const DistillOptions& opt);

/// Drops each parameter's gradient (leaves .grad undefined), as PyTorch's
/// Optimizer.zero_grad(set_to_none=True), its default since 2.0. The next backward then stores
/// its gradient as it is, where zeroing would cost a fill of every gradient and an add into it
/// (45 ms of a 1.1 s stories15M-sized step, docs/benchmarks.md). AdamW and clip_grad_norm_ skip
/// parameters whose gradient is undefined.
void clear_gradients(const std::vector<at::Tensor>& params);

/// Name of the state file inside state_dir.
inline constexpr const char* kDistillStateFile = "distill_state.pt";

}  // namespace ac
