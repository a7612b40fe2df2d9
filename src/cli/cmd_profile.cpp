// `autocompress profile`: measures the latency tables of this CPU, or of this machine's GPU in a
// build with CUDA (--device cuda), for a scenario's workload at the shapes of interest (a
// model's widths and their prunes; stories15M's by default).
#include <cstdio>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/runtime.h"
#include "hardware/profile.h"
#include "hardware/validate.h"

namespace {
struct ProfileArgs {
  std::string device = "cpu", scenario, out = "profile.json";
  std::vector<std::string> models;
  bool calibrate = false;
  bool no_in_forward = false;
  int passes = ac::ProfileOptions{}.passes;
  int min_repeats = ac::ProfileOptions{}.min_repeats,
      calibration_models = ac::ProfileOptions{}.calibration_models,
      calibration_repeats = ac::ProfileOptions{}.calibration_repeats;
  uint64_t calibration_seed = ac::ProfileOptions{}.calibration_seed;
};

void run(const ProfileArgs& a) {
  ac::check_not_overwriting_inputs(std::vector<ac::fs::path>(a.models.begin(), a.models.end()),
                                   a.out, "profile");
  ac::cli::check_output_flag("profile", "--out", a.out);
  ac::Scenario s = ac::find_scenario(a.scenario);
  // --device cuda: the scenario's GPU, whichever it is; else the device's own name.
  const bool any_gpu = a.device == "cuda" && s.device_spec.kind == "cuda";
  if (a.device != s.device && !any_gpu)
    throw ac::ConfigError(ac::msg("profile", "--device {} but scenario '{}' targets device '{}' "
                                             "(a {} device: --device {})",
                                  a.device, s.name, s.device, s.device_spec.kind,
                                  s.device_spec.kind == "cuda" ? "cuda" : "cpu"));
  std::vector<ac::ModelConfig> shapes;
  for (const auto& m : a.models) shapes.push_back(ac::read_architecture(m));
  if (shapes.empty()) shapes.push_back(ac::stories15m_shape());
  ac::ProfileOptions opt;
  if (s.device_spec.kind == "cuda") opt.gpu = s.device_spec;  // throws there without CUDA / GPU
  opt.calibrate = a.calibrate;
  opt.in_forward = !a.no_in_forward;
  opt.passes = a.passes;
  opt.min_repeats = a.min_repeats;
  opt.calibration_models = a.calibration_models;
  opt.calibration_repeats = a.calibration_repeats;
  opt.calibration_seed = a.calibration_seed;
  ac::Profile p = ac::run_profile(shapes, s.workload, opt);
  ac::save_profile(a.out, p);
  const std::string who = p.identity.gpu_model.empty()
                              ? p.identity.cpu_model
                              : p.identity.gpu_model + ", " + p.identity.cuda + ", host";
  std::printf("profile of %s (%d threads) for %s: %zu tables, %.1f s, GEMM peak %.1f GFLOP/s, "
              "copy bandwidth %.1f GB/s -> %s\n",
              who.c_str(), p.identity.threads, s.name.c_str(), p.tables.size(),
              p.elapsed_s, p.gemm_peak_flops / 1e9, p.memory_bandwidth_bytes_per_s / 1e9,
              a.out.c_str());
  if (p.machine_load.measured)
    std::printf("machine load while profiling: other processes %.2f cores on average, steal "
                "%.2f (%s)\n", p.machine_load.other_cores, p.machine_load.steal_cores,
                ac::busy_machine_warning(p.machine_load, "the profile", p.identity.cores).empty()
                    ? "quiet"
                    : "busy: the tables time a shared machine");
  if (p.width_granularity > 0)
    std::printf("width granularity %lld (hardware/granularity.h)\n", (long long)p.width_granularity);
  if (p.decode_gemm_capped > 0)
    std::printf("decode GEMM entries above a wider one's time, lowered to it: %d "
                "(hardware/profile.h cap_decode_gemm_table)\n", p.decode_gemm_capped);
  std::printf("%s", ac::describe_in_forward(p.in_forward).c_str());
  if (p.correction.fitted) std::printf("%s", ac::describe_fit(p.correction.fit).c_str());
  if (!p.residency_curve(p.workload.batch_size).empty())
    std::printf("cache residency: last-level cache %.0f MiB; the first model's weights %.0f%% "
                "cache-resident in a decode step\n",
                double(p.last_level_cache_bytes) / (1 << 20),
                100 * p.residency(4.0 * double(shapes.front().num_parameters()), p.workload.batch_size));
  if (!p.width_repeatability.empty()) {
    double worst = 0;
    int64_t at = 0;
    for (const auto& r : p.width_repeatability)
      if (std::max(r.tpot_spread, r.ttft_spread) > worst)
        worst = std::max(r.tpot_spread, r.ttft_spread), at = r.hidden_size;
    std::printf("repeatability: with each of the %d passes left out in turn, the profile "
                "predicted the base at most %.1f%% apart (at hidden size %lld)\n", p.passes,
                100 * worst, (long long)at);
  }
}

ac::cli::RegisterCommand reg(30, [](CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* s = app.add_subcommand("profile", "Measure the latency tables of this device");
  s->add_option("--device", a->device, "device to profile: cpu, cuda (the scenario's GPU, in a "
                                      "build with CUDA) or a devices/<name>.json name")->capture_default_str();
  s->add_option("--scenario", a->scenario, "scenario whose workload is profiled (scenarios/NAME.json or a path; e.g. cpu-local)")->required();
  s->add_option("--model", a->models, "architecture(s) of interest: checkpoint folder, config.json "
                                      "or llama2.c model.bin (default: stories15M's shape)");
  s->add_option("--out", a->out, "profile JSON to write")->capture_default_str();
  s->add_flag("--calibrate", a->calibrate, "fit the latency correction on real forwards of "
                                           "calibration architectures (quiet machine only)");
  s->add_flag("--no-in-forward", a->no_in_forward, "with --calibrate: fit the correction on the "
                                                 "tables as timed alone, without each op class's "
                                                 "ratio inside a real decode step (the model "
                                                 "before 2026-12-06)");
  s->add_option("--calibration-models", a->calibration_models, "random calibration prunes "
                                                              "(besides the models)")->capture_default_str();
  s->add_option("--calibration-seed", a->calibration_seed, "their seed (validate's default is 1)")->capture_default_str();
  s->add_option("--calibration-repeats", a->calibration_repeats, "measured runs per calibration "
                                                                "architecture")->capture_default_str();
  s->add_option("--passes", a->passes, "passes over every shape, interleaved; each table entry "
                                      "keeps the fastest call of all of them, and the passes "
                                      "left out in turn say how repeatable the profile is")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  s->add_option("--min-repeats", a->min_repeats, "timed calls per shape and pass, at least")->capture_default_str();
  s->callback([a] { run(*a); });
});
}  // namespace
