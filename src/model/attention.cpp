#include "model/attention.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/gemm.h"
#include "model/kernels.h"

namespace ac {

void check_tokens(const ModelConfig& c, const at::Tensor& tokens) {
  if (tokens.dim() != 2 || tokens.scalar_type() != at::kLong)
    throw ConfigError(fmt::format("[forward] tokens must be int64 [B, T], found {} {}",
                                  c10::toString(tokens.scalar_type()), tokens.sizes().vec()));
  if (tokens.numel() == 0) throw ConfigError("[forward] tokens is empty");
  int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  if (lo < 0 || hi >= c.vocab_size)
    throw ConfigError(fmt::format("[forward] token id {} outside the vocabulary [0, {})",
                                  lo < 0 ? lo : hi, c.vocab_size));
}

AttentionSetup attention_setup(const ModelConfig& c, const at::Tensor& tokens,
                               const KVCache* cache, const at::Tensor* attention_mask) {
  AttentionSetup s;
  s.B = tokens.size(0);
  s.T = tokens.size(1);
  s.pos0 = cache ? cache->length : 0;
  s.S = s.pos0 + s.T;
  s.device = tokens.device();
  if (cache && s.S > cache->capacity)
    throw ConfigError(fmt::format("[forward] KV cache holds {} positions, {} needed",
                                  cache->capacity, s.S));
  // Up to the window, sliding attention is plain causal attention; past it, it is not ours.
  if (c.sliding_window && s.S > *c.sliding_window)
    throw ConfigError(fmt::format(
        "[forward] config.json sliding_window {0} (model_type {1}): the model attends over the "
        "last {0} positions only, this forward over all of them; expected at most {0} positions, "
        "found {2}", *c.sliding_window, c.model_type, s.S));
  // A block from position 0 without padding is causal: the fused kernel (causal_attention),
  // which needs no mask. Otherwise allowed[t, s]: query t (absolute pos0 + t) may attend key s;
  // decode of one token without padding sees every key (no mask).
  s.fused_causal = s.pos0 == 0 && s.T > 1 && !attention_mask;
  if (!s.fused_causal && (s.T > 1 || attention_mask)) {
    s.allowed = causal_allowed(s.pos0, s.T, s.device);  // [T, S]
    if (attention_mask) {
      at::Tensor keys = attention_mask->to(s.device, at::kBool);  // [B, S]
      s.allowed = s.allowed.unsqueeze(0).logical_and(keys.view({s.B, 1, s.S}));  // [B, T, S]
      s.allowed = s.allowed.view({s.B, 1, 1, s.T, s.S});
    }
  }
  return s;
}

at::Tensor attention_heads(const ModelConfig& c, int64_t layer, const LayerWeights& lw,
                           const at::Tensor& h, KVCache* cache, AttentionSetup& s) {
  const LayerConfig& lc = c.layers.at(size_t(layer));
  AC_CHECK(lc.has_attention(), "layer {} has no attention", layer);
  const int64_t B = s.B, T = s.T, H = lc.num_attention_heads, G = lc.num_key_value_heads,
                Hd = lc.head_dim;
  auto it = s.rope.find(Hd);
  if (it == s.rope.end()) it = s.rope.emplace(Hd, rope_tables(c, Hd, s.pos0, T, s.device)).first;
  const auto& [cos, sin] = it->second;
  at::Tensor q = ac::linear(h, lw.q_proj, lw.q_bias).view({B, T, H, Hd});
  at::Tensor k = ac::linear(h, lw.k_proj, lw.k_bias).view({B, T, G, Hd});
  if (c.qk_norm) {  // Qwen3: each head normalized over its Hd, before RoPE
    q = ac::rms_norm(q, lw.q_norm, c.rms_norm_eps);
    k = ac::rms_norm(k, lw.k_norm, c.rms_norm_eps);
  }
  // RoPE into the heads' layout (model/kernels.h): q [B, H, T, Hd], k [B, G, T, Hd].
  q = rope_to_heads(q, cos, sin);
  k = rope_to_heads(k, cos, sin);
  at::Tensor v = ac::linear(h, lw.v_proj, lw.v_bias).view({B, T, G, Hd}).transpose(1, 2);
  if (cache) {
    cache->k[size_t(layer)].narrow(2, s.pos0, T).copy_(k);
    cache->v[size_t(layer)].narrow(2, s.pos0, T).copy_(v);
    k = cache->k[size_t(layer)].narrow(2, 0, s.S);
    v = cache->v[size_t(layer)].narrow(2, 0, s.S);
  }
  // GQA: query head h uses KV group h / (H/G), as HF repeat_kv; broadcast, no copy.
  at::Tensor qg = q.reshape({B, G, H / G, T, Hd});
  at::Tensor attn = s.fused_causal ? causal_attention(qg, k, v)
                                   : grouped_attention(qg, k, v, s.allowed);
  return attn.reshape({B, H, T, Hd}).transpose(1, 2);  // [B, T, H, Hd]
}

}  // namespace ac
