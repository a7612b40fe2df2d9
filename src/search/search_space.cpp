#include "search/search_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "common/runtime.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/ladders.h"

namespace ac {

namespace {

LayerConfig attention_removed(LayerConfig l) {
  l.attention_no_op = true;
  l.num_attention_heads = l.num_key_value_heads = 0;
  return l;
}

LayerConfig ffn_removed(LayerConfig l) {
  l.ffn_no_op = true;
  l.intermediate_size = 0;
  return l;
}

// Fraction of the total score that a 0/1 mask drops (by count when the scores are not positive).
double dropped_fraction(const at::Tensor& mask, const at::Tensor& scores) {
  double total = scores.sum().item<double>();
  if (!(total > 0)) return 1.0 - mask.mean().item<double>();
  return 1.0 - (mask * scores).sum().item<double>() / total;
}

// Layer weights w_l = L x influence_l / sum(influence); 1 each when not usable.
std::vector<double> layer_weights(const Importance& imp, int64_t L) {
  std::vector<double> w(size_t(L), 1.0);
  if (!imp.block_influence.defined() || imp.block_influence.numel() != L) return w;
  at::Tensor bi = imp.block_influence.to(at::kDouble).clamp_min(0);
  double total = bi.sum().item<double>();
  if (!(total > 0)) return w;
  for (int64_t l = 0; l < L; ++l) w[size_t(l)] = double(L) * bi[l].item<double>() / total;
  return w;
}

void check_options(const SearchSpaceOptions& o) {
  if (o.row_multiple < 1)
    throw ConfigError(msg("search", "row_multiple: expected >= 1, found {}", o.row_multiple));
  require_width_granularity(o.width_granularity, "search");
  if (!(o.min_width_fraction > 0 && o.min_width_fraction <= 1))
    throw ConfigError(msg("search", "min_width_fraction: expected in (0, 1], found {}",
                          o.min_width_fraction));
  if (o.tensor_parallel < 1)
    throw ConfigError(msg("search", "tensor_parallel: expected >= 1, found {}", o.tensor_parallel));
  if (o.max_hidden_options < 1 || o.max_ffn_widths < 1)
    throw ConfigError(msg("search", "max_hidden_options / max_ffn_widths: expected >= 1, found "
                                    "{} / {}", o.max_hidden_options, o.max_ffn_widths));
}

// The hidden-size decision: the ladder (less what the engine cannot load), each option's mask
// from the same selection rule as pruning (prune/prune.h) and the importance it gives up.
void add_hidden_options(SearchSpace& s, const Importance& imp, const SearchSpaceOptions& opt,
                        int64_t g) {
  const ModelConfig& parent = s.parent;
  std::vector<int64_t> ladder =
      spread_width_ladder(parent.hidden_size, g, opt.min_width_fraction, opt.max_hidden_options);
  if (opt.max_width_spread > 0 && !opt.width_repeatability.empty()) {
    Profile rep;  // only for its nearest-width lookup
    rep.width_repeatability = opt.width_repeatability;
    std::vector<int64_t> kept;
    for (int64_t D : ladder) {
      const WidthRepeatability r = rep.repeatability_at(D);
      if (D != parent.hidden_size && std::max(r.tpot_spread, r.ttft_spread) > opt.max_width_spread) {
        s.widths_left_out.push_back(D);
        log_warn(fmt::format("[search] hidden size {} left out: with each of the profile's passes "
                             "left out in turn it was predicted {:.1f}% (TPOT) / {:.1f}% (TTFT) "
                             "apart, more than {:.1f}%", D,
                             100 * r.tpot_spread, 100 * r.ttft_spread, 100 * opt.max_width_spread));
        continue;
      }
      kept.push_back(D);
    }
    ladder = kept;
  }
  s.hidden_sizes = hidden_sizes_the_engine_loads(ladder, parent, opt.structure);
  std::vector<at::Tensor> hm;
  for (int64_t D : s.hidden_sizes) {
    ModelConfig t = parent;
    t.hidden_size = D;
    hm.push_back(masks_for_plan(parent, plan_pruning(parent, imp, t)).hidden);
    s.hidden_loss.push_back(dropped_fraction(hm.back(), imp.hidden) * double(parent.num_layers()));
  }
  s.hidden_masks = at::stack(hm);  // [nD, D]
}

// Attention options of parent layer `p`: (G', per') pairs by heads kept, then KV groups kept;
// then removed where allowed (a layer without attention has only "removed").
std::vector<LayerConfig> attention_options(const LayerConfig& p, const SearchSpaceOptions& opt,
                                           bool removable) {
  const EngineStructure& rules = opt.structure;
  const int64_t tp = opt.tensor_parallel;
  std::vector<LayerConfig> att;
  if (p.has_attention()) {
    const int64_t G = p.num_key_value_heads, per = p.num_attention_heads / G;
    for (int64_t gk : count_ladder(G, opt.min_width_fraction))
      for (int64_t pk : count_ladder(per, opt.min_width_fraction)) {
        LayerConfig a = p;
        a.num_attention_heads = gk * pk;
        a.num_key_value_heads = gk;
        // One query-head count for every layer, or a head_dim derived from it: keep the
        // parent's. Counts the tensor parallelism cannot shard are left out.
        if ((!rules.per_layer_query_heads || !rules.head_dim_explicit) &&
            a.num_attention_heads != p.num_attention_heads)
          continue;
        if (!rules.shards("num_attention_heads", a.num_attention_heads, tp) ||
            !rules.shards("num_key_value_heads", a.num_key_value_heads, tp))
          continue;
        // o_proj's rows are H' x head_dim wide: a whole number of the weight type's blocks.
        if (a.num_attention_heads != p.num_attention_heads &&
            a.num_attention_heads * a.head_dim % opt.row_multiple != 0)
          continue;
        att.push_back(a);
      }
    std::stable_sort(att.begin(), att.end(), [](const LayerConfig& a, const LayerConfig& b) {
      return a.num_attention_heads != b.num_attention_heads
                 ? a.num_attention_heads > b.num_attention_heads
                 : a.num_key_value_heads > b.num_key_value_heads;
    });
  }
  if ((opt.allow_removal && rules.attention_removed && removable) || !p.has_attention())
    att.push_back(attention_removed(p));
  return att;
}

// Which layers may lose their attention: all, or under max_attention_removed = N the N layers
// with attention of lowest block influence (ties: the lower index), the layers depth pruning
// would give up first (ShortGPT, arXiv 2403.03853).
std::vector<bool> attention_removable(const ModelConfig& parent,
                                      const std::vector<double>& influence,
                                      const SearchSpaceOptions& opt) {
  const int64_t L = parent.num_layers();
  if (opt.max_attention_removed < 0) return std::vector<bool>(size_t(L), true);
  std::vector<int64_t> order;
  for (int64_t l = 0; l < L; ++l)
    if (parent.layers[size_t(l)].has_attention()) order.push_back(l);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return influence[size_t(a)] < influence[size_t(b)];
  });
  std::vector<bool> removable(size_t(L), false);
  for (size_t i = 0; i < order.size() && int64_t(i) < opt.max_attention_removed; ++i)
    removable[size_t(order[i])] = true;
  return removable;
}

