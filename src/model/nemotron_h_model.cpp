#include "model/nemotron_h_model.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "common/error.h"
#include "common/gemm.h"
#include "model/attention.h"
#include "model/config_fields.h"
#include "model/kernels.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

// ACT2FN["relu2"] (activations.py ReLUSquaredActivation); NemotronHMLP is down(relu2(up(x))).
at::Tensor relu2(const at::Tensor& x) { return at::relu(x).square(); }

}  // namespace

Routing route_sigmoid(const at::Tensor& router_logits, const at::Tensor& correction_bias,
                      const SigmoidRouterOptions& o, const at::Tensor& allowed) {
  const int64_t E = router_logits.dim() == 2 ? router_logits.size(1) : 0;
  const int64_t per_group = o.n_group > 0 ? E / o.n_group : 0;
  if (router_logits.dim() != 2 || correction_bias.dim() != 1 || correction_bias.size(0) != E ||
      o.n_group < 1 || E % o.n_group != 0 || per_group < 2 || o.topk_group < 1 ||
      o.topk_group > o.n_group || o.top_k < 1 || o.top_k > o.topk_group * per_group)
    throw ConfigError(fmt::format(
        "[route_sigmoid] router logits {} (expected [N, E]), correction bias {} (expected [E]), "
        "num_experts_per_tok {}, n_group {}, topk_group {}: expected E a multiple of n_group "
        "with at least 2 experts a group, 1 <= topk_group <= n_group and 1 <= k <= topk_group * "
        "E / n_group", router_logits.sizes().vec(), correction_bias.sizes().vec(), o.top_k,
        o.n_group, o.topk_group));
  const int64_t N = router_logits.size(0);
  if (allowed.defined() && (allowed.dim() != 1 || allowed.size(0) != E))
    throw ConfigError(fmt::format("[route_sigmoid] expert mask {}, expected [{}]",
                                  allowed.sizes().vec(), E));
  const at::Tensor scores = router_logits.to(at::kFloat).sigmoid();  // [N, E]
  at::Tensor choice = scores + correction_bias.to(at::kFloat);
  if (allowed.defined())
    choice = choice.masked_fill(allowed.to(choice.device()).eq(0).unsqueeze(0),
                                -std::numeric_limits<float>::infinity());
  if (o.n_group > 1) {  // keep the topk_group groups whose two best biased scores sum highest
    const at::Tensor group_scores =
        std::get<0>(choice.view({N, o.n_group, per_group}).topk(2, -1)).sum(-1);  // [N, n_group]
    const at::Tensor groups = std::get<1>(group_scores.topk(o.topk_group, -1));
    const at::Tensor keep = at::zeros_like(group_scores, at::kBool).scatter_(1, groups, true);
    choice = choice.masked_fill(
        keep.unsqueeze(-1).expand({N, o.n_group, per_group}).reshape({N, E}).logical_not(),
        -std::numeric_limits<float>::infinity());
  }
  const at::Tensor experts = std::get<1>(choice.topk(o.top_k, -1));  // [N, k]
  at::Tensor weights = scores.gather(1, experts);                     // unbiased
  if (o.norm_topk_prob) weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
  return {experts, weights * o.routed_scaling_factor};
}

