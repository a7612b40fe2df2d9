#include "pipeline/run_folder.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"
#include "common/json_io.h"
#include "common/progress.h"
#include "common/runtime.h"

namespace ac {

using json = nlohmann::json;

namespace {

constexpr const char* kRecord = "stages.json";

// Bytes of a file, or of every file under a folder.
int64_t bytes_of(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return int64_t(fs::file_size(p));
  if (!fs::is_directory(p, ec)) return -1;
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p, ec))
    if (e.is_regular_file(ec)) n += int64_t(e.file_size(ec));
  return n;
}

bool process_alive(long pid) {
  return pid > 0 && pid != long(::getpid()) && (::kill(pid_t(pid), 0) == 0 || errno != ESRCH);
}

}  // namespace

fs::path work_folder_of(const fs::path& out_dir) {
  fs::path out = out_dir.has_filename() ? out_dir : out_dir.parent_path();
  out = fs::absolute(out);
  return out.parent_path() / ("." + out.filename().string() + ".partial");
}

RunFolder::RunFolder(fs::path out_dir, fs::path work, json record)
    : out_(std::move(out_dir)), work_(std::move(work)), record_(std::move(record)) {}

RunFolder::RunFolder(RunFolder&& o) noexcept
    : out_(std::move(o.out_)), work_(std::move(o.work_)), record_(std::move(o.record_)),
      resumed_(std::move(o.resumed_)), committed_(o.committed_) {
  o.committed_ = true;  // the moved-from folder owns nothing
}

RunFolder::~RunFolder() {
  if (committed_ || work_.empty()) return;
  // Kept for --resume when a stage completed; nothing to resume otherwise.
  if (record_.at("stages").empty()) {
    std::error_code ec;
    fs::remove_all(work_, ec);
    return;
  }
  log_warn(fmt::format("[compress] the run stopped; its {} complete stage(s) are kept in {}: "
                       "`autocompress compress --resume {}` continues it",
                       record_.at("stages").size(), work_.string(), out_.string()));
}

RunFolder RunFolder::create(const fs::path& out_dir, const json& options) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw ConfigError(msg("output", "{}: exists and is not a folder; refusing to replace a file "
                                    "with an output folder", out_dir.string()));
  const fs::path work = work_folder_of(out_dir);
  if (fs::exists(work, ec)) {
    long pid = 0;
    try {
      pid = read_json_file(work / kRecord).value("pid", 0L);
    } catch (const Error&) {
    }
    if (process_alive(pid))
      throw ConfigError(msg("output", "{}: process {} is writing this output now",
                            out_dir.string(), pid));
    log_warn(fmt::format("[compress] {}: replacing the work folder of an interrupted run "
                         "(`compress --resume {}` would have continued it)",
                         work.string(), out_dir.string()));
    fs::remove_all(work, ec);
  }
  fs::create_directories(work, ec);
  if (ec)
    throw FormatError(msg("output", "{}: cannot create the work folder ({})", work.string(),
                          ec.message()));
  RunFolder f(out_dir, work, {{"pid", long(::getpid())}, {"options", options},
                              {"stages", json::array()}});
  f.save();
  return f;
}

RunFolder RunFolder::resume(const fs::path& out_dir) {
  const fs::path work = work_folder_of(out_dir);
  if (!fs::is_regular_file(work / kRecord))
    throw ConfigError(msg("compress", "--resume {}: no interrupted run to resume (expected its "
                                      "work folder {} with {})",
                          out_dir.string(), work.string(), kRecord));
  json record = read_json_file(work / kRecord);
  const std::string where = (work / kRecord).string();
  if (!record.is_object() || !record.contains("options") || !record["options"].is_object() ||
      !record.contains("stages") || !record["stages"].is_array())
    throw FormatError(msg("compress", "{}: expected an object with \"options\" (object) and "
                                      "\"stages\" (array)", where));
  if (process_alive(record.value("pid", 0L)))
    throw ConfigError(msg("compress", "--resume {}: process {} is still running it",
                          out_dir.string(), record["pid"].get<long>()));
  record["pid"] = long(::getpid());
  RunFolder f(out_dir, work, std::move(record));
  f.save();
  return f;
}

void RunFolder::save() { write_json_file(work_ / kRecord, record_); }

std::optional<json> RunFolder::completed(const std::string& stage) {
  json& stages = record_["stages"];
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].value("stage", std::string()) != stage) continue;
    bool intact = true;
    for (auto it = stages[i]["files"].begin(); it != stages[i]["files"].end(); ++it)
      intact = intact && bytes_of(work_ / it.key()) == it.value().get<int64_t>();
    if (intact) {
      resumed_.push_back(stage);
      log_info(fmt::format("[compress] {}: done by an earlier attempt, taken as it is", stage));
      report_progress({"compress", int64_t(i + 1), 0, "stages", stage});
      return stages[i]["result"];
    }
    log_warn(fmt::format("[compress] {}: the files of an earlier attempt are incomplete; running "
                         "it again, and every stage after it", stage));
    stages.erase(stages.begin() + long(i), stages.end());
    save();
    return std::nullopt;
  }
  return std::nullopt;
}

void RunFolder::complete(const std::string& stage, const std::vector<std::string>& files,
                         const json& result, double seconds) {
  json sizes = json::object();
  for (const std::string& f : files) {
    const int64_t n = bytes_of(work_ / f);
    if (n < 0)
      throw FormatError(msg("compress", "stage {}: its output {} is missing", stage,
                            (work_ / f).string()));
    sizes[f] = n;
  }
  json& stages = record_["stages"];
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i]["stage"] == stage) {
      stages.erase(stages.begin() + long(i));
      break;
    }
  stages.push_back({{"stage", stage}, {"seconds", seconds}, {"files", sizes}, {"result", result}});
  save();
  log_info(fmt::format("[compress] {} done in {:.1f} s", stage, seconds));
  report_progress({"compress", int64_t(stages.size()), 0, "stages", stage});
}

json RunFolder::stage_times() const {
  json out = json::array();
  for (const json& s : record_.at("stages")) {
    const std::string name = s.at("stage").get<std::string>();
    const bool resumed = std::find(resumed_.begin(), resumed_.end(), name) != resumed_.end();
    out.push_back({{"stage", name}, {"seconds", s.at("seconds")}, {"resumed", resumed}});
  }
  return out;
}

void RunFolder::commit() {
  replace_folder(work_, fs::absolute(out_));
  committed_ = true;
}

}  // namespace ac
