// `autocompress profile`: measures the latency tables of this CPU for a scenario's workload
// at the shapes of interest (a model's widths and their prunes; stories15M's by default).
#include <cstdio>

#include "cli/command.h"
#include "common/error.h"
#include "common/runtime.h"
#include "hardware/profile.h"
#include "hardware/validate.h"

namespace {
struct ProfileArgs {
  std::string device = "cpu", scenario = "cpu-local", out = "profile.json";
  std::vector<std::string> models;
  bool calibrate = false;
  int min_repeats = 7;
};

void run(const ProfileArgs& a) {
  ac::check_not_overwriting_inputs(std::vector<ac::fs::path>(a.models.begin(), a.models.end()),
                                   a.out, "profile");
  ac::Scenario s = ac::find_scenario(a.scenario);
  if (a.device != s.device)
    throw ac::ConfigError(ac::msg("profile", "--device {} but scenario '{}' targets device '{}'",
                                  a.device, s.name, s.device));
  if (s.device_spec.kind != "cpu")
    throw ac::ConfigError(ac::msg("profile", "device '{}' is a {} device: this build profiles "
                                             "the CPU only (GPU costs use the roofline of "
                                             "devices/{}.json)", a.device, s.device_spec.kind,
                                  a.device));
  std::vector<ac::ModelConfig> shapes;
  for (const auto& m : a.models) shapes.push_back(ac::read_architecture(m));
  if (shapes.empty()) shapes.push_back(ac::stories15m_shape());
  ac::ProfileOptions opt;
  opt.calibrate = a.calibrate;
  opt.min_repeats = a.min_repeats;
  ac::Profile p = ac::run_profile(shapes, s.workload, opt);
  ac::save_profile(a.out, p);
  std::printf("profile of %s (%d threads) for %s: %zu tables, %.1f s, GEMM peak %.1f GFLOP/s, "
              "copy bandwidth %.1f GB/s -> %s\n",
              p.identity.cpu_model.c_str(), p.identity.threads, s.name.c_str(), p.tables.size(),
              p.elapsed_s, p.gemm_peak_flops / 1e9, p.memory_bandwidth_bytes_per_s / 1e9,
              a.out.c_str());
}

ac::cli::RegisterCommand reg(30, [](CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* s = app.add_subcommand("profile", "Measure the latency tables of this device");
  s->add_option("--device", a->device, "device to profile (devices/<name>.json)")->capture_default_str();
  s->add_option("--scenario", a->scenario, "scenario whose workload is profiled (name or path)")->capture_default_str();
  s->add_option("--model", a->models, "architecture(s) of interest: checkpoint folder, config.json "
                                      "or llama2.c model.bin (default: stories15M's shape)");
  s->add_option("--out", a->out, "profile JSON to write")->capture_default_str();
  s->add_flag("--calibrate", a->calibrate, "add the mean residual of real forwards of the models "
                                           "(use on a quiet machine only)");
  s->add_option("--min-repeats", a->min_repeats, "timed calls per shape, at least")->capture_default_str();
  s->callback([a] { run(*a); });
});
}  // namespace