at::Tensor nemotron_h_moe(const at::Tensor& h, const NemotronHMoeWeights& w,
                          const SigmoidRouterOptions& o, const NemotronHLayerMasks* masks,
                          NemotronHObserver* observer, int64_t layer) {
  const Routing r = route_sigmoid(ac::linear(h, w.router), w.correction_bias, o,
                                  masks ? masks->experts : at::Tensor());
  if (observer) observer->on_routing(layer, r);
  const bool latent = w.fc1_latent_proj.defined();
  const at::Tensor x = latent ? ac::linear(h, w.fc1_latent_proj) : h;  // [N, Din]
  at::Tensor routed = at::zeros_like(x);                                // [N, Din]
  // Each expert hit once, on its rows (NemotronHExperts.forward), read on the host.
  const at::Tensor hit = std::get<0>(at::_unique(r.experts.flatten())).to(at::kCPU);
  for (int64_t e : std::vector<int64_t>(hit.data_ptr<int64_t>(),
                                        hit.data_ptr<int64_t>() + hit.numel())) {
    const at::Tensor where = (r.experts == e).nonzero();  // [n, 2]: token row, rank
    const at::Tensor rows = where.select(1, 0), ranks = where.select(1, 1);
    at::Tensor act = relu2(ac::linear(x.index_select(0, rows), w.up_proj[e]));  // [n, Fe]
    if (masks && masks->expert_ffn.defined()) act = act * masks->expert_ffn[e].to(act.device());
    const at::Tensor y =
        ac::linear(act, w.down_proj[e]) * r.weights.index({rows, ranks}).unsqueeze(1);  // [n, Din]
    if (observer) observer->on_expert(layer, e, act, y);
    routed.index_add_(0, rows, y);
  }
  at::Tensor out = latent ? ac::linear(routed, w.fc2_latent_proj) : routed;  // [N, D]
  if (w.shared_up.defined()) {
    at::Tensor act = relu2(ac::linear(h, w.shared_up));  // [N, Fs]
    if (masks && masks->shared_ffn.defined()) act = act * masks->shared_ffn.to(act.device());
    if (observer) observer->on_shared_expert(layer, act);
    out = out + ac::linear(act, w.shared_down);
  }
  return out;
}

NemotronHCache NemotronHCache::allocate(const ModelConfig& c, int64_t batch, int64_t capacity,
                                        const c10::Device& device) {
  NemotronHCache cache;
  cache.kv = KVCache::allocate(c, batch, capacity, device);
  cache.mamba.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].has_mamba()) cache.mamba[i] = Mamba2State::zeros(*c.layers[i].mamba, batch, device);
  return cache;
}

namespace {

// NemotronHAttention up to o_proj: no positional encoding, GQA; the keys and values appended to
// the cache when there is one. h [B, T, D] -> [B, T, H*Hd].
at::Tensor nope_attention(const LayerConfig& lc, const NemotronHLayerWeights& lw,
                          const at::Tensor& h, int64_t layer, KVCache* kv,
                          const AttentionSetup& s) {
  const int64_t B = s.B, T = s.T, H = lc.num_attention_heads, G = lc.num_key_value_heads,
                Hd = lc.head_dim;
  const at::Tensor q = ac::linear(h, lw.q_proj).view({B, T, H, Hd}).transpose(1, 2);
  at::Tensor k = ac::linear(h, lw.k_proj).view({B, T, G, Hd}).transpose(1, 2);  // [B, G, T, Hd]
  at::Tensor v = ac::linear(h, lw.v_proj).view({B, T, G, Hd}).transpose(1, 2);
  if (kv) {
    kv->k[size_t(layer)].narrow(2, s.pos0, T).copy_(k);
    kv->v[size_t(layer)].narrow(2, s.pos0, T).copy_(v);
    k = kv->k[size_t(layer)].narrow(2, 0, s.S);
    v = kv->v[size_t(layer)].narrow(2, 0, s.S);
  }
  // Query head h uses KV group h / (H/G) (repeat_kv), broadcast without a copy.
  const at::Tensor qg = q.contiguous().view({B, G, H / G, T, Hd});
  const at::Tensor attn = s.fused_causal ? causal_attention(qg, k.contiguous(), v.contiguous())
                                         : grouped_attention(qg, k, v, s.allowed);
  return attn.reshape({B, H, T, Hd}).transpose(1, 2).reshape({B, T, H * Hd});
}

}  // namespace

