#include "search/nemotron_h_minitron.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/engine.h"
#include "prune/nemotron_h_prune.h"
#include "search/ladders.h"

namespace ac {

namespace {

constexpr const char* kWhere = "search";

// The levers of one shape, in the order of its coverage test: nh', P', F', E', Fe', layers kept.
using Levers = std::array<int64_t, 6>;

bool covers(const Levers& a, const Levers& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] < b[i]) return false;
  return true;
}

// The parent's size of each lever, from its first layer of the kind (a Nemotron-H config has the
// same Mamba-2 mixer, MLP and MoE sizes in every layer of a kind); 0 where the kind is absent.
struct ParentSizes {
  int64_t nh = 0, P = 0, groups = 1, F = 0, E = 0, Fe = 0, k = 0;
};

ParentSizes parent_sizes(const ModelConfig& c) {
  ParentSizes s;
  for (const LayerConfig& l : c.layers) {
    if (l.has_mamba() && !s.nh)
      s.nh = l.mamba->mamba_num_heads, s.P = l.mamba->mamba_head_dim, s.groups = l.mamba->n_groups;
    if (l.has_ffn() && !s.F) s.F = l.intermediate_size;
    if (l.has_moe() && !s.E)
      s.E = l.moe->num_experts, s.Fe = l.moe->moe_intermediate_size, s.k = l.moe->num_experts_per_tok;
  }
  return s;
}

// {full}, then full - step, full - 2 step, ... while >= the smallest kept (descending).
std::vector<int64_t> step_ladder(int64_t full, int64_t step, int64_t smallest) {
  std::vector<int64_t> out;
  if (full <= 0) return {0};
  out.push_back(full);
  for (int64_t v = full - step; step > 0 && v >= std::max<int64_t>(smallest, 1); v -= step)
    out.push_back(v);
  return out;
}

// The layers removed for `drop` (lowest block influence first, never the first or the last, at
// least one attention layer kept); fewer when the rules allow fewer.
std::vector<size_t> layers_to_drop(const ModelConfig& parent, const NemotronHImportance& imp,
                                   int64_t drop) {
  const size_t L = parent.layers.size();
  std::vector<size_t> order;
  for (size_t i = 1; i + 1 < L; ++i) order.push_back(i);
  const at::Tensor infl = imp.block_influence.to(at::kDouble).contiguous();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return infl[int64_t(a)].item<double>() < infl[int64_t(b)].item<double>();
  });
  int64_t attention_left = 0;
  for (const LayerConfig& l : parent.layers) attention_left += l.has_attention();
  std::vector<size_t> out;
  for (size_t i : order) {
    if (int64_t(out.size()) == drop) break;
    if (parent.layers[i].has_attention()) {
      if (attention_left <= 1) continue;
      --attention_left;
    }
    out.push_back(i);
  }
  return out;
}

// "nh 6, P 32, F 192, E 8, Fe 96, -1 layer(s)", the levers the parent has.
std::string shape_text(const ParentSizes& s, int64_t nh, int64_t P, int64_t F, int64_t E,
                       int64_t Fe, size_t dropped) {
  std::string t;
  auto add = [&](const char* name, int64_t v) { t += fmt::format("{} {}, ", name, v); };
  if (s.nh) add("nh", nh), add("P", P);
  if (s.F) add("F", F);
  if (s.E) add("E", E), add("Fe", Fe);
  return t + fmt::format("-{} layer(s)", dropped);
}

}  // namespace

int64_t tokens_in(const std::vector<at::Tensor>& batches) {
  int64_t n = 0;
  for (const at::Tensor& b : batches) n += b.numel();
  return n;
}

std::vector<at::Tensor> nemotron_h_logprobs(const NemotronHModel& m,
                                            const std::vector<at::Tensor>& calibration) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const at::Tensor& b : calibration) out.push_back(at::log_softmax(m.forward(b), -1));
  return out;
}

double nemotron_h_calibration_kl(const std::vector<at::Tensor>& teacher_logprobs,
                                 const NemotronHModel& student,
                                 const std::vector<at::Tensor>& calibration) {
  at::NoGradGuard no_grad;
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < calibration.size(); ++i) {
    const at::Tensor& ref = teacher_logprobs[i];
    const at::Tensor lp = at::log_softmax(student.forward(calibration[i]), -1);
    sum += (ref.exp() * (ref - lp)).sum().item<double>();
    n += calibration[i].numel();
  }
  return sum / double(std::max<int64_t>(n, 1));
}

