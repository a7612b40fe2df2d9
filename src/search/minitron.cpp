#include "search/minitron.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/json_io.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "distill/bld.h"
#include "prune/pruning_map.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/ladders.h"
#include "search/reachable.h"
#include "search/repair.h"

namespace ac {

namespace {

// Every shape of the grid as a candidate with its cost and its violation of `strict`. The blocks
// of lowest influence are dropped for depth (prune/depth.h).
std::vector<Candidate> grid_candidates(const ModelConfig& parent, const Importance& imp,
                                       const UniformSpace& space, const CostFn& cost,
                                       const Limits& strict, const MinitronOptions& opt) {
  const LayerConfig& ref = reference_layer(parent, "search");
  std::vector<Candidate> out;
  for (int64_t L : space.num_layers)
    for (int64_t D : space.hidden_sizes)
      for (int64_t G : space.kv_groups)
        for (int64_t per : space.heads_per_group)
          for (int64_t F : space.ffn_widths) {
            // o_proj's rows, H x head_dim, a whole number of the weight type's blocks.
            if (G * per != ref.num_attention_heads &&
                G * per * ref.head_dim % std::max<int64_t>(1, opt.row_multiple) != 0)
              continue;
            ModelConfig target = parent;
            target.hidden_size = D;
            for (auto& l : target.layers) {
              if (!l.has_attention() || !l.has_ffn()) continue;
              l = LayerConfig{G * per, G, ref.head_dim, F};
            }
            target = remove_least_important_blocks(target, imp.block_influence,
                                                   parent.num_layers() - L);
            out.push_back(costed_candidate(target, cost, strict));
          }
  return out;
}

// The feasible candidates no larger feasible one covers (covers_counts), most parameters first,
// at most max_ranked: a candidate covered by a larger feasible one cannot be better after
// pruning with nested importance order, in Minitron's experience.
std::vector<size_t> maximal_feasible(const std::vector<Candidate>& cands, int64_t max_ranked) {
  std::vector<size_t> feasible;
  std::map<size_t, UniformShape> shape;
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].violation.empty()) {
      feasible.push_back(i);
      shape[i] = uniform_shape_of(cands[i].config, "search");
    }
  std::vector<size_t> maximal;
  for (size_t i : feasible) {
    bool dominated = false;
    for (size_t j : feasible)
      if (j != i && covers_counts(shape[j], shape[i]) && !covers_counts(shape[i], shape[j]))
        dominated = true;
    if (!dominated) maximal.push_back(i);
  }
  std::sort(maximal.begin(), maximal.end(), [&](size_t a, size_t b) {
    return cands[a].config.num_parameters() > cands[b].config.num_parameters();
  });
  if (int64_t(maximal.size()) > max_ranked) maximal.resize(size_t(max_ranked));
  return maximal;
}

// Prunes each of `ranked` from the teacher and stores its KL(teacher || candidate) on
// `calibration`; returns the index of the lowest. Adds the forward tokens to r.search_tokens.
size_t rank_by_kl(const LlamaModel& teacher, const Importance& imp, SearchResult& r,
                  const std::vector<size_t>& ranked, const std::vector<at::Tensor>& calibration) {
  const std::vector<at::Tensor> reference = teacher_logprobs(teacher, calibration, &r.search_tokens);
  Progress progress("search", int64_t(ranked.size()), "candidates");
  size_t best = ranked.front();
  for (size_t k = 0; k < ranked.size(); ++k) {
    Candidate& c = r.candidates[ranked[k]];
    LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, c.target));
    c.loss_after_prune = mean_kl(reference, student, calibration);
    for (const auto& b : calibration) r.search_tokens += b.numel();
    if (c.loss_after_prune < r.candidates[best].loss_after_prune || k == 0) best = ranked[k];
    progress.update(int64_t(k + 1), fmt::format("{}: KL {:.4f}", describe(c.config),
                                                c.loss_after_prune));
  }
  progress.finish();
  return best;
}

}  // namespace

UniformSpace uniform_space(const ModelConfig& parent, const MinitronOptions& opt) {
  require_width_granularity(opt.width_granularity, "search");
  const LayerConfig& ref = reference_layer(parent, "search");
  const int64_t g = std::lcm(opt.width_granularity, std::max<int64_t>(1, opt.row_multiple));
  const double frac = opt.min_width_fraction;
  UniformSpace s;
  s.hidden_sizes = stepped_width_ladder(parent.hidden_size, g, frac, g, FirstRung::nearest);
  s.ffn_widths = stepped_width_ladder(ref.intermediate_size, g, frac, ref.intermediate_size / 8,
                                      FirstRung::nearest);
  const int64_t G = ref.num_key_value_heads, per = ref.num_attention_heads / G;
  s.kv_groups = count_ladder(G, frac);
  s.heads_per_group = count_ladder(per, frac);
  for (int64_t d = 0; d <= std::min(opt.max_layers_dropped, parent.num_layers() - 1); ++d)
    s.num_layers.push_back(parent.num_layers() - d);
  return s;
}

