// report.json of a compress run as one type: compress fills it, to_json writes it, from_json
// reads it back (`report --run` re-renders report.md and report.html from it), and the two
// renderers (pipeline/report.h, pipeline/report_html.h) read nothing else of the report. Every
// field below is written, null where the run has nothing for it.
//
// The leaves that are other types' JSON keep that type's schema:
//   CostEstimate::to_json     predicted costs    {"ttft_ms", "tpot_ms", "throughput_tokens_per_s",
//                                                 "peak_memory_bytes", "source", ...}
//   Measurement::to_json      measured costs     (the same keys, medians beside)
//   EvalResult::to_json       held-out quality   {"perplexity", "kl_to_teacher", ...}
//   PairedVerdict::to_json    measured verdict   {"rounds", "limits": [...]}
//   FitAttempt::to_json       fit attempts
//   Limits::to_json           limits             {"tpot_ms": 8.2 | {"fraction_of_teacher": 0.6}}
//   run_story_tasks_stage     tasks, run_llamacpp_stage: llama_cpp
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ac {

/// One method's row of the comparison (the main result first).
struct ComparisonRow {
  std::string method;          // "autocompress" or "minitron"
  std::string config;          // describe() of the deployed architecture
  int64_t parameters = 0;
  int64_t search_tokens = 0;   // of the kept search
  double search_seconds = 0;
  std::string model;           // its checkpoint folder in the run folder
  nlohmann::json predicted;    // CostEstimate
  nlohmann::json measured;     // Measurement, or null (not measured here)
  std::string limits_predicted;     // check_limits of the prediction: "" = met
  nlohmann::json limits_measured;   // PairedVerdict::failures (string), or null
  nlohmann::json measured_verdict;  // PairedVerdict, or null
  nlohmann::json eval_after_prune, eval;  // EvalResult
  nlohmann::json distill;      // {"tokens", "steps", "skipped_steps", "wall_s", "first_loss",
                               //  "last_loss"}
  nlohmann::json tasks;        // the tasks stage's JSON
  nlohmann::json fit_attempts; // [FitAttempt]
};

/// report.json.
struct RunReport {
  struct Scenario {
    std::string name, device, engine;
    int64_t prompt_tokens = 0, output_tokens = 0, batch_size = 0;
    nlohmann::json limits;             // resolved against the teacher's measurement (or its
                                       // prediction when nothing is measured)
    nlohmann::json limits_for_search;  // resolved against its prediction, as the search kept them
    nlohmann::json limits_as_written;  // the scenario file's
  } scenario;
  struct Device {
    std::string cpu_model;
    int cores = 0, threads = 0;
    std::string torch;
  } device;
  /// Where the compression computed (--device, --precision), and how fast.
  struct Compute {
    std::string device = "cpu", precision = "fp32";
    std::string gpu;                              // the driver's name of the GPU; "" on the CPU
    nlohmann::json distill_tokens_per_s;          // the main method's distillation; null if none
    nlohmann::json distill_flops_per_token;       // model/stage_memory.h distill_flops_per_token
    nlohmann::json distill_mfu;                   // FLOP/s / the GPU's dense peak in `precision`
                                                  // (devices/*.json); null on the CPU or when
                                                  // the GPU is not the scenario's
    nlohmann::json peak_memory_bytes;             // GPU: the caching allocator's peak during
                                                  // the main distillation; CPU: the process's
                                                  // peak RSS
  } compute;
  std::string date;  // YYYY-MM-DD, UTC
  struct Teacher {
    std::string config;
    int64_t parameters = 0;
    nlohmann::json predicted, measured, eval;  // measured: null when not measured here
  } teacher;
  struct Compressed {
    std::string config;
    nlohmann::json hf_config;  // config.json of the compressed checkpoint
    int64_t parameters = 0;
    nlohmann::json predicted, measured;
    std::string limits_predicted;
    nlohmann::json limits_measured, measured_verdict;
    nlohmann::json eval_after_prune, eval;
  } compressed;
  struct Search {
    std::string method;
    int64_t candidates = 0, search_tokens = 0, search_tokens_all_attempts = 0;
    double search_seconds = 0, search_seconds_all_attempts = 0, safety_margin = 0;
  } search;
  std::vector<ComparisonRow> comparison;  // one row per method, the main result first
  struct Distill {
    int64_t tokens = 0, steps = 0, skipped_steps = 0;
    double wall_s = 0, first_loss = 0, last_loss = 0;
  } distill;
  struct Data {
    nlohmann::json source;  // where the sets came from (pipeline/stages.h Corpus)
    int64_t calibration_tokens = 0, train_tokens = 0, heldout_tokens = 0;
    int64_t heldout_documents_removed_for_overlap = 0;
  } data;
  struct Export {
    std::string path;  // the checkpoint folder
    double reload_max_abs_diff = 0;
    nlohmann::json gguf, engine_check;  // null when not written / not checked
  } exported;
  struct Fit {
    int max_attempts = 0;
    double margin = 0;
    nlohmann::json attempts = nlohmann::json::array();  // [FitAttempt] of the main method
  } fit;
  std::string not_measured;  // why nothing is measured here; "" = measured
  nlohmann::json tasks;      // the main result's tasks
  nlohmann::json llama_cpp;  // run_llamacpp_stage's JSON
  struct Stage {
    std::string stage;
    double seconds = 0;
    bool resumed = false;  // done by an earlier attempt of the run (compress --resume)
  };
  std::vector<Stage> stages;
  double total_seconds = 0;  // this attempt's

  nlohmann::json to_json() const;
  /// Reads report.json. Throws FormatError naming `file` and the field ("report.json:
  /// compressed.parameters: expected an integer, found \"x\"") when a field is missing or of
  /// the wrong type.
  static RunReport from_json(const nlohmann::json& j, const std::string& file);
};

}  // namespace ac
