#include "export/checks.h"

#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "common/json_io.h"
#include "io/gguf_vocab.h"
#include "hardware/engine.h"
#include "io/hf_tokenizer.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"

namespace ac {
using json = nlohmann::json;

namespace {

// Why a parent field may change or disappear on export. Anything else changing is an error.
const std::map<std::string, std::string> kReasons = {
    {"architectures", "layer shapes differ: DeciLMForCausalLM (vLLM, TensorRT-LLM), or the "
                      "parent's class when all layers are equal"},
    {"model_type", "nemotron-nas for heterogeneous layers, the parent's type otherwise"},
    {"hidden_size", "compressed architecture (hidden channels pruned)"},
    {"intermediate_size", "compressed architecture (FFN width; per layer in block_configs)"},
    {"num_attention_heads", "compressed architecture (query heads)"},
    {"num_key_value_heads", "compressed architecture (KV heads; per layer in block_configs)"},
    {"head_dim", "written explicitly (never derived from hidden_size / heads)"},
    {"block_configs", "per-layer DeciLM shapes of the compressed architecture"},
    {"auto_map", "DeciLM: AutoConfig is configuration_decilm.DeciLMConfig, written beside "
                 "config.json, so that transformers reads the configuration"},
    {"torch_dtype", "export --dtype"},
    {"dtype", "export --dtype (transformers 5's name of torch_dtype)"},
    {"hidden_act", "written explicitly (SwiGLU: silu)"},
    {"eos_token_id", "written explicitly"},
    {"bos_token_id", "written explicitly"},
    {"rope_scaling", "written explicitly"},
    {"attention_bias", "written explicitly"},
    {"tie_word_embeddings", "written explicitly"},
    {"max_position_embeddings", "written explicitly"},
    {"rms_norm_eps", "written explicitly"},
    {"rope_theta", "written explicitly"},
    {"rope_parameters", "written explicitly (transformers 5's rope_theta and rope_scaling)"},
};
// Fields whose value may change; the others may only be added with the parent's default.
const std::set<std::string> kMayChange = {"architectures", "model_type", "hidden_size",
                                          "intermediate_size", "num_attention_heads",
                                          "num_key_value_heads", "head_dim", "block_configs",
                                          "torch_dtype", "dtype", "auto_map"};

json field_or_null(const json& j, const std::string& k) {
  return j.contains(k) ? j[k] : json(nullptr);
}

}  // namespace

std::vector<FieldChange> compare_config_fields(const json& parent, const json& exported) {
  std::vector<FieldChange> out;
  std::vector<std::string> bad;
  std::set<std::string> keys;
  for (auto it = parent.begin(); it != parent.end(); ++it) keys.insert(it.key());
  for (auto it = exported.begin(); it != exported.end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    FieldChange f{k, "carried", field_or_null(parent, k), field_or_null(exported, k), ""};
    if (f.before == f.after) {
      if (f.before.is_null()) continue;  // null and absent are the same
      if (!parent.contains(k)) f.status = "added";
      out.push_back(f);
      continue;
    }
    auto reason = kReasons.find(k);
    f.status = f.before.is_null() ? "added" : f.after.is_null() ? "dropped" : "changed";
    if (f.status == "added") {
      f.reason = reason != kReasons.end() ? reason->second : "written by the exporter";
    } else if (reason != kReasons.end() && kMayChange.count(k)) {
      f.reason = reason->second;
    } else {
      bad.push_back(fmt::format("'{}' {} ({} -> {})", k, f.status, f.before.dump(),
                                f.after.dump()));
    }
    out.push_back(f);
  }
  if (!bad.empty())
    throw ConfigError(msg("export", "the export would silently change the parent's config.json: "
                          "{}", fmt::join(bad, "; ")));
  return out;
}

void check_decilm_loadable(const ModelConfig& c) {
  if (c.qk_norm)
    throw ConfigError(msg("export hf", "this heterogeneous model has q/k norms (Qwen3), which "
                          "DeciLMForCausalLM does not have: its loaders would drop them. Keep "
                          "every layer's shape equal (search --method minitron) to export it as "
                          "its parent's class"));
  // The rules live in one place: hardware/engine.cpp structure_violations, here with what the
  // DeciLM format itself expresses (engine.h decilm_format_structure).
  EngineSpec decilm;
  decilm.name = "DeciLM";
  decilm.structure = decilm_format_structure();
  const std::vector<std::string> bad = structure_violations(c, decilm);
  if (!bad.empty())
    throw ConfigError(msg("export hf", "this heterogeneous model is not loadable as "
                          "DeciLMForCausalLM: {}. Export it with --format gguf (llama.cpp's "
                          "deci architecture reads every layer's head counts and widths), or "
                          "search it for an engine that loads DeciLM (compress --scenario with "
                          "engine vllm or tensorrt-llm: one query-head count, FFN widths in "
                          "steps of 256)",
                          fmt::join(bad, "; ")));
}

void check_config_agrees_with_tensors(const ModelConfig& c, const json& config_json,
                                      const TensorMap& tensors, const std::string& file) {
  const ModelConfig back = config_from_hf_json(config_json, file);
  auto fail = [&](const std::string& what) {
    throw FormatError(msg("export", "{}: {} read back from config.json differs from the model: "
                          "config.json cannot express it", file, what));
  };
  if (back.layers.size() != c.layers.size()) fail("num_hidden_layers");
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (back.layers[i] != c.layers[i]) fail(fmt::format("layer {}", i));
  if (back.hidden_size != c.hidden_size || back.vocab_size != c.vocab_size)
    fail("hidden_size / vocab_size");
  if (back.rope_theta != c.rope_theta || back.rms_norm_eps != c.rms_norm_eps) fail("rope/eps");
  if (back.rope_scaling.has_value() != c.rope_scaling.has_value() ||
      (c.rope_scaling && back.rope_scaling->raw != c.rope_scaling->raw))
    fail("rope_scaling");
  if (back.bos_token_id != c.bos_token_id || back.eos_token_id != c.eos_token_id)
    fail("bos/eos ids");
  if (back.tie_word_embeddings != c.tie_word_embeddings) fail("tie_word_embeddings");
  from_tensor_map(back, tensors, file);  // throws on any shape that disagrees
}

TensorShapes expected_tensor_set(const fs::path& source_dir, bool tied, bool head_written,
                                 std::vector<std::string>& notes) {
  TensorShapes out;
  const std::string suffix = ".rotary_emb.inv_freq", head = "lm_head.weight";
  std::vector<std::string> left_out;
  for (const auto& [name, t] : load_safetensors_dir(source_dir)) {
    const bool buffer = name.size() > suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (buffer || (name == head && tied && !head_written)) {
      left_out.push_back(name);
      continue;
    }
    out[name] = t.sizes().vec();
  }
  if (tied && head_written && out.count("model.embed_tokens.weight"))
    out[head] = out["model.embed_tokens.weight"];
  if (!left_out.empty())
    notes.push_back(fmt::format("source tensors not written: {} (RoPE inv_freq buffers are "
                                "derived from config.json; a tied lm_head.weight is the "
                                "embedding)", fmt::join(left_out, ", ")));
  return out;
}

void check_tensor_set(const TensorShapes& expected, const fs::path& file) {
  const SafetensorsFile f(file);
  std::vector<std::string> bad;
  for (const auto& [name, shape] : expected) {
    if (!f.contains(name))
      bad.push_back(fmt::format("'{}' {} missing", name, shape));
    else if (f.shape(name) != shape)
      bad.push_back(fmt::format("'{}' has shape {}, expected {}", name, f.shape(name), shape));
  }
  for (const std::string& name : f.names())
    if (!expected.count(name)) bad.push_back(fmt::format("'{}' not in the source", name));
  if (!bad.empty())
    throw InternalError(msg("export", "{}: the tensors written differ from those read: {}",
                            file.string(), fmt::join(bad, "; ")));
}

namespace {

std::map<std::string, std::string> special_texts(const fs::path& dir) {
  std::map<std::string, std::string> out;  // role ("bos_token") -> text
  if (!fs::exists(dir / "special_tokens_map.json")) return out;
  const json j = read_json_file(dir / "special_tokens_map.json");
  for (const char* role : {"bos_token", "eos_token", "unk_token"}) {
    if (!j.contains(role)) continue;
    const json& t = j[role];
    out[role] = t.is_object() ? t.value("content", "") : t.get<std::string>();
  }
  return out;
}

void check_text_is_one_id(const std::vector<std::string>& tokens, const std::string& role,
                          const std::string& text, int64_t want_id, const std::string& file) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == text) ids.push_back(int64_t(i));
  if (ids.size() != 1 || ids[0] != want_id)
    throw ConfigError(msg("export", "{}: {} '{}' is token(s) [{}] of the vocabulary, expected "
                          "exactly id {} (config.json)", file, role, text,
                          fmt::join(ids, ", "), want_id));
}

