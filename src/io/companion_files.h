// The files that travel with a checkpoint unchanged: the one list that every stage writing a
// checkpoint folder (prune, distill: io/checkpoint.h save_checkpoint; export: export/hf_export.h)
// copies byte for byte.
#pragma once
#include <string>
#include <vector>

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

}  // namespace ac
