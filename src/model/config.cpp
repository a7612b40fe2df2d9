#include "model/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/json_io.h"
#include "model/config_fields.h"
#include "model/families.h"
#include "model/moe_family_config.h"
#include "model/nemotron_h_config.h"

namespace ac {
using json = nlohmann::json;

bool LayerConfig::operator==(const LayerConfig& o) const {
  return num_attention_heads == o.num_attention_heads &&
         num_key_value_heads == o.num_key_value_heads && head_dim == o.head_dim &&
         intermediate_size == o.intermediate_size && attention_no_op == o.attention_no_op &&
         ffn_no_op == o.ffn_no_op && mamba == o.mamba && moe == o.moe;
}

bool ModelConfig::is_homogeneous() const {
  for (const auto& l : layers)
    if (l != layers.front()) return false;
  return true;
}

bool ModelConfig::is_hybrid() const {
  if (!mlp_gated) return true;
  for (const auto& l : layers)
    if (l.has_mamba() || l.has_moe()) return true;
  return false;
}

// Each part present carries its own RMSNorm [D] (input_layernorm / post_attention_layernorm,
// Nemotron-H's one norm per layer).
static int64_t count_parameters(const ModelConfig& c, bool active) {
  const int64_t D = c.hidden_size;
  int64_t n = c.vocab_size * D * (c.tie_word_embeddings ? 1 : 2) + D;  // embed (+ head) + norm
  for (const auto& l : c.layers) {
    if (l.has_attention()) {
      int64_t q = l.num_attention_heads * l.head_dim, kv = l.num_key_value_heads * l.head_dim;
      n += D + D * q + 2 * D * kv + q * D + (c.attention_bias ? q + 2 * kv : 0) +
           (c.qk_norm ? 2 * l.head_dim : 0);
    }
    if (l.has_mamba()) n += D + l.mamba->num_parameters(D);
    if (l.has_ffn()) n += D + (c.mlp_gated ? 3 : 2) * D * l.intermediate_size;
    if (l.has_moe()) n += D + (active ? l.moe->active_parameters(D) : l.moe->num_parameters(D));
  }
  return n;
}

int64_t ModelConfig::num_parameters() const { return count_parameters(*this, false); }
int64_t ModelConfig::num_active_parameters() const { return count_parameters(*this, true); }

const std::vector<std::string>& dense_model_types() {
  static const std::vector<std::string> types = {"llama", "mistral", "qwen2", "qwen3",
                                                 "nemotron-nas"};
  return types;
}

void require_dense(const ModelConfig& c, const std::string& where) {
  if (!c.is_hybrid()) return;
  throw ConfigError(fmt::format(
      "[{}] {} ({}) has Mamba-2, MoE or relu² layers, which the Llama-family forward, "
      "importance, pruning, distillation and export do not compute; a Nemotron-H, Qwen3-MoE or "
      "Mixtral checkpoint takes its own path in `importance`, `prune`, `distill`, `eval` and "
      "`generate` (a Nemotron-H also in `export` and `compress`), and `autocompress cost` and "
      "`plan` take every kind (model_type {})", where, describe(c), c.architecture,
      c.model_type));
}

void ModelConfig::validate(const std::string& where) const {
  auto bad = [&](const std::string& m) { throw ConfigError(fmt::format("[{}] {}", where, m)); };
  auto in_range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) bad(fmt::format("{} must be in {}..{}, found {}", field, lo, hi, v));
  };
  in_range("vocab_size", vocab_size, 1, kMaxVocabSize);
  in_range("hidden_size", hidden_size, 1, kMaxHiddenSize);
  in_range("num_hidden_layers", num_layers(), 1, kMaxLayers);
  in_range("max_position_embeddings", max_position_embeddings, 1, kMaxPositionEmbeddings);
  in_range("bos_token_id", bos_token_id, 0, vocab_size - 1);
  in_range("eos_token_id", eos_token_id, 0, vocab_size - 1);
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    bad(fmt::format("rms_norm_eps must be positive and finite, found {}", rms_norm_eps));
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    bad(fmt::format("rope_theta must be positive and finite, found {}", rope_theta));
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const std::string at = fmt::format("layer {}: ", i);
    if (l.num_attention_heads < 0 || l.num_key_value_heads < 0 || l.head_dim < 0)
      bad(at + fmt::format("num_attention_heads {}, num_key_value_heads {} and head_dim {} must "
                           "not be negative", l.num_attention_heads, l.num_key_value_heads,
                           l.head_dim));
    if (l.has_attention()) {
      if (l.num_key_value_heads <= 0 || l.head_dim <= 0 || l.head_dim % 2)
        bad(at + fmt::format("num_key_value_heads {} and head_dim {} must be positive "
                             "(head_dim even for RoPE)",
                             l.num_key_value_heads, l.head_dim));
      if (l.num_attention_heads % l.num_key_value_heads)
        bad(at + fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                             l.num_attention_heads, l.num_key_value_heads));
      in_range((at + "head_dim").c_str(), l.head_dim, 2, kMaxHeadDim);
      in_range((at + "num_attention_heads").c_str(), l.num_attention_heads, 1,
               kMaxAttentionWidth / l.head_dim);
    }
    if (!l.ffn_no_op)
      in_range((at + "intermediate_size").c_str(), l.intermediate_size, 0, kMaxIntermediateSize);
    if (l.has_mamba()) {
      if (l.has_attention())
        bad(at + "a Mamba-2 mixer and attention in one layer (expected one mixer)");
      l.mamba->validate(fmt::format("{}: layer {}", where, i));
    }
    if (l.has_moe()) {
      if (l.has_ffn()) bad(at + "an MoE and a dense FFN in one layer (expected one of them)");
      l.moe->validate(fmt::format("{}: layer {}", where, i));
    }
  }
}

