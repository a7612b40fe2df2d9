// The kinds of checkpoint besides the Llama family's that the stage subcommands (`importance`,
// `prune`, `distill`, `eval`) dispatch on, told apart by config.json's model_type: Nemotron-H
// (model/nemotron_h_model.h) and Qwen3-MoE / Mixtral (model/moe_model.h).
#pragma once
#include "common/fs.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"

namespace ac::cli {

/// One kind: its name in errors, how config.json tells it, and its loader.
template <class M>
struct CheckpointKind {
  const char* name;                  // "Nemotron-H (hybrid)", "Qwen3-MoE / Mixtral"
  bool (*is_kind)(const fs::path&);  // is_nemotron_h_checkpoint, is_moe_family_checkpoint
  M (*load)(const fs::path&);        // load_nemotron_h_checkpoint, load_moe_checkpoint
};

inline const CheckpointKind<NemotronHModel> kNemotronH{
    "Nemotron-H (hybrid)", is_nemotron_h_checkpoint, load_nemotron_h_checkpoint};
inline const CheckpointKind<MoeModel> kMoe{"Qwen3-MoE / Mixtral", is_moe_family_checkpoint,
                                           load_moe_checkpoint};

}  // namespace ac::cli
