// Checks of flag values that several subcommands share, so that one mistake reads the same
// everywhere: the error names the flag (or its file), what was expected and what was found, and
// comes before anything is read or written.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/fs.h"
#include "hardware/profile.h"
#include "model/config.h"

namespace ac::cli {

/// A CLI11 validator for a count of tokens per sequence (--seq-len, --search-seq-len): a
/// positive integer. CLI11 puts the flag before the message ("--seq-len: expected a positive
/// number of tokens, found 0"); it runs while the command line is parsed, so a refused value
/// leaves nothing behind. Its description is empty: --help shows the flag as before.
inline CLI::Validator positive_tokens() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        int64_t n = 0;
        if (!CLI::detail::lexical_cast(v, n) || n <= 0)
          return fmt::format("expected a positive number of tokens, found {}", v);
        return {};
      },
      /*validator_desc=*/"", /*validator_name=*/"positive_tokens");
}

/// The profile of --profile `path`, read for `where` ("plan", "search", ...). Throws
/// ConfigError "[where] --profile PATH: no such file (expected a profile JSON written by
/// `autocompress profile`)" when it does not exist, and load_profile's FormatError (naming the
/// file and field) when it is malformed.
inline Profile load_profile_flag(const std::string& path, const char* where) {
  if (!fs::is_regular_file(path))
    throw ConfigError(msg(where, "--profile {}: {}; expected a profile JSON written by "
                          "`autocompress profile`", path,
                          fs::exists(path) ? "not a file" : "no such file"));
  return load_profile(path);
}

/// Refuses `seq_len` tokens per window for a model that was built for fewer positions
/// (config.json max_position_embeddings): past them RoPE rotates by angles the model never saw
/// and the scores mean nothing for any deployment. Also refuses a window longer than the
/// model's sliding_window, past which its attention slides, which the forward does not compute
/// (it would stop mid-run). Throws ConfigError "[where] --seq-len N: expected at most
/// max_position_embeddings M of MODEL/config.json" (or its sliding_window), with `hint` (e.g.
/// --stride for longer texts) appended.
inline void check_seq_len_fits(int64_t seq_len, const ModelConfig& c, const std::string& model,
                               const char* where, const std::string& hint = "") {
  const std::string file = (fs::path(model) / "config.json").string();
  if (c.sliding_window && seq_len > *c.sliding_window &&
      *c.sliding_window < c.max_position_embeddings)
    throw ConfigError(msg(where, "--seq-len {}: expected at most sliding_window {} of {}: past "
                          "it the attention slides, which the forward does not compute{}",
                          seq_len, *c.sliding_window, file, hint));
  if (seq_len <= c.max_position_embeddings) return;
  throw ConfigError(msg(where, "--seq-len {}: expected at most max_position_embeddings {} of "
                        "{}: past it the positions are ones the model was never trained on{}",
                        seq_len, c.max_position_embeddings, file, hint));
}

/// What an output flag names: a file written whole, or a folder built and renamed into place
/// (StagingDir, which creates missing parent folders).
enum class OutputKind { kFile, kFolder };

/// Refuses, before anything is read or computed, an output `path` given by `flag` that cannot be
/// written: a file whose folder does not exist, is not a folder or is not writable, or that
/// names an existing folder; a folder whose nearest existing parent is not a writable folder, or
/// that names an existing file. Without it a stage would run for minutes and fail only when it
/// writes. Nothing to check when `path` is empty (the flag was not given). Throws ConfigError
/// "[where] --out PATH: the folder DIR does not exist (create it first)" and the like.
inline void check_output_flag(const char* where, const std::string& flag, const std::string& path,
                              OutputKind kind = OutputKind::kFile) {
  if (path.empty()) return;
  std::error_code ec;
  const fs::path p(path);
  auto fail = [&](const std::string& what) {
    throw ConfigError(msg(where, "{} {}: {}", flag, path, what));
  };
  auto writable = [](const fs::path& dir) { return ::access(dir.c_str(), W_OK | X_OK) == 0; };
  if (kind == OutputKind::kFile) {
    if (!p.has_filename() || fs::is_directory(p, ec))
      fail("is a folder; expected a file name");
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (!fs::exists(dir, ec)) fail(fmt::format("the folder {} does not exist (create it first)",
                                               dir.string()));
    if (!fs::is_directory(dir, ec)) fail(fmt::format("{} is not a folder", dir.string()));
    if (!writable(dir)) fail(fmt::format("the folder {} is not writable", dir.string()));
    return;
  }
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    fail("is a file; expected a folder to write (or a path that does not exist yet)");
  // The nearest existing parent: StagingDir creates the folders below it.
  fs::path dir = fs::absolute(p, ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.root_path()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    fail(fmt::format("{} is not a folder, so no folder can be created in it", dir.string()));
  if (!writable(dir)) fail(fmt::format("the folder {} is not writable", dir.string()));
}

}  // namespace ac::cli