ModelConfig ModelConfig::uniform(int64_t vocab, int64_t hidden, int64_t num_layers,
                                 const LayerConfig& layer) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.layers.assign(size_t(num_layers), layer);
  return c;
}

// ---------------------------------------------------------------------------------------------
// config.json

namespace {

// Fields this struct models; everything else goes to `extra` and is written back verbatim.
const std::set<std::string> kModelled = {
    "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "rope_theta", "rope_scaling", "rms_norm_eps",
    "tie_word_embeddings", "attention_bias", "bos_token_id", "eos_token_id", "torch_dtype",
    "dtype", "rope_parameters", "qk_norm", "block_configs"};

using config_fields::get;
using config_fields::get_or;
using config_fields::first_id;

// The hybrid and MoE families whose config.json this reader (or its family readers) takes for
// `cost` and `plan`; the forward computes the dense ones (dense_model_types()).
const char* const kCostOnlyModelTypes = "qwen3_moe, mixtral, nemotron_h and nemotron_h_puzzle";

// A model_type whose config.json the forward computes as written, else FormatError naming the
// file and the families read. An absent model_type is read as llama (our older files).
void require_known_model_type(const std::string& model_type, const std::string& file) {
  const std::vector<std::string>& dense = dense_model_types();
  if (std::find(dense.begin(), dense.end(), model_type) != dense.end() ||
      is_moe_family_model_type(model_type))
    return;
  throw FormatError(fmt::format(
      "[load_config] {}: model_type '{}' is not supported: expected {} (the dense families the "
      "forward computes), or {} (cost and plan only); another family's layers (its norms, "
      "scalings, activations) would be computed as Llama's", file, model_type,
      fmt::join(dense, ", "), kCostOnlyModelTypes));
}

// Fields that change what a block computes and that the forward does not implement, refused
// rather than carried as metadata. attention_bias true is Qwen2's q/k/v biases here (and on our
// own files); transformers' Llama, Mistral and Qwen3 then bias o_proj too, which the tensor
// check refuses by name (weights.cpp).
void refuse_unimplemented_fields(const json& j, const std::string& file) {
  if (get_or<bool>(j, "mlp_bias", false, file))
    throw FormatError(fmt::format("[load_config] {}: mlp_bias true: biases on gate_proj, up_proj "
                                  "and down_proj are not implemented (expected false or absent)",
                                  file));
}

// DeciLM's per-block fields (transformers' DeciLM AttentionConfig / FFNConfig, as the Nemotron
// checkpoints write them) and ours (num_attention_heads, intermediate_size: config_to_hf_json).
// A window or attention sinks change the attention and are not implemented; sparsify names
// weights already sparse and computes nothing else; the sink options mean nothing without sinks.
const std::set<std::string> kBlockAttentionFields = {
    "no_op", "replace_with_linear", "n_heads_in_group", "num_attention_heads", "window_length",
    "num_sink_tokens", "use_prefill_window_in_sink_attention", "unshifted_sink", "sparsify"};
const std::set<std::string> kBlockFfnFields = {"no_op", "replace_with_linear", "ffn_mult",
                                               "intermediate_size", "sparsify"};

void refuse_unimplemented_block_fields(const json& a, const json& f, const std::string& where) {
  for (const auto& [part, fields] : {std::pair<const json*, const std::set<std::string>*>{
                                         &a, &kBlockAttentionFields},
                                     {&f, &kBlockFfnFields}})
    for (auto it = part->begin(); it != part->end(); ++it)
      if (!fields->count(it.key()))
        throw FormatError(fmt::format(
            "[load_config] {}.{}.{}: unknown DeciLM block field (found {}; expected only {})",
            where, part == &a ? "attention" : "ffn", it.key(), it.value().dump().substr(0, 200),
            fmt::join(*fields, ", ")));
  for (const char* key : {"window_length", "num_sink_tokens"})
    if (a.contains(key) && !a[key].is_null())
      throw FormatError(fmt::format(
          "[load_config] {}.attention.{} {}: {} attention is not implemented (expected null)",
          where, key, a[key].dump(), std::string(key) == "window_length" ? "sliding-window"
                                                                         : "attention-sink"));
}

std::vector<LayerConfig> layers_from_block_configs(const json& j, int64_t H, int64_t Hd,
                                                   int64_t D, const std::string& file) {
  const json& blocks = j["block_configs"];
  if (!blocks.is_array() || blocks.empty() || blocks.size() > size_t(kMaxLayers))
    throw FormatError(fmt::format("[load_config] {}: block_configs must be an array of 1..{} "
                                  "blocks", file, kMaxLayers));
  std::vector<LayerConfig> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const json& b = blocks[i];
    std::string where = fmt::format("{} block_configs[{}]", file, i);
    if (!b.is_object() || !b.contains("attention") || !b.contains("ffn"))
      throw FormatError(fmt::format("[load_config] {}: needs 'attention' and 'ffn'", where));
    const json& a = b["attention"];
    const json& f = b["ffn"];
    if (!a.is_object() || !f.is_object())
      throw FormatError(fmt::format("[load_config] {}: 'attention' and 'ffn' must be objects",
                                    where));
    refuse_unimplemented_block_fields(a, f, where);
    if (get_or<bool>(a, "replace_with_linear", false, where) ||
        get_or<bool>(f, "replace_with_linear", false, where))
      throw FormatError(fmt::format("[load_config] {}: replace_with_linear is not supported",
                                    where));
    LayerConfig l;
    l.head_dim = Hd;
    // DeciLM marks a removed part with no_op, or (as converters read it) with a null
    // n_heads_in_group / ffn_mult.
    l.attention_no_op = get_or<bool>(a, "no_op", false, where) ||
                        (a.contains("n_heads_in_group") && a["n_heads_in_group"].is_null());
    if (!l.attention_no_op) {
      // Our own writer adds num_attention_heads per block when it differs from the global one.
      l.num_attention_heads = get_or<int64_t>(a, "num_attention_heads", H, where);
      int64_t group = get<int64_t>(a, "n_heads_in_group", where);
      if (group <= 0 || l.num_attention_heads % group)
        throw FormatError(fmt::format("[load_config] {}: n_heads_in_group {} does not divide "
                                      "num_attention_heads {}",
                                      where, group, l.num_attention_heads));
      l.num_key_value_heads = l.num_attention_heads / group;
    }
    l.ffn_no_op = get_or<bool>(f, "no_op", false, where) ||
                  (f.contains("ffn_mult") && f["ffn_mult"].is_null() &&
                   !f.contains("intermediate_size"));
    if (!l.ffn_no_op) {
      if (f.contains("intermediate_size")) {
        l.intermediate_size = get<int64_t>(f, "intermediate_size", where);
      } else {
        const double mult = get<double>(f, "ffn_mult", where);
        // The width must be a real FFN width before the cast to int64 (validate() bounds it).
        const double width = 2.0 * mult * double(D) / 3.0;
        if (!(width >= 0 && width <= double(kMaxIntermediateSize)))
          throw FormatError(fmt::format("[load_config] {}: ffn_mult {} with hidden_size {} gives "
                                        "no FFN width in 0..{}", where, mult, D,
                                        kMaxIntermediateSize));
        l.intermediate_size = decilm_ffn_width(mult, D);
      }
    }
    out.push_back(l);
  }
  return out;
}

