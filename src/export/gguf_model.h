// A Llama-family model <-> a GGUF file llama.cpp runs without any other file.
//
// Architecture: "llama" when every layer is equal and has attention and an FFN; otherwise
// "deci" (llama.cpp src/models/deci.cpp, Llama-3_1-Nemotron) with per-layer INT32 arrays
// deci.attention.head_count / head_count_kv / feed_forward_length (0 = removed part).
//
// Metadata written ({arch} = llama | deci; types as gguf-py's GGUFWriter writes them):
//   general.architecture str, general.name str, general.alignment u32 (32),
//   general.file_type u32 (llama.h llama_ftype: 0 ALL_F32, 1 MOSTLY_F16, 2 MOSTLY_Q4_0,
//     7 MOSTLY_Q8_0, 32 MOSTLY_BF16), general.quantization_version u32 (2, GGML_QUANT_VERSION),
//   {arch}.vocab_size, .context_length (max_position_embeddings), .embedding_length (D),
//   .block_count (L), .feed_forward_length (F), .attention.head_count (H),
//   .attention.head_count_kv (G), .attention.key_length / .value_length (Hd),
//   .rope.dimension_count (Hd): u32 (or i32 arrays for deci);
//   {arch}.rope.freq_base, .attention.layer_norm_rms_epsilon: f32;
//   rope_scaling "linear": {arch}.rope.scaling.type = "linear", .rope.scaling.factor f32;
//   rope_scaling "llama3": tensor rope_freqs.weight [Hd/2] F32 (convert_hf_to_gguf.py
//     LlamaModel.generate_extra_tensors: the factor that divides each RoPE frequency);
//   the vocabulary (io/gguf_vocab.h says how each tokenizer file maps to it; gguf-py
//   constants.py Keys.Tokenizer, llama.cpp llama-vocab.cpp llama_vocab::impl::load):
//     tokenizer.ggml.model str: "llama" (SentencePiece: tokenizer.bin, Llama 2 tokenizer.json)
//       or "gpt2" (byte-level BPE: Llama 3, Qwen2, Qwen3 tokenizer.json);
//     .pre str: "default" (llama), "llama-bpe" / "qwen2" (gpt2: the pre-tokenizer regex);
//     .tokens str[V] (llama: spaces as U+2581, byte tokens "<0xNN>"; gpt2: byte-to-unicode
//       form, added tokens raw; "[PAD{id}]" for ids no token has);
//     .scores f32[V] (llama only); .token_type i32[V] (1 normal, 2 unknown, 3 control,
//       4 user-defined, 5 unused, 6 byte); .merges str[] "left right" (gpt2 only);
//     .bos_token_id / .eos_token_id / .unknown_token_id / .padding_token_id u32 (each only
//       when the tokenizer names it); .add_bos_token / .add_eos_token bool;
//     tokenizer.chat_template str (when the tokenizer has one);
//   autocompress.hf_config str: our config.json (restores every field on import; llama.cpp
//     ignores it); autocompress.ffn_free_layers, autocompress.attention_free_layers i32[]: see below.
//
// Tensors: each role under its GGUF name (model/tensor_roles.h: token_embd, output_norm,
// output, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_{q,k,v}.bias / attn_output /
// ffn_norm / ffn_gate / ffn_up / ffn_down), torch shapes stored as ne reversed (attn_q
// [H*Hd, D] has ne {D, H*Hd}); output is omitted when tied (llama.cpp reuses token_embd); q/k
// weights and biases have their rows in Meta's interleaved RoPE order (*).
// (*) HF stores q/k rows in rotate-half order; llama.cpp's llama/deci RoPE rotates adjacent
//     pairs, so rows are permuted back as convert_hf_to_gguf.py LlamaModel.permute does, and
//     permuted forward again on import (io/llama2c.h permute_rotary_rows).
// 2-D weights are written as the chosen dtype; 1-D tensors (norms, biases, rope_freqs) are F32.
// With q8_0 / q4_0 every 2-D weight is quantized, token_embd and output included (what
// `llama-quantize --pure` does), except one whose rows (ne[0]) are not a multiple of 32, which
// is F16 (llama-quantize's fallback for a 32-block type: llama-quant.cpp tensor_type_fallback):
// gguf_tensor_type is that rule.
//
// llama.cpp limits handled at export (src/models/deci.cpp of the node-llama-cpp 3.21.1 bundle):
//   - a layer with attention but no FFN: llama.cpp's deci graph skips the whole layer when
//     n_ff == 0 (dropping the attention output), so such a layer is written with a width-1 FFN
//     whose ffn_down is zero (adds exactly 0) and listed in autocompress.ffn_free_layers;
//     our reader turns it back into an FFN-free layer;
//   - layer 0 without attention: llama.cpp takes the head size from layer 0's head count
//     (llama-model.cpp load_hparams: key_length is read only when n_head(0) > 0), so layer 0 is
//     written with one head (q/k/v [Hd, D] and attn_output [D, Hd], all zero: adds exactly 0)
//     and listed in autocompress.attention_free_layers; our reader turns it back into an
//     attention-free layer;
//   - one head_dim for all layers (key_length is global).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "hardware/llamacpp_buffers.h"
#include "io/gguf.h"
#include "io/gguf_vocab.h"
#include "model/llama.h"

