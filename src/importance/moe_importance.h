// Activation-based importance of the sparse MoE layers of a Qwen3-MoE / Mixtral model
// (model/moe_model.h): which experts, and which channels inside each expert, matter on the
// calibration tokens. Forward passes only, no gradients; the MoE counterpart of
// importance/importance.h (the dense structures).
//
// Letters: N token rows of a batch (B*T), k experts per token, E experts, Fe an expert's width.
// A token-slot is one of the k (row, expert) choices of a row: a batch has N*k of them.
// Scores, per sparse layer:
//   routing_share [E]   slots routed to expert e / all slots (sums to 1 over E): how often the
//                       router uses it. An expert never routed has 0.
//   output_norm [E]     mean over the slots routed to e of ||g_e(x) y_e(x)||_2, the L2 norm of
//                       the expert's output times its routing weight, what the block adds to
//                       the residual (0 when never routed). Model-Optimizer's expert score:
//                       modelopt/torch/nas/plugins/megatron.py _DynamicSequentialMLP
//                       _expert_l2_imp_forward_hook / _estimate_expert_importance (summed L2
//                       norms of the weighted expert outputs over the expert's sample count).
//   experts [E]         routing_share * output_norm = sum of those norms / all slots: the
//                       ranking the pruning uses. Model-Optimizer ranks by output_norm alone;
//                       the share weighs in how often the expert's output is added, so a rare
//                       expert with a large output does not outrank one every token uses, and
//                       an expert never routed scores 0 (kept last).
//   expert_ffn [E, Fe]  mean over the rows routed to e of |silu(x Wg^T) * (x Wu^T)|, the input
//                       of e's down_proj: Minitron's FFN neuron importance (Muralidharan et al.
//                       2024, arXiv 2407.14679, eq. 3, mean aggregation), per expert. Channel j
//                       of one expert has nothing to do with channel j of another (independent
//                       weights), so each expert gets its own ranking, as Model-Optimizer gives
//                       every local expert its own _DynamicMLP moe_ffn_hidden_size importance
//                       hook. Rows of an expert never routed are 0.
// Every score is a plain fp32 sum divided at the end, so the result does not depend on how the
// tokens are split into batches.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "common/fs.h"
#include "model/moe_model.h"

namespace ac {

/// Importance of one sparse layer; undefined tensors in a dense layer. fp32, CPU.
struct MoeLayerImportance {
  at::Tensor routing_share;  // [E]
  at::Tensor output_norm;    // [E]
  at::Tensor experts;        // [E]     routing_share * output_norm: the expert ranking
  at::Tensor expert_ffn;     // [E, Fe] per expert, its channels' mean |activation|
};

/// Scores of every sparse layer of one MoE model (higher = more important).
struct MoeImportance {
  std::vector<MoeLayerImportance> layers;  // L entries
  int64_t num_tokens = 0;                  // calibration tokens seen (rows, not slots)

  int64_t num_layers() const { return int64_t(layers.size()); }
};

/// Runs the model (no masks) over calibration batches, each [B, T] integer token ids (B and T
/// may vary), and scores every sparse layer's experts and expert channels (file header). No
/// autograd; memory does not grow with the number of batches. Throws ConfigError on an empty
/// batch list or a batch that is not a non-empty integer [B, T], and the forward's ConfigError
/// on a token id outside [0, V).
MoeImportance compute_moe_importance(const MoeModel& m, const std::vector<at::Tensor>& batches);

/// Writes moe_importance.safetensors atomically: per sparse layer i the tensors
/// "layers.i.routing_share", "layers.i.output_norm", "layers.i.experts" [E] and
/// "layers.i.expert_ffn" [E, Fe] (fp32), metadata format "autocompress.moe_importance.v1",
/// num_layers, num_tokens.
void save_moe_importance(const fs::path& path, const MoeImportance& imp);

/// Reads a file written by save_moe_importance, bit for bit. Throws FormatError naming the file
/// and the tensor or field: another format (a dense importance file among them), a layer index
/// outside num_layers, an unknown tensor, a sparse layer missing one of its four tensors, a
/// tensor of the wrong rank or of another expert count than the layer's `experts`.
MoeImportance load_moe_importance(const fs::path& path);

/// Throws ConfigError("[where] FILE: ...") unless `imp` has the layers of `c` and, in each
/// sparse layer, experts [E] and expert_ffn [E, Fe] of its config ("computed for another
/// model?"): the message names `file` (the importance file, or the flag and file that gave it),
/// the tensor, the shapes and the config.json fields of `model`.
void check_moe_importance_matches(const ModelConfig& c, const MoeImportance& imp,
                                  const char* where, const std::string& file = "MoE importance",
                                  const std::string& model = "the model");

}  // namespace ac