// RoPE as transformers 5 reads it (modeling_rope_utils.py convert_rope_params_to_dict and
// standardize_rope_params): the object is a non-empty "rope_scaling" if there is one (the legacy
// field wins), else "rope_parameters"; rope_theta comes from inside it, else from the top level;
// llama3's original_max_position_embeddings defaults to max_position_embeddings.
void read_rope(const json& j, const std::string& file, ModelConfig& c) {
  const bool legacy = j.contains("rope_scaling") && j["rope_scaling"].is_object() &&
                      !j["rope_scaling"].empty();
  c.hf_spelling.rope_parameters = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  const char* field = legacy ? "rope_scaling" : "rope_parameters";
  const json none = json::object();
  const json& r = legacy ? j["rope_scaling"] : c.hf_spelling.rope_parameters ? j[field] : none;
  if (!r.is_object())
    throw FormatError(fmt::format("[load_config] {}: field '{}' must be an object, found {}", file,
                                  field, r.dump().substr(0, 200)));
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it.value().is_object())  // keyed by layer type (Gemma 3's sliding and full attention)
      throw FormatError(fmt::format("[load_config] {}: {}.{}: RoPE per layer type is not "
                                    "supported (expected one object of rope_type, rope_theta, ...)",
                                    file, field, it.key()));
  const std::string where = fmt::format("{} {}", file, field);
  c.rope_theta = get_or<double>(r, "rope_theta", get_or<double>(j, "rope_theta", 10000.0, file),
                                where);
  for (const auto& [o, name] : {std::pair<const json*, std::string>{&r, field + std::string(".")},
                                 {&j, ""}}) {
    const double partial = get_or<double>(*o, "partial_rotary_factor", 1.0, file);
    if (partial != 1.0)
      throw FormatError(fmt::format("[load_config] {}: {}partial_rotary_factor {}: RoPE over part "
                                    "of head_dim is not supported (expected 1.0)", file, name,
                                    partial));
  }
  const std::string type = r.contains("rope_type") ? get<std::string>(r, "rope_type", where)
                           : r.contains("type")    ? get<std::string>(r, "type", where)
                                                   : "default";
  if (type != "llama3" && type != "linear" && type != "default")
    throw FormatError(fmt::format("[load_config] {}: {}.rope_type '{}' is not supported "
                                  "(expected default, linear or llama3)", file, field, type));
  // The object is kept as read, whatever its type ("default" scales nothing), so that it is
  // written back the same.
  if (!legacy && !c.hf_spelling.rope_parameters) return;
  RopeScaling s;
  s.raw = r;
  s.rope_type = type;
  s.factor = get_or<double>(r, "factor", 1.0, where);
  s.low_freq_factor = get_or<double>(r, "low_freq_factor", 1.0, where);
  s.high_freq_factor = get_or<double>(r, "high_freq_factor", 4.0, where);
  s.original_max_position_embeddings = get_or<int64_t>(
      r, "original_max_position_embeddings",
      get_or<int64_t>(j, "original_max_position_embeddings", c.max_position_embeddings, file),
      where);
  c.rope_scaling = s;
}