// FFN options of parent layer `p`: the ladder in steps of `ffn_step`, then removed where allowed.
std::vector<LayerConfig> ffn_options(const LayerConfig& p, int64_t ffn_step,
                                     const SearchSpaceOptions& opt) {
  std::vector<LayerConfig> ffn;
  if (p.has_ffn())
    for (int64_t F : spread_width_ladder(p.intermediate_size, ffn_step, opt.min_width_fraction,
                                         opt.max_ffn_widths)) {
      LayerConfig f = p;
      f.intermediate_size = F;
      ffn.push_back(f);
    }
  if ((opt.allow_removal && opt.structure.ffn_removed) || !p.has_ffn()) ffn.push_back(ffn_removed(p));
  return ffn;
}

// Layer l's options with their masks, from the same selection rule as pruning (prune/prune.h),
// and the importance each gives up (times the layer's weight `w`).
void add_layer_options(SearchSpace& s, const Importance& imp, int64_t l, double w,
                       std::vector<LayerConfig> att, std::vector<LayerConfig> ffn) {
  const ModelConfig& parent = s.parent;
  const LayerConfig& p = parent.layers[size_t(l)];
  std::vector<at::Tensor> heads, agate, fmask, fgate;
  std::vector<double> aloss, floss;
  for (const LayerConfig& a : att) {
    ModelConfig t = parent;
    LayerConfig& tl = t.layers[size_t(l)];
    tl = a.has_attention() ? a : attention_removed(p);
    tl.intermediate_size = p.intermediate_size;
    tl.ffn_no_op = p.ffn_no_op;
    if (!p.has_attention()) {
      aloss.push_back(0.0);
      continue;
    }
    LayerMasks m = masks_for_plan(parent, plan_pruning(parent, imp, t)).layers[size_t(l)];
    heads.push_back(m.heads);
    agate.push_back(m.attn_gate);
    aloss.push_back(w * dropped_fraction(m.heads, imp.layers[size_t(l)].heads));
  }
  for (const LayerConfig& f : ffn) {
    ModelConfig t = parent;
    t.layers[size_t(l)].intermediate_size = f.intermediate_size;
    t.layers[size_t(l)].ffn_no_op = f.ffn_no_op;
    if (!p.has_ffn()) {
      floss.push_back(0.0);
      continue;
    }
    LayerMasks m = masks_for_plan(parent, plan_pruning(parent, imp, t)).layers[size_t(l)];
    fmask.push_back(m.ffn);
    fgate.push_back(m.ffn_gate);
    floss.push_back(w * dropped_fraction(m.ffn, imp.layers[size_t(l)].ffn));
  }
  s.head_masks.push_back(heads.empty() ? at::Tensor() : at::stack(heads));
  s.attn_gates.push_back(agate.empty() ? at::Tensor() : at::stack(agate));
  s.ffn_masks.push_back(fmask.empty() ? at::Tensor() : at::stack(fmask));
  s.ffn_gates.push_back(fgate.empty() ? at::Tensor() : at::stack(fgate));
  s.attention.push_back(std::move(att));
  s.ffn.push_back(std::move(ffn));
  s.attention_loss.push_back(std::move(aloss));
  s.ffn_loss.push_back(std::move(floss));
}

}  // namespace