at::Tensor NemotronHModel::forward(const at::Tensor& tokens, NemotronHCache* cache,
                                   bool last_logits_only) const {
  NemotronHForwardOptions o;
  o.cache = cache;
  o.last_logits_only = last_logits_only;
  return forward(tokens, o);
}

at::Tensor NemotronHModel::forward(const at::Tensor& tokens,
                                   const NemotronHForwardOptions& options) const {
  const ModelConfig& c = config;
  NemotronHCache* cache = options.cache;
  NemotronHObserver* observer = options.observer;
  const NemotronHMasks* masks = options.masks;
  if (masks && masks->layers.size() != c.layers.size())
    throw ConfigError(fmt::format("[forward] the masks have {} layers, the model {}",
                                  masks->layers.size(), c.layers.size()));
  check_tokens(c, tokens);
  KVCache* kv = cache ? &cache->kv : nullptr;
  const AttentionSetup setup = attention_setup(c, tokens, kv, /*attention_mask=*/nullptr);
  const int64_t B = setup.B, T = setup.T, D = c.hidden_size;
  if (cache && cache->mamba.size() != c.layers.size())
    throw ConfigError(fmt::format("[forward] the cache has {} layers, the model {}: allocate it "
                                  "with NemotronHCache::allocate for this config",
                                  cache->mamba.size(), c.layers.size()));
  for (size_t i = 0; cache && i < cache->mamba.size(); ++i)
    if (cache->mamba[i].conv.defined() && cache->mamba[i].conv.size(0) != B)
      throw ConfigError(fmt::format("[forward] the cache holds {} sequences, tokens has {} rows",
                                    cache->mamba[i].conv.size(0), B));
  at::Tensor x = at::embedding(embeddings, tokens);  // [B, T, D]
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& lc = c.layers[size_t(i)];
    const NemotronHLayerWeights& lw = layers[size_t(i)];
    const NemotronHLayerMasks* lm = masks ? &masks->layers[size_t(i)] : nullptr;
    if (!lc.is_present() || (lm && lm->removed)) continue;  // a removed block: the identity
    const at::Tensor h = rms_norm(x, lw.norm, c.rms_norm_eps);
    at::Tensor out;
    if (lc.has_mamba()) {
      Mamba2Hooks hooks;
      if (lm) hooks.channels = lm->mamba_channels;
      if (observer)
        hooks.on_out_proj_input = [&](const at::Tensor& g) { observer->on_mamba(i, g); };
      out = mamba2_mixer(h, *lc.mamba, lw.mamba, c.rms_norm_eps,
                         cache ? &cache->mamba[size_t(i)] : nullptr, &hooks);
    } else if (lc.has_attention()) {
      at::Tensor a = nope_attention(lc, lw, h, i, kv, setup);  // [B, T, H*Hd]
      if (lm && lm->heads.defined())
        a = (a.view({B, T, lc.num_attention_heads, lc.head_dim}) *
             lm->heads.to(a.device()).view({1, 1, lc.num_attention_heads, 1}))
                .view({B, T, lc.num_attention_heads * lc.head_dim});
      if (observer) observer->on_attention(i, a);
      out = ac::linear(a, lw.o_proj);
    } else if (lc.has_ffn()) {
      at::Tensor act = relu2(ac::linear(h, lw.up_proj));  // [B, T, F]
      if (lm && lm->ffn.defined()) act = act * lm->ffn.to(act.device());
      if (observer) observer->on_mlp(i, act);
      out = ac::linear(act, lw.down_proj);
    } else {
      SigmoidRouterOptions o = router;
      o.top_k = lm && lm->num_experts_per_tok > 0 ? lm->num_experts_per_tok
                                                  : lc.moe->num_experts_per_tok;
      out = nemotron_h_moe(h.reshape({B * T, D}), lw.moe, o, lm, observer, i).view({B, T, D});
    }
    if (lm && lm->gate.defined()) out = out * lm->gate.to(out.device());
    at::Tensor next = x + out;
    if (observer) observer->on_block(i, x, next);
    x = std::move(next);
  }
  if (kv) kv->length = setup.S;
  if (options.last_logits_only) x = x.narrow(1, T - 1, 1);
  return ac::linear(rms_norm(x, norm_f, c.rms_norm_eps), lm_head);  // [B, T, V]
}

