// The golden fixtures of tests/golden/hf*/ (written by tests/golden/hf_golden*.py): their
// folders, input ids and recorded logits, and the relative difference the golden tests assert.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"
#include "io/safetensors.h"

namespace ac::test {

/// The fixture folders under `root` (e.g. tests/golden/hf-moe), sorted by name.
inline std::vector<fs::path> golden_fixture_dirs(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// A fixture's tokens.json: B rows of T ids -> [B, T] int64.
inline at::Tensor read_golden_tokens(const fs::path& dir) {
  const auto rows = read_json_file(dir / "tokens.json").get<std::vector<std::vector<int64_t>>>();
  std::vector<at::Tensor> out;
  for (const auto& r : rows) out.push_back(at::tensor(r, at::kLong));
  return at::stack(out);
}

/// A tensor of the fixture's logits.safetensors, copied out of the mapping.
inline at::Tensor read_golden_logits(const fs::path& dir, const std::string& name) {
  return SafetensorsFile(dir / "logits.safetensors").get(name).clone();
}

/// max |ours - reference| / max |reference| (1 and a test failure when the shapes differ),
/// printed after `tag` with both parts.
inline double golden_relative_diff(const at::Tensor& ours, const at::Tensor& reference,
                                   const std::string& what, const char* tag) {
  EXPECT_EQ(ours.sizes(), reference.sizes()) << what;
  if (ours.sizes() != reference.sizes()) return 1.0;
  const double diff = (ours.to(at::kDouble) - reference.to(at::kDouble)).abs().max().item<double>();
  const double scale = reference.abs().max().item<double>();
  std::printf("[%s] %-48s largest |diff| %.3g, max |logit| %.3g, relative %.3g\n", tag,
              what.c_str(), diff, scale, diff / scale);
  return diff / scale;
}

}  // namespace ac::test
