#include "plan/cost_report.h"

#include <fmt/format.h>


#include "hardware/validate.h"
#include "pipeline/limits.h"

namespace ac {

using json = nlohmann::json;

json CostReport::to_json() const {
  json j = estimate.to_json();
  j["architecture"] = describe(config);
  j["scenario"] = scenario.name;
  j["limits"] = limits.to_json();
  j["limits_hold"] = limits_hold ? json(*limits_hold) : json(nullptr);
  if (!limits_broken.empty()) j["limits_broken"] = limits_broken;
  if (!warnings.empty()) j["warnings"] = warnings;
  return j;
}

std::vector<std::string> extrapolation_warnings(const Profile* profile, const ModelConfig& config,
                                                const std::string& scenario_name) {
  std::vector<std::string> out;
  if (!profile) return out;
  for (const std::string& e : profile->extrapolated_dimensions(config))
    out.push_back(fmt::format("{}: its latencies are extrapolated, not measured; profile this "
                              "model (`autocompress profile --scenario {} --model CONFIG`)",
                              e, scenario_name));
  return out;
}

CostReport cost_report(const ModelConfig& config, const Scenario& scenario,
                       const Profile* profile, const fs::path& teacher_path) {
  CostReport r;
  r.config = config;
  r.scenario = scenario;
  r.estimate = predict(r.config, scenario, profile);
  r.limits = scenario.limits;
  r.warnings = extrapolation_warnings(profile, config, scenario.name);
  if (r.limits.has_relative()) {
    if (teacher_path.empty()) {
      r.unresolved = "limits relative to the teacher are not checked: pass --teacher";
      return r;
    }
    r.limits = resolve_limits(r.limits, predict(read_architecture(teacher_path), scenario, profile));
  }
  r.limits_broken = check_limits(r.estimate, r.limits);
  r.limits_hold = r.limits_broken.empty();
  return r;
}

}  // namespace ac
