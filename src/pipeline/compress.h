// `compress`: every stage of the pipeline (docs/design.md, "The pipeline") in order, each writing
// its file into the output folder, which appears only when the whole run succeeded (StagingDir):
//
//   profile.json            measured latency tables of this device          (profile)
//   data/*.tokens           calibration / training / held-out tokens: teacher samples, or the
//                           user's text (--data-text)
//   importance.safetensors  Minitron activation importance                    (importance)
//   arch.json               chosen architecture, predicted costs, candidates  (search)
//   arch_widths.svg         per-layer widths kept vs the parent (arch_trajectory.svg: search steps)
//   distill_log.csv         one row per distillation step                     (distill)
//   model/                  the compressed HF checkpoint                      (prune, distill, export)
//   tasks/*.jsonl           in-domain cloze, story-ending, character tasks    (tasks)
//   report.json, report.md  teacher vs compressed: predicted and measured cost, quality, time
//   report.html             the same with plots (pipeline/report_html.h)
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/fs.h"
#include "hardware/paired_measure.h"

namespace ac {

/// Options of a compress run; defaults are the README's main job on stories15M (cpu-local; its
/// time: docs/benchmarks.md).
struct CompressOptions {
  fs::path model_dir;      // teacher checkpoint (HF layout, tokenizer.bin inside)
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
  std::string method = "autocompress";  // search: "autocompress", "minitron" or "both" (both:
                                         // autocompress is the main result in model/; minitron's
                                         // architecture is pruned, distilled with the same budget
                                         // and evaluated on the same data in model-minitron/,
                                         // arch.minitron.json, distill_log.minitron.csv; the
                                         // report's "comparison" has one row per method)
  uint64_t seed = 1234;
  int64_t seq_len = 256;                 // T of calibration, training and held-out windows
  int64_t calibration_sequences = 32;    // importance + ranking of candidates
  int64_t train_sequences = 256;         // teacher-sampled training stories
  int64_t heldout_sequences = 64;        // held-out stories (other seeds, overlap removed)
  int64_t distill_tokens = 131072;       // distillation token budget
  int64_t distill_batch = 8;
  int64_t task_items = 200;              // items per in-domain task after distillation (0 = none)
  double distill_lr = 1e-3;
  // Minitron's lightweight retraining (search/minitron.h minitron_retrain): its best
  // minitron_retrain_top_k candidates by KL after pruning are each distilled for
  // minitron_retrain_tokens tokens of the training data (same lr and batch as distill) and the
  // best after that is kept; those tokens count as Minitron's search tokens. top_k 0 = off;
  // tokens 0 = distill_tokens / 8 (at least one batch).
  int64_t minitron_retrain_top_k = 3;
  int64_t minitron_retrain_tokens = 0;
  // The same retraining of the differentiable search's best distinct proposals: the ranking
  // right after pruning does not always predict the ranking after distillation. top_k 0 = off;
  // tokens 0 = distill_tokens / 8 (at least one batch), Minitron's per candidate: with half of
  // that (2 steps of the default batch) the KL of every proposal rose above its KL after
  // pruning (the first Adam steps disturb a pruned model before they repair it), so the
  // ranking after it said nothing (docs/benchmarks.md, the study against Minitron).
  int64_t autocompress_retrain_top_k = 2;
  int64_t autocompress_retrain_tokens = 0;
  double distill_hidden_loss_weight = 0;  // hidden-state loss weight (distill/hidden_loss.h; 0 = off)
  double safety_margin = 0.05;           // the search meets limits x (1 - margin) by the model
  PairedOptions measure;                 // rounds of the paired measurement of teacher and
                                         // student (hardware/paired_measure.h): the fit loop's
                                         // and the final check's
  int fit_attempts = 3;                  // fit to the measurement (pipeline/measured_fit.h): the
                                         // searched architecture is measured before distillation
                                         // and searched again under tightened limits while a
                                         // measured limit breaks, at most this many searches
                                         // (1 = measure once, never re-search; 0 = skip)
  double fit_margin = 0.02;              // tightened limits: measured overshoot + this margin
  bool allow_nonfinite = false;          // run on a teacher with NaN/Inf weights (model/finite.h)
};

/// Runs the pipeline. Returns report.json's content. Throws on bad input (nothing is left in
/// `out_dir`), InfeasibleError when no architecture meets the limits.
nlohmann::json run_compress(const CompressOptions& opt);

}  // namespace ac
