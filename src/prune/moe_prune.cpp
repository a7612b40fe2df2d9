#include "prune/moe_prune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "importance/importance.h"

namespace ac {

namespace {

// Problems of layer i of the target against the parent's, appended to `out`.
void layer_problems(size_t i, const LayerConfig& p, const LayerConfig& t,
                    std::vector<std::string>& out) {
  if (p.has_moe() != t.has_moe()) {
    out.push_back(fmt::format("layer {}: {} but the parent's is {}", i,
                              t.has_moe() ? "sparse" : "dense", p.has_moe() ? "sparse" : "dense"));
    return;
  }
  if (p.has_attention() != t.has_attention() || p.num_attention_heads != t.num_attention_heads ||
      p.num_key_value_heads != t.num_key_value_heads || p.head_dim != t.head_dim ||
      p.has_ffn() != t.has_ffn() || (p.has_ffn() && p.intermediate_size != t.intermediate_size))
    out.push_back(fmt::format("layer {}: the attention or the dense FFN differs from the "
                              "parent's (MoE pruning shrinks the experts only)", i));
  if (!p.has_moe()) return;
  const MoeConfig &pm = *p.moe, &tm = *t.moe;
  if (tm.num_experts < 1 || tm.num_experts > pm.num_experts)
    out.push_back(fmt::format("layer {}: num_experts {}, expected 1..{} (the parent's)", i,
                              tm.num_experts, pm.num_experts));
  if (tm.moe_intermediate_size < 1 || tm.moe_intermediate_size > pm.moe_intermediate_size)
    out.push_back(fmt::format("layer {}: moe_intermediate_size {}, expected 1..{} (the parent's)",
                              i, tm.moe_intermediate_size, pm.moe_intermediate_size));
  if (tm.num_experts_per_tok < 1 || tm.num_experts_per_tok > pm.num_experts_per_tok)
    out.push_back(fmt::format("layer {}: num_experts_per_tok {}, expected 1..{} (the parent's; "
                              "more than the experts kept is clamped to them)", i,
                              tm.num_experts_per_tok, pm.num_experts_per_tok));
}

MoeLayerPlan plan_layer(const MoeLayerImportance& li, const MoeConfig& t) {
  return keep_routed_experts(li.experts, li.expert_ffn, t.num_experts, t.moe_intermediate_size);
}

}  // namespace

void validate_moe_target(const ModelConfig& parent, const ModelConfig& target,
                         const std::string& target_name, const std::string& parent_name) {
  std::vector<std::string> problems;
  if (target.num_layers() != parent.num_layers())
    problems.push_back(fmt::format("{} layers, expected the parent's {}", target.num_layers(),
                                   parent.num_layers()));
  if (target.vocab_size != parent.vocab_size || target.hidden_size != parent.hidden_size)
    problems.push_back(fmt::format("vocab_size {} and hidden_size {}, expected the parent's {} "
                                   "and {}", target.vocab_size, target.hidden_size,
                                   parent.vocab_size, parent.hidden_size));
  if (problems.empty())
    for (size_t i = 0; i < parent.layers.size(); ++i)
      layer_problems(i, parent.layers[i], target.layers[i], problems);
  if (!problems.empty())
    throw ConfigError(fmt::format("[prune_moe] {}: {} (parent: {})", target_name,
                                  fmt::join(problems, "; "), parent_name));
}

MoePrunePlan plan_moe_pruning(const ModelConfig& parent, const MoeImportance& imp,
                              const ModelConfig& target) {
  validate_moe_target(parent, target);
  check_moe_importance_matches(parent, imp, "prune_moe");
  MoePrunePlan plan;
  plan.config = parent;
  plan.layers.resize(parent.layers.size());
  for (size_t i = 0; i < parent.layers.size(); ++i) {
    if (!parent.layers[i].has_moe()) continue;
    const MoeConfig& t = *target.layers[i].moe;
    plan.layers[i] = plan_layer(imp.layers[i], t);
    MoeConfig& m = *plan.config.layers[i].moe;
    m.num_experts = t.num_experts;
    m.moe_intermediate_size = t.moe_intermediate_size;
    m.num_experts_per_tok = std::min(t.num_experts_per_tok, t.num_experts);
  }
  plan.config.validate("prune_moe");
  return plan;
}

MoeModel apply_moe_plan(const MoeModel& m, const MoePrunePlan& plan) {
  at::NoGradGuard no_grad;
  MoeModel out = m;
  out.config = plan.config;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const MoeLayerPlan& lp = plan.layers[i];
    if (!lp.experts.defined()) continue;
    const MoeLayerWeights& w = m.moe[i];
    MoeLayerWeights& o = out.moe[i];
    o.router = w.router.index_select(0, lp.experts.to(w.router.device())).contiguous();  // [E', D]
    o.gate_proj = take_experts(w.gate_proj, lp, 1);  // [E', Fe', D]
    o.up_proj = take_experts(w.up_proj, lp, 1);
    o.down_proj = take_experts(w.down_proj, lp, 2);  // [E', D, Fe']
  }
  return out;
}

MoeModel prune_moe_model(const MoeModel& m, const MoeImportance& imp, const ModelConfig& target) {
  return apply_moe_plan(m, plan_moe_pruning(m.config, imp, target));
}

MoeMasks moe_masks_for_plan(const ModelConfig& parent, const MoePrunePlan& plan) {
  MoeMasks masks;
  masks.layers.resize(parent.layers.size());
  for (size_t i = 0; i < parent.layers.size(); ++i) {
    if (!parent.layers[i].has_moe()) continue;
    const MoeConfig& p = *parent.layers[i].moe;
    const MoeLayerPlan& lp = plan.layers[i];
    MoeLayerMasks& lm = masks.layers[i];
    routed_expert_masks(lp, p.num_experts, p.moe_intermediate_size, lm.experts, lm.expert_ffn);
  }
  return masks;
}

}  // namespace ac
