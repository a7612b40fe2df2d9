#include "model/moe_model.h"

#include <fmt/format.h>

#include <limits>
#include <set>
#include <tuple>

#include "common/error.h"
#include "common/gemm.h"
#include "model/attention.h"
#include "model/config_fields.h"
#include "model/kernels.h"
#include "model/moe_family_config.h"

namespace ac {

Routing route_top_k(const at::Tensor& router_logits, int64_t k, bool normalize) {
  if (router_logits.dim() != 2 || k < 1 || k > router_logits.size(-1))
    throw ConfigError(fmt::format("[route_top_k] router logits {} (expected [N, E]) and k {} "
                                  "(expected 1..E)", router_logits.sizes().vec(), k));
  // Qwen3MoeTopKRouter: softmax(dtype=torch.float); MixtralTopKRouter: softmax(logits.float()).
  at::Tensor probs = at::softmax(router_logits.to(at::kFloat), -1);  // [N, E]
  auto [weights, experts] = probs.topk(k, -1);                       // [N, k] each, descending
  if (normalize) weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {experts, weights};
}

namespace {

// The router logits [N, E] with the removed experts' set to -inf, and k clamped to the experts
// left: the softmax then spreads over the kept experts only, exactly as the pruned router's.
std::pair<at::Tensor, int64_t> masked_logits(at::Tensor logits, int64_t k,
                                             const at::Tensor& expert_mask) {
  const int64_t E = logits.size(-1);
  if (expert_mask.sizes() != at::IntArrayRef{E})
    throw ConfigError(fmt::format("[moe_block] expert mask {} (expected [{}], num_experts)",
                                  expert_mask.sizes().vec(), E));
  const at::Tensor removed = (expert_mask == 0).to(logits.device());  // [E] bool
  const int64_t kept = E - removed.sum().item<int64_t>();
  if (kept == 0) throw ConfigError("[moe_block] the expert mask removes every expert");
  logits = logits.masked_fill(removed, -std::numeric_limits<float>::infinity());
  return {logits, std::min(k, kept)};
}

}  // namespace

at::Tensor moe_block(const at::Tensor& h, const MoeLayerWeights& w, int64_t k, bool normalize,
                     const MoeLayerMasks* masks, MoeObserver* observer, int64_t layer) {
  at::Tensor logits = ac::linear(h, w.router);  // [N, E]
  const bool expert_mask = masks && masks->experts.defined();
  if (expert_mask) std::tie(logits, k) = masked_logits(logits, k, masks->experts);
  const Routing r = route_top_k(logits, k, normalize);
  if (observer) observer->on_routing(layer, r);
  at::Tensor out = at::zeros_like(h);  // [N, D]
  // As Qwen3MoeExperts.forward: each expert hit runs once on its rows, its weighted output
  // added back in place; an expert no token chose costs nothing.
  // The experts hit, read on the host (the loop runs there whatever the tensors' device).
  const at::Tensor hit = std::get<0>(at::_unique(r.experts.flatten())).to(at::kCPU);  // sorted
  for (int64_t e : std::vector<int64_t>(hit.data_ptr<int64_t>(),
                                        hit.data_ptr<int64_t>() + hit.numel())) {
    const at::Tensor where = (r.experts == e).nonzero();  // [n, 2]: token row, rank
    const at::Tensor rows = where.select(1, 0), ranks = where.select(1, 1);
    const at::Tensor x = h.index_select(0, rows);  // [n, D]
    at::Tensor y = swiglu(ac::linear(x, w.gate_proj[e]), ac::linear(x, w.up_proj[e]));  // [n, Fe]
    if (masks && masks->expert_ffn.defined()) y = y * masks->expert_ffn[e].to(y.device());
    const at::Tensor act = y;
    y = ac::linear(y, w.down_proj[e]);  // [n, D]
    y = y * r.weights.index({rows, ranks}).unsqueeze(1);
    if (expert_mask) y = y * masks->experts[e].to(y.device());
    if (observer) observer->on_expert(layer, e, act, y);
    out.index_add_(0, rows, y);
  }
  return out;
}

at::Tensor MoeModel::forward(const at::Tensor& tokens, KVCache* cache,
                             bool last_logits_only) const {
  MoeForwardOptions opt;
  opt.cache = cache;
  opt.last_logits_only = last_logits_only;
  return forward(tokens, opt);
}

at::Tensor MoeModel::forward(const at::Tensor& tokens, const MoeForwardOptions& opt) const {
  const ModelConfig& c = config;
  const ModelWeights& w = weights;
  check_tokens(c, tokens);
  const int64_t mask_layers = opt.masks ? int64_t(opt.masks->layers.size()) : 0;
  if (mask_layers != 0 && mask_layers != c.num_layers())
    throw ConfigError(fmt::format("[forward] MoE masks for {} layers, the model has {}",
                                  opt.masks->layers.size(), c.num_layers()));
  KVCache* cache = opt.cache;
  AttentionSetup setup = attention_setup(c, tokens, cache, /*attention_mask=*/nullptr);
  const int64_t B = setup.B, T = setup.T, D = c.hidden_size;
  at::Tensor x = at::embedding(w.embed_tokens, tokens);  // [B, T, D]
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& lc = c.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    if (lc.has_attention()) {
      at::Tensor h = rms_norm(x, lw.input_layernorm, c.rms_norm_eps);
      at::Tensor attn = attention_heads(c, i, lw, h, cache, setup);  // [B, T, H, Hd]
      x = x + ac::linear(attn.reshape({B, T, -1}), lw.o_proj);       // [B, T, D]
    }
    if (lc.has_moe()) {
      const MoeLayerMasks* lm =
          opt.masks && !opt.masks->layers.empty() ? &opt.masks->layers[size_t(i)] : nullptr;
      at::Tensor h = rms_norm(x, lw.post_attention_layernorm, c.rms_norm_eps);
      at::Tensor out = moe_block(h.reshape({B * T, D}), moe[size_t(i)],
                                 lc.moe->num_experts_per_tok, norm_topk_prob, lm, opt.observer, i);
      x = x + out.view({B, T, D});
    } else if (lc.has_ffn()) {  // Qwen3MoeMLP: a dense layer of mlp_only_layers / sparse step
      at::Tensor h = rms_norm(x, lw.post_attention_layernorm, c.rms_norm_eps);
      x = x + ac::linear(swiglu(ac::linear(h, lw.gate_proj), ac::linear(h, lw.up_proj)),
                         lw.down_proj);
    }
  }
  if (cache) cache->length = setup.S;
  if (opt.last_logits_only) x = x.narrow(1, T - 1, 1);
  return ac::linear(rms_norm(x, w.norm, c.rms_norm_eps), w.lm_head);  // [B, T, V]
}

