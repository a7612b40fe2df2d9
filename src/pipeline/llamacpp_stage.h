// The `llama_cpp` stage of compress: the real llama.cpp (npm node-llama-cpp through
// pipeline/llamacpp_engine.h) runs the teacher and the compressed model from their GGUF exports,
// and its measured TPOT, TTFT and buffers are reported beside what the cost model predicts for
// the `llama.cpp` engine (engines/llama.cpp.json) on this device. A scenario served by llama.cpp
// on this CPU runs as it is (weight type, threads) and is predicted with the profile's llama.cpp
// calibration; any other runs the f32 GGUF on every core.
//
// llama.cpp is an optional client here: when node or tools/llamacpp/node_modules is missing
// (scripts/setup_node.sh installs it), the stage records why it did not run and the pipeline
// goes on; it never fails the compression.
#pragma once
#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "model/llama.h"

namespace ac {

/// Options of the stage.
struct LlamaCppStageOptions {
  fs::path tokenizer_dir;    // checkpoint folder whose tokenizer (tokenizer.json or
                             // tokenizer.bin, io/gguf_vocab.h) goes into the GGUF
  fs::path work_dir;         // scratch folder for the GGUF files (removed after the stage)
  int64_t prompt_tokens = 0; // prompt length; 0 = the scenario's prompt_tokens
  int64_t output_tokens = 0; // decoded tokens timed; 0 = the scenario's output_tokens
  int repeats = 3;           // llama.cpp runs per model; the median TPOT is reported
};

/// Runs both models in llama.cpp. Returns
///   {"ran": bool, "reason": "...why not" (when !ran), "engine": "llama.cpp",
///    "llama_cpp_release": "...", "threads": N, "weight_dtype": "...", "prediction": "...",
///    "prompt_tokens": P, "output_tokens": N,
///    "teacher":    {"tpot_ms_measured": x, "tpot_ms_predicted": y, "prediction_error": (y-x)/x,
///                   "tpot_ms_median", "tpot_ms_runs", "ttft_ms_measured", "ttft_ms_predicted",
///                   "buffers": LlamaCppBuffers, "peak_memory_bytes_predicted", ...},
///    "compressed": {...}}
/// TPOT in milliseconds per output token at batch 1 (llama.cpp's own decode loop, timed by
/// measure.mjs between streamed tokens). A tokenizer llama.cpp cannot reproduce
/// (vocab_from_checkpoint's ConfigError) is a reason not to run, like a missing client or a
/// failed run.
nlohmann::json run_llamacpp_stage(const LlamaModel& teacher, const LlamaModel& compressed,
                                  const Scenario& scenario, const Profile* profile,
                                  const LlamaCppStageOptions& opt);

}  // namespace ac
