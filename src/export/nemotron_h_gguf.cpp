#include "export/nemotron_h_gguf.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

// The context length the converter writes for a Nemotron-H (no RoPE: nothing limits it).
constexpr int64_t kNoRopeContext = int64_t(1) << 20;

std::vector<const LayerConfig*> present_layers(const ModelConfig& c) {
  std::vector<const LayerConfig*> out;
  for (const LayerConfig& l : c.layers)
    if (l.is_present()) out.push_back(&l);
  return out;
}

// One value for every layer that has it, or nullopt: used for the keys that are u32 when the
// layers agree (the converter's form) and i32[L] when they do not (the Puzzle form).
template <typename F>
std::optional<int64_t> common_value(const std::vector<const LayerConfig*>& ls, F value) {
  std::optional<int64_t> v;
  for (const LayerConfig* l : ls) {
    const std::optional<int64_t> x = value(*l);
    if (!x) continue;
    if (v && *v != *x) return std::nullopt;
    v = x;
  }
  return v;
}

}  // namespace

std::string nemotron_h_gguf_architecture(const ModelConfig& c) {
  for (const LayerConfig& l : c.layers)
    if (l.is_present() && l.has_moe()) return "nemotron_h_moe";
  return "nemotron_h";
}

void check_nemotron_h_gguf_exportable(const ModelConfig& c) {
  std::vector<std::string> problems;
  const std::vector<const LayerConfig*> ls = present_layers(c);
  if (ls.empty()) problems.push_back("the model has no layer");
  const LayerConfig* first_mamba = nullptr;
  const LayerConfig* first_attention = nullptr;
  const LayerConfig* first_moe = nullptr;
  int64_t first_mamba_i = -1, first_attention_i = -1, first_moe_i = -1, first_mlp_i = -1;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (!l.is_present()) continue;
    try {
      nemotron_h_layer_char(l, int64_t(i));
    } catch (const ConfigError& e) {
      problems.push_back(e.what());
      continue;
    }
    if (l.has_mamba()) {
      const Mamba2Config& m = *l.mamba;
      if (m.use_bias)
        problems.push_back(fmt::format("layer {}: mamba_proj_bias true: llama.cpp's nemotron_h "
                                       "loads no in_proj / out_proj bias", i));
      if (!first_mamba) {
        first_mamba = &l, first_mamba_i = int64_t(i);
      } else if (*first_mamba->mamba != m) {
        problems.push_back(fmt::format(
            "layer {}: Mamba-2 heads {} x head_dim {}, state {}, groups {}, conv {} differ from "
            "layer {}'s {} x {}, {}, {}, {}: the GGUF's ssm.* keys hold one shape for every "
            "layer", i, m.mamba_num_heads, m.mamba_head_dim, m.ssm_state_size, m.n_groups,
            m.conv_kernel, first_mamba_i, first_mamba->mamba->mamba_num_heads,
            first_mamba->mamba->mamba_head_dim, first_mamba->mamba->ssm_state_size,
            first_mamba->mamba->n_groups, first_mamba->mamba->conv_kernel));
      }
    } else if (l.has_attention()) {
      if (!first_attention) {
        first_attention = &l, first_attention_i = int64_t(i);
      } else if (first_attention->head_dim != l.head_dim) {
        problems.push_back(fmt::format("layer {}: head_dim {} differs from layer {}'s {}: the "
                                       "GGUF has one attention.key_length", i, l.head_dim,
                                       first_attention_i, first_attention->head_dim));
      }
    } else if (l.has_moe()) {
      const MoeConfig& e = *l.moe;
      if (!first_moe) {
        first_moe = &l, first_moe_i = int64_t(i);
      } else {
        const MoeConfig& f = *first_moe->moe;
        if (e.num_experts != f.num_experts)
          problems.push_back(fmt::format("layer {}: {} experts, layer {} has {}: llama.cpp's "
                                         "expert_count is one for the model", i, e.num_experts,
                                         first_moe_i, f.num_experts));
        if (e.shared_expert_intermediate_size != f.shared_expert_intermediate_size)
          problems.push_back(fmt::format(
              "layer {}: shared expert width {}, layer {} has {}: "
              "expert_shared_feed_forward_length is one for the model", i,
              e.shared_expert_intermediate_size, first_moe_i, f.shared_expert_intermediate_size));
        if (e.moe_latent_size != f.moe_latent_size)
          problems.push_back(fmt::format("layer {}: moe_latent_size {}, layer {} has {}: one for "
                                         "the model", i, e.moe_latent_size, first_moe_i,
                                         f.moe_latent_size));
      }
    } else if (first_mlp_i < 0) {
      first_mlp_i = int64_t(i);
    }
  }
  if (first_moe && first_mlp_i >= 0)
    problems.push_back(fmt::format(
        "layer {} is a dense MLP and layer {} an MoE: in llama.cpp's nemotron_h_moe every FFN "
        "layer is an MoE (expert_count decides), in nemotron_h none is", first_mlp_i,
        first_moe_i));
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += "\n  - " + p;
    throw ConfigError(msg("export gguf", "this Nemotron-H has no llama.cpp GGUF form ({}):{}\n"
                          "export --format hf writes it for transformers and vLLM",
                          nemotron_h_gguf_architecture(c), all));
  }
}

