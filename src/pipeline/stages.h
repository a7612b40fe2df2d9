// The stages of `compress` (pipeline/compress.h), each a function of the run's shared state
// (`Run`). Every stage writes its files into the run's work folder and records itself there
// (pipeline/run_folder.h); when the record of an earlier attempt is intact, the stage reads its
// files back instead of running.
//
//   stage          files                                   result recorded
//   profile        profile.json                            -
//   data           data/{calibration,train,heldout}.tokens where the sets came from
//   importance     importance.safetensors                  -
//   search         arch.json, arch.<method>.json, *.svg    per method: SearchedMethod
//   finish:METHOD  model[-METHOD]/, distill_log[.METHOD].csv, tasks[-METHOD]/
//                                                          evals, distillation, tasks
//   eval_teacher   -                                       the teacher's held-out evaluation
//   export         gguf/ (llama.cpp here: model.gguf,      the GGUF and the engine's check
//                  export_report.json)
//   measure        -                                       every model beside the teacher, in
//                                                          one set of interleaved rounds
//   llama_cpp      -                                       the real llama.cpp beside its prediction
//
// The teacher's measurement (relative limits resolve against it) is taken again on every
// attempt: seconds, and a measurement of another minute would not be comparable anyway.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "io/gguf_vocab.h"
#include "hardware/paired_measure.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "model/llama.h"
#include "pipeline/compress.h"
#include "pipeline/limits.h"
#include "pipeline/measured_fit.h"
#include "pipeline/run_folder.h"
#include "pipeline/story_tasks.h"

namespace ac {

/// The calibration, training and held-out sets of a run.
struct Corpus {
  TokenDataset calibration, train, heldout;
  nlohmann::json source;  // report.json "data": where the sets came from
  int64_t overlap_removed = 0;  // held-out documents removed because training has them
};

/// The three token files (calibration, train, heldout .tokens) of `dir`, checked against the
/// teacher's vocabulary and, where both are recorded, the tokenizer in `teacher_dir` (data/
/// token_file.h). Throws ConfigError naming the file on a missing file or another tokenizer or
/// vocabulary.
Corpus read_token_files(const ModelConfig& teacher, const fs::path& teacher_dir,
                        const fs::path& dir);

/// The user's text (--data-text, data/data_source.h) tokenized with the teacher's tokenizer:
/// train = the train split (calibration = its first calibration_sequences windows), held-out =
/// the held-out split. Throws ConfigError when a split is shorter than one --seq-len window.
Corpus text_data(const ModelConfig& teacher, const CompressOptions& opt);

/// What the search stage chose for one method, everything later stages and the report need.
struct SearchedMethod {
  std::string method;        // "autocompress" or "minitron"
  fs::path arch_file;        // relative to the run folder: arch.json or arch.<method>.json
  ModelConfig target;        // the parent's layer count, removed parts marked (prune/arch.h)
  int64_t search_tokens = 0; // of the kept search
  double search_seconds = 0;
  int64_t candidates = 0;
  nlohmann::json summary;    // SearchOutcome::summary()
  Limits search_limits;      // what the kept search held its predictions to (before the margin)
  nlohmann::json fit_attempts = nlohmann::json::array();  // FitAttempt::to_json each
  std::optional<PairedRounds> fitted_rounds;  // the kept attempt's rounds (this attempt only)

