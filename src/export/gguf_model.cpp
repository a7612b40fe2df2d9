#include "export/gguf_model.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "common/error.h"
#include "common/json_io.h"
#include "hardware/llamacpp_buffers.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "io/tokenizer.h"
#include "model/tensor_roles.h"

namespace ac {
using json = nlohmann::json;

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr int64_t kFirstByte = 3, kLastByte = 258;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// The GGUF name of role `role` (model/tensor_roles.h) in layer `layer`.
std::string gguf_name(std::string_view role, int64_t layer = -1) {
  return gguf_tensor_name(tensor_role(role), layer);
}

// GGUF only: llama3 RoPE's frequency factors, derived from rope_scaling (no HF tensor).
const char* const kRopeFreqs = "rope_freqs.weight";

bool uses_llama_arch(const ModelConfig& c) {
  return c.is_homogeneous() && c.layers[0].has_attention() && c.layers[0].has_ffn();
}

// llama.h enum llama_ftype of each --dtype.
const std::pair<GgmlType, int64_t> kFileTypes[] = {
    {GgmlType::F32, 0}, {GgmlType::F16, 1}, {GgmlType::Q4_0, 2}, {GgmlType::Q8_0, 7},
    {GgmlType::BF16, 32}};


/// The single head_dim of all attention layers (GGUF's key_length is global).
int64_t common_head_dim(const ModelConfig& c) {
  int64_t hd = 0;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_attention()) continue;
    if (hd && c.layers[i].head_dim != hd)
      throw ConfigError(msg("export gguf", "layer {} has head_dim {} but an earlier layer has {}: "
                            "GGUF has one attention.key_length", i, c.layers[i].head_dim, hd));
    hd = c.layers[i].head_dim;
  }
  return hd;
}

}  // namespace

int64_t gguf_file_type(GgmlType t) {
  for (const auto& [type, ftype] : kFileTypes)
    if (type == t) return ftype;
  AC_CHECK(false, "no llama_ftype for ggml type {}", uint32_t(t));
  return 0;
}

GgufMetadata gguf_general_metadata(const std::string& architecture, const GgufExportOptions& o) {
  return {
      {"general.architecture", GgufValue::str(architecture)},
      {"general.name", GgufValue::str(o.name)},
      {"general.alignment", GgufValue::u32(32)},
      {"general.file_type", GgufValue::u32(gguf_file_type(o.dtype))},
      // ggml's block-format version (GGML_QUANT_VERSION 2): convert_hf_to_gguf.py and
      // llama-quantize write it in every file (gguf-py GGUFWriter.add_quantization_version).
      {"general.quantization_version", GgufValue::u32(2)},
  };
}

