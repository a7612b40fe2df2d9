#include "prune/nemotron_h_prune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "importance/importance.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

using Problems = std::vector<std::string>;

// Appends "layer i: field found F, expected E" when `ok` is false.
void want(bool ok, size_t i, const char* field, int64_t found, const std::string& expected,
          Problems& out) {
  if (!ok)
    out.push_back(fmt::format("layer {}: {} {}, expected {}", i, field, found, expected));
}

void mamba_problems(size_t i, const Mamba2Config& p, const Mamba2Config& t, Problems& out) {
  const int64_t Gm = p.n_groups;
  want(t.mamba_num_heads >= Gm && t.mamba_num_heads <= p.mamba_num_heads &&
           t.mamba_num_heads % Gm == 0,
       i, "mamba_num_heads", t.mamba_num_heads,
       fmt::format("a multiple of n_groups {} in {}..{} (the same heads in every group)", Gm, Gm,
                   p.mamba_num_heads), out);
  want(t.mamba_head_dim >= 1 && t.mamba_head_dim <= p.mamba_head_dim, i, "mamba_head_dim",
       t.mamba_head_dim, fmt::format("1..{} (the parent's)", p.mamba_head_dim), out);
  const std::pair<const char*, std::pair<int64_t, int64_t>> kept[] = {
      {"n_groups", {t.n_groups, p.n_groups}},
      {"ssm_state_size", {t.ssm_state_size, p.ssm_state_size}},
      {"conv_kernel", {t.conv_kernel, p.conv_kernel}},
      {"chunk_size", {t.chunk_size, p.chunk_size}},
      {"use_bias", {t.use_bias, p.use_bias}},
      {"use_conv_bias", {t.use_conv_bias, p.use_conv_bias}}};
  for (const auto& [field, v] : kept)
    want(v.first == v.second, i, field, v.first,
         fmt::format("{} (the parent's: this pruning keeps it)", v.second), out);
}

void attention_problems(size_t i, const LayerConfig& p, const LayerConfig& t, Problems& out) {
  const int64_t ratio = p.num_attention_heads / p.num_key_value_heads;
  want(t.num_key_value_heads >= 1 && t.num_key_value_heads <= p.num_key_value_heads, i,
       "num_key_value_heads", t.num_key_value_heads,
       fmt::format("1..{} (the parent's)", p.num_key_value_heads), out);
  const int64_t G = std::max<int64_t>(t.num_key_value_heads, 1);
  want(t.num_attention_heads >= G && t.num_attention_heads % G == 0 &&
           t.num_attention_heads / G <= ratio,
       i, "num_attention_heads", t.num_attention_heads,
       fmt::format("a multiple of num_key_value_heads {} with at most {} query heads a group "
                   "(the parent's)", t.num_key_value_heads, ratio), out);
  want(t.head_dim == p.head_dim, i, "head_dim", t.head_dim,
       fmt::format("{} (the parent's: this pruning keeps it)", p.head_dim), out);
}

void moe_problems(size_t i, const MoeConfig& p, const MoeConfig& t, int64_t n_group,
                  Problems& out) {
  want(t.num_experts >= 2 && t.num_experts <= p.num_experts, i, "n_routed_experts",
       t.num_experts, fmt::format("2..{} (the parent's; the sigmoid router needs 2)",
                                  p.num_experts), out);
  want(n_group == 1 || t.num_experts == p.num_experts, i, "n_routed_experts", t.num_experts,
       fmt::format("{} (the parent's: with n_group {} the router's expert groups would change)",
                   p.num_experts, n_group), out);
  want(t.moe_intermediate_size >= 1 && t.moe_intermediate_size <= p.moe_intermediate_size, i,
       "moe_intermediate_size", t.moe_intermediate_size,
       fmt::format("1..{} (the parent's)", p.moe_intermediate_size), out);
  want(t.num_experts_per_tok >= 1 &&
           t.num_experts_per_tok <= std::min(p.num_experts_per_tok, t.num_experts),
       i, "num_experts_per_tok", t.num_experts_per_tok,
       fmt::format("1..{} (the parent's, and at most the experts kept)",
                   std::min(p.num_experts_per_tok, t.num_experts)), out);
  const int64_t Fs = p.shared_expert_intermediate_size;
  want(Fs == 0 ? t.shared_expert_intermediate_size == 0
               : t.shared_expert_intermediate_size >= 1 && t.shared_expert_intermediate_size <= Fs,
       i, "moe_shared_expert_intermediate_size", t.shared_expert_intermediate_size,
       Fs == 0 ? "0 (the parent has no shared expert)" : fmt::format("1..{} (the parent's)", Fs),
       out);
  want(t.moe_latent_size == p.moe_latent_size, i, "moe_latent_size", t.moe_latent_size,
       fmt::format("{} (the parent's: this pruning keeps it)", p.moe_latent_size), out);
}

