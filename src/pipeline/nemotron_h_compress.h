// `compress` for a Nemotron-H teacher (hybrid Mamba-2 / attention / MLP / MoE layers): the dense
// pipeline's stages (pipeline/compress.h) for the kinds of model/nemotron_h_model.h, in one pass.
//
//   1. data: the user's text (--data-text) or token files (--data), as the dense pipeline reads
//      them; sampling stories from a Nemotron-H teacher is not implemented (ConfigError);
//   2. importance on the calibration windows (importance/nemotron_h_importance.h): which heads,
//      channels, experts and layers each reduced size keeps, and what each move costs;
//   3. plan: the per-layer descent of plan/hybrid_plan.h on the scenario's predicted costs (a
//      GPU's roofline: hybrid layers are costed there only), over experts, expert width, experts
//      per token, whole layers and the global Mamba-2 heads, each move priced by the share of the
//      measured importance it removes (nemotron_h_importance_loss), and again by the parameters
//      each move removes; and the differentiable search (search/nemotron_h_differentiable.h:
//      a relaxation over the same levers on the teacher under soft masks, its argmax repaired by
//      that descent); of every suggestion of these that the pruning can build
//      (prune/nemotron_h_prune.h validate_nemotron_h_target), the best two by KL to the teacher
//      on the calibration windows are each retrained as the first eighth of the final run
//      (--autocompress-retrain-top-k / --autocompress-retrain-tokens, as the dense pipeline's),
//      and the one with the lowest KL after that is kept, its run continued by step 5;
//   3b. with --method minitron or both, Minitron's baseline (search/nemotron_h_minitron.h): its
//      homogeneous grid over Mamba heads and head_dim, MLP and expert widths, expert count and
//      depth, the maximal feasible shapes ranked by KL after pruning, the best
//      --minitron-retrain-top-k (3) retrained on a short distillation (an eighth of the budget),
//      the best after that kept;
//   4. pruning (prune/nemotron_h_prune.h), then KL(teacher || student) on the held-out windows;
//   5. distillation from the teacher (distill/distill.h, the Nemotron-H overload) with the run's
//      budget, learning rate and seed; the held-out KL again;
//   6. export: model/ (HF, export/nemotron_h_export.h; reloaded and checked to give identical
//      logits) and model.gguf (llama.cpp's nemotron_h / nemotron_h_moe, export/nemotron_h_gguf.h)
//      where llama.cpp can express the student, else the reason in the report; with --method
//      both, Minitron's pick goes through 4-6 as well, into model-minitron/ and
//      model-minitron.gguf (distill_log.minitron.csv), with the same data, budget and seed;
//   7. report.json and report.md: the limits, the teacher's and student's predicted costs, the
//      plan's moves, the KL and perplexity before and after distillation, one "comparison" row
//      per method (architecture, search tokens, held-out KL after pruning and distillation), the
//      files.
// The run writes
// into a staging folder renamed to --out at the end (nothing half-written); it is not resumable.
#pragma once
#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "io/nemotron_h_checkpoint.h"  // is_nemotron_h_checkpoint
#include "pipeline/compress.h"

namespace ac {

/// Runs the pipeline above; returns report.json's content. Throws ConfigError on options the
/// hybrid path does not take (a CPU scenario, --resume, a --method other than autocompress,
/// minitron or both, no --data / --data-text, --hidden-loss-weight), InfeasibleError when no plan meets
/// the limits, and what the stages throw; nothing is written then.
nlohmann::json compress_nemotron_h(const CompressOptions& opt);

}  // namespace ac