// ---------------------------------------------------------------------------------------------
// Loading

namespace {

using json = nlohmann::json;

// Throws the loader's ConfigError for what this forward does not compute, naming the field.
[[noreturn]] void refuse(const ModelConfig& c, const std::string& file, const std::string& what) {
  throw ConfigError(fmt::format("[load_nemotron_h_model] {}: {} (model_type {})", file, what,
                                c.model_type));
}

// A config.json number, also as Python's json writes infinities ({"__float__": "Infinity"},
// transformers' PreTrainedConfig.to_json_string) or as a string; NaN when unreadable.
double number_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  const json* s = &v;
  if (v.is_object() && v.contains("__float__")) s = &v["__float__"];
  if (!s->is_string()) return std::nan("");
  const std::string t = s->get<std::string>();
  if (t == "Infinity" || t == "inf") return std::numeric_limits<double>::infinity();
  if (t == "-Infinity" || t == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nan("");
}

// The routing options and the refusals of what changes the computation (the defaults are
// NemotronHConfig's).
SigmoidRouterOptions read_options(const ModelConfig& c, const std::string& file) {
  if (!is_nemotron_h_model_type(c.model_type))
    refuse(c, file, "expected model_type nemotron_h or nemotron_h_puzzle");
  const std::string act =
      config_fields::get_or<std::string>(c.extra, "mamba_hidden_act", "silu", file);
  if (act != "silu") refuse(c, file, fmt::format("mamba_hidden_act '{}' is not implemented "
                                                 "(expected silu)", act));
  if (config_fields::get_or<bool>(c.extra, "mlp_bias", false, file))
    refuse(c, file, "mlp_bias true is not implemented (expected false)");
  // mamba2_chunk_scan clamps dt to time_step_limit in the prefill, mamba2_selective_state_update
  // does not in the decode; with the default (0, inf) both are the identity after softplus.
  if (c.extra.contains("time_step_limit") && !c.extra["time_step_limit"].is_null()) {
    const json& l = c.extra["time_step_limit"];
    if (!l.is_array() || l.size() != 2 || number_of(l[0]) != 0.0 ||
        number_of(l[1]) != std::numeric_limits<double>::infinity())
      refuse(c, file, fmt::format("time_step_limit {} is not implemented (expected [0.0, "
                                  "Infinity])", l.dump()));
  }
  SigmoidRouterOptions o;
  o.n_group = config_fields::get_or<int64_t>(c.extra, "n_group", 1, file);
  o.topk_group = config_fields::get_or<int64_t>(c.extra, "topk_group", 1, file);
  o.norm_topk_prob = config_fields::get_or<bool>(c.extra, "norm_topk_prob", true, file);
  o.routed_scaling_factor =
      config_fields::get_or<double>(c.extra, "routed_scaling_factor", 1.0, file);
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& m = *c.layers[i].moe;
    const int64_t E = m.num_experts;
    if (o.n_group < 1 || E % o.n_group != 0 || E / o.n_group < 2 || o.topk_group < 1 ||
        o.topk_group > o.n_group || m.num_experts_per_tok > o.topk_group * (E / o.n_group))
      refuse(c, file, fmt::format("layer {}: n_routed_experts {}, n_group {}, topk_group {}, "
                                  "num_experts_per_tok {}: expected n_routed_experts a multiple "
                                  "of n_group with at least 2 experts a group, 1 <= topk_group "
                                  "<= n_group, and k at most topk_group's experts", i, E,
                                  o.n_group, o.topk_group, m.num_experts_per_tok));
  }
  return o;
}

