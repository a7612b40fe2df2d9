// Log-likelihood of continuations: the request type every benchmark task reduces to
// (lm-evaluation-harness `loglikelihood` requests: `lm_eval/api/model.py`, and
// `HFLM._loglikelihood_tokens` for the batching and truncation followed here).
//
// A request is (context, continuation) as token ids. The model reads
//   input = (context ++ continuation)[:-1]                       [Tc + Tn - 1]
// and the answer is
//   loglikelihood = sum_{j < Tn} log q(cont_j | context, cont_<j)   nats
//   is_greedy     = for every j, cont_j = argmax q(. | context, cont_<j)
// (is_greedy is true exactly when greedy decoding from the context produces the continuation,
// token for token). An input longer than max_length loses context tokens from the left, as
// lm-evaluation-harness does.
//
// Two fast paths give the same numbers as one forward pass per request (tests/test_tasks.cpp
// checks both against that plain float64 computation):
//   - requests are right-padded and run in batches sorted by length (padding after the real
//     tokens changes nothing under a causal mask), and the output head runs only at the
//     continuation positions;
//   - requests are grouped by context, and contexts that are prefixes of a longer one (the
//     items cut from one story) join it in a chain: the longest context runs once, each
//     context's first continuation token is scored from its hidden states, and the rest of the
//     continuations (the choices of an item) run together on a copy of its KV cache cut at
//     that context's length. Requests that need left truncation take the padded path.
#pragma once
#include <cstdint>
#include <vector>

#include "model/llama.h"

namespace ac {

/// One (context, continuation) pair of token ids.
struct LoglikelihoodRequest {
  std::vector<int64_t> context;       // [Tc >= 1] ids (BOS first for Llama models)
  std::vector<int64_t> continuation;  // [Tn >= 1] ids
};

struct LoglikelihoodResult {
  double loglikelihood = 0;  // sum of log q over the continuation tokens, nats (<= 0)
  bool is_greedy = false;    // every continuation token is the argmax at its position
  int64_t tokens = 0;        // Tn
};

struct LoglikelihoodOptions {
  int64_t max_batch_tokens = 4096;  // B x T (padded) per forward pass
  int64_t max_length = 0;           // longest input; 0 = config.max_position_embeddings
  bool share_contexts = true;       // the KV-cache path (context chains); false = all padded
  bool show_progress = false;
};

/// Scores every request with `model` under NoGradGuard; results are in request order. Throws
/// ConfigError on an empty context or continuation, a token id outside [0, V), or a
/// continuation that alone does not fit max_length.
std::vector<LoglikelihoodResult> loglikelihoods(const LlamaModel& model,
                                                const std::vector<LoglikelihoodRequest>& requests,
                                                const LoglikelihoodOptions& opt = {});

}  // namespace ac