std::string check_llama2c_special_tokens(const ModelConfig& c, const fs::path& dir) {
  const std::string file = (dir / "tokenizer.bin").string();
  const GgufVocab v = vocab_from_tokenizer(Tokenizer::from_llama2c(file, c.vocab_size));
  if (v.bos_id != c.bos_token_id || v.eos_id != c.eos_token_id)
    throw ConfigError(msg("export", "{}: bos/eos ids {}/{} differ from config.json's {}/{}",
                          file, v.bos_id, v.eos_id, c.bos_token_id, c.eos_token_id));
  check_text_is_one_id(v.tokens, "bos_token", v.tokens[size_t(v.bos_id)], v.bos_id, file);
  check_text_is_one_id(v.tokens, "eos_token", v.tokens[size_t(v.eos_id)], v.eos_id, file);
  check_text_is_one_id(v.tokens, "unk_token", v.tokens[size_t(v.unk_id)], v.unk_id, file);
  for (const auto& [role, text] : special_texts(dir)) {
    const int64_t id = role == "bos_token" ? v.bos_id : role == "eos_token" ? v.eos_id : v.unk_id;
    check_text_is_one_id(v.tokens, role, text, id, file);
  }
  return "tokenizer.bin: <unk>/<s>/</s> are exactly one token each, at the ids of config.json";
}

