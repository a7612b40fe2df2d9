// `autocompress validate`: measures architectures on this CPU with the native engine and prints
// each prediction beside its measurement, with the MAPE per metric. With --engine llama.cpp the
// architectures run in llama.cpp (GGUFs of the scenario's weight type, its threads) and are
// predicted with the profile's llama.cpp calibration.
#include <cstdio>
#include <optional>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/json_io.h"
#include "hardware/calibration.h"
#include "hardware/validate.h"
#include "pipeline/llamacpp_engine.h"

namespace {
struct ValidateArgs {
  std::string profile, scenario, out, base, engine, tokenizer;
  std::vector<std::string> models;
  int count = 20, repeats = 3;
  uint64_t seed = 1;
  bool recalibrate = false;
  int calibration_models = ac::ProfileOptions{}.calibration_models;
};

void run(const ValidateArgs& a) {
  std::vector<ac::fs::path> inputs{a.profile, a.base};
  inputs.insert(inputs.end(), a.models.begin(), a.models.end());
  ac::check_not_overwriting_inputs(inputs, a.out, "validate");
  ac::cli::check_output_flag("validate", "--out", a.out);
  ac::Scenario s = ac::find_scenario(a.scenario);
  ac::Profile p = ac::cli::load_profile_flag(a.profile, "validate");
  ac::use_profile_gemm_backend(p);  // the GEMM library its tables were timed with
  std::vector<ac::ModelConfig> archs;
  for (const auto& m : a.models) archs.push_back(ac::read_architecture(m));
  const ac::ModelConfig base = a.base.empty() ? ac::stories15m_shape() : ac::read_architecture(a.base);
  // The base is measured beside prunes of it (or when named): the errors relative to it.
  const std::optional<ac::ModelConfig> relative_to =
      (archs.empty() || !a.base.empty()) ? std::optional<ac::ModelConfig>(base) : std::nullopt;
  if (archs.empty()) archs = ac::random_architectures(base, a.count, a.seed);
  ac::ValidationReport rep;
  ac::LatencyCorrection refit;
  if (!a.engine.empty() && a.engine != s.engine) {
    s.engine = a.engine;
    s.engine_spec = ac::load_engine(a.engine);
  }
  if (s.engine == "llama.cpp") {
    if (a.tokenizer.empty())
      throw ac::ConfigError(ac::msg("validate", "--engine llama.cpp needs --tokenizer (a "
                                    "checkpoint folder whose tokenizer goes into the GGUFs)"));
    const ac::EngineCalibration* stored = p.engine_calibration(s);
    // Random prunes as the search proposes them for the weight type (rows of whole blocks).
    if (a.models.empty())
      for (auto& c : archs) c = ac::snap_to_rows(c, ac::weight_row_multiple(s.workload.weight_dtype));
    std::optional<ac::LlamaCppCalibrationOptions> recal;
    if (a.recalibrate) {
      recal.emplace();
      recal->count = a.calibration_models;
      if (stored) recal->seed = stored->correction.fit.seed;  // the profile's calibration set
    }
    ac::EngineCalibration refit_engine;
    rep = ac::validate_llamacpp(archs, base, s, p,
                                ac::vocab_from_checkpoint(a.tokenizer, base.vocab_size), a.repeats,
                                ac::fs::temp_directory_path() / "ac-validate-llamacpp", recal,
                                &refit_engine);
    const ac::EngineCalibration* ec = a.recalibrate ? &refit_engine : stored;
    std::printf("%s", rep.table().c_str());
    const int overlap = ac::correction_overlap(ec->correction, archs);
    std::printf("llama.cpp %s, %d threads, %s weights; its correction fitted on %d calibration "
                "architectures (seed %llu)%s; of these %zu validation architectures, %d %s among "
                "them\n", ec->release.c_str(), ec->threads, ec->weight_dtype.c_str(),
                ec->correction.fit.models, (unsigned long long)ec->correction.fit.seed,
                a.recalibrate ? ", measured in the same rounds (--recalibrate)" : "",
                archs.size(), overlap, overlap == 1 ? "is" : "are");
    if (!a.out.empty()) {
      ac::json j = rep.to_json();
      j["engine"] = ec->to_json();
      j["recalibrated"] = a.recalibrate;
      j["calibration_overlap"] = overlap;
      j["scenario"] = s.name;
      j["profile"] = a.profile;
      ac::write_json_file(a.out, j);
    }
    return;
  }
  if (a.recalibrate) {
    // The profile's calibration set (its seed), measured again in the same rounds as archs.
    const uint64_t cseed = p.correction.fitted ? p.correction.fit.seed : ac::ProfileOptions{}.calibration_seed;
    rep = ac::validate_native_recalibrated(
        archs, ac::calibration_architectures({base}, a.calibration_models, cseed), s, p,
        a.repeats, /*progress=*/true, &refit, relative_to);
  } else {
    rep = ac::validate_native(archs, s, p, a.repeats, /*progress=*/true, relative_to);
  }
  std::printf("%s", rep.table().c_str());
  // The correction must be judged on architectures it was not fitted on.
  const int overlap = p.correction.fitted ? ac::correction_overlap(p.correction, archs) : 0;
  if (a.recalibrate)
    std::printf("latency correction re-fitted on %d calibration architectures (seed %llu) measured "
                "in the same rounds, disjoint from these %zu; its in-sample MAPE TTFT %.2f%%, "
                "TPOT %.2f%% (the profile's own correction is not used)\n",
                refit.fit.models, (unsigned long long)refit.fit.seed, archs.size(),
                refit.fit.mape_ttft, refit.fit.mape_tpot);
  else if (p.correction.fitted)
    std::printf("latency correction fitted on %d calibration architectures (seed %llu); of these "
                "%zu validation architectures, %d %s among them%s\n",
                p.correction.fit.models, (unsigned long long)p.correction.fit.seed, archs.size(),
                overlap, overlap == 1 ? "is" : "are",
                overlap ? " (not an independent check: use another --seed)" : " (disjoint)");
  else
    std::printf("no latency correction in the profile (bare table sums)\n");
  if (!a.out.empty()) {
    ac::json j = rep.to_json();
    j["correction_fitted"] = p.correction.fitted;
    j["recalibrated"] = a.recalibrate;
    if (a.recalibrate) j["correction"] = refit.to_json();
    j["calibration_overlap"] = overlap;
    j["scenario"] = s.name;
    j["profile"] = a.profile;
    ac::write_json_file(a.out, j);
  }
}

ac::cli::RegisterCommand reg(90, [](CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* s = app.add_subcommand("validate", "Measure architectures here and compare with the cost model");
  s->add_option("--profile", a->profile, "profile JSON of this machine's CPU or GPU")->required();
  s->add_option("--scenario", a->scenario, "scenario name (scenarios/NAME.json) or path")->required();
  s->add_option("--model", a->models, "architecture(s) to measure (default: random prunes)");
  s->add_option("--base", a->base, "architecture the random prunes start from (default: stories15M's shape); measured in the same rounds as the others, and each error also given as a fraction of its own (how a relative limit reads the model)");
  s->add_option("--count", a->count, "random architectures")->capture_default_str();
  s->add_option("--seed", a->seed, "seed of the random architectures")->capture_default_str();
  s->add_option("--repeats", a->repeats, "measured runs per architecture, in interleaved rounds (with 2 or more, the summary also gives each architecture's odd rounds against its even ones: the measurement against itself, the floor under the model's error here)")->capture_default_str();
  s->add_option("--out", a->out, "validation JSON to write");
  s->add_option("--engine", a->engine,
                "engine to measure in (default: the scenario's): native, or llama.cpp (needs the "
                "profile's llama.cpp calibration, `calibrate --engine llama.cpp`)");
  s->add_option("--tokenizer", a->tokenizer,
                "with --engine llama.cpp: checkpoint folder whose tokenizer goes into the GGUFs");
  s->add_flag("--recalibrate", a->recalibrate,
              "re-fit the latency correction on the profile's calibration architectures (prunes "
              "of --base, its seed) measured in the same rounds, so that a drift of the "
              "machine's speed since the profile is not counted as model error");
  s->add_option("--calibration-models", a->calibration_models,
                "random calibration prunes with --recalibrate (plus the base)")->capture_default_str();
  s->callback([a] { run(*a); });
});
}  // namespace
