#include "hardware/data_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"

namespace ac {

static fs::path self_exe_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p.parent_path();
}

fs::path data_dir() {
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("AC_DATA_DIR"); env && *env) {
    fs::path p(env);
    if (fs::is_directory(p / "scenarios")) return p;
    throw ConfigError(msg("data_dir", "AC_DATA_DIR={}: no 'scenarios' folder there, expected "
                                      "the autocompress repository root", env));
  }
  fs::path dir = self_exe_dir();
  for (int up = 0; up <= 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    tried.push_back(dir);
    if (fs::is_directory(dir / "scenarios") && fs::is_directory(dir / "devices")) return dir;
    if (dir == dir.root_path()) break;
  }
  fs::path cwd = fs::current_path();
  tried.push_back(cwd);
  if (fs::is_directory(cwd / "scenarios") && fs::is_directory(cwd / "devices")) return cwd;
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t.string();
  throw ConfigError(msg("data_dir", "no devices/ and scenarios/ folders found in {}; set "
                                    "AC_DATA_DIR to the autocompress repository", list));
}

std::vector<std::string> list_data_files(const std::string& kind, const fs::path& data_root) {
  fs::path dir = (data_root.empty() ? data_dir() : data_root) / kind;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_data_file(const std::string& kind, const std::string& name_or_path,
                        const fs::path& data_root) {
  bool is_path = name_or_path.find('/') != std::string::npos ||
                 fs::path(name_or_path).extension() == ".json";
  if (is_path) return fs::path(name_or_path);
  fs::path root = data_root.empty() ? data_dir() : data_root;
  fs::path file = root / kind / (name_or_path + ".json");
  // Non-throwing: a name too long for the file system (ENAMETOOLONG) is just an unknown name.
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file;
  std::string names;
  for (const auto& n : list_data_files(kind, root)) names += (names.empty() ? "" : ", ") + n;
  throw ConfigError(msg("find_data_file", "{}: no such file; unknown {} '{}', known: {}",
                        file.string(), kind.substr(0, kind.size() - 1), name_or_path,
                        names.empty() ? "(none)" : names));
}

}  // namespace ac
