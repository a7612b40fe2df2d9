#include "io/checkpoint.h"

#include "common/error.h"
#include "common/json_io.h"
#include "io/companion_files.h"
#include "io/safetensors.h"
#include "model/finite.h"
#include "model/moe_family_config.h"

namespace ac {

namespace {

// config.json of checkpoint folder `dir`, read; FormatError on a missing folder or file.
ModelConfig read_checkpoint_config(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw FormatError(msg("load_checkpoint", "{}: no such checkpoint folder", dir.string()));
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path))
    throw FormatError(msg("load_checkpoint", "{}: missing config.json", config_path.string()));
  return config_from_hf_json(read_json_file(config_path), config_path.string());
}

// The file errors about the weights name: the shards' index, or the one file.
fs::path weights_file(const fs::path& dir) {
  return fs::exists(dir / "model.safetensors.index.json") ? dir / "model.safetensors.index.json"
                                                          : dir / "model.safetensors";
}

}  // namespace

LlamaModel load_checkpoint(const fs::path& dir) {
  LlamaModel m;
  m.config = read_checkpoint_config(dir);
  const TensorMap tensors = load_safetensors_dir(dir);
  const fs::path file = weights_file(dir);
  m.weights = from_tensor_map(m.config, tensors, file.string());
  warn_nonfinite(find_nonfinite(m), file.string());
  return m;
}

bool is_moe_family_checkpoint(const fs::path& dir) {
  const fs::path config = dir / "config.json";
  if (!fs::exists(config)) return false;
  const nlohmann::json j = read_json_file(config);
  return j.contains("model_type") && j["model_type"].is_string() &&
         is_moe_family_model_type(j["model_type"].get<std::string>());
}

MoeModel load_moe_checkpoint(const fs::path& dir) {
  const ModelConfig c = read_checkpoint_config(dir);
  return moe_model_from_tensor_map(c, load_safetensors_dir(dir), weights_file(dir).string());
}

void save_checkpoint(const fs::path& dir, const LlamaModel& m, const fs::path& tokenizer_from) {
  if (!fs::is_directory(dir))
    throw FormatError(msg("save_checkpoint", "{}: output folder does not exist", dir.string()));
  m.config.validate("save_checkpoint");
  write_json_file(dir / "config.json", config_to_hf_json(m.config));
  save_safetensors(dir / "model.safetensors", to_tensor_map(m.config, m.weights),
                   {{"format", "pt"}});
  if (!tokenizer_from.empty()) copy_companion_files(tokenizer_from, dir, "save_checkpoint");
}

void save_checkpoint_atomic(const fs::path& dir, const LlamaModel& m,
                            const fs::path& tokenizer_from) {
  StagingDir staging(dir);
  save_checkpoint(staging.path(), m, tokenizer_from);
  staging.commit();
}

}  // namespace ac
