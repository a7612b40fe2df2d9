// Weights of a Llama-family decoder, per role, in torch order ([out, in] for projections).
// Tensors of a removed part are undefined. All fp32 in memory (this CPU is fp32-only for speed).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/config.h"

namespace ac {

/// name -> tensor, with Hugging Face Llama names ("model.layers.0.self_attn.q_proj.weight").
using TensorMap = std::map<std::string, at::Tensor>;

struct LayerWeights {
  at::Tensor input_layernorm;           // [D]
  at::Tensor q_proj, k_proj, v_proj;    // [H*Hd, D], [G*Hd, D], [G*Hd, D]
  at::Tensor q_bias, k_bias, v_bias;    // [H*Hd], [G*Hd], [G*Hd]   (attention_bias only)
  at::Tensor o_proj;                    // [D, H*Hd]
  at::Tensor q_norm, k_norm;            // [Hd], [Hd]   (qk_norm only: Qwen3)
  at::Tensor post_attention_layernorm;  // [D]
  at::Tensor gate_proj, up_proj;        // [F, D]
  at::Tensor down_proj;                 // [D, F]
};

struct ModelWeights {
  at::Tensor embed_tokens;  // [V, D]
  std::vector<LayerWeights> layers;
  at::Tensor norm;     // [D]
  at::Tensor lm_head;  // [V, D]; same storage as embed_tokens when tie_word_embeddings

  /// Every defined tensor, for optimizers and for `requires_grad_`. The tied head is listed once.
  std::vector<at::Tensor> parameters() const;
};

/// HF name of each role, e.g. hf_name(3, "q_proj") = "model.layers.3.self_attn.q_proj.weight".
std::string hf_layer_name(int64_t layer, const std::string& role);

/// Flattens weights to HF names (the tied head is not written: HF omits lm_head when tied).
TensorMap to_tensor_map(const ModelConfig& c, const ModelWeights& w);

/// Builds weights from HF-named tensors, converting to fp32 and checking every shape against
/// the config. Throws FormatError: "[load_checkpoint] FILE: tensor 'NAME' has shape [a, b],
/// expected [c, d] from config.json FIELD", "missing tensor 'NAME'", or, for a tensor the
/// config has no role for (the forward would run without it), "tensor 'NAME' has no place in
/// the model config.json describes". Tolerated: RoPE's `*.rotary_emb.inv_freq` buffers, and a
/// tied head written out anyway when it equals the embedding.
ModelWeights from_tensor_map(const ModelConfig& c, const TensorMap& m, const std::string& file);

/// The tensor `name` of `m` as a contiguous fp32 copy. Throws FormatError "[load_checkpoint]
/// FILE: missing tensor 'NAME' (shape [..] expected from config.json FIELD)" or "tensor 'NAME'
/// has shape [a, b], expected [c, d] from config.json FIELD".
at::Tensor take_tensor(const TensorMap& m, const std::string& name,
                       const std::vector<int64_t>& shape, const char* field,
                       const std::string& file);

/// The tensors of every role of model/tensor_roles.h that `c` has (the attention, norms and
/// dense FFN of each layer, the embedding and the head), checked as from_tensor_map does, for a
/// model kind that adds tensors of its own (model/moe_model.h); from_tensor_map's check of
/// hybrid configs and of unexpected tensors is left to the caller.
ModelWeights role_weights_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                          const std::string& file);

/// Throws from_tensor_map's FormatError for the tensors of `m` that no role of `c` and no name
/// of `also_expected` takes (RoPE's inv_freq buffers and a tied head equal to the embedding
/// tolerated).
void refuse_unexpected_tensors(const ModelConfig& c, const TensorMap& m, const std::string& file,
                               const std::set<std::string>& also_expected = {});

/// Random weights for tests: N(0, std) projections, norms near 1 (seeded, deterministic).
ModelWeights random_weights(const ModelConfig& c, uint64_t seed, double std = 0.02);

/// Deep copy (new storage), keeping tying.
ModelWeights clone(const ModelConfig& c, const ModelWeights& w);

/// The weights on `device` (e.g. cuda:0 for the profile and validation of a GPU,
/// common/accelerator.h), keeping tying; the same tensors when already there. Dtypes unchanged.
ModelWeights to_device(const ModelConfig& c, const ModelWeights& w, const c10::Device& device);

}  // namespace ac
