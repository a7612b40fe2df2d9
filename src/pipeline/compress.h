// `compress`: every stage of the pipeline (docs/design.md, "The pipeline") in order, each writing
// its files into the run's work folder and recording itself there (pipeline/run_folder.h), so
// that `compress --resume OUT` continues an interrupted run from its last complete stage. The
// output folder appears only when the whole run succeeded:
//
//   profile.json            measured latency tables of this device          (profile)
//   data/*.tokens           calibration / training / held-out tokens: teacher samples, or the
//                           user's text (--data-text)                         (data)
//   importance.safetensors  Minitron activation importance                    (importance)
//   arch.json               chosen architecture, predicted costs, candidates  (search)
//   arch_widths.svg         per-layer widths kept vs the parent (arch_trajectory.svg: search steps)
//   distill_log.csv         one row per distillation step                     (finish)
//   model/                  the compressed HF checkpoint                      (finish)
//   tasks/*.jsonl           in-domain cloze, story-ending, character tasks    (finish)
//   gguf/model.gguf         the scenario's GGUF when llama.cpp serves it here (export)
//   report.json, report.md  teacher vs compressed: predicted and measured cost, quality, time
//   report.html             the same with plots (pipeline/report_html.h)      (report)
//   stages.json             each stage's record: seconds, files, result (pipeline/run_folder.h)
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "hardware/paired_measure.h"
#include "pipeline/run_report.h"