// The window transformers' mask builders apply (masking_utils create_sliding_window_causal_mask):
// Mistral's and Mixtral's whenever sliding_window is set; Qwen2 / Qwen3's only with
// use_sliding_window, on the layers that layer_types (or, without it, max_window_layers) marks
// "sliding_attention"; Qwen3-MoE's with use_sliding_window, on every layer. Llama
// and DeciLM have no window whatever the file says.
std::optional<int64_t> read_sliding_window(const json& j, const std::string& model_type,
                                           int64_t num_layers, const std::string& file) {
  const bool mistral = model_type == "mistral" || model_type == "mixtral";
  const bool qwen = model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe";
  if (!mistral && !qwen) return std::nullopt;
  if (!j.contains("sliding_window") || j["sliding_window"].is_null()) return std::nullopt;
  const int64_t window = get<int64_t>(j, "sliding_window", file);
  if (window <= 0)
    throw FormatError(fmt::format("[load_config] {}: sliding_window must be positive, found {}",
                                  file, window));
  if (mistral) return window;
  if (!get_or<bool>(j, "use_sliding_window", false, file)) return std::nullopt;
  // Qwen3-MoE has neither layer_types nor max_window_layers: every layer slides
  // (Qwen3MoeConfig.__post_init__, Qwen3MoeModel.forward's mask_function).
  if (model_type == "qwen3_moe") return window;
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& types = j["layer_types"];
    if (!types.is_array())
      throw FormatError(fmt::format("[load_config] {}: field 'layer_types' must be an array of "
                                    "strings, found {}", file, types.dump().substr(0, 200)));
    const bool slides = std::count(types.begin(), types.end(), json("sliding_attention")) > 0;
    return slides ? std::optional<int64_t>(window) : std::nullopt;
  }
  const int64_t max_window_layers = get_or<int64_t>(j, "max_window_layers", 28, file);
  return max_window_layers < num_layers ? std::optional<int64_t>(window) : std::nullopt;
}

}  // namespace

