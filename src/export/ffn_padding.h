// Zero channels that widen a model's FFNs to the multiple a file format can express, leaving the
// function unchanged. DeciLM (nemotron-nas), the HF class of heterogeneous Llama models, states a
// layer's FFN width only as ffn_mult, read back as find_multiple(int(2*ffn_mult*hidden/3), 256)
// (vLLM nemotron_nas.py _ffn_mult_to_intermediate_size, TensorRT-LLM nemotron_nas/convert.py): a
// searched width of 600 has no ffn_mult, but the same FFN widened to 768 with zero channels does.
#pragma once
#include <cstdint>
#include <string>

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

}  // namespace ac
