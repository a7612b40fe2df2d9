#include "pipeline/llamacpp_engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "common/error.h"
#include "common/json_io.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "export/gguf_model.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"
#include "hardware/engine.h"
#include "model/weights.h"

namespace ac {

using json = nlohmann::json;

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// n_ctx as llama.cpp pads it: prompt + output rounded up to the engine's KV block (256).
int64_t context_for(const LlamaCppRunOptions& opt, int64_t prompt, int64_t output) {
  return opt.context_tokens > 0 ? opt.context_tokens : round_up(prompt + output, 256);
}

int resolve_threads(int64_t threads) { return threads > 0 ? int(threads) : cpu_cores(); }

}  // namespace

std::string llamacpp_client(const std::string& name, fs::path* script) {
  fs::path root;
  try {
    root = data_dir();
  } catch (const Error& e) {
    return e.what();
  }
  const fs::path dir = root / "tools/llamacpp";
  if (!fs::exists(dir / name)) return "no " + (dir / name).string();
  if (!fs::exists(dir / "node_modules/node-llama-cpp"))
    return (dir / "node_modules").string() + " has no node-llama-cpp (scripts/setup_node.sh)";
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node is not installed";
  *script = dir / name;
  return "";
}

std::string LlamaCppBuffers::repacked_into() const {
  for (const std::string& t : model_buffer_types)
    if (t != "CPU" && t != "CPU_Mapped") return t;
  return "";
}

json LlamaCppBuffers::to_json() const {
  return {{"model_bytes", model}, {"kv_bytes", kv}, {"output_bytes", output},
          {"compute_bytes", compute}, {"total_bytes", total()},
          {"model_buffer_types", model_buffer_types}};
}

LlamaCppRun measure_llamacpp_files(const std::vector<fs::path>& ggufs,
                                   const std::vector<int64_t>& prompt, int64_t output_tokens,
                                   const LlamaCppRunOptions& opt, const fs::path& scratch) {
  fs::path script;
  if (const std::string why = llamacpp_client("measure.mjs", &script); !why.empty())
    throw ConfigError(msg("llama.cpp", "llama.cpp cannot run here: {}", why));
  if (output_tokens < 2 || prompt.empty() || opt.rounds < 1)
    throw ConfigError(msg("llama.cpp", "expected a prompt, >= 2 output tokens and >= 1 round, "
                          "found {} prompt tokens, {} output tokens, {} rounds", prompt.size(),
                          output_tokens, opt.rounds));
  fs::create_directories(scratch);
  const int64_t context = context_for(opt, int64_t(prompt.size()), output_tokens);
  json job = {{"prompt", prompt}, {"output_tokens", output_tokens}, {"threads", opt.threads},
              {"context", context}, {"rounds", opt.rounds}, {"batch", opt.ubatch_tokens},
              {"models", json::array()}};
  for (const auto& g : ggufs) job["models"].push_back(fs::absolute(g).string());
  const fs::path job_path = scratch / "job.json", out = scratch / "result.json";
  write_file_atomic(job_path, job.dump());
  const std::string cmd = fmt::format("node {} {} > {} 2> {}", shell_quote(script.string()),
                                      shell_quote(job_path.string()), shell_quote(out.string()),
                                      shell_quote(out.string() + ".err"));
  if (std::system(cmd.c_str()) != 0)
    throw Error(msg("llama.cpp", "llama.cpp run failed ({}): {}", cmd,
                    read_file(out.string() + ".err")));
  const json r = json::parse(read_file(out));
  LlamaCppRun run;
  run.release = r.value("llama_cpp", "");
  run.threads = opt.threads;
  run.context_tokens = context;
  const std::string where = out.string();
  for (const json& m : r.at("models")) {
    LlamaCppMeasurement lm;
    const json& b = m.at("buffers");
    lm.buffers = {json_get<int64_t>(b, "model", where), json_get<int64_t>(b, "kv", where),
                  json_get<int64_t>(b, "output", where), json_get<int64_t>(b, "compute", where)};
    for (const json& t : b.value("model_buffer_types", json::array()))
      if (t.is_string()) lm.buffers.model_buffer_types.push_back(t.get<std::string>());
    std::vector<Measurement> parts;
    for (const json& run_j : m.at("runs")) {
      Measurement p;
      const double ttft = json_get<double>(run_j, "ttft_ms", where);
      std::vector<double> steps = run_j.at("token_ms").get<std::vector<double>>();
      p.samples.ttft_ms = {ttft};
      p.samples.request_ms = {ttft + std::accumulate(steps.begin(), steps.end(), 0.0)};
      p.samples.step_ms = {std::move(steps)};
      p.tokens_per_request = output_tokens;
      p.weight_bytes = lm.buffers.model;
      p.peak_memory_bytes = lm.buffers.total();
      parts.push_back(std::move(p));
    }
    lm.measured = merge_measurements(parts);
    run.models.push_back(std::move(lm));
  }
  if (run.models.size() != ggufs.size())
    throw Error(msg("llama.cpp", "{}: {} models measured, {} asked", where, run.models.size(),
                    ggufs.size()));
  return run;
}

