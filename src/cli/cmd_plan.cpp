// `autocompress plan`: from a config.json alone, does the model fit the scenario, and if not,
// the cheapest structural changes that make it fit by the cost model (plan/plan.h).
#include <cstdio>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/json_io.h"
#include "hardware/validate.h"
#include "plan/plan.h"

namespace {
struct PlanArgs {
  std::string config, scenario, profile, out;
  ac::PlanOptions options;
  bool json = false;
};

void run(const PlanArgs& a) {
  ac::check_not_overwriting_inputs({a.config, a.scenario, a.profile}, a.out, "plan");
  ac::cli::check_output_flag("plan", "--out", a.out);
  const ac::ModelConfig c = ac::read_architecture(a.config);
  ac::Scenario s = ac::find_scenario(a.scenario);
  ac::Profile prof;
  if (!a.profile.empty()) prof = ac::cli::load_profile_flag(a.profile, "plan");
  const ac::Profile* p = a.profile.empty() ? nullptr : &prof;
  const ac::Plan plan = ac::plan_deployment(c, a.config, s, p, a.options);
  const ac::json j = plan.to_json();
  if (!a.out.empty()) ac::write_json_file(a.out, j);
  if (a.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    std::printf("%s", plan.to_text().c_str());
}

ac::cli::RegisterCommand reg(32, [](CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* s = app.add_subcommand(
      "plan", "From config.json alone: does the model fit the scenario, and the cheapest "
              "structural changes (uniform and per-layer) that make it fit by the cost model");
  s->add_option("--config", a->config, "config.json, checkpoint folder or llama2.c model.bin")->required();
  s->add_option("--scenario", a->scenario, "scenario name (scenarios/NAME.json) or path")->required();
  s->add_option("--profile", a->profile, "profile JSON of the device (required for a CPU)");
  s->add_option("--out", a->out, "write the plan as JSON to this file");
  s->add_flag("--json", a->json, "print JSON instead of the table");
  s->add_option("--width-granularity", a->options.width_granularity,
                "hidden and FFN widths are multiples of this (default: the profile's derived "
                "granularity, else the device's)");
  ac::cli::add_deprecated_spelling(s, "--granularity", "--width-granularity",
                                   a->options.width_granularity);
  s->add_option("--width-steps", a->options.width_steps,
                "a width choice about every full/N")->capture_default_str();
  s->add_option("--min-width-fraction", a->options.min_width_fraction,
                "narrowest width or head count considered")->capture_default_str();
  s->add_option("--min-depth-fraction", a->options.min_depth_fraction,
                "fewest layers a uniform shape keeps")->capture_default_str();
  s->callback([a] { run(*a); });
});
}  // namespace
