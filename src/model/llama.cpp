#include "model/llama.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/gemm.h"
#include "model/attention.h"
#include "model/kernels.h"

namespace ac {

namespace {

// RMSNorm (Zhang & Sennrich 2019) as in HF LlamaRMSNorm. With a hidden mask, the mean of squares
// runs over the kept channels only, so the masked model equals the physically narrower one.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, const at::Tensor& mask) {
  if (!mask.defined()) return ac::rms_norm(x, w, eps);  // the fused kernel (model/kernels.h)
  at::Tensor ms = (x.pow(2) * mask).sum(-1, true) / mask.sum();
  return x * at::rsqrt(ms + eps) * (w * mask);
}

// inv_freq [Hd/2] in float64, with rope_scaling applied (transformers modeling_rope_utils.py:
// _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters).
at::Tensor inv_freq(const ModelConfig& c, int64_t head_dim) {
  auto opt = at::TensorOptions().dtype(at::kDouble);
  at::Tensor f = 1.0 / at::pow(c.rope_theta, at::arange(0, head_dim, 2, opt) / double(head_dim));
  if (!c.rope_scaling) return f;
  const RopeScaling& s = *c.rope_scaling;
  if (s.rope_type == "linear") return f / s.factor;
  if (s.rope_type != "llama3") return f;
  const double old_len = double(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
  at::Tensor wavelen = 2.0 * M_PI / f;
  at::Tensor scaled = at::where(wavelen > low_wavelen, f / s.factor, f);
  at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  at::Tensor smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  at::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(medium, smoothed, scaled);
}

const at::Tensor kNone;

}  // namespace

at::Tensor grouped_attention(const at::Tensor& qg, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& allowed) {
  const int64_t Hd = qg.size(-1);
  at::Tensor scores = at::matmul(qg * (1.0 / std::sqrt(double(Hd))),
                                 k.unsqueeze(2).transpose(-1, -2));  // [B, G, H/G, T, S]
  if (allowed.defined()) {  // in place: matmul's backward needs its inputs, not its output
    // The lowest float, or the lowest bf16 / fp16 when autocast made the scores so (the float's
    // does not fit them), as HF's torch.finfo(dtype).min.
    const at::ScalarType t = scores.scalar_type();
    const at::Scalar lowest =
        t == at::kBFloat16 ? at::Scalar(std::numeric_limits<c10::BFloat16>::lowest())
        : t == at::kHalf   ? at::Scalar(std::numeric_limits<c10::Half>::lowest())
                           : at::Scalar(std::numeric_limits<float>::lowest());
    scores.masked_fill_(allowed.logical_not(), lowest);
  }
  return at::matmul(at::softmax(scores, -1), v.unsqueeze(2));  // [B, G, H/G, T, Hd]
}

std::pair<at::Tensor, at::Tensor> rope_tables(const ModelConfig& c, int64_t head_dim, int64_t pos0,
                                              int64_t T, const c10::Device& device) {
  at::Tensor pos = at::arange(pos0, pos0 + T, at::TensorOptions().dtype(at::kDouble));
  at::Tensor freqs = at::outer(pos, inv_freq(c, head_dim));  // [T, Hd/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);              // [T, Hd]
  return {emb.cos().to(device, at::kFloat), emb.sin().to(device, at::kFloat)};
}

KVCache KVCache::allocate(const ModelConfig& c, int64_t batch, int64_t capacity,
                          const c10::Device& device) {
  const auto opt = at::TensorOptions().dtype(at::kFloat).device(device);
  KVCache kv;
  kv.capacity = capacity;
  for (const auto& l : c.layers) {
    if (!l.has_attention()) {
      kv.k.emplace_back();
      kv.v.emplace_back();
      continue;
    }
    kv.k.push_back(at::zeros({batch, l.num_key_value_heads, capacity, l.head_dim}, opt));
    kv.v.push_back(at::zeros({batch, l.num_key_value_heads, capacity, l.head_dim}, opt));
  }
  return kv;
}

int64_t KVCache::bytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < k.size(); ++i)
    if (k[i].defined()) n += k[i].nbytes() + v[i].nbytes();
  return n;
}

