// Evaluation: perplexity, bits per byte, and agreement with the teacher (KL, top-1, top-k
// overlap) — the `eval` stage. Benchmark tasks are in eval/tasks.h.
//
// Definitions (every scored position t of a window of T tokens that has a next token, t < T - 1):
//   perplexity     = exp( mean_t  -log q(x_{t+1} | x_<=t) )         (nats inside, no base 2)
//   bits_per_byte  = sum_t -log q(x_{t+1} | x_<=t) / (ln 2 * bytes)  bytes = UTF-8 bytes the
//                    scored tokens x_{t+1} decode to (TokenBytes); lm-evaluation-harness's
//                    bits_per_byte (Gao et al., 2020, "The Pile", eq. for BPB)
//   kl_to_teacher  = mean_t KL(p_teacher(. | x_<=t) || q(. | x_<=t))  nats per token, tau = 1
//   top1_agreement = mean_t [argmax p_teacher = argmax q]
//   topk_overlap   = mean_t |topk(p_teacher) ∩ topk(q)| / k            in [0, 1]
// Windows are packed as in training (data/dataset.h), so the first tokens of a window see a
// short context; sliding_window_evaluate scores a long stream with a full context instead
// (HF transformers "Perplexity of fixed-length models").
#pragma once
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "model/llama.h"
#include "model/moe_model.h"
#include "model/nemotron_h_model.h"

namespace ac {

class TextTokenizer;

/// UTF-8 bytes each token decodes to, for bits per byte: TextTokenizer::token_bytes
/// (byte-fallback tokens 1, BOS, EOS and other control tokens 0); with a SentencePiece dummy
/// prefix, a piece's leading space is not counted after BOS, where the decoder drops it.
struct TokenBytes {
  at::Tensor bytes;          // [V] int64: bytes of each token
  at::Tensor leading_space;  // [V] bool: the token carries a dummy-prefix space after BOS
  int64_t bos_id = 1;        // -1 when the tokenizer has no BOS

  static TokenBytes from_tokenizer(const TextTokenizer& tokenizer);
  /// Bytes of `targets` [N] int64, each following the token in `prev` [N] int64.
  int64_t count(const at::Tensor& targets, const at::Tensor& prev) const;
};

/// TokenBytes of a checkpoint folder's tokenizer (io/text_tokenizer.h load_tokenizer), [vocab_size]:
/// ids past the tokenizer's own (an embedding padded beyond it, as Qwen's are) hold 0 bytes;
/// nullopt when the folder has neither tokenizer.json nor tokenizer.bin. Throws FormatError as
/// load_tokenizer does.
std::optional<TokenBytes> token_bytes_of_checkpoint(const fs::path& dir, int64_t vocab_size);

struct EvalOptions {
  int64_t batch_size = 8;    // B windows per forward pass
  int64_t seq_len = 256;     // T (window length; T - 1 predicted positions per window)
  int64_t max_batches = -1;  // < 0 = every window of the data
  int64_t top_k = 5;         // k of topk_overlap, in [1, V]
  const TokenBytes* token_bytes = nullptr;  // fills bytes and bits_per_byte when set
  bool show_progress = true;
  /// Where the forwards run (common/accelerator.h, --device): the models and each batch are
  /// copied there; the sums are read back per batch.
  c10::Device device = c10::kCPU;
};

struct EvalResult {
  double perplexity = 0;       // exp(mean_nll)
  double mean_nll = 0;         // nats per predicted token
  bool has_teacher = false;
  double kl_to_teacher = 0;    // nats per predicted token (when has_teacher)
  double top1_agreement = 0;   // fraction in [0, 1] (when has_teacher)
  double topk_overlap = 0;     // fraction in [0, 1] (when has_teacher)
  int64_t top_k = 0;           // k of topk_overlap
  bool has_bytes = false;
  int64_t bytes = 0;           // UTF-8 bytes of the scored tokens (when has_bytes)
  double bits_per_byte = 0;    // (when has_bytes)
  int64_t tokens = 0;          // predicted positions scored
  int64_t sequences = 0;       // windows scored
  double wall_s = 0;

  /// {"perplexity", "mean_nll", "tokens", "sequences", "wall_s"} plus
  /// {"kl_to_teacher", "top1_agreement", "topk_overlap", "top_k"} when a teacher was given and
  /// {"bits_per_byte", "bytes"} when bytes were counted.
  nlohmann::json to_json() const;
};

/// Evaluates `model` on batches of tokens, each [B, T] int64 (T >= 2), against `teacher` when
/// not null (same vocabulary). Runs under NoGradGuard; sums are accumulated in double.
/// Throws ConfigError on a vocabulary mismatch, an empty batch list, a batch with T < 2 or
/// top_k outside [1, V].
EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt = {});

/// Same on a dataset: its windows in stream order (opt.batch_size, opt.seq_len, max_batches).
EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt = {});

/// The same metrics for a sparse MoE model (Qwen3-MoE, Mixtral) or a Nemotron-H hybrid against
/// a teacher of its kind, on the kind's forward (model/trainable.h). Throws as above; on a GPU
/// the memory check before the copy is the Llama family's only.
EvalResult evaluate(const MoeModel& model, const MoeModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt = {});
EvalResult evaluate(const NemotronHModel& model, const NemotronHModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt = {});
EvalResult evaluate(const MoeModel& model, const MoeModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt = {});
EvalResult evaluate(const NemotronHModel& model, const NemotronHModel* teacher,
                    const TokenDataset& data, const EvalOptions& opt = {});

/// A long stream [N] with a sliding window: windows of `context` tokens start every `stride`
/// tokens, and each scores only the tokens not scored before (so each token, except the first,
/// is predicted once, with at least context - stride tokens of history). Windows of equal
/// length run opt.batch_size at a time; opt.seq_len and max_batches are not used. Every metric
/// of `evaluate` (teacher ones when `teacher` is not null). Throws ConfigError unless
/// 0 < stride < context and N >= 2, or as `evaluate` does.
EvalResult sliding_window_evaluate(const LlamaModel& model, const LlamaModel* teacher,
                                   const std::vector<int32_t>& ids, int64_t context,
                                   int64_t stride, const EvalOptions& opt = {});

/// sliding_window_evaluate without a teacher, bytes or progress: perplexity, mean_nll, tokens,
/// sequences.
EvalResult sliding_window_perplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                     int64_t context, int64_t stride);

}  // namespace ac
