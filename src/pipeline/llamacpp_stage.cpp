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
#include "io/tokenizer.h"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  // The prompt: the tokenized opening of a story, repeated to P tokens after BOS.
  const Tokenizer tok = Tokenizer::from_checkpoint(opt.tokenizer_dir, teacher.config.vocab_size);
  std::vector<int64_t> words = tok.encode("Once upon a time, there was a little girl named Lily. "
                                          "She loved to play outside in the park.", false);
  std::vector<int64_t> prompt{tok.bos_id()};
  for (size_t i = 0; int64_t(prompt.size()) < P; ++i) prompt.push_back(words[i % words.size()]);
  const GgufVocab vocab = vocab_from_tokenizer(tok);

  // llama.cpp runs here, on this CPU, whatever device the scenario targets: the prediction it is
  // checked against is llama.cpp on this CPU with the f32 GGUF written below.
  Scenario on_llamacpp = scenario;
  on_llamacpp.engine = "llama.cpp";
  on_llamacpp.engine_spec = load_engine("llama.cpp");
  if (scenario.device != "cpu") {
    on_llamacpp.device = "cpu";
    on_llamacpp.device_spec = load_device("cpu");
    on_llamacpp.workload.weight_dtype = on_llamacpp.workload.kv_cache_dtype = "fp32";
    r["device_note"] = fmt::format("run on this CPU, not on the scenario's {}", scenario.device);
  }
  fs::create_directories(opt.work_dir);
  for (auto [name, model] : {std::pair<const char*, const LlamaModel*>{"teacher", &teacher},
                             {"compressed", &compressed}}) {
    const fs::path gguf = opt.work_dir / (std::string(name) + ".gguf");
    write_model_gguf(gguf, *model, vocab);
    std::vector<double> tpots;
    json last;
    try {
      for (int i = 0; i < std::max(1, opt.repeats); ++i) {
        last = run_client(run_mjs, gguf, prompt, N, opt.work_dir / (std::string(name) + ".json"));
        if (!last["tpot_ms"].is_null()) tpots.push_back(last["tpot_ms"].get<double>());
      }
    } catch (const std::exception& e) {  // the client failed: say so in the report, go on
      r["reason"] = e.what();
      log_warn(std::string("[compress] llama.cpp TPOT not measured: ") + e.what());
      fs::remove_all(opt.work_dir);
      return r;
    }
    fs::remove(gguf);
    const double predicted = predict(model->config, on_llamacpp, profile).tpot_ms;
    json m = {{"tpot_ms_predicted", predicted},
              {"generated_tokens", last["continuation"].size()},
              {"tpot_ms_runs", tpots}};
    if (!tpots.empty()) {
      const double measured = median(tpots);
      m["tpot_ms_measured"] = measured;
      m["prediction_error"] = (predicted - measured) / measured;
    }
    r[name] = m;
    r["llama_cpp_release"] = last["llama_cpp"];
    r["threads"] = last["threads"];
  }
  fs::remove_all(opt.work_dir);
  r["ran"] = true;
  r["prompt_tokens"] = int64_t(prompt.size());
  r["output_tokens"] = N;
  return r;
}

}  // namespace ac