std::vector<int64_t> timing_prompt(int64_t tokens, int64_t vocab_size) {
  std::vector<int64_t> p{1};
  const int64_t hi = std::max<int64_t>(4, std::min<int64_t>(vocab_size, 259));
  for (int64_t i = 0; int64_t(p.size()) < tokens; ++i) p.push_back(3 + i % (hi - 3));
  return p;
}

ModelConfig snap_to_rows(const ModelConfig& c, int64_t m) {
  if (m <= 1) return c;
  auto down = [m](int64_t x) { return std::max(m, x / m * m); };
  ModelConfig s = c;
  s.hidden_size = down(c.hidden_size);
  for (auto& l : s.layers) {
    if (l.has_ffn()) l.intermediate_size = down(l.intermediate_size);
    if (!l.has_attention()) continue;
    int64_t H = l.num_attention_heads;
    while (H > 1 && H * l.head_dim % m != 0) --H;
    if (H * l.head_dim % m != 0)
      for (H = l.num_attention_heads + 1; H * l.head_dim % m != 0; ++H) {
      }
    int64_t G = std::min(l.num_key_value_heads, H);
    while (H % G != 0) --G;
    l.num_attention_heads = H;
    l.num_key_value_heads = G;
  }
  return s;
}

static void check_llamacpp_workload(const Workload& w) {
  if (w.batch_size != 1)
    throw ConfigError(msg("llama.cpp", "workload.batch_size {}: llama.cpp is measured here with "
                          "one sequence (batch_size 1)", w.batch_size));
  gguf_type_for(w.weight_dtype);
  if (w.kv_cache_dtype != "fp16")
    throw ConfigError(msg("llama.cpp", "workload.kv_cache_dtype '{}': llama.cpp's KV cache is "
                          "f16 by default, expected fp16", w.kv_cache_dtype));
}

static LlamaCppRunOptions run_options(const Workload& w, int rounds) {
  LlamaCppRunOptions o;
  o.threads = resolve_threads(w.threads);
  o.rounds = rounds;
  return o;
}

LlamaCppRun measure_llamacpp_models(const std::vector<const LlamaModel*>& models,
                                    const GgufVocab& vocab, const Workload& w,
                                    const LlamaCppRunOptions& opt, const fs::path& scratch) {
  check_llamacpp_workload(w);
  fs::create_directories(scratch);
  GgufExportOptions g;
  g.dtype = gguf_type_for(w.weight_dtype);
  std::vector<fs::path> files;
  for (size_t i = 0; i < models.size(); ++i) {
    files.push_back(scratch / fmt::format("model{}.gguf", i));
    write_model_gguf(files.back(), *models[i], vocab, g);
  }
  return measure_llamacpp_files(files, timing_prompt(w.prompt_tokens, models.front()->config.vocab_size),
                                w.output_tokens, opt, scratch);
}

// Random-weight models of `archs` written as GGUFs of `w`'s weight type, one at a time (a
// model's weights are freed before the next is made).
static std::vector<fs::path> random_ggufs(const std::vector<ModelConfig>& archs,
                                          const GgufVocab& vocab, const Workload& w,
                                          uint64_t weight_seed, const fs::path& scratch) {
  fs::create_directories(scratch);
  GgufExportOptions g;
  g.dtype = gguf_type_for(w.weight_dtype);
  std::vector<fs::path> files;
  for (size_t i = 0; i < archs.size(); ++i) {
    LlamaModel m{archs[i], random_weights(archs[i], weight_seed + i)};
    files.push_back(scratch / fmt::format("arch{}.gguf", i));
    write_model_gguf(files.back(), m, vocab, g);
  }
  return files;
}

