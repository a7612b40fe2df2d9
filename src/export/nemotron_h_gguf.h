// A Nemotron-H model (model/nemotron_h_model.h), pruned or not, as the GGUF llama.cpp runs:
// architecture "nemotron_h" (Mamba-2, attention and relu² MLP layers) or "nemotron_h_moe"
// (Mamba-2, attention and MoE layers), llama.cpp src/models/nemotron-h.cpp and
// conversion/nemotron.py NemotronHModel / NemotronHPuzzleModel of the llama.cpp that
// node-llama-cpp 3.21.1 bundles (the release its binaries were built from).
//
// Metadata ({a} = nemotron_h | nemotron_h_moe; what convert_hf_to_gguf.py writes, except where
// noted):
//   general.architecture, .name, .alignment (32), .file_type, .quantization_version (2);
//   {a}.vocab_size, .context_length (2^20, as the converter writes for a model without RoPE),
//   .embedding_length (D), .block_count (the present layers: removed ones are left out);
//   {a}.feed_forward_length i32[L]: an MLP layer's width, an MoE layer's expert width, 0 for
//     Mamba-2 and attention layers; {a}.attention.head_count_kv i32[L]: G in attention layers,
//     0 elsewhere. llama.cpp tells the kinds apart by these two alone: n_head_kv 0 and n_ff 0 is
//     a Mamba-2 layer, n_ff 0 alone an attention layer, the rest MLP or (expert_count > 0) MoE;
//   {a}.attention.head_count: u32 when every attention layer has the same H, else i32[L] (0
//     outside attention layers; llama.cpp's get_key_or_arr reads either);
//   {a}.attention.key_length / .value_length / .rope.dimension_count: head_dim (one for the model);
//   {a}.rope.scaling.finetuned false;
//   {a}.attention.layer_norm_rms_epsilon and .attention.layer_norm_epsilon (both f32, the
//     config's layer_norm_epsilon): llama.cpp's nemotron_h loader requires both keys; the
//     converter, given a config that transformers 5.x saved (layer_norm_epsilon only), writes
//     only the second and llama.cpp then refuses the file ("key not found in model:
//     nemotron_h_moe.attention.layer_norm_rms_epsilon");
//   {a}.ssm.conv_kernel, .ssm.state_size, .ssm.group_count, .ssm.inner_size (nh * P),
//     .ssm.time_step_rank (nh): one Mamba-2 shape for the model;
//   nemotron_h_moe only: .expert_count (E, one for the model), .expert_used_count (k: u32, or
//     i32[L] when the MoE layers differ, the Puzzle form), .expert_feed_forward_length (Fe: u32
//     or i32[L] likewise), .expert_shared_feed_forward_length (Fs), .expert_shared_count (1 or
//     0), .expert_weights_norm (norm_topk_prob), .expert_weights_scale (routed_scaling_factor),
//     .expert_group_count (n_group), .expert_group_used_count (topk_group), .moe_latent_size
//     (when latent);
//   the vocabulary (export/gguf_model.h add_gguf_vocab_metadata);
//   autocompress.hf_config: our config.json (nemotron_h_config_to_hf_json; llama.cpp ignores it).
//
// Tensors, per present layer j (renumbered 0..L'-1), torch shapes (ggml's ne reversed):
//   token_embd.weight [V, D], output_norm.weight [D], output.weight [V, D] (left out when tied);
//   blk.j.attn_norm.weight [D] (every layer's pre-norm);
//   M  blk.j.ssm_in.weight [2 d_inner + 2 Gm N + nh, D], .ssm_conv1d.weight [conv_dim, Kc]
//      (HF's [conv_dim, 1, Kc] squeezed), .ssm_conv1d.bias [conv_dim], .ssm_dt.bias [nh]
//      (dt_bias), .ssm_a [nh, 1] = -exp(A_log), .ssm_d [nh, 1], .ssm_norm.weight
//      [Gm, d_inner / Gm], .ssm_out.weight [D, d_inner];
//   *  blk.j.attn_q / attn_k / attn_v / attn_output.weight; q and k rows in llama.cpp's pair
//      order as the converter permutes them (LlamaModel.permute: q by H heads, k by G; the
//      attention has no RoPE, so q·k is the same either way);
//   -  blk.j.ffn_up.weight [F, D], .ffn_down.weight [D, F];
//   E  blk.j.ffn_gate_inp.weight [E, D], .exp_probs_b.bias [E] (e_score_correction_bias),
//      .ffn_up_exps.weight [E, Fe, Din], .ffn_down_exps.weight [E, Din, Fe],
//      .ffn_up_shexp.weight [Fs, D], .ffn_down_shexp.weight [D, Fs], .ffn_latent_down.weight
//      [Lt, D] and .ffn_latent_up.weight [D, Lt] when latent (fc1 / fc2_latent_proj).
// 2-D and 3-D weights in the chosen dtype (export/gguf_model.h gguf_tensor_type), the rest F32.
#pragma once
#include "common/fs.h"
#include "export/gguf_model.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// "nemotron_h_moe" when the model has an MoE layer, else "nemotron_h".
std::string nemotron_h_gguf_architecture(const ModelConfig& c);

/// Throws ConfigError listing every reason llama.cpp's nemotron_h / nemotron_h_moe could not run
/// `c` as it is (each names the layer and field, what llama.cpp allows and what was found):
/// Mamba-2 layers of different shapes (the ssm.* keys are global), in_proj / out_proj biases
/// (llama.cpp loads none), attention layers of different head_dim, MoE layers with different
/// expert counts, shared-expert widths or latent sizes, dense MLP layers beside MoE layers (one
/// expert_count decides every FFN layer's kind), a layer with more than one part, a model
/// without layers.
void check_nemotron_h_gguf_exportable(const ModelConfig& c);

/// Writes `m` with `vocab` (file header). Throws ConfigError from
/// check_nemotron_h_gguf_exportable and check_vocab_exportable before writing anything.
void write_nemotron_h_gguf(const fs::path& path, const NemotronHModel& m, const GgufVocab& vocab,
                           const GgufExportOptions& opt = {});

}  // namespace ac