// ---------------------------------------------------------------------------------------------
// Loading

namespace {

// Refuses what changes the computation and that this forward does not implement, naming the
// config.json field.
void refuse_unimplemented(const ModelConfig& c, const std::string& file) {
  auto refuse = [&](const std::string& what) {
    throw ConfigError(fmt::format("[load_moe_model] {}: {} (model_type {})", file, what,
                                  c.model_type));
  };
  if (!is_moe_family_model_type(c.model_type))
    refuse("expected model_type qwen3_moe or mixtral; the dense families load with "
           "load_checkpoint");
  // Qwen3MoeAttention biases q, k, v and o_proj with attention_bias; the shared attention has
  // q/k/v biases only.
  if (c.attention_bias) refuse("attention_bias true is not implemented (expected false)");
  if (!c.mlp_gated) refuse("mlp_hidden_act relu2 is not implemented (expected SwiGLU)");
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (l.has_mamba()) refuse(fmt::format("layer {} is a Mamba-2 mixer, not implemented", i));
    if (!l.has_moe()) continue;
    const MoeConfig& m = *l.moe;
    if (m.shared_expert_intermediate_size > 0)
      refuse(fmt::format("layer {}: moe_shared_expert_intermediate_size {}: a shared expert "
                         "is not implemented", i, m.shared_expert_intermediate_size));
    if (m.moe_latent_size > 0)
      refuse(fmt::format("layer {}: moe_latent_size {}: latent projections are not implemented",
                         i, m.moe_latent_size));
    if (!m.gated) refuse(fmt::format("layer {}: relu² experts are not implemented", i));
    if (m.router_bias)
      refuse(fmt::format("layer {}: a router bias (e_score_correction_bias) is not implemented",
                         i));
    if (m.scoring_func != "softmax")
      refuse(fmt::format("layer {}: scoring_func '{}' is not implemented (expected softmax)", i,
                         m.scoring_func));
  }
}

