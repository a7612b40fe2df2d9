#include "common/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "common/error.h"

namespace ac {

static std::string unique_suffix() {
  static std::mt19937_64 rng{std::random_device{}()};
  return fmt::format(".tmp-{}-{:x}", ::getpid(), rng() & 0xffffffff);
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  fs::path tmp = path;
  tmp += unique_suffix();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw FormatError(msg("write_file", "{}: cannot create ({}); does the folder exist?",
                          path.string(), std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw FormatError(msg("write_file", "{}: write failed after {} of {} bytes ({})",
                            path.string(), off, bytes.size(), std::strerror(e)));
    }
    off += size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw FormatError(msg("write_file", "{}: rename failed ({})", path.string(), ec.message()));
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(msg("read_file", "{}: no such file or not readable", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StagingDir::StagingDir(fs::path final_dir) : final_(std::move(final_dir)) {
  if (final_.has_filename() == false) final_ = final_.parent_path();
  fs::path parent = fs::absolute(final_).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    throw FormatError(msg("output", "{}: cannot create parent folder ({})", parent.string(),
                          ec.message()));
  tmp_ = parent / (".staging-" + final_.filename().string() + unique_suffix());
  fs::create_directory(tmp_);
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void StagingDir::commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(final_)) {
    old = final_;
    old += unique_suffix() + ".old";
    fs::rename(final_, old, ec);
    if (ec)
      throw FormatError(msg("output", "{}: cannot move the previous output aside ({})",
                            final_.string(), ec.message()));
  }
  fs::rename(tmp_, final_, ec);
  if (ec) {
    if (!old.empty()) fs::rename(old, final_);
    throw FormatError(msg("output", "{}: rename failed ({})", final_.string(), ec.message()));
  }
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

void check_not_overwriting_input(const fs::path& input, const fs::path& out, const char* where) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(input), ec);
  fs::path b = fs::weakly_canonical(fs::absolute(out), ec);
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

}  // namespace ac
