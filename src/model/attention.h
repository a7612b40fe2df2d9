// The self-attention of a decoder block, shared by every model kind that has one (the
// Llama-family forward, model/llama.h; the sparse MoE decoders, model/moe_model.h): the token
// check, the positions and masks of one forward, and one layer's attention up to o_proj (q/k/v
// projections with their biases, Qwen3's q/k norms, RoPE, the KV cache, GQA).
//
// Reference: transformers modeling_llama.py LlamaAttention (modeling_qwen3.py and
// modeling_qwen3_moe.py for the q/k norms, modeling_mixtral.py MixtralAttention: the same
// computation).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "model/config.h"
#include "model/llama.h"
#include "model/weights.h"

namespace ac {

/// Throws ConfigError("[forward] ...") unless tokens is a non-empty int64 [B, T] of ids in
/// [0, V).
void check_tokens(const ModelConfig& c, const at::Tensor& tokens);

/// What every attention layer of one forward over tokens [B, T] shares: the positions, the
/// mask and the RoPE tables (built once per head_dim).
struct AttentionSetup {
  int64_t B = 0, T = 0;
  int64_t pos0 = 0;  // the first token's position (the cache's length before this forward)
  int64_t S = 0;     // keys visible: pos0 + T
  /// A block from position 0 without padding: the fused causal kernel, no mask.
  bool fused_causal = false;
  /// [T, S] or [B, 1, 1, T, S] bool, true = key visible; undefined = every key (decode).
  at::Tensor allowed;
  c10::Device device = c10::kCPU;
  std::map<int64_t, std::pair<at::Tensor, at::Tensor>> rope;  // head_dim -> cos, sin [T, Hd]
};

/// The setup of a forward over `tokens` [B, T] (on their device), continuing `cache` when given
/// (nullptr: from position 0), with `attention_mask` [B, S] (1 = real token, 0 = padding) when
/// given. Throws ConfigError("[forward] ...") when the cache holds fewer than S positions, or S
/// passes the config's sliding_window (the forward attends over every earlier position).
AttentionSetup attention_setup(const ModelConfig& c, const at::Tensor& tokens,
                               const KVCache* cache, const at::Tensor* attention_mask);

/// Layer `layer`'s attention of the normed hidden states h [B, T, D] fp32, before o_proj:
/// returns [B, T, H, Hd]. Appends this forward's keys and values to `cache` (nullptr: none) at
/// positions [pos0, S) and attends over all S; the caller sets cache->length after the last
/// layer. The layer must have attention (internal check).
at::Tensor attention_heads(const ModelConfig& c, int64_t layer, const LayerWeights& lw,
                           const at::Tensor& h, KVCache* cache, AttentionSetup& setup);

}  // namespace ac