void layer_problems(size_t i, const LayerConfig& p, const LayerConfig& t, int64_t n_group,
                    Problems& out) {
  if (!t.is_present()) return;  // removing a block is always allowed
  const char pk = nemotron_h_layer_char(p, int64_t(i)), tk = nemotron_h_layer_char(t, int64_t(i));
  if (pk != tk) {
    out.push_back(fmt::format("layer {}: block type '{}', expected the parent's '{}' or a "
                              "removed block", i, tk, pk));
    return;
  }
  if (pk == 'M') mamba_problems(i, *p.mamba, *t.mamba, out);
  if (pk == '*') attention_problems(i, p, t, out);
  if (pk == '-')
    want(t.intermediate_size >= 1 && t.intermediate_size <= p.intermediate_size, i,
         "intermediate_size", t.intermediate_size,
         fmt::format("1..{} (the parent's)", p.intermediate_size), out);
  if (pk == 'E') moe_problems(i, *p.moe, *t.moe, n_group, out);
}

// The top `per_group` of each of `groups` equal slices of `scores`, ascending: [groups *
// per_group] int64.
at::Tensor top_per_group(const at::Tensor& scores, int64_t groups, int64_t per_group) {
  const int64_t size = scores.size(0) / groups;
  std::vector<at::Tensor> kept;
  for (int64_t g = 0; g < groups; ++g)
    kept.push_back(top_k_indices(scores.narrow(0, g * size, size), per_group) + g * size);
  return at::cat(kept);
}

NemotronHLayerPlan plan_layer(const LayerConfig& t, const NemotronHLayerImportance& li) {
  NemotronHLayerPlan lp;
  if (!t.is_present()) {
    lp.removed = true;
    return lp;
  }
  if (t.has_mamba()) {
    const Mamba2Config& m = *t.mamba;
    lp.mamba_heads = top_per_group(li.mamba_heads, m.n_groups, m.mamba_num_heads / m.n_groups);
    lp.mamba_head_dim = top_k_indices(li.mamba_head_dim, m.mamba_head_dim);
  } else if (t.has_attention()) {
    const int64_t G = li.kv_groups.size(0), ratio = li.heads.size(0) / G;
    lp.kv_groups = top_k_indices(li.kv_groups, t.num_key_value_heads);
    std::vector<at::Tensor> heads;
    for (int64_t g : std::vector<int64_t>(lp.kv_groups.data_ptr<int64_t>(),
                                          lp.kv_groups.data_ptr<int64_t>() + lp.kv_groups.numel()))
      heads.push_back(top_k_indices(li.heads.narrow(0, g * ratio, ratio),
                                    t.num_attention_heads / t.num_key_value_heads) + g * ratio);
    lp.heads = at::cat(heads);
  } else if (t.has_ffn()) {
    lp.ffn = top_k_indices(li.ffn, t.intermediate_size);
  } else {
    const MoeConfig& m = *t.moe;
    lp.moe = keep_routed_experts(li.moe.experts, li.moe.expert_ffn, m.num_experts,
                                 m.moe_intermediate_size);
    if (m.shared_expert_intermediate_size > 0)
      lp.shared_ffn = top_k_indices(li.shared_ffn, m.shared_expert_intermediate_size);
  }
  return lp;
}

// The d_inner channels of the kept heads and head_dim channels, head-major: [nh' * P'].
at::Tensor inner_channels(const NemotronHLayerPlan& lp, int64_t P) {
  return (lp.mamba_heads.unsqueeze(1) * P + lp.mamba_head_dim.unsqueeze(0)).flatten();
}

at::Tensor rows(const at::Tensor& t, const at::Tensor& idx) {
  return t.defined() ? t.index_select(0, idx.to(t.device())).contiguous() : t;
}
at::Tensor cols(const at::Tensor& t, const at::Tensor& idx) {
  return t.index_select(1, idx.to(t.device())).contiguous();
}
at::Tensor range(int64_t from, int64_t n) { return at::arange(from, from + n, at::kLong); }