namespace {

GgufMetadata nemotron_h_metadata(const NemotronHModel& m, const GgufVocab& v,
                                 const GgufExportOptions& o) {
  const ModelConfig& c = m.config;
  const std::string a = nemotron_h_gguf_architecture(c);
  const std::vector<const LayerConfig*> ls = present_layers(c);
  GgufMetadata kv = gguf_general_metadata(a, o);
  kv.insert(kv.end(), {
      {a + ".vocab_size", GgufValue::u32(c.vocab_size)},
      {a + ".context_length", GgufValue::u32(kNoRopeContext)},
      {a + ".embedding_length", GgufValue::u32(c.hidden_size)},
      {a + ".block_count", GgufValue::u32(int64_t(ls.size()))},
  });
  std::vector<int64_t> F, G, H;
  const LayerConfig* mamba = nullptr;
  const LayerConfig* attention = nullptr;
  const LayerConfig* moe = nullptr;
  for (const LayerConfig* l : ls) {
    F.push_back(l->has_ffn() ? l->intermediate_size : l->has_moe() ? l->moe->moe_intermediate_size : 0);
    G.push_back(l->has_attention() ? l->num_key_value_heads : 0);
    H.push_back(l->has_attention() ? l->num_attention_heads : 0);
    if (l->has_mamba() && !mamba) mamba = l;
    if (l->has_attention() && !attention) attention = l;
    if (l->has_moe() && !moe) moe = l;
  }
  kv.push_back({a + ".feed_forward_length", GgufValue::i32_array(F)});
  const std::optional<int64_t> heads = common_value(ls, [](const LayerConfig& l) {
    return l.has_attention() ? std::optional<int64_t>(l.num_attention_heads) : std::nullopt;
  });
  kv.push_back({a + ".attention.head_count",
                heads ? GgufValue::u32(*heads) : GgufValue::i32_array(H)});
  kv.push_back({a + ".attention.head_count_kv", GgufValue::i32_array(G)});
  const int64_t head_dim = attention ? attention->head_dim : 0;
  kv.push_back({a + ".attention.key_length", GgufValue::u32(head_dim)});
  kv.push_back({a + ".attention.value_length", GgufValue::u32(head_dim)});
  kv.push_back({a + ".rope.dimension_count", GgufValue::u32(head_dim)});
  kv.push_back({a + ".rope.scaling.finetuned", GgufValue::boolean(false)});
  kv.push_back({a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_norm_eps)});
  kv.push_back({a + ".attention.layer_norm_epsilon", GgufValue::f32(c.rms_norm_eps)});
  // A model without Mamba-2 layers still needs the keys (llama.cpp reads them unconditionally).
  const Mamba2Config mc = mamba ? *mamba->mamba : Mamba2Config{};
  kv.push_back({a + ".ssm.conv_kernel", GgufValue::u32(mc.conv_kernel)});
  kv.push_back({a + ".ssm.state_size", GgufValue::u32(mc.ssm_state_size)});
  kv.push_back({a + ".ssm.group_count", GgufValue::u32(mc.n_groups)});
  kv.push_back({a + ".ssm.inner_size", GgufValue::u32(mc.d_inner())});
  kv.push_back({a + ".ssm.time_step_rank", GgufValue::u32(mc.mamba_num_heads)});
  if (moe) {
    const MoeConfig& e = *moe->moe;
    auto per_moe_layer = [&](auto field) {
      std::vector<int64_t> arr;
      for (const LayerConfig* l : ls) arr.push_back(l->has_moe() ? field(*l->moe) : 0);
      const std::optional<int64_t> one = common_value(ls, [&](const LayerConfig& l) {
        return l.has_moe() ? std::optional<int64_t>(field(*l.moe)) : std::nullopt;
      });
      return one ? GgufValue::u32(*one) : GgufValue::i32_array(arr);
    };
    kv.push_back({a + ".expert_count", GgufValue::u32(e.num_experts)});
    kv.push_back({a + ".expert_used_count",
                  per_moe_layer([](const MoeConfig& x) { return x.num_experts_per_tok; })});
    kv.push_back({a + ".expert_group_count", GgufValue::u32(m.router.n_group)});
    kv.push_back({a + ".expert_group_used_count", GgufValue::u32(m.router.topk_group)});
    kv.push_back({a + ".expert_feed_forward_length",
                  per_moe_layer([](const MoeConfig& x) { return x.moe_intermediate_size; })});
    kv.push_back({a + ".expert_shared_feed_forward_length",
                  GgufValue::u32(e.shared_expert_intermediate_size)});
    kv.push_back({a + ".expert_shared_count",
                  GgufValue::u32(e.shared_expert_intermediate_size > 0 ? 1 : 0)});
    kv.push_back({a + ".expert_weights_norm", GgufValue::boolean(m.router.norm_topk_prob)});
    kv.push_back({a + ".expert_weights_scale", GgufValue::f32(m.router.routed_scaling_factor)});
    if (e.moe_latent_size > 0)
      kv.push_back({a + ".moe_latent_size", GgufValue::u32(e.moe_latent_size)});
  }
  add_gguf_vocab_metadata(v, kv);
  kv.push_back({"autocompress.hf_config", GgufValue::str(nemotron_h_config_to_hf_json(c).dump())});
  return kv;
}