int64_t SearchSpace::num_decisions() const {
  int64_t n = hidden_sizes.size() > 1;
  for (size_t l = 0; l < attention.size(); ++l)
    n += int64_t(attention[l].size() > 1) + int64_t(ffn[l].size() > 1);
  return n;
}

ArchChoice SearchSpace::full() const {
  ArchChoice c;
  c.attention.assign(attention.size(), 0);
  c.ffn.assign(ffn.size(), 0);
  return c;
}

std::string SearchSpace::attention_label(int64_t layer, int64_t option) const {
  const LayerConfig& a = attention.at(size_t(layer)).at(size_t(option));
  if (!a.has_attention()) return "removed";
  return fmt::format("H{}/G{}", a.num_attention_heads, a.num_key_value_heads);
}

std::string SearchSpace::ffn_label(int64_t layer, int64_t option) const {
  const LayerConfig& f = ffn.at(size_t(layer)).at(size_t(option));
  return f.has_ffn() ? std::to_string(f.intermediate_size) : "removed";
}

SearchSpace build_search_space(const ModelConfig& parent, const Importance& imp,
                               const SearchSpaceOptions& opt) {
  check_options(opt);
  parent.validate("search");
  check_importance_matches(parent, imp, "search");
  const int64_t L = parent.num_layers(), g = std::lcm(opt.width_granularity, opt.row_multiple);
  SearchSpace s;
  s.parent = parent;
  s.max_blocks_removed = opt.max_blocks_removed >= 0 ? opt.max_blocks_removed : L / 3;
  for (int64_t l = 0; l < L; ++l)
    s.block_influence.push_back(imp.block_influence.defined() && imp.block_influence.numel() == L
                                    ? imp.block_influence[l].item<double>()
                                    : 0.0);
  add_hidden_options(s, imp, opt, g);
  const std::vector<double> w = layer_weights(imp, L);
  const int64_t ffn_step = ffn_width_step(g, opt.structure, opt.tensor_parallel);
  const std::vector<bool> removable = attention_removable(parent, s.block_influence, opt);
  for (int64_t l = 0; l < L; ++l) {
    const LayerConfig& p = parent.layers[size_t(l)];
    add_layer_options(s, imp, l, w[size_t(l)], attention_options(p, opt, removable[size_t(l)]),
                      ffn_options(p, ffn_step, opt));
  }
  return s;
}