namespace ac {

/// What the run reads and where it writes.
struct CompressInputs {
  fs::path model_dir;      // teacher checkpoint (HF layout, a tokenizer inside)
  std::string scenario;    // a scenario name (scenarios/NAME.json) or a path
  fs::path out_dir;
  fs::path profile_path;   // reuse a profile.json instead of profiling (must be this device)
  fs::path data_dir;       // reuse calibration/train/heldout.tokens of an earlier run's data/
                           // folder instead of sampling them (empty = sample)
  fs::path data_text;      // the user's text instead of teacher samples (data/data_source.h:
                           // a UTF-8 file, JSONL or a folder), tokenized with the teacher's
                           // tokenizer: train = the train split (calibration = its first
                           // calibration_sequences windows), held-out = the held-out split
  std::string text_field = "text";  // JSONL field of data_text
  bool allow_nonfinite = false;     // run on a teacher with NaN/Inf weights (model/finite.h)
};

/// The calibration, training and held-out sets.
struct CompressDataOptions {
  uint64_t seed = 1234;                  // the sampled data, the distillation's data order, the
                                         // search's Gumbel noise and the task files
  int64_t seq_len = 256;                 // T of calibration, training and held-out windows
  int64_t calibration_sequences = 32;    // importance + ranking of candidates
  int64_t train_sequences = 256;         // teacher-sampled training stories
  int64_t heldout_sequences = 64;        // held-out stories (other seeds, overlap removed)
  int64_t task_items = 200;              // items per in-domain task after distillation (0 = none)
};

/// The lightweight retraining of a method's best candidates (search/minitron.h
/// retrain_top_candidates): each of the best top_k by KL after pruning is distilled for
/// `tokens` tokens of the training data (the run's lr and batch), and the best after that is
/// kept; those tokens count as search tokens. top_k 0 = off; tokens 0 = distill tokens / 8 (at
/// least one batch).
struct RetrainChoice {
  int64_t top_k = 0;
  int64_t tokens = 0;
  /// true: each retraining is the first `tokens` of the final distillation's own schedule
  /// (RetrainOptions::schedule_tokens); false: a short run with its own warm-up and decay.
  bool final_schedule = false;
};

/// The search.
struct CompressSearchOptions {
  std::string method = "autocompress";  // "autocompress", "minitron" or "both" (both:
                                        // autocompress is the main result in model/;
                                        // minitron's architecture is pruned, distilled with the
                                        // same budget and evaluated on the same data in
                                        // model-minitron/, arch.minitron.json,
                                        // distill_log.minitron.csv; the report's "comparison"
                                        // has one row per method)
  double safety_margin = 0.05;          // the search meets limits x (1 - margin) by the model
  RetrainChoice minitron_retrain{3, 0};
  // With half of distill tokens / 8 (2 steps of the default batch) the KL of every proposal
  // rose above its KL after pruning (the first Adam steps disturb a pruned model before they
  // repair it), so the ranking after it said nothing (docs/benchmarks.md, the study against
  // Minitron).
  // The finalists are retrained as the start of the final run (its warm-up and decay): the
  // ranking study (docs/benchmarks.md, "The ranking of candidates") found a short run of its own
  // ranks them worse.
  RetrainChoice autocompress_retrain{2, 0, /*final_schedule=*/true};
  /// Whole layers AutoCompress's search may remove, at most; < 0 (the default): a third of the
  /// layers (SearchSpaceOptions::max_blocks_removed, after Minitron's depth pruning).
  int64_t max_removed_layers = -1;
  /// The differentiable search once per cap of attention-free layers (SearchSettings::
  /// autocompress_attention_caps); empty = default_attention_caps of the teacher.
  std::vector<int64_t> attention_caps;
  /// The widest space's differentiable search this many times with other Gumbel seeds, every
  /// restart's pick a finalist (SearchSettings::autocompress_restarts); runs recorded before the
  /// restarts resume with 1.
  int64_t autocompress_restarts = 3;
  /// What judges AutoCompress's finalists (search/minitron.h FinalistJudge): "halving" (the
  /// default), each finalist's KL right after its blockwise start (--distill-bld-tokens), then
  /// the better half (at least 2) retrained for autocompress_retrain.tokens of the final
  /// schedule and judged again; "blockwise", the KL after the blockwise start alone;
  /// "retraining", every finalist retrained. Without a blockwise start the retraining judges.
  /// Runs recorded before the choice resume with "retraining".
  std::string autocompress_judge = "halving";
};

/// The distillation of every method's result.
struct CompressDistillOptions {
  int64_t tokens = 131072;      // token budget
  int64_t batch = 8;
  double lr = 1e-3;             // peak; cosine down to lr / 10
  double hidden_loss_weight = 0;  // hidden-state loss weight (distill/hidden_loss.h; 0 = off)
  /// > 0: the final distillation of every method starts with a blockwise local distillation
  /// (distill/bld.h) of this many tokens, and so does each AutoCompress finalist's retraining
  /// (the final run's first steps, which the kept finalist's final run continues); 0 = off;
  /// -1 (the default): a sixteenth of the distillation budget (8 192 tokens at the default
  /// 131 072), so that a small --distill-tokens shrinks it too. The final model's blockwise
  /// start is distillation, not search: only the finalists that are not kept count it as search
  /// tokens (all of them when --distill-hidden-loss-weight > 0 makes the final run start over).
  /// Llama-family teachers only (the hybrid pipeline has no blockwise start). Values in (0, one
  /// step) and below -1 are refused before any stage. Read it through
  /// distill_bld_tokens(const CompressOptions&).
  int64_t bld_tokens = -1;
};

/// The measurements on the scenario's engine.
struct CompressMeasureOptions {
  PairedOptions rounds;   // paired rounds of teacher and students (hardware/paired_measure.h):
                          // the fit loop's and the final check's
  int fit_attempts = 3;   // fit to the measurement (pipeline/measured_fit.h): the searched
                          // architecture is measured before distillation and searched again
                          // under tightened limits while a measured limit breaks, at most this
                          // many searches (1 = measure once, never re-search; 0 = skip)
  double fit_margin = 0.02;  // tightened limits: measured overshoot + this margin
};

/// Options of a compress run; defaults are the README's main job on stories15M (cpu-local; its
/// time: docs/benchmarks.md).
/// Where the compression computes (not the deployment's device: that is the scenario's).
struct CompressComputeOptions {
  std::string device = "cpu";      // --device: cpu, cuda or cuda:N (common/accelerator.h)
  std::string precision = "auto";  // --precision: auto (bf16 on CUDA, fp32 on the CPU), fp32, bf16
};

struct CompressOptions {
  CompressInputs in;
  CompressComputeOptions compute;
  CompressDataOptions data;
  CompressSearchOptions search;
  CompressDistillOptions distill;
  CompressMeasureOptions measure;

  /// Every option (paths as given), recorded in the run's work folder for --resume.
  nlohmann::json to_json() const;
  /// The inverse of to_json. Throws FormatError naming `where` and the field when one is
  /// missing or of the wrong type.
  static CompressOptions from_json(const nlohmann::json& j, const std::string& where);
};

/// The blockwise start's token budget of `o`: o.distill.bld_tokens when >= 0, else
/// o.distill.tokens / 16 but at least one step of it (BldOptions::batch_size x o.data.seq_len),
/// and 0 when o.distill.tokens is 0.
int64_t distill_bld_tokens(const CompressOptions& o);

/// One step of the blockwise start in tokens (BldOptions::batch_size x o.data.seq_len): the
/// least a non-zero budget may hold.
int64_t bld_step_tokens(const CompressOptions& o);

/// Runs the pipeline. Returns the report. Throws on bad input (nothing is left behind),
/// InfeasibleError when no architecture meets the limits. A run that fails or is killed after
/// a stage completed leaves its work folder for resume_compress.
RunReport run_compress(const CompressOptions& opt);

/// Continues the interrupted run that was writing to `out_dir` with its recorded options,
/// skipping every stage whose files are complete (pipeline/run_folder.h). Throws ConfigError
/// when there is nothing to resume, and what run_compress throws.
RunReport resume_compress(const fs::path& out_dir);

}  // namespace ac
