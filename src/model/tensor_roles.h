// The one table of tensor roles of a Llama-family decoder: for each role, its member of
// ModelWeights / LayerWeights, its Hugging Face name, its GGUF name, whether it is global or per
// layer, when it exists and its torch shape in terms of the config. The HF loader and writer
// (model/weights.h), the GGUF writer and the GGUF reader (export/gguf_model.h) all go through it.
//
//   role                      HF (modeling_llama.py state_dict)    GGUF (llama.cpp llm_tensor)  shape
//   embed_tokens              model.embed_tokens.weight            token_embd.weight        [V, D]
//   norm                      model.norm.weight                    output_norm.weight       [D]
//   lm_head                   lm_head.weight                       output.weight            [V, D]
//   per layer N, HF under "model.layers.N.", GGUF under "blk.N.":
//   input_layernorm           input_layernorm.weight               attn_norm.weight         [D]
//   q_proj                    self_attn.q_proj.weight              attn_q.weight            [H*Hd, D]
//   k_proj                    self_attn.k_proj.weight              attn_k.weight            [G*Hd, D]
//   v_proj                    self_attn.v_proj.weight              attn_v.weight            [G*Hd, D]
//   q_bias / k_bias / v_bias  self_attn.{q,k,v}_proj.bias          attn_{q,k,v}.bias        [H*Hd] / [G*Hd]
//   o_proj                    self_attn.o_proj.weight              attn_output.weight       [D, H*Hd]
//   q_norm / k_norm           self_attn.{q,k}_norm.weight          attn_{q,k}_norm.weight   [Hd]
//   post_attention_layernorm  post_attention_layernorm.weight      ffn_norm.weight          [D]
//   gate_proj / up_proj       mlp.{gate,up}_proj.weight            ffn_{gate,up}.weight     [F, D]
//   down_proj                 mlp.down_proj.weight                 ffn_down.weight          [D, F]
//
// lm_head exists only when tie_word_embeddings is false (HF omits it when tied; llama.cpp then
// reuses token_embd). The attention roles exist when the layer has attention, the biases only
// with attention_bias (Qwen2), the q/k norms only with qk_norm (Qwen3), the FFN roles when the
// layer has an FFN. Shapes are torch order;
// the GGUF container stores ne reversed (io/gguf_format.h).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace ac {

/// When a role's tensor exists.
enum class RolePart {
  Model,          // always (global)
  UntiedHead,     // global, only when tie_word_embeddings is false
  Attention,      // per layer, when the layer has attention
  AttentionBias,  // per layer, when the layer has attention and the config attention_bias
  QkNorm,         // per layer, when the layer has attention and the config qk_norm
  Ffn,            // per layer, when the layer has an FFN
};

/// The shape of a role's tensor in the config's letters (torch order).
enum class RoleShape { V_D, D, Q_D, KV_D, D_Q, Q, KV, Hd, F_D, D_F };

/// q/k rows are in rotate-half order in HF and in interleaved pairs in llama.cpp: which head
/// count splits the rows when permuting (convert_hf_to_gguf.py LlamaModel.permute).
enum class RopeRows { None, QueryHeads, KeyValueHeads };

/// One row of the table (see the top of this file).
struct TensorRole {
  const char* name;   // our role name, the member's name ("q_proj")
  const char* hf;     // HF name: whole for a global role, after "model.layers.N." per layer
  const char* gguf;   // GGUF name: whole for a global role, after "blk.N." per layer
  RolePart part;
  RoleShape shape;
  const char* shape_field;  // the config.json fields the shape comes from, for error messages
  RopeRows rope_rows = RopeRows::None;
  at::Tensor ModelWeights::*model_member = nullptr;  // global roles
  at::Tensor LayerWeights::*layer_member = nullptr;  // per-layer roles

  bool per_layer() const { return layer_member != nullptr; }
};

/// The global roles, in the order the GGUF writer writes them: embed_tokens, norm, lm_head.
extern const std::array<TensorRole, 3> kModelRoles;
/// The per-layer roles, in the order of a layer's tensors (attention, then FFN; the order every
/// writer and random_weights use).
extern const std::array<TensorRole, 14> kLayerRoles;

/// The role named `name` ("embed_tokens", "q_proj", ...). Internal check on an unknown name.
const TensorRole& tensor_role(std::string_view name);

/// The HF name, e.g. "model.layers.3.self_attn.q_proj.weight"; `layer` is ignored for a
/// global role.
std::string hf_tensor_name(const TensorRole& r, int64_t layer = -1);

/// The GGUF name, e.g. "blk.3.attn_q.weight"; `layer` is ignored for a global role.
std::string gguf_tensor_name(const TensorRole& r, int64_t layer = -1);

/// Whether the role's tensor exists for config `c` (and layer `l` for a per-layer role).
bool role_present(const TensorRole& r, const ModelConfig& c, const LayerConfig* l = nullptr);

/// The role's torch shape under config `c` (and layer `l` for a per-layer role), e.g. q_proj
/// [H*Hd, D]. Internal check when a per-layer role is given no layer.
std::vector<int64_t> role_shape(const TensorRole& r, const ModelConfig& c,
                                const LayerConfig* l = nullptr);

/// The member of `w` (layer `layer` for a per-layer role) that holds the role's tensor.
at::Tensor& role_tensor(ModelWeights& w, const TensorRole& r, int64_t layer = -1);
const at::Tensor& role_tensor(const ModelWeights& w, const TensorRole& r, int64_t layer = -1);

}  // namespace ac
