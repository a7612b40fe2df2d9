// Structured pruning of a Nemotron-H model (model/nemotron_h_model.h), guided by
// importance/nemotron_h_importance.h: the Nemotron-H counterpart of prune/prune.h and
// prune/moe_prune.h.
//
// A target is a ModelConfig with the parent's layers, each the parent's kind or removed (a
// LayerConfig with no part: the block becomes the identity), heterogeneous per layer. What each
// kind can shrink (Letters of model/nemotron_h_model.h):
//   M  mamba_num_heads nh' (a multiple of n_groups, <= nh): in each group of nh / Gm heads the
//      nh' / Gm with the highest mamba_heads, so every group keeps as many heads and n_groups,
//      ssm_state_size, B and C stay as they are (Minitron-SSM's group-aware head pruning,
//      Taghibakhshi et al. 2025, arXiv 2504.11409);
//      mamba_head_dim P' <= P: the P' channels with the highest mamba_head_dim, the same in every
//      head. The slice touches in_proj's z, x and dt rows (B and C untouched), conv1d's x rows
//      (weight and bias), dt_bias, A_log, D, the gated norm's weight (its groups become
//      nh' / Gm * P' wide) and out_proj's columns;
//   *  num_key_value_heads G' <= G: the KV groups with the highest kv_groups; num_attention_heads
//      H' = G' * r' with r' <= H / G: in each kept group its r' query heads with the highest
//      heads. head_dim is kept (NoPE attention: no rotary pairs to keep together, but no target
//      asks for it yet);
//   -  intermediate_size F' <= F: the channels with the highest ffn;
//   E  n_routed_experts E' (2 <= E' <= E; < E only with n_group 1, since the router's groups
//      would change), moe_intermediate_size Fe' (each kept expert its own channels, as
//      prune/moe_prune.h), moe_shared_expert_intermediate_size Fs' (1..Fs), num_experts_per_tok
//      k' (1..k, at most E'). The router keeps the kept experts' rows and correction biases;
//      moe_latent_size and the latent projections are kept (their width is shared by every
//      expert and the router does not see it, so slicing it needs its own score: not done).
// Everything else (hidden size, vocab, norms, the convolution kernel, the state size) is kept.
// Ties go to the lower index and survivors keep their original order (top_k_indices of
// importance/importance.h), so the kept set at a smaller width is a subset of the kept set at a
// larger one, and nemotron_h_masks_for_plan gives the pruned model's function on the full model.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "importance/nemotron_h_importance.h"
#include "prune/moe_prune.h"

namespace ac {

/// Indices (into the parent, ascending, int64) of what one layer keeps; only the layer kind's
/// are defined, none in a removed layer.
struct NemotronHLayerPlan {
  bool removed = false;
  at::Tensor mamba_heads;     // M [nh']
  at::Tensor mamba_head_dim;  // M [P']
  at::Tensor kv_groups;       // * [G']
  at::Tensor heads;           // * [H'] (r' of each kept group)
  at::Tensor ffn;             // - [F']
  MoeLayerPlan moe;           // E experts [E'], expert_ffn [E', Fe']
  at::Tensor shared_ffn;      // E [Fs']
};

/// The selection and the config of the pruned model (the parent's with the target's sizes).
struct NemotronHPrunePlan {
  std::vector<NemotronHLayerPlan> layers;  // L entries
  ModelConfig config;
};

/// Throws one ConfigError listing every problem of `target` against `parent`, each naming the
/// layer, the config.json field, what was expected and what was found: another layer count,
/// vocab_size or hidden_size; a layer of another kind (only removal is allowed); a size above
/// the parent's or below 1; mamba_num_heads not a multiple of n_groups; n_groups,
/// ssm_state_size, conv_kernel, chunk_size, use_bias, use_conv_bias, head_dim or
/// moe_latent_size changed; num_attention_heads not a multiple of num_key_value_heads or with
/// more query heads a group than the parent's; n_routed_experts below 2 or changed under
/// n_group > 1; num_experts_per_tok above the parent's or the experts kept; a shared expert
/// added or removed. `router_n_group`: the parent's n_group (SigmoidRouterOptions).
void validate_nemotron_h_target(const ModelConfig& parent, const ModelConfig& target,
                                int64_t router_n_group = 1);

/// Chooses what survives (file header). Validates the target and that `imp` fits the parent
/// (ConfigError otherwise).
NemotronHPrunePlan plan_nemotron_h_pruning(const NemotronHModel& parent,
                                           const NemotronHImportance& imp,
                                           const ModelConfig& target);

/// The physically smaller model: every tensor sliced by the plan (new storage where sliced, the
/// parent's shared elsewhere); removed layers have no weights. Its config is plan.config.
NemotronHModel apply_nemotron_h_plan(const NemotronHModel& m, const NemotronHPrunePlan& plan);

/// plan_nemotron_h_pruning + apply_nemotron_h_plan.
NemotronHModel prune_nemotron_h_model(const NemotronHModel& m, const NemotronHImportance& imp,
                                      const ModelConfig& target);

/// The same pruning as 0/1 masks (fp32) on the full model (NemotronHMasks): a removed layer is
/// skipped, Mamba channels [nh, P] the outer product of the kept heads and head_dim channels,
/// query heads [H], MLP channels [F], experts [E], expert channels [E, Fe], shared expert
/// channels [Fs] and the target's k. forward with these masks equals the pruned model's forward
/// up to float rounding (tests/test_nemotron_h_prune.cpp).
NemotronHMasks nemotron_h_masks_for_plan(const ModelConfig& parent, const NemotronHPrunePlan& plan);

}  // namespace ac
