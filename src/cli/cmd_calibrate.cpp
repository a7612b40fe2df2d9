// `autocompress calibrate`: fits (or re-fits) the latency correction of a CPU profile on real
// native forwards of calibration architectures (hardware/calibration.h) and writes the
// corrected profile; --samples also writes the raw measurements and features for analysis.
#include <cstdio>

#include "cli/command.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/validate.h"

namespace {
struct CalibrateArgs {
  std::string profile, out, samples, base;
  int count = 12, repeats = 3;
  uint64_t seed = 0xCA1B;
  double ridge = ac::kCorrectionRidge;
  bool no_shapes = false;
};

void run(const CalibrateArgs& a) {
  ac::check_not_overwriting_inputs({a.profile, a.base}, a.out, "calibrate");
  ac::check_not_overwriting_inputs({a.profile, a.base}, a.samples, "calibrate");
  ac::Profile p = ac::load_profile(a.profile);
  ac::use_profile_gemm_backend(p);  // the GEMM library its tables were timed with
  ac::check_profile_is_this_machine(p);
  ac::ModelConfig base = a.base.empty() ? ac::stories15m_shape() : ac::read_architecture(a.base);
  const double t0 = ac::now_s();
  std::vector<ac::ModelConfig> archs = ac::calibration_architectures({base}, a.count, a.seed);
  if (a.no_shapes) archs.erase(archs.begin());
  auto samples = ac::measure_calibration(p, archs, p.workload, a.repeats, /*progress=*/true);
  if (!a.samples.empty()) ac::write_json_file(a.samples, ac::calibration_samples_json(samples));
  ac::LatencyCorrection c = ac::fit_correction(samples, a.ridge);
  c.fit.base = ac::describe(base);
  c.fit.seed = a.seed;
  c.fit.repeats = a.repeats;
  c.fit.elapsed_s = ac::now_s() - t0;
  std::printf("correction fitted on %d architectures (seed %llu, %.1f s): MAPE TTFT %.2f%% (leave-"
              "one-out %.2f%%, uncorrected %.2f%%), TPOT %.2f%% (leave-one-out %.2f%%, "
              "uncorrected %.2f%%)\n",
              c.fit.models, (unsigned long long)a.seed, c.fit.elapsed_s, c.fit.mape_ttft,
              c.fit.loo_mape_ttft, c.fit.uncorrected_mape_ttft, c.fit.mape_tpot,
              c.fit.loo_mape_tpot, c.fit.uncorrected_mape_tpot);
  std::printf("%s\n", c.to_json().dump(1).c_str());
  if (!a.out.empty()) {
    p.correction = c;
    ac::save_profile(a.out, p);
  }
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
  s->callback([a] { run(*a); });
});
}  // namespace
