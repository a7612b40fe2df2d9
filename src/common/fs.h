// Files written so that nothing is ever half-written: write to a temporary name, then rename.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ac {
namespace fs = std::filesystem;

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync, rename.
/// Throws FormatError naming the path if the folder is missing or the write fails.
void write_file_atomic(const fs::path& path, std::string_view bytes);

/// A file written in pieces under a temporary sibling name (PATH.tmp-PID-RANDOM) and renamed
/// into place by commit(): write_file_atomic for data that does not fit in memory (token files
/// written as text is tokenized). Destroyed without commit() (an exception, a failed stage), the
/// temporary file is removed, so no partial file is ever left; an existing `path` is replaced
/// only at commit(). Every method throws FormatError naming `path` when the system call fails.
class AtomicFileWriter {
 public:
  /// Creates the temporary file. Throws FormatError if the folder is missing or not writable.
  explicit AtomicFileWriter(fs::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  /// Writes `bytes` at byte `offset` (the file grows as needed).
  void write_at(uint64_t offset, std::string_view bytes);
  /// Reads `n` bytes at byte `offset` into `out`; throws FormatError if the file is shorter.
  void read_at(uint64_t offset, char* out, size_t n) const;
  /// Cuts (or zero-extends) the file to `bytes`.
  void resize(uint64_t bytes);
  /// fsync, rename to the final path, fsync the folder. Nothing may be written after it.
  void commit();
  /// The final path.
  const fs::path& path() const { return path_; }

 private:
  fs::path path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Reads a whole file. Throws FormatError("[read_file] PATH: no such file") when absent.
std::string read_file(const fs::path& path);

/// Renames the folder `from` to `to`, replacing an existing `to` in one atomic step where the
/// file system can (renameat2 RENAME_EXCHANGE), else by moving it aside first; `from` must be
/// on the same file system (a sibling). Throws FormatError when a rename fails (the previous
/// `to` is put back).
void replace_folder(const fs::path& from, const fs::path& to);

/// An output folder built under a temporary sibling name and renamed into place on commit().
/// If destroyed without commit() (an exception, a failed stage) the temporary folder is
/// removed, so no partial output directory is ever left behind. An existing `final_dir` is
/// replaced only at commit() time, so a failed run leaves the previous output intact.
class StagingDir {
 public:
  explicit StagingDir(fs::path final_dir);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  /// The temporary folder to write into.
  const fs::path& path() const { return tmp_; }
  /// Renames the temporary folder to the final one (replacing an older output).
  void commit();

 private:
  fs::path final_, tmp_;
  bool committed_ = false;
};

/// Throws ConfigError if `out` is, contains, or lies inside `input` (refuse to overwrite input).
void check_not_overwriting_input(const fs::path& input, const fs::path& out, const char* where);
/// The same for every non-empty input; nothing to check when `out` is empty (no output asked).
void check_not_overwriting_inputs(const std::vector<fs::path>& inputs, const fs::path& out,
                                  const char* where);


}  // namespace ac