void add_gguf_vocab_metadata(const GgufVocab& v, GgufMetadata& kv) {
  kv.push_back({"tokenizer.ggml.model", GgufValue::str(v.model)});
  if (!v.pre.empty()) kv.push_back({"tokenizer.ggml.pre", GgufValue::str(v.pre)});
  kv.push_back({"tokenizer.ggml.tokens", GgufValue::str_array(v.tokens)});
  if (!v.scores.empty())
    kv.push_back({"tokenizer.ggml.scores",
                  GgufValue::f32_array(std::vector<double>(v.scores.begin(), v.scores.end()))});
  kv.push_back({"tokenizer.ggml.token_type", GgufValue::i32_array(v.types)});
  if (!v.merges.empty()) kv.push_back({"tokenizer.ggml.merges", GgufValue::str_array(v.merges)});
  for (auto [key, id] : {std::pair<const char*, int64_t>{"tokenizer.ggml.bos_token_id", v.bos_id},
                         {"tokenizer.ggml.eos_token_id", v.eos_id},
                         {"tokenizer.ggml.unknown_token_id", v.unk_id},
                         {"tokenizer.ggml.padding_token_id", v.pad_id}})
    if (id >= 0) kv.push_back({key, GgufValue::u32(id)});
  kv.push_back({"tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos)});
  kv.push_back({"tokenizer.ggml.add_eos_token", GgufValue::boolean(v.add_eos)});
  if (!v.chat_template.empty())
    kv.push_back({"tokenizer.chat_template", GgufValue::str(v.chat_template)});
}

void check_vocab_exportable(const GgufVocab& v, int64_t vocab_size) {
  const bool scores_ok =
      v.scores.size() == v.tokens.size() || (v.model == "gpt2" && v.scores.empty());
  if (int64_t(v.tokens.size()) != vocab_size || !scores_ok || v.types.size() != v.tokens.size())
    throw ConfigError(msg("export gguf", "the vocabulary has {} tokens, {} scores, {} types; the "
                          "model's vocab_size is {}", v.tokens.size(), v.scores.size(),
                          v.types.size(), vocab_size));
  if (v.model != "llama" && v.model != "gpt2")
    throw ConfigError(msg("export gguf", "tokenizer model '{}': 'llama' (SentencePiece) and "
                          "'gpt2' (byte-level BPE) are written", v.model));
  if (v.model == "gpt2" && (v.pre.empty() || v.merges.empty()))
    throw ConfigError(msg("export gguf", "a 'gpt2' vocabulary needs tokenizer.ggml.pre and "
                          "merges (llama.cpp falls back to a different pre-tokenizer or refuses "
                          "the file)"));
  // Every special token must be exactly one id whose text is unique in the vocabulary.
  std::map<std::string, int64_t> count;
  for (const auto& t : v.tokens) ++count[t];
  for (auto [name, id] : {std::pair<const char*, int64_t>{"bos", v.bos_id}, {"eos", v.eos_id},
                          {"unknown", v.unk_id}, {"padding", v.pad_id}}) {
    if (id < 0) continue;  // none named: the key is not written
    if (id >= vocab_size)
      throw ConfigError(msg("export gguf", "{} token id {} outside [0, {})", name, id,
                            vocab_size));
    if (count[v.tokens[size_t(id)]] != 1)
      throw ConfigError(msg("export gguf", "{} token '{}' (id {}) appears {} times in the "
                            "vocabulary: it must encode to exactly one id", name,
                            v.tokens[size_t(id)], id, count[v.tokens[size_t(id)]]));
  }
}

namespace {

void check_exportable(const LlamaModel& m, const GgufVocab& v) {
  const ModelConfig& c = m.config;
  c.validate("export gguf");
  // llama.cpp's llama and deci graphs have no q/k norms; a file that carried them would be
  // refused at load (wrong number of tensors), one without them would compute another model.
  if (c.qk_norm)
    throw ConfigError(msg("export gguf", "model_type {}: q/k norms (Qwen3 q_norm / k_norm) have "
                          "no place in the 'llama' and 'deci' GGUF architectures written here; "
                          "export --format hf", c.model_type));
  if (c.rope_scaling && c.rope_scaling->rope_type != "linear" &&
      c.rope_scaling->rope_type != "llama3" && c.rope_scaling->rope_type != "default")
    throw ConfigError(msg("export gguf", "rope_scaling type '{}' has no GGUF form here",
                          c.rope_scaling->rope_type));
  check_vocab_exportable(v, c.vocab_size);
}

GgufMetadata model_metadata(const ModelConfig& c, const GgufVocab& v, const GgufExportOptions& o,
                            const std::vector<int64_t>& ffn_free, bool layer0_stub) {
  const std::string a = uses_llama_arch(c) ? "llama" : "deci";
  const int64_t Hd = common_head_dim(c);
  GgufMetadata kv = gguf_general_metadata(a, o);
  kv.insert(kv.end(), {
      {a + ".vocab_size", GgufValue::u32(c.vocab_size)},
      {a + ".context_length", GgufValue::u32(c.max_position_embeddings)},
      {a + ".embedding_length", GgufValue::u32(c.hidden_size)},
      {a + ".block_count", GgufValue::u32(c.num_layers())},
  });
  if (a == "llama") {
    const LayerConfig& l = c.layers[0];
    kv.push_back({a + ".feed_forward_length", GgufValue::u32(l.intermediate_size)});
    kv.push_back({a + ".attention.head_count", GgufValue::u32(l.num_attention_heads)});
    kv.push_back({a + ".attention.head_count_kv", GgufValue::u32(l.num_key_value_heads)});
  } else {
    std::vector<int64_t> H, G, F;
    for (size_t i = 0; i < c.layers.size(); ++i) {
      const LayerConfig& l = c.layers[i];
      const bool attn_stub = i == 0 && layer0_stub;
      H.push_back(l.has_attention() ? l.num_attention_heads : attn_stub ? 1 : 0);
      G.push_back(l.has_attention() ? l.num_key_value_heads : attn_stub ? 1 : 0);
      const bool stub = std::count(ffn_free.begin(), ffn_free.end(), int64_t(i)) > 0;
      F.push_back(l.has_ffn() ? l.intermediate_size : stub ? 1 : 0);
    }
    kv.push_back({a + ".feed_forward_length", GgufValue::i32_array(F)});
    kv.push_back({a + ".attention.head_count", GgufValue::i32_array(H)});
    kv.push_back({a + ".attention.head_count_kv", GgufValue::i32_array(G)});
  }
  kv.push_back({a + ".attention.key_length", GgufValue::u32(Hd)});
  kv.push_back({a + ".attention.value_length", GgufValue::u32(Hd)});
  kv.push_back({a + ".rope.dimension_count", GgufValue::u32(Hd)});
  kv.push_back({a + ".rope.freq_base", GgufValue::f32(c.rope_theta)});
  kv.push_back({a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_norm_eps)});
  if (c.rope_scaling && c.rope_scaling->rope_type == "linear") {
    kv.push_back({a + ".rope.scaling.type", GgufValue::str("linear")});
    kv.push_back({a + ".rope.scaling.factor", GgufValue::f32(c.rope_scaling->factor)});
  }
  add_gguf_vocab_metadata(v, kv);
  kv.push_back({"autocompress.hf_config", GgufValue::str(config_to_hf_json(c).dump())});
  if (!ffn_free.empty())
    kv.push_back({"autocompress.ffn_free_layers", GgufValue::i32_array(ffn_free)});
  if (layer0_stub)
    kv.push_back({"autocompress.attention_free_layers", GgufValue::i32_array({0})});
  return kv;
}

// What a planned tensor holds (model_tensors fills it).
enum class TensorSource {
  Role,       // the role's weight (q/k rows permuted for llama.cpp where the role says so)
  RopeFreqs,  // llama3 RoPE's frequency factors
  StubOnes,   // a stub part's norm: ones
  StubZeros,  // a stub part's other tensors: zeros (the part adds exactly 0)
};

struct PlannedTensor {
  GgufTensorPlan plan;
  TensorSource source = TensorSource::Role;
  const TensorRole* role = nullptr;
  int64_t layer = -1;
};

// write_model_gguf's tensors of `c`, in file order, without their data: the one place that
// order is decided (model_tensors and model_gguf_layout both read it).
std::vector<PlannedTensor> plan_model_tensors(const ModelConfig& c, GgmlType dtype,
                                              const std::vector<int64_t>& ffn_free,
                                              bool layer0_stub) {
  std::vector<PlannedTensor> ts;
  auto add = [&](std::string name, std::vector<int64_t> dims, TensorSource source,
                 const TensorRole* role = nullptr, int64_t layer = -1) {
    const GgmlType type = gguf_tensor_type(dtype, dims);
    ts.push_back({{std::move(name), type, std::move(dims)}, source, role, layer});
  };
  for (const TensorRole& r : kModelRoles)
    if (role_present(r, c)) add(gguf_tensor_name(r), role_shape(r, c), TensorSource::Role, &r);
  if (c.rope_scaling && c.rope_scaling->rope_type == "llama3")
    add(kRopeFreqs, {common_head_dim(c) / 2}, TensorSource::RopeFreqs);
  // A stub part: norms of ones, every other tensor zero, so that it adds exactly 0.
  auto stub = [&](int64_t i, RolePart part, const LayerConfig& shape) {
    for (const TensorRole& r : kLayerRoles)
      if (r.part == part)
        add(gguf_tensor_name(r, i), role_shape(r, c, &shape),
            r.shape == RoleShape::D ? TensorSource::StubOnes : TensorSource::StubZeros);
  };
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& l = c.layers[size_t(i)];
    if (i == 0 && layer0_stub) {
      // One head whose attn_output is zero (see the header: llama.cpp takes the head size from
      // layer 0's head count). Biases after the weights, as the first exports wrote them.
      LayerConfig one_head;
      one_head.num_attention_heads = one_head.num_key_value_heads = 1;
      one_head.head_dim = common_head_dim(c);
      stub(i, RolePart::Attention, one_head);
      if (c.attention_bias) stub(i, RolePart::AttentionBias, one_head);
    }
    for (const TensorRole& r : kLayerRoles)
      if (r.part != RolePart::Ffn && role_present(r, c, &l))
        add(gguf_tensor_name(r, i), role_shape(r, c, &l), TensorSource::Role, &r, i);
    if (l.has_ffn()) {
      for (const TensorRole& r : kLayerRoles)
        if (r.part == RolePart::Ffn)
          add(gguf_tensor_name(r, i), role_shape(r, c, &l), TensorSource::Role, &r, i);
    } else if (std::count(ffn_free.begin(), ffn_free.end(), i)) {
      // A width-1 FFN that adds exactly zero (see the header: llama.cpp skips n_ff == 0 layers).
      LayerConfig width1;
      width1.intermediate_size = 1;
      stub(i, RolePart::Ffn, width1);
    }
  }
  return ts;
}

// The layers write_model_gguf gives a width-1 FFN stub: attention without an FFN.
std::vector<int64_t> ffn_free_layers(const ModelConfig& c) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.layers[size_t(i)].has_attention() && !c.layers[size_t(i)].has_ffn()) out.push_back(i);
  return out;
}