struct Taker {
  const TensorMap& m;
  const std::string& file;
  std::set<std::string> taken;

  bool has(const std::string& name) const { return m.count(name) > 0; }
  at::Tensor operator()(const std::string& name, std::vector<int64_t> shape, const char* field) {
    taken.insert(name);
    return take_tensor(m, name, shape, field, file);
  }
};

Mamba2Weights take_mamba(Taker& take, const std::string& p, const Mamba2Config& mc, int64_t D) {
  const int64_t W = mc.in_proj_width(), nh = mc.mamba_num_heads, Di = mc.d_inner(),
                C = mc.conv_dim();
  const char* sizes = "mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups";
  Mamba2Weights w;
  w.in_proj = take(p + "in_proj.weight", {W, D}, sizes);
  if (mc.use_bias) w.in_proj_bias = take(p + "in_proj.bias", {W}, sizes);
  w.conv1d = take(p + "conv1d.weight", {C, 1, mc.conv_kernel}, "conv_kernel");
  if (mc.use_conv_bias) w.conv1d_bias = take(p + "conv1d.bias", {C}, sizes);
  w.dt_bias = take(p + "dt_bias", {nh}, "mamba_num_heads");
  w.A_log = take(p + "A_log", {nh}, "mamba_num_heads");
  w.D = take(p + "D", {nh}, "mamba_num_heads");
  w.norm = take(p + "norm.weight", {Di}, "mamba_num_heads * mamba_head_dim");
  w.out_proj = take(p + "out_proj.weight", {D, Di}, "mamba_num_heads * mamba_head_dim");
  if (mc.use_bias) w.out_proj_bias = take(p + "out_proj.bias", {D}, "hidden_size");
  return w;
}

NemotronHMoeWeights take_moe(Taker& take, const std::string& p, const MoeConfig& mc, int64_t D) {
  const int64_t E = mc.num_experts, Fe = mc.moe_intermediate_size,
                Din = mc.expert_input_width(D), Lt = mc.moe_latent_size,
                Fs = mc.shared_expert_intermediate_size;
  const char* din = Lt > 0 ? "moe_latent_size" : "hidden_size";
  NemotronHMoeWeights w;
  w.router = take(p + "gate.weight", {E, D}, "n_routed_experts, hidden_size");
  w.correction_bias = take(p + "gate.e_score_correction_bias", {E}, "n_routed_experts");
  const std::string field = fmt::format("n_routed_experts, moe_intermediate_size, {}", din);
  if (take.has(p + "experts.up_proj")) {  // fused, as transformers 5 holds them
    w.up_proj = take(p + "experts.up_proj", {E, Fe, Din}, field.c_str());
    w.down_proj = take(p + "experts.down_proj", {E, Din, Fe}, field.c_str());
  } else {
    std::vector<at::Tensor> ups, downs;
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = fmt::format("{}experts.{}.", p, e);
      ups.push_back(take(x + "up_proj.weight", {Fe, Din}, field.c_str()));
      downs.push_back(take(x + "down_proj.weight", {Din, Fe}, field.c_str()));
    }
    w.up_proj = at::stack(ups);
    w.down_proj = at::stack(downs);
  }
  if (Lt > 0) {
    w.fc1_latent_proj = take(p + "fc1_latent_proj.weight", {Lt, D}, "moe_latent_size");
    w.fc2_latent_proj = take(p + "fc2_latent_proj.weight", {D, Lt}, "moe_latent_size");
  }
  if (Fs > 0) {
    w.shared_up = take(p + "shared_experts.up_proj.weight", {Fs, D},
                       "moe_shared_expert_intermediate_size");
    w.shared_down = take(p + "shared_experts.down_proj.weight", {D, Fs},
                         "moe_shared_expert_intermediate_size");
  }
  return w;
}

