// A Nemotron-H model (model/nemotron_h_model.h), pruned or not, written as the Hugging Face
// checkpoint folder NVIDIA's and transformers' loaders read: config.json
// (model/nemotron_h_config.h nemotron_h_config_to_hf_json) and model.safetensors (fp32), in the
// names save_pretrained writes (tests/golden/hf-nemotron-h/ holds transformers' own), per kept
// layer j (removed blocks are left out and the others renumbered 0..L'-1):
//   backbone.layers.j.norm.weight [D]
//   M  backbone.layers.j.mixer.{in_proj, conv1d, out_proj}.weight (+ biases), .dt_bias, .A_log,
//      .D [nh], .norm.weight [d_inner]
//   *  backbone.layers.j.mixer.{q,k,v,o}_proj.weight
//   -  backbone.layers.j.mixer.{up,down}_proj.weight
//   E  backbone.layers.j.mixer.gate.weight [E, D], .gate.e_score_correction_bias [E],
//      .experts.e.{up_proj [Fe, Din], down_proj [Din, Fe]}.weight (one tensor a matrix, as
//      save_pretrained writes them), .fc1_latent_proj / .fc2_latent_proj (latent),
//      .shared_experts.{up,down}_proj.weight
//   backbone.embeddings.weight [V, D], backbone.norm_f.weight [D], lm_head.weight [V, D] (unless
//   tied).
// config.json: when every layer of a kind has the same sizes, model_type "nemotron_h" and
// NemotronHForCausalLM (transformers loads it with its own class); when they differ,
// "nemotron_h_puzzle" / NemotronHPuzzleForCausalLM with one block_configs entry a layer
// ({"block_type": "mamba" | "attention" | "mlp" | "moe", and the layer's fields that differ
// from the global ones; an MoE block states all of n_routed_experts, num_experts_per_tok,
// moe_intermediate_size, n_shared_experts, moe_shared_expert_intermediate_size,
// moe_latent_size}), the form vLLM's NemotronHPuzzleConfig reads (docs/design.md, "Nemotron-H
// pruning", says what is known of it). transformers has no class for the puzzle form;
// load_nemotron_h_checkpoint (io/nemotron_h_checkpoint.h) reads both back to identical logits.
#pragma once
#include "common/fs.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// The HF names -> tensors of the checkpoint (file header), fp32, sharing the model's storage;
/// removed layers are left out and the kept ones renumbered.
TensorMap nemotron_h_to_tensor_map(const NemotronHModel& m);

/// Writes config.json + model.safetensors (fp32; config.json's dtype says float32) of `m` into
/// `dir`, atomically (a staging folder renamed into place); `tokenizer_from`: a checkpoint
/// folder whose companion files (io/companion_files.h) are copied byte for byte, if present.
/// Throws ConfigError on an invalid config (ModelConfig::validate, a layer with two parts) before
/// writing anything; FormatError on a write failure.
void save_nemotron_h_checkpoint(const fs::path& dir, const NemotronHModel& m,
                                const fs::path& tokenizer_from = {});

/// The same files written into an existing folder `dir` without staging (the caller stages:
/// export_model writes model.gguf beside them).
void write_nemotron_h_files(const fs::path& dir, const NemotronHModel& m,
                            const fs::path& tokenizer_from = {});

}  // namespace ac