int64_t decilm_ffn_width(double ffn_mult, int64_t hidden) {
  const auto n = int64_t(2.0 * ffn_mult * double(hidden) / 3.0);
  return n % 256 == 0 ? n : n + 256 - n % 256;
}

std::optional<double> decilm_ffn_mult_for(int64_t intermediate_size, int64_t hidden) {
  if (intermediate_size <= 0 || intermediate_size % 256 || hidden <= 0) return std::nullopt;
  const double exact = 1.5 * double(intermediate_size) / double(hidden);
  for (int digits = 1; digits <= 17; ++digits) {  // shortest decimal that round-trips
    const double scale = std::pow(10.0, digits);
    for (double m : {std::round(exact * scale) / scale, std::ceil(exact * scale) / scale})
      if (decilm_ffn_width(m, hidden) == intermediate_size) return m;
  }
  for (double m = exact, i = 0; i < 64; ++i, m = std::nextafter(m, 1e300))
    if (decilm_ffn_width(m, hidden) == intermediate_size) return m;
  return std::nullopt;
}

ModelConfig config_from_hf_json(const json& j, const std::string& file) {
  if (!j.is_object())
    throw FormatError(fmt::format("[load_config] {}: expected a JSON object", file));
  if (j.contains("model_type") && j["model_type"].is_string() &&
      is_nemotron_h_model_type(j["model_type"].get<std::string>()))
    return nemotron_h_config_from_hf_json(j, file);
  ModelConfig c;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    if (!j["architectures"][0].is_string())
      throw FormatError(fmt::format("[load_config] {}: field 'architectures' must hold strings, "
                                    "found {}", file, j["architectures"].dump().substr(0, 200)));
    c.architecture = j["architectures"][0].get<std::string>();
  }
  c.model_type = get_or<std::string>(j, "model_type", "llama", file);
  require_known_model_type(c.model_type, file);
  refuse_unimplemented_fields(j, file);
  c.vocab_size = get<int64_t>(j, "vocab_size", file);
  c.hidden_size = get<int64_t>(j, "hidden_size", file);
  c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 2048, file);
  c.rms_norm_eps = get_or<double>(j, "rms_norm_eps", 1e-6, file);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false, file);
  c.attention_bias = get_or<bool>(j, "attention_bias", c.model_type == "qwen2", file);
  c.qk_norm = get_or<bool>(j, "qk_norm", c.model_type == "qwen3" || c.model_type == "qwen3_moe",
                          file);
  c.bos_token_id = first_id(j, "bos_token_id", 1, file);
  c.eos_token_id = first_id(j, "eos_token_id", 2, file);
  // Llama 3.1 lists several EOS ids: the first is modelled, the list is written back as read.
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty())
    c.extra["eos_token_id"] = j["eos_token_id"];
  // transformers 5 writes "dtype"; both name the same field (torch_dtype is its old name).
  c.hf_spelling.dtype = !j.contains("torch_dtype") && j.contains("dtype");
  c.torch_dtype = get_or<std::string>(j, c.hf_spelling.dtype ? "dtype" : "torch_dtype", "float32",
                                      file);
  read_rope(j, file, c);
  const std::string act = get_or<std::string>(j, "hidden_act", "silu", file);
  if (act != "silu")
    throw FormatError(fmt::format("[load_config] {}: hidden_act '{}' is not supported (expected "
                                  "silu: the FFN is SwiGLU)", file, act));
  const int64_t H = get<int64_t>(j, "num_attention_heads", file);
  if (H <= 0)
    throw FormatError(fmt::format("[load_config] {}: num_attention_heads must be positive, "
                                  "found {}", file, H));
  const int64_t Hd = get_or<int64_t>(j, "head_dim", c.hidden_size / H, file);
  if (j.contains("block_configs")) {
    c.layers = layers_from_block_configs(j, H, Hd, c.hidden_size, file);
  } else {
    LayerConfig l;
    l.num_attention_heads = H;
    l.num_key_value_heads = get_or<int64_t>(j, "num_key_value_heads", H, file);
    l.head_dim = Hd;
    l.intermediate_size = get<int64_t>(j, "intermediate_size", file);
    int64_t L = get<int64_t>(j, "num_hidden_layers", file);
    if (L <= 0 || L > kMaxLayers)
      throw FormatError(fmt::format("[load_config] {}: num_hidden_layers {} out of range",
                                    file, L));
    c.layers.assign(size_t(L), l);
  }
  // A part of width zero is a removed part: one spelling for it, so that what is written back
  // (config_to_hf_json: no_op) reads back equal.
  for (auto& l : c.layers) {
    if (!l.attention_no_op && l.num_attention_heads == 0) l.attention_no_op = true;
    if (l.attention_no_op) l.num_attention_heads = l.num_key_value_heads = 0;
    if (!l.ffn_no_op && l.intermediate_size == 0) l.ffn_no_op = true;
    if (l.ffn_no_op) l.intermediate_size = 0;
  }
  if (is_moe_family_model_type(c.model_type)) apply_moe_family(j, file, c);
  c.sliding_window = read_sliding_window(j, c.model_type, c.num_layers(), file);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kModelled.count(it.key())) c.extra[it.key()] = it.value();
  try {
    c.validate("load_config");
  } catch (const ConfigError& e) {
    throw FormatError(fmt::format("{} (in {})", e.what(), file));
  }
  return c;
}

