#include "export/engine_loaders.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_io.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace ac {
using json = nlohmann::json;

namespace {

// A loader stops here (a Python KeyError / AttributeError / assert, a C++ throw): the message
// is the one line the checker reports.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Shapes = std::map<std::string, std::vector<int64_t>>;

// Python's a // b for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// DeciLM's FFN width, as the loaders write it (vLLM nemotron_nas.py and TensorRT-LLM
// nemotron_nas/convert.py _ffn_mult_to_intermediate_size, _find_multiple): written out again
// here rather than taken from model/config.h, so that the writer's rule is checked against the
// loaders' own.
int64_t ffn_mult_to_intermediate_size(double ffn_mult, int64_t hidden) {
  const auto n = int64_t(2 * ffn_mult * double(hidden) / 3);  // Python int(): toward zero
  return n % 256 == 0 ? n : n + 256 - n % 256;
}

int64_t need_int(const json& j, const std::string& key, const std::string& where,
                 const char* engine) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    throw Refused(fmt::format("{}{} is missing; {} reads it", where, key, engine));
  if (!json_holds<int64_t>(j[key]) || j[key].get<int64_t>() <= 0)
    throw Refused(fmt::format("{}{} is {}, {} needs a positive integer", where, key,
                              j[key].dump(), engine));
  return j[key].get<int64_t>();
}

