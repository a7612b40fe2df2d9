// Evaluation: perplexity, and agreement with the teacher (KL, top-1) — the `eval` stage.
//
// Definitions (every position t of a window of T tokens that has a next token, t < T - 1):
//   perplexity     = exp( mean_t  -log q(x_{t+1} | x_<=t) )         (nats inside, no base 2)
//   kl_to_teacher  = mean_t KL(p_teacher(. | x_<=t) || q(. | x_<=t))  nats per token, tau = 1
//   top1_agreement = mean_t [argmax p_teacher = argmax q]
// Windows are packed as in training (data/dataset.h), so the first tokens of a window see a
// short context; sliding_window_perplexity scores a long stream with a full context instead
// (HF transformers "Perplexity of fixed-length models").
#pragma once
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "data/dataset.h"
#include "model/llama.h"

namespace ac {

struct EvalOptions {
  int64_t batch_size = 8;    // B windows per forward pass
  int64_t seq_len = 256;     // T (window length; T - 1 predicted positions per window)
  int64_t max_batches = -1;  // < 0 = every window of the data
  bool show_progress = true;
};

struct EvalResult {
  double perplexity = 0;       // exp(mean_nll)
  double mean_nll = 0;         // nats per predicted token
  bool has_teacher = false;
  double kl_to_teacher = 0;    // nats per predicted token (when has_teacher)
  double top1_agreement = 0;   // fraction in [0, 1] (when has_teacher)
  int64_t tokens = 0;          // predicted positions scored
  int64_t sequences = 0;       // windows scored
  double wall_s = 0;

  /// {"perplexity", "mean_nll", "tokens", "sequences", "wall_s"} plus
  /// {"kl_to_teacher", "top1_agreement"} when a teacher was given.
  nlohmann::json to_json() const;
};

/// Evaluates `model` on batches of tokens, each [B, T] int64 (T >= 2), against `teacher` when
/// not null (same vocabulary). Runs under NoGradGuard; sums are accumulated in double.
/// Throws ConfigError on a vocabulary mismatch, an empty batch list or a batch with T < 2.
EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt = {});

/// Same on a dataset: its windows in stream order (opt.batch_size, opt.seq_len, max_batches).
EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt = {});

/// Perplexity of a long stream [N] with a sliding window: windows of `context` tokens start
/// every `stride` tokens, and each scores only the tokens not scored before (so each token,
/// except the first, is predicted once, with at least context - stride tokens of history).
/// Throws ConfigError unless 0 < stride < context and N >= 2. Fills perplexity, mean_nll,
/// tokens, sequences.
EvalResult sliding_window_perplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                     int64_t context, int64_t stride);

}  // namespace ac
