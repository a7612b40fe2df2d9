// Where the data files (devices/*.json, engines/*.json, scenarios/*.json) live.
//
// Lookup order, first that holds a `scenarios` folder wins:
//   1. the environment variable AC_DATA_DIR (the repository root or an install prefix);
//   2. the executable's folder and its ancestors up to three levels (/proc/self/exe): a build
//      folder inside the repository (build/autocompress -> build/.. = repo) finds the repo;
//   3. the current working directory.
// Names given with a '/' or ending in ".json" are paths and bypass the lookup.
#pragma once
#include <string>
#include <vector>

#include "common/fs.h"

namespace ac {

/// The data root (holds devices/, engines/, scenarios/). Throws ConfigError listing the places
/// tried and the hint "set AC_DATA_DIR to the autocompress repository" when none has them.
fs::path data_dir();

/// Resolves `name_or_path` inside `<data_dir>/<kind>/<name>.json` (kind: "devices", "engines",
/// "scenarios"), or returns it unchanged when it is a path (contains '/' or ends in ".json").
/// `data_root` overrides data_dir() when not empty. Throws ConfigError naming the file tried
/// and the names available there when absent.
fs::path find_data_file(const std::string& kind, const std::string& name_or_path,
                        const fs::path& data_root = {});

/// The names (file stems) available in `<data_root>/<kind>/`, sorted.
std::vector<std::string> list_data_files(const std::string& kind, const fs::path& data_root = {});

}  // namespace ac