bool flag(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

// The tensors' shapes of an HF folder: model.safetensors, or every shard of the index.
Shapes checkpoint_shapes(const fs::path& dir) {
  std::set<std::string> files;
  if (fs::exists(dir / "model.safetensors.index.json")) {
    const json idx = read_json_file(dir / "model.safetensors.index.json");
    for (const auto& [name, file] : idx.at("weight_map").items()) files.insert(file.get<std::string>());
  } else {
    files.insert("model.safetensors");
  }
  Shapes out;
  for (const std::string& f : files) {
    const SafetensorsFile st(dir / f);
    for (const std::string& n : st.names()) out[n] = st.shape(n);
  }
  return out;
}

// One layer as the loader builds it.
struct BuiltLayer {
  enum Kind { kNone, kFull, kLinear } attention = kNone, ffn = kNone;
  int64_t H = 0, G = 0, Hd = 0, F = 0;
};

// The model a loader builds from config.json: the parameters it will look for.
struct Built {
  const char* engine = "";
  int64_t D = 0, V = 0;
  bool tied = false, lm_head_read_when_tied = false;  // TensorRT-LLM's DeciLM reads it anyway
  bool qkv_bias = false, o_bias = false;
  bool qk_norm = false;  // vLLM qwen3.py Qwen3Attention: q_norm, k_norm = RMSNorm(head_dim)
  bool unexpected_tensor_refused = false;  // vLLM: a tensor with no parameter is a KeyError
  std::vector<BuiltLayer> layers;
};

struct Param {
  std::vector<int64_t> shape;
  std::string why;  // what the shape is made of
  bool required = true;
};

std::map<std::string, Param> params_of(const Built& b) {
  std::map<std::string, Param> p;
  const int64_t D = b.D;
  p["model.embed_tokens.weight"] = {{b.V, D}, "vocab_size, hidden_size"};
  p["model.norm.weight"] = {{D}, "hidden_size"};
  if (!b.tied || b.lm_head_read_when_tied)
    p["lm_head.weight"] = {{b.V, D}, b.tied ? "read even with tie_word_embeddings true"
                                            : "vocab_size, hidden_size"};
  for (size_t i = 0; i < b.layers.size(); ++i) {
    const BuiltLayer& l = b.layers[i];
    const std::string pre = fmt::format("model.layers.{}.", i);
    const std::string q = fmt::format("num_attention_heads {} x head_dim {}", l.H, l.Hd);
    const std::string kv = fmt::format("KV heads {} x head_dim {}", l.G, l.Hd);
    if (l.attention == BuiltLayer::kFull) {
      p[pre + "input_layernorm.weight"] = {{D}, "hidden_size"};
      p[pre + "self_attn.q_proj.weight"] = {{l.H * l.Hd, D}, q};
      p[pre + "self_attn.k_proj.weight"] = {{l.G * l.Hd, D}, kv};
      p[pre + "self_attn.v_proj.weight"] = {{l.G * l.Hd, D}, kv};
      p[pre + "self_attn.o_proj.weight"] = {{D, l.H * l.Hd}, q};
      if (b.qkv_bias) {
        p[pre + "self_attn.q_proj.bias"] = {{l.H * l.Hd}, q};
        p[pre + "self_attn.k_proj.bias"] = {{l.G * l.Hd}, kv};
        p[pre + "self_attn.v_proj.bias"] = {{l.G * l.Hd}, kv};
      }
      if (b.o_bias) p[pre + "self_attn.o_proj.bias"] = {{D}, "hidden_size"};
      if (b.qk_norm) {
        p[pre + "self_attn.q_norm.weight"] = {{l.Hd}, fmt::format("head_dim {}", l.Hd)};
        p[pre + "self_attn.k_norm.weight"] = {{l.Hd}, fmt::format("head_dim {}", l.Hd)};
      }
    } else if (l.attention == BuiltLayer::kLinear) {
      p[pre + "input_layernorm.weight"] = {{D}, "hidden_size"};
      p[pre + "self_attn.linear_attn.weight"] = {{D, D}, "attention replace_with_linear"};
    }
    const std::string f = fmt::format("intermediate_size {}", l.F);
    if (l.ffn == BuiltLayer::kFull) {
      p[pre + "post_attention_layernorm.weight"] = {{D}, "hidden_size"};
      p[pre + "mlp.gate_proj.weight"] = {{l.F, D}, f};
      p[pre + "mlp.up_proj.weight"] = {{l.F, D}, f};
      p[pre + "mlp.down_proj.weight"] = {{D, l.F}, f};
    } else if (l.ffn == BuiltLayer::kLinear) {
      p[pre + "post_attention_layernorm.weight"] = {{D}, "hidden_size"};
      p[pre + "mlp.linear_mlp.weight"] = {{D, D}, "ffn replace_with_linear"};
    }
  }
  return p;
}

// "layer 3: " for model.layers.3.*, "" otherwise.
std::string layer_prefix(const std::string& name, const char* marker) {
  const std::string m = marker;
  if (name.rfind(m, 0) != 0) return "";
  const size_t end = name.find('.', m.size());
  return "layer " + name.substr(m.size(), end - m.size()) + ": ";
}

std::string dims(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The weight loading: every parameter needs its tensor with its shape.
void compare_tensors(const Built& b, const Shapes& file, std::vector<std::string>& bad) {
  const std::map<std::string, Param> params = params_of(b);
  for (const auto& [name, p] : params) {
    auto it = file.find(name);
    const std::string at = layer_prefix(name, "model.layers.");
    if (it == file.end()) {
      if (p.required)
        bad.push_back(fmt::format("{}tensor '{}' is missing: {} builds it {} ({})", at, name,
                                  b.engine, dims(p.shape), p.why));
    } else if (it->second != p.shape) {
      bad.push_back(fmt::format("{}tensor '{}' has shape {}, {} builds {} ({})", at, name,
                                dims(it->second), b.engine, dims(p.shape), p.why));
    }
  }
  if (!b.unexpected_tensor_refused) return;
  for (const auto& [name, shape] : file)
    if (!params.count(name) && !(name == "lm_head.weight" && b.tied) &&
        name.find("rotary_emb.inv_freq") == std::string::npos)
      bad.push_back(fmt::format("{}tensor '{}' has no parameter in the model {} builds",
                                layer_prefix(name, "model.layers."), name, b.engine));
}

// The divisibility the loaders assert with `tp` GPUs (the same for vLLM and TensorRT-LLM).
void tensor_parallel_checks(const Built& b, int64_t tp, std::vector<std::string>& bad) {
  if (tp <= 1) return;
  for (size_t i = 0; i < b.layers.size(); ++i) {
    const BuiltLayer& l = b.layers[i];
    if (l.attention == BuiltLayer::kFull) {
      if (l.H % tp)
        bad.push_back(fmt::format("layer {}: num_attention_heads {} is not a multiple of "
                                  "tensor_parallel {}", i, l.H, tp));
      if (l.G >= tp ? l.G % tp : tp % l.G)
        bad.push_back(fmt::format("layer {}: {} KV heads neither a multiple nor a divisor of "
                                  "tensor_parallel {}", i, l.G, tp));
    }
    if (l.ffn == BuiltLayer::kFull && l.F % tp)
      bad.push_back(fmt::format("layer {}: intermediate_size {} is not a multiple of "
                                "tensor_parallel {}", i, l.F, tp));
  }
}

// A DeciLM block's attention as both loaders build it: the global num_attention_heads H and
// H // n_heads_in_group KV heads (vLLM nemotron_nas.py DeciLMDecoderLayer; TensorRT-LLM
// convert.py hf_block_config_to_layer_config). `at` prefixes every message.
void deci_attention(const json& a, const std::string& at, int64_t H, int64_t Hd,
                    const char* engine, BuiltLayer& l, std::vector<std::string>& bad) {
  l.attention = BuiltLayer::kFull;
  l.H = H, l.Hd = Hd;
  const int64_t n = need_int(a, "n_heads_in_group", at + "attention.", engine);
  l.G = floor_div(H, n);
  if (H % n)
    bad.push_back(fmt::format("{}attention.n_heads_in_group {} does not divide "
                              "num_attention_heads {}: {} builds {} KV heads",
                              at, n, H, engine, l.G));
  if (a.contains("num_attention_heads") && a["num_attention_heads"] != json(H))
    bad.push_back(fmt::format("{}attention.num_attention_heads {} is not read: {} builds every "
                              "attention layer with config.json num_attention_heads {}",
                              at, a["num_attention_heads"].dump(), engine, H));
}

const json& block_part(const json& blocks, size_t i, const char* part) {
  const json& b = blocks[i];
  if (!b.is_object() || !b.contains(part) || !b[part].is_object())
    throw Refused(fmt::format("layer {}: block_configs[{}].{} is missing", i, i, part));
  return b[part];
}

// ---------------------------------------------------------------------------------------------
// vLLM

void vllm_decilm_layers(const json& c, Built& b, int64_t H, int64_t Hd, int64_t L,
                        std::vector<std::string>& bad) {
  const json& blocks = c.contains("block_configs") ? c["block_configs"] : json();
  if (!blocks.is_array() || int64_t(blocks.size()) < L)
    throw Refused(fmt::format("config.json: block_configs has {} entries, num_hidden_layers is {}: "
                              "DeciLMDecoderLayer reads config.block_configs[layer_idx]",
                              blocks.is_array() ? blocks.size() : 0, L));
  const std::string act = c.value("hidden_act", std::string("silu"));
  for (int64_t i = 0; i < L; ++i) {
    const json& a = block_part(blocks, size_t(i), "attention");
    const json& f = block_part(blocks, size_t(i), "ffn");
    const std::string at = fmt::format("layer {}: block_configs[{}].", i, i);
    BuiltLayer l;
    if (!flag(a, "no_op")) {
      deci_attention(a, at, H, Hd, "vLLM", l, bad);
      if (l.G == 0) throw Refused(at + "attention: 0 KV heads (n_heads_in_group > num_attention_heads)");
    }
    if (!flag(f, "no_op")) {
      l.ffn = BuiltLayer::kFull;
      if (f.contains("ffn_mult")) {
        if (!f["ffn_mult"].is_number())
          throw Refused(fmt::format("{}ffn.ffn_mult is {} but ffn.no_op is false: "
                                    "_ffn_mult_to_intermediate_size needs a number",
                                    at, f["ffn_mult"].dump()));
        l.F = ffn_mult_to_intermediate_size(f["ffn_mult"].get<double>(), b.D);
        if (f.contains("intermediate_size") && f["intermediate_size"] != json(l.F))
          bad.push_back(fmt::format("{}ffn.intermediate_size {} is not read: vLLM takes ffn_mult "
                                    "{} -> intermediate_size {}", at,
                                    f["intermediate_size"].dump(), f["ffn_mult"].dump(), l.F));
      } else {
        l.F = need_int(f, "intermediate_size", at + "ffn.", "vLLM");
      }
      const std::string layer_act = f.value("hidden_act", act);
      if (layer_act != "silu")
        bad.push_back(fmt::format("{}ffn hidden_act '{}': LlamaMLP supports silu only", at,
                                  layer_act));
    }
    b.layers.push_back(l);
  }
}

Built vllm_build(const json& c, std::vector<std::string>& bad) {
  Built b;
  b.engine = "vLLM";
  b.unexpected_tensor_refused = true;
  const std::string cfg = "config.json: ";
  b.D = need_int(c, "hidden_size", cfg, "vLLM");
  b.V = need_int(c, "vocab_size", cfg, "vLLM");
  const int64_t H = need_int(c, "num_attention_heads", cfg, "vLLM");
  const int64_t L = need_int(c, "num_hidden_layers", cfg, "vLLM");
  // llama.py LlamaAttention: config.head_dim when set, else hidden_size // num_attention_heads.
  const int64_t Hd = c.contains("head_dim") && !c["head_dim"].is_null()
                         ? need_int(c, "head_dim", cfg, "vLLM")
                         : floor_div(b.D, H);
  b.tied = flag(c, "tie_word_embeddings");
  const std::string type = c.value("model_type", std::string());
  const bool bias = flag(c, "attention_bias") || flag(c, "bias");
  b.qkv_bias = bias || type == "qwen2";
  b.o_bias = bias && type != "qwen2";  // nemotron_nas.py / llama.py: bias_o_proj = attention_bias
  b.qk_norm = type == "qwen3";
  if (type == "nemotron-nas") {
    vllm_decilm_layers(c, b, H, Hd, L, bad);
  } else {
    BuiltLayer l;
    l.attention = l.ffn = BuiltLayer::kFull;
    l.H = H, l.Hd = Hd;
    l.G = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()
              ? need_int(c, "num_key_value_heads", cfg, "vLLM")
              : H;
    l.F = need_int(c, "intermediate_size", cfg, "vLLM");
    if (H % l.G)
      bad.push_back(fmt::format("config.json: num_attention_heads {} is not a multiple of "
                                "num_key_value_heads {}", H, l.G));
    b.layers.assign(size_t(L), l);
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// TensorRT-LLM

BuiltLayer trtllm_block(const json& blocks, int64_t i, const json& c, int64_t H, int64_t Hd,
                        int64_t D, std::vector<std::string>& bad) {
  const json& a = block_part(blocks, size_t(i), "attention");
  const json& f = block_part(blocks, size_t(i), "ffn");
  const std::string at = fmt::format("layer {}: block_configs[{}].", i, i);
  // convert.py hf_block_config_to_layer_config reads these keys of the dict without defaults.
  for (const auto& [part, name] : {std::pair<const json&, const char*>{a, "attention"},
                                   std::pair<const json&, const char*>{f, "ffn"}})
    for (const char* key : {"no_op", "replace_with_linear"})
      if (!part.contains(key))
        throw Refused(fmt::format("{}{}.{} is missing: hf_block_config_to_layer_config reads "
                                  "it (KeyError)", at, name, key));
  BuiltLayer l;
  if (flag(a, "no_op")) {
  } else if (flag(a, "replace_with_linear")) {
    l.attention = BuiltLayer::kLinear;
  } else if (a.contains("sparsify") && !a["sparsify"].is_null() && a["sparsify"] != json(false)) {
    throw Refused(at + "attention.sparsify: TensorRT-LLM raises NotImplementedError");
  } else {
    deci_attention(a, at, H, Hd, "TensorRT-LLM", l, bad);
    // DeciConfig.get_layer_config: `num_key_value_heads or self.num_key_value_heads`.
    if (l.G == 0) l.G = c.value("num_key_value_heads", H);
  }
  if (flag(f, "no_op")) {
  } else if (flag(f, "replace_with_linear")) {
    l.ffn = BuiltLayer::kLinear;
  } else if (f.contains("sparsify") && !f["sparsify"].is_null() && f["sparsify"] != json(false)) {
    throw Refused(at + "ffn.sparsify: TensorRT-LLM raises NotImplementedError");
  } else {
    l.ffn = BuiltLayer::kFull;
    if (!f.contains("ffn_mult") || !f["ffn_mult"].is_number())
      throw Refused(fmt::format("{}ffn.ffn_mult is {}: hf_block_config_to_layer_config computes "
                                "the width from it (intermediate_size is not read)", at,
                                f.contains("ffn_mult") ? f["ffn_mult"].dump() : "missing"));
    l.F = ffn_mult_to_intermediate_size(f["ffn_mult"].get<double>(), D);
    if (f.contains("intermediate_size") && f["intermediate_size"] != json(l.F))
      bad.push_back(fmt::format("{}ffn.intermediate_size {} is not read: TensorRT-LLM takes "
                                "ffn_mult {} -> intermediate_size {}", at,
                                f["intermediate_size"].dump(), f["ffn_mult"].dump(), l.F));
    if (l.F == 0) l.F = c.value("intermediate_size", int64_t(4) * D);  // `or self.intermediate_size`
  }
  return l;
}

Built trtllm_build(const json& c, std::vector<std::string>& bad) {
  Built b;
  b.engine = "TensorRT-LLM";
  const std::string cfg = "config.json: ";
  b.D = need_int(c, "hidden_size", cfg, "TensorRT-LLM");
  b.V = need_int(c, "vocab_size", cfg, "TensorRT-LLM");
  const int64_t H = need_int(c, "num_attention_heads", cfg, "TensorRT-LLM");
  const int64_t L = need_int(c, "num_hidden_layers", cfg, "TensorRT-LLM");
  b.tied = flag(c, "tie_word_embeddings");
  const std::string type = c.value("model_type", std::string());
  const bool has_head_dim = c.contains("head_dim") && !c["head_dim"].is_null();
  if (type == "nemotron-nas" || type == "deci") {
    // DeciConfig.from_hugging_face passes no head_size: PretrainedConfig derives it.
    const int64_t Hd = floor_div(b.D, H);
    if (has_head_dim && c["head_dim"] != json(Hd))
      bad.push_back(fmt::format("config.json: head_dim {} is not read: TensorRT-LLM's DeciConfig "
                                "derives head_size = hidden_size // num_attention_heads = {} // {} "
                                "= {}", c["head_dim"].dump(), b.D, H, Hd));
    b.lm_head_read_when_tied = true;  // convert.py load_model_weights: load_weight("lm_head.weight")
    const json& blocks = c.contains("block_configs") ? c["block_configs"] : json();
    if (!blocks.is_array() || int64_t(blocks.size()) != L)
      throw Refused(fmt::format("config.json: block_configs has {} entries, num_hidden_layers "
                                "is {}: DeciConfig asserts they are equal",
                                blocks.is_array() ? blocks.size() : 0, L));
    for (int64_t i = 0; i < L; ++i) b.layers.push_back(trtllm_block(blocks, i, c, H, Hd, b.D, bad));
  } else {
    // llama/config.py LLaMAConfig.from_hugging_face: head_dim read when present.
    BuiltLayer l;
    l.attention = l.ffn = BuiltLayer::kFull;
    l.H = H;
    l.Hd = has_head_dim ? need_int(c, "head_dim", cfg, "TensorRT-LLM") : floor_div(b.D, H);
    l.G = c.contains("num_key_value_heads") ? need_int(c, "num_key_value_heads", cfg, "TensorRT-LLM") : H;
    l.F = need_int(c, "intermediate_size", cfg, "TensorRT-LLM");
    b.qkv_bias = flag(c, "attention_bias") || type == "qwen2";
    b.layers.assign(size_t(L), l);
  }
  return b;
}

template <typename Build>
std::vector<std::string> hf_load_errors(const fs::path& dir, int64_t tp, Build build) {
  std::vector<std::string> bad;
  try {
    const json c = read_json_file(dir / "config.json");
    const Built b = build(c, bad);
    compare_tensors(b, checkpoint_shapes(dir), bad);
    tensor_parallel_checks(b, tp, bad);
  } catch (const Refused& e) {
    bad.push_back(e.what());
  }
  return bad;
}

// ---------------------------------------------------------------------------------------------
// llama.cpp

// llama_model_loader::get_key_or_arr: one integer for every layer, or exactly n_layer of them;
// absent: `fallback`.
std::vector<int64_t> key_or_arr(const GgufFile& g, const std::string& key, int64_t n,
                                const std::vector<int64_t>& fallback) {
  const GgufValue* v = g.find(key);
  if (!v) return fallback;
  if (v->is_array && int64_t(v->ints.size()) != n)
    throw Refused(fmt::format("{}: key {} has wrong array length; expected {}, got {}",
                              g.file(), key, n, v->ints.size()));
  if (v->is_array) return v->ints;
  if (v->ints.size() != 1) throw Refused(fmt::format("{}: key {} is not an integer", g.file(), key));
  return std::vector<int64_t>(size_t(n), v->ints[0]);
}

int64_t key_or(const GgufFile& g, const std::string& key, int64_t fallback) {
  const GgufValue* v = g.find(key);
  return v && !v->is_array && v->ints.size() == 1 ? v->ints[0] : fallback;
}

struct GgmlParam {
  std::vector<int64_t> ne;
  bool required = true;
};

}  // namespace

std::vector<std::string> vllm_load_errors(const fs::path& export_dir, int64_t tensor_parallel) {
  return hf_load_errors(export_dir, tensor_parallel, vllm_build);
}

std::vector<std::string> tensorrt_llm_load_errors(const fs::path& export_dir,
                                                  int64_t tensor_parallel) {
  return hf_load_errors(export_dir, tensor_parallel, trtllm_build);
}

std::vector<std::string> llama_cpp_load_errors(const fs::path& gguf) {
  std::vector<std::string> bad;
  try {
    const GgufFile g(gguf);
    const std::string a = g.get_string("general.architecture");
    if (a != "llama" && a != "deci")
      throw Refused(fmt::format("general.architecture '{}': checked are llama and deci", a));
    const int64_t n_embd = g.get_int(a + ".embedding_length");
    const int64_t n_layer = g.get_int(a + ".block_count");
    const std::vector<int64_t> zeros(size_t(n_layer), 0);
    const std::vector<int64_t> n_ff = key_or_arr(g, a + ".feed_forward_length", n_layer, zeros);
    const std::vector<int64_t> n_head = key_or_arr(g, a + ".attention.head_count", n_layer, zeros);
    const std::vector<int64_t> n_head_kv =
        key_or_arr(g, a + ".attention.head_count_kv", n_layer, n_head);
    // load_hparams: the head sizes come from layer 0's head count unless given, and are global.
    int64_t hk = 0, hv = 0, n_rot = 0;
    if (n_head[0] > 0) {
      hk = key_or(g, a + ".attention.key_length", n_embd / n_head[0]);
      hv = key_or(g, a + ".attention.value_length", n_embd / n_head[0]);
      n_rot = key_or(g, a + ".rope.dimension_count", hk);
      if (n_rot != hk) bad.push_back(fmt::format("invalid n_rot: {}, expected {}", n_rot, hk));
    }
    const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
    const int64_t n_vocab = tokens ? int64_t(tokens->size())
                                   : g.ggml_ne("token_embd.weight").back();
    std::map<std::string, GgmlParam> want;
    want["token_embd.weight"] = {{n_embd, n_vocab}};
    want["output_norm.weight"] = {{n_embd}};
    want["output.weight"] = {{n_embd, n_vocab}, false};
    if (n_rot > 0) want["rope_freqs.weight"] = {{n_rot / 2}, false};
    for (int64_t i = 0; i < n_layer; ++i) {
      const std::string p = fmt::format("blk.{}.", i);
      const int64_t H = n_head[size_t(i)], G = n_head_kv[size_t(i)], F = n_ff[size_t(i)];
      if (G == 0 && H > 0) {  // DeciLM linear attention
        want[p + "attn_norm.weight"] = {{n_embd}};
        want[p + "attn_output.weight"] = {{n_embd, n_embd}};
      } else if (G > 0) {
        if (H % G)
          bad.push_back(fmt::format("layer {}: attention.head_count {} is not a multiple of "
                                    "head_count_kv {} (ggml_mul_mat broadcasts KV heads)", i, H, G));
        want[p + "attn_norm.weight"] = {{n_embd}};
        want[p + "attn_q.weight"] = {{n_embd, hk * H}};
        want[p + "attn_k.weight"] = {{n_embd, hk * G}};
        want[p + "attn_v.weight"] = {{n_embd, hv * G}};
        want[p + "attn_output.weight"] = {{hk * H, n_embd}};
        want[p + "attn_q.bias"] = {{hk * H}, false};
        want[p + "attn_k.bias"] = {{hk * G}, false};
        want[p + "attn_v.bias"] = {{hv * G}, false};
        want[p + "attn_output.bias"] = {{n_embd}, false};
      }
      if (F > 0) {
        want[p + "ffn_norm.weight"] = {{n_embd}};
        want[p + "ffn_gate.weight"] = {{n_embd, F}};
        want[p + "ffn_down.weight"] = {{F, n_embd}};
        want[p + "ffn_up.weight"] = {{n_embd, F}};
      }
    }
    for (const auto& [name, p] : want) {
      const std::string at = layer_prefix(name, "blk.");
      if (!g.has_tensor(name)) {
        if (p.required)
          bad.push_back(fmt::format("{}tensor '{}' is missing: llama.cpp creates it with ne {{{}}}",
                                    at, name, fmt::join(p.ne, ", ")));
      } else if (g.ggml_ne(name) != p.ne) {
        bad.push_back(fmt::format("{}tensor '{}' has ne {{{}}}, llama.cpp creates {{{}}} "
                                  "(embedding_length {}, key_length {})", at, name,
                                  fmt::join(g.ggml_ne(name), ", "), fmt::join(p.ne, ", "), n_embd,
                                  hk));
      }
    }
    for (const std::string& name : g.tensor_names())
      if (!want.count(name))
        bad.push_back(fmt::format("{}tensor '{}' is not created by llama.cpp's {} model (wrong "
                                  "number of tensors)", layer_prefix(name, "blk."), name, a));
  } catch (const Refused& e) {
    bad.push_back(e.what());
  }
  return bad;
}

std::vector<std::string> engine_load_errors(const std::string& name, const fs::path& path,
                                            int64_t tensor_parallel) {
  if (name == "vllm") return vllm_load_errors(path, tensor_parallel);
  if (name == "tensorrt-llm") return tensorrt_llm_load_errors(path, tensor_parallel);
  if (name == "llama.cpp")
    return llama_cpp_load_errors(fs::is_directory(path) ? path / "model.gguf" : path);
  throw ConfigError(msg("check", "engine '{}' has no loader checker; expected vllm, tensorrt-llm "
                        "or llama.cpp", name));
}

}  // namespace ac
