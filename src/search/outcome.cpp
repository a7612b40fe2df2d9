#include "search/outcome.h"

#include <fmt/format.h>

#include <numeric>
#include <set>

#include "common/error.h"
#include "common/fs.h"
#include "common/runtime.h"
#include "model/stage_memory.h"
#include "prune/arch.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/placement.h"
#include "search/plots.h"

namespace ac {

namespace {

using json = nlohmann::json;

json slack_json(const CostEstimate& e, const Limits& limits) {
  json out = json::array();
  for (const auto& s : limit_slack(e, limits))
    out.push_back({{"name", s.name}, {"limit", s.limit}, {"value", s.value}, {"slack", s.slack}});
  return out;
}

json layers_json(const ModelConfig& parent, const ModelConfig& target) {
  json out = json::array();
  for (size_t l = 0; l < target.layers.size(); ++l) {
    const LayerConfig& t = target.layers[l];
    const LayerConfig& p = parent.layers.at(l);
    out.push_back({{"layer", l},
                   {"num_attention_heads", t.has_attention() ? t.num_attention_heads : 0},
                   {"num_key_value_heads", t.has_attention() ? t.num_key_value_heads : 0},
                   {"head_dim", t.head_dim},
                   {"intermediate_size", t.has_ffn() ? t.intermediate_size : 0},
                   {"attention_removed", !t.has_attention()},
                   {"ffn_removed", !t.has_ffn()},
                   {"parent", {{"num_attention_heads", p.num_attention_heads},
                               {"num_key_value_heads", p.num_key_value_heads},
                               {"intermediate_size", p.intermediate_size}}}});
  }
  return out;
}

}  // namespace

json SearchOutcome::summary() const {
  return {{"method", method},
          {"describe", describe(best.config)},
          {"parameters", best.config.num_parameters()},
          {"predicted", {{"ttft_ms", best.cost.ttft_ms},
                         {"tpot_ms", best.cost.tpot_ms},
                         {"peak_memory_bytes", best.cost.peak_memory_bytes},
                         {"throughput_tokens_per_s", best.cost.throughput_tokens_per_s}}},
          {"slack", slack_json(best.cost, limits)},
          {"search_tokens", search_tokens},
          {"search_seconds", seconds}};
}

uint64_t restart_seed(uint64_t seed, int64_t restart) {
  return seed + 1000 * uint64_t(restart);
}

std::vector<int64_t> default_attention_caps(const ModelConfig& parent) {
  return {-1, parent.num_layers() / 3};
}

std::vector<std::string> search_methods(const std::string& method) {
  if (method == "both") return {"autocompress", "minitron"};
  if (method == "autocompress" || method == "minitron") return {method};
  throw ConfigError(msg("search", "--method: expected autocompress, minitron or both, found '{}'", method));
}

// Each batch on `d`.
static std::vector<at::Tensor> on_device(std::vector<at::Tensor> batches, const c10::Device& d) {
  for (at::Tensor& b : batches) b = b.to(d);
  return batches;
}

SearchOutcome run_search_method(const std::string& method, const LlamaModel& parent,
                                const Importance& imp, const Scenario& scenario,
                                const Profile* profile, const RunLimits& limits,
                                const TokenDataset& calibration, int64_t seq_len,
                                const SearchSettings& settings, const TokenDataset* retrain_data) {
  // The supernet's forward keeps every layer's activations for the masks' gradients.
  check_fits_device(forward_memory(parent.config, settings.autocompress_batch_size,
                                   settings.autocompress_seq_len, /*with_grad=*/true,
                                   settings.precision),
                    settings.device, "search");
  // The teacher once on the search's device: every forward, pruned candidate and retraining of
  // the search runs there.
  const LlamaModel teacher{parent.config,
                           to_device(parent.config, parent.weights, settings.device)};
  SearchSettings st = settings;
  for (RetrainOptions* r : {&st.retrain, &st.autocompress_retrain_options}) {
    r->distill.device = st.device;
    r->distill.precision = st.precision;
  }
  st.autocompress.device = st.device;
  st.autocompress.precision = st.precision;
  SearchOutcome o;
  o.method = method;
  o.parent = teacher.config;
  o.limits = limits.for_search;
  o.safety_margin = limits.safety_margin;
  const Limits search_limits = limits.search_with_margin();
  // Rows of the weight type's blocks (q8_0, q4_0: 32), or the weights fall back to F16.
  const int64_t row_multiple = weight_row_multiple(scenario.workload.weight_dtype);
  if (method == "minitron") {
    MinitronOptions mo = st.minitron;
    mo.row_multiple = row_multiple;
    CostFn cost = [&](const ModelConfig& c) { return predict(c, scenario, profile); };
    std::vector<at::Tensor> batches = on_device(
        calibration.sequential_batches(st.minitron_batch_size, seq_len, st.minitron_batches),
        st.device);
    SearchResult r = minitron_search(teacher, imp, cost, search_limits, batches, mo);
    if (st.minitron_retrain) {
      if (!retrain_data)
        throw ConfigError(msg("search", "minitron retraining needs training data (none given)"));
      retrain_top_candidates(teacher, imp, r, *retrain_data, batches, st.retrain);
    }
    o.best = r.best;
    check_engine_loads(o.best.target, scenario.engine_spec, "search",
                       scenario.workload.tensor_parallel);  // uniform: only the divisibility rules
    o.search_tokens = r.search_tokens;
    o.seconds = r.seconds;
    o.search = r.to_json();
    return o;
  }
  if (method != "autocompress") search_methods(method);  // throws the ConfigError
  DifferentiableOptions dopt = st.autocompress;
  // The space holds only what the scenario's engine loads (engines/*.json "structure"). Its FFN
  // options keep the parent's own width, so that width must be one the engine expresses.
  dopt.space.structure = scenario.engine_spec.structure;
  dopt.space.row_multiple = row_multiple;
  dopt.space.tensor_parallel = scenario.workload.tensor_parallel;
  check_engine_loads(teacher.config, scenario.engine_spec, "search",
                     scenario.workload.tensor_parallel);  // option 0 of the space is the parent
  const int64_t step = dopt.space.structure.ffn_width_multiple;
  for (size_t l = 0; l < teacher.config.layers.size(); ++l) {
    const LayerConfig& p = teacher.config.layers[l];
    if (p.has_ffn() && p.intermediate_size % step != 0)
      throw ConfigError(msg("search", "layer {} of the parent has intermediate_size {}, not a "
                            "multiple of {}: {} cannot load a per-layer architecture that keeps "
                            "it (engines/{}.json \"structure\": {}). Use --method minitron (one "
                            "shape for every layer, which {} loads as the parent's class) or a "
                            "scenario with another engine",
                            l, p.intermediate_size, step, scenario.engine_spec.name,
                            scenario.engine_spec.name, scenario.engine_spec.structure.source,
                            scenario.engine_spec.name));
  }
  // A loader that derives head_dim (hidden_size / num_attention_heads) reads the parent's back
  // only if the parent's own head_dim is that quotient.
  for (size_t l = 0; l < teacher.config.layers.size(); ++l) {
    const LayerConfig& p = teacher.config.layers[l];
    if (!dopt.space.structure.head_dim_explicit && p.has_attention() &&
        teacher.config.hidden_size / p.num_attention_heads != p.head_dim)
      throw ConfigError(msg("search", "layer {} of the parent has head_dim {}, but {} derives "
                            "head_dim as hidden_size / num_attention_heads = {} / {} in a "
                            "per-layer architecture (engines/{}.json \"structure\" "
                            "head_dim_explicit). Use --method minitron (one shape for every "
                            "layer, which {} loads as the parent's class) or a scenario with "
                            "another engine", l, p.head_dim, scenario.engine_spec.name,
                            teacher.config.hidden_size, p.num_attention_heads,
                            scenario.engine_spec.name, scenario.engine_spec.name));
  }
  std::vector<at::Tensor> batches =
      on_device(calibration.sequential_batches(st.autocompress_batch_size,
                                               st.autocompress_seq_len, st.autocompress_batches),
                st.device);
  // One search per attention cap (SearchSettings::autocompress_attention_caps), the first cap's
  // space searched autocompress_restarts times with other Gumbel seeds; the first search is the
  // result's trajectory and probabilities, every search's candidates are pooled and each one's
  // pick (its last candidate) becomes a finalist of the retraining.
  std::vector<int64_t> caps = st.autocompress_attention_caps;
  if (caps.empty()) caps = {dopt.space.max_attention_removed};
  if (st.autocompress_restarts < 1)
    throw ConfigError(msg("search", "--autocompress-restarts must be at least 1, found {}",
                          st.autocompress_restarts));
  struct SearchRun { int64_t cap; uint64_t seed; };
  std::vector<SearchRun> runs;
  // Without the retraining the first search's pick is the result: no restart could change it.
  const int64_t restarts = st.autocompress_retrain ? st.autocompress_restarts : 1;
  for (int64_t k = 0; k < restarts; ++k)
    runs.push_back({caps[0], restart_seed(dopt.seed, k)});
  for (size_t i = 1; i < caps.size(); ++i) runs.push_back({caps[i], dopt.seed});
  DifferentiableResult r;
  SharedSearchState shared;  // the teacher's log-probabilities and the KLs after pruning
  nlohmann::json judge = nullptr;  // what judged the finalists (null: nothing retrained)
  std::vector<size_t> picks;
  std::set<std::string> picked;  // one finalist per architecture
  size_t places = 0;  // searches whose pick was ranked: one finalist's place each
  nlohmann::json searches = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    DifferentiableOptions d = dopt;
    d.space.max_attention_removed = runs[i].cap;
    d.seed = runs[i].seed;
    DifferentiableResult ri;
    try {
      ri = differentiable_search(teacher, imp, scenario, profile, search_limits, batches, d, &shared);
    } catch (const InfeasibleError& e) {
      if (i == 0) throw;  // the first (widest) space decides whether anything fits
      log_info(fmt::format("[search] autocompress with at most {} attention-free layers: nothing "
                           "fits ({}); left out", runs[i].cap, e.what()));
      searches.push_back({{"max_attention_free_layers", runs[i].cap}, {"seed", runs[i].seed},
                          {"infeasible", e.what()}});
      continue;
    }
    searches.push_back({{"max_attention_free_layers", runs[i].cap}, {"seed", runs[i].seed},
                        {"pick", describe(ri.search.best.config)},
                        {"search_tokens", ri.search.search_tokens}});
    if (i == 0) {
      r = std::move(ri);
      if (r.parent_meets_limits) break;
    } else {
      r.search.search_tokens += ri.search.search_tokens;
      r.search.seconds += ri.search.seconds;
      r.evaluations += ri.evaluations;
      for (Candidate& k : ri.search.candidates) {
        k.chosen = false;
        r.search.candidates.push_back(std::move(k));
      }
    }
    const Candidate& pick = r.search.candidates.back();
    if (pick.loss_after_prune < 0) continue;
    ++places;
    if (picked.insert(candidate_key(pick)).second) picks.push_back(r.search.candidates.size() - 1);
  }
  // A search (a restart or a capped one) that returns an earlier search's pick leaves its
  // finalist's place empty: the places go to the picks' attention-placement variants that meet
  // the limits (search/placement.h), best first by the KL after pruning on the ranking's
  // batches, at most max_ranked of them measured.
  nlohmann::json variants = nlohmann::json::array();
  if (st.autocompress_retrain && !r.parent_meets_limits && picks.size() < places) {
    DifferentiableOptions d = dopt;
    d.space.max_attention_removed = caps[0];
    const SearchSpace space = build_search_space(teacher.config, imp, d.space);
    CostFn cost = [&](const ModelConfig& c) { return predict(c, scenario, profile); };
    std::vector<Candidate> offered;
    std::set<std::string> seen = picked;
    for (size_t p : picks) {  // the places are filled below, after every variant is measured
      for (const ModelConfig& v : attention_placement_variants(r.search.candidates[p].target, space)) {
        if (int64_t(offered.size()) >= std::max<int64_t>(dopt.max_ranked, 1)) break;
        Candidate k = costed_candidate(v, cost, search_limits);
        if (!k.violation.empty() || !seen.insert(candidate_key(k)).second) continue;
        const int64_t before = r.search.search_tokens;
        k.loss_after_prune = ranking_kl(teacher, imp, k.target, batches, dopt, shared,
                                        &r.search.search_tokens);
        if (r.search.search_tokens > before) ++r.evaluations;
        variants.push_back({{"of", describe(r.search.candidates[p].config)},
                            {"describe", describe(k.config)},
                            {"loss_after_prune", k.loss_after_prune}});
        offered.push_back(std::move(k));
      }
    }
    std::vector<size_t> order(offered.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return offered[a].loss_after_prune < offered[b].loss_after_prune;
    });
    for (size_t i : order) {
      const bool finalist = picks.size() < places;
      variants[i]["finalist"] = finalist;
      if (!finalist) continue;
      log_info(fmt::format("[search] autocompress: a search repeated an earlier pick; its place "
                           "goes to the attention-placement variant {} (KL after pruning {:.4f})",
                           describe(offered[i].config), offered[i].loss_after_prune));
      picked.insert(candidate_key(offered[i]));
      r.search.candidates.push_back(offered[i]);
      picks.push_back(r.search.candidates.size() - 1);
    }
  }
  if (st.autocompress_retrain && !r.parent_meets_limits) {
    if (!retrain_data)
      throw ConfigError(msg("search", "autocompress retraining needs training data (none given)"));
    // The finalists after retraining are judged on every calibration window of the run's length,
    // not the search's few short batches: they differ by a percent or two of KL.
    const std::vector<at::Tensor> judged =
        on_device(calibration.sequential_batches(st.minitron_batch_size, seq_len), st.device);
    // Every search's pick is a finalist, however many the restarts found.
    RetrainOptions ro = st.autocompress_retrain_options;
    ro.top_k = std::max<int64_t>(ro.top_k, int64_t(picks.size()));
    retrain_top_candidates(teacher, imp, r.search, *retrain_data,
                           judged.empty() ? batches : judged, ro, picks);
    const bool bld_first = ro.judge != FinalistJudge::retraining && ro.bld_tokens > 0 &&
                           ro.schedule_tokens > 0;
    judge = {{"judge", !bld_first ? "retraining"
                       : ro.judge == FinalistJudge::blockwise ? "blockwise" : "halving"},
             {"bld_tokens", ro.bld_tokens},
             {"retrain_tokens", ro.distill.token_budget}};
  }
  o.best = r.search.best;
  // Holds by construction of the space; checked so that a change to the space cannot hand the
  // user an architecture the engine refuses.
  check_engine_loads(o.best.target, scenario.engine_spec, "search",
                     scenario.workload.tensor_parallel);
  o.search_tokens = r.search.search_tokens;
  o.seconds = r.search.seconds;
  o.trajectory = r.trajectory;
  o.probabilities = r.probabilities;
  o.search = r.to_json();
  o.search["searches"] = searches;
  o.search["placement_variants"] = variants;
  o.search["judge"] = judge;
  return o;
}

