// What each serving engine's loader does with our exported files, written from the loader's
// source (file and function cited on each checker). A checker reads the files as the loader
// does (config.json fields by the names and defaults it uses, block_configs as its conversion
// reads them, GGUF keys with its defaults) and builds the model it would build: for every layer
// the query heads H, KV heads G, head_dim Hd and FFN width F. It then checks the tensors of the
// file against the parameters that model has, as the loader's weight loading does (names,
// shapes, missing or unexpected tensors), and the divisibility the loader asserts when a model
// is split over `tensor_parallel` GPUs.
//
// It returns one line per thing the loader would refuse or build wrongly, naming the layer and
// the field or tensor, e.g.
//   "layer 1: block_configs[1].attention.num_attention_heads 4 is not read: vLLM builds every
//    attention layer with config.json num_attention_heads 8"
//   "layer 2: model.layers.2.mlp.up_proj.weight has shape [320, 64], vLLM builds [512, 64]
//    (block_configs[2].ffn.ffn_mult 12 -> intermediate_size 512)"
// An empty list: the loader builds the model and every tensor fits it.
//
// These are independent of config_from_hf_json / read_model_gguf (our own readers): they share
// no code with the writer, so that a writer bug shows here. The structure rules that shape the
// search (engines/*.json "structure", hardware/engine.h) are the same rules, stated as data; the
// tests export random architectures those rules allow and require these checkers to pass them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/fs.h"

namespace ac {

/// vLLM's load of the HF folder `export_dir` (config.json + model.safetensors or the shards of
/// model.safetensors.index.json). DeciLMForCausalLM / model_type "nemotron-nas":
/// vllm/model_executor/models/nemotron_nas.py DeciLMDecoderLayer.__init__ (global
/// num_attention_heads; num_kv_heads = num_attention_heads // n_heads_in_group; attention and
/// FFN skipped on no_op; intermediate_size = _ffn_mult_to_intermediate_size(ffn_mult, hidden)
/// when the block has ffn_mult, else the block's intermediate_size; the block's hidden_act or
/// the global one, silu only) and DeciModel.load_weights (a tensor with no parameter is a
/// KeyError; a parameter with no tensor is left uninitialised, which the default loader
/// refuses). Other model types: vllm/model_executor/models/llama.py LlamaDecoderLayer (the
/// global num_key_value_heads and intermediate_size), with qwen3.py's q_norm and k_norm
/// ([head_dim] each) for model_type qwen3. Both: llama.py LlamaAttention.__init__
/// (head_dim = config.head_dim, else hidden_size // num_attention_heads; total_num_heads %
/// tp_size == 0; total_num_kv_heads % tp_size == 0 or tp_size % total_num_kv_heads == 0) and
/// LlamaMLP (intermediate_size % tp_size == 0). lm_head.weight is skipped when tied.
/// Throws FormatError only when config.json or a safetensors header cannot be read at all.
std::vector<std::string> vllm_load_errors(const fs::path& export_dir, int64_t tensor_parallel = 1);

/// TensorRT-LLM's conversion of the HF folder `export_dir`. DeciLM (model_type "deci" /
/// "nemotron-nas"): tensorrt_llm/models/nemotron_nas/config.py DeciConfig.from_hugging_face
/// (no head_size passed, so PretrainedConfig.__init__ derives head_size = hidden_size //
/// num_attention_heads; config.json head_dim is not read), convert.py
/// hf_block_config_to_layer_config (attn["no_op"], attn["replace_with_linear"],
/// num_key_value_heads = num_attention_heads // attn["n_heads_in_group"]; ffn["no_op"],
/// ffn["replace_with_linear"], intermediate_size = _ffn_mult_to_intermediate_size(ffn["ffn_mult"],
/// hidden_size), the block's intermediate_size not read) and load_model_weights (reads
/// model.embed_tokens.weight, lm_head.weight even when tied, model.norm.weight and each layer's
/// tensors; split() asserts rows % tp_size == 0; get_kv_weight asserts tp_size %
/// num_key_value_heads == 0 when tp_size is larger). Other model types:
/// tensorrt_llm/models/llama/config.py LLaMAConfig.from_hugging_face (head_dim read from
/// config.json, else hidden_size // num_attention_heads), the same tensors with lm_head
/// optional when tied. Throws FormatError only when a file cannot be read at all.
std::vector<std::string> tensorrt_llm_load_errors(const fs::path& export_dir,
                                                  int64_t tensor_parallel = 1);

/// llama.cpp's load of the GGUF file `gguf` (general.architecture "llama" or "deci"):
/// src/llama-model.cpp llama_model::load_hparams (block_count; feed_forward_length,
/// attention.head_count, attention.head_count_kv through get_key_or_arr: one integer, or an
/// array of exactly block_count; n_embd_head_k = n_embd / n_head(0) unless the global
/// attention.key_length is given, likewise value_length; rope.dimension_count must equal
/// n_embd_head_k for llama and deci) and llama_model::load_tensors, LLM_ARCH_DECI (per layer:
/// attention tensors when n_head_kv > 0, attn_q {n_embd, n_embd_head_k * n_head}, attn_k / attn_v
/// {n_embd, n_embd_head_k * n_head_kv}, attn_output {n_embd_head_k * n_head, n_embd}; FFN tensors
/// when n_ff > 0, ffn_gate / ffn_up {n_embd, n_ff}, ffn_down {n_ff, n_embd}; output optional;
/// a tensor not created is "wrong number of tensors"), shapes in ggml order (ne). n_head must
/// be a multiple of n_head_kv (ggml_mul_mat broadcasts the KV heads, ggml.c ggml_can_mul_mat).
/// Throws FormatError only when the file is not a readable GGUF.
std::vector<std::string> llama_cpp_load_errors(const fs::path& gguf);

/// The checker of engine `name` ("vllm", "tensorrt-llm", "llama.cpp") on `path` (an HF folder,
/// or for llama.cpp a .gguf file or a folder holding model.gguf). Throws ConfigError for an
/// engine without a checker ("native" loads what our own reader loads).
std::vector<std::string> engine_load_errors(const std::string& name, const fs::path& path,
                                            int64_t tensor_parallel = 1);

}  // namespace ac
