// Tokenizer of Hugging Face checkpoints, read from tokenizer.json (the tokenizers library's
// serialization) and, when present, tokenizer_config.json (transformers' add_bos_token,
// add_eos_token, bos/eos/pad/unk tokens and chat_template).
//
// encode() runs the tokenizers library's pipeline (tokenizer/mod.rs encode_single_sequence):
//   1. added tokens (tokenizer.json "added_tokens", AddedVocabulary) are split out of the text
//      first, leftmost-longest: those with normalized = false on the raw text, the others on the
//      normalized text; lstrip/rstrip swallow the whitespace beside them, single_word keeps only
//      matches not touching a word character;
//   2. "normalizer": NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip, Sequence;
//   3. "pre_tokenizer": Split (Regex or String pattern, any behavior, invert), ByteLevel
//      (add_prefix_space, use_regex, the GPT-2 byte-to-unicode table), Metaspace (replacement,
//      prepend_scheme, split), Sequence;
//   4. "model": BPE (io/hf_bpe.h: merges in the "a b" or ["a", "b"] form, byte_fallback,
//      fuse_unk, ignore_merges, unk_token);
//   5. "post_processor" when add_special_tokens: TemplateProcessing (its "single" template),
//      ByteLevel (adds nothing), Sequence.
// decode() maps ids to tokens (added tokens first; unknown ids skipped; special tokens skipped
// with skip_special_tokens) and runs "decoder": ByteLevel, ByteFallback, Metaspace, Replace, Fuse,
// Strip, Sequence; without a decoder tokens are joined with spaces.
// This covers Llama 2 / Mistral (SentencePiece-style BPE with byte fallback) and Llama 3 /
// Qwen2 / Qwen3 (byte-level BPE). Regexes run in PCRE2 after a check that they mean what they
// mean in Oniguruma (io/hf_regex.h).
//
// Any other component, option or regex construct is refused when loading with one FormatError
// naming the file, the JSON path and the component, e.g.
//   [hf_tokenizer] tokenizer.json: pre_tokenizer.pretokenizers[1].type 'Whitespace' is not
//   supported (supported: ByteLevel, Metaspace, Split, Sequence)
// so a tokenization is never silently different from the tokenizers library's.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"

namespace ac {

/// The BPE family, what a GGUF writer stores as tokenizer.ggml.model: "gpt2" for byte-level BPE
/// (Llama 3, Qwen2, Qwen3: a ByteLevel pre-tokenizer), "llama" for SentencePiece-style BPE
/// (Llama 2, Mistral: U+2581 for spaces, byte_fallback).
enum class HfModelKind { kByteLevelBpe, kSentencePieceBpe };

/// A token's role, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class HfTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,      // the model's unk_token
  kControl = 3,      // an added token with special = true (<s>, <|begin_of_text|>, ...)
  kUserDefined = 4,  // an added token with special = false
  kUnused = 5,       // an id no token has
  kByte = 6,         // "<0xNN>", SentencePiece-style BPE only
};

/// One entry of tokenizer.json "added_tokens" (the tokenizers library's AddedToken).
struct HfAddedToken {
  int64_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool single_word = false;  // matches only where no word character touches it
  bool normalized = false;   // matched on the normalized text (default: !special)
};

class HfTokenizer {
 public:
  /// Reads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json. A folder with only
  /// tokenizer.model (a SentencePiece protobuf) gets a FormatError that says so and asks for
  /// tokenizer.json. Throws FormatError on a missing or malformed file or an unsupported
  /// component.
  static HfTokenizer from_folder(const fs::path& dir);
  /// Reads the two files; `tokenizer_config` may be empty (no config).
  static HfTokenizer from_files(const fs::path& tokenizer_json, const fs::path& tokenizer_config);
  /// From parsed JSON; `config` may be null. `file` names errors (e.g. "tokenizer.json").
  static HfTokenizer from_json(const json& tokenizer, const json& config, const std::string& file);

  /// Text (UTF-8) -> ids. `add_special_tokens` runs the post-processor (BOS for Llama 2).
  /// Throws ConfigError when the text is not valid UTF-8. Thread-safe (encodes one at a time).
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const;
  /// Ids -> text. Ids outside the vocabulary are skipped, as in the tokenizers library.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const;
  /// The text after the normalizer alone (identity when there is none).
  std::string normalize(std::string_view text) const;

  /// Number of ids: the model's vocabulary and the added tokens (V).
  int64_t vocab_size() const;
  /// The token text of an id (added tokens' content; "" for an unused id). Throws ConfigError
  /// outside [0, vocab_size()).
  const std::string& token(int64_t id) const;
  /// The id of a token text (added tokens first), if any.
  std::optional<int64_t> token_to_id(std::string_view token) const;
  /// The role of an id (GGUF tokenizer.ggml.token_type).
  HfTokenType token_type(int64_t id) const;
  /// The BPE merges in rank order (GGUF tokenizer.ggml.merges joins each pair with a space).
  const std::vector<std::pair<std::string, std::string>>& merges() const;
  const std::vector<HfAddedToken>& added_tokens() const;
  HfModelKind kind() const;
  /// model.ignore_merges and model.byte_fallback of tokenizer.json (false when absent).
  bool ignore_merges() const;
  bool byte_fallback() const;
  /// tokenizer.json's "normalizer" and "pre_tokenizer" objects as read (null when absent), for
  /// writers that must name the pipeline in another format (GGUF's tokenizer.ggml.pre,
  /// io/gguf_vocab.h) and so compare it exactly.
  const json& normalizer_json() const;
  const json& pre_tokenizer_json() const;
  /// The file the tokenizer was read from (errors name it).
  const std::string& file() const;

  /// BOS / EOS / padding / unknown ids, -1 when the files name none. BOS and EOS come from
  /// tokenizer_config.json's bos_token / eos_token, BOS else from the post-processor's template.
  int64_t bos_id() const;
  int64_t eos_id() const;
  int64_t pad_id() const;
  int64_t unk_id() const;
  /// Whether a BOS / EOS is added: tokenizer_config.json's add_bos_token / add_eos_token when
  /// present, else whether the post-processor's template adds it. encode() itself always follows
  /// tokenizer.json's post-processor, as the tokenizers library does.
  bool add_bos() const;
  bool add_eos() const;
  /// tokenizer_config.json's chat_template (the "default" one of a list), "" when none.
  const std::string& chat_template() const;

  struct Impl;

 private:
  explicit HfTokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  static HfTokenizer from_json_checked(const json& tokenizer, const json& config,
                                       const std::string& file);
  std::shared_ptr<Impl> impl_;
};

}  // namespace ac
