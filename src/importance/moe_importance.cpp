#include "importance/moe_importance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace ac {

namespace {

// Running fp32 sums of one sparse layer.
struct LayerSums {
  at::Tensor slots;     // [E] token-slots routed to each expert
  at::Tensor norms;     // [E] sum of ||weighted output||_2 over those slots
  at::Tensor act;       // [E, Fe] sum of |activation| over the rows routed to each expert
  int64_t all_slots = 0;
};

struct Sums : MoeObserver {
  std::vector<LayerSums> layers;

  void on_routing(int64_t layer, const Routing& r) override {
    layers[size_t(layer)].all_slots += r.experts.numel();
  }
  void on_expert(int64_t layer, int64_t e, const at::Tensor& act, const at::Tensor& out) override {
    LayerSums& s = layers[size_t(layer)];
    s.slots[e] += double(act.size(0));
    s.norms[e] += at::norm(out.to(at::kFloat), 2, {-1}).sum().cpu();
    s.act[e] += act.to(at::kFloat).abs().sum(0).cpu();
  }
};

at::Tensor check_batch(const at::Tensor& b, size_t i) {
  if (!b.defined() || b.dim() != 2 || b.numel() == 0 || at::isFloatingType(b.scalar_type()))
    throw ConfigError(fmt::format("[moe_importance] batch {}: expected non-empty integer tokens "
                                  "[B, T], found {} {}", i,
                                  b.defined() ? c10::toString(b.scalar_type()) : "none",
                                  b.defined() ? b.sizes().vec() : std::vector<int64_t>{}));
  return b.to(at::kLong);
}

MoeLayerImportance finish(const LayerSums& s) {
  MoeLayerImportance li;
  const double all = double(std::max<int64_t>(s.all_slots, 1));
  const at::Tensor count = s.slots.clamp_min(1.0);  // a never-routed expert's sums are 0
  li.routing_share = s.slots / all;
  li.output_norm = s.norms / count;
  li.experts = s.norms / all;
  li.expert_ffn = s.act / count.unsqueeze(1);
  return li;
}

}  // namespace

MoeImportance compute_moe_importance(const MoeModel& m, const std::vector<at::Tensor>& batches) {
  if (batches.empty()) throw ConfigError("[moe_importance] no calibration batches");
  at::NoGradGuard no_grad;
  const ModelConfig& c = m.config;
  Sums sums;
  sums.layers.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& moe = *c.layers[i].moe;
    sums.layers[i].slots = at::zeros({moe.num_experts}, at::kFloat);
    sums.layers[i].norms = at::zeros({moe.num_experts}, at::kFloat);
    sums.layers[i].act = at::zeros({moe.num_experts, moe.moe_intermediate_size}, at::kFloat);
  }
  MoeImportance imp;
  MoeForwardOptions opt;
  opt.observer = &sums;
  for (size_t i = 0; i < batches.size(); ++i) {
    const at::Tensor tokens = check_batch(batches[i], i);
    m.forward(tokens, opt);
    imp.num_tokens += tokens.numel();
  }
  imp.layers.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].has_moe()) imp.layers[i] = finish(sums.layers[i]);
  return imp;
}

void check_moe_importance_matches(const ModelConfig& c, const MoeImportance& imp,
                                  const char* where) {
  auto bad = [&](const std::string& what) {
    throw ConfigError(fmt::format("[{}] MoE importance: {}: computed for another model?", where,
                                  what));
  };
  if (imp.num_layers() != c.num_layers())
    bad(fmt::format("{} layers, the model has {}", imp.num_layers(), c.num_layers()));
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& moe = *c.layers[i].moe;
    const MoeLayerImportance& li = imp.layers[i];
    const std::vector<int64_t> experts{moe.num_experts};
    const std::vector<int64_t> ffn{moe.num_experts, moe.moe_intermediate_size};
    if (!li.experts.defined() || li.experts.sizes().vec() != experts)
      bad(fmt::format("layers.{}.experts has shape {}, expected {} (num_experts)", i,
                      li.experts.defined() ? li.experts.sizes().vec() : std::vector<int64_t>{},
                      experts));
    if (!li.expert_ffn.defined() || li.expert_ffn.sizes().vec() != ffn)
      bad(fmt::format("layers.{}.expert_ffn has shape {}, expected {} (num_experts, "
                      "moe_intermediate_size)", i,
                      li.expert_ffn.defined() ? li.expert_ffn.sizes().vec() : std::vector<int64_t>{},
                      ffn));
  }
}

}  // namespace ac
