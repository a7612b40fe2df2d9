// One interface for every tokenizer a checkpoint folder can carry: text -> ids -> text, the
// vocabulary size V and the BOS / EOS conventions, whatever the file format.
//
//   tokenizer.json  Hugging Face's tokenizers serialization (io/hf_tokenizer.h): Llama 2 / 3,
//                   Mistral, Qwen2 / Qwen3 checkpoints;
//   tokenizer.bin   llama2.c's export (io/tokenizer.h): stories15M and `autocompress import
//                   llama2c` folders.
//
// load_tokenizer() picks the file: tokenizer.json first, else tokenizer.bin. A folder with only
// tokenizer.model (a SentencePiece protobuf, which is not read) gets an error asking for
// tokenizer.json. Either way the tokenizer's ids must fit the model's vocab_size (config.json).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"

namespace ac {

class Tokenizer;
class HfTokenizer;

/// A tokenizer of any supported format. Implementations are immutable after loading, so one
/// object may encode from several threads.
class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;

  /// UTF-8 text -> ids [N], each in [0, vocab_size()). `add_special_tokens` adds what the
  /// format adds to a whole text (tokenizer.json: its post-processor, e.g. Llama's BOS;
  /// tokenizer.bin: BOS). Throws ConfigError when `text` is not valid UTF-8.
  virtual std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  /// Ids -> UTF-8 text. `skip_special_tokens` drops BOS / EOS and the other control tokens.
  /// Throws ConfigError on an id outside [0, vocab_size()) (tokenizer.bin; tokenizer.json skips
  /// such ids, as the tokenizers library does).
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const = 0;

  /// Number of ids the tokenizer can produce or read (V); the largest id is vocab_size() - 1.
  virtual int64_t vocab_size() const = 0;
  /// The beginning / end-of-sequence ids, if the tokenizer names them.
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;
  /// Whether a text encoded on its own starts with BOS in this model's convention (tokenizer.json:
  /// tokenizer_config.json add_bos_token, else its post-processor; tokenizer.bin: always).
  /// Document framing (data/text_corpus.h) follows it.
  virtual bool adds_bos() const = 0;
  /// The bytes token `id` stands for in a decoded text, as if it were neither first nor next to
  /// a byte piece of the same character: a byte-level token's bytes (GPT-2 table undone), a
  /// SentencePiece piece with U+2581 as ' ', a byte-fallback token "<0xNN>" as its byte, an
  /// added token that is not special as its content; "" for BOS, EOS, other control tokens and
  /// unused ids. Bits per byte (eval/eval.h TokenBytes) count these. Throws ConfigError outside
  /// [0, vocab_size()).
  virtual std::string token_bytes(int64_t id) const = 0;
  /// Whether encode() puts SentencePiece's dummy-prefix space before a text, which decode()
  /// drops again at the start (tokenizer.bin; SentencePiece-style tokenizer.json). The first
  /// piece after BOS then carries one space that is not in the text.
  virtual bool adds_dummy_prefix() const = 0;
  /// A short description: "tokenizer.json (byte-level BPE)", "tokenizer.json
  /// (SentencePiece-style BPE)", "tokenizer.bin (llama2.c)".
  virtual std::string kind() const = 0;
  /// The file it was read from ("" when built in memory); errors name it.
  virtual const fs::path& file() const = 0;
};

/// Adapter over a llama2.c tokenizer.bin (io/tokenizer.h). BOS 1, EOS 2, adds_bos() true.
std::unique_ptr<TextTokenizer> make_text_tokenizer(Tokenizer tokenizer, fs::path file = {});
/// Adapter over a tokenizer.json (io/hf_tokenizer.h).
std::unique_ptr<TextTokenizer> make_text_tokenizer(HfTokenizer tokenizer, fs::path file = {});

/// The tokenizer of a checkpoint folder for a model of `vocab_size` ids (config.json
/// vocab_size, > 0): `model_dir`/tokenizer.json (with tokenizer_config.json when present), else
/// `model_dir`/tokenizer.bin. Throws FormatError when the folder has only tokenizer.model (with
/// the hint to write tokenizer.json with transformers' `tokenizer.save_pretrained`), when it has
/// none of the files (naming the folder and the files looked for), when a file is malformed,
/// or when the tokenizer has ids >= vocab_size (naming the file, the largest id and
/// config.json's vocab_size). Throws ConfigError when vocab_size <= 0.
std::unique_ptr<TextTokenizer> load_tokenizer(const fs::path& model_dir, int64_t vocab_size);

}  // namespace ac
