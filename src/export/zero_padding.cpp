#include "export/zero_padding.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "model/weights.h"

namespace ac {

namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// `t` with `extra` zero slices appended along `dim`.
at::Tensor pad_zeros(const at::Tensor& t, int64_t dim, int64_t extra) {
  if (extra == 0) return t;
  std::vector<int64_t> shape = t.sizes().vec();
  shape[size_t(dim)] = extra;
  return at::cat({t, at::zeros(shape, t.options())}, dim);
}

void require_multiple(int64_t multiple) {
  if (multiple < 1)
    throw ConfigError(fmt::format("[pad_ffn_widths] multiple: expected >= 1, found {}", multiple));
}

// The KV heads a layer of r query heads per KV head gets beside H query heads.
int64_t padded_kv_heads(int64_t H, int64_t r) { return H % r == 0 ? H / r : H; }

// Rows [G * Hd, ...] of KV heads, each repeated r times in place (KV head j -> rows of heads
// j*r .. j*r + r - 1), as repeat_kv does: [G * r * Hd, ...].
at::Tensor repeat_heads(const at::Tensor& t, int64_t G, int64_t r) {
  if (!t.defined()) return t;
  std::vector<int64_t> heads = {G, 1, t.size(0) / G};
  for (int64_t d = 1; d < t.dim(); ++d) heads.push_back(t.size(d));
  std::vector<int64_t> repeat(heads.size(), 1);
  repeat[1] = r;
  std::vector<int64_t> out = t.sizes().vec();
  out[0] *= r;
  return t.reshape(heads).repeat(repeat).reshape(out);
}

at::Tensor pad_rows(const at::Tensor& t, int64_t extra) {
  return t.defined() ? pad_zeros(t, 0, extra) : t;
}

}  // namespace

int64_t max_query_heads(const ModelConfig& c) {
  int64_t H = 0;
  for (const auto& l : c.layers)
    if (l.has_attention()) H = std::max(H, l.num_attention_heads);
  return H;
}

int64_t ffn_padding_parameters(const ModelConfig& c, int64_t multiple) {
  require_multiple(multiple);
  int64_t n = 0;
  for (const auto& l : c.layers)
    if (l.has_ffn())
      n += 3 * c.hidden_size * (round_up(l.intermediate_size, multiple) - l.intermediate_size);
  return n;
}

LlamaModel pad_ffn_widths(const LlamaModel& m, int64_t multiple) {
  require_multiple(multiple);
  LlamaModel out{m.config, clone(m.config, m.weights)};
  for (size_t i = 0; i < out.config.layers.size(); ++i) {
    LayerConfig& l = out.config.layers[i];
    if (!l.has_ffn()) continue;
    const int64_t extra = round_up(l.intermediate_size, multiple) - l.intermediate_size;
    if (extra == 0) continue;
    LayerWeights& w = out.weights.layers[i];
    w.gate_proj = pad_zeros(w.gate_proj, 0, extra);  // [F', D]
    w.up_proj = pad_zeros(w.up_proj, 0, extra);      // [F', D]
    w.down_proj = pad_zeros(w.down_proj, 1, extra);  // [D, F']
    l.intermediate_size += extra;
  }
  out.config.validate("pad_ffn_widths");
  return out;
}

int64_t query_head_padding_parameters(const ModelConfig& c) {
  const int64_t H = max_query_heads(c);
  int64_t n = 0;
  for (const auto& l : c.layers) {
    if (!l.has_attention() || l.num_attention_heads == H) continue;
    const int64_t r = l.num_attention_heads / l.num_key_value_heads;
    const int64_t G = padded_kv_heads(H, r);
    // q and o [H * Hd, D] each, k and v [G * Hd, D] each, beside the layer's own.
    const int64_t q = (H - l.num_attention_heads) * l.head_dim;
    const int64_t kv = (G - l.num_key_value_heads) * l.head_dim;
    n += 2 * q * c.hidden_size + 2 * kv * c.hidden_size + (c.attention_bias ? q + 2 * kv : 0);
  }
  return n;
}

LlamaModel pad_query_heads(const LlamaModel& m) {
  const int64_t H = max_query_heads(m.config);
  int64_t Hd = 0;
  for (const auto& l : m.config.layers) {
    if (!l.has_attention()) continue;
    if (Hd != 0 && l.head_dim != Hd)
      throw ConfigError(fmt::format("[pad_query_heads] the attention layers have head_dim {} and "
                                    "{}: RoPE's frequencies depend on head_dim, so no zero "
                                    "padding gives them one", Hd, l.head_dim));
    Hd = l.head_dim;
  }
  if (m.config.qk_norm)
    throw ConfigError("[pad_query_heads] q/k norms (Qwen3): not padded");
  LlamaModel out{m.config, clone(m.config, m.weights)};
  for (size_t i = 0; i < out.config.layers.size(); ++i) {
    LayerConfig& l = out.config.layers[i];
    if (!l.has_attention() || l.num_attention_heads == H) continue;
    const int64_t r = l.num_attention_heads / l.num_key_value_heads;
    const int64_t G = padded_kv_heads(H, r);
    LayerWeights& w = out.weights.layers[i];
    if (G == H && r > 1) {  // one KV head per query head: each repeated as repeat_kv does
      w.k_proj = repeat_heads(w.k_proj, l.num_key_value_heads, r);
      w.v_proj = repeat_heads(w.v_proj, l.num_key_value_heads, r);
      w.k_bias = repeat_heads(w.k_bias, l.num_key_value_heads, r);
      w.v_bias = repeat_heads(w.v_bias, l.num_key_value_heads, r);
      l.num_key_value_heads *= r;
    }
    const int64_t extra_q = (H - l.num_attention_heads) * Hd;
    const int64_t extra_kv = (G - l.num_key_value_heads) * Hd;
    w.q_proj = pad_rows(w.q_proj, extra_q);    // [H * Hd, D]
    w.q_bias = pad_rows(w.q_bias, extra_q);    // [H * Hd]
    w.k_proj = pad_rows(w.k_proj, extra_kv);   // [G * Hd, D]
    w.v_proj = pad_rows(w.v_proj, extra_kv);   // [G * Hd, D]
    w.k_bias = pad_rows(w.k_bias, extra_kv);   // [G * Hd]
    w.v_bias = pad_rows(w.v_bias, extra_kv);   // [G * Hd]
    w.o_proj = pad_zeros(w.o_proj, 1, extra_q);  // [D, H * Hd]
    l.num_attention_heads = H;
    l.num_key_value_heads = G;
  }
  out.config.validate("pad_query_heads");
  return out;
}

}  // namespace ac
