#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace ac {

std::vector<at::Tensor> ModelWeights::parameters() const {
  std::vector<at::Tensor> out{embed_tokens};
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  for (const auto& l : layers)
    for (const at::Tensor* t :
         {&l.input_layernorm, &l.q_proj, &l.k_proj, &l.v_proj, &l.q_bias, &l.k_bias, &l.v_bias,
          &l.o_proj, &l.post_attention_layernorm, &l.gate_proj, &l.up_proj, &l.down_proj})
      add(*t);
  add(norm);
  if (lm_head.defined() && !lm_head.is_same(embed_tokens)) out.push_back(lm_head);
  return out;
}

std::string hf_layer_name(int64_t layer, const std::string& role) {
  static const std::map<std::string, std::string> kRole = {
      {"input_layernorm", "input_layernorm.weight"},
      {"q_proj", "self_attn.q_proj.weight"},
      {"k_proj", "self_attn.k_proj.weight"},
      {"v_proj", "self_attn.v_proj.weight"},
      {"q_bias", "self_attn.q_proj.bias"},
      {"k_bias", "self_attn.k_proj.bias"},
      {"v_bias", "self_attn.v_proj.bias"},
      {"o_proj", "self_attn.o_proj.weight"},
      {"post_attention_layernorm", "post_attention_layernorm.weight"},
      {"gate_proj", "mlp.gate_proj.weight"},
      {"up_proj", "mlp.up_proj.weight"},
      {"down_proj", "mlp.down_proj.weight"},
  };
  auto it = kRole.find(role);
  AC_CHECK(it != kRole.end(), "unknown role {}", role);
  return fmt::format("model.layers.{}.{}", layer, it->second);
}

namespace {

// (role, member, expected shape) of every tensor a layer holds under config `c`.
struct Slot {
  const char* role;
  at::Tensor LayerWeights::*member;
  std::vector<int64_t> shape;
  const char* field;  // config.json field that determines the shape
};

std::vector<Slot> layer_slots(const ModelConfig& c, const LayerConfig& l) {
  const int64_t D = c.hidden_size, q = l.num_attention_heads * l.head_dim,
                kv = l.num_key_value_heads * l.head_dim, F = l.intermediate_size;
  std::vector<Slot> s;
  if (l.has_attention()) {
    s.push_back({"input_layernorm", &LayerWeights::input_layernorm, {D}, "hidden_size"});
    s.push_back({"q_proj", &LayerWeights::q_proj, {q, D}, "num_attention_heads*head_dim"});
    s.push_back({"k_proj", &LayerWeights::k_proj, {kv, D}, "num_key_value_heads*head_dim"});
    s.push_back({"v_proj", &LayerWeights::v_proj, {kv, D}, "num_key_value_heads*head_dim"});
    if (c.attention_bias) {
      s.push_back({"q_bias", &LayerWeights::q_bias, {q}, "num_attention_heads*head_dim"});
      s.push_back({"k_bias", &LayerWeights::k_bias, {kv}, "num_key_value_heads*head_dim"});
      s.push_back({"v_bias", &LayerWeights::v_bias, {kv}, "num_key_value_heads*head_dim"});
    }
    s.push_back({"o_proj", &LayerWeights::o_proj, {D, q}, "num_attention_heads*head_dim"});
  }
  if (l.has_ffn()) {
    s.push_back({"post_attention_layernorm", &LayerWeights::post_attention_layernorm, {D},
                 "hidden_size"});
    s.push_back({"gate_proj", &LayerWeights::gate_proj, {F, D}, "intermediate_size"});
    s.push_back({"up_proj", &LayerWeights::up_proj, {F, D}, "intermediate_size"});
    s.push_back({"down_proj", &LayerWeights::down_proj, {D, F}, "intermediate_size"});
  }
  return s;
}

at::Tensor take(const TensorMap& m, const std::string& name, const std::vector<int64_t>& shape,
                const char* field, const std::string& file) {
  auto it = m.find(name);
  if (it == m.end())
    throw FormatError(fmt::format("[load_checkpoint] {}: missing tensor '{}' (shape {} expected "
                                  "from config.json {})",
                                  file, name, shape, field));
  if (it->second.sizes().vec() != shape)
    throw FormatError(fmt::format("[load_checkpoint] {}: tensor '{}' has shape {}, expected {} "
                                  "from config.json {}",
                                  file, name, it->second.sizes().vec(), shape, field));
  return it->second.to(at::kFloat).contiguous().clone();
}

}  // namespace

