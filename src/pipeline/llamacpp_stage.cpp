#include "pipeline/llamacpp_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "common/runtime.h"
#include "export/gguf_model.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"
#include "hardware/engine.h"
#include "hardware/measure.h"
#include "io/text_tokenizer.h"

namespace ac {

namespace {

using json = nlohmann::json;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Where run.mjs and its node_modules live, or why llama.cpp cannot run here.
std::string find_client(fs::path* run_mjs) {
  fs::path root;
  try {
    root = data_dir();
  } catch (const Error& e) {
    return e.what();
  }
  fs::path dir = root / "tests/llamacpp";
  if (!fs::exists(dir / "run.mjs")) return "no " + (dir / "run.mjs").string();
  if (!fs::exists(dir / "node_modules/node-llama-cpp"))
    return (dir / "node_modules").string() + " has no node-llama-cpp (scripts/setup_node.sh)";
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node is not installed";
  *run_mjs = dir / "run.mjs";
  return "";
}

/// One llama.cpp run; returns run.mjs's JSON or throws Error with its stderr.
json run_client(const fs::path& run_mjs, const fs::path& gguf, const std::vector<int64_t>& prompt,
                int64_t n, const fs::path& out) {
  std::string cmd = fmt::format("node {} {} '' {} {} 0 {} > {} 2> {}",
                                shell_quote(run_mjs.string()), shell_quote(gguf.string()),
                                fmt::join(prompt, ","), n, int64_t(prompt.size()) + n + 16,
                                shell_quote(out.string()), shell_quote(out.string() + ".err"));
  if (std::system(cmd.c_str()) != 0)
    throw Error(msg("llama_cpp", "llama.cpp run failed ({}): {}", cmd,
                    read_file(out.string() + ".err")));
  return json::parse(read_file(out));
}

}  // namespace

json run_llamacpp_stage(const LlamaModel& teacher, const LlamaModel& compressed,
                        const Scenario& scenario, const Profile* profile,
                        const LlamaCppStageOptions& opt) {
  json r = {{"engine", "llama.cpp"}, {"ran", false}};
  fs::path run_mjs;
  std::string why = find_client(&run_mjs);
  if (!why.empty()) {
    r["reason"] = why;
    log_warn("[compress] llama.cpp TPOT not measured: " + why);
    return r;
  }
  const int64_t P = opt.prompt_tokens > 0 ? opt.prompt_tokens : scenario.workload.prompt_tokens;
  const int64_t N = opt.output_tokens > 0 ? opt.output_tokens : scenario.workload.output_tokens;
  // The prompt: the opening of a story in the checkpoint's own tokenizer, repeated to P tokens,
  // after BOS when the tokenizer starts a text with one.
  const auto tok = load_tokenizer(opt.tokenizer_dir, teacher.config.vocab_size);
  const std::vector<int64_t> words = tok->encode("Once upon a time, there was a little girl named "
                                                 "Lily. She loved to play outside in the park.",
                                                 /*add_special_tokens=*/false);
  std::vector<int64_t> prompt;
  if (tok->adds_bos() && tok->bos_id()) prompt.push_back(*tok->bos_id());
  for (size_t i = 0; int64_t(prompt.size()) < P; ++i) prompt.push_back(words[i % words.size()]);
  GgufVocab vocab;
  try {
    vocab = vocab_from_checkpoint(opt.tokenizer_dir, teacher.config.vocab_size);
  } catch (const ConfigError& e) {  // a tokenizer llama.cpp cannot reproduce: say so, go on
    r["reason"] = e.what();
    log_warn(std::string("[compress] llama.cpp TPOT not measured: ") + e.what());
    return r;
  }

  // llama.cpp runs here, on this CPU, whatever device the scenario targets: the prediction it is
  // checked against is llama.cpp on this CPU with the f32 GGUF written below.
  Scenario on_llamacpp = scenario;
  on_llamacpp.engine = "llama.cpp";
  on_llamacpp.engine_spec = load_engine("llama.cpp");
  // The client decodes one sequence of P prompt and N generated tokens: the prediction is for
  // that workload, whatever batch the scenario serves.
  on_llamacpp.workload.batch_size = 1;
  on_llamacpp.workload.prompt_tokens = P;
  on_llamacpp.workload.output_tokens = N;
  if (scenario.device != "cpu") {
    on_llamacpp.device = "cpu";
    on_llamacpp.device_spec = load_device("cpu");
    on_llamacpp.workload.weight_dtype = on_llamacpp.workload.kv_cache_dtype = "fp32";
    r["device_note"] = fmt::format("run on this CPU, not on the scenario's {}", scenario.device);
  }
  fs::create_directories(opt.work_dir);
  // Both models in interleaved runs (teacher, compressed, teacher, ...): a drift of this
  // machine's speed hits both alike, as in the native engine's measurement
  // (measure_models_interleaved). TPOT is the 10th percentile of the pooled per-token decode
  // intervals, the native engine's statistic (hardware/measure.h): ggml's threads spin-wait
  // for each other, and a neighbour's time slice turns single tokens into outliers that a
  // mean carries (docs/benchmarks.md: 15.5 ms means against 2.4-5 ms on a quiet machine).
  const std::pair<const char*, const LlamaModel*> models[] = {{"teacher", &teacher},
                                                              {"compressed", &compressed}};
  std::vector<double> intervals[2], run_means[2];
  json last;
  try {
    for (const auto& [name, model] : models)
      write_model_gguf(opt.work_dir / (std::string(name) + ".gguf"), *model, vocab);
    for (int i = 0; i < std::max(1, opt.repeats); ++i)
      for (int k = 0; k < 2; ++k) {
        const std::string name = models[k].first;
        last = run_client(run_mjs, opt.work_dir / (name + ".gguf"), prompt, N,
                          opt.work_dir / (name + ".json"));
        if (!last["tpot_ms"].is_null()) run_means[k].push_back(last["tpot_ms"].get<double>());
        for (const auto& t : last.value("token_ms", json::array())) intervals[k].push_back(t.get<double>());
        r[name]["generated_tokens"] = last["continuation"].size();
      }
  } catch (const std::exception& e) {  // the client failed: say so in the report, go on
    r["reason"] = e.what();
    log_warn(std::string("[compress] llama.cpp TPOT not measured: ") + e.what());
    fs::remove_all(opt.work_dir);
    return r;
  }
  for (int k = 0; k < 2; ++k) {
    json& m = r[models[k].first];
    const double predicted = predict(models[k].second->config, on_llamacpp, profile).tpot_ms;
    m["tpot_ms_predicted"] = predicted;
    m["tpot_ms_runs"] = run_means[k];  // each run's mean decode time per token
    if (!intervals[k].empty()) {
      const double measured = sample_quantile(intervals[k], kLatencyQuantile);
      m["tpot_ms_measured"] = measured;
      m["tpot_ms_median"] = sample_median(intervals[k]);
      m["decode_intervals"] = int64_t(intervals[k].size());
      m["prediction_error"] = (predicted - measured) / measured;
    }
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
  r["llama_cpp_release"] = last["llama_cpp"];
  r["threads"] = last["threads"];
  fs::remove_all(opt.work_dir);
  r["ran"] = true;
  r["prompt_tokens"] = int64_t(prompt.size());
  r["output_tokens"] = N;
  return r;
}

}  // namespace ac