// Whether write_model_gguf gives layer 0 a one-head attention stub (a deci file whose layer 0
// has no attention; the header says why).
bool needs_layer0_stub(const ModelConfig& c) {
  return !uses_llama_arch(c) && !c.layers.empty() && !c.layers[0].has_attention();
}

std::vector<GgufTensorOut> model_tensors(const LlamaModel& m, GgmlType dtype,
                                         const std::vector<int64_t>& ffn_free, bool layer0_stub) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  std::vector<GgufTensorOut> ts;
  for (const PlannedTensor& p : plan_model_tensors(c, dtype, ffn_free, layer0_stub)) {
    at::Tensor t;
    if (p.source == TensorSource::RopeFreqs) {
      t = llama3_rope_factors(c, common_head_dim(c));
    } else if (p.source == TensorSource::StubOnes) {
      t = at::ones(p.plan.dims);
    } else if (p.source == TensorSource::StubZeros) {
      t = at::zeros(p.plan.dims);
    } else {
      t = role_tensor(w, *p.role, p.layer);
      if (p.role->rope_rows != RopeRows::None) {
        const LayerConfig& l = c.layers[size_t(p.layer)];
        t = unpermute_rotary_rows(t, p.role->rope_rows == RopeRows::QueryHeads
                                         ? l.num_attention_heads
                                         : l.num_key_value_heads);
      }
    }
    ts.push_back(GgufTensorOut{p.plan.name, t, p.plan.type});
  }
  return ts;
}

}  // namespace

