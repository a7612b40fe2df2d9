// A deployment scenario: device + engine + workload + hard limits (docs/design.md, "Scenarios:
// device, engine, workload, limits").
//
// scenarios/<name>.json:
//   { "name": "cpu-local", "device": "cpu", "engine": "native",
//     "workload": {"prompt_tokens": 128, "output_tokens": 128, "batch_size": 1,
//                  "weight_dtype": "fp32", "kv_cache_dtype": "fp32", "tensor_parallel": 1},
//     "limits": {"tpot_ms": {"fraction_of_teacher": 0.6}, "ttft_ms": 40,
//                "peak_memory_bytes": 100000000, "min_throughput_tokens_per_s": 200},
//     "notes": "why these values",
//     "sources": {"workload.prompt_tokens": "why 128", "limits.ttft_ms": "why 40 ms", ...} }
// "sources" (optional) explains single values: each key names a field of the file ("device",
// "engine", "workload.<field>", "limits.<field>"), each value says where the number comes from.
// A limit is a number (absolute, in the field's unit) or {"fraction_of_teacher": x}: x times
// the teacher's cost on the same scenario (a maximum for ttft/tpot/memory, a minimum for
// throughput). Relative limits are turned into absolute ones by pipeline/limits.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "hardware/device.h"
#include "hardware/engine.h"

namespace ac {

struct CostEstimate;

/// Ceilings of a workload (docs/formats.md "Limits"): prompt and output tokens <= 2^24 each,
/// batch <= 2^20, tensor parallel <= 4096, so that derived token and byte counts fit int64.
inline constexpr int64_t kMaxWorkloadTokens = int64_t(1) << 24;
inline constexpr int64_t kMaxWorkloadBatch = int64_t(1) << 20;
inline constexpr int64_t kMaxTensorParallel = 4096;

/// What the deployment runs: B sequences of prompt_tokens each, then output_tokens decode steps.
struct Workload {
  int64_t prompt_tokens = 128;  // T of the prefill
  int64_t output_tokens = 128;  // decode steps (the KV cache holds prompt + output)
  int64_t batch_size = 1;       // B: concurrent sequences
  std::string weight_dtype = "fp32";    // fp32, bf16, fp16, fp8, int8, int4; q8_0, q4_0
                                        // (ggml's 32-value blocks: 34 and 18 bytes)
  std::string kv_cache_dtype = "fp32";  // same choices
  int64_t tensor_parallel = 1;  // GPUs a model is split over (weights and heads divided)
  int64_t threads = 0;          // CPU threads the engine runs with (llama.cpp's n_threads);
                                // 0 = every core. Part of the deployment: at small sizes more
                                // threads can be slower (their synchronization per op)

  int64_t context_tokens() const { return prompt_tokens + output_tokens; }
};

/// Hard limits. Absolute ones in ms, bytes, tokens/s; relative ones as a fraction of the
/// teacher's cost. A limit that is not set does not constrain.
struct Limits {
  std::optional<double> ttft_ms, tpot_ms, min_throughput_tokens_per_s;
  std::optional<int64_t> peak_memory_bytes;
  std::optional<double> ttft_fraction, tpot_fraction, throughput_fraction, memory_fraction;

  bool has_relative() const {
    return ttft_fraction || tpot_fraction || throughput_fraction || memory_fraction;
  }
  /// The limits as scenario JSON (numbers, or {"fraction_of_teacher": x}).
  nlohmann::json to_json() const;
};

struct Scenario {
  std::string name;
  std::string device;  // devices/<device>.json
  std::string engine;  // engines/<engine>.json
  Workload workload;
  Limits limits;
  std::string notes;
  std::map<std::string, std::string> sources;  // "workload.prompt_tokens" -> why that value
  DeviceSpec device_spec;  // loaded from `device`
  EngineSpec engine_spec;  // loaded from `engine`
};

/// The multiple every weight row (a matrix's input width: hidden_size, intermediate_size,
/// num_attention_heads x head_dim) must be for `weight_dtype` to hold its type: 32 for ggml's
/// block types q8_0 and q4_0 (32 values per block; llama-quantize writes a tensor whose rows are
/// not a multiple as F16 instead, larger and slower: llama-quant.cpp tensor_type_fallback),
/// 1 otherwise.
int64_t weight_row_multiple(const std::string& weight_dtype);

/// Reads a scenario file and the device and engine it names. Throws FormatError naming the
/// file and field ("workload.batch_size: expected a positive integer, found 0"), unknown fields
/// included; ConfigError on an unknown device, engine or dtype (listing the known ones).
/// `data_root` (devices/, engines/) defaults to data_dir().
Scenario load_scenario(const fs::path& path, const fs::path& data_root = {});

/// A scenario by name (scenarios/<name>.json under data_dir()) or by path.
Scenario find_scenario(const std::string& name_or_path, const fs::path& data_root = {});

/// Parses scenario JSON (device/engine resolved under `data_root`); `file` names errors.
Scenario scenario_from_json(const nlohmann::json& j, const std::string& file,
                            const fs::path& data_root = {});

/// Parses one "limits" object; `file` names errors.
Limits limits_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace ac
