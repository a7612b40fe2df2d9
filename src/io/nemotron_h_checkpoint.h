// A Nemotron-H checkpoint folder (model/nemotron_h_model.h): config.json and model.safetensors,
// or shards with model.safetensors.index.json, as save_pretrained writes them.
#pragma once
#include "common/fs.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// Loads config.json and the weights (fp32 in memory). Throws FormatError naming the folder or
/// file when one is missing, and nemotron_h_model_from_tensor_map's errors.
NemotronHModel load_nemotron_h_checkpoint(const fs::path& dir);

}  // namespace ac