json config_to_hf_json(const ModelConfig& c) {
  if (c.is_hybrid()) {
    if (is_nemotron_h_model_type(c.model_type)) return nemotron_h_config_to_hf_json(c);
    if (is_moe_family_model_type(c.model_type)) return moe_family_config_to_hf_json(c);
    throw ConfigError(fmt::format("[config_to_hf_json] {} (model_type {}) has Mamba-2, MoE or "
                                  "relu² layers: expected a nemotron_h, qwen3_moe or mixtral "
                                  "model_type to write them as", describe(c), c.model_type));
  }
  json j = c.extra;
  const LayerConfig* first_attn = nullptr;
  int64_t max_F = 0;
  for (const auto& l : c.layers) {
    if (l.has_attention() && !first_attn) first_attn = &l;
    max_F = std::max(max_F, l.intermediate_size);
  }
  LayerConfig ref = first_attn ? *first_attn : c.layers.front();
  const bool homogeneous = c.is_homogeneous() && ref.has_attention() && ref.has_ffn();
  j["model_type"] = homogeneous ? (c.model_type == "nemotron-nas" ? "llama" : c.model_type)
                                : "nemotron-nas";
  j["architectures"] = {homogeneous ? (c.architecture == "DeciLMForCausalLM" ? "LlamaForCausalLM"
                                                                             : c.architecture)
                                    : "DeciLMForCausalLM"};
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_layers();
  // A model without any attention still needs positive global head counts to be read back;
  // every block says no_op, so the value is never used.
  j["num_attention_heads"] = first_attn ? ref.num_attention_heads : 1;
  j["num_key_value_heads"] = first_attn ? ref.num_key_value_heads : 1;
  j["head_dim"] = ref.head_dim;
  j["intermediate_size"] = homogeneous ? ref.intermediate_size : max_F;
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (c.hf_spelling.rope_parameters) {
    json r = c.rope_scaling ? c.rope_scaling->raw : json{{"rope_type", "default"}};
    r["rope_theta"] = c.rope_theta;
    j["rope_parameters"] = r;
  } else {
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = c.rope_scaling ? c.rope_scaling->raw : json(nullptr);
  }
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  if (c.qk_norm && j["model_type"] != "qwen3" && j["model_type"] != "qwen3_moe") j["qk_norm"] = true;
  j["bos_token_id"] = c.bos_token_id;
  const json& eos_list = c.extra.contains("eos_token_id") ? c.extra["eos_token_id"] : json();
  j["eos_token_id"] = eos_list.is_array() && eos_list[0] == c.eos_token_id ? eos_list
                                                                           : json(c.eos_token_id);
  j[c.hf_spelling.dtype ? "dtype" : "torch_dtype"] = c.torch_dtype;
  if (!j.contains("hidden_act")) j["hidden_act"] = "silu";  // kept as read otherwise
  if (!homogeneous) {
    json blocks = json::array();
    for (const auto& l : c.layers) {
      json a = {{"no_op", !l.has_attention()}, {"replace_with_linear", false},
                {"n_heads_in_group", nullptr}};
      if (l.has_attention()) {
        a["n_heads_in_group"] = l.num_attention_heads / l.num_key_value_heads;
        // Our extension (DeciLM has one global head count); hf_export refuses it. See
        // docs/formats.md.
        if (l.num_attention_heads != ref.num_attention_heads)
          a["num_attention_heads"] = l.num_attention_heads;
      }
      json f = {{"no_op", !l.has_ffn()}, {"replace_with_linear", false}, {"ffn_mult", nullptr}};
      if (l.has_ffn()) {
        const std::optional<double> mult = decilm_ffn_mult_for(l.intermediate_size, c.hidden_size);
        f["ffn_mult"] = mult ? *mult : 1.5 * double(l.intermediate_size) / double(c.hidden_size);
        // Our extension for widths DeciLM's rule cannot express; hf_export refuses it.
        if (!mult) f["intermediate_size"] = l.intermediate_size;
      }
      blocks.push_back({{"attention", a}, {"ffn", f}});
    }
    j["block_configs"] = blocks;
  }
  return j;
}

