// Helpers shared by the tests: temporary folders, the stories15M cache, the python reference,
// llama.cpp through node-llama-cpp.
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "model/config.h"
#include "test_paths.h"
#include "test_support.h"

namespace ac::test {
namespace fs = std::filesystem;

/// Llama 3.1's RoPE scaling (factor 8, low / high frequency factors 1 and 4) with a short
/// original context, so that every frequency band is hit at a few dozen positions; `raw` is the
/// config.json object an export writes back.
inline RopeScaling llama3_rope_scaling(int64_t original_max_position_embeddings = 16) {
  RopeScaling s;
  s.rope_type = "llama3";
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = original_max_position_embeddings;
  s.raw = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
           {"high_freq_factor", 4.0},
           {"original_max_position_embeddings", original_max_position_embeddings}};
  return s;
}

/// Folder holding stories15M's model.bin and tokenizer.bin (scripts/fetch_stories15m.sh).
inline fs::path stories15m_dir() {
  if (const char* d = std::getenv("AC_STORIES15M_DIR")) return d;
  if (const char* c = std::getenv("AC_CACHE_DIR")) return fs::path(c) / "stories15m";
  return fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache/autocompress/stories15m";
}

/// Debian's python3 with python3-torch (the machine's default python3 may be another install).
inline std::string debian_python() { return "/usr/bin/python3"; }

/// Uniform random token ids [B, T] int64 in [0, V), seeded.
inline at::Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randint(0, V, {B, T}, g, at::kLong);
}

/// `n` random token ids in [0, vocab) (seed) as one token stream.
inline TokenDataset random_text(int64_t n, int64_t vocab, uint64_t seed) {
  at::Tensor ids = random_tokens(1, n, vocab, seed).to(at::kInt).contiguous();
  return TokenDataset(std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + n),
                      vocab);
}

/// `l` with its attention removed (attention_no_op, no heads), as a target marks it (model/config.h).
inline LayerConfig attention_removed(LayerConfig l) {
  l.attention_no_op = true;
  l.num_attention_heads = l.num_key_value_heads = 0;
  return l;
}

/// `l` with its FFN removed (ffn_no_op, width 0); with attention_removed too, a removed block.
inline LayerConfig ffn_removed(LayerConfig l) {
  l.ffn_no_op = true;
  l.intermediate_size = 0;
  return l;
}

/// Runs a shell command; fails the test (with the command) on a non-zero exit.
inline void run_or_fail(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "command failed: " << cmd;
}

/// What a shell command printed on stdout (and stderr with `merge_stderr`; else stderr goes to
/// the test's log) and its exit status (-1 when it did not exit normally).
struct CommandOutput {
  std::string out;
  int status = -1;
};
inline CommandOutput run_command(const std::string& cmd, bool merge_stderr = false) {
  CommandOutput r;
  FILE* p = popen((cmd + (merge_stderr ? " 2>&1" : "")).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// The autocompress CLI under test: $AC_BIN (set by ctest), else the build's.
inline std::string cli_bin() {
  const char* env = std::getenv("AC_BIN");
  return env ? env : (binary_dir() / "autocompress").string();
}

/// What a run of the CLI printed (stdout and stderr apart) and its exit status (-1: killed).
struct CliRun {
  int rc = 0;
  std::string out, err;
};

/// Runs `autocompress ARGS` (cli_bin()) with stdout and stderr kept in `logs` (a folder apart
/// from any the test checks for leftovers); AC_QUIET=1 unless `log` (some checks read the log
/// lines).
inline CliRun run_cli(const std::string& args, const fs::path& logs, bool log = false) {
  const fs::path out = logs / "stdout.txt", err = logs / "stderr.txt";
  const std::string cmd = fmt::format("{} {} {} > '{}' 2> '{}'", log ? "env -u AC_QUIET" : "AC_QUIET=1",
                                      cli_bin(), args, out.string(), err.string());
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

/// Every name in `dir` (one level).
inline std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

/// compress's flags for one AutoCompress search (no restarts, no capped search): for the end-to-end
/// tests whose subject is not the search (data, resume, signals, reports, exports), which keep
/// the rest of the pipeline as it is at a quarter of the search's time. The default searches
/// (three restarts and a capped one) are run end to end by CompressGpuScenario and checked by
/// MinitronRetrain and SearchPlacement.
inline constexpr const char* kOneSearch = "--autocompress-restarts 1 --max-attention-free-layers -1";

/// stories15M (stories15m_dir()) imported with `autocompress import llama2c` into DIR/stories15m;
/// returns that folder. Fails the test when stories15M is not fetched or the import fails.
inline fs::path import_stories15m(const fs::path& dir) {
  const fs::path src = stories15m_dir(), model = dir / "stories15m";
  EXPECT_TRUE(fs::exists(src / "model.bin")) << src << ": run scripts/fetch_stories15m.sh";
  run_or_fail(cli_bin() + " import llama2c " + (src / "model.bin").string() + " " +
              (src / "tokenizer.bin").string() + " --out " + model.string() + " > /dev/null");
  return model;
}

/// Runs tools/llamacpp/run.mjs on a GGUF: llama.cpp's tokenization of `text` and its greedy
/// continuation (`n` tokens) of `prompt` (ids, BOS included when wanted); returns its JSON, also
/// left in `out`. Throws std::runtime_error with run.mjs's stderr when the run fails or
/// node-llama-cpp is not installed (scripts/setup_node.sh).
inline nlohmann::json run_llamacpp(const fs::path& gguf, const std::string& text,
                                   const std::vector<int64_t>& prompt, int n, const fs::path& out) {
  const fs::path dir = source_dir() / "tools/llamacpp";
  if (!fs::exists(dir / "node_modules/node-llama-cpp"))
    throw std::runtime_error("tools/llamacpp/node_modules is missing: run scripts/setup_node.sh");
  const std::string ids = fmt::format("{}", fmt::join(prompt, ","));
  const std::string cmd = fmt::format("node '{}' '{}' '{}' {} {} > '{}' 2> '{}.err'",
                                      (dir / "run.mjs").string(), gguf.string(), text, ids, n,
                                      out.string(), out.string());
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("llama.cpp run failed: " + cmd + "\n" + read_file(out.string() + ".err"));
  return nlohmann::json::parse(read_file(out));
}

/// Ids of each text from llama.cpp's tokenizer reading `gguf` (run.mjs --texts).
inline std::vector<std::vector<int64_t>> llamacpp_tokenize(const fs::path& gguf, const std::vector<std::string>& texts,
                                   const fs::path& tmp) {
  const fs::path dir = source_dir() / "tools/llamacpp";
  if (!fs::exists(dir / "node_modules/node-llama-cpp"))
    throw std::runtime_error("tools/llamacpp/node_modules is missing: run scripts/setup_node.sh");
  write_file_atomic(tmp / "texts.json", nlohmann::json(texts).dump());
  const std::string cmd = fmt::format("node '{}' '{}' --texts='{}' > '{}' 2> '{}'",
                                      (dir / "run.mjs").string(), gguf.string(),
                                      (tmp / "texts.json").string(), (tmp / "ids.json").string(),
                                      (tmp / "ids.err").string());
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("run.mjs --texts failed: " + cmd + "\n" + read_file(tmp / "ids.err"));
  return nlohmann::json::parse(read_file(tmp / "ids.json"))["ids"].get<std::vector<std::vector<int64_t>>>();
}

}  // namespace ac::test
