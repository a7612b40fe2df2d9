// `cost`: an architecture's predicted TTFT, TPOT, throughput and memory in a scenario
// (hardware/cost_model.h predict), checked against the scenario's limits. What
// `autocompress cost` prints and the Python package's cost() returns.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "hardware/cost_model.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "model/config.h"

namespace ac {

struct CostReport {
  ModelConfig config;
  Scenario scenario;
  CostEstimate estimate;           // predict(config, scenario, profile): ms, tokens/s, bytes
  Limits limits;                   // the scenario's, relative ones resolved against the teacher
                                   // when one is given (else as written)
  std::optional<bool> limits_hold;  // nullopt: relative limits and no teacher to resolve them
  std::string limits_broken;       // check_limits(): "" when they hold
  std::string unresolved;          // why the limits are not checked ("" when they are)
  std::vector<std::string> warnings;  // dimensions the profile did not time (Profile::
                                      // extrapolated_dimensions): predictions extrapolated

  /// estimate.to_json() with "architecture" (describe), "scenario" (name), "limits",
  /// "limits_hold" (null when unresolved), "limits_broken" (only when broken) and "warnings" (only
  /// when there are some).
  nlohmann::json to_json() const;
};

/// One warning per dimension of `config` that `profile` did not time (Profile::
/// extrapolated_dimensions), with the command that profiles it; empty for a null profile.
std::vector<std::string> extrapolation_warnings(const Profile* profile, const ModelConfig& config,
                                                const std::string& scenario_name);

/// The cost of `config` in `scenario`; `profile` may be null (a GPU's spec roofline; a CPU needs
/// one). `teacher_path` (may be empty; hardware/validate.h read_architecture: a config.json, a
/// checkpoint folder or a llama2.c model.bin) is the architecture that relative limits ("0.6 x
/// the teacher's TPOT") resolve against, read only when the scenario has such limits. Throws
/// what predict and read_architecture throw.
CostReport cost_report(const ModelConfig& config, const Scenario& scenario,
                       const Profile* profile, const fs::path& teacher_path = {});

}  // namespace ac