at::Tensor causal_allowed(int64_t pos0, int64_t T, const c10::Device& device) {
  const auto opt = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor q_pos = at::arange(pos0, pos0 + T, opt).unsqueeze(1);  // [T, 1]
  return at::arange(0, pos0 + T, opt).unsqueeze(0) <= q_pos;      // [T, S]
}

at::Tensor LlamaModel::hidden_states(const at::Tensor& tokens, const ForwardOptions& opt) const {
  const ModelConfig& c = config;
  const ModelWeights& w = weights;
  check_tokens(c, tokens);
  AttentionSetup setup = attention_setup(c, tokens, opt.cache, opt.attention_mask);
  const int64_t B = setup.B, T = setup.T, S = setup.S;
  // Masks may come from elsewhere (the search keeps its architecture logits on the CPU): they
  // join the forward on the tokens' device (differentiably; free when already there).
  const c10::Device dev = tokens.device();
  auto on_dev = [&](const at::Tensor& t) { return t.defined() ? t.to(dev) : t; };
  const at::Tensor hmask = opt.masks ? on_dev(opt.masks->hidden) : kNone;

  at::Tensor x;  // [B, T, D]
  if (opt.inputs_embeds) {
    x = *opt.inputs_embeds;
  } else {
    x = at::embedding(w.embed_tokens, tokens);
    if (hmask.defined()) x = x * hmask;
    if (opt.observer) opt.observer->on_embedding(x);
  }

  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& lc = c.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    const LayerMasks* lm = opt.masks && !opt.masks->layers.empty() ? &opt.masks->layers[size_t(i)]
                                                                   : nullptr;
    at::Tensor block_in = x;
    if (lc.has_attention()) {
      const int64_t H = lc.num_attention_heads, Hd = lc.head_dim;
      at::Tensor h = rms_norm(x, lw.input_layernorm, c.rms_norm_eps, hmask);
      if (opt.observer) opt.observer->on_norm(i + opt.first_layer, 0, h);
      at::Tensor attn = attention_heads(c, i, lw, h, opt.cache, setup);  // [B, T, H, Hd]
      if (lm && lm->heads.defined()) attn = attn * on_dev(lm->heads).view({1, 1, H, 1});
      if (opt.observer) opt.observer->on_attn_heads(i + opt.first_layer, attn);
      at::Tensor out = ac::linear(attn.reshape({B, T, H * Hd}), lw.o_proj);  // [B, T, D]
      if (hmask.defined()) out = out * hmask;
      if (lm && lm->attn_gate.defined()) out = out * on_dev(lm->attn_gate);
      x = x + out;
    }
    if (lc.has_ffn()) {
      at::Tensor h = rms_norm(x, lw.post_attention_layernorm, c.rms_norm_eps, hmask);
      if (opt.observer) opt.observer->on_norm(i + opt.first_layer, 1, h);
      at::Tensor act = swiglu(ac::linear(h, lw.gate_proj), ac::linear(h, lw.up_proj));  // [B,T,F]
      if (lm && lm->ffn.defined()) act = act * on_dev(lm->ffn);
      if (opt.observer) opt.observer->on_ffn_act(i + opt.first_layer, act);
      at::Tensor out = ac::linear(act, lw.down_proj);  // [B, T, D]
      if (hmask.defined()) out = out * hmask;
      if (lm && lm->ffn_gate.defined()) out = out * on_dev(lm->ffn_gate);
      x = x + out;
    }
    if (opt.observer) opt.observer->on_block(i + opt.first_layer, block_in, x);
  }
  if (opt.cache) opt.cache->length = S;
  if (opt.last_logits_only) x = x.narrow(1, T - 1, 1);
  if (!opt.final_norm) return x;
  at::Tensor h = rms_norm(x, w.norm, c.rms_norm_eps, hmask);
  if (opt.observer) opt.observer->on_norm(c.num_layers() + opt.first_layer, 2, h);
  return h;
}

at::Tensor LlamaModel::forward(const at::Tensor& tokens, const ForwardOptions& opt) const {
  return ac::linear(hidden_states(tokens, opt), weights.lm_head);  // [B, T, V]
}

// ---------------------------------------------------------------------------------------------
// Generation

