// Helpers shared by the tests: temporary folders, the stories15M cache, the python reference.
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ac::test {
namespace fs = std::filesystem;

/// A fresh temporary folder removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ac-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Folder holding stories15M's model.bin and tokenizer.bin (scripts/fetch_stories15m.sh).
inline fs::path stories15m_dir() {
  if (const char* d = std::getenv("AC_STORIES15M_DIR")) return d;
  if (const char* c = std::getenv("AC_CACHE_DIR")) return fs::path(c) / "stories15m";
  return fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache/autocompress/stories15m";
}

/// Debian's python3 with python3-torch (the machine's default python3 may be another install).
inline std::string debian_python() { return "/usr/bin/python3"; }

inline fs::path source_dir() { return AC_SOURCE_DIR; }

/// Uniform random token ids [B, T] int64 in [0, V), seeded.
inline at::Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randint(0, V, {B, T}, g, at::kLong);
}

/// Runs a shell command; fails the test (with the command) on a non-zero exit.
inline void run_or_fail(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "command failed: " << cmd;
}

}  // namespace ac::test
