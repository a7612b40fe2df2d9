// Activation-based importance of every prunable structure (Minitron, Muralidharan et al. 2024,
// "Compact Language Models via Pruning and Knowledge Distillation", arXiv 2407.14679, Sec. 2.2;
// Sreenivas et al. 2024, arXiv 2408.11796), computed from forward passes only (no gradients).
//
// Scores, per structure (x a calibration token, D hidden, H query heads, G KV heads, F FFN):
//   hidden [D]       sum over the embedding output and every RMSNorm output (attention, FFN and
//                    final norms) of |x_d|                                  (Minitron eq. 4)
//   heads [H]        ||attention output of head h before o_proj||_2          (Minitron eq. 2)
//   kv_groups [G]    sum of the head scores of the query heads sharing that KV head
//   ffn [F]          |SwiGLU activation of neuron f| (the down_proj input)   (Minitron eq. 3)
//   block_influence [L]  1 - cos(block input, block output), mean over tokens (ShortGPT's
//                    Block Influence, Men et al. 2024, arXiv 2403.03853; Minitron's depth metric)
//   layer_drop_loss [L]  optional: increase of the next-token cross-entropy (nats/token) when
//                    block l is removed alone (Minitron Sec. 2.2 "LM validation loss")
//
// Aggregation over batch and sequence (ImportanceOptions::aggregation):
//   kMean     mean over all calibration tokens (default). Every per-token score above is summed
//             in fp32 and divided by the token count at the end: streaming is exact (the state is
//             a plain sum, independent of how tokens are split into batches) and the score of a
//             channel that is constant zero is exactly zero.
//   kBatchL2  the aggregation Minitron's ablation favours for width (mean over the sequence,
//             L2 over the batch): score = sqrt(mean_b (mean_t s_bt)^2); for hidden channels the
//             squares of every source (embedding, each norm) add up under one root. Streams
//             too (a sum of squares); the RMS over sequences instead of the L2 norm keeps the
//             scale independent of the number of sequences without changing any ranking.
// Rankings only depend on the ordering, so the normalisation by counts changes nothing there;
// it makes scores comparable across runs with different amounts of calibration data.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "common/fs.h"
#include "model/llama.h"

namespace ac {

/// Importance of one layer's structures; tensors are undefined where the layer has no such part.
struct LayerImportance {
  at::Tensor heads;      // [H] fp32
  at::Tensor kv_groups;  // [G] fp32
  at::Tensor ffn;        // [F] fp32
};

/// Scores of every prunable structure of one model (higher = more important). fp32, CPU.
struct Importance {
  at::Tensor hidden;                    // [D]
  std::vector<LayerImportance> layers;  // L entries
  at::Tensor block_influence;           // [L]
  at::Tensor layer_drop_loss;           // [L], undefined unless requested
  int64_t num_tokens = 0;               // calibration tokens seen
  int64_t num_sequences = 0;            // calibration sequences seen
  std::string aggregation = "mean";     // "mean" or "batch_l2"

  int64_t num_layers() const { return int64_t(layers.size()); }
};

enum class Aggregation { kMean, kBatchL2 };

/// Options of compute_importance. Defaults: mean aggregation, no layer-drop loss, no state file.
struct ImportanceOptions {
  Aggregation aggregation = Aggregation::kMean;
  /// Also measure the loss increase of dropping each block (L extra forward passes per batch).
  bool layer_drop_loss = false;
  /// Where to save the running state (atomically) every `save_every` batches; empty = never.
  fs::path state_path;
  int64_t save_every = 16;
  /// Continue from `state_path` if it exists (skips the batches it already covers).
  bool resume = false;
  /// Draw a progress bar (common/progress.h).
  bool show_progress = true;
  /// Score a model with NaN/Inf weights anyway (otherwise FormatError; model/finite.h).
  bool allow_nonfinite = false;
  /// Where the forwards run and the running sums live (common/accelerator.h, --device): the
  /// model and each batch are copied there; the state file and the result are on the CPU.
  c10::Device device = c10::kCPU;
  /// Stream the model through the device one block at a time: the calibration set's hidden
  /// states stay there ([B, T, D] per batch), the weights come a block at a time from the
  /// model's memory (a memory-mapped checkpoint stays on disk until its block is read), so that
  /// a model larger than the device is scored. The same scores up to float summation order.
  /// Taken anyway on a GPU whose free memory the whole model's pass would not fit. Not with
  /// layer_drop_loss (a forward without each block needs them all); no state file (the pass
  /// is layer by layer, not batch by batch).
  bool stream_layers = false;
};

/// Runs the model over calibration batches and scores every structure (see the file header).
/// batches: each [B, T] int64 token ids (B and T may vary between batches).
/// Memory does not grow with the number of batches (streaming fp32 sums); no autograd.
/// Throws ConfigError on an empty batch list, a batch that is not [B, T] int64, or a state file
/// made with other options or for another model; FormatError on a corrupt state file or on
/// NaN/Inf weights (unless opt.allow_nonfinite).
Importance compute_importance(const LlamaModel& m, const std::vector<at::Tensor>& batches,
                              const ImportanceOptions& opt = {});

/// Names -> tensors: "hidden", "layers.3.heads", "layers.3.kv_groups", "layers.3.ffn",
/// "block_influence", "layer_drop_loss" (only defined tensors).
TensorMap importance_to_tensor_map(const Importance& imp);

/// Writes importance.safetensors atomically (tensors above + metadata: format, aggregation,
/// num_tokens, num_sequences).
void save_importance(const fs::path& path, const Importance& imp);

/// Reads a file written by save_importance. Throws FormatError naming the file and the tensor
/// (missing "hidden"/"block_influence", a non-1-D tensor, a layer index out of range, ...).
Importance load_importance(const fs::path& path);

/// Throws ConfigError if `imp` does not fit the model config `c` (layer count, D, H, G, F),
/// naming `file` (where the importance came from, e.g. "--importance imp.safetensors") and
/// `model` (where `c` came from, e.g. "parent/config.json"): "[prune] --importance
/// imp.safetensors: layers.3.heads has shape [6], expected [8] (parent/config.json
/// num_attention_heads): computed for another model?".
void check_importance_matches(const ModelConfig& c, const Importance& imp, const char* where,
                              const std::string& file = "importance",
                              const std::string& model = "the model");

// ---------------------------------------------------------------------------------------------
// Rankings (docs/design.md, "The architecture space": a width choice k keeps the k most
// important ones; nested masks).

/// Indices of `scores` ([N], any float dtype) by descending score, ties by ascending index.
/// Every top-k set is a prefix of this order, so the masks of all widths are nested.
std::vector<int64_t> ranking(const at::Tensor& scores);

/// The k most important indices (the first k of ranking()), returned in ascending index order
/// (pruning keeps the surviving channels in their original relative order). [k] int64.
/// Throws ConfigError if k < 0 or k > N.
at::Tensor top_k_indices(const at::Tensor& scores, int64_t k);

}  // namespace ac
