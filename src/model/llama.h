// The Llama-family decoder (Llama, Mistral, Qwen2, Qwen3, DeciLM/nemotron-nas heterogeneous
// blocks): GQA, RoPE (rotate-half, HF convention; llama3 rope_scaling), RMSNorm, SwiGLU, tied or
// untied head, qkv bias, q/k norms (Qwen3), optional masks (the search's supernet) and a KV
// cache for generation.
//
// Reference: HF transformers modeling_llama.py (modeling_qwen3.py for the q/k norms); the
// golden tests compare against tests/golden/reference.py (python3-torch, float64) and against
// transformers' own classes (tests/golden/hf_golden.py, tests/test_hf_golden.cpp).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <optional>

#include "model/config.h"
#include "model/weights.h"

namespace ac {

/// Structural masks on the full model (docs/design.md, "The architecture space": nested masks make
/// one supernet of every candidate). Undefined tensors mean "keep all". Values in [0, 1]; with 0/1
/// values the masked model equals the physically pruned one (tests/test_prune.cpp). Soft values are
/// allowed for the search.
struct LayerMasks {
  at::Tensor heads;      // [H]   multiplies each query head's attention output before o_proj
  at::Tensor ffn;        // [F]   multiplies the SwiGLU activation (input of down_proj)
  at::Tensor attn_gate;  // []    multiplies the attention branch (0 = attention removed)
  at::Tensor ffn_gate;   // []    multiplies the FFN branch (0 = FFN removed)
};
struct Masks {
  at::Tensor hidden;  // [D] hidden channels; RMSNorm then averages over the kept channels only
  std::vector<LayerMasks> layers;
};

/// KV cache for decoding: per layer k, v of shape [B, G, T_max, Hd]; `length` tokens filled.
struct KVCache {
  std::vector<at::Tensor> k, v;
  int64_t length = 0;
  int64_t capacity = 0;
  /// Allocates for batch B and up to `capacity` positions (fp32), on `device` (the model's).
  static KVCache allocate(const ModelConfig& c, int64_t batch, int64_t capacity,
                          const c10::Device& device = c10::kCPU);
  /// Bytes held by the cache tensors (for measured peak memory).
  int64_t bytes() const;
};

/// Callbacks to observe intermediates without keeping them (importance, hidden-state loss).
/// Each receives a tensor that is only valid during the call.
struct ForwardObserver {
  virtual ~ForwardObserver() = default;
  virtual void on_embedding(const at::Tensor& x) {}                  // [B, T, D]
  virtual void on_norm(int64_t layer, int which, const at::Tensor& x) {}  // [B,T,D]; which 0 attn, 1 ffn, 2 final (layer = L)
  virtual void on_attn_heads(int64_t layer, const at::Tensor& x) {}  // [B, T, H, Hd] before o_proj
  virtual void on_ffn_act(int64_t layer, const at::Tensor& x) {}     // [B, T, F] input of down_proj
  virtual void on_block(int64_t layer, const at::Tensor& in, const at::Tensor& out) {}  // [B,T,D]
};

/// Options of one forward pass. Defaults: no cache, no masks, logits for every position.
struct ForwardOptions {
  KVCache* cache = nullptr;        // appends to the cache; positions continue from cache->length
  const Masks* masks = nullptr;
  ForwardObserver* observer = nullptr;
  bool last_logits_only = false;   // return [B, 1, V] (prefill in generation)
  const at::Tensor* attention_mask = nullptr;  // [B, T] 1 = real token, 0 = padding (keys masked)
  /// A slice of a deeper model, run one part at a time (importance streamed layer by layer,
  /// importance.h): start from these hidden states [B, T, D] instead of the tokens' embedding
  /// (no on_embedding; the tokens still give B, T, the positions and the device), ...
  const at::Tensor* inputs_embeds = nullptr;
  /// ... number the layers from here in the observer's callbacks (this model's layer 0 is the
  /// full model's layer `first_layer`; the final norm is reported as layer L + first_layer), ...
  int64_t first_layer = 0;
  /// ... and return the residual stream after the last layer, without the final norm.
  bool final_norm = true;
};

/// A decoder: config + weights. Cheap to copy (tensors share storage).
struct LlamaModel {
  ModelConfig config;
  ModelWeights weights;