GgmlType gguf_tensor_type(GgmlType dtype, at::IntArrayRef shape) {
  if (shape.size() == 1) return GgmlType::F32;
  if (ggml_is_quantized(dtype) && shape.back() % ggml_block_values(dtype)) return GgmlType::F16;
  return dtype;
}

LlamaModel round_to_gguf(const LlamaModel& m, GgmlType dtype) {
  TensorMap t = to_tensor_map(m.config, m.weights);
  for (auto& [name, v] : t) v = ggml_round_trip(v, gguf_tensor_type(dtype, v.sizes()));
  return LlamaModel{m.config, from_tensor_map(m.config, t, "round_to_gguf")};
}

at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_heads) {
  const int64_t rows = w.size(0);
  AC_CHECK(n_heads > 0 && rows % n_heads == 0 && (rows / n_heads) % 2 == 0,
           "{} rows do not split into {} heads of an even head_dim", rows, n_heads);
  const int64_t Hd = rows / n_heads, cols = w.dim() == 2 ? w.size(1) : 1;
  // [H*Hd, C] -> [H, 2, Hd/2, C] -> [H, Hd/2, 2, C]: row j*Hd/2 + i moves to 2i + j.
  return w.reshape({n_heads, 2, Hd / 2, cols}).transpose(1, 2).reshape(w.sizes()).contiguous();
}