namespace ac {

/// The inverse, as llama2.c's tokenizer.bin bytes (U+2581 -> ' ', byte tokens kept as
/// "<0xNN>", which Tokenizer reads). Throws FormatError if the vocabulary does not have
/// llama2.c's layout (ids 3..258 the byte tokens).
std::string llama2c_tokenizer_bytes(const GgufVocab& v, const std::string& file);

struct GgufExportOptions {
  GgmlType dtype = GgmlType::F32;  // of the 2-D weights (gguf_tensor_type)
  std::string name = "autocompress";  // general.name
};

/// general.file_type of a model whose 2-D weights are `t` (llama.h llama_ftype: ALL_F32 0,
/// MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32); an internal error for another type.
int64_t gguf_file_type(GgmlType t);

/// The general.* keys every exported GGUF starts with: architecture, name, alignment (32),
/// file_type (gguf_file_type of o.dtype) and quantization_version (2, GGML_QUANT_VERSION).
GgufMetadata gguf_general_metadata(const std::string& architecture, const GgufExportOptions& o);

/// Appends tokenizer.ggml.* and tokenizer.chat_template for `v` to `kv` (gguf-py GGUFWriter
/// add_tokenizer_model, add_tokenizer_pre, add_token_list, add_token_scores, add_token_types,
/// add_token_merges, SpecialVocab.add_to_gguf); absent values (-1 ids, no scores or merges) are
/// not written. Shared by every architecture's writer.
void add_gguf_vocab_metadata(const GgufVocab& v, GgufMetadata& kv);

/// Throws ConfigError when `v` cannot be written for a model of `vocab_size` ids: another token
/// count, scores or types of another length, a tokenizer model other than "llama" / "gpt2", a
/// "gpt2" vocabulary without pre-tokenizer or merges, or a special id outside the vocabulary or
/// whose text is not unique (llama.cpp could not encode it to one id).
void check_vocab_exportable(const GgufVocab& v, int64_t vocab_size);

/// Writes `m` with its vocabulary. Throws ConfigError when llama.cpp cannot express the model
/// (several head_dims, vocab size != V, rope type other than default / linear / llama3, q/k
/// norms) or when a special token is not exactly one id.
void write_model_gguf(const fs::path& path, const LlamaModel& m, const GgufVocab& vocab,
                      const GgufExportOptions& opt = {});

/// One tensor of a model's GGUF as write_model_gguf lays it out.
struct GgufTensorPlan {
  std::string name;           // e.g. "blk.3.attn_q.weight"
  GgmlType type;              // gguf_tensor_type of its dims
  std::vector<int64_t> dims;  // torch order ([rows, row length]; ggml's ne reversed)
};

/// The tensors write_model_gguf writes for a model of config `c` exported with `dtype`, in file
/// order (stubs and llama3's rope_freqs included), without their data: what a cost model needs
/// to know where each tensor lies in the file (hardware/llamacpp_buffers.h).
std::vector<GgufTensorPlan> model_gguf_layout(const ModelConfig& c, GgmlType dtype);

/// The same tensors where they lie in the file's data section (offsets padded to
/// general.alignment 32) and whether llama.cpp multiplies by them: the input of
/// llamacpp_model_buffers (hardware/llamacpp_buffers.h).
std::vector<GgufTensorExtent> model_gguf_extents(const ModelConfig& c, GgmlType dtype);

/// A model read back from GGUF: weights in fp32, torch order, HF rotate-half q/k rows.
struct GgufModel {
  LlamaModel model;
  GgufVocab vocab;
  GgmlType dtype = GgmlType::F32;  // the 2-D weights' type: general.file_type, else token_embd's
};

/// The type a tensor of torch shape `shape` is written as in a model exported with `dtype`:
/// F32 for 1-D tensors; for Q8_0 / Q4_0, F16 when the rows (the last dimension, ggml's ne[0])
/// are not a multiple of 32 (llama-quant.cpp tensor_type_fallback); `dtype` otherwise.
GgmlType gguf_tensor_type(GgmlType dtype, at::IntArrayRef shape);

/// The model as its GGUF of `dtype` stores it: every tensor through ggml_round_trip with its
/// gguf_tensor_type (q/k rows are permuted in the file, which changes no row's blocks). What
/// read_model_gguf gives back, exactly.
LlamaModel round_to_gguf(const LlamaModel& m, GgmlType dtype);

/// Reads a llama/deci GGUF (F32/F16/BF16 tensors; Q8_0/Q4_0 dequantized to fp32). Config values
/// come from the standard keys; autocompress.hf_config, when present, restores the fields GGUF
/// has no key for (extra, rope_scaling parameters, architecture) and must agree with the
/// standard keys.
/// The vocabulary is read as written (tokenizer.ggml.model "llama" or "gpt2"); a special id the
/// file lacks is llama.cpp's default for "llama" (bos 1, eos 2, unk 0) and -1 for "gpt2".
/// Throws FormatError naming the file and key/tensor on anything missing or inconsistent.
GgufModel read_model_gguf(const fs::path& path);

/// `autocompress import gguf`: writes a checkpoint folder atomically (config.json,
/// model.safetensors, tokenizer.bin, tokenizer_config.json, special_tokens_map.json,
/// generation_config.json). Throws ConfigError for a "gpt2" (byte-level BPE) vocabulary:
/// llama2.c's tokenizer.bin holds only SentencePiece vocabularies.
void import_gguf(const fs::path& gguf, const fs::path& out_dir);

/// llama.cpp's row order for q/k (HF rotate-half -> interleaved pairs); rows [n_heads*Hd] of a
/// [rows, D] weight or a [rows] bias. Inverse of permute_rotary_rows.
at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_heads);

/// The llama3 RoPE frequency factors llama.cpp multiplies into each period: [Hd/2] fp32
/// (convert_hf_to_gguf.py generate_extra_tensors).
at::Tensor llama3_rope_factors(const ModelConfig& c, int64_t head_dim);

}  // namespace ac
