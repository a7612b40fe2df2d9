#include "prune/prune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace ac {

namespace {

// "2, 4, 6, 8": the num_attention_heads reachable with G kept groups of at most `per_group`.
std::string valid_head_counts(int64_t G, int64_t per_group) {
  std::vector<int64_t> v;
  for (int64_t k = 1; k <= per_group; ++k) v.push_back(G * k);
  return fmt::format("{}", fmt::join(v, ", "));
}

// The first problem of layer i of the target against the parent's layer; "" when none.
std::string attention_problem(size_t i, const LayerConfig& p, const LayerConfig& t) {
  if (!t.has_attention()) return "";
  if (!p.has_attention()) return fmt::format("layer {}: has attention but the parent's has none", i);
  if (t.head_dim != p.head_dim)
    return fmt::format("layer {}: head_dim {}, expected the parent's {} (pruning keeps head_dim)",
                       i, t.head_dim, p.head_dim);
  const int64_t G = t.num_key_value_heads, per_group = p.num_attention_heads / p.num_key_value_heads;
  if (G <= 0 || G > p.num_key_value_heads)
    return fmt::format("layer {}: num_key_value_heads {}, expected 1..{} (the parent's)", i, G,
                       p.num_key_value_heads);
  if (t.num_attention_heads % G != 0 || t.num_attention_heads / G > per_group)
    return fmt::format("layer {}: num_attention_heads {} is invalid with {} KV groups kept (the "
                       "parent has {} query heads per group); valid counts: {}",
                       i, t.num_attention_heads, G, per_group, valid_head_counts(G, per_group));
  return "";
}

std::string ffn_problem(size_t i, const LayerConfig& p, const LayerConfig& t) {
  if (!t.has_ffn()) return "";
  if (!p.has_ffn()) return fmt::format("layer {}: has an FFN but the parent's has none", i);
  if (t.intermediate_size > p.intermediate_size)
    return fmt::format("layer {}: intermediate_size {} exceeds the parent's {}", i,
                       t.intermediate_size, p.intermediate_size);
  return "";
}

// Query-head indices [H'] (ascending) kept in a layer: the top H'/G' heads of each kept group.
at::Tensor select_heads(const LayerImportance& li, const LayerConfig& p, const at::Tensor& groups,
                        int64_t heads_per_group) {
  const int64_t n = p.num_attention_heads / p.num_key_value_heads;
  std::vector<at::Tensor> parts;
  const auto* g = groups.data_ptr<int64_t>();
  for (int64_t j = 0; j < groups.numel(); ++j)
    parts.push_back(top_k_indices(li.heads.narrow(0, g[j] * n, n), heads_per_group) + g[j] * n);
  return at::cat(parts);
}

LayerPlan plan_layer(const LayerImportance& li, const LayerConfig& p, const LayerConfig& t) {
  LayerPlan lp;
  if (t.has_attention()) {
    at::Tensor kv_scores =
        li.kv_groups.defined() ? li.kv_groups : li.heads.view({p.num_key_value_heads, -1}).sum(1);
    lp.kv_groups = top_k_indices(kv_scores, t.num_key_value_heads);
    lp.heads = select_heads(li, p, lp.kv_groups, t.num_attention_heads / t.num_key_value_heads);
  }
  if (t.has_ffn()) lp.ffn = top_k_indices(li.ffn, t.intermediate_size);
  return lp;
}

LayerConfig pruned_layer(const LayerConfig& p, const LayerConfig& t) {
  LayerConfig l;
  l.head_dim = p.head_dim;
  l.attention_no_op = !t.has_attention();
  if (t.has_attention()) {
    l.num_attention_heads = t.num_attention_heads;
    l.num_key_value_heads = t.num_key_value_heads;
  }
  l.ffn_no_op = !t.has_ffn();
  if (t.has_ffn()) l.intermediate_size = t.intermediate_size;
  return l;
}

// Row indices [n*Hd] of heads `heads` in a [n_heads*Hd, ...] projection.
at::Tensor head_rows(const at::Tensor& heads, int64_t Hd) {
  return ((heads * Hd).unsqueeze(1) + at::arange(Hd, at::kLong)).reshape({-1});
}

// The rows or columns `idx` (CPU indices from the importance) of `t`, on `t`'s device.
at::Tensor take(const at::Tensor& t, int64_t dim, const at::Tensor& idx) {
  return t.index_select(dim, idx.to(t.device())).contiguous();
}

LayerWeights prune_layer(const LayerWeights& w, const LayerPlan& lp, const LayerConfig& p,
                         const at::Tensor& hid) {
  LayerWeights o;
  if (lp.heads.defined()) {
    const at::Tensor q = head_rows(lp.heads, p.head_dim), kv = head_rows(lp.kv_groups, p.head_dim);
    o.input_layernorm = take(w.input_layernorm, 0, hid);
    o.q_proj = take(take(w.q_proj, 0, q), 1, hid);  // [H'*Hd, D']
    o.k_proj = take(take(w.k_proj, 0, kv), 1, hid);  // [G'*Hd, D']
    o.v_proj = take(take(w.v_proj, 0, kv), 1, hid);
    if (w.q_bias.defined()) {
      o.q_bias = take(w.q_bias, 0, q);
      o.k_bias = take(w.k_bias, 0, kv);
      o.v_bias = take(w.v_bias, 0, kv);
    }
    o.o_proj = take(take(w.o_proj, 0, hid), 1, q);  // [D', H'*Hd]
    if (w.q_norm.defined()) {  // over head_dim, which pruning keeps: every head shares them
      o.q_norm = w.q_norm.clone();
      o.k_norm = w.k_norm.clone();
    }
  }
  if (lp.ffn.defined()) {
    o.post_attention_layernorm = take(w.post_attention_layernorm, 0, hid);
    o.gate_proj = take(take(w.gate_proj, 0, lp.ffn), 1, hid);  // [F', D']
    o.up_proj = take(take(w.up_proj, 0, lp.ffn), 1, hid);
    o.down_proj = take(take(w.down_proj, 0, hid), 1, lp.ffn);  // [D', F']
  }
  return o;
}

at::Tensor mask_of(int64_t n, const at::Tensor& kept) {
  at::Tensor m = at::zeros({n}, at::kFloat);
  if (kept.defined()) m.index_fill_(0, kept, 1.0);
  return m;
}

}  // namespace

