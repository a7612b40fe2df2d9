// Activation-based importance of every prunable structure of a Nemotron-H model
// (model/nemotron_h_model.h) on calibration tokens: forward passes only, no gradients. The
// Nemotron-H counterpart of importance/importance.h (dense) and importance/moe_importance.h.
//
// Letters (model/nemotron_h_model.h): nh Mamba heads, P mamba_head_dim, Gm n_groups, H / G
// query / KV heads, Hd head_dim, F the MLP's width, E experts, Fe an expert's width, Fs the
// shared expert's width. Scores, per layer kind (every one a mean over the calibration tokens,
// a plain fp32 sum divided at the end, so batching does not change it):
//   M  mamba_channels [nh, P]  |g| at the input of out_proj, g the gated RMSNorm's output: the
//                              activation of each of the mixer's d_inner channels, as Minitron
//                              scores an FFN neuron (Muralidharan et al. 2024, arXiv 2407.14679,
//                              eq. 3). Minitron-SSM (Taghibakhshi et al. 2025, "Efficient
//                              Hybrid Language Model Compression through Group-Aware SSM
//                              Pruning", arXiv 2504.11409), whose recipe Model-Optimizer
//                              implements, ranks the mixer's heads and head_dim channels from
//                              this activation, head_dim by a norm over the heads and heads
//                              within their group. The aggregation over tokens is this
//                              project's mean |.| (importance/importance.h kMean); it was not
//                              checked against Model-Optimizer's code.
//      mamba_head_dim [P]      the L2 norm of mamba_channels[:, p] over the heads: one ranking
//                              for every head, since a pruned mixer keeps the same channels in
//                              each (mamba_head_dim is one number).
//      mamba_heads [nh]        the L2 norm of mamba_channels[h, :] over its channels. The
//                              pruning ranks heads within their group (B and C are shared by a
//                              group's heads) and keeps as many in every group, so n_groups
//                              stays valid.
//   *  heads [H]               ||head h's attention output before o_proj||_2 (Minitron eq. 2)
//      kv_groups [G]           the sum of the head scores of the query heads sharing KV head g
//   -  ffn [F]                 |relu(up(x))^2|, the input of down_proj (Minitron eq. 3)
//   E  moe                     importance/moe_importance.h's routing_share, output_norm,
//                              experts and expert_ffn with the relu² activation in place of
//                              SwiGLU's (the expert's output in the latent space when
//                              moe_latent_size is set)
//      shared_ffn [Fs]         |relu(up(h))^2| of the shared expert, over every token
//   block_influence [L]        1 - cos(block input, block output) per token, mean (ShortGPT,
//                              Men et al. 2024, arXiv 2403.03853); 0 for a removed block.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "common/fs.h"
#include "importance/moe_importance.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// Importance of one layer, fp32 on the CPU; only its kind's tensors are defined.
struct NemotronHLayerImportance {
  at::Tensor mamba_channels;  // M [nh, P]
  at::Tensor mamba_heads;     // M [nh]
  at::Tensor mamba_head_dim;  // M [P]
  at::Tensor heads;           // * [H]
  at::Tensor kv_groups;       // * [G]
  at::Tensor ffn;             // - [F]
  MoeLayerImportance moe;     // E experts [E], expert_ffn [E, Fe], routing_share, output_norm
  at::Tensor shared_ffn;      // E [Fs] (a shared expert only)
};

/// Scores of every structure of one Nemotron-H model (higher = more important).
struct NemotronHImportance {
  std::vector<NemotronHLayerImportance> layers;  // L entries
  at::Tensor block_influence;                    // [L] fp32
  int64_t num_tokens = 0;                        // calibration tokens seen

  int64_t num_layers() const { return int64_t(layers.size()); }
};

/// Runs the model over calibration batches, each [B, T] integer token ids (B and T may vary),
/// and scores every structure (file header). No autograd. Throws ConfigError on an empty batch
/// list or a batch that is not a non-empty integer [B, T], and the forward's ConfigError on a
/// token id outside [0, V).
NemotronHImportance compute_nemotron_h_importance(const NemotronHModel& m,
                                                  const std::vector<at::Tensor>& batches);

/// Writes nemotron_h_importance.safetensors atomically: "block_influence" [L] and per layer i
/// each defined score as "layers.i.<name>" (mamba_channels, mamba_heads, mamba_head_dim, heads,
/// kv_groups, ffn, routing_share, output_norm, experts, expert_ffn, shared_ffn), fp32; metadata
/// format "autocompress.nemotron_h_importance.v1", num_layers, num_tokens.
void save_nemotron_h_importance(const fs::path& path, const NemotronHImportance& imp);

/// Reads a file written by save_nemotron_h_importance, bit for bit. Throws FormatError naming
/// the file and the tensor or field: another format (a dense or MoE importance file among
/// them), a missing or malformed count, a layer index outside num_layers, an unknown tensor, a
/// tensor of the wrong rank, a missing or mis-sized block_influence. Shapes against a model:
/// check_nemotron_h_importance_matches.
NemotronHImportance load_nemotron_h_importance(const fs::path& path);

/// Throws ConfigError("[where] FILE: ...") unless `imp` has the layers of `c` with each layer's
/// scores shaped as its config: the message names `file` (the importance file, or the flag and
/// file that gave it), the tensor as the file names it ("layers.3.heads", "block_influence"),
/// the shape found, the shape expected and the config.json fields of `model` it comes from
/// ("computed for another model?").
void check_nemotron_h_importance_matches(const ModelConfig& c, const NemotronHImportance& imp,
                                         const char* where,
                                         const std::string& file = "Nemotron-H importance",
                                         const std::string& model = "the model");

/// The share of the parent's measured importance that the architecture `c` (a target of
/// `parent`: same layer count, removed layers marked) removes, in [0, 1]; the hybrid descent's
/// price of a move from `a` to `b` is this(b) - this(a) (plan/plan.h QualityLoss). Each present
/// layer of the parent weighs its block influence (normalised to sum 1; equal weights when every
/// influence is 0) times the share of its own scores that `c` drops: all of them when the layer
/// is removed; in a Mamba-2 layer the heads beyond the nh'/Gm best of each group (heads ranked
/// within their group, as the pruning keeps them) and the head_dim channels beyond the P' best;
/// query heads beyond the H' best; MLP channels beyond the F' best; in an MoE layer the experts
/// beyond the E' best, in each kept expert the channels beyond its Fe' best, the shared expert's
/// channels beyond the Fs' best, and (k - k') / k of what stays for fewer experts per token (a
/// price, not a measurement: the importance holds no per-rank routing weight). A score vector
/// whose sum is 0 counts each entry alike. Throws ConfigError when the layer counts or kinds of
/// `c`, `parent` and `imp` disagree.
double nemotron_h_importance_loss(const NemotronHImportance& imp, const ModelConfig& parent,
                                  const ModelConfig& c);

}  // namespace ac
