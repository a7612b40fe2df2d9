// A Hugging Face-layout checkpoint folder: config.json, *.safetensors, tokenizer files.
#pragma once
#include "common/fs.h"
#include "model/llama.h"
#include "model/moe_model.h"

namespace ac {

/// Loads config.json + weights (fp32 in memory) from a checkpoint folder.
/// Throws FormatError naming the file, tensor or field (missing files, shape mismatch, ...).
LlamaModel load_checkpoint(const fs::path& dir);

/// Loads a Qwen3-MoE or Mixtral checkpoint folder (model/moe_model.h): config.json and
/// model.safetensors, or shards with model.safetensors.index.json; fp32 in memory. Throws
/// FormatError naming the file, tensor or field, and moe_model_from_tensor_map's ConfigError on
/// what the MoE forward does not compute.
MoeModel load_moe_checkpoint(const fs::path& dir);

/// True when `dir`/config.json names a Qwen3-MoE or Mixtral model_type
/// (model/moe_family_config.h is_moe_family_model_type): the commands that take several model
/// kinds dispatch on it. False when there is no config.json; FormatError when it is not JSON.
bool is_moe_family_checkpoint(const fs::path& dir);

/// Writes config.json + model.safetensors (fp32) into `dir` (which must exist; callers use a
/// StagingDir for atomicity). `tokenizer_from`: a checkpoint folder whose companion files
/// (io/companion_files.h: the tokenizer, its chat template, generation_config.json) are copied
/// byte for byte, if present.
void save_checkpoint(const fs::path& dir, const LlamaModel& m,
                     const fs::path& tokenizer_from = {});

/// Writes a checkpoint folder atomically (built in a staging folder, renamed into place).
void save_checkpoint_atomic(const fs::path& dir, const LlamaModel& m,
                            const fs::path& tokenizer_from = {});

}  // namespace ac