std::string describe(const ModelConfig& c) {
  // A hybrid model's layer: the parts it has (Nemotron-H's one), e.g. "M128x64", "H32/G2",
  // "E512/k22 F2688".
  auto parts_of = [](const LayerConfig& l) {
    std::vector<std::string> parts;
    if (l.has_attention())
      parts.push_back(fmt::format("H{}/G{}", l.num_attention_heads, l.num_key_value_heads));
    if (l.has_mamba())
      parts.push_back(fmt::format("M{}x{}", l.mamba->mamba_num_heads, l.mamba->mamba_head_dim));
    if (l.has_ffn()) parts.push_back(fmt::format("F{}", l.intermediate_size));
    if (l.has_moe())
      parts.push_back(fmt::format("E{}/k{} F{}", l.moe->num_experts, l.moe->num_experts_per_tok,
                                  l.moe->moe_intermediate_size));
    return fmt::format("{}", fmt::join(parts, " "));
  };
  auto layer = [&](const LayerConfig& l) {
    if (c.is_hybrid()) return parts_of(l);
    std::string a = l.has_attention()
                        ? fmt::format("H{}/G{}", l.num_attention_heads, l.num_key_value_heads)
                        : "no-attn";
    std::string f = l.has_ffn() ? fmt::format("F{}", l.intermediate_size) : "no-ffn";
    return a + " " + f;
  };
  if (c.is_homogeneous())
    return fmt::format("D={} L={} [{}]", c.hidden_size, c.num_layers(), layer(c.layers[0]));
  if (c.is_hybrid()) {  // dozens of layers of a few kinds: each distinct layer with its count
    std::vector<std::pair<std::string, int64_t>> kinds;
    for (const auto& l : c.layers) {
      const std::string d = l.is_present() ? layer(l) : "removed";
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == d; });
      if (it == kinds.end())
        kinds.emplace_back(d, 1);
      else
        ++it->second;
    }
    std::vector<std::string> parts;
    for (const auto& [d, n] : kinds) parts.push_back(fmt::format("{} x{}", d, n));
    return fmt::format("D={} L={} [{}]", c.hidden_size, c.num_layers(), fmt::join(parts, ", "));
  }
  std::vector<std::string> parts;
  for (const auto& l : c.layers) parts.push_back(layer(l));
  return fmt::format("D={} L={} [{}]", c.hidden_size, c.num_layers(), fmt::join(parts, " | "));
}

}  // namespace ac
