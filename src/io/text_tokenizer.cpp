#include "io/text_tokenizer.h"

#include "common/error.h"
#include "io/hf_tokenizer.h"
#include "io/hf_unicode.h"
#include "io/tokenizer.h"

namespace ac {
namespace {

class Llama2cTextTokenizer final : public TextTokenizer {
 public:
  Llama2cTextTokenizer(Tokenizer t, fs::path file) : tok_(std::move(t)), file_(std::move(file)) {}

  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const override {
    // llama2.c's encoder takes bytes as they come; refuse what tokenizer.json refuses.
    const size_t bad = hf::find_invalid_utf8(text);
    if (bad != std::string_view::npos)
      throw ConfigError(msg("tokenizer", "text is not valid UTF-8 at byte {} (byte 0x{:02X})", bad,
                            uint8_t(text[bad])));
    return tok_.encode(std::string(text), /*bos=*/add_special_tokens);
  }

  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override {
    if (skip_special_tokens) return tok_.decode(ids);
    // Tokenizer::decode always drops BOS / EOS; here they stay, spelled as their pieces.
    std::string out;
    int64_t prev = tok_.bos_id();
    for (int64_t id : ids) {
      if (id == tok_.bos_id() || id == tok_.eos_id()) out += tok_.piece(id);
      else out += tok_.decode_piece(prev, id);
      prev = id;
    }
    return out;
  }

  int64_t vocab_size() const override { return tok_.vocab_size(); }
  std::optional<int64_t> bos_id() const override { return tok_.bos_id(); }
  std::optional<int64_t> eos_id() const override { return tok_.eos_id(); }
  bool adds_bos() const override { return true; }
  std::string token_bytes(int64_t id) const override {
    if (id < 0 || id >= tok_.vocab_size())
      throw ConfigError(msg("tokenizer", "token id {} is outside [0, {})", id, tok_.vocab_size()));
    if (id == tok_.bos_id() || id == tok_.eos_id()) return "";
    // decode_piece after a token that is not BOS: the piece as printed inside a text.
    return tok_.decode_piece(/*prev=*/tok_.eos_id() + 1, id);
  }
  bool adds_dummy_prefix() const override { return true; }
  std::string kind() const override { return "tokenizer.bin (llama2.c)"; }
  const fs::path& file() const override { return file_; }

 private:
  Tokenizer tok_;
  fs::path file_;
};

class HfTextTokenizer final : public TextTokenizer {
 public:
  HfTextTokenizer(HfTokenizer t, fs::path file) : tok_(std::move(t)), file_(std::move(file)) {}

  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const override {
    return tok_.encode(text, add_special_tokens);
  }
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override {
    return tok_.decode(ids, skip_special_tokens);
  }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  std::optional<int64_t> bos_id() const override { return optional_id(tok_.bos_id()); }
  std::optional<int64_t> eos_id() const override { return optional_id(tok_.eos_id()); }
  bool adds_bos() const override { return tok_.add_bos() && tok_.bos_id() >= 0; }
  std::string token_bytes(int64_t id) const override {
    if (id < 0 || id >= tok_.vocab_size())
      throw ConfigError(msg("tokenizer", "{}: token id {} is outside [0, {})", file_.string(), id,
                            tok_.vocab_size()));
    const std::string& t = tok_.token(id);
    switch (tok_.token_type(id)) {
      case HfTokenType::kControl:
      case HfTokenType::kUnused:
        return "";
      case HfTokenType::kUserDefined:  // added tokens are matched, and decoded, as their content
        return t;
      case HfTokenType::kByte:  // "<0xNN>"
        return std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16)));
      default:
        break;
    }
    std::string out;
    if (tok_.kind() == HfModelKind::kByteLevelBpe) {
      for (size_t i = 0; i < t.size();) {
        const int b = hf::unicode_to_byte(hf::next_code_point(t, i));
        if (b >= 0) out += char(b);  // a vocabulary entry outside the table has no bytes
      }
      return out;
    }
    static const std::string kMetaspace = "\xe2\x96\x81";  // U+2581
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, kMetaspace.size(), kMetaspace) == 0) {
        out += ' ';
        i += kMetaspace.size();
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  bool adds_dummy_prefix() const override { return tok_.kind() == HfModelKind::kSentencePieceBpe; }
  std::string kind() const override {
    return tok_.kind() == HfModelKind::kByteLevelBpe ? "tokenizer.json (byte-level BPE)"
                                                     : "tokenizer.json (SentencePiece-style BPE)";
  }
  const fs::path& file() const override { return file_; }

 private:
  static std::optional<int64_t> optional_id(int64_t id) {
    return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
  }

  HfTokenizer tok_;
  fs::path file_;
};

/// The tokenizer.json of `dir` after the check that its largest id fits config.json's vocab_size.
std::unique_ptr<TextTokenizer> load_hf(const fs::path& dir, int64_t vocab_size) {
  HfTokenizer tok = HfTokenizer::from_folder(dir);
  const fs::path file = dir / "tokenizer.json";
  if (tok.vocab_size() > vocab_size) {
    const int64_t largest = tok.vocab_size() - 1;
    throw FormatError(msg("load_tokenizer", "{}: the largest token id is {} ('{}') but config.json "
                          "has vocab_size {}: is this the model's tokenizer?", file.string(),
                          largest, tok.token(largest), vocab_size));
  }
  return make_text_tokenizer(std::move(tok), file);
}

}  // namespace

std::unique_ptr<TextTokenizer> make_text_tokenizer(Tokenizer tokenizer, fs::path file) {
  return std::make_unique<Llama2cTextTokenizer>(std::move(tokenizer), std::move(file));
}

std::unique_ptr<TextTokenizer> make_text_tokenizer(HfTokenizer tokenizer, fs::path file) {
  return std::make_unique<HfTextTokenizer>(std::move(tokenizer), std::move(file));
}

std::unique_ptr<TextTokenizer> load_tokenizer(const fs::path& model_dir, int64_t vocab_size) {
  const char* where = "load_tokenizer";
  if (vocab_size <= 0)
    throw ConfigError(msg(where, "{}: vocab_size must be positive (config.json), found {}",
                          model_dir.string(), vocab_size));
  if (fs::exists(model_dir / "tokenizer.json")) return load_hf(model_dir, vocab_size);
  const fs::path bin = model_dir / "tokenizer.bin";
  if (fs::exists(bin)) return make_text_tokenizer(Tokenizer::from_llama2c(bin, vocab_size), bin);
  // HfTokenizer::from_folder owns the error of a folder with only tokenizer.model: it asks for
  // tokenizer.json and says how transformers writes one.
  if (fs::exists(model_dir / "tokenizer.model")) return load_hf(model_dir, vocab_size);
  throw FormatError(msg(where, "{}: no tokenizer: looked for tokenizer.json (Hugging Face) and "
                        "tokenizer.bin (llama2.c)", model_dir.string()));
}

}  // namespace ac