Mamba2Weights slice_mamba(const Mamba2Weights& w, const Mamba2Config& p,
                          const NemotronHLayerPlan& lp) {
  const int64_t Di = p.d_inner(), C = p.conv_dim(), BC = C - Di;
  const at::Tensor x = inner_channels(lp, p.mamba_head_dim);  // [nh' * P']
  // in_proj's rows: z [d_inner], xBC [conv_dim] (x, then B and C), dt [nh].
  const at::Tensor in_rows = at::cat({x, x + Di, range(2 * Di, BC), lp.mamba_heads + Di + C});
  const at::Tensor conv_rows = at::cat({x, range(Di, BC)});
  Mamba2Weights o;
  o.in_proj = rows(w.in_proj, in_rows);
  o.in_proj_bias = rows(w.in_proj_bias, in_rows);
  o.conv1d = rows(w.conv1d, conv_rows);
  o.conv1d_bias = rows(w.conv1d_bias, conv_rows);
  o.dt_bias = rows(w.dt_bias, lp.mamba_heads);
  o.A_log = rows(w.A_log, lp.mamba_heads);
  o.D = rows(w.D, lp.mamba_heads);
  o.norm = rows(w.norm, x);
  o.out_proj = cols(w.out_proj, x);
  o.out_proj_bias = w.out_proj_bias;
  return o;
}

// The rows of heads `heads` of width `Hd` in a [heads * Hd, ...] projection.
at::Tensor head_rows(const at::Tensor& heads, int64_t Hd) {
  return (heads.unsqueeze(1) * Hd + at::arange(Hd, at::kLong).unsqueeze(0)).flatten();
}

NemotronHMoeWeights slice_moe(const NemotronHMoeWeights& w, const NemotronHLayerPlan& lp) {
  NemotronHMoeWeights o = w;
  o.router = rows(w.router, lp.moe.experts);  // [E', D]
  o.correction_bias = rows(w.correction_bias, lp.moe.experts);
  o.up_proj = take_experts(w.up_proj, lp.moe, 1);    // [E', Fe', Din]
  o.down_proj = take_experts(w.down_proj, lp.moe, 2);  // [E', Din, Fe']
  if (lp.shared_ffn.defined()) {
    o.shared_up = rows(w.shared_up, lp.shared_ffn);
    o.shared_down = cols(w.shared_down, lp.shared_ffn);
  }
  return o;
}

NemotronHLayerWeights slice_layer(const NemotronHLayerWeights& w, const LayerConfig& p,
                                  const NemotronHLayerPlan& lp) {
  if (lp.removed) return {};
  NemotronHLayerWeights o;
  o.norm = w.norm;
  if (p.has_mamba()) {
    o.mamba = slice_mamba(w.mamba, *p.mamba, lp);
  } else if (p.has_attention()) {
    const at::Tensor q = head_rows(lp.heads, p.head_dim), kv = head_rows(lp.kv_groups, p.head_dim);
    o.q_proj = rows(w.q_proj, q);
    o.k_proj = rows(w.k_proj, kv);
    o.v_proj = rows(w.v_proj, kv);
    o.o_proj = cols(w.o_proj, q);
  } else if (p.has_ffn()) {
    o.up_proj = rows(w.up_proj, lp.ffn);
    o.down_proj = cols(w.down_proj, lp.ffn);
  } else {
    o.moe = slice_moe(w.moe, lp);
  }
  return o;
}

// 1 at `idx`, 0 elsewhere: [n] fp32.
at::Tensor ones_at(int64_t n, const at::Tensor& idx) {
  return at::zeros({n}, at::kFloat).index_fill_(0, idx, 1.0);
}

}  // namespace

void validate_nemotron_h_target(const ModelConfig& parent, const ModelConfig& target,
                                int64_t router_n_group) {
  Problems problems;
  if (target.num_layers() != parent.num_layers())
    problems.push_back(fmt::format("num_hidden_layers {}, expected the parent's {} (remove a "
                                   "layer by giving it no part, not by leaving it out)",
                                   target.num_layers(), parent.num_layers()));
  if (target.vocab_size != parent.vocab_size)
    problems.push_back(fmt::format("vocab_size {}, expected the parent's {}", target.vocab_size,
                                   parent.vocab_size));
  if (target.hidden_size != parent.hidden_size)
    problems.push_back(fmt::format("hidden_size {}, expected the parent's {} (this pruning keeps "
                                   "it)", target.hidden_size, parent.hidden_size));
  if (problems.empty())
    for (size_t i = 0; i < parent.layers.size(); ++i)
      layer_problems(i, parent.layers[i], target.layers[i], router_n_group, problems);
  if (!problems.empty())
    throw ConfigError(fmt::format("[prune_nemotron_h] target {}: {}", describe(target),
                                  fmt::join(problems, "; ")));
}

