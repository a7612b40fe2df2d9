#include "common/fs.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fstream>
#include <random>
#include <sstream>

#include "common/error.h"

namespace ac {

static std::string unique_suffix() {
  static std::mt19937_64 rng{std::random_device{}()};
  return fmt::format(".tmp-{}-{:x}", ::getpid(), rng() & 0xffffffff);
}

/// fsync of a folder, so that a rename inside it survives a crash (best effort: some file
/// systems refuse to open folders for it).
static void sync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(fs::path path) : path_(std::move(path)) {
  tmp_ = path_;
  tmp_ += unique_suffix();
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw FormatError(msg("write_file", "{}: cannot create ({}); does the folder exist?",
                          path_.string(), std::strerror(errno)));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

/// The error of a failed system call, with errno's text.
static FormatError io_error(const fs::path& path, const std::string& what) {
  return FormatError(msg("write_file", "{}: {} ({})", path.string(), what, std::strerror(errno)));
}

void AtomicFileWriter::write_at(uint64_t offset, std::string_view bytes) {
  AC_CHECK(fd_ >= 0 && !committed_, "write_at after commit of {}", path_.string());
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + off, bytes.size() - off, off_t(offset + off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw io_error(path_, fmt::format("write failed after {} of {} bytes", off, bytes.size()));
    off += size_t(n);
  }
}

void AtomicFileWriter::read_at(uint64_t offset, char* out, size_t n) const {
  AC_CHECK(fd_ >= 0 && !committed_, "read_at after commit of {}", path_.string());
  size_t off = 0;
  while (off < n) {
    const ssize_t r = ::pread(fd_, out + off, n - off, off_t(offset + off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw io_error(path_, fmt::format("read back failed at byte {}", offset + off));
    off += size_t(r);
  }
}

void AtomicFileWriter::resize(uint64_t bytes) {
  AC_CHECK(fd_ >= 0 && !committed_, "resize after commit of {}", path_.string());
  if (::ftruncate(fd_, off_t(bytes)) != 0)
    throw io_error(path_, fmt::format("cannot resize to {} bytes", bytes));
}

void AtomicFileWriter::commit() {
  AC_CHECK(fd_ >= 0 && !committed_, "second commit of {}", path_.string());
  if (::fsync(fd_) != 0) throw io_error(path_, "fsync failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw io_error(path_, "close failed");
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec)
    throw FormatError(msg("write_file", "{}: rename failed ({})", path_.string(), ec.message()));
  committed_ = true;
  sync_dir(path_.parent_path());
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  AtomicFileWriter file(path);
  file.write_at(0, bytes);
  file.commit();
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw FormatError(msg("read_file", "{}: no such file or not readable", path.string()));
  // A folder, a FIFO or a device (/dev/zero) would block or never end: regular files only.
  if (!fs::is_regular_file(status))
    throw FormatError(msg("read_file", "{}: not a regular file", path.string()));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(msg("read_file", "{}: no such file or not readable", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw FormatError(msg("read_file", "{}: read failed", path.string()));
  return ss.str();
}

/// The staging name of `final_dir` for this process: ".staging-NAME.tmp-PID-RANDOM".
static std::string staging_prefix(const fs::path& final_dir) {
  return ".staging-" + final_dir.filename().string() + ".tmp-";
}

/// Removes staging folders of `final_dir` left by processes that no longer run (killed by
/// SIGKILL or a power loss, so their destructor never ran). A live process's folder is kept.
static void remove_stale_staging(const fs::path& parent, const fs::path& final_dir) {
  const std::string prefix = staging_prefix(final_dir);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
}

StagingDir::StagingDir(fs::path final_dir) : final_(std::move(final_dir)) {
  if (final_.has_filename() == false) final_ = final_.parent_path();
  fs::path parent = fs::absolute(final_).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    throw FormatError(msg("output", "{}: cannot create parent folder ({})", parent.string(),
                          ec.message()));
  if (fs::exists(final_, ec) && !fs::is_directory(final_, ec))
    throw ConfigError(msg("output", "{}: exists and is not a folder; refusing to replace a file "
                          "with an output folder", final_.string()));
  remove_stale_staging(parent, final_);
  tmp_ = parent / (".staging-" + final_.filename().string() + unique_suffix());
  fs::create_directory(tmp_, ec);
  if (ec)
    throw FormatError(msg("output", "{}: cannot create the staging folder ({})", tmp_.string(),
                          ec.message()));
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void replace_folder(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  const fs::path parent = from.parent_path();
  sync_dir(from);
  // Replacing an existing output: swap the two folders in one atomic step (renameat2
  // RENAME_EXCHANGE), so that at every instant `to` is either the old or the new output.
  if (fs::exists(to, ec) &&
      ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
    sync_dir(parent);
    fs::remove_all(from, ec);  // now the previous output
    return;
  }
  // No previous output, or a file system without RENAME_EXCHANGE: move the old one aside first.
  fs::path old;
  if (fs::exists(to, ec)) {
    old = to;
    old += unique_suffix() + ".old";
    fs::rename(to, old, ec);
    if (ec)
      throw FormatError(msg("output", "{}: cannot move the previous output aside ({})",
                            to.string(), ec.message()));
  }
  fs::rename(from, to, ec);
  if (ec) {
    std::error_code ec2;
    if (!old.empty()) fs::rename(old, to, ec2);
    throw FormatError(msg("output", "{}: rename failed ({})", to.string(), ec.message()));
  }
  sync_dir(parent);
  if (!old.empty()) fs::remove_all(old, ec);
}

void StagingDir::commit() {
  replace_folder(tmp_, final_);
  committed_ = true;
}

void check_not_overwriting_input(const fs::path& input, const fs::path& out, const char* where) {
  auto canonical = [](const fs::path& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(fs::absolute(p), ec);
    return c.has_filename() ? c : c.parent_path();  // "dir/" names the folder "dir"
  };
  const fs::path a = canonical(input), b = canonical(out);
  auto inside = [](const fs::path& outer, const fs::path& inner) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i)
      if (i == inner.end() || *o != *i) return false;
    return true;
  };
  if (inside(a, b) || inside(b, a))
    throw ConfigError(msg(where, "refusing to write '{}': it overlaps the input '{}'",
                          out.string(), input.string()));
}

void check_not_overwriting_inputs(const std::vector<fs::path>& inputs, const fs::path& out,
                                  const char* where) {
  if (out.empty()) return;
  for (const auto& in : inputs)
    if (!in.empty()) check_not_overwriting_input(in, out, where);
}

}  // namespace ac
