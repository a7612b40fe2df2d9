// A Nemotron-H checkpoint folder (model/nemotron_h_model.h): config.json and model.safetensors,
// or shards with model.safetensors.index.json, as save_pretrained writes them.
#pragma once
#include "common/fs.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// Loads config.json and the weights (fp32 in memory). Throws FormatError naming the folder or
/// file when one is missing, and nemotron_h_model_from_tensor_map's errors.
NemotronHModel load_nemotron_h_checkpoint(const fs::path& dir);

/// True when `dir`/config.json names a Nemotron-H model_type (nemotron_h, nemotron_h_puzzle):
/// the commands that take several model kinds dispatch on it. False when there is no
/// config.json; FormatError when it is not JSON.
bool is_nemotron_h_checkpoint(const fs::path& dir);

}  // namespace ac
