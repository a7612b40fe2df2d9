// The files that travel with a checkpoint unchanged: the one list that every stage writing a
// checkpoint folder (prune, distill: io/checkpoint.h save_checkpoint; export: export/hf_export.h)
// copies byte for byte.
#pragma once
#include <fmt/format.h>

#include <string>
#include <system_error>
#include <vector>

#include "common/error.h"
#include "common/fs.h"

namespace ac {

/// The tokenizer in each of its forms (tokenizer.json, tokenizer.model, tokenizer.bin, the slow
/// tokenizers' vocab.json / merges.txt / added_tokens.json), its settings and chat template
/// (tokenizer_config.json, special_tokens_map.json, chat_template.jinja / .json as transformers
/// 4.4x+ writes it), and the generation defaults (generation_config.json). None of them changes
/// the computation.
inline const std::vector<std::string>& checkpoint_companion_files() {
  static const std::vector<std::string> files = {
      "tokenizer.bin",         "tokenizer.json",          "tokenizer.model",
      "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "vocab.json",            "merges.txt",              "chat_template.jinja",
      "chat_template.json",    "generation_config.json"};
  return files;
}

/// Copies each of checkpoint_companion_files() that `from` has into `dir`, byte for byte,
/// replacing what is there. Throws FormatError "[where] SRC: cannot copy to DST (why)".
inline void copy_companion_files(const fs::path& from, const fs::path& dir, const char* where) {
  for (const std::string& name : checkpoint_companion_files()) {
    const fs::path src = from / name;
    if (!fs::exists(src)) continue;
    std::error_code ec;
    fs::copy_file(src, dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec)
      throw FormatError(fmt::format("[{}] {}: cannot copy to {} ({})", where, src.string(),
                                    (dir / name).string(), ec.message()));
  }
}

}  // namespace ac