static void check_llamacpp_scenario(const Scenario& s, const Profile& profile) {
  if (s.engine != "llama.cpp")
    throw ConfigError(msg("llama.cpp", "scenario '{}' names engine '{}', expected llama.cpp",
                          s.name, s.engine));
  if (s.device != "cpu" || profile.identity.device != "cpu")
    throw ConfigError(msg("llama.cpp", "scenario '{}' (device {}) with a profile of device {}: "
                          "llama.cpp is measured on this CPU only (device cpu)", s.name, s.device,
                          profile.identity.device));
  check_llamacpp_workload(s.workload);
}

// Random-weight GGUFs of `archs` measured in one interleaved run (scratch removed after).
static LlamaCppRun measure_random(const std::vector<ModelConfig>& archs, const GgufVocab& vocab,
                                  const Scenario& s, int rounds, uint64_t weight_seed,
                                  const fs::path& scratch) {
  LlamaCppRun run;
  try {
    const auto files = random_ggufs(archs, vocab, s.workload, weight_seed, scratch);
    run = measure_llamacpp_files(files, timing_prompt(s.workload.prompt_tokens,
                                                      archs.front().vocab_size),
                                 s.workload.output_tokens, run_options(s.workload, rounds), scratch);
  } catch (...) {
    fs::remove_all(scratch);
    throw;
  }
  fs::remove_all(scratch);
  return run;
}

// The buffer type llama.cpp repacked the weights into on this CPU, the first any of `run`'s
// models reports (LlamaCppBuffers::repacked_into); "" where every model used the mapped file.
static std::string repacked_into(const LlamaCppRun& run) {
  for (const auto& m : run.models)
    if (std::string t = m.buffers.repacked_into(); !t.empty()) return t;
  return "";
}

// What `stage` (calibrate, validate) says of the repacked weights: `measured` is where llama.cpp
// put them in this run ("" none), `profiled` what the calibration in use says. AMX's copy is
// modelled (hardware/llamacpp_buffers.h); another kind, or a machine other than the
// calibration's, makes the memory predictions miss it.
static void note_repack(const char* stage, const std::string& measured,
                        const std::string& profiled) {
  if (measured != profiled) {
    log_warn(fmt::format("[{}] llama.cpp put the weights in {} buffers here, the calibration in "
                         "use says {}: its memory predictions follow the calibration (calibrate "
                         "again on this machine)", stage,
                         measured.empty() ? "the mapped file's" : measured,
                         profiled.empty() ? "the mapped file's" : profiled));
    return;
  }
  if (measured.empty()) return;
  if (measured == "AMX") {
    log_info(fmt::format("[{}] llama.cpp repacks the weights into AMX buffers on this CPU and "
                         "keeps them beside the mapped file: the memory model counts both "
                         "(hardware/llamacpp_buffers.h)", stage));
    return;
  }
  log_warn(fmt::format("[{}] llama.cpp repacks the weights into {} buffers on this CPU and keeps "
                       "them beside the mapped file: its model buffers are not the GGUF's bytes, "
                       "which the memory predictions for llama.cpp count", stage, measured));
}

// The calibration of `s`'s engine fitted on `archs` measured as models[first, first + n) of
// `run`: the latency correction (fit_correction over the engine's work features) and the
// memory model.
static EngineCalibration fit_llamacpp(const Profile& profile, const std::vector<ModelConfig>& archs,
                                      const LlamaCppRun& run, size_t first, const Scenario& s,
                                      const LlamaCppCalibrationOptions& opt) {
  std::vector<Measurement> measured;
  for (size_t i = 0; i < archs.size(); ++i) measured.push_back(run.models[first + i].measured);
  EngineCalibration ec;
  ec.engine = "llama.cpp";
  ec.release = run.release;
  ec.threads = run.threads;
  ec.weight_dtype = s.workload.weight_dtype;
  ec.kv_cache_dtype = s.workload.kv_cache_dtype;
  ec.prompt_tokens = s.workload.prompt_tokens;
  ec.output_tokens = s.workload.output_tokens;
  const auto samples = calibration_samples(profile, archs, measured, s);
  ec.correction = fit_correction(samples, opt.ridge, CorrectionBounds::nonnegative_factors());
  if (!opt.samples_path.empty()) {
    json j = calibration_samples_json(samples);
    for (size_t i = 0; i < archs.size(); ++i)
      j["samples"][i]["llama_cpp_buffers"] = run.models[first + i].buffers.to_json();
    write_json_file(opt.samples_path, j);
  }
  ec.correction.fit.seed = opt.seed;
  ec.correction.fit.repeats = opt.rounds;
  ec.correction.fit.base = describe(archs.front());
  // Memory: llama.cpp's compute buffer (hardware/engine_calibration.h), fitted on what it
  // reported for each architecture.
  ec.memory.ubatch_tokens = std::min<int64_t>(512, run.context_tokens);
  std::vector<double> compute;
  for (size_t i = 0; i < archs.size(); ++i)
    compute.push_back(double(run.models[first + i].buffers.compute));
  ec.memory.fit(archs, run.context_tokens, compute);
  ec.weights_repacked_into = repacked_into(run);  // before the memory predictions: they count it
  Profile with = profile;
  with.set_engine_calibration(ec);
  for (size_t i = 0; i < archs.size(); ++i) {
    const double pred = double(predict(archs[i], s, &with).peak_memory_bytes);
    const double meas = double(run.models[first + i].buffers.total());
    ec.memory.mape_percent += std::fabs(pred - meas) / meas * 100.0 / double(archs.size());
  }
  return ec;
}

