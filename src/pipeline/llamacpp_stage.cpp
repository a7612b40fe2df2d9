#include "pipeline/llamacpp_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "common/error.h"
#include "common/runtime.h"
#include "export/gguf_model.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"
#include "hardware/engine.h"
#include "hardware/measure.h"
#include "io/text_tokenizer.h"
#include "pipeline/llamacpp_engine.h"

namespace ac {

using json = nlohmann::json;

json run_llamacpp_stage(const LlamaModel& teacher, const LlamaModel& compressed,
                        const Scenario& scenario, const Profile* profile,
                        const LlamaCppStageOptions& opt) {
  json r = {{"engine", "llama.cpp"}, {"ran", false}};
  fs::path script;
  std::string why = llamacpp_client("measure.mjs", &script);
  if (!why.empty()) {
    r["reason"] = why;
    log_warn("[compress] llama.cpp TPOT not measured: " + why);
    return r;
  }
  const int64_t P = opt.prompt_tokens > 0 ? opt.prompt_tokens : scenario.workload.prompt_tokens;
  const int64_t N = opt.output_tokens > 0 ? opt.output_tokens : scenario.workload.output_tokens;
  GgufVocab vocab;
  try {
    vocab = vocab_from_checkpoint(opt.tokenizer_dir, teacher.config.vocab_size);
  } catch (const ConfigError& e) {  // a tokenizer llama.cpp cannot reproduce: say so, go on
    r["reason"] = e.what();
    log_warn(std::string("[compress] llama.cpp TPOT not measured: ") + e.what());
    return r;
  }

  // llama.cpp runs here, on this CPU. A scenario served by llama.cpp on this CPU is run as it is
  // (its weight type, threads); any other runs as the f32 GGUF, one sequence, every core, and
  // is predicted for that.
  Scenario on_llamacpp = scenario;
  const bool own = scenario.engine == "llama.cpp" && scenario.device == "cpu";
  if (!own) {
    on_llamacpp.engine = "llama.cpp";
    on_llamacpp.engine_spec = load_engine("llama.cpp");
    on_llamacpp.workload.weight_dtype = "fp32";
    on_llamacpp.workload.kv_cache_dtype = "fp16";
    on_llamacpp.workload.threads = 0;
    if (scenario.device != "cpu") {
      on_llamacpp.device = "cpu";
      on_llamacpp.device_spec = load_device("cpu");
      r["device_note"] = fmt::format("run on this CPU, not on the scenario's {}", scenario.device);
    }
  }
  // The client decodes one sequence of P prompt and N generated tokens: the prediction is for
  // that workload, whatever batch the scenario serves.
  on_llamacpp.workload.batch_size = 1;
  on_llamacpp.workload.prompt_tokens = P;
  on_llamacpp.workload.output_tokens = N;
  // Both models in interleaved runs (teacher, compressed, teacher, ...): a drift of this
  // machine's speed hits both alike. TPOT is the 10th percentile of the pooled per-token decode
  // intervals, the native engine's statistic (hardware/measure.h): ggml's threads spin-wait
  // for each other, and a neighbour's time slice turns single tokens into outliers that a
  // mean carries (docs/benchmarks.md: 15.5 ms means against 2.4-5 ms on a quiet machine).
  const std::pair<const char*, const LlamaModel*> models[] = {{"teacher", &teacher},
                                                              {"compressed", &compressed}};
  LlamaCppRun run;
  try {
    LlamaCppRunOptions ro;
    ro.threads = on_llamacpp.workload.threads > 0 ? int(on_llamacpp.workload.threads) : cpu_cores();
    ro.rounds = std::max(1, opt.repeats);
    run = measure_llamacpp_models({&teacher, &compressed}, vocab, on_llamacpp.workload, ro,
                                  opt.work_dir);
  } catch (const std::exception& e) {  // the client failed: say so in the report, go on
    r["reason"] = e.what();
    log_warn(std::string("[compress] llama.cpp TPOT not measured: ") + e.what());
    fs::remove_all(opt.work_dir);
    return r;
  }
  fs::remove_all(opt.work_dir);
  const bool calibrated = profile && profile->engine_calibration(on_llamacpp);
  r["prediction"] = calibrated ? "the profile's llama.cpp calibration (its own correction and "
                                 "memory model, measured on this CPU)"
                               : "the native engine's tables, not calibrated for llama.cpp";
  r["prediction_calibrated"] = calibrated;  // false: the report shows the measurement alone
  r["weight_dtype"] = on_llamacpp.workload.weight_dtype;
  for (int k = 0; k < 2; ++k) {
    json& m = r[models[k].first];
    const Measurement& meas = run.models[size_t(k)].measured;
    const CostEstimate pred = predict(models[k].second->config, on_llamacpp, profile);
    m["tpot_ms_predicted"] = pred.tpot_ms;
    m["tpot_ms_measured"] = meas.tpot_ms;
    m["tpot_ms_median"] = meas.tpot_median_ms;
    m["prediction_error"] = (pred.tpot_ms - meas.tpot_ms) / meas.tpot_ms;
    m["ttft_ms_predicted"] = pred.ttft_ms;
    m["ttft_ms_measured"] = meas.ttft_ms;
    m["peak_memory_bytes_predicted"] = pred.peak_memory_bytes;
    m["buffers"] = run.models[size_t(k)].buffers.to_json();
    m["decode_intervals"] = int64_t(meas.samples.step_ms.size() * size_t(N - 1));
    json runs = json::array();  // each run's mean decode time per token
    for (const auto& steps : meas.samples.step_ms)
      runs.push_back(std::accumulate(steps.begin(), steps.end(), 0.0) / double(steps.size()));
    m["tpot_ms_runs"] = runs;
    m["generated_tokens"] = N;
  }
  // The compressed model's prediction scaled by the teacher's measured / predicted ratio: the
  // profile's ops are the native engine's, and llama.cpp's kernels run at their own speed on
  // this CPU (measured 2.3x slower per token than predicted, docs/benchmarks.md); one factor
  // taken from the teacher, measured in the same interleaved runs, carries that speed over.
  json& tm = r["teacher"];
  json& cm = r["compressed"];
  if (tm.contains("tpot_ms_measured") && cm.contains("tpot_ms_measured")) {
    const double factor = tm["tpot_ms_measured"].get<double>() / tm["tpot_ms_predicted"].get<double>();
    const double calibrated = cm["tpot_ms_predicted"].get<double>() * factor;
    const double measured = cm["tpot_ms_measured"].get<double>();
    r["teacher_calibration_factor"] = factor;
    cm["tpot_ms_predicted_teacher_calibrated"] = calibrated;
    cm["teacher_calibrated_error"] = (calibrated - measured) / measured;
  }
  r["llama_cpp_release"] = run.release;
  r["threads"] = run.threads;
  r["ran"] = true;
  r["prompt_tokens"] = P;
  r["output_tokens"] = N;
  return r;
}

}  // namespace ac
