#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "common/error.h"
#include "model/families.h"
#include "model/moe_family_config.h"
#include "model/tensor_roles.h"

namespace ac {

std::vector<at::Tensor> ModelWeights::parameters() const {
  std::vector<at::Tensor> out{embed_tokens};
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  for (const auto& l : layers)
    for (const TensorRole& r : kLayerRoles) add(l.*r.layer_member);
  add(norm);
  if (lm_head.defined() && !lm_head.is_same(embed_tokens)) out.push_back(lm_head);
  return out;
}

std::string hf_layer_name(int64_t layer, const std::string& role) {
  const TensorRole& r = tensor_role(role);
  AC_CHECK(r.per_layer(), "{} is not a per-layer role", role);
  return hf_tensor_name(r, layer);
}

at::Tensor take_tensor(const TensorMap& m, const std::string& name,
                       const std::vector<int64_t>& shape, const char* field,
                       const std::string& file) {
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

namespace {

at::Tensor take_role(const TensorMap& m, const ModelConfig& c, const TensorRole& r,
                     int64_t layer, const std::string& file) {
  const LayerConfig* l = r.per_layer() ? &c.layers[size_t(layer)] : nullptr;
  return take_tensor(m, hf_tensor_name(r, layer), role_shape(r, c, l), r.shape_field, file);
}

// What a known kind of unexpected tensor is, for the message ("" for the others).
std::string unexpected_hint(const std::vector<std::string>& names) {
  auto any_ends_with = [&](const std::string& tail) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
    });
  };
  if (any_ends_with(".o_proj.bias"))
    return " (an o_proj bias: transformers' attention_bias on Llama, Mistral, Qwen3 and DeciLM "
           "biases o_proj too, which the forward does not compute; q/k/v biases alone are "
           "Qwen2's)";
  if (any_ends_with("_proj.bias"))
    return " (a projection bias the config does not enable: attention_bias gives q/k/v biases, "
           "mlp_bias is not implemented)";
  if (any_ends_with("norm.weight"))
    return " (a norm of another family: q_norm / k_norm are Qwen3's, enabled by model_type "
           "qwen3)";
  return "";
}

}  // namespace

// A tensor the config has no role for is refused: the forward would run without it and give
// other logits than the model's (a Qwen3's q/k norms read as another family, the o_proj and MLP
// biases of a Llama with attention_bias / mlp_bias). RoPE's inv_freq buffer (older checkpoints)
// is derived from config.json, and a tied head written out anyway is the embedding itself.
void refuse_unexpected_tensors(const ModelConfig& c, const TensorMap& m, const std::string& file,
                               const std::set<std::string>& also_expected) {
  std::set<std::string> expected = also_expected;
  for (const TensorRole& r : kModelRoles)
    if (role_present(r, c)) expected.insert(hf_tensor_name(r));
  for (int64_t i = 0; i < c.num_layers(); ++i)
    for (const TensorRole& r : kLayerRoles)
      if (role_present(r, c, &c.layers[size_t(i)])) expected.insert(hf_tensor_name(r, i));
  const std::string suffix = ".rotary_emb.inv_freq";
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : m) {
    if (expected.count(name)) continue;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(),
                                                    suffix) == 0)
      continue;
    const std::string embed = hf_tensor_name(tensor_role("embed_tokens"));
    if (name == hf_tensor_name(tensor_role("lm_head")) && c.tie_word_embeddings &&
        m.count(embed) && at::equal(t, m.at(embed)))
      continue;
    unexpected.push_back(name);
  }
  if (unexpected.empty()) return;
  const size_t shown = std::min<size_t>(unexpected.size(), 4);
  throw FormatError(fmt::format(
      "[load_checkpoint] {}: tensor{} {}{} {} no place in the model config.json describes "
      "(model_type {}, {}): expected none, the forward would run without {}{}. The forward "
      "computes {} with the tensors of transformers' class for each",
      file, unexpected.size() > 1 ? "s" : "",
      fmt::join(unexpected.begin(), unexpected.begin() + long(shown), ", "),
      unexpected.size() > shown ? fmt::format(" and {} more", unexpected.size() - shown) : "",
      unexpected.size() > 1 ? "have" : "has", c.model_type, c.architecture,
      unexpected.size() > 1 ? "them" : "it", unexpected_hint(unexpected),
      is_moe_family_model_type(c.model_type)
          ? std::string("qwen3_moe and mixtral (model/moe_model.h)")
          : fmt::format("{}", fmt::join(dense_model_types(), ", "))));
}

TensorMap to_tensor_map(const ModelConfig& c, const ModelWeights& w) {
  TensorMap m;
  for (const TensorRole& r : kModelRoles)
    if (role_present(r, c)) m[hf_tensor_name(r)] = role_tensor(w, r);
  for (int64_t i = 0; i < c.num_layers(); ++i)
    for (const TensorRole& r : kLayerRoles)
      if (role_present(r, c, &c.layers[size_t(i)])) m[hf_tensor_name(r, i)] = role_tensor(w, r, i);
  return m;
}

// In HF's state_dict order (embeddings, layers, final norm, head), so that the first error
// reported is the first tensor a reader of the file meets.
ModelWeights from_tensor_map(const ModelConfig& c, const TensorMap& m, const std::string& file) {
  require_dense(c, "load_weights: " + file);
  ModelWeights w = role_weights_from_tensor_map(c, m, file);
  refuse_unexpected_tensors(c, m, file);
  return w;
}

ModelWeights role_weights_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                          const std::string& file) {
  ModelWeights w;
  w.embed_tokens = take_role(m, c, tensor_role("embed_tokens"), -1, file);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights lw;
    for (const TensorRole& r : kLayerRoles)
      if (role_present(r, c, &c.layers[size_t(i)]))
        lw.*r.layer_member = take_role(m, c, r, i, file);
    w.layers.push_back(std::move(lw));
  }
  w.norm = take_role(m, c, tensor_role("norm"), -1, file);
  const TensorRole& head = tensor_role("lm_head");
  w.lm_head = role_present(head, c) ? take_role(m, c, head, -1, file) : w.embed_tokens;
  return w;
}

ModelWeights random_weights(const ModelConfig& c, uint64_t seed, double std) {
  require_dense(c, "random_weights");
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
    for (const TensorRole& r : kLayerRoles) {
      if (!role_present(r, c, &l)) continue;
      const std::vector<int64_t> shape = role_shape(r, c, &l);
      const bool is_norm = r.shape == RoleShape::D || r.shape == RoleShape::Hd;
      lw.*r.layer_member = is_norm ? norm_w(shape[0]) : normal(shape, std);
    }
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
    for (const TensorRole& r : kLayerRoles) n.*r.layer_member = cp(l.*r.layer_member);
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