/// config.json's EOS ids: eos_token_id, or every id of its list form (Llama 3.1 names three).
std::set<int64_t> config_eos_ids(const ModelConfig& c) {
  std::set<int64_t> ids = {c.eos_token_id};
  if (c.extra.contains("eos_token_id") && c.extra["eos_token_id"].is_array())
    for (const json& id : c.extra["eos_token_id"]) ids.insert(id.get<int64_t>());
  return ids;
}

std::string check_hf_special_tokens(const ModelConfig& c, const fs::path& dir) {
  const std::string file = (dir / "tokenizer.json").string();
  const HfTokenizer tok = HfTokenizer::from_folder(dir);
  if (tok.vocab_size() > c.vocab_size)
    throw ConfigError(msg("export", "{}: the tokenizer has ids up to {} but config.json's "
                          "vocab_size is {}", file, tok.vocab_size() - 1, c.vocab_size));
  const std::set<int64_t> eos = config_eos_ids(c);
  if (tok.bos_id() >= 0 && tok.bos_id() != c.bos_token_id)
    throw ConfigError(msg("export", "{}: the BOS token is id {}, config.json's bos_token_id is {}",
                          file, tok.bos_id(), c.bos_token_id));
  if (tok.eos_id() >= 0 && !eos.count(tok.eos_id()))
    throw ConfigError(msg("export", "{}: the EOS token is id {}, config.json's eos_token_id is "
                          "{}", file, tok.eos_id(), fmt::join(eos, " / ")));
  for (const auto& [role, text] : special_texts(dir)) {
    const std::optional<int64_t> id = tok.token_to_id(text);
    std::string expected;
    if (role == "bos_token" && (!id || *id != c.bos_token_id))
      expected = fmt::format("id {} (config.json bos_token_id)", c.bos_token_id);
    else if (role == "eos_token" && (!id || !eos.count(*id)))
      expected = fmt::format("id {} (config.json eos_token_id)", fmt::join(eos, " / "));
    else if (!id)
      expected = "one token";
    if (!expected.empty())
      throw ConfigError(msg("export", "{}: {} '{}' of special_tokens_map.json is {}, expected {}",
                            file, role, text, id ? fmt::format("id {}", *id) : "no token",
                            expected));
  }
  return "tokenizer.json: BOS / EOS and each special token of special_tokens_map.json are one "
         "token each, at the ids of config.json";
}

}  // namespace

std::vector<std::string> check_special_tokens(const ModelConfig& c, const fs::path& dir) {
  std::vector<std::string> notes;
  if (fs::exists(dir / "tokenizer.bin")) notes.push_back(check_llama2c_special_tokens(c, dir));
  if (fs::exists(dir / "tokenizer.json")) notes.push_back(check_hf_special_tokens(c, dir));
  if (notes.empty()) notes.push_back("no tokenizer files: special tokens not checked");
  return notes;
}

}  // namespace ac
