// A Qwen3-MoE / Mixtral model (model/moe_model.h), pruned or not, written as the Hugging Face
// checkpoint folder transformers loads with its own class (Qwen3MoeForCausalLM,
// MixtralForCausalLM): config.json (model/moe_family_config.h) and model.safetensors (fp32),
// the experts one tensor a matrix in the names save_pretrained writes:
//   Qwen3-MoE  model.layers.N.mlp.gate.weight [E, D],
//              model.layers.N.mlp.experts.e.{gate,up}_proj.weight [Fe, D], .down_proj [D, Fe]
//   Mixtral    model.layers.N.block_sparse_moe.gate.weight [E, D],
//              model.layers.N.block_sparse_moe.experts.e.{w1,w3}.weight [Fe, D], .w2 [D, Fe]
// plus the attention, norms, dense layers, embedding and head of model/tensor_roles.h.
// config.json holds one num_experts, one num_experts_per_tok and one moe_intermediate_size for
// every sparse layer; a model whose sparse layers differ (heterogeneous pruning) is refused:
// its per-layer layout (the puzzle layout) is not written yet.
#pragma once
#include "common/fs.h"
#include "model/moe_model.h"

namespace ac {

/// Throws ConfigError("[save_moe_checkpoint] ...") naming every sparse layer with its
/// num_experts, num_experts_per_tok and moe_intermediate_size when they differ between layers.
void check_moe_uniform(const ModelConfig& c);

/// The HF names -> tensors of the checkpoint (file header), fp32, sharing the model's storage.
TensorMap moe_to_tensor_map(const MoeModel& m);

/// Writes config.json + model.safetensors (fp32) of `m` into `dir`, atomically (a staging
/// folder renamed into place); `tokenizer_from`: a checkpoint folder whose companion files
/// (the tokenizer, generation_config.json) are copied byte for byte, if present. Throws
/// check_moe_uniform's ConfigError before writing anything; FormatError on a write failure.
/// load_moe_checkpoint reads the folder back to identical logits (tests/test_moe_prune.cpp).
void save_moe_checkpoint(const fs::path& dir, const MoeModel& m,
                         const fs::path& tokenizer_from = {});

/// The same files written into an existing folder `dir` without staging (the caller stages:
/// `prune` and `distill` write other files beside them). Throws as save_moe_checkpoint does,
/// before writing anything.
void write_moe_files(const fs::path& dir, const MoeModel& m, const fs::path& tokenizer_from = {});

}  // namespace ac