void validate_target(const ModelConfig& parent, const ModelConfig& target,
                     const std::string& target_name, const std::string& parent_name) {
  auto bad = [&](const std::string& m) {
    throw ConfigError(fmt::format("[prune] {}: {} (parent: {})", target_name, m, parent_name));
  };
  if (target.num_layers() != parent.num_layers())
    bad(fmt::format("{} layers, expected the parent's {} (a removed block is attention_no_op "
                    "and ffn_no_op, not a missing layer)",
                    target.num_layers(), parent.num_layers()));
  if (target.vocab_size != parent.vocab_size)
    bad(fmt::format("vocab_size {}, expected the parent's {}", target.vocab_size,
                    parent.vocab_size));
  if (target.hidden_size <= 0 || target.hidden_size > parent.hidden_size)
    bad(fmt::format("hidden_size {}, expected 1..{} (the parent's)", target.hidden_size,
                    parent.hidden_size));
  for (size_t i = 0; i < parent.layers.size(); ++i)
    for (const std::string& p : {attention_problem(i, parent.layers[i], target.layers[i]),
                                 ffn_problem(i, parent.layers[i], target.layers[i])})
      if (!p.empty()) bad(p);
}

PrunePlan plan_pruning(const ModelConfig& parent, const Importance& imp,
                       const ModelConfig& target) {
  validate_target(parent, target);
  check_importance_matches(parent, imp, "prune");
  PrunePlan plan;
  plan.hidden = top_k_indices(imp.hidden, target.hidden_size);
  plan.config = parent;
  plan.config.hidden_size = target.hidden_size;
  for (size_t i = 0; i < parent.layers.size(); ++i) {
    plan.layers.push_back(plan_layer(imp.layers[i], parent.layers[i], target.layers[i]));
    plan.config.layers[i] = pruned_layer(parent.layers[i], target.layers[i]);
  }
  plan.config.validate("prune");
  return plan;
}

LlamaModel apply_plan(const LlamaModel& m, const PrunePlan& plan) {
  at::NoGradGuard no_grad;
  const ModelWeights& w = m.weights;
  LlamaModel out;
  out.config = plan.config;
  out.weights.embed_tokens = take(w.embed_tokens, 1, plan.hidden);  // [V, D']
  for (size_t i = 0; i < plan.layers.size(); ++i)
    out.weights.layers.push_back(
        prune_layer(w.layers[i], plan.layers[i], m.config.layers[i], plan.hidden));
  out.weights.norm = take(w.norm, 0, plan.hidden);
  out.weights.lm_head = m.config.tie_word_embeddings ? out.weights.embed_tokens
                                                     : take(w.lm_head, 1, plan.hidden);
  return out;
}

LlamaModel prune_model(const LlamaModel& m, const Importance& imp, const ModelConfig& target) {
  return apply_plan(m, plan_pruning(m.config, imp, target));
}

Masks masks_for_plan(const ModelConfig& parent, const PrunePlan& plan) {
  Masks masks;
  masks.hidden = mask_of(parent.hidden_size, plan.hidden);
  for (size_t i = 0; i < parent.layers.size(); ++i) {
    const LayerConfig& p = parent.layers[i];
    const LayerPlan& lp = plan.layers[i];
    LayerMasks lm;
    if (p.has_attention()) {
      lm.heads = mask_of(p.num_attention_heads, lp.heads);  // removed groups: all heads 0
      lm.attn_gate = at::full({}, lp.heads.defined() ? 1.0 : 0.0, at::kFloat);
    }
    if (p.has_ffn()) {
      lm.ffn = mask_of(p.intermediate_size, lp.ffn);
      lm.ffn_gate = at::full({}, lp.ffn.defined() ? 1.0 : 0.0, at::kFloat);
    }
    masks.layers.push_back(lm);
  }
  return masks;
}

Masks masks_for(const LlamaModel& m, const Importance& imp, const ModelConfig& target) {
  return masks_for_plan(m.config, plan_pruning(m.config, imp, target));
}

}  // namespace ac