at::Tensor llama3_rope_factors(const ModelConfig& c, int64_t head_dim) {
  AC_CHECK(c.rope_scaling && c.rope_scaling->rope_type == "llama3", "not a llama3 rope");
  const RopeScaling& s = *c.rope_scaling;
  // convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, op for op in its float32 torch
  // arithmetic (a Python number with a float32 tensor computes in float32; `x / t` is
  // t.reciprocal() * x), so that the file holds the converter's values bit for bit: the same
  // formula in double precision differs from them by an ulp (gguf-py judge, docs/benchmarks.md).
  const at::Tensor freqs =
      at::pow(c.rope_theta, at::arange(0, head_dim, 2, at::kFloat) / head_dim).reciprocal();
  const double old_len = double(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
  std::vector<at::Tensor> factors;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const at::Tensor wavelen = freqs[i].reciprocal() * (2 * M_PI);
    if (wavelen.lt(high_wavelen).item<bool>()) {
      factors.push_back(at::ones({}, at::kFloat));
    } else if (wavelen.gt(low_wavelen).item<bool>()) {
      factors.push_back(at::full({}, s.factor, at::kFloat));
    } else {
      const at::Tensor smooth = (wavelen.reciprocal() * old_len - s.low_freq_factor) /
                                (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(((1.0 - smooth) / s.factor + smooth).reciprocal());
    }
  }
  return at::stack(factors);
}

std::string llama2c_tokenizer_bytes(const GgufVocab& v, const std::string& file) {
  const int64_t V = int64_t(v.tokens.size());
  if (V <= kLastByte)
    throw FormatError(msg("import gguf", "{}: {} tokens: too few for a SentencePiece vocabulary "
                          "with byte fallback (ids 3..258)", file, V));
  std::vector<std::string> pieces;
  int32_t max_len = 1;
  for (int64_t id = 0; id < V; ++id) {
    const std::string& t = v.tokens[size_t(id)];
    const bool is_byte = v.types[size_t(id)] == int64_t(GgufTokenType::BYTE);
    if ((id >= kFirstByte && id <= kLastByte) != is_byte ||
        (is_byte && t != fmt::format("<0x{:02X}>", id - kFirstByte)))
      throw FormatError(msg("import gguf", "{}: token {} '{}' (type {}): expected byte tokens "
                            "<0x00>..<0xFF> exactly at ids 3..258 (llama2.c tokenizer layout)",
                            file, id, t, v.types[size_t(id)]));
    pieces.push_back(is_byte ? t : replace_all(t, kSpace, " "));
    max_len = std::max(max_len, int32_t(pieces.back().size()));
  }
  std::string out(reinterpret_cast<const char*>(&max_len), 4);
  for (int64_t id = 0; id < V; ++id) {
    const auto len = int32_t(pieces[size_t(id)].size());
    out.append(reinterpret_cast<const char*>(&v.scores[size_t(id)]), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += pieces[size_t(id)];
  }
  return out;
}

std::vector<GgufTensorPlan> model_gguf_layout(const ModelConfig& c, GgmlType dtype) {
  std::vector<GgufTensorPlan> out;
  for (PlannedTensor& p : plan_model_tensors(c, dtype, ffn_free_layers(c), needs_layer0_stub(c)))
    out.push_back(std::move(p.plan));
  return out;
}

std::vector<GgufTensorExtent> model_gguf_extents(const ModelConfig& c, GgmlType dtype) {
  std::vector<GgufTensorExtent> out;
  uint64_t offset = 0;
  for (const GgufTensorPlan& p : model_gguf_layout(c, dtype)) {
    GgufTensorExtent e;
    e.type = p.type;
    e.row_length = p.dims.back();
    e.rows = p.dims.size() > 1 ? p.dims.front() : 1;
    e.offset = offset;
    e.bytes = ggml_bytes(p.type, uint64_t(e.rows * e.row_length));
    e.matmul_weight = is_matmul_weight_name(p.name);
    offset += (e.bytes + 31) / 32 * 32;  // general.alignment 32 (gguf_general_metadata)
    out.push_back(e);
  }
  return out;
}

void write_model_gguf(const fs::path& path, const LlamaModel& m, const GgufVocab& vocab,
                      const GgufExportOptions& opt) {
  check_exportable(m, vocab);
  const std::vector<int64_t> ffn_free = ffn_free_layers(m.config);
  const bool layer0_stub = needs_layer0_stub(m.config);
  write_gguf(path, model_metadata(m.config, vocab, opt, ffn_free, layer0_stub),
             model_tensors(m, opt.dtype, ffn_free, layer0_stub));
}

// ---------------------------------------------------------------------------------------------
// reader

namespace {

/// A string array key, or FormatError.
std::vector<std::string> string_array(const GgufFile& g, const char* key) {
  const GgufValue* v = g.find(key);
  if (!v || !v->is_array || v->type != GgufType::STRING)
    throw FormatError(msg("import gguf", "{}: {} missing or not a string array", g.file(), key));
  return v->strings;
}

GgufVocab read_vocab(const GgufFile& g) {
  GgufVocab v;
  v.model = g.get_string("tokenizer.ggml.model");
  if (v.model != "llama" && v.model != "gpt2")
    throw FormatError(msg("import gguf", "{}: tokenizer.ggml.model is '{}'; 'llama' "
                          "(SentencePiece) and 'gpt2' (byte-level BPE) are read", g.file(), v.model));
  const bool spm = v.model == "llama";
  v.pre = g.find("tokenizer.ggml.pre") ? g.get_string("tokenizer.ggml.pre") : "";
  v.tokens = string_array(g, "tokenizer.ggml.tokens");
  const size_t V = v.tokens.size();
  const GgufValue* scores = g.find("tokenizer.ggml.scores");
  const GgufValue* types = g.find("tokenizer.ggml.token_type");
  if ((spm || scores) && (!scores || scores->floats.size() != V))
    throw FormatError(msg("import gguf", "{}: tokenizer.ggml.scores must have {} elements (one "
                          "per token{})", g.file(), V, spm ? "; a 'llama' vocabulary needs them" : ""));
  if (!types || types->ints.size() != V)
    throw FormatError(msg("import gguf", "{}: tokenizer.ggml.token_type must have {} elements (one "
                          "per token)", g.file(), V));
  if (scores) v.scores.assign(scores->floats.begin(), scores->floats.end());
  v.types = types->ints;
  if (!spm) v.merges = string_array(g, "tokenizer.ggml.merges");  // llama.cpp requires them
  // Every special id must index the vocabulary: they are looked up in `tokens` on import. An
  // absent id takes llama.cpp's default for a 'llama' vocabulary (llama-vocab.cpp: bos 1, eos 2,
  // unk 0) and is "none" (-1) otherwise.
  auto token_id = [&](const char* key, int64_t spm_default) {
    if (!g.find(key)) return spm ? spm_default : int64_t(-1);
    const int64_t id = g.get_int(key);
    if (id < 0 || id >= int64_t(V))
      throw FormatError(msg("import gguf", "{}: {} = {} is outside the vocabulary [0, {})",
                            g.file(), key, id, V));
    return id;
  };
  v.bos_id = token_id("tokenizer.ggml.bos_token_id", 1);
  v.eos_id = token_id("tokenizer.ggml.eos_token_id", 2);
  v.unk_id = token_id("tokenizer.ggml.unknown_token_id", 0);
  v.pad_id = token_id("tokenizer.ggml.padding_token_id", -1);
  auto flag = [&](const char* key, bool fallback) {
    const GgufValue* f = g.find(key);
    if (!f) return fallback;
    if (f->is_array || f->type != GgufType::BOOL || f->ints.size() != 1)
      throw FormatError(msg("import gguf", "{}: {} must be one bool", g.file(), key));
    return f->ints[0] != 0;
  };
  v.add_bos = flag("tokenizer.ggml.add_bos_token", spm);
  v.add_eos = flag("tokenizer.ggml.add_eos_token", false);
  if (g.find("tokenizer.chat_template")) v.chat_template = g.get_string("tokenizer.chat_template");
  return v;
}

ModelConfig config_from_keys(const GgufFile& g, const std::string& a, int64_t V,
                             std::vector<int64_t>* ffn_free) {
  ModelConfig c;
  c.vocab_size = V;
  c.hidden_size = g.get_int(a + ".embedding_length");
  if (c.hidden_size <= 0 || c.hidden_size > kMaxHiddenSize)
    throw FormatError(msg("import gguf", "{}: {}.embedding_length {} out of range 1..{}", g.file(),
                          a, c.hidden_size, kMaxHiddenSize));
  const int64_t L = g.get_int(a + ".block_count");
  if (L <= 0 || L > kMaxLayers)
    throw FormatError(msg("import gguf", "{}: {}.block_count {} out of range", g.file(), a, L));
  c.max_position_embeddings = g.get_int(a + ".context_length");
  c.rms_norm_eps = float(g.get_float(a + ".attention.layer_norm_rms_epsilon"));
  c.rope_theta = g.find(a + ".rope.freq_base") ? float(g.get_float(a + ".rope.freq_base")) : 1e4;
  const std::vector<int64_t> H = g.get_int_or_array(a + ".attention.head_count", L);
  const std::vector<int64_t> G = g.find(a + ".attention.head_count_kv")
                                     ? g.get_int_or_array(a + ".attention.head_count_kv", L) : H;
  const std::vector<int64_t> F = g.get_int_or_array(a + ".feed_forward_length", L);
  const int64_t Hd = g.find(a + ".attention.key_length") ? g.get_int(a + ".attention.key_length")
                                                         : (H[0] ? c.hidden_size / H[0] : 0);
  if (g.find("autocompress.ffn_free_layers"))
    *ffn_free = g.get_int_or_array("autocompress.ffn_free_layers",
                                   int64_t(g.find("autocompress.ffn_free_layers")->size()));
  std::vector<int64_t> attn_free;
  if (g.find("autocompress.attention_free_layers"))
    attn_free = g.get_int_or_array("autocompress.attention_free_layers",
                                   int64_t(g.find("autocompress.attention_free_layers")->size()));
  for (int64_t i = 0; i < L; ++i) {
    LayerConfig l;
    l.head_dim = Hd;
    l.attention_no_op = H[size_t(i)] == 0 || std::count(attn_free.begin(), attn_free.end(), i);
    if (!l.attention_no_op) l.num_attention_heads = H[size_t(i)], l.num_key_value_heads = G[size_t(i)];
    l.ffn_no_op = F[size_t(i)] == 0 || std::count(ffn_free->begin(), ffn_free->end(), i);
    if (!l.ffn_no_op) l.intermediate_size = F[size_t(i)];
    c.layers.push_back(l);
  }
  if (g.find(a + ".rope.scaling.type") && g.get_string(a + ".rope.scaling.type") == "linear") {
    RopeScaling s;
    s.rope_type = "linear";
    s.factor = float(g.get_float(a + ".rope.scaling.factor"));
    s.raw = {{"rope_type", "linear"}, {"factor", s.factor}};
    c.rope_scaling = s;
  }
  return c;
}

/// Fields GGUF has no key for come from autocompress.hf_config, which must agree with the keys.
void merge_hf_config(const GgufFile& g, ModelConfig& c) {
  const GgufValue* v = g.find("autocompress.hf_config");
  if (!v) {
    if (g.has_tensor(kRopeFreqs))
      throw FormatError(msg("import gguf", "{}: rope_freqs.weight (llama3 RoPE scaling) without "
                            "autocompress.hf_config: its parameters cannot be recovered",
                            g.file()));
    c.tie_word_embeddings = !g.has_tensor(gguf_name("lm_head"));
    return;
  }
  const std::string where = g.file() + " autocompress.hf_config";
  ModelConfig h =
      config_from_hf_json(parse_json_text(g.get_string("autocompress.hf_config"), where), where);
  for (size_t i = 0; i < c.layers.size() && i < h.layers.size(); ++i)
    if (c.layers[i] != h.layers[i])
      throw FormatError(msg("import gguf", "{}: layer {} of autocompress.hf_config disagrees with "
                            "the GGUF keys", g.file(), i));
  if (h.layers.size() != c.layers.size() || h.hidden_size != c.hidden_size ||
      h.vocab_size != c.vocab_size || float(h.rope_theta) != float(c.rope_theta))
    throw FormatError(msg("import gguf", "{}: autocompress.hf_config disagrees with the GGUF keys "
                          "(layers, hidden_size, vocab_size or rope_theta)", g.file()));
  h.tie_word_embeddings = !g.has_tensor(gguf_name("lm_head"));
  c = h;  // exact doubles (rope_theta, eps) and every extra field
}

at::Tensor get_f32(const GgufFile& g, const std::string& name, std::vector<int64_t> shape) {
  if (g.shape(name) != shape)
    throw FormatError(msg("import gguf", "{}: tensor '{}' has shape {} (ggml ne {}), expected {} "
                          "from the metadata", g.file(), name, fmt::format("{}", g.shape(name)),
                          fmt::format("{}", g.ggml_ne(name)), fmt::format("{}", shape)));
  return g.tensor(name).to(at::kFloat);
}

// q/k rows back from llama.cpp's interleaved RoPE order to HF's rotate-half; a bias [rows] as
// a [rows, 1] weight.
at::Tensor from_gguf_rows(const at::Tensor& t, const TensorRole& r, const LayerConfig& l) {
  if (r.rope_rows == RopeRows::None) return t;
  const int64_t heads =
      r.rope_rows == RopeRows::QueryHeads ? l.num_attention_heads : l.num_key_value_heads;
  if (t.dim() == 1) return permute_rotary_rows(t.view({t.size(0), 1}), heads).view({t.size(0)});
  return permute_rotary_rows(t, heads);
}

ModelWeights read_weights(const GgufFile& g, const ModelConfig& c) {
  const int64_t D = c.hidden_size;
  ModelWeights w;
  for (const TensorRole& r : kModelRoles)
    if (role_present(r, c)) role_tensor(w, r) = get_f32(g, gguf_tensor_name(r), role_shape(r, c));
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  w.layers.resize(c.layers.size());
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& l = c.layers[size_t(i)];
    for (const TensorRole& r : kLayerRoles)
      if (role_present(r, c, &l)) {
        const at::Tensor t = get_f32(g, gguf_tensor_name(r, i), role_shape(r, c, &l));
        role_tensor(w, r, i) = from_gguf_rows(t, r, l);
      }
    const std::string o_proj = gguf_name("o_proj", i), down_proj = gguf_name("down_proj", i);
    if (!l.has_attention() && g.has_tensor(o_proj)) {
      const int64_t hd = common_head_dim(c);
      if (get_f32(g, o_proj, {D, hd}).abs().max().item<float>() != 0)
        throw FormatError(msg("import gguf", "{}: layer {} is listed in autocompress."
                              "attention_free_layers but its attn_output is not zero", g.file(), i));
    }
    if (!l.has_ffn() && g.has_tensor(down_proj)) {
      if (get_f32(g, down_proj, {D, 1}).abs().max().item<float>() != 0)
        throw FormatError(msg("import gguf", "{}: layer {} is listed in autocompress."
                              "ffn_free_layers but its ffn_down is not zero", g.file(), i));
    }
  }
  return w;
}

}  // namespace

GgufModel read_model_gguf(const fs::path& path) {
  GgufFile g(path);
  const std::string a = g.get_string("general.architecture");
  if (a != "llama" && a != "deci")
    throw FormatError(msg("import gguf", "{}: general.architecture is '{}'; 'llama' and 'deci' "
                          "are read", g.file(), a));
  GgufModel out;
  out.vocab = read_vocab(g);
  const int64_t V = g.find(a + ".vocab_size") ? g.get_int(a + ".vocab_size")
                                              : int64_t(out.vocab.tokens.size());
  if (V != int64_t(out.vocab.tokens.size()))
    throw FormatError(msg("import gguf", "{}: {}.vocab_size {} but tokenizer.ggml.tokens has {}",
                          g.file(), a, V, out.vocab.tokens.size()));
  std::vector<int64_t> ffn_free;
  ModelConfig c = config_from_keys(g, a, V, &ffn_free);
  merge_hf_config(g, c);
  c.attention_bias = g.has_tensor(gguf_name("q_bias", 0));
  if (out.vocab.bos_id >= 0) c.bos_token_id = out.vocab.bos_id;
  if (out.vocab.eos_id >= 0) c.eos_token_id = out.vocab.eos_id;
  try {
    c.validate("import gguf");
  } catch (const ConfigError& e) {
    throw FormatError(fmt::format("{} (in {})", e.what(), g.file()));
  }
  if (c.rope_scaling && c.rope_scaling->rope_type == "llama3") {
    const int64_t Hd = common_head_dim(c);
    at::Tensor stored = get_f32(g, kRopeFreqs, {Hd / 2});
    // Within float32 rounding: another torch build may compute an ulp apart.
    if (!at::allclose(stored, llama3_rope_factors(c, Hd), /*rtol=*/1e-6, /*atol=*/0))
      throw FormatError(msg("import gguf", "{}: rope_freqs.weight disagrees with the llama3 "
                            "rope_scaling of autocompress.hf_config", g.file()));
  }
  out.model.config = c;
  out.model.weights = read_weights(g, c);
  out.dtype = g.type(gguf_name("embed_tokens"));
  if (g.find("general.file_type"))
    for (const auto& [type, ftype] : kFileTypes)
      if (ftype == g.get_int("general.file_type")) out.dtype = type;
  return out;
}

void import_gguf(const fs::path& gguf, const fs::path& out_dir) {
  check_not_overwriting_input(gguf, out_dir, "import gguf");
  const GgufModel g = read_model_gguf(gguf);
  if (g.vocab.model != "llama")
    throw ConfigError(msg("import gguf", "{}: tokenizer.ggml.model is '{}' (byte-level BPE): the "
                          "imported checkpoint carries llama2.c's tokenizer.bin, which holds "
                          "only SentencePiece ('llama') vocabularies", gguf.string(),
                          g.vocab.model));
  const std::string tok_bytes = llama2c_tokenizer_bytes(g.vocab, gguf.string());
  StagingDir staging(out_dir);
  save_checkpoint(staging.path(), g.model);
  write_file_atomic(staging.path() / "tokenizer.bin", tok_bytes);
  Tokenizer::from_llama2c(staging.path() / "tokenizer.bin", g.model.config.vocab_size);  // check
  const auto& v = g.vocab;
  write_json_file(staging.path() / "special_tokens_map.json",
                  {{"bos_token", v.tokens[size_t(v.bos_id)]},
                   {"eos_token", v.tokens[size_t(v.eos_id)]},
                   {"unk_token", v.tokens[size_t(v.unk_id)]}});
  write_json_file(staging.path() / "tokenizer_config.json",
                  {{"bos_token", v.tokens[size_t(v.bos_id)]},
                   {"eos_token", v.tokens[size_t(v.eos_id)]},
                   {"unk_token", v.tokens[size_t(v.unk_id)]},
                   {"add_bos_token", v.add_bos},
                   {"add_eos_token", v.add_eos},
                   {"model_max_length", g.model.config.max_position_embeddings}});
  write_json_file(staging.path() / "generation_config.json",
                  {{"bos_token_id", v.bos_id}, {"eos_token_id", v.eos_id}});
  staging.commit();
}

}  // namespace ac
