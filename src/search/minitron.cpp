#include "search/minitron.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/repair.h"

namespace ac {

namespace {

// Multiples of g in [lo, full), descending, with `full` itself first.
std::vector<int64_t> widths(int64_t full, int64_t g, double min_frac, int64_t step) {
  std::vector<int64_t> out{full};
  step = std::max<int64_t>(g, step / g * g);
  int64_t lo = int64_t(std::ceil(min_frac * double(full)));
  for (int64_t w = (full - 1) / g * g; w >= lo && w > 0; w -= step)
    if (w != full) out.push_back(w);
  return out;
}

std::vector<int64_t> counts(int64_t full, double min_frac) {
  std::vector<int64_t> out;
  for (int64_t n = full; n >= std::max<int64_t>(1, int64_t(std::ceil(min_frac * full))); --n)
    out.push_back(n);
  return out;
}

const LayerConfig& reference_layer(const ModelConfig& c) {
  for (const auto& l : c.layers)
    if (l.has_attention() && l.has_ffn()) return l;
  throw ConfigError("[search] the parent has no block with both attention and FFN");
}

// True if `a` keeps at least as much as `b` in every dimension (and so costs at least as much).
bool covers(const Candidate& a, const Candidate& b) {
  const LayerConfig& la = reference_layer(a.config);
  const LayerConfig& lb = reference_layer(b.config);
  return a.config.hidden_size >= b.config.hidden_size &&
         la.num_attention_heads >= lb.num_attention_heads &&
         la.num_key_value_heads >= lb.num_key_value_heads &&
         la.intermediate_size >= lb.intermediate_size &&
         a.config.num_layers() >= b.config.num_layers();
}

std::string smallest_reachable(const std::vector<Candidate>& cands, const Limits& limits) {
  double ttft = 1e300, tpot = 1e300, thr = 0;
  int64_t mem = INT64_MAX;
  for (const auto& c : cands) {
    ttft = std::min(ttft, c.cost.ttft_ms);
    tpot = std::min(tpot, c.cost.tpot_ms);
    thr = std::max(thr, c.cost.throughput_tokens_per_s);
    mem = std::min(mem, c.cost.peak_memory_bytes);
  }
  std::vector<std::string> parts;
  if (limits.ttft_ms) parts.push_back(fmt::format("TTFT limit {:.3f} ms, smallest reachable {:.3f} ms", *limits.ttft_ms, ttft));
  if (limits.tpot_ms) parts.push_back(fmt::format("TPOT limit {:.3f} ms, smallest reachable {:.3f} ms", *limits.tpot_ms, tpot));
  if (limits.peak_memory_bytes) parts.push_back(fmt::format("memory limit {} bytes, smallest reachable {} bytes", *limits.peak_memory_bytes, mem));
  if (limits.min_throughput_tokens_per_s) parts.push_back(fmt::format("throughput limit {:.1f} tokens/s, largest reachable {:.1f} tokens/s", *limits.min_throughput_tokens_per_s, thr));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The teacher's log-probabilities of each batch ([B, T, V] each, no autograd); adds the tokens
// to *tokens (search tokens).
std::vector<at::Tensor> teacher_logprobs_of(const LlamaModel& teacher,
                                            const std::vector<at::Tensor>& batches, int64_t* tokens) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& b : batches) {
    out.push_back(at::log_softmax(teacher.forward(b), -1));
    *tokens += b.numel();
  }
  return out;
}

}  // namespace

int64_t UniformSpace::size() const {
  return int64_t(hidden_sizes.size() * heads_per_group.size() * kv_groups.size() *
                 ffn_widths.size() * num_layers.size());
}