ModelConfig target_of(const SearchSpace& s, const ArchChoice& c) {
  const int64_t L = s.num_layers();
  if (c.attention.size() != size_t(L) || c.ffn.size() != size_t(L) || c.hidden < 0 ||
      c.hidden >= int64_t(s.hidden_sizes.size()))
    throw ConfigError(msg("search", "choice with hidden option {} and {} / {} layer options does "
                                    "not fit the space ({} hidden options, {} layers)",
                          c.hidden, c.attention.size(), c.ffn.size(), s.hidden_sizes.size(), L));
  ModelConfig t = s.parent;
  t.hidden_size = s.hidden_sizes[size_t(c.hidden)];
  for (int64_t l = 0; l < L; ++l) {
    const int64_t a = c.attention[size_t(l)], f = c.ffn[size_t(l)];
    if (a < 0 || a >= int64_t(s.attention[size_t(l)].size()) || f < 0 ||
        f >= int64_t(s.ffn[size_t(l)].size()))
      throw ConfigError(msg("search", "layer {}: options attention {} / FFN {} out of range "
                                      "[0, {}) / [0, {})",
                            l, a, f, s.attention[size_t(l)].size(), s.ffn[size_t(l)].size()));
    const LayerConfig& ao = s.attention[size_t(l)][size_t(a)];
    const LayerConfig& fo = s.ffn[size_t(l)][size_t(f)];
    LayerConfig& tl = t.layers[size_t(l)];
    tl.num_attention_heads = ao.num_attention_heads;
    tl.num_key_value_heads = ao.num_key_value_heads;
    tl.attention_no_op = ao.attention_no_op || !ao.has_attention();
    tl.intermediate_size = fo.intermediate_size;
    tl.ffn_no_op = fo.ffn_no_op || !fo.has_ffn();
  }
  return t;
}

CostEstimate choice_cost(const SearchSpace& s, const ArchChoice& c, const CostFn& cost) {
  return cost(drop_removed_blocks(target_of(s, c)));
}

int64_t smallest_kept_option(const std::vector<LayerConfig>& options, bool attention) {
  for (int64_t i = int64_t(options.size()) - 1; i >= 0; --i)
    if (attention ? options[size_t(i)].has_attention() : options[size_t(i)].has_ffn()) return i;
  return -1;
}

int64_t removed_option(const std::vector<LayerConfig>& options, bool attention) {
  for (int64_t i = 0; i < int64_t(options.size()); ++i)
    if (!(attention ? options[size_t(i)].has_attention() : options[size_t(i)].has_ffn())) return i;
  return -1;
}