// The calibration prunes: `base` and opt.count random prunes of it, as the search proposes them
// for the scenario's weight type (rows of whole blocks). validate's random draw (half at the
// base's width), on which llama.cpp's memory model and correction were measured
// (docs/benchmarks.md, "llama.cpp, measured as the engine"); the native engine's calibration
// spreads its prunes over the widths instead (calibration_architectures).
static std::vector<ModelConfig> llamacpp_calibration_archs(const ModelConfig& base,
                                                           const Scenario& s,
                                                           const LlamaCppCalibrationOptions& opt) {
  std::vector<ModelConfig> archs{base};
  for (auto& a : random_architectures(base, opt.count, opt.seed)) archs.push_back(std::move(a));
  for (auto& a : archs) a = snap_to_rows(a, weight_row_multiple(s.workload.weight_dtype));
  return archs;
}

EngineCalibration calibrate_llamacpp(const Profile& profile, const ModelConfig& base,
                                     const GgufVocab& vocab, const Scenario& s,
                                     const LlamaCppCalibrationOptions& opt) {
  check_llamacpp_scenario(s, profile);
  const double t0 = now_s();
  const std::vector<ModelConfig> archs = llamacpp_calibration_archs(base, s, opt);
  log_info(fmt::format("[calibrate] llama.cpp: {} architectures ({} weights, {} threads), {} "
                       "interleaved rounds", archs.size(), s.workload.weight_dtype,
                       resolve_threads(s.workload.threads), opt.rounds));
  const LlamaCppRun run = measure_random(
      archs, vocab, s, opt.rounds, /*weight_seed=*/17,
      opt.scratch.empty() ? fs::temp_directory_path() / "ac-llamacpp-calibration" : opt.scratch);
  EngineCalibration ec = fit_llamacpp(profile, archs, run, 0, s, opt);
  ec.elapsed_s = ec.correction.fit.elapsed_s = now_s() - t0;
  log_info(fmt::format("[calibrate] llama.cpp {}: TTFT fit {:.1f}% (leave-one-out {:.1f}%), TPOT "
                       "fit {:.1f}% (leave-one-out {:.1f}%), memory {:.1f}%, in {:.0f} s",
                       ec.release, ec.correction.fit.mape_ttft, ec.correction.fit.loo_mape_ttft,
                       ec.correction.fit.mape_tpot, ec.correction.fit.loo_mape_tpot,
                       ec.memory.mape_percent, ec.elapsed_s));
  note_repack("calibrate", ec.weights_repacked_into, ec.weights_repacked_into);
  return ec;
}

