#include "export/hf_export.h"

#include <fmt/ranges.h>

#include "common/error.h"
#include "common/json_io.h"
#include "export/decilm_remote_code.h"
#include "export/engine_loaders.h"
#include "export/nemotron_h_export.h"
#include "export/nemotron_h_gguf.h"
#include "io/nemotron_h_checkpoint.h"
#include "model/nemotron_h_config.h"
#include "export/zero_padding.h"
#include "io/gguf_vocab.h"
#include "hardware/engine.h"
#include "io/checkpoint.h"
#include "io/companion_files.h"
#include "io/safetensors.h"

namespace ac {
using json = nlohmann::json;

namespace {

at::ScalarType torch_type(GgmlType t) {
  return t == GgmlType::F32 ? at::kFloat : t == GgmlType::F16 ? at::kHalf : at::kBFloat16;
}
const char* hf_dtype_name(GgmlType t) {
  return t == GgmlType::F32 ? "float32" : t == GgmlType::F16 ? "float16" : "bfloat16";
}

/// Largest |difference| of the logits of two models on a fixed probe (0 = identical).
double logit_diff(const LlamaModel& a, const LlamaModel& b) {
  at::NoGradGuard no_grad;
  const int64_t n = std::min<int64_t>(16, a.config.vocab_size);
  at::Tensor probe = at::arange(0, n, at::kLong).flip(0).view({1, -1});  // [1, T]
  return (a.forward(probe) - b.forward(probe)).abs().max().item<double>();
}

/// transformers reads a DeciLM config.json only through remote code (no "nemotron-nas" in its
/// own tables): without an AutoConfig in `auto_map` (a parent's is carried as it was), this adds
/// ours and writes configuration_decilm.py beside it (export/decilm_remote_code.h).
void add_decilm_config_class(const fs::path& dir, json& config, ExportReport& r) {
  if (config.contains("auto_map") && config["auto_map"].is_object() &&
      config["auto_map"].contains("AutoConfig"))
    return;
  if (!config.contains("auto_map") || !config["auto_map"].is_object())
    config["auto_map"] = json::object();
  config["auto_map"]["AutoConfig"] = kDeciLMConfigClass;
  write_file_atomic(dir / (std::string(kDeciLMConfigModule) + ".py"), decilm_configuration_py());
  r.notes.push_back(fmt::format("{}.py written and named in config.json auto_map.AutoConfig: "
                                "transformers reads the DeciLM config with "
                                "AutoConfig.from_pretrained(dir, trust_remote_code=True)",
                                kDeciLMConfigModule));
}

json write_hf(const fs::path& dir, const LlamaModel& m, const fs::path& src,
              const ExportOptions& opt, ExportReport& r) {
  ModelConfig c = m.config;
  c.torch_dtype = hf_dtype_name(opt.dtype);
  const json config = config_to_hf_json(c);
  TensorMap tensors = to_tensor_map(c, m.weights);
  check_config_agrees_with_tensors(c, config, tensors, (dir / "config.json").string());
  // TensorRT-LLM's DeciLM loader reads lm_head.weight even when the embeddings are tied
  // (tensorrt_llm/models/nemotron_nas/convert.py load_model_weights); vLLM skips it when tied
  // (nemotron_nas.py DeciLMForCausalLM.load_weights), and so does our reader.
  if (c.tie_word_embeddings && config["model_type"] == "nemotron-nas") {
    tensors["lm_head.weight"] = m.weights.embed_tokens.clone();
    r.notes.push_back("lm_head.weight written (a copy of model.embed_tokens.weight, "
                      "tie_word_embeddings true): TensorRT-LLM's DeciLM loader reads it");
  }
  r.checks.push_back("config.json read back gives every layer shape, rope, eps, tying and "
                     "special id of the model, and every tensor shape agrees with it");
  json written = config;
  if (config["model_type"] == "nemotron-nas") add_decilm_config_class(dir, written, r);
  for (auto& [name, t] : tensors) t = t.to(torch_type(opt.dtype));
  write_json_file(dir / "config.json", written);
  save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  for (const std::string& name : checkpoint_companion_files()) {
    if (!fs::exists(src / name)) continue;
    fs::copy_file(src / name, dir / name, fs::copy_options::overwrite_existing);
    r.files_copied.push_back(name);
  }
  if (!fs::exists(dir / "generation_config.json")) {
    write_json_file(dir / "generation_config.json",
                    {{"bos_token_id", c.bos_token_id}, {"eos_token_id", config["eos_token_id"]}});
    r.notes.push_back("generation_config.json written from config.json's bos/eos ids (the "
                      "source had none)");
  }
  return written;
}

// `m` widened with zero heads and zero FFN channels where DeciLM cannot state its shapes
// (export/zero_padding.h), with a note of what was added; `m` itself when nothing is needed or
// when its head_dims differ or it has q/k norms (check_decilm_loadable then says why).
LlamaModel widen_for_decilm(const LlamaModel& m, ExportReport& r) {
  LlamaModel out{m.config, m.weights};
  int64_t head_dim = -1;
  bool one_head_dim = !m.config.qk_norm;
  for (const auto& l : m.config.layers)
    if (l.has_attention()) {
      one_head_dim &= head_dim < 0 || l.head_dim == head_dim;
      head_dim = l.head_dim;
    }
  const int64_t heads_added = one_head_dim ? query_head_padding_parameters(m.config) : 0;
  if (heads_added > 0) out = pad_query_heads(out);
  const int64_t multiple = decilm_format_structure().ffn_width_multiple;
  const int64_t ffn_added = ffn_padding_parameters(out.config, multiple);
  if (ffn_added > 0) out = pad_ffn_widths(out, multiple);
  if (heads_added + ffn_added == 0) return out;
  const double diff = logit_diff(out, m);
  if (!(diff <= 1e-3))
    throw InternalError(msg("export", "the zero heads and channels change the logits by {}", diff));
  r.notes.push_back(fmt::format(
      "HF files: the model widened with zeros to what DeciLM can state ({}{}): the same function "
      "(logits within {:.1e}), {} more parameters ({:.1f}%); engines that load these files run "
      "the wider layers. model.gguf, if written, keeps the searched shapes",
      heads_added > 0 ? fmt::format("every attention layer {} query heads", max_query_heads(out.config)) : "",
      ffn_added > 0 ? fmt::format("{}FFN widths in zero channels to multiples of {}",
                                  heads_added > 0 ? "; " : "", multiple) : "",
      diff, heads_added + ffn_added,
      100.0 * double(heads_added + ffn_added) / double(m.config.num_parameters())));
  return out;
}

void add_decilm_notes(const ModelConfig& c, ExportReport& r) {
  for (const auto& l : c.layers)
    if (l.has_attention() && l.num_attention_heads * l.head_dim != c.hidden_size) {
      r.notes.push_back(fmt::format(
          "head_dim {} != hidden_size {} / num_attention_heads {}: head_dim is written "
          "explicitly; loaders that derive it (llama.cpp convert_hf_to_gguf.py DeciModel uses "
          "hidden_size // num_attention_heads) would misread this model: use export --format "
          "gguf for llama.cpp", l.head_dim, c.hidden_size, l.num_attention_heads));
      return;
    }
}

}  // namespace

LlamaModel round_to_dtype(const LlamaModel& m, GgmlType dtype) {
  AC_CHECK(!ggml_is_quantized(dtype), "round_to_dtype of the block type {}", ggml_type_name(dtype));
  TensorMap t = to_tensor_map(m.config, m.weights);
  for (auto& [name, v] : t) v = v.to(torch_type(dtype)).to(at::kFloat);
  return LlamaModel{m.config, from_tensor_map(m.config, t, "round_to_dtype")};
}

json ExportReport::to_json() const {
  json fj = json::array();
  for (const auto& f : fields)
    fj.push_back({{"field", f.field}, {"status", f.status}, {"before", f.before},
                  {"after", f.after}, {"reason", f.reason}});
  return {{"source", source},
          {"dtype", dtype},
          {"fields", fj},
          {"files_copied", files_copied},
          {"checks", checks},
          {"notes", notes},
          {"max_logit_diff_hf", max_logit_diff_hf},
          {"max_logit_diff_gguf", max_logit_diff_gguf}};
}

namespace {

/// export_model for a Nemotron-H checkpoint (export/nemotron_h_export.h, export/nemotron_h_gguf.h):
/// the HF folder in fp32 and model.gguf as llama.cpp's nemotron_h / nemotron_h_moe.
ExportReport export_nemotron_h(const fs::path& model_dir, const fs::path& out_dir,
                               const ExportOptions& opt) {
  if (!opt.engine.empty())
    throw ConfigError(msg("export", "--engine {}: the engines' structure rules (engines/*.json) "
                          "are written for the Llama family; {} is a Nemotron-H: export it "
                          "without --engine", opt.engine, model_dir.string()));
  if (opt.hf && opt.dtype != GgmlType::F32)
    throw ConfigError(msg("export", "--dtype {}: a Nemotron-H's HF export is written in f32; use "
                          "--dtype f32, or --format gguf for {}", ggml_dtype_string(opt.dtype),
                          ggml_dtype_string(opt.dtype)));
  const NemotronHModel m = load_nemotron_h_checkpoint(model_dir);
  ExportReport r;
  r.source = fs::absolute(model_dir).lexically_normal().string();
  r.dtype = ggml_dtype_string(opt.dtype);
  // Everything llama.cpp could refuse is found before anything is written.
  GgufVocab vocab;
  if (opt.gguf) {
    check_nemotron_h_gguf_exportable(m.config);
    vocab = vocab_from_checkpoint(model_dir, m.config.vocab_size);
    check_vocab_exportable(vocab, m.config.vocab_size);
  }
  StagingDir staging(out_dir);
  if (opt.hf) {
    write_nemotron_h_files(staging.path(), m, model_dir);
    at::NoGradGuard no_grad;
    const int64_t n = std::min<int64_t>(16, m.config.vocab_size);
    const at::Tensor probe = at::arange(0, n, at::kLong).flip(0).view({1, -1});
    r.max_logit_diff_hf = (load_nemotron_h_checkpoint(staging.path()).forward(probe) -
                           m.forward(probe)).abs().max().item<double>();
    if (r.max_logit_diff_hf != 0)
      throw InternalError(msg("export", "the Nemotron-H HF export reloads to logits that differ "
                              "by {}", r.max_logit_diff_hf));
    r.checks.push_back("the HF folder loads back (our loader) to logits identical to the source");
  }
  if (opt.gguf) {
    write_nemotron_h_gguf(staging.path() / "model.gguf", m, vocab, {opt.dtype, "autocompress"});
    r.notes.push_back(fmt::format("model.gguf: architecture {} (llama.cpp runs it; this tool "
                                  "does not read a Nemotron-H GGUF back)",
                                  nemotron_h_gguf_architecture(m.config)));
  }
  write_json_file(staging.path() / "export_report.json", r.to_json());
  staging.commit();
  return r;
}

}  // namespace

ExportReport export_model(const fs::path& model_dir, const fs::path& out_dir,
                          const ExportOptions& opt) {
  if (!opt.hf && !opt.gguf) throw ConfigError(msg("export", "no output format chosen"));
  if (opt.hf && ggml_is_quantized(opt.dtype))
    throw ConfigError(msg("export", "--dtype {} is a GGUF block type: use --format gguf (HF "
                          "safetensors hold f32, f16 or bf16)", ggml_dtype_string(opt.dtype)));
  check_not_overwriting_input(model_dir, out_dir, "export");
  if (is_nemotron_h_checkpoint(model_dir)) return export_nemotron_h(model_dir, out_dir, opt);
  const LlamaModel m = load_checkpoint(model_dir);
  ExportReport r;
  r.source = fs::absolute(model_dir).lexically_normal().string();
  r.dtype = ggml_dtype_string(opt.dtype);
  if (!opt.engine.empty()) {
    const EngineSpec engine = load_engine(opt.engine);
    check_engine_loads(m.config, engine, "export", opt.tensor_parallel);
    r.checks.push_back(fmt::format("{} loads this structure (engines/{}.json \"structure\")",
                                   engine.name, engine.name));
  }
  const std::string model_type = config_to_hf_json(m.config)["model_type"].get<std::string>();
  const bool heterogeneous = model_type == "nemotron-nas";
  if (opt.hf && m.config.attention_bias && model_type != "qwen2")
    throw ConfigError(msg("export hf", "{}: q/k/v biases (attention_bias) written as model_type "
                          "{}: transformers' {} reads attention_bias true as an o_proj bias too, "
                          "which this model does not have; expected model_type qwen2 (every "
                          "layer's shape equal, search --method minitron), or export --format "
                          "gguf", model_dir.string(), model_type, model_type));
  // What the HF files hold: a heterogeneous model widened by zero heads and zero FFN channels to
  // what DeciLM can state (one query-head count, FFN widths in steps of 256), the same function;
  // the GGUF keeps the searched shapes (llama.cpp reads them per layer).
  LlamaModel hf_model{m.config, m.weights};
  if (opt.hf && heterogeneous) {
    hf_model = widen_for_decilm(m, r);
    check_decilm_loadable(hf_model.config);
    r.checks.push_back("DeciLM: one query-head count; every FFN width is given back exactly by "
                       "find_multiple(int(2*ffn_mult*hidden/3), 256)");
    add_decilm_notes(hf_model.config, r);
  }
  r.checks.push_back("special tokens: " + fmt::format("{}", fmt::join(
                                              check_special_tokens(m.config, model_dir), "; ")));
  // The vocabulary is read before anything is written: a tokenizer llama.cpp cannot reproduce is
  // one error and no output.
  GgufVocab vocab;
  if (opt.gguf) vocab = vocab_from_checkpoint(model_dir, m.config.vocab_size);

  TensorShapes expected_tensors;
  if (opt.hf)
    expected_tensors = expected_tensor_set(
        model_dir, m.config.tie_word_embeddings,
        /*head_written=*/config_to_hf_json(hf_model.config)["model_type"] == "nemotron-nas",
        r.notes);
  // Every tensor of the source, under its name; a widened one with its widened shape (noted).
  if (opt.hf && hf_model.config.layers != m.config.layers)
    for (const auto& [name, t] : to_tensor_map(hf_model.config, hf_model.weights))
      if (expected_tensors.count(name)) expected_tensors[name] = t.sizes().vec();

  StagingDir staging(out_dir);
  json exported = config_to_hf_json(m.config);
  if (opt.hf) exported = write_hf(staging.path(), hf_model, model_dir, opt, r);
  const fs::path parent_dir = opt.parent.empty() ? model_dir : opt.parent;
  r.fields = compare_config_fields(read_json_file(parent_dir / "config.json"), exported);
  r.checks.push_back("every field of " + (parent_dir / "config.json").string() +
                     " is carried, or changed/dropped for a listed reason");
  if (opt.gguf) {
    write_model_gguf(staging.path() / "model.gguf", m, vocab, {opt.dtype, "autocompress"});
    r.notes.push_back(fmt::format("model.gguf: architecture {}",
                                  exported["model_type"] == "nemotron-nas" ? "deci" : "llama"));
  }

  // Reload checks: each file must give the logits of the model as that file stores it.
  if (opt.hf) {
    check_tensor_set(expected_tensors, staging.path() / "model.safetensors");
    r.checks.push_back("model.safetensors holds every tensor of the source with its shape, and "
                       "no other");
    r.max_logit_diff_hf = logit_diff(load_checkpoint(staging.path()),
                                     round_to_dtype(hf_model, opt.dtype));
    if (r.max_logit_diff_hf != 0)
      throw InternalError(msg("export", "the HF export reloads to logits that differ by {}",
                              r.max_logit_diff_hf));
  }
  if (opt.gguf) {
    const GgufModel back = read_model_gguf(staging.path() / "model.gguf");
    r.max_logit_diff_gguf = logit_diff(back.model, round_to_gguf(m, opt.dtype));
    if (r.max_logit_diff_gguf != 0 || back.vocab.tokens != vocab.tokens)
      throw InternalError(msg("export", "model.gguf reloads to logits that differ by {} (or a "
                              "different vocabulary)", r.max_logit_diff_gguf));
  }
  r.checks.push_back("every output loads back (our loaders) to logits identical to the source "
                     "rounded to --dtype");
  // The written files as the engine's own loader reads them (export/engine_loaders.h).
  const bool hf_engine = opt.engine == "vllm" || opt.engine == "tensorrt-llm";
  if ((hf_engine && opt.hf) || (opt.engine == "llama.cpp" && opt.gguf)) {
    const std::vector<std::string> errors =
        engine_load_errors(opt.engine, staging.path(), opt.tensor_parallel);
    if (!errors.empty())
      throw ConfigError(msg("export", "the files written do not load in {} (export/"
                            "engine_loaders.h, from its loader's source): {}", opt.engine,
                            fmt::join(errors, "; ")));
    r.checks.push_back(fmt::format("{}'s loader, as written from its source (export/"
                                   "engine_loaders.h), builds the model and every tensor fits "
                                   "(tensor_parallel {})", opt.engine, opt.tensor_parallel));
  }
  write_json_file(staging.path() / "export_report.json", r.to_json());
  staging.commit();
  return r;
}

}  // namespace ac
