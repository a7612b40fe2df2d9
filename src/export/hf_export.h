// `autocompress export`: a checkpoint folder -> the files serving engines load.
//
//   HF, homogeneous    config.json with the parent's class (LlamaForCausalLM, MistralForCausalLM,
//                      Qwen2ForCausalLM, Qwen3ForCausalLM), every parent field carried over in
//                      the parent's spelling (transformers 4 or 5: HfSpelling), head_dim explicit;
//                      model.safetensors in --dtype; tokenizer files copied byte for byte;
//                      generation_config.json (copied, or written from bos/eos ids).
//   HF, heterogeneous  DeciLMForCausalLM, model_type "nemotron-nas", one block_configs entry
//                      per layer (attention {no_op, replace_with_linear, n_heads_in_group},
//                      ffn {no_op, replace_with_linear, ffn_mult}) as vLLM / TensorRT-LLM load it;
//                      configuration_decilm.py and auto_map.AutoConfig naming it, so that
//                      transformers reads the configuration (export/decilm_remote_code.h);
//                      refused with a clear message when DeciLM cannot express the model
//                      (checks.h check_decilm_loadable; q/k norms included); lm_head.weight
//                      written even when tied (TensorRT-LLM's DeciLM loader reads it).
//   GGUF               model.gguf (export/gguf_model.h): llama or deci, tokenizer included;
//                      refused for q/k norms (Qwen3), which neither architecture has.
//
// Output folder (written atomically): the HF files and/or model.gguf, plus export_report.json
// listing every config.json field as carried / changed / added with the reason, the files
// copied, the checks run and notes. After writing, every output is loaded back and must give
// logits identical to the source model with its weights rounded to --dtype (q8_0 / q4_0:
// quantized and dequantized as the GGUF stores them, gguf_model.h round_to_gguf). With an
// engine (vllm, tensorrt-llm, llama.cpp) the written files are also read as its loader reads
// them (export/engine_loaders.h) and must load there.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "export/checks.h"
#include "io/gguf.h"

namespace ac {

struct ExportOptions {
  bool hf = true;                  // write the HF folder
  bool gguf = false;               // write model.gguf
  GgmlType dtype = GgmlType::F32;  // weights (HF: every tensor, f32/f16/bf16 only; GGUF: 2-D
                                   // weights, also q8_0 / q4_0: gguf_model.h gguf_tensor_type)
  fs::path parent;                 // folder whose config.json is the parent; default: the input
  std::string engine;              // engines/<engine>.json: refuse, before writing, a model its
                                   // loader cannot build ("structure"); empty = no engine check
  int64_t tensor_parallel = 1;     // GPUs the engine splits the model over (its "structure"
                                   // tensor_parallel_divides rules)

  /// model.gguf alone, its 2-D weights in `dtype` (`export --format gguf --dtype D`).
  static ExportOptions gguf_only(GgmlType dtype = GgmlType::F32) {
    ExportOptions o;
    o.hf = false;
    o.gguf = true;
    o.dtype = dtype;
    return o;
  }
};

struct ExportReport {
  std::string source;  // the checkpoint folder exported (absolute)
  std::string dtype;   // --dtype: "f32", "f16", "bf16", "q8_0" or "q4_0"
  std::vector<FieldChange> fields;
  std::vector<std::string> files_copied;  // byte for byte
  std::vector<std::string> checks;        // what was verified
  std::vector<std::string> notes;
  double max_logit_diff_hf = -1, max_logit_diff_gguf = -1;  // reload checks (0 = identical)
  nlohmann::json to_json() const;
};

/// Exports `model_dir` into `out_dir` (see the file header). Throws ConfigError when a format
/// cannot express the model or a check fails (a q8_0 / q4_0 dtype with HF output among them,
/// before anything is written), FormatError on unreadable input, InternalError
/// if a written file does not load back to identical logits.
ExportReport export_model(const fs::path& model_dir, const fs::path& out_dir,
                          const ExportOptions& opt);

/// The model as an HF file of `dtype` (F32, F16, BF16) stores it: every tensor rounded to
/// dtype and back to fp32. (GGUF: gguf_model.h round_to_gguf.)
LlamaModel round_to_dtype(const LlamaModel& m, GgmlType dtype);

}  // namespace ac
