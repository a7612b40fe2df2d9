#include "io/nemotron_h_checkpoint.h"

#include "common/error.h"
#include "common/json_io.h"
#include "io/safetensors.h"
#include "model/nemotron_h_config.h"

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

bool is_nemotron_h_checkpoint(const fs::path& dir) {
  const fs::path config = dir / "config.json";
  if (!fs::exists(config)) return false;
  const nlohmann::json j = read_json_file(config);
  return j.contains("model_type") && j["model_type"].is_string() &&
         is_nemotron_h_model_type(j["model_type"].get<std::string>());
}

}  // namespace ac