TensorMap to_tensor_map(const ModelConfig& c, const ModelWeights& w) {
  TensorMap m;
  m["model.embed_tokens.weight"] = w.embed_tokens;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    for (const auto& s : layer_slots(c, c.layers[size_t(i)]))
      m[hf_layer_name(i, s.role)] = w.layers[size_t(i)].*s.member;
  m["model.norm.weight"] = w.norm;
  if (!c.tie_word_embeddings) m["lm_head.weight"] = w.lm_head;
  return m;
}

ModelWeights from_tensor_map(const ModelConfig& c, const TensorMap& m, const std::string& file) {
  const int64_t V = c.vocab_size, D = c.hidden_size;
  ModelWeights w;
  w.embed_tokens = take(m, "model.embed_tokens.weight", {V, D}, "vocab_size, hidden_size", file);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights lw;
    for (const auto& s : layer_slots(c, c.layers[size_t(i)]))
      lw.*s.member = take(m, hf_layer_name(i, s.role), s.shape, s.field, file);
    w.layers.push_back(std::move(lw));
  }
  w.norm = take(m, "model.norm.weight", {D}, "hidden_size", file);
  if (c.tie_word_embeddings)
    w.lm_head = w.embed_tokens;
  else
    w.lm_head = take(m, "lm_head.weight", {V, D}, "vocab_size, hidden_size", file);
  return w;
}

ModelWeights random_weights(const ModelConfig& c, uint64_t seed, double std) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto normal = [&](std::vector<int64_t> shape, double s) {
    return at::normal(0.0, s, shape, gen, at::TensorOptions().dtype(at::kFloat));
  };
  auto norm_w = [&](int64_t n) { return 1.0 + normal({n}, 0.1); };
  const int64_t V = c.vocab_size, D = c.hidden_size;
  ModelWeights w;
  w.embed_tokens = normal({V, D}, 1.0);
  for (const auto& l : c.layers) {
    LayerWeights lw;
    for (const auto& s : layer_slots(c, l))
      lw.*s.member = s.shape.size() == 1 && s.shape[0] == D && std::string(s.role).find("norm") !=
                                                                   std::string::npos
                         ? norm_w(D)
                         : normal(s.shape, std);
    w.layers.push_back(std::move(lw));
  }
  w.norm = norm_w(D);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : normal({V, D}, std);
  return w;
}

// Every tensor of `w` through `f`, keeping tying (the head is the new embedding when tied).
template <typename F>
static ModelWeights map_weights(const ModelConfig& c, const ModelWeights& w, F&& f) {
  ModelWeights o;
  auto cp = [&](const at::Tensor& t) { return t.defined() ? f(t) : at::Tensor(); };
  o.embed_tokens = cp(w.embed_tokens);
  for (const auto& l : w.layers) {
    LayerWeights n;
    for (auto m : {&LayerWeights::input_layernorm, &LayerWeights::q_proj, &LayerWeights::k_proj,
                   &LayerWeights::v_proj, &LayerWeights::q_bias, &LayerWeights::k_bias,
                   &LayerWeights::v_bias, &LayerWeights::o_proj,
                   &LayerWeights::post_attention_layernorm, &LayerWeights::gate_proj,
                   &LayerWeights::up_proj, &LayerWeights::down_proj})
      n.*m = cp(l.*m);
    o.layers.push_back(std::move(n));
  }
  o.norm = cp(w.norm);
  o.lm_head = c.tie_word_embeddings ? o.embed_tokens : cp(w.lm_head);
  return o;
}

ModelWeights clone(const ModelConfig& c, const ModelWeights& w) {
  return map_weights(c, w, [](const at::Tensor& t) { return t.detach().clone(); });
}

ModelWeights to_device(const ModelConfig& c, const ModelWeights& w, const c10::Device& device) {
  return map_weights(c, w, [&](const at::Tensor& t) { return t.to(device); });
}

}  // namespace ac
