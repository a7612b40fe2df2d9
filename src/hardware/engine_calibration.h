// A serving engine measured on this CPU: its own latency correction over the native profile's
// tables, and its memory as the engine reports it (docs/design.md, "llama.cpp, measured").
//
// Latency: the engine's TTFT and TPOT follow the same linear model as the native engine's
// correction (hardware/correction.h), with the same features (the native tables' per-class sums
// over the forward: gemm, attention, elementwise, lm_head, parts present, one per step), fitted
// on the engine's own measurements of calibration architectures. The tables say how the work of
// a forward is spread over op classes; the coefficients say what that work costs in the engine.
// At stories15M's size llama.cpp's TPOT is mostly per-token and per-part overhead (graph build,
// thread synchronization), which the constant terms carry.
//
// Memory (llama.cpp's own buffers, its log lines "model / KV / output / compute buffer size"):
//   model   = the GGUF's tensor bytes (weights in the scenario's type; computed exactly); on a
//             CPU with AMX, the repacked copy plus the mapped span (hardware/llamacpp_buffers.h)
//   KV      = n_ctx x sum over attention layers of 2 x G x Hd x KV dtype bytes, n_ctx = prompt
//             + output rounded up to 256 (computed exactly: the cost model's KV cache)
//   output  = V x 4 bytes per sequence (the logits buffer)
//   compute = u x V x 4 + u x 4 x (a D + b F + c Q + d H n_ctx) + fixed_bytes,
//             u = min(n_ubatch, n_ctx): the graph llama.cpp reserves for one micro-batch with
//             every row's logits (sched_reserve), its workspace beside the logits fitted by least
//             squares on the widest hidden state D, FFN F, query projection Q = H x head_dim and
//             attention scores (H query heads over n_ctx keys) of any layer.
// This header is torch-free so that the profile reader builds without torch.
#pragma once
#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/correction.h"
#include "model/config.h"

namespace ac {

/// llama.cpp's compute and output buffers (see the header comment); bytes.
struct EngineMemoryModel {
  static constexpr int kTerms = 5;  // a, b, c, d, fixed_bytes (header comment)
  int64_t ubatch_tokens = 512;      // n_ubatch the engine ran with
  std::array<double, kTerms> coefficients{};  // a, b, c, d (per value), fixed_bytes (bytes)
  double mape_percent = 0;  // of the total reported memory, on the calibration models

  /// The workspace features of `c` at a context of n_ctx cells: u x 4 x (D, F, Q, H n_ctx), 1.
  std::array<double, kTerms> features(const ModelConfig& c, int64_t n_ctx) const;
  /// Output + compute buffer bytes of `c` with a context of n_ctx cells and `sequences`
  /// sequences.
  double activation_bytes(const ModelConfig& c, int64_t n_ctx, int64_t sequences) const;
  /// Least-squares fit of the coefficients on models whose compute buffers llama.cpp reported
  /// (bytes, logits included). Throws ConfigError on mismatched sizes or no models.
  void fit(const std::vector<ModelConfig>& models, int64_t n_ctx,
           const std::vector<double>& compute_bytes);
};

/// One engine's calibration on this CPU, stored in the profile ("engines").
struct EngineCalibration {
  std::string engine;          // engines/<name>.json, e.g. "llama.cpp"
  std::string release;         // the engine's release (llama.cpp: the bundled release tag)
  int threads = 0;             // CPU threads the engine ran with
  std::string weight_dtype;    // the scenario's weight dtype (fp32, fp16, q8_0, q4_0)
  std::string kv_cache_dtype;  // the scenario's KV cache dtype
  int64_t prompt_tokens = 0, output_tokens = 0;  // the workload it was measured on
  LatencyCorrection correction;  // fitted on the engine's measured TTFT / TPOT
  EngineMemoryModel memory;
  // The buffer type llama.cpp repacked the weights into on this CPU ("AMX" on CPUs with AMX,
  // "CPU_REPACK"), "" when it used the GGUF's tensors as they are. Where set, llama.cpp holds
  // that copy beside the mapped file, and its model buffers are not the GGUF's bytes: the
  // memory model counts AMX's copy and the mapped span (hardware/llamacpp_buffers.h); another
  // kind is not modelled, and memory predictions for this engine miss it.
  std::string weights_repacked_into;
  double elapsed_s = 0;

  /// Whether it was measured for this engine, thread count and dtypes (threads already
  /// resolved: 0 in a scenario means every core).
  bool matches(const std::string& engine_name, int threads_, const std::string& weights,
               const std::string& kv) const {
    return engine == engine_name && threads == threads_ && weight_dtype == weights &&
           kv_cache_dtype == kv;
  }
  nlohmann::json to_json() const;
  /// Throws FormatError naming `where` and the field.
  static EngineCalibration from_json(const nlohmann::json& j, const std::string& where);
};

}  // namespace ac
