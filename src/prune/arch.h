// arch.json: the architecture the search chose (or a user wrote), read by `prune`.
//
// Layout: a JSON object {"config": <HF config.json of the target, config_to_hf_json>, ...} where
// the other keys are free-form (the search adds predicted costs, search tokens used, ...).
// Heterogeneous targets use DeciLM "block_configs" inside "config" (model/config.h). A
// Nemotron-H target (model/nemotron_h_config.h) is written as its config.json, which leaves
// removed blocks out; its removed layers (indices into the parent, ascending) are then listed
// beside it in "removed_layers", so that the target read back has the parent's layer count.
#pragma once
#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "model/config.h"

namespace ac {

/// Reads the target config of arch.json, the removed layers of a Nemotron-H target put back as
/// removed blocks (attention_no_op and ffn_no_op, no part). Throws FormatError naming the file
/// if it is not a JSON object with a "config" object, if that config is invalid
/// (config_from_hf_json), or if "removed_layers" is not an ascending list of distinct layer
/// indices or is given for a config that is not Nemotron-H (a DeciLM target marks its removed
/// blocks in block_configs).
ModelConfig read_arch(const fs::path& path);

/// The target config of parsed arch.json (read_arch without the file); `file` names errors.
ModelConfig arch_from_json(const nlohmann::json& j, const std::string& file);

/// The whole arch.json object (config and extra keys), for tools that report predictions.
nlohmann::json read_arch_json(const fs::path& path);

/// The arch.json object write_arch writes (`file` names errors); arch_from_json reads it back
/// to the same layers. Throws what write_arch throws.
nlohmann::json arch_to_json(const ModelConfig& target,
                            const nlohmann::json& extra = nlohmann::json::object(),
                            const std::string& file = "arch.json");

/// Writes arch.json atomically: `extra` (an object, or null) plus "config" =
/// config_to_hf_json(target), and "removed_layers" when a Nemotron-H target has removed layers.
/// Throws ConfigError if `extra` is neither or holds "config" or "removed_layers".
void write_arch(const fs::path& path, const ModelConfig& target,
                const nlohmann::json& extra = nlohmann::json::object());

}  // namespace ac