ValidationReport validate_llamacpp(const std::vector<ModelConfig>& archs, const ModelConfig& base,
                                   const Scenario& s,
                                   const Profile& profile, const GgufVocab& vocab, int rounds,
                                   const fs::path& scratch,
                                   const std::optional<LlamaCppCalibrationOptions>& recalibrate,
                                   EngineCalibration* refit) {
  check_llamacpp_scenario(s, profile);
  if (archs.empty()) throw ConfigError(msg("validate", "no architectures to validate"));
  if (!recalibrate && !profile.engine_calibration(s))
    throw ConfigError(msg("validate", "the profile has no llama.cpp calibration for {} threads, "
                          "{} weights and {} KV cache: run `autocompress calibrate --engine "
                          "llama.cpp --scenario {}` first", resolve_threads(s.workload.threads),
                          s.workload.weight_dtype, s.workload.kv_cache_dtype, s.name));
  if (!recalibrate) {
    const LlamaCppRun run = measure_random(archs, vocab, s, rounds, /*weight_seed=*/1000, scratch);
    note_repack("validate", repacked_into(run),
                profile.engine_calibration(s)->weights_repacked_into);
    std::vector<Measurement> measured;
    for (const auto& m : run.models) measured.push_back(m.measured);
    return validation_report(archs, measured, s, profile);
  }
  // The calibration prunes measured in the same rounds as `archs`, the correction fitted on
  // them alone: a drift of the machine's speed since the calibration is not counted as error.
  const std::vector<ModelConfig> calib = llamacpp_calibration_archs(base, s, *recalibrate);
  for (const auto& a : archs)
    for (const auto& c : calib)
      if (describe(a) == describe(c))
        throw ConfigError(msg("validate", "architecture {} is both judged and in the calibration "
                              "set: use another --seed", describe(a)));
  // Alternating within each round (calibration, judged, calibration, ...), so that a drift of
  // the machine's speed within a round falls on both sets alike.
  std::vector<ModelConfig> all;
  std::vector<size_t> calib_at, judged_at;
  for (size_t i = 0; i < std::max(calib.size(), archs.size()); ++i) {
    if (i < calib.size()) calib_at.push_back(all.size()), all.push_back(calib[i]);
    if (i < archs.size()) judged_at.push_back(all.size()), all.push_back(archs[i]);
  }
  LlamaCppRun run = measure_random(all, vocab, s, rounds, /*weight_seed=*/1000, scratch);
  LlamaCppRun calib_run = run;
  calib_run.models.clear();
  for (size_t i : calib_at) calib_run.models.push_back(run.models[i]);
  const EngineCalibration ec = fit_llamacpp(profile, calib, calib_run, 0, s, *recalibrate);
  note_repack("validate", ec.weights_repacked_into, ec.weights_repacked_into);
  if (refit) *refit = ec;
  Profile with = profile;
  with.set_engine_calibration(ec);
  std::vector<Measurement> measured;
  for (size_t i : judged_at) measured.push_back(run.models[i].measured);
  return validation_report(archs, measured, s, with);
}

std::vector<PairedRounds> measure_paired_group_llamacpp(
    const LlamaModel& teacher, const std::vector<const LlamaModel*>& students,
    const GgufVocab& vocab, const Workload& w, const Limits& limits_as_written,
    const PairedOptions& opt, const fs::path& scratch, std::vector<PairedRounds> priors) {
  check_llamacpp_workload(w);
  fs::create_directories(scratch);
  GgufExportOptions g;
  g.dtype = gguf_type_for(w.weight_dtype);
  std::vector<PairedRounds> out;
  try {
    std::vector<fs::path> files{scratch / "teacher.gguf"};
    write_model_gguf(files[0], teacher, vocab, g);
    for (size_t i = 0; i < students.size(); ++i) {
      files.push_back(scratch / fmt::format("student{}.gguf", i));
      write_model_gguf(files.back(), *students[i], vocab, g);
    }
    const std::vector<int64_t> prompt = timing_prompt(w.prompt_tokens, teacher.config.vocab_size);
    const LlamaCppRunOptions ro = run_options(w, 1);
    GroupRoundFn round = [&](int rotation) {
      std::vector<fs::path> order;
      for (size_t k = 0; k < files.size(); ++k) order.push_back(files[(size_t(rotation) + k) % files.size()]);
      LlamaCppRun r = measure_llamacpp_files(order, prompt, w.output_tokens, ro, scratch);
      std::vector<Measurement> m(files.size());
      for (size_t k = 0; k < files.size(); ++k)
        m[(size_t(rotation) + k) % files.size()] = r.models[k].measured;
      return m;
    };
    out = measure_paired_group(round, int(students.size()), limits_as_written, opt,
                               std::move(priors));
  } catch (...) {
    fs::remove_all(scratch);
    throw;
  }
  fs::remove_all(scratch);
  return out;
}

PairedRounds measure_paired_llamacpp(const LlamaModel& teacher, const LlamaModel& student,
                                     const GgufVocab& vocab, const Workload& w,
                                     const Limits& limits_as_written, const PairedOptions& opt,
                                     const fs::path& scratch, PairedRounds prior) {
  std::vector<PairedRounds> priors;
  priors.push_back(std::move(prior));
  return std::move(measure_paired_group_llamacpp(teacher, {&student}, vocab, w, limits_as_written,
                                                 opt, scratch, std::move(priors))
                       .front());
}

}  // namespace ac
