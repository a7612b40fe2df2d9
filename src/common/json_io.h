// JSON files: read with a clear error (file, line, what failed), written atomically.
#pragma once
#include <nlohmann/json.hpp>
#include "common/fs.h"

namespace ac {
using json = nlohmann::json;

/// Parses a JSON file. Throws FormatError naming the file and nlohmann's message.
json read_json_file(const fs::path& path);
/// Writes JSON (indented 2) atomically.
void write_json_file(const fs::path& path, const json& j);

/// Field access with errors that name the file and field: expected type vs found.
template <typename T>
T json_get(const json& j, const char* key, const std::string& file);
template <typename T>
T json_get_or(const json& j, const char* key, T fallback, const std::string& file);

}  // namespace ac