double kl_after_prune(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                      const std::vector<at::Tensor>& batches) {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> reference = teacher_logprobs(teacher, batches);
  LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, target));
  return mean_kl(reference, student, batches);
}

fs::path method_arch_path(const fs::path& primary, const std::string& method) {
  return primary.parent_path() /
         (primary.stem().string() + "." + method + primary.extension().string());
}

json arch_json(const SearchOutcome& o, const std::string& scenario) {
  json traj = json::array();
  for (const auto& t : o.trajectory) traj.push_back(t.to_json());
  return {{"method", o.method},
          {"scenario", scenario},
          {"limits", o.limits.to_json()},
          {"safety_margin", o.safety_margin},
          {"hidden_size", o.best.target.hidden_size},
          {"parent_hidden_size", o.parent.hidden_size},
          {"layers", layers_json(o.parent, o.best.target)},
          {"predicted", o.best.cost.to_json()},
          {"slack", slack_json(o.best.cost, o.limits)},
          {"slack_with_margin", slack_json(o.best.cost, with_safety_margin(o.limits, o.safety_margin))},
          {"search_tokens", o.search_tokens},
          {"search_seconds", o.seconds},
          {"trajectory", traj},
          {"probabilities", o.probabilities},
          {"search", o.search}};
}

void write_search_outputs(const fs::path& arch_path, const SearchOutcome& o,
                          const std::string& scenario, const json& extra) {
  json j = arch_json(o, scenario);
  const std::string stem = arch_path.stem().string();
  const fs::path dir = arch_path.parent_path();
  const std::string widths = stem + "_widths.svg";
  write_file_atomic(dir / widths,
                    widths_svg(o.parent, o.best.target,
                               fmt::format("{}: per-layer widths kept vs the parent", o.method)));
  json traj_file = nullptr;
  if (!o.trajectory.empty()) {
    const std::string name = stem + "_trajectory.svg";
    std::vector<CostBudget> budgets = cost_budgets(with_safety_margin(o.limits, o.safety_margin));
    write_file_atomic(dir / name, trajectory_svg(o.trajectory, budgets,
                                                 fmt::format("{} search trajectory", o.method)));
    traj_file = name;
  }
  j["plots"] = {{"widths", widths}, {"trajectory", traj_file}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  write_arch(arch_path, o.best.target, j);
}

}  // namespace ac
