// Importer for llama2.c checkpoints (Karpathy's run.c, "legacy" version-0 layout).
//
// model.bin layout: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; vocab_size > 0 means the output head shares the embedding, < 0 means a separate
// head follows), then fp32 arrays:
//   token_embedding [V, D], rms_att [L, D], wq [L, D, D], wk [L, G*Hd, D], wv [L, G*Hd, D],
//   wo [L, D, D], rms_ffn [L, D], w1 [L, F, D], w2 [L, D, F], w3 [L, F, D], rms_final [D],
//   freq_cis_real [seq_len, Hd/2], freq_cis_imag [seq_len, Hd/2], (wcls [V, D] if untied).
// llama2.c applies RoPE to adjacent pairs (x[2i], x[2i+1]); HF Llama uses rotate-half
// (x[i], x[i + Hd/2]). The importer permutes the rows of wq and wk per head exactly as HF's
// convert_llama_weights_to_hf.py `permute` does, so the checkpoint gives the same logits in
// any HF-convention runtime.
#pragma once
#include "common/fs.h"
#include "model/llama.h"

namespace ac {

/// Reads model.bin into a LlamaModel (HF conventions: w1 -> gate_proj, w3 -> up_proj,
/// w2 -> down_proj; q/k rows permuted to rotate-half). rms_norm_eps 1e-5, rope_theta 10000.
/// Throws FormatError on a bad header or a file size that disagrees with it.
LlamaModel read_llama2c(const fs::path& model_bin);

/// The config of model.bin from its header alone (validated against the file size; no weight
/// is read). Throws FormatError like read_llama2c.
ModelConfig read_llama2c_config(const fs::path& model_bin);

/// `autocompress import llama2c`: writes an HF checkpoint folder atomically: config.json
/// (LlamaForCausalLM), model.safetensors, tokenizer.bin (copied), tokenizer_config.json,
/// special_tokens_map.json, generation_config.json.
void import_llama2c(const fs::path& model_bin, const fs::path& tokenizer_bin,
                    const fs::path& out_dir);

/// The permutation HF applies to q/k rows of one projection [n_heads*Hd, D]:
/// w.view(n_heads, Hd/2, 2, D).transpose(1, 2).reshape(n_heads*Hd, D).
at::Tensor permute_rotary_rows(const at::Tensor& w, int64_t n_heads);

}  // namespace ac