SearchResult minitron_search(const LlamaModel& teacher, const Importance& imp, const CostFn& cost,
                             const Limits& limits, const std::vector<at::Tensor>& calibration,
                             const MinitronOptions& opt) {
  const double t0 = now_s();
  SearchResult r;
  r.method = "minitron";
  const UniformSpace space = uniform_space(teacher.config, opt);
  const Limits& strict = limits;  // the caller's, margin included (pipeline/limits.h)
  log_info(fmt::format("[search] minitron: {} uniform candidates", space.size()));
  r.candidates = grid_candidates(teacher.config, imp, space, cost, strict, opt);
  const std::vector<size_t> maximal = maximal_feasible(r.candidates, opt.max_ranked);
  if (maximal.empty()) {
    std::vector<CostEstimate> costs;
    for (const auto& c : r.candidates) costs.push_back(c.cost);
    throw InfeasibleError(fmt::format("[search] no architecture meets the limits of the scenario "
                                      "(with the safety margin): {}",
                                      smallest_reachable_message(best_of(costs), strict)));
  }
  const size_t best = rank_by_kl(teacher, imp, r, maximal, calibration);
  r.candidates[best].chosen = true;
  r.best = r.candidates[best];
  r.seconds = now_s() - t0;
  return r;
}

void retrain_top_candidates(const LlamaModel& teacher, const Importance& imp, SearchResult& r,
                            const TokenDataset& train, const std::vector<at::Tensor>& calibration,
                            const RetrainOptions& opt, const std::vector<size_t>& first) {
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
  for (size_t i : first)
    if (i >= r.candidates.size() || r.candidates[i].loss_after_prune < 0)
      throw InternalError(fmt::format("[search] {} retraining: candidate {} to retrain first is "
                                      "not a ranked candidate", r.method, i));
  std::vector<size_t> ordered = first;
  for (size_t i : ranked)
    if (std::find(first.begin(), first.end(), i) == first.end()) ordered.push_back(i);
  ranked = std::move(ordered);
  // One per architecture: a search may list the same one twice (the differentiable search's
  // refined pick is often one of its ranked proposals).
  {
    std::vector<size_t> distinct;
    std::set<std::string> seen;
    for (size_t i : ranked)
      if (seen.insert(candidate_key(r.candidates[i])).second) distinct.push_back(i);
    ranked = std::move(distinct);
  }
  if (int64_t(ranked.size()) > opt.top_k) ranked.resize(size_t(opt.top_k));

  const std::vector<at::Tensor> reference = teacher_logprobs(teacher, calibration, &r.search_tokens);
  DistillOptions dopt = opt.distill;
  dopt.log_path.clear();
  dopt.state_dir.clear();
  dopt.resume = false;
  dopt.show_progress = false;
  // Judged after the blockwise start first (RetrainOptions::judge): it needs one, and the final
  // schedule whose step 0 it is.
  const bool bld_first = opt.judge != FinalistJudge::retraining && opt.bld_tokens > 0 &&
                         opt.schedule_tokens > 0;
  const size_t n = ranked.size();
  size_t retrained = n;  // how many finalists go on to the retraining
  if (bld_first && opt.judge == FinalistJudge::blockwise) retrained = 0;
  if (bld_first && opt.judge == FinalistJudge::halving)
    retrained = std::min(n, std::max<size_t>(2, (n + 1) / 2));
  int64_t prefix_steps = -1;  // the steps of the final run's schedule a retraining takes
  if (opt.schedule_tokens > 0) {
    const int64_t step_tokens = dopt.batch_size * dopt.seq_len * dopt.grad_accum;
    prefix_steps = std::max<int64_t>(1, opt.distill.token_budget / step_tokens);
    dopt.token_budget = std::max(opt.schedule_tokens, opt.distill.token_budget);
  }
  // Each finalist's state is kept while the ranking is open; the chosen one's stays after it.
  const bool keep_states = !opt.state_root.empty() && prefix_steps > 0;
  if (keep_states) {
    fs::remove_all(opt.state_root);
    fs::create_directories(opt.state_root);
  }
  auto state_of = [&](size_t k) { return opt.state_root / fmt::format("candidate-{}", k); };
  BldTeacherCache bld_cache;  // every finalist's blockwise start sees the same teacher states
  int64_t bld_done = 0;
  // Finalist k pruned from the teacher, with its own storage (it trains).
  auto pruned = [&](size_t k, PrunePlan* plan) {
    *plan = plan_pruning(teacher.config, imp, r.candidates[ranked[k]].target);
    LlamaModel s = drop_removed_blocks(apply_plan(teacher, *plan));
    s.weights = clone(s.config, s.weights);
    return s;
  };
  auto blockwise = [&](LlamaModel& student, const PrunePlan& plan) {
    if (opt.bld_tokens <= 0) return;
    const BldResult br = blockwise_local_distill(
        teacher, student, pruning_map_from_plan(teacher.config, plan, /*blocks_dropped=*/true),
        train, bld_options_for(dopt, opt.bld_tokens), &bld_cache);
    r.search_tokens += br.teacher_tokens + br.tokens;
    bld_done = br.tokens;
  };
  auto judge = [&](const LlamaModel& student) {
    for (const auto& b : calibration) r.search_tokens += b.numel();
    return mean_kl(reference, student, calibration);
  };
  // Runs `steps` steps of the schedule (0: only writes the state at its step 0), continuing
  // finalist k's kept state when `resume`.
  auto steps_of_schedule = [&](size_t k, LlamaModel& student, int64_t steps, bool resume) {
    DistillOptions d = dopt;
    d.stop_after_steps = steps;
    if (keep_states) d.state_dir = state_of(k);
    d.resume = resume;
    const DistillResult res = distill(teacher, student, train, d);
    // A prefix of the final schedule ends "interrupted" by its step count, not by a signal.
    if (steps < 0 || res.stop_signal != 0 || res.steps_done < steps)
      stop_if_interrupted(res, "search");
    r.search_tokens += 2 * res.tokens;  // teacher forward + student forward of every token
    return res.tokens;
  };

  // The blockwise start judges every finalist first: the best `retrained` of them go on.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  if (bld_first) {
    std::vector<double> after_bld(n);
    for (size_t k = 0; k < n; ++k) {
      Candidate& c = r.candidates[ranked[k]];
      PrunePlan plan;
      LlamaModel student = pruned(k, &plan);
      blockwise(student, plan);
      if (keep_states) steps_of_schedule(k, student, 0, false);  // step 0: the state to go on from
      after_bld[k] = c.loss_after_bld = judge(student);
      log_info(fmt::format("[search] {} finalist {}/{}: {}: KL after pruning {:.4f}, after its "
                           "blockwise start of {} tokens {:.4f}", r.method, k + 1, n,
                           describe(c.config), c.loss_after_prune, bld_done, c.loss_after_bld));
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return after_bld[a] < after_bld[b]; });
  }
  size_t best = ranked[order.front()], best_k = order.front();
  if (retrained == 0) {  // the blockwise start alone judges
    for (size_t k = 0; k < n; ++k)
      r.candidates[ranked[k]].loss_after_retrain = r.candidates[ranked[k]].loss_after_bld;
  }
  for (size_t j = 0; j < retrained; ++j) {
    const size_t k = order[j];
    Candidate& c = r.candidates[ranked[k]];
    PrunePlan plan;
    LlamaModel student = pruned(k, &plan);
    int64_t tokens = 0;
    if (bld_first && keep_states) {
      tokens = steps_of_schedule(k, student, prefix_steps, /*resume=*/true);  // from step 0
    } else {
      // Without a kept state the blockwise start runs again (its teacher states are kept).
      blockwise(student, plan);
      tokens = steps_of_schedule(k, student, prefix_steps, /*resume=*/false);
    }
    c.loss_after_retrain = judge(student);
    if (j == 0 || c.loss_after_retrain < r.candidates[best].loss_after_retrain)
      best = ranked[k], best_k = k;
    log_info(fmt::format("[search] {} retraining {}/{}: {}: KL after pruning {:.4f}, after "
                         "{} tokens {:.4f}", r.method, j + 1, retrained, describe(c.config),
                         c.loss_after_prune, tokens, c.loss_after_retrain));
  }
  if (keep_states) {
    fs::rename(state_of(best_k), opt.state_root / "chosen");
    for (size_t k = 0; k < n; ++k) fs::remove_all(state_of(k));
    const bool continued_steps = retrained > 0;
    write_json_file(opt.state_root / "chosen.json",
                    {{"architecture", describe(r.candidates[best].config)},
                     {"schedule_tokens", dopt.token_budget},
                     {"distill_tokens", continued_steps ? prefix_steps * dopt.batch_size *
                                                              dopt.seq_len * dopt.grad_accum
                                                        : 0},
                     {"bld_tokens", bld_done}});
  }
  for (auto& c : r.candidates) c.chosen = false;
  r.candidates[best].chosen = true;
  r.best = r.candidates[best];
  r.seconds += now_s() - t0;
}

std::optional<RetrainedState> adopt_retraining_state(const fs::path& state_root,
                                                     const ModelConfig& config,
                                                     int64_t final_token_budget,
                                                     const fs::path& state_dir) {
  const fs::path chosen = state_root / "chosen", record = state_root / "chosen.json";
  if (!fs::exists(chosen / kDistillStateFile) || !fs::exists(record) ||
      fs::exists(state_dir / kDistillStateFile))
    return std::nullopt;
  const nlohmann::json j = read_json_file(record);
  try {
    if (j.at("architecture").get<std::string>() != describe(config) ||
        j.at("schedule_tokens").get<int64_t>() != final_token_budget)
      return std::nullopt;
    RetrainedState s{j.at("distill_tokens").get<int64_t>(), j.at("bld_tokens").get<int64_t>()};
    fs::remove_all(state_dir);
    if (state_dir.has_parent_path()) fs::create_directories(state_dir.parent_path());
    fs::rename(chosen, state_dir);
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(msg("compress", "{}: not the record of a retraining ({})", record.string(),
                          e.what()));
  }
}

}  // namespace ac
