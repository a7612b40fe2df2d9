// Torch-free helpers shared by every test file (tests/test_util.h adds the torch ones): a
// temporary folder, the expected-error check and the corpora of the tokenizer parity tests.
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

/// The paragraphs of a text as the tokenizer parity tests cut them: the pieces between "\n\n",
/// the separators and empty pieces dropped.
inline std::vector<std::string> paragraphs_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

/// The cases of tests/tokenizers/hard_cases.txt (its text): separated by lines "%%%%" after a
/// header; the file's last newline belongs to no case.
inline std::vector<std::string> hard_cases_of(std::string text) {
  text = text.substr(text.find("%%%%\n") + 5);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<std::string> out;
  const std::string sep = "\n%%%%\n";
  for (size_t start = 0;;) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + sep.size();
  }
  return out;
}

}  // namespace ac::test