UniformSpace uniform_space(const ModelConfig& parent, const MinitronOptions& opt) {
  const LayerConfig& ref = reference_layer(parent);
  const int64_t g = std::lcm(std::max<int64_t>(1, opt.width_granularity),
                             std::max<int64_t>(1, opt.row_multiple));
  UniformSpace s;
  s.hidden_sizes = widths(parent.hidden_size, g, opt.min_width_fraction, g);
  s.ffn_widths = widths(ref.intermediate_size, g, opt.min_width_fraction, ref.intermediate_size / 8);
  const int64_t G = ref.num_key_value_heads, per = ref.num_attention_heads / G;
  s.kv_groups = counts(G, opt.min_width_fraction);
  s.heads_per_group = counts(per, opt.min_width_fraction);
  for (int64_t d = 0; d <= std::min(opt.max_layers_dropped, parent.num_layers() - 1); ++d)
    s.num_layers.push_back(parent.num_layers() - d);
  return s;
}

nlohmann::json Candidate::to_json() const {
  return {{"config", config_to_hf_json(config)},
          {"describe", describe(config)},
          {"parameters", config.num_parameters()},
          {"cost", cost.to_json()},
          {"feasible", violation.empty()},
          {"violation", violation},
          {"loss_after_prune", loss_after_prune},
          {"loss_after_retrain", loss_after_retrain},
          {"chosen", chosen}};
}

nlohmann::json SearchResult::to_json() const {
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : candidates) cands.push_back(c.to_json());
  return {{"method", method},         {"best", best.to_json()}, {"search_tokens", search_tokens},
          {"seconds", seconds},       {"candidates", cands}};
}

double mean_kl(const std::vector<at::Tensor>& teacher_logprobs, const LlamaModel& student,
               const std::vector<at::Tensor>& batches) {
  at::NoGradGuard no_grad;
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    at::Tensor s = at::log_softmax(student.forward(batches[i]), -1);
    const at::Tensor& t = teacher_logprobs[i];
    sum += (t.exp() * (t - s)).sum().item<double>();
    n += batches[i].numel();
  }
  return sum / double(std::max<int64_t>(n, 1));
}

SearchResult minitron_search(const LlamaModel& teacher, const Importance& imp, const CostFn& cost,
                             const Limits& limits, const std::vector<at::Tensor>& calibration,
                             const MinitronOptions& opt) {
  const double t0 = now_s();
  SearchResult r;
  r.method = "minitron";
  const ModelConfig& parent = teacher.config;
  const LayerConfig& ref = reference_layer(parent);
  const UniformSpace space = uniform_space(parent, opt);
  const Limits& strict = limits;  // the caller's, margin included (pipeline/limits.h)
  log_info(fmt::format("[search] minitron: {} uniform candidates", space.size()));

  for (int64_t L : space.num_layers)
    for (int64_t D : space.hidden_sizes)
      for (int64_t G : space.kv_groups)
        for (int64_t per : space.heads_per_group)
          for (int64_t F : space.ffn_widths) {
            // o_proj's rows, H x head_dim, a whole number of the weight type's blocks.
            if (G * per != ref.num_attention_heads &&
                G * per * ref.head_dim % std::max<int64_t>(1, opt.row_multiple) != 0)
              continue;
            Candidate c;
            c.target = parent;
            c.target.hidden_size = D;
            for (auto& l : c.target.layers) {
              if (!l.has_attention() || !l.has_ffn()) continue;
              l = LayerConfig{G * per, G, ref.head_dim, F};
            }
            c.target = remove_least_important_blocks(c.target, imp.block_influence,
                                                     parent.num_layers() - L);
            c.config = drop_removed_blocks(c.target);
            c.cost = cost(c.config);
            c.violation = check_limits(c.cost, strict);
            r.candidates.push_back(std::move(c));
          }

  std::vector<size_t> feasible;
  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (r.candidates[i].violation.empty()) feasible.push_back(i);
  if (feasible.empty())
    throw InfeasibleError(fmt::format("[search] no architecture meets the limits of the scenario "
                                      "(with the safety margin): {}",
                                      smallest_reachable(r.candidates, strict)));

  // Rank only the maximal feasible candidates: a candidate covered by a larger feasible one
  // cannot be better after pruning with nested importance order, in Minitron's experience.
  std::vector<size_t> maximal;
  for (size_t i : feasible) {
    bool dominated = false;
    for (size_t j : feasible)
      if (j != i && covers(r.candidates[j], r.candidates[i]) &&
          !covers(r.candidates[i], r.candidates[j]))
        dominated = true;
    if (!dominated) maximal.push_back(i);
  }
  std::sort(maximal.begin(), maximal.end(), [&](size_t a, size_t b) {
    return r.candidates[a].config.num_parameters() > r.candidates[b].config.num_parameters();
  });
  if (int64_t(maximal.size()) > opt.max_ranked) maximal.resize(size_t(opt.max_ranked));

  std::vector<at::Tensor> teacher_logprobs = teacher_logprobs_of(teacher, calibration, &r.search_tokens);
  Progress progress("search", int64_t(maximal.size()), "candidates");
  size_t best = maximal.front();
  for (size_t k = 0; k < maximal.size(); ++k) {
    Candidate& c = r.candidates[maximal[k]];
    LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, c.target));
    c.loss_after_prune = mean_kl(teacher_logprobs, student, calibration);
    for (const auto& b : calibration) r.search_tokens += b.numel();
    if (c.loss_after_prune < r.candidates[best].loss_after_prune || k == 0) best = maximal[k];
    progress.update(int64_t(k + 1), fmt::format("{}: KL {:.4f}", describe(c.config),
                                                c.loss_after_prune));
  }
  progress.finish();
  r.candidates[best].chosen = true;
  r.best = r.candidates[best];
  r.seconds = now_s() - t0;
  return r;
}