std::vector<GgufTensorOut> nemotron_h_tensors(const NemotronHModel& m, GgmlType dtype) {
  const ModelConfig& c = m.config;
  std::vector<GgufTensorOut> ts;
  auto out = [&](std::string name, const at::Tensor& t) {
    ts.push_back({std::move(name), t, gguf_tensor_type(dtype, t.sizes())});
  };
  out("token_embd.weight", m.embeddings);
  int64_t j = 0;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (!l.is_present()) continue;
    const NemotronHLayerWeights& w = m.layers[i];
    const std::string b = fmt::format("blk.{}.", j++);
    out(b + "attn_norm.weight", w.norm);
    if (l.has_mamba()) {
      const Mamba2Config& mc = *l.mamba;
      const Mamba2Weights& mw = w.mamba;
      out(b + "ssm_in.weight", mw.in_proj);
      // Always F32, as the converter keeps them (base.py prepare_tensors: SSM_CONV1D,
      // FFN_GATE_INP, names not ending in ".weight", "_norm.weight").
      ts.push_back({b + "ssm_conv1d.weight", mw.conv1d.reshape({mc.conv_dim(), mc.conv_kernel}),
                    GgmlType::F32});
      if (mw.conv1d_bias.defined()) out(b + "ssm_conv1d.bias", mw.conv1d_bias);
      out(b + "ssm_dt.bias", mw.dt_bias);
      ts.push_back({b + "ssm_a", -at::exp(mw.A_log.to(at::kFloat)).reshape({-1, 1}), GgmlType::F32});
      ts.push_back({b + "ssm_d", mw.D.to(at::kFloat).reshape({-1, 1}), GgmlType::F32});
      ts.push_back({b + "ssm_norm.weight",
                    mw.norm.to(at::kFloat).reshape({mc.n_groups, mc.d_inner() / mc.n_groups}),
                    GgmlType::F32});
      out(b + "ssm_out.weight", mw.out_proj);
    } else if (l.has_attention()) {
      out(b + "attn_q.weight", unpermute_rotary_rows(w.q_proj, l.num_attention_heads));
      out(b + "attn_k.weight", unpermute_rotary_rows(w.k_proj, l.num_key_value_heads));
      out(b + "attn_v.weight", w.v_proj);
      out(b + "attn_output.weight", w.o_proj);
    } else if (l.has_ffn()) {
      out(b + "ffn_up.weight", w.up_proj);
      out(b + "ffn_down.weight", w.down_proj);
    } else if (l.has_moe()) {
      const NemotronHMoeWeights& e = w.moe;
      ts.push_back({b + "ffn_gate_inp.weight", e.router, GgmlType::F32});
      ts.push_back({b + "exp_probs_b.bias", e.correction_bias, GgmlType::F32});
      out(b + "ffn_up_exps.weight", e.up_proj);
      out(b + "ffn_down_exps.weight", e.down_proj);
      if (e.shared_up.defined()) {
        out(b + "ffn_up_shexp.weight", e.shared_up);
        out(b + "ffn_down_shexp.weight", e.shared_down);
      }
      if (e.fc1_latent_proj.defined()) {
        out(b + "ffn_latent_down.weight", e.fc1_latent_proj);
        out(b + "ffn_latent_up.weight", e.fc2_latent_proj);
      }
    }
  }
  out("output_norm.weight", m.norm_f);
  if (!c.tie_word_embeddings) out("output.weight", m.lm_head);
  return ts;
}

}  // namespace

void write_nemotron_h_gguf(const fs::path& path, const NemotronHModel& m, const GgufVocab& vocab,
                           const GgufExportOptions& opt) {
  m.config.validate("export gguf");
  check_nemotron_h_gguf_exportable(m.config);
  check_vocab_exportable(vocab, m.config.vocab_size);
  write_gguf(path, nemotron_h_metadata(m, vocab, opt), nemotron_h_tensors(m, opt.dtype));
}

}  // namespace ac
