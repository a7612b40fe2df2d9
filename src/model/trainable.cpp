#include "model/trainable.h"

#include <fmt/format.h>

#include "model/finite.h"
#include "model/tensor_roles.h"

namespace ac {

namespace {

// The ModelWeights part of an MoE model (embedding, attention, norms, Qwen3-MoE's dense FFNs,
// head) in ModelWeights::parameters()' order, named as in the checkpoint.
void add_dense_parts(const ModelWeights& w, std::vector<NamedTensor>& out) {
  out.emplace_back("model.embed_tokens.weight", w.embed_tokens);
  for (size_t i = 0; i < w.layers.size(); ++i)
    for (const TensorRole& r : kLayerRoles)
      if ((w.layers[i].*r.layer_member).defined())
        out.emplace_back(hf_tensor_name(r, int64_t(i)), w.layers[i].*r.layer_member);
  if (w.norm.defined()) out.emplace_back("model.norm.weight", w.norm);
}

// Calls f(name, tensor&) on every tensor slot of a Nemotron-H model, defined or not, in one
// fixed order (the embedding, each layer's norm and its kind's tensors, norm_f, the head).
template <class M, class F>
void for_each_slot(M& m, F&& f) {
  f(std::string("model.embeddings.weight"), m.embeddings);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    const std::string p = fmt::format("model.layers.{}.", i), x = p + "mixer.";
    f(p + "norm.weight", l.norm);
    f(x + "q_proj.weight", l.q_proj);
    f(x + "k_proj.weight", l.k_proj);
    f(x + "v_proj.weight", l.v_proj);
    f(x + "o_proj.weight", l.o_proj);
    f(x + "up_proj.weight", l.up_proj);
    f(x + "down_proj.weight", l.down_proj);
    auto& mb = l.mamba;
    f(x + "in_proj.weight", mb.in_proj);
    f(x + "in_proj.bias", mb.in_proj_bias);
    f(x + "conv1d.weight", mb.conv1d);
    f(x + "conv1d.bias", mb.conv1d_bias);
    f(x + "dt_bias", mb.dt_bias);
    f(x + "A_log", mb.A_log);
    f(x + "D", mb.D);
    f(x + "norm.weight", mb.norm);
    f(x + "out_proj.weight", mb.out_proj);
    f(x + "out_proj.bias", mb.out_proj_bias);
    auto& e = l.moe;
    f(x + "gate.weight", e.router);
    f(x + "gate.e_score_correction_bias", e.correction_bias);
    f(x + "experts.up_proj", e.up_proj);
    f(x + "experts.down_proj", e.down_proj);
    f(x + "fc1_latent_proj.weight", e.fc1_latent_proj);
    f(x + "fc2_latent_proj.weight", e.fc2_latent_proj);
    f(x + "shared_experts.up_proj.weight", e.shared_up);
    f(x + "shared_experts.down_proj.weight", e.shared_down);
  }
  f(std::string("model.norm_f.weight"), m.norm_f);
  f(std::string("lm_head.weight"), m.lm_head);
}

bool is_buffer(const std::string& name) {
  const std::string suffix = "e_score_correction_bias";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<at::Tensor> tensors_of(const std::vector<NamedTensor>& named) {
  std::vector<at::Tensor> out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

}  // namespace

std::vector<NamedTensor> named_parameters(const LlamaModel& m) {
  std::vector<NamedTensor> out;
  add_dense_parts(m.weights, out);
  if (m.weights.lm_head.defined() && !m.weights.lm_head.is_same(m.weights.embed_tokens))
    out.emplace_back("lm_head.weight", m.weights.lm_head);
  return out;
}

std::vector<NamedTensor> named_parameters(const MoeModel& m) {
  std::vector<NamedTensor> out;
  add_dense_parts(m.weights, out);
  for (size_t i = 0; i < m.moe.size(); ++i) {
    const MoeLayerWeights& e = m.moe[i];
    const std::string p = fmt::format("model.layers.{}.mlp.", i);
    for (const auto& [role, t] : {NamedTensor{"gate.weight", e.router},
                                  NamedTensor{"experts.gate_proj", e.gate_proj},
                                  NamedTensor{"experts.up_proj", e.up_proj},
                                  NamedTensor{"experts.down_proj", e.down_proj}})
      if (t.defined()) out.emplace_back(p + role, t);
  }
  if (m.weights.lm_head.defined() && !m.weights.lm_head.is_same(m.weights.embed_tokens))
    out.emplace_back("lm_head.weight", m.weights.lm_head);
  return out;
}

std::vector<NamedTensor> named_parameters(const NemotronHModel& m) {
  std::vector<NamedTensor> out;
  for_each_slot(m, [&](const std::string& name, const at::Tensor& t) {
    if (!t.defined() || is_buffer(name)) return;
    if (&t == &m.lm_head && t.is_same(m.embeddings)) return;  // the tied head: once
    out.emplace_back(name, t);
  });
  return out;
}

std::vector<at::Tensor> trainable_parameters(const LlamaModel& m) {
  return m.weights.parameters();
}
std::vector<at::Tensor> trainable_parameters(const MoeModel& m) {
  return tensors_of(named_parameters(m));
}
std::vector<at::Tensor> trainable_parameters(const NemotronHModel& m) {
  return tensors_of(named_parameters(m));
}

LlamaModel model_to_device(const LlamaModel& m, const c10::Device& device) {
  return LlamaModel{m.config, to_device(m.config, m.weights, device)};
}

MoeModel model_to_device(const MoeModel& m, const c10::Device& device) {
  MoeModel o = m;
  o.weights = to_device(m.config, m.weights, device);
  auto to = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  for (MoeLayerWeights& e : o.moe)
    e = MoeLayerWeights{to(e.router), to(e.gate_proj), to(e.up_proj), to(e.down_proj)};
  return o;
}

NemotronHModel model_to_device(const NemotronHModel& m, const c10::Device& device) {
  NemotronHModel o = m;
  for_each_slot(o, [&](const std::string&, at::Tensor& t) {
    if (t.defined()) t = t.to(device);
  });
  tie_head(o);
  return o;
}

NemotronHModel clone_model(const NemotronHModel& m) {
  NemotronHModel o = m;
  for_each_slot(o, [](const std::string&, at::Tensor& t) {
    if (t.defined()) t = t.clone();
  });
  tie_head(o);
  return o;
}

void tie_head(LlamaModel& m) {
  if (m.config.tie_word_embeddings) m.weights.lm_head = m.weights.embed_tokens;
}
void tie_head(MoeModel& m) {
  if (m.config.tie_word_embeddings) m.weights.lm_head = m.weights.embed_tokens;
}
void tie_head(NemotronHModel& m) {
  if (m.config.tie_word_embeddings) m.lm_head = m.embeddings;
}

void require_finite(const MoeModel& m, const std::string& file, const char* stage, bool allow) {
  require_finite(named_parameters(m), file, stage, allow);
}
void require_finite(const NemotronHModel& m, const std::string& file, const char* stage,
                    bool allow) {
  require_finite(named_parameters(m), file, stage, allow);
}

std::string model_kind_name(const LlamaModel&) { return "Llama-family"; }
std::string model_kind_name(const MoeModel& m) {
  return fmt::format("MoE ({})", m.config.model_type);
}
std::string model_kind_name(const NemotronHModel&) { return "Nemotron-H"; }

}  // namespace ac
