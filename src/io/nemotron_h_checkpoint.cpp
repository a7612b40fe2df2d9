#include "io/nemotron_h_checkpoint.h"

#include "common/error.h"
#include "common/json_io.h"
#include "io/safetensors.h"

namespace ac {

NemotronHModel load_nemotron_h_checkpoint(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw FormatError(msg("load_checkpoint", "{}: no such checkpoint folder", dir.string()));
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path))
    throw FormatError(msg("load_checkpoint", "{}: missing config.json", config_path.string()));
  const ModelConfig c = config_from_hf_json(read_json_file(config_path), config_path.string());
  // Errors about the weights name the shards' index, or the one file.
  const fs::path file = fs::exists(dir / "model.safetensors.index.json")
                            ? dir / "model.safetensors.index.json"
                            : dir / "model.safetensors";
  return nemotron_h_model_from_tensor_map(c, load_safetensors_dir(dir), file.string());
}

}  // namespace ac