NemotronHGrid nemotron_h_minitron_grid(const NemotronHModel& teacher,
                                       const NemotronHImportance& imp, const Scenario& scenario,
                                       const Limits& limits,
                                       const std::vector<at::Tensor>& calibration,
                                       const NemotronHGridOptions& opt) {
  require_width_granularity(opt.width_granularity, kWhere);
  const ModelConfig& parent = teacher.config;
  const ParentSizes s = parent_sizes(parent);
  const double frac = opt.min_width_fraction;
  const int64_t g = opt.width_granularity;

  // The ladders (file header).
  std::vector<int64_t> heads;
  if (s.nh > 0)
    for (int64_t k = s.nh / s.groups; k >= std::max<int64_t>(1, smallest_count(s.nh / s.groups, frac)); --k)
      heads.push_back(k * s.groups);
  else
    heads = {0};
  const std::vector<int64_t> head_dims =
      s.P > 0 ? step_ladder(s.P, mamba_head_dim_step(s.P), smallest_count(s.P, frac))
              : std::vector<int64_t>{0};
  const std::vector<int64_t> ffn =
      s.F > 0 ? stepped_width_ladder(s.F, g, frac, s.F / 8, FirstRung::nearest)
              : std::vector<int64_t>{0};
  const std::vector<int64_t> expert_width =
      s.Fe > 0 ? stepped_width_ladder(s.Fe, g, frac, s.Fe / 8, FirstRung::nearest)
               : std::vector<int64_t>{0};
  std::vector<int64_t> experts = {s.E};
  if (s.E > 0 && teacher.router.n_group == 1)
    experts = step_ladder(s.E, std::max<int64_t>(1, s.E / 8),
                          std::max({int64_t(2), s.k, smallest_count(s.E, frac)}));
  std::vector<std::vector<size_t>> drops;
  for (int64_t d = 0; d <= opt.max_layers_dropped; ++d) {
    std::vector<size_t> layers = layers_to_drop(parent, imp, d);
    if (int64_t(layers.size()) == d) drops.push_back(std::move(layers));
  }

  NemotronHGrid grid;
  std::vector<NemotronHGridCandidate> feasible;
  std::vector<Levers> levers;
  std::vector<NemotronHGridCandidate> buildable_smallest;  // the least-parameter buildable shape
  for (int64_t nh : heads)
    for (int64_t P : head_dims)
      for (int64_t F : ffn)
        for (int64_t E : experts)
          for (int64_t Fe : expert_width)
            for (const std::vector<size_t>& drop : drops) {
              ++grid.shapes;
              ModelConfig t = parent;
              for (LayerConfig& l : t.layers) {
                if (l.has_mamba()) l.mamba->mamba_num_heads = nh, l.mamba->mamba_head_dim = P;
                if (l.has_ffn()) l.intermediate_size = F;
                if (l.has_moe()) l.moe->num_experts = E, l.moe->moe_intermediate_size = Fe;
              }
              for (size_t i : drop) {
                t.layers[i] = LayerConfig{};
                t.layers[i].attention_no_op = t.layers[i].ffn_no_op = true;
              }
              try {
                validate_nemotron_h_target(parent, t, teacher.router.n_group);
              } catch (const ConfigError&) {
                continue;  // e.g. fewer experts than experts per token
              }
              if (!structure_violations(t, scenario.engine_spec, scenario.workload.tensor_parallel)
                       .empty())
                continue;
              ++grid.buildable;
              NemotronHGridCandidate c;
              c.config = t;
              c.cost = predict(t, scenario, nullptr);
              c.shape = shape_text(s, nh, P, F, E, Fe, drop.size());
              if (buildable_smallest.empty() ||
                  t.num_parameters() < buildable_smallest.front().config.num_parameters())
                buildable_smallest = {c};
              if (!check_limits(c.cost, limits).empty()) continue;
              feasible.push_back(std::move(c));
              levers.push_back({nh, P, F, E, Fe, int64_t(parent.num_layers()) - int64_t(drop.size())});
            }
  grid.feasible = int64_t(feasible.size());
  if (feasible.empty()) {
    const std::string why = buildable_smallest.empty()
                                ? "no shape of the grid can be pruned and loaded"
                                : fmt::format("the smallest ({}, {} parameters) breaks {}",
                                              buildable_smallest.front().shape,
                                              buildable_smallest.front().config.num_parameters(),
                                              check_limits(buildable_smallest.front().cost, limits));
    throw InfeasibleError(fmt::format("[{}] minitron: none of the {} shapes of the hybrid grid "
                                      "meets the limits of {}: {}", kWhere, grid.shapes,
                                      scenario.name, why));
  }
  std::vector<size_t> maximal;
  for (size_t i = 0; i < feasible.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < feasible.size() && !dominated; ++j)
      dominated = j != i && covers(levers[j], levers[i]) && !covers(levers[i], levers[j]);
    if (!dominated) maximal.push_back(i);
  }
  std::stable_sort(maximal.begin(), maximal.end(), [&](size_t a, size_t b) {
    return feasible[a].config.num_parameters() > feasible[b].config.num_parameters();
  });
  if (int64_t(maximal.size()) > opt.max_ranked) maximal.resize(size_t(opt.max_ranked));
  log_info(fmt::format("[search] minitron (hybrid grid): {} shapes, {} buildable, {} meet the "
                       "limits, {} ranked by KL after pruning", grid.shapes, grid.buildable,
                       grid.feasible, maximal.size()));

  const std::vector<at::Tensor> reference = nemotron_h_logprobs(teacher, calibration);
  const int64_t window_tokens = tokens_in(calibration);
  grid.search_tokens += window_tokens;
  Progress progress(kWhere, int64_t(maximal.size()), "candidates");
  for (size_t k = 0; k < maximal.size(); ++k) {
    NemotronHGridCandidate c = feasible[maximal[k]];
    c.kl_after_pruning =
        nemotron_h_calibration_kl(reference, prune_nemotron_h_model(teacher, imp, c.config),
                                  calibration);
    grid.search_tokens += window_tokens;
    progress.update(int64_t(k + 1), fmt::format("{}: KL {:.4f}", c.shape, c.kl_after_pruning));
    grid.ranked.push_back(std::move(c));
  }
  progress.finish();
  std::stable_sort(grid.ranked.begin(), grid.ranked.end(),
                   [](const auto& a, const auto& b) { return a.kl_after_pruning < b.kl_after_pruning; });
  return grid;
}

}  // namespace ac
