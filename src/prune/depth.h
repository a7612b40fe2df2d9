// Depth pruning: physically remove blocks whose attention and FFN are both no-ops.
#pragma once
#include "model/llama.h"

namespace ac {

/// Returns a model without the blocks that are entirely removed (attention_no_op and
/// ffn_no_op); the others keep their order. Logits are unchanged (a removed block is the
/// identity on the residual stream). Throws ConfigError if every block would go.
LlamaModel drop_removed_blocks(const LlamaModel& m);

/// The same on a config only (for cost predictions).
ModelConfig drop_removed_blocks(const ModelConfig& c);

/// A target config that removes the `n_drop` blocks with the lowest `block_influence` ([L]
/// scores; Men et al. 2024 "ShortGPT", as used by Minitron for depth pruning), marking them
/// attention_no_op + ffn_no_op.
ModelConfig remove_least_important_blocks(const ModelConfig& c, const at::Tensor& block_influence,
                                          int64_t n_drop);

}  // namespace ac
