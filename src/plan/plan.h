// `plan`: does a model fit a deployment, and if not, what is the cheapest structural change that
// makes it fit — from its config.json alone, by the cost model alone (no weights, no data).
//
// 1. The full model is costed in the scenario (hardware/cost_model.h: from the device profile
//    when one is given and the engine is native, else from the roofline of the device spec) and
//    each limit is checked with its slack. Limits written as a fraction of the teacher resolve
//    against the full model itself (it is the teacher).
// 2. If a limit is broken, two kinds of suggestion are searched, each one verified by predict()
//    + check_limits() before it is returned:
//    - uniform: one shape for every layer (Minitron's space, arXiv 2407.14679 §4): hidden size
//      D', KV heads G', query heads per KV head H'/G', FFN width F', depth L'. Every grid point
//      is costed; the feasible ones not dominated by a larger feasible one (a shape that keeps
//      at least as much in every dimension) are ranked by parameters kept. The most balanced
//      shape (the largest smallest kept fraction over the five levers: parameters alone favour
//      cutting attention, a small share of a layer's weights) and the cheapest change along each
//      single lever (depth only, FFN only, ...) are added where they differ.
//    - per-layer: a greedy descent from the full model over per-layer moves (narrow one FFN by
//      one step, drop one KV head with its query heads, drop one query head per KV head, remove
//      one attention or one FFN; globally, narrow the hidden size by one step), each step taking
//      the move with the largest reduction of the total relative excess over the limits per
//      parameter removed, until every limit holds. Without weights, parameters removed stand in
//      for quality lost; `compress` ranks with measured importance instead. The first and last
//      layers are never removed (they carry the most block influence: Men et al. 2024,
//      "ShortGPT"; Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers").
// 3. The verdict: "fits" (no change needed), "fits_after_changes" (suggestions given), or
//    "no_fit" (no structural change in the space meets the limits; the smallest cost reached
//    per limit is given with the limit).
#pragma once
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "model/config.h"

namespace ac {

/// The space `plan` searches (the ladders of search/ladders.h). Widths are multiples of
/// `width_granularity`: the device's, width_granularity_for(profile, scenario.device_spec)
/// (hardware/granularity.h), never a literal.
struct PlanOptions {
  int64_t width_granularity = 0;    // D' and F' are multiples of this (the parent's own besides);
                                    // 0 = unset, refused by make_plan
  int64_t width_steps = 32;         // uniform grid and per-layer step: about full / width_steps
  double min_width_fraction = 0.25; // narrowest D', F', G', H'/G' as a fraction of the parent's
  double min_depth_fraction = 0.5;  // fewest layers kept by a uniform shape
  int64_t max_uniform = 5;          // uniform suggestions returned (single-lever ones besides)
  double max_attention_removed_fraction = 0.5;  // per-layer: attentions removed at most (of L)
  double max_ffn_removed_fraction = 0.25;       // per-layer: FFNs removed at most (of L)
};

/// One architecture that meets every limit by the cost model.
struct PlanSuggestion {
  std::string kind;    // "uniform" or "per_layer"
  std::string label;   // "most parameters kept", "most balanced", "depth only", "greedy per layer", ...
  ModelConfig config;  // the architecture (removed blocks dropped for uniform depth changes)
  CostEstimate cost;   // predict(config, scenario, profile)
  std::vector<LimitSlack> slack;      // every limit holds (slack >= 0)
  std::vector<std::string> changes;   // what differs from the parent, e.g. "FFN 14336 -> 12544"

  nlohmann::json to_json(const ModelConfig& parent) const;
};

/// Per limit, what the search could reach at best when nothing fits.
struct Reachable {
  std::string name;       // limit name as in LimitSlack
  double limit = 0;
  double full = 0;        // the full model's value
  double best = 0;        // the smallest (largest for throughput) value any architecture reached
};

/// The outcome of `plan`.
struct Plan {
  ModelConfig config;                 // the parent
  std::string config_path;            // where it was read (plan_deployment; in to_json when set)
  Scenario scenario;
  Limits limits;                      // absolute (relative ones resolved against `full`)
  CostEstimate full;                  // the parent's predicted cost
  std::vector<LimitSlack> full_slack;
  std::string verdict;                // "fits", "fits_after_changes", "no_fit"
  std::string broken;                 // check_limits() of the parent, then why the scenario's
                                      // engine cannot load it ("" when it fits)
  std::vector<std::string> engine_violations;  // structure_violations() of the parent under the
                                               // scenario's engine and tensor_parallel
  std::vector<PlanSuggestion> uniform;
  std::optional<PlanSuggestion> per_layer;
  std::vector<PlanSuggestion> levers;  // hybrid models: the per-layer descent along one lever
                                       // each (plan/hybrid_plan.h); empty for dense models
  std::vector<Reachable> reachable;   // filled when the verdict is "no_fit"
  std::vector<std::string> warnings;  // context beyond max_position_embeddings, sliding window
  int64_t uniform_checked = 0;        // uniform shapes costed
  int64_t greedy_steps = 0;           // per-layer moves taken
  PlanOptions options;

  nlohmann::json to_json() const;
  /// The readable report: the full model's costs against the limits, the verdict, and a table
  /// of the suggestions.
  std::string to_text() const;
};

/// "measured", "predicted from profile" or "predicted from specs" for a CostEstimate::source
/// ("measured", "profile", "roofline").
std::string cost_provenance(const std::string& source);

/// `c` costed and checked against plan.limits as a suggestion of `kind` / `label` with its
/// `changes`. Throws InternalError when it breaks a limit (a suggestion is verified by predict()).
PlanSuggestion verified_suggestion(const std::string& kind, const std::string& label,
                                   const ModelConfig& c, const Plan& plan, const Profile* profile,
                                   std::vector<std::string> changes);

/// What a structural change costs in quality, for the hybrid descent (plan/hybrid_plan.h): from
/// an architecture to a smaller one of the same parent (same layer count, removed layers marked),
/// a number >= 0, larger = worse. Unset: the parameters and active parameters the change
/// removes, as shares of the parent's (config.json alone, no weights).
using QualityLoss = std::function<double(const ModelConfig& from, const ModelConfig& to)>;

/// Plans `config` for `scenario`. A hybrid config (ModelConfig::is_hybrid) is planned by
/// plan/hybrid_plan.h: per-layer descents over experts, expert widths, experts per token and
/// whole layers; no uniform grid. `profile` may be null (then a GPU's spec roofline is used; a
/// CPU needs one). Throws ConfigError from predict (CPU without profile, profile of another
/// device, dtype the device lacks) or on bad options (width_granularity unset or < 1, fractions
/// outside (0, 1]).
Plan make_plan(const ModelConfig& config, const Scenario& scenario, const Profile* profile,
               const PlanOptions& options = {}, const QualityLoss& quality = {});

/// `autocompress plan` (and the Python package's plan()): make_plan with
/// options.width_granularity 0 meaning the device's width step (hardware/granularity.h
/// width_granularity_for), and `config_path` (where `config` was read) recorded in the plan.
/// `quality` as make_plan's. Throws what make_plan throws.
Plan plan_deployment(const ModelConfig& config, const std::string& config_path,
                     const Scenario& scenario, const Profile* profile, PlanOptions options = {},
                     const QualityLoss& quality = {});

}  // namespace ac