// Qwen3-MoE's norm_topk_prob (Qwen3MoeConfig default false); Mixtral renormalizes always
// (MixtralTopKRouter) and has no such field.
bool read_norm_topk_prob(const ModelConfig& c, const std::string& file) {
  if (c.model_type == "mixtral") return true;
  return config_fields::get_or<bool>(c.extra, "norm_topk_prob", false, file);
}

// Whether `m` has a tensor named `name`.
bool has(const TensorMap& m, const std::string& name) { return m.count(name) > 0; }

// One sparse layer's tensors in any of the header's spellings; `taken` collects their names.
MoeLayerWeights take_moe_layer(const ModelConfig& c, const TensorMap& m, int64_t layer,
                               const std::string& file, std::set<std::string>& taken) {
  const MoeConfig& moe = *c.layers[size_t(layer)].moe;
  const int64_t E = moe.num_experts, Fe = moe.moe_intermediate_size, D = c.hidden_size;
  const bool mixtral = c.model_type == "mixtral";
  const char* width = mixtral ? "intermediate_size" : "moe_intermediate_size";
  const std::string fused = fmt::format("model.layers.{}.mlp.", layer);
  const std::string block =
      mixtral && !has(m, fused + "experts.gate_up_proj")
          ? fmt::format("model.layers.{}.block_sparse_moe.", layer)
          : fused;
  auto take = [&](const std::string& name, std::vector<int64_t> shape, const char* field) {
    taken.insert(name);
    return take_tensor(m, name, shape, field, file);
  };
  MoeLayerWeights w;
  w.router = take(block + "gate.weight", {E, D}, "num_experts, hidden_size");
  if (has(m, block + "experts.gate_up_proj")) {
    const std::string fields = fmt::format("num_experts, 2*{}, hidden_size", width);
    at::Tensor gate_up = take(block + "experts.gate_up_proj", {E, 2 * Fe, D}, fields.c_str());
    w.gate_proj = gate_up.narrow(1, 0, Fe).contiguous();
    w.up_proj = gate_up.narrow(1, Fe, Fe).contiguous();
    const std::string down = fmt::format("num_experts, hidden_size, {}", width);
    w.down_proj = take(block + "experts.down_proj", {E, D, Fe}, down.c_str());
    return w;
  }
  const char* gate = mixtral ? "w1" : "gate_proj";
  const char* up = mixtral ? "w3" : "up_proj";
  const char* down = mixtral ? "w2" : "down_proj";
  std::vector<at::Tensor> gates, ups, downs;
  for (int64_t e = 0; e < E; ++e) {
    const std::string expert = fmt::format("{}experts.{}.", block, e);
    gates.push_back(take(expert + gate + ".weight", {Fe, D}, width));
    ups.push_back(take(expert + up + ".weight", {Fe, D}, width));
    downs.push_back(take(expert + down + ".weight", {D, Fe}, width));
  }
  w.gate_proj = at::stack(gates);  // [E, Fe, D]
  w.up_proj = at::stack(ups);
  w.down_proj = at::stack(downs);  // [E, D, Fe]
  return w;
}

}  // namespace

MoeModel moe_model_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                   const std::string& file) {
  refuse_unimplemented(c, file);
  MoeModel model;
  model.config = c;
  model.norm_topk_prob = read_norm_topk_prob(c, file);
  model.weights = role_weights_from_tensor_map(c, m, file);
  std::set<std::string> taken;
  model.moe.resize(c.layers.size());
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.layers[size_t(i)].has_moe()) continue;
    // The roles' table gives the FFN's norm to dense FFNs only; an MoE layer has it too.
    const std::string norm = fmt::format("model.layers.{}.post_attention_layernorm.weight", i);
    taken.insert(norm);
    model.weights.layers[size_t(i)].post_attention_layernorm =
        take_tensor(m, norm, {c.hidden_size}, "hidden_size", file);
    model.moe[size_t(i)] = take_moe_layer(c, m, i, file, taken);
  }
  refuse_unexpected_tensors(c, m, file, taken);
  return model;
}

std::vector<int64_t> generate(const MoeModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt) {
  const c10::Device dev = m.weights.embed_tokens.device();
  KVCache cache = KVCache::allocate(m.config, 1, int64_t(prompt.size()) + opt.max_new_tokens, dev);
  return generate_with([&](const at::Tensor& input) { return m.forward(input, &cache, true); },
                       dev, m.config.eos_token_id, prompt, opt);
}

}  // namespace ac