  nlohmann::json to_json() const;
  /// Throws FormatError naming `where` and the field.
  static SearchedMethod from_json(const nlohmann::json& j, const std::string& where);
};

/// A method's model after finish_method.
struct FinishedMethod {
  std::string method;
  std::string model_path;     // relative to the run folder: "model" or "model-<method>"
  LlamaModel student;         // distilled, removed blocks dropped
  nlohmann::json eval_after_prune, eval;  // EvalResult::to_json on the held-out set
  nlohmann::json distill;     // {"tokens", "steps", "skipped_steps", "wall_s", "first_loss",
                              //  "last_loss"}
  nlohmann::json tasks;       // run_story_tasks_stage's JSON
  double reload_max_abs_diff = 0;  // the saved checkpoint reloaded against the student
};

/// A method's model measured beside the teacher (the measure stage).
struct MeasuredMethod {
  nlohmann::json measured;  // Measurement::to_json, pooled over the rounds
  nlohmann::json verdict;   // PairedVerdict::to_json
  std::string failures;     // PairedVerdict::failures(): "" = every limit holds
};

/// The state every stage shares. Built by open_run; stages fill the optional parts in order.
struct Run {
  CompressOptions opt;
  RunFolder folder;
  double t_start = 0;
  c10::Device device = c10::kCPU;         // where the stages compute (opt.compute.device)
  Precision precision = Precision::fp32;  // the distillation's and the search's
  LlamaModel teacher;                     // on the CPU (the stages copy it to `device`)
  Scenario scenario;
  bool llamacpp_engine = false;          // llama.cpp serves the scenario on this CPU
  std::optional<GgufVocab> gguf_vocab;   // the GGUFs' tokenizer (llamacpp_engine)
  Profile profile;
  const Profile* scenario_profile = nullptr;  // the profile when it costs the scenario's device
  std::string not_measured;              // why nothing is measured here; "" = measured
  std::optional<Measurement> teacher_measured;
  CostEstimate teacher_predicted;
  RunLimits limits;
  std::optional<TokenBytes> token_bytes;  // each token id's bytes (bits per byte); none
                                          // without a tokenizer

  /// The held-out evaluation's options (bits per byte when token_bytes is set); they point
  /// into this Run.
  EvalOptions eval_options() const;

  /// The teacher and students measured in one set of interleaved rounds in the scenario's
  /// engine (native or llama.cpp); `priors`: earlier rounds of each student (or none).
  std::vector<PairedRounds> measure_group(const std::vector<const LlamaModel*>& students,
                                          std::vector<PairedRounds> priors = {}) const;
};

/// Checks every input before any work (the teacher loads and is finite, its tokenizer reads,
/// the data options are consistent), then creates or reopens the work folder. Throws
/// ConfigError / FormatError naming the input; nothing is left behind.
Run open_run(const CompressOptions& opt, std::optional<RunFolder> resumed);

/// This device's latency tables (and llama.cpp's calibration when llama.cpp serves the
/// scenario here); sets run.profile and run.scenario_profile.
void stage_profile(Run& run);

/// The calibration, training and held-out sets: the user's text, an earlier run's token files,
/// or teacher samples.
Corpus stage_data(Run& run);

/// The teacher on the scenario's engine (when it can be measured here) and its prediction;
/// sets run.teacher_measured, run.teacher_predicted, run.limits.
void measure_teacher(Run& run);

/// Minitron's activation importance on the calibration set.
Importance stage_importance(Run& run, const Corpus& data);

/// Every method's search.
struct Searches {
  std::vector<SearchedMethod> methods;  // the main result first
  int64_t tokens_all_attempts = 0;      // search tokens of every fit attempt of every method
  double seconds_all_attempts = 0;
};

/// Every method's search, each fitted to the measurement (pipeline/measured_fit.h); the first
/// is the main result. Writes arch.json (and arch.<method>.json).
Searches stage_search(Run& run, const Corpus& data, const Importance& imp);

/// Prune -> distill -> evaluate -> tasks -> save, the same for the main result and every
/// comparison row (same data, budget and tasks). `main`: the main result (model/, tasks/,
/// distill_log.csv, and the tasks score the teacher too).
FinishedMethod finish_method(Run& run, const Corpus& data, const Importance& imp,
                             const SearchedMethod& m, bool main);

/// The teacher's evaluation on the held-out set (EvalResult::to_json).
nlohmann::json stage_eval_teacher(Run& run, const Corpus& data);

/// The main model as the scenario's engine loads it: the GGUF (llama.cpp here) and the engine
/// loader's check of the files. Returns {"gguf", "engine_check"} (each null when not done).
nlohmann::json stage_export(Run& run, const FinishedMethod& main);

/// What the measure stage found.
struct MeasuredModels {
  nlohmann::json teacher;               // Measurement::to_json pooled over the rounds; null when
                                        // nothing is measured here
  std::vector<MeasuredMethod> methods;  // one per method; empty when nothing is measured here
};

/// Every method's model measured beside the teacher in one set of interleaved rounds; the
/// limits resolved again against the teacher pooled over them (run.limits).
MeasuredModels stage_measure(Run& run, const std::vector<SearchedMethod>& searched,
                             const std::vector<FinishedMethod>& finished);

/// The real llama.cpp on the GGUF exports of the teacher and the main model.
nlohmann::json stage_llamacpp(Run& run, const FinishedMethod& main);

}  // namespace ac
