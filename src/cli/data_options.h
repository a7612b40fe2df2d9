// The data flags every data-taking subcommand shares (data/data_source.h): --data, --text-field,
// --split, with one wording everywhere.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "data/data_source.h"

namespace ac::cli {

/// The flags' values as CLI11 fills them.
struct DataArgs {
  std::string path, text_field = "text", split;
  /// The spec for load_data; `split` empty = the stage's default.
  DataSpec spec(DataSplit default_split) const {
    DataSpec d;
    d.path = path;
    d.text_field = text_field;
    d.split = split.empty() ? default_split : parse_data_split(split);
    return d;
  }
};

/// Adds --data (`what` says what the stage uses it for), --text-field and --split (default
/// `default_split`) to `s`. Returns the --data option (to mark it required, say).
inline CLI::Option* add_data_options(CLI::App* s, DataArgs& a, const std::string& what,
                                     DataSplit default_split) {
  CLI::Option* data = s->add_option(
      "--data", a.path,
      what + ": a token file, or text tokenized with the model's tokenizer: a UTF-8 file (one "
             "document), JSONL (--text-field; one document a line) or a folder of .txt/.jsonl "
             "files");
  s->add_option("--text-field", a.text_field, "JSONL: the field holding each document's text")
      ->capture_default_str();
  s->add_option("--split", a.split,
                std::string("text --data: the part read, train, heldout (every 20th document) or "
                            "all (default ") + to_string(default_split) + ")")
      ->check(CLI::IsMember({"train", "heldout", "all"}));
  return data;
}

}  // namespace ac::cli