void retrain_top_candidates(const LlamaModel& teacher, const Importance& imp, SearchResult& r,
                            const TokenDataset& train, const std::vector<at::Tensor>& calibration,
                            const RetrainOptions& opt) {
  if (opt.top_k < 1)
    throw ConfigError(fmt::format("[search] {} retraining: top_k must be >= 1, found {}", r.method,
                                  opt.top_k));
  const double t0 = now_s();
  std::vector<size_t> ranked;
  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (r.candidates[i].loss_after_prune >= 0) ranked.push_back(i);
  if (ranked.empty())
    throw ConfigError(fmt::format("[search] {} retraining: no candidate was ranked by KL after "
                                  "pruning", r.method));
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    return r.candidates[a].loss_after_prune < r.candidates[b].loss_after_prune;
  });
  // One per architecture: a search may list the same one twice (the differentiable search's
  // refined pick is often one of its ranked proposals).
  {
    std::vector<size_t> distinct;
    std::set<std::string> seen;
    for (size_t i : ranked)
      if (seen.insert(describe(r.candidates[i].config)).second) distinct.push_back(i);
    ranked = std::move(distinct);
  }
  if (int64_t(ranked.size()) > opt.top_k) ranked.resize(size_t(opt.top_k));

  std::vector<at::Tensor> teacher_logprobs = teacher_logprobs_of(teacher, calibration, &r.search_tokens);
  DistillOptions dopt = opt.distill;
  dopt.log_path.clear();
  dopt.state_dir.clear();
  dopt.resume = false;
  dopt.show_progress = false;
  size_t best = ranked.front();
  for (size_t k = 0; k < ranked.size(); ++k) {
    Candidate& c = r.candidates[ranked[k]];
    LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, c.target));
    student.weights = clone(student.config, student.weights);  // own storage: it trains
    DistillResult d = distill(teacher, student, train, dopt);
    stop_if_interrupted(d, "search");
    r.search_tokens += 2 * d.tokens;  // teacher forward + student forward of every token
    c.loss_after_retrain = mean_kl(teacher_logprobs, student, calibration);
    for (const auto& b : calibration) r.search_tokens += b.numel();
    if (c.loss_after_retrain < r.candidates[best].loss_after_retrain || k == 0) best = ranked[k];
    log_info(fmt::format("[search] {} retraining {}/{}: {}: KL after pruning {:.4f}, after "
                         "{} tokens {:.4f}", r.method, k + 1, ranked.size(), describe(c.config),
                         c.loss_after_prune, d.tokens, c.loss_after_retrain));
  }
  for (auto& c : r.candidates) c.chosen = false;
  r.candidates[best].chosen = true;
  r.best = r.candidates[best];
  r.seconds += now_s() - t0;
}

}  // namespace ac