namespace {

// Next token from logits [B, V]: greedy, or temperature + nucleus (top-p) sampling.
at::Tensor pick(const at::Tensor& logits, double temperature, double top_p, at::Generator& gen) {
  if (temperature <= 0) return logits.argmax(-1);
  at::Tensor probs = at::softmax(logits / temperature, -1);
  if (top_p < 1.0) {
    // Nucleus: the smallest prefix of the sorted probabilities reaching top_p. A full sort of
    // [B, V] dominates a decode step, so sort only the top 256 unless a row needs more.
    const int64_t V = probs.size(-1);
    int64_t k = std::min<int64_t>(256, V);
    auto [sorted, idx] = probs.topk(k, -1);
    if (k < V && (sorted.sum(-1) < top_p).any().item<bool>())
      std::tie(sorted, idx) = probs.sort(-1, /*descending=*/true);
    at::Tensor cum = sorted.cumsum(-1);
    sorted.masked_fill_((cum - sorted) > top_p, 0.0);
    probs = at::zeros_like(probs).scatter_(-1, idx, sorted);
  }
  return at::multinomial(probs, 1, false, gen).squeeze(-1);
}

}  // namespace

std::vector<int64_t> generate_with(const DecodeStep& step, const c10::Device& device,
                                  int64_t eos_token_id, const std::vector<int64_t>& prompt,
                                  const GenerateOptions& opt) {
  if (prompt.empty()) throw ConfigError("[generate] the prompt is empty (add BOS)");
  at::NoGradGuard no_grad;
  // The forward on the model's device; the pick on the CPU with a CPU generator, so that a seed
  // draws the same tokens on every device (given the same logits).
  at::Generator gen = at::detail::createCPUGenerator(opt.seed);
  at::Tensor input = at::tensor(prompt, at::kLong).view({1, -1}).to(device);
  std::vector<int64_t> out;
  for (int64_t s = 0; s < opt.max_new_tokens; ++s) {
    at::Tensor logits = step(input).select(1, 0).to(at::kCPU, at::kFloat);  // [1, V]
    int64_t next = pick(logits, opt.temperature, opt.top_p, gen).item<int64_t>();
    out.push_back(next);
    if (opt.stop_at_eos && next == eos_token_id) break;
    input = at::full({1, 1}, next, at::TensorOptions(at::kLong).device(device));
  }
  return out;
}

std::vector<int64_t> generate(const LlamaModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt) {
  if (prompt.empty()) throw ConfigError("[generate] the prompt is empty (add BOS)");
  const c10::Device dev = m.weights.embed_tokens.device();
  KVCache cache = KVCache::allocate(m.config, 1, int64_t(prompt.size()) + opt.max_new_tokens, dev);
  ForwardOptions fo;
  fo.cache = &cache;
  fo.last_logits_only = true;
  return generate_with([&](const at::Tensor& input) { return m.forward(input, fo); }, dev,
                       m.config.eos_token_id, prompt, opt);
}

at::Tensor sample_batch(const LlamaModel& m, const std::vector<int64_t>& prompt, int64_t batch,
                        int64_t new_tokens, double temperature, double top_p, uint64_t seed) {
  if (prompt.empty()) throw ConfigError("[sample] the prompt is empty (add BOS)");
  at::NoGradGuard no_grad;
  // As generate: the forward on the model's device, the pick on the CPU.
  const c10::Device dev = m.weights.embed_tokens.device();
  at::Generator gen = at::detail::createCPUGenerator(seed);
  KVCache cache = KVCache::allocate(m.config, batch, int64_t(prompt.size()) + new_tokens, dev);
  ForwardOptions fo;
  fo.cache = &cache;
  fo.last_logits_only = true;
  at::Tensor input =
      at::tensor(prompt, at::kLong).view({1, -1}).expand({batch, -1}).contiguous().to(dev);
  at::Tensor out = at::empty({batch, new_tokens}, at::kLong);
  for (int64_t step = 0; step < new_tokens; ++step) {
    at::Tensor logits = m.forward(input, fo).select(1, 0).to(at::kCPU, at::kFloat);  // [B, V]
    at::Tensor next = pick(logits, temperature, top_p, gen);                         // [B]
    out.select(1, step).copy_(next);
    input = next.view({batch, 1}).to(dev);
  }
  return out;
}

}  // namespace ac
