// arch.json: the architecture the search chose (or a user wrote), read by `prune`.
//
// Layout: a JSON object {"config": <HF config.json of the target, config_to_hf_json>, ...} where
// the other keys are free-form (the search adds predicted costs, search tokens used, ...).
// Heterogeneous targets use DeciLM "block_configs" inside "config" (model/config.h).
#pragma once
#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "model/config.h"

namespace ac {

/// Reads the target config of arch.json. Throws FormatError naming the file if it is not a JSON
/// object with a "config" object, or if that config is invalid (config_from_hf_json).
ModelConfig read_arch(const fs::path& path);

/// The target config of parsed arch.json (read_arch without the file); `file` names errors.
ModelConfig arch_from_json(const nlohmann::json& j, const std::string& file);

/// The whole arch.json object (config and extra keys), for tools that report predictions.
nlohmann::json read_arch_json(const fs::path& path);

/// Writes arch.json atomically: `extra` (an object, or null) plus "config" =
/// config_to_hf_json(target). Throws ConfigError if `extra` is neither or holds "config".
void write_arch(const fs::path& path, const ModelConfig& target,
                const nlohmann::json& extra = nlohmann::json::object());

}  // namespace ac
