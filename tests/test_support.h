// Torch-free helpers shared by every test file (tests/test_util.h adds the torch ones): a
// temporary folder and the expected-error check.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace ac::test {

/// A fresh temporary folder removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/ac-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Runs `f` and expects an E whose message contains every needle (the file, the field, ...).
/// Returns the message ("" when nothing was thrown) for further checks.
template <typename E>
std::string expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needles.front() << "'";
  } catch (const E& e) {
    const std::string m = e.what();
    for (const auto& n : needles)
      EXPECT_NE(m.find(n), std::string::npos) << "message: " << m << "\nexpected: " << n;
    return m;
  }
  return "";
}

}  // namespace ac::test
