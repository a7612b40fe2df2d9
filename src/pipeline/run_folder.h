// The folder a compress run works in, and what makes it resumable.
//
//   OUT/                    the output: appears only when the whole run succeeded (commit)
//   .OUT.partial/           the work folder: every stage writes its files here, then records
//     stages.json           itself as complete: {"pid", "options", "stages": [{"stage",
//                           "seconds", "files": {path: bytes}, "result": {...}}]}
//
// `compress --resume OUT` opens the work folder of an interrupted run (killed, out of memory,
// stopped by a signal or an error) with its recorded options and skips every stage whose record
// is there and whose files are all present with their recorded sizes; the first stage that is
// not, and every stage after it, runs again. A stage's record is written (atomically) only
// after its files, so a run killed inside a stage leaves that stage unrecorded. Each stage
// complete (or taken over) is a progress event ("compress", common/progress.h).
//
// The work folder is removed when the run fails before any stage completed (bad input: nothing
// is left behind), and kept otherwise, so that the work of finished stages is not lost.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"

namespace ac {

class RunFolder {
 public:
  /// A new run writing to `out_dir`: creates the work folder beside it, recording `options`.
  /// A work folder left by a run that is no longer alive is replaced (with a warning naming
  /// --resume); one of a live process is refused. Throws ConfigError on an existing file at
  /// `out_dir`, FormatError when the folder cannot be created.
  static RunFolder create(const fs::path& out_dir, const nlohmann::json& options);

  /// The work folder of an interrupted run writing to `out_dir`. Throws ConfigError when there
  /// is none (naming the folder it looked for) or its process is still alive; FormatError when
  /// stages.json is not what RunFolder writes.
  static RunFolder resume(const fs::path& out_dir);

  RunFolder(RunFolder&&) noexcept;
  RunFolder& operator=(RunFolder&&) = delete;
  RunFolder(const RunFolder&) = delete;
  ~RunFolder();

  /// Where the stages write.
  const fs::path& path() const { return work_; }
  /// The options recorded when the run was created.
  const nlohmann::json& options() const { return record_.at("options"); }

  /// The result a stage recorded in an earlier attempt of this run, when its record is there
  /// and every file it lists has its recorded size; otherwise nullopt, and the records of this
  /// stage and of every stage after it are dropped (they run again).
  std::optional<nlohmann::json> completed(const std::string& stage);

  /// Records `stage` as complete: `files` (paths relative to the work folder, files or folders)
  /// with their sizes, `result` (what later stages and the report need), the seconds it took.
  /// Throws FormatError when a listed file is missing.
  void complete(const std::string& stage, const std::vector<std::string>& files,
                const nlohmann::json& result, double seconds);

  /// Every recorded stage in order: [{"stage", "seconds", "resumed"}] ("resumed": recorded by
  /// an earlier attempt).
  nlohmann::json stage_times() const;

  /// Renames the work folder to the output (replacing an older output atomically).
  void commit();

 private:
  RunFolder(fs::path out_dir, fs::path work, nlohmann::json record);
  void save();

  fs::path out_;
  fs::path work_;
  nlohmann::json record_;
  std::vector<std::string> resumed_;  // stages taken over from an earlier attempt
  bool committed_ = false;
};

/// `.OUT.partial` beside `out_dir`.
fs::path work_folder_of(const fs::path& out_dir);

}  // namespace ac
