// Checks of flag values that several subcommands share, so that one mistake reads the same
// everywhere: the error names the flag (or its file), what was expected and what was found, and
// comes before anything is read or written.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

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

}  // namespace ac::cli
