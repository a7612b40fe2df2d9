// The DeciLM configuration class a DeciLM export ships beside its config.json, so that Hugging
// Face transformers reads the folder: `AutoConfig.from_pretrained(dir, trust_remote_code=True)`
// finds "nemotron-nas" in no table of its own (DeciLM is remote code on the Hub) and loads the
// class that config.json's `auto_map` names:
//
//   config.json   "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig"}
//   configuration_decilm.py   class DeciLMConfig(PretrainedConfig), model_type "nemotron-nas"
//
// The class holds the fields of NVIDIA's Llama-3_1-Nemotron configuration_decilm.py (a Llama
// configuration plus `block_configs`, one {attention, ffn} entry per layer, block_config.py
// AttentionConfig / FFNConfig) and checks each block as vLLM's nemotron_nas.py reads it; it adds
// no modelling code (`auto_map` names no AutoModelForCausalLM: vLLM, TensorRT-LLM and llama.cpp
// run DeciLM, transformers only reads its configuration). Tested by tests/golden/judge_exports.py
// (Judge.TransformersReadsOurHfAndDeciLMExports) with transformers 5.25.0.
#pragma once
#include <string>

namespace ac {

/// The Python module name the exported `auto_map` refers to (file "<name>.py").
inline constexpr const char* kDeciLMConfigModule = "configuration_decilm";
/// `auto_map` value for AutoConfig: "configuration_decilm.DeciLMConfig".
inline constexpr const char* kDeciLMConfigClass = "configuration_decilm.DeciLMConfig";

/// The text of configuration_decilm.py (UTF-8, ends with a newline).
const std::string& decilm_configuration_py();

}  // namespace ac