  /// tokens: [B, T] int64 -> logits [B, T, V] fp32 (or [B, 1, V] with last_logits_only).
  /// Throws ConfigError on a token id outside [0, V) or a cache that is too small.
  at::Tensor forward(const at::Tensor& tokens, const ForwardOptions& opt = {}) const;

  /// Final hidden states (after the final norm) [B, T, D], same options as forward.
  at::Tensor hidden_states(const at::Tensor& tokens, const ForwardOptions& opt = {}) const;
};

/// Scaled dot-product attention (Vaswani et al. 2017, eq. 1) of grouped queries (GQA, Ainslie
/// et al. 2023: query head h reads KV group h / (H/G), by broadcasting as HF's repeat_kv):
///   softmax(q k^T / sqrt(Hd), masked) v.
/// qg [B, G, H/G, T, Hd], k and v [B, G, S, Hd] fp32; allowed: bool, true = key s visible to
/// query t, broadcastable to [B, G, H/G, T, S] ([T, S] causal, or [B, 1, 1, T, S] with padding),
/// or undefined (every key visible: decode). Returns [B, G, H/G, T, Hd]. Masked scores are set
/// to the lowest float (a row with no visible key gets uniform weights, as HF's eager
/// attention). The 1/sqrt(Hd) is applied to q (T x Hd values) rather than to the T x S scores,
/// and the mask in place: the forward and the profile (hardware/native_ops.h) both run this.
at::Tensor grouped_attention(const at::Tensor& qg, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& allowed);

/// The causal mask of T queries at absolute positions [pos0, pos0 + T) over the S = pos0 + T
/// keys before and among them: allowed [T, S] bool, true where key s <= query position. The one
/// builder of it (the forward, the profile, causal_attention's ATen fallback), on `device`.
at::Tensor causal_allowed(int64_t pos0, int64_t T, const c10::Device& device = c10::kCPU);

/// cos/sin tables for positions [pos0, pos0 + T): each [T, Hd] (rotate-half layout), fp32.
/// Implements HF's default and "llama3" rope_scaling (transformers _compute_llama3_parameters).
/// Computed in float64 on the CPU, then moved to `device` (the forward's: the tokens').
std::pair<at::Tensor, at::Tensor> rope_tables(const ModelConfig& c, int64_t head_dim, int64_t pos0,
                                              int64_t T, const c10::Device& device = c10::kCPU);

/// Greedy or sampled generation with a KV cache.
struct GenerateOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0.0;  // 0 = greedy
  double top_p = 1.0;
  uint64_t seed = 0;
  bool stop_at_eos = true;
};
/// prompt: token ids (BOS included by the caller). Returns the new tokens only.
std::vector<int64_t> generate(const LlamaModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt);

/// One decode step of any model kind: input [1, t] int64 (the prompt, then one token) ->
/// logits [1, 1, V] of its last position, the step's cache updated by the callee.
using DecodeStep = std::function<at::Tensor(const at::Tensor& input)>;

/// generate's loop over `step` (the MoE and Nemotron-H generate overloads share it): the pick on
/// the CPU (greedy at temperature 0, else nucleus sampling with a CPU generator seeded opt.seed),
/// stopping at eos_token_id when opt.stop_at_eos. `device` is the model's. Throws ConfigError on
/// an empty prompt.
std::vector<int64_t> generate_with(const DecodeStep& step, const c10::Device& device,
                                   int64_t eos_token_id, const std::vector<int64_t>& prompt,
                                   const GenerateOptions& opt);

/// Batched sampling: B sequences from the same prompt, `T` new tokens each, no early stop
/// (sequences are cut at EOS by the caller). Returns [B, T] int64. Used for teacher-sampled text.
at::Tensor sample_batch(const LlamaModel& m, const std::vector<int64_t>& prompt, int64_t batch,
                        int64_t new_tokens, double temperature, double top_p, uint64_t seed);

}  // namespace ac
