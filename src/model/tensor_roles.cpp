#include "model/tensor_roles.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ac {

// The shape fields are the texts the loaders' errors name ("expected [c, d] from config.json
// FIELD").
const std::array<TensorRole, 3> kModelRoles = {{
    {"embed_tokens", "model.embed_tokens.weight", "token_embd.weight", RolePart::Model,
     RoleShape::V_D, "vocab_size, hidden_size", RopeRows::None, &ModelWeights::embed_tokens},
    {"norm", "model.norm.weight", "output_norm.weight", RolePart::Model, RoleShape::D,
     "hidden_size", RopeRows::None, &ModelWeights::norm},
    {"lm_head", "lm_head.weight", "output.weight", RolePart::UntiedHead, RoleShape::V_D,
     "vocab_size, hidden_size", RopeRows::None, &ModelWeights::lm_head},
}};

const std::array<TensorRole, 14> kLayerRoles = {{
    {"input_layernorm", "input_layernorm.weight", "attn_norm.weight", RolePart::Attention,
     RoleShape::D, "hidden_size", RopeRows::None, nullptr, &LayerWeights::input_layernorm},
    {"q_proj", "self_attn.q_proj.weight", "attn_q.weight", RolePart::Attention, RoleShape::Q_D,
     "num_attention_heads*head_dim", RopeRows::QueryHeads, nullptr, &LayerWeights::q_proj},
    {"k_proj", "self_attn.k_proj.weight", "attn_k.weight", RolePart::Attention, RoleShape::KV_D,
     "num_key_value_heads*head_dim", RopeRows::KeyValueHeads, nullptr, &LayerWeights::k_proj},
    {"v_proj", "self_attn.v_proj.weight", "attn_v.weight", RolePart::Attention, RoleShape::KV_D,
     "num_key_value_heads*head_dim", RopeRows::None, nullptr, &LayerWeights::v_proj},
    {"q_bias", "self_attn.q_proj.bias", "attn_q.bias", RolePart::AttentionBias, RoleShape::Q,
     "num_attention_heads*head_dim", RopeRows::QueryHeads, nullptr, &LayerWeights::q_bias},
    {"k_bias", "self_attn.k_proj.bias", "attn_k.bias", RolePart::AttentionBias, RoleShape::KV,
     "num_key_value_heads*head_dim", RopeRows::KeyValueHeads, nullptr, &LayerWeights::k_bias},
    {"v_bias", "self_attn.v_proj.bias", "attn_v.bias", RolePart::AttentionBias, RoleShape::KV,
     "num_key_value_heads*head_dim", RopeRows::None, nullptr, &LayerWeights::v_bias},
    {"o_proj", "self_attn.o_proj.weight", "attn_output.weight", RolePart::Attention,
     RoleShape::D_Q, "num_attention_heads*head_dim", RopeRows::None, nullptr,
     &LayerWeights::o_proj},
    {"q_norm", "self_attn.q_norm.weight", "attn_q_norm.weight", RolePart::QkNorm, RoleShape::Hd,
     "head_dim", RopeRows::None, nullptr, &LayerWeights::q_norm},
    {"k_norm", "self_attn.k_norm.weight", "attn_k_norm.weight", RolePart::QkNorm, RoleShape::Hd,
     "head_dim", RopeRows::None, nullptr, &LayerWeights::k_norm},
    {"post_attention_layernorm", "post_attention_layernorm.weight", "ffn_norm.weight",
     RolePart::Ffn, RoleShape::D, "hidden_size", RopeRows::None, nullptr,
     &LayerWeights::post_attention_layernorm},
    {"gate_proj", "mlp.gate_proj.weight", "ffn_gate.weight", RolePart::Ffn, RoleShape::F_D,
     "intermediate_size", RopeRows::None, nullptr, &LayerWeights::gate_proj},
    {"up_proj", "mlp.up_proj.weight", "ffn_up.weight", RolePart::Ffn, RoleShape::F_D,
     "intermediate_size", RopeRows::None, nullptr, &LayerWeights::up_proj},
    {"down_proj", "mlp.down_proj.weight", "ffn_down.weight", RolePart::Ffn, RoleShape::D_F,
     "intermediate_size", RopeRows::None, nullptr, &LayerWeights::down_proj},
}};

const TensorRole& tensor_role(std::string_view name) {
  for (const TensorRole& r : kModelRoles)
    if (name == r.name) return r;
  for (const TensorRole& r : kLayerRoles)
    if (name == r.name) return r;
  AC_CHECK(false, "unknown tensor role {}", name);
  return kModelRoles[0];
}

std::string hf_tensor_name(const TensorRole& r, int64_t layer) {
  return r.per_layer() ? fmt::format("model.layers.{}.{}", layer, r.hf) : std::string(r.hf);
}

std::string gguf_tensor_name(const TensorRole& r, int64_t layer) {
  return r.per_layer() ? fmt::format("blk.{}.{}", layer, r.gguf) : std::string(r.gguf);
}

bool role_present(const TensorRole& r, const ModelConfig& c, const LayerConfig* l) {
  AC_CHECK(!r.per_layer() || l, "role {} is per layer: a layer is needed", r.name);
  switch (r.part) {
    case RolePart::Model: return true;
    case RolePart::UntiedHead: return !c.tie_word_embeddings;
    case RolePart::Attention: return l->has_attention();
    case RolePart::AttentionBias: return l->has_attention() && c.attention_bias;
    case RolePart::QkNorm: return l->has_attention() && c.qk_norm;
    case RolePart::Ffn: return l->has_ffn();
  }
  return false;
}

std::vector<int64_t> role_shape(const TensorRole& r, const ModelConfig& c, const LayerConfig* l) {
  AC_CHECK(!r.per_layer() || l, "role {} is per layer: a layer is needed", r.name);
  const int64_t V = c.vocab_size, D = c.hidden_size;
  const int64_t q = l ? l->num_attention_heads * l->head_dim : 0,
                kv = l ? l->num_key_value_heads * l->head_dim : 0,
                F = l ? l->intermediate_size : 0;
  switch (r.shape) {
    case RoleShape::V_D: return {V, D};
    case RoleShape::D: return {D};
    case RoleShape::Q_D: return {q, D};
    case RoleShape::KV_D: return {kv, D};
    case RoleShape::D_Q: return {D, q};
    case RoleShape::Q: return {q};
    case RoleShape::KV: return {kv};
    case RoleShape::Hd: return {l ? l->head_dim : 0};
    case RoleShape::F_D: return {F, D};
    case RoleShape::D_F: return {D, F};
  }
  return {};
}

at::Tensor& role_tensor(ModelWeights& w, const TensorRole& r, int64_t layer) {
  if (!r.per_layer()) return w.*r.model_member;
  AC_CHECK(layer >= 0 && layer < int64_t(w.layers.size()), "layer {} of {}", layer,
           w.layers.size());
  return w.layers[size_t(layer)].*r.layer_member;
}

const at::Tensor& role_tensor(const ModelWeights& w, const TensorRole& r, int64_t layer) {
  return role_tensor(const_cast<ModelWeights&>(w), r, layer);
}

}  // namespace ac