NemotronHPrunePlan plan_nemotron_h_pruning(const NemotronHModel& parent,
                                           const NemotronHImportance& imp,
                                           const ModelConfig& target) {
  const ModelConfig& c = parent.config;
  validate_nemotron_h_target(c, target, parent.router.n_group);
  check_nemotron_h_importance_matches(c, imp, "prune_nemotron_h");
  NemotronHPrunePlan plan;
  plan.config = c;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    plan.layers.push_back(plan_layer(target.layers[i], imp.layers[i]));
    LayerConfig& l = plan.config.layers[i];
    const LayerConfig& t = target.layers[i];
    if (!t.is_present()) {
      l = LayerConfig{};
      l.attention_no_op = l.ffn_no_op = true;
    } else if (l.has_mamba()) {
      l.mamba->mamba_num_heads = t.mamba->mamba_num_heads;
      l.mamba->mamba_head_dim = t.mamba->mamba_head_dim;
    } else if (l.has_attention()) {
      l.num_attention_heads = t.num_attention_heads;
      l.num_key_value_heads = t.num_key_value_heads;
    } else if (l.has_ffn()) {
      l.intermediate_size = t.intermediate_size;
    } else {
      l.moe->num_experts = t.moe->num_experts;
      l.moe->moe_intermediate_size = t.moe->moe_intermediate_size;
      l.moe->shared_expert_intermediate_size = t.moe->shared_expert_intermediate_size;
      l.moe->num_experts_per_tok = t.moe->num_experts_per_tok;
    }
  }
  plan.config.validate("prune_nemotron_h");
  return plan;
}

NemotronHModel apply_nemotron_h_plan(const NemotronHModel& m, const NemotronHPrunePlan& plan) {
  at::NoGradGuard no_grad;
  NemotronHModel out = m;
  out.config = plan.config;
  for (size_t i = 0; i < plan.layers.size(); ++i)
    out.layers[i] = slice_layer(m.layers[i], m.config.layers[i], plan.layers[i]);
  return out;
}

NemotronHModel prune_nemotron_h_model(const NemotronHModel& m, const NemotronHImportance& imp,
                                      const ModelConfig& target) {
  return apply_nemotron_h_plan(m, plan_nemotron_h_pruning(m, imp, target));
}

NemotronHMasks nemotron_h_masks_for_plan(const ModelConfig& parent,
                                         const NemotronHPrunePlan& plan) {
  NemotronHMasks masks;
  masks.layers.resize(parent.layers.size());
  for (size_t i = 0; i < parent.layers.size(); ++i) {
    const LayerConfig& p = parent.layers[i];
    const NemotronHLayerPlan& lp = plan.layers[i];
    NemotronHLayerMasks& lm = masks.layers[i];
    lm.removed = lp.removed;
    if (lp.removed || !p.is_present()) continue;
    if (p.has_mamba()) {
      lm.mamba_channels = at::outer(ones_at(p.mamba->mamba_num_heads, lp.mamba_heads),
                                    ones_at(p.mamba->mamba_head_dim, lp.mamba_head_dim));
    } else if (p.has_attention()) {
      lm.heads = ones_at(p.num_attention_heads, lp.heads);
    } else if (p.has_ffn()) {
      lm.ffn = ones_at(p.intermediate_size, lp.ffn);
    } else {
      const MoeConfig& pm = *p.moe;
      routed_expert_masks(lp.moe, pm.num_experts, pm.moe_intermediate_size, lm.experts,
                          lm.expert_ffn);
      if (lp.shared_ffn.defined())
        lm.shared_ffn = ones_at(pm.shared_expert_intermediate_size, lp.shared_ffn);
      lm.num_experts_per_tok = plan.config.layers[i].moe->num_experts_per_tok;
    }
  }
  return masks;
}

}  // namespace ac