std::string structural_violation(const SearchSpace& s, const ArchChoice& c) {
  ModelConfig t = target_of(s, c);
  int64_t removed = 0, attention = 0, parent_attention = 0;
  for (size_t l = 0; l < t.layers.size(); ++l) {
    const LayerConfig& p = s.parent.layers[l];
    const bool parent_has = p.has_attention() || p.has_ffn();
    removed += parent_has && !t.layers[l].has_attention() && !t.layers[l].has_ffn();
    attention += t.layers[l].has_attention();
    parent_attention += p.has_attention();
  }
  if (removed > s.max_blocks_removed)
    return fmt::format("{} whole blocks removed, at most {} allowed", removed, s.max_blocks_removed);
  if (parent_attention > 0 && attention == 0) return "no layer keeps its attention";
  return "";
}

double importance_lost(const SearchSpace& s, const ArchChoice& c) {
  double lost = s.hidden_loss.at(size_t(c.hidden));
  for (size_t l = 0; l < s.attention.size(); ++l)
    lost += s.attention_loss[l].at(size_t(c.attention[l])) + s.ffn_loss[l].at(size_t(c.ffn[l]));
  return lost;
}

ArchChoice smallest_choice(const SearchSpace& s) {
  const int64_t L = s.num_layers();
  ArchChoice c;
  c.hidden = int64_t(s.hidden_sizes.size()) - 1;
  // Layers by block influence, highest first (ties: lower index first).
  std::vector<int64_t> order(static_cast<size_t>(L));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return s.block_influence[size_t(a)] > s.block_influence[size_t(b)];
  });
  int64_t keeper = -1;  // the layer that keeps its attention
  for (int64_t l : order)
    if (s.attention[size_t(l)].front().has_attention()) {
      keeper = l;
      break;
    }
  for (int64_t l = 0; l < L; ++l) {
    const auto& att = s.attention[size_t(l)];
    const auto& ffn = s.ffn[size_t(l)];
    int64_t a = int64_t(att.size()) - 1;
    if (l == keeper && !att[size_t(a)].has_attention() && a > 0) --a;  // smallest kept option
    c.attention.push_back(a);
    int64_t f = int64_t(ffn.size()) - 1;
    if (!ffn[size_t(f)].has_ffn() && f > 0) --f;  // smallest width; removal decided below
    c.ffn.push_back(f);
  }
  // Remove the FFN too in the attention-free layers of lowest influence, up to the rule's count.
  int64_t removed = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t l = *it;
    const auto& ffn = s.ffn[size_t(l)];
    if (s.attention[size_t(l)][size_t(c.attention[size_t(l)])].has_attention()) continue;
    if (!ffn.back().has_ffn() && removed < s.max_blocks_removed) {
      c.ffn[size_t(l)] = int64_t(ffn.size()) - 1;
      ++removed;
    }
  }
  return c;
}

nlohmann::json probabilities_json(const SearchSpace& s, const at::Tensor& p_hidden,
                                  const std::vector<at::Tensor>& p_attention,
                                  const std::vector<at::Tensor>& p_ffn) {
  auto vec = [](const at::Tensor& t) {
    at::Tensor d = t.detach().to(at::kDouble).contiguous();
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  };
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < s.num_layers(); ++l) {
    std::vector<std::string> al, fl;
    for (int64_t a = 0; a < int64_t(s.attention[size_t(l)].size()); ++a) al.push_back(s.attention_label(l, a));
    for (int64_t f = 0; f < int64_t(s.ffn[size_t(l)].size()); ++f) fl.push_back(s.ffn_label(l, f));
    layers.push_back({{"layer", l},
                      {"attention", {{"options", al}, {"p", vec(p_attention.at(size_t(l)))}}},
                      {"ffn", {{"options", fl}, {"p", vec(p_ffn.at(size_t(l)))}}}});
  }
  return {{"hidden", {{"options", s.hidden_sizes}, {"p", vec(p_hidden)}}}, {"layers", layers}};
}

}  // namespace ac
