// Zero channels and zero heads that widen a model to what a file format can state, leaving its
// function unchanged. DeciLM (nemotron-nas), the HF class of heterogeneous Llama models, states
// a layer's FFN width only as ffn_mult, read back as find_multiple(int(2*ffn_mult*hidden/3), 256)
// (vLLM nemotron_nas.py _ffn_mult_to_intermediate_size, TensorRT-LLM nemotron_nas/convert.py),
// and has one num_attention_heads for the model with per-layer KV heads only through
// n_heads_in_group (vLLM nemotron_nas.py DeciLMDecoderLayer). A searched FFN of width 600 or a
// layer of 5 heads among layers of 6 has no DeciLM form; the same layer widened with zeros has.
#pragma once
#include <cstdint>

#include "model/llama.h"

namespace ac {

/// `m` with every FFN of width F (not a multiple of `multiple`) widened to F' = the next multiple:
/// gate_proj and up_proj [F, D] -> [F', D] with zero rows, down_proj [D, F] -> [D, F'] with zero
/// columns. Each added channel computes silu(0) * 0 = 0 and down_proj multiplies it by 0, so the
/// logits equal `m`'s up to the order of float sums. FFN-free layers stay FFN-free; tensors are
/// new (the input is not modified); dtypes are kept. Throws ConfigError when multiple < 1.
LlamaModel pad_ffn_widths(const LlamaModel& m, int64_t multiple);

/// The parameters `pad_ffn_widths(m, multiple)` adds (0 when every width is already a multiple).
int64_t ffn_padding_parameters(const ModelConfig& c, int64_t multiple);

/// The largest num_attention_heads of the layers with attention (0 when none has any).
int64_t max_query_heads(const ModelConfig& c);

/// `m` with every attention layer's query heads widened to H = the largest count of any layer.
/// A layer of H_l query heads over G_l KV heads (r = H_l / G_l each) becomes H query heads over
/// G' KV heads: G' = H / r when r divides H (the real groups first, then groups of zero heads),
/// else G' = H (each KV head repeated r times, as repeat_kv does inside the forward, then zero
/// heads). A zero query head gives uniform attention over zero values (added KV heads are zero)
/// and meets zero o_proj columns, so the logits equal `m`'s up to the order of float sums.
/// q/k/v biases are widened alike. Layers already at H, and layers without attention, are
/// unchanged. Throws ConfigError when the attention layers differ in head_dim (RoPE's
/// frequencies depend on it: no padding keeps them) or carry q/k norms.
LlamaModel pad_query_heads(const LlamaModel& m);

/// The parameters `pad_query_heads(m)` adds, biases included (0 when every attention layer has
/// H query heads).
int64_t query_head_padding_parameters(const ModelConfig& c);

}  // namespace ac
