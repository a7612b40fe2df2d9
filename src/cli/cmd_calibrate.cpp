// `autocompress calibrate`: fits (or re-fits) the latency correction of a CPU profile on real
// native forwards of calibration architectures (hardware/calibration.h) and writes the
// corrected profile; --samples also writes the raw measurements and features for analysis.
// With --engine llama.cpp it measures llama.cpp itself (pipeline/llamacpp_engine.h) at the
// scenario's threads and weight type and adds that engine's calibration to the profile.
#include <cstdio>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/validate.h"
#include "pipeline/llamacpp_engine.h"

namespace {
struct CalibrateArgs {
  std::string profile, out, samples, base, engine = "native", scenario, tokenizer;
  int count = ac::ProfileOptions{}.calibration_models, repeats = 3;
  uint64_t seed = 0xCA1B;
  double ridge = ac::kCorrectionRidge;
  bool no_shapes = false;
};

// Where the fit went: the profile of --out (its JSON under `key`), and --samples. The fit itself
// is too long for a terminal; without --out it is not kept, which the user should know.
void print_where_written(const CalibrateArgs& a, const char* key) {
  if (a.out.empty())
    std::printf("not saved: give --out PATH to write the profile with this correction\n");
  else
    std::printf("profile with the correction (%s) written to %s\n", key, a.out.c_str());
  if (!a.samples.empty()) std::printf("measurements written to %s\n", a.samples.c_str());
}

// llama.cpp measured at the scenario's threads and weight type; its calibration is added to
// the profile (replacing one of the same threads and types).
void run_llamacpp(const CalibrateArgs& a) {
  if (a.scenario.empty() || a.tokenizer.empty())
    throw ac::ConfigError(ac::msg("calibrate", "--engine llama.cpp needs --scenario (its threads "
                                  "and weight type) and --tokenizer (a checkpoint folder whose "
                                  "tokenizer goes into the GGUFs)"));
  ac::check_not_overwriting_inputs({a.profile, a.tokenizer}, a.out, "calibrate");
  ac::cli::check_output_flag("calibrate", "--out", a.out);
  ac::cli::check_output_flag("calibrate", "--samples", a.samples);
  ac::Profile p = ac::cli::load_profile_flag(a.profile, "calibrate");
  ac::check_profile_is_this_machine(p);
  ac::Scenario s = ac::find_scenario(a.scenario);
  const ac::ModelConfig base = a.base.empty() ? ac::stories15m_shape() : ac::read_architecture(a.base);
  ac::LlamaCppCalibrationOptions o;
  o.count = a.count;
  o.seed = a.seed;
  o.rounds = a.repeats;
  o.ridge = a.ridge;
  o.samples_path = a.samples;
  o.scratch = (a.out.empty() ? ac::fs::temp_directory_path() / "ac-calibrate"
                             : ac::fs::path(a.out + ".gguf-scratch"));
  const ac::EngineCalibration ec = ac::calibrate_llamacpp(
      p, base, ac::vocab_from_checkpoint(a.tokenizer, base.vocab_size), s, o);
  std::printf("llama.cpp %s, %d threads, %s weights: ", ec.release.c_str(), ec.threads,
              ec.weight_dtype.c_str());
  std::printf("%s", ac::describe_fit(ec.correction.fit).c_str());
  if (!a.out.empty()) {
    p.set_engine_calibration(ec);
    ac::save_profile(a.out, p);
  }
  print_where_written(a, "\"engines\"");
}

void run(const CalibrateArgs& a) {
  if (a.engine == "llama.cpp") return run_llamacpp(a);
  if (a.engine != "native")
    throw ac::ConfigError(ac::msg("calibrate", "--engine {}: expected native or llama.cpp (the "
                                  "engines that run on this CPU)", a.engine));
  ac::check_not_overwriting_inputs({a.profile, a.base}, a.out, "calibrate");
  ac::check_not_overwriting_inputs({a.profile, a.base}, a.samples, "calibrate");
  ac::cli::check_output_flag("calibrate", "--out", a.out);
  ac::cli::check_output_flag("calibrate", "--samples", a.samples);
  ac::Profile p = ac::cli::load_profile_flag(a.profile, "calibrate");
  ac::use_profile_gemm_backend(p);  // the GEMM library its tables were timed with
  ac::check_profile_is_this_machine(p);
  ac::ModelConfig base = a.base.empty() ? ac::stories15m_shape() : ac::read_architecture(a.base);
  const double t0 = ac::now_s();
  std::vector<ac::ModelConfig> archs = ac::calibration_architectures({base}, a.count, a.seed);
  if (a.no_shapes) archs.erase(archs.begin());
  // The in-forward ratios first: the samples' features are read through them.
  p.in_forward = ac::in_forward_for(p, base, p.workload, /*progress=*/true);
  auto samples = ac::measure_calibration(p, archs, p.workload, a.repeats, /*progress=*/true);
  if (!a.samples.empty()) ac::write_json_file(a.samples, ac::calibration_samples_json(samples));
  ac::LatencyCorrection c = ac::fit_native_correction(p, samples, a.ridge);
  c.fit.base = ac::describe(base);
  c.fit.seed = a.seed;
  c.fit.repeats = a.repeats;
  c.fit.elapsed_s = ac::now_s() - t0;
  std::printf("%s", ac::describe_in_forward(p.in_forward).c_str());
  std::printf("%s", ac::describe_fit(c.fit).c_str());
  if (!a.out.empty()) {
    p.correction = c;
    ac::save_profile(a.out, p);
  }
  print_where_written(a, "\"correction\"");
}

ac::cli::RegisterCommand reg(33, [](CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* s = app.add_subcommand("calibrate", "Fit a CPU profile's latency correction on real forwards");
  s->add_option("--profile", a->profile, "profile JSON of this CPU")->required();
  s->add_option("--out", a->out, "corrected profile JSON to write");
  s->add_option("--samples", a->samples, "raw measurements and features JSON to write");
  s->add_option("--base", a->base, "architecture the prunes start from (default: stories15M's shape)");
  s->add_option("--count", a->count, "random calibration prunes")->capture_default_str();
  s->add_option("--seed", a->seed, "seed of the random prunes")->capture_default_str();
  s->add_option("--repeats", a->repeats, "measured runs per architecture")->capture_default_str();
  s->add_option("--ridge", a->ridge, "ridge toward the identity correction")->capture_default_str();
  s->add_flag("--no-base", a->no_shapes, "measure the random prunes only, not the base itself");
  s->add_option("--engine", a->engine,
                "engine to measure: native (the profile's correction) or llama.cpp (its own "
                "calibration, added to the profile)")->capture_default_str();
  s->add_option("--scenario", a->scenario,
                "with --engine llama.cpp: the scenario whose workload (threads, weight_dtype, "
                "prompt and output tokens) is measured");
  s->add_option("--tokenizer", a->tokenizer,
                "with --engine llama.cpp: checkpoint folder whose tokenizer goes into the GGUFs");
  s->callback([a] { run(*a); });
});
}  // namespace
