// llama.cpp, measured as a serving engine on this CPU (docs/design.md, "llama.cpp, measured").
//
// The real llama.cpp runs through its node client (node-llama-cpp 3.21.1, prebuilt CPU binaries;
// tools/llamacpp/measure.mjs, installed by scripts/setup_node.sh): GGUF exports of the models,
// in the scenario's weight type (f32, f16, q8_0, q4_0), at the scenario's thread count, in
// interleaved rounds. Its figures are summarized as the native engine's (hardware/measure.h: the
// 10th percentile of the TTFT samples and of the decode intervals), so that the same paired
// verdict (hardware/paired_measure.h) and the same fit to the measurement apply.
//
// The profile learns llama.cpp the way it learns the native engine's forward: real runs of
// calibration architectures (random heterogeneous prunes of the teacher, random weights), their
// features from the native tables, a fitted correction (hardware/engine_calibration.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "io/gguf_format.h"
#include "io/gguf_vocab.h"
#include "hardware/calibration.h"
#include "hardware/engine_calibration.h"
#include "hardware/llamacpp_buffers.h"
#include "hardware/measure.h"
#include "hardware/paired_measure.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "hardware/validate.h"
#include "model/llama.h"

namespace ac {

/// Why llama.cpp cannot run here ("" when it can); sets *script to the client script
/// tools/llamacpp/<name> when it can. Never throws.
std::string llamacpp_client(const std::string& name, fs::path* script);

/// The buffers llama.cpp reports allocating for a model and its context (bytes, each summed
/// over the buffer types that report it).
struct LlamaCppBuffers {
  int64_t model = 0, kv = 0, output = 0, compute = 0;
  std::vector<std::string> model_buffer_types;  // e.g. {"CPU_Mapped"}, or {"AMX", "CPU_Mapped"}
  int64_t total() const { return model + kv + output + compute; }
  /// The buffer type holding a repacked copy of the weights (any but CPU and CPU_Mapped: AMX
  /// on CPUs with AMX, CPU_REPACK), "" when none: llama.cpp's model buffer is then the mapped
  /// file plus that copy, not the GGUF's tensor bytes.
  std::string repacked_into() const;
  nlohmann::json to_json() const;
};

/// One model measured in llama.cpp.
struct LlamaCppMeasurement {
  Measurement measured;  // TTFT, TPOT as the native engine's statistic; peak_memory_bytes =
                         // buffers.total(), weight_bytes = buffers.model
  LlamaCppBuffers buffers;
};

/// How llama.cpp runs.
struct LlamaCppRunOptions {
  int threads = 1;             // n_threads
  int64_t context_tokens = 0;  // n_ctx; 0 = prompt + output rounded up to 256 (the engine's
                               // KV block, engines/llama.cpp.json)
  int64_t ubatch_tokens = 512; // n_ubatch (llama.cpp's default)
  int rounds = 3;              // interleaved rounds
};

/// What a measurement ran.
struct LlamaCppRun {
  std::string release;  // llama.cpp release of the client
  int threads = 0;
  int64_t context_tokens = 0;
  std::vector<LlamaCppMeasurement> models;  // in the order given
};

/// Runs each GGUF with `prompt` (token ids, BOS included where the model wants one) and
/// `output_tokens` greedy decode steps in opt.rounds interleaved rounds (one request per model
/// per round). Throws ConfigError when the client is missing (llamacpp_client's reason) or
/// output_tokens < 2, Error with the client's stderr when a run fails.
LlamaCppRun measure_llamacpp_files(const std::vector<fs::path>& ggufs,
                                   const std::vector<int64_t>& prompt, int64_t output_tokens,
                                   const LlamaCppRunOptions& opt, const fs::path& scratch);

// gguf_type_for (a scenario's weight dtype as a GGUF type): hardware/llamacpp_buffers.h.

/// A prompt of `tokens` ids for models of vocabulary V: BOS (id 1) then ids cycling over
/// [3, min(V, 259)) (llama2.c's byte tokens; any ids do for timing).
std::vector<int64_t> timing_prompt(int64_t tokens, int64_t vocab_size);

/// Writes each model as a GGUF of the workload's weight type (gguf_type_for) with `vocab` into
/// `scratch` and measures them (measure_llamacpp_files with the workload's prompt and output
/// lengths, threads: workload.threads or every core). The workload must have batch 1.
LlamaCppRun measure_llamacpp_models(const std::vector<const LlamaModel*>& models,
                                    const GgufVocab& vocab, const Workload& workload,
                                    const LlamaCppRunOptions& opt, const fs::path& scratch);

/// `c` with every weight row a multiple of `multiple` (weight_row_multiple), as the search
/// proposes for a block-quantized type: hidden_size and each intermediate_size rounded down to
/// a multiple (at least one multiple), each layer's query heads lowered to the nearest count
/// whose H x head_dim is a multiple (raised when none below is), its KV heads to the largest
/// divisor of that count not above them. Removed parts stay removed.
ModelConfig snap_to_rows(const ModelConfig& c, int64_t multiple);

/// Options of the calibration.
struct LlamaCppCalibrationOptions {
  int count = 24;          // random calibration prunes besides the base
  uint64_t seed = 51739;   // their seed (validate's default differs: disjoint architectures)
  int rounds = 3;          // interleaved rounds
  double ridge = kCorrectionRidge;
  fs::path scratch;        // where the GGUFs are written (removed after)
  fs::path samples_path;   // when set: each architecture's measurement, llama.cpp's buffers and
                           // its features written there (JSON), for analysis
};

/// Measures `base` and opt.count random prunes of it (calibration_architectures) in llama.cpp
/// with random weights, in the scenario's workload (weight type, threads, batch 1), and fits
/// llama.cpp's correction over `profile`'s tables (fit_correction) and its memory model.
/// Throws ConfigError when the scenario's engine is not llama.cpp, its device not this CPU
/// (profile.identity.device "cpu"), its batch not 1, or the client missing.
EngineCalibration calibrate_llamacpp(const Profile& profile, const ModelConfig& base,
                                     const GgufVocab& vocab, const Scenario& scenario,
                                     const LlamaCppCalibrationOptions& opt);

/// `validate --engine llama.cpp`: measures `archs` (random weights) in llama.cpp in
/// interleaved rounds and predicts each with `profile`'s llama.cpp calibration for the
/// scenario; memory is compared with llama.cpp's reported buffers. With `recalibrate`, the
/// calibration prunes it describes (of `base`) are measured in the same rounds
/// and llama.cpp's calibration is fitted on them alone (returned in *refit when given): a drift
/// of the machine's speed between `calibrate` and now is then not counted as model error.
/// Throws ConfigError when `archs` is empty, when the profile has no llama.cpp calibration for
/// the scenario's threads and dtypes (without recalibrate), when an architecture is also a
/// calibration prune, and as measure_llamacpp_files.
ValidationReport validate_llamacpp(const std::vector<ModelConfig>& archs, const ModelConfig& base,
                                   const Scenario& scenario,
                                   const Profile& profile, const GgufVocab& vocab, int rounds,
                                   const fs::path& scratch,
                                   const std::optional<LlamaCppCalibrationOptions>& recalibrate = {},
                                   EngineCalibration* refit = nullptr);

/// Teacher and student in paired rounds in llama.cpp (hardware/paired_measure.h measure_paired
/// with a round that runs both GGUFs in one client call, the order alternating). The GGUFs are
/// written once into `scratch` (removed after).
/// measure_paired_group with llama.cpp as the engine: the teacher and every student written as
/// GGUFs of the workload's weight type in `scratch` (removed afterwards), each round one
/// measure.mjs call over all of them in rotated order. Throws as measure_llamacpp_files and
/// measure_paired_group.
std::vector<PairedRounds> measure_paired_group_llamacpp(
    const LlamaModel& teacher, const std::vector<const LlamaModel*>& students,
    const GgufVocab& vocab, const Workload& workload, const Limits& limits_as_written,
    const PairedOptions& opt, const fs::path& scratch, std::vector<PairedRounds> priors = {});

PairedRounds measure_paired_llamacpp(const LlamaModel& teacher, const LlamaModel& student,
                                     const GgufVocab& vocab, const Workload& workload,
                                     const Limits& limits_as_written, const PairedOptions& opt,
                                     const fs::path& scratch, PairedRounds prior = {});

}  // namespace ac