NemotronHLayerWeights take_layer(Taker& take, const std::string& p, const LayerConfig& lc,
                                 int64_t D) {
  NemotronHLayerWeights w;
  w.norm = take(p + "norm.weight", {D}, "hidden_size");
  const std::string x = p + "mixer.";
  if (lc.has_mamba()) {
    w.mamba = take_mamba(take, x, *lc.mamba, D);
  } else if (lc.has_attention()) {
    const int64_t H = lc.num_attention_heads, G = lc.num_key_value_heads, Hd = lc.head_dim;
    w.q_proj = take(x + "q_proj.weight", {H * Hd, D}, "num_attention_heads, head_dim");
    w.k_proj = take(x + "k_proj.weight", {G * Hd, D}, "num_key_value_heads, head_dim");
    w.v_proj = take(x + "v_proj.weight", {G * Hd, D}, "num_key_value_heads, head_dim");
    w.o_proj = take(x + "o_proj.weight", {D, H * Hd}, "num_attention_heads, head_dim");
  } else if (lc.has_ffn()) {
    w.up_proj = take(x + "up_proj.weight", {lc.intermediate_size, D}, "intermediate_size");
    w.down_proj = take(x + "down_proj.weight", {D, lc.intermediate_size}, "intermediate_size");
  } else {
    w.moe = take_moe(take, x, *lc.moe, D);
  }
  return w;
}

}  // namespace

NemotronHModel nemotron_h_model_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                                const std::string& file) {
  NemotronHModel model;
  model.config = c;
  model.router = read_options(c, file);
  Taker take{m, file, {}};
  const int64_t D = c.hidden_size, V = c.vocab_size;
  // save_pretrained writes NVIDIA's "backbone."; transformers 5 renames it "model." in memory.
  const std::string root = take.has("backbone.embeddings.weight") ? "backbone." : "model.";
  model.embeddings = take(root + "embeddings.weight", {V, D}, "vocab_size, hidden_size");
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& lc = c.layers[size_t(i)];
    model.layers.push_back(lc.is_present()
                               ? take_layer(take, fmt::format("{}layers.{}.", root, i), lc, D)
                               : NemotronHLayerWeights{});
  }
  model.norm_f = take(root + "norm_f.weight", {D}, "hidden_size");
  if (!c.tie_word_embeddings) {
    model.lm_head = take("lm_head.weight", {V, D}, "vocab_size, hidden_size");
  } else {
    model.lm_head = model.embeddings;
    // A tied head written out anyway is tolerated when it equals the embedding.
    if (take.has("lm_head.weight") &&
        at::equal(m.at("lm_head.weight").to(at::kFloat), model.embeddings))
      take.taken.insert("lm_head.weight");
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : m)
    if (!take.taken.count(name)) unexpected.push_back(name);
  if (!unexpected.empty()) {
    const size_t shown = std::min<size_t>(unexpected.size(), 4);
    throw FormatError(fmt::format(
        "[load_checkpoint] {}: tensor{} {}{} {} no place in the model config.json describes "
        "(model_type {}, {}): expected none, the forward would run without {}", file,
        unexpected.size() > 1 ? "s" : "",
        fmt::join(unexpected.begin(), unexpected.begin() + long(shown), ", "),
        unexpected.size() > shown ? fmt::format(" and {} more", unexpected.size() - shown) : "",
        unexpected.size() > 1 ? "have" : "has", c.model_type, c.architecture,
        unexpected.size() > 1 ? "them" : "it"));
  }
  return model;
}

std::vector<int64_t> generate(const NemotronHModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt) {
  const c10::Device dev = m.embeddings.device();
  NemotronHCache cache = NemotronHCache::allocate(
      m.config, 1, int64_t(prompt.size()) + opt.max_new_tokens, dev);
  return generate_with([&](const at::Tensor& input) { return m.forward(input, &cache, true); },
                       dev, m.config.eos_token_id, prompt, opt);
}

}  // namespace ac
