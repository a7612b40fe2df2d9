#include "io/gguf_vocab.h"

#include <fmt/format.h>

#include <unordered_map>

#include "common/error.h"
#include "common/json_io.h"
#include "io/hf_tokenizer.h"
#include "io/tokenizer.h"

namespace ac {

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

/// A byte-level pre-tokenizer llama.cpp implements, by its tokenizer.ggml.pre name. `regex` is
/// the Split regex of the model's tokenizer.json, quoted in llama-vocab.cpp llm_tokenizer_bpe
/// as "original regex from tokenizer.json"; llama.cpp sets ignore_merges for the pre type in
/// llama_vocab::impl::load.
struct BytePre {
  const char* name;
  const char* models;
  const char* regex;
  bool ignore_merges;
  bool nfc_allowed;  // Qwen2/3 ship an NFC normalizer that llama.cpp does not run
};
const BytePre kBytePres[] = {
    {"llama-bpe", "Llama 3",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     /*ignore_merges=*/true, /*nfc_allowed=*/false},
    {"qwen2", "Qwen2, Qwen3",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     /*ignore_merges=*/false, /*nfc_allowed=*/true},
};

std::string known_pres() {
  std::string s;
  for (const BytePre& p : kBytePres)
    s += fmt::format("{}'{}' ({})", s.empty() ? "" : ", ", p.name, p.models);
  return s;
}

/// j[key] when it is a string, else "" (the tokenizer loaded already, so the fields are checked;
/// an absent or null one reads as its default here).
std::string str_or_empty(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
bool flag_or(const json& j, const char* key, bool fallback) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

/// The Split regex of Sequence[Split(Regex, Isolated), ByteLevel(no prefix space, no regex)],
/// the only byte-level shape llama.cpp's BPE pre-tokenizers have; "" for any other shape.
std::string byte_level_split_regex(const json& pre) {
  if (!pre.is_object() || str_or_empty(pre, "type") != "Sequence") return "";
  const json list = pre.contains("pretokenizers") && pre["pretokenizers"].is_array() ? pre["pretokenizers"] : json::array();
  if (list.size() != 2) return "";
  const json& split = list[0];
  const json& bl = list[1];
  if (!split.is_object() || !bl.is_object()) return "";
  if (str_or_empty(split, "type") != "Split" || str_or_empty(split, "behavior") != "Isolated" ||
      flag_or(split, "invert", false) || !split.contains("pattern") ||
      !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
    return "";
  if (str_or_empty(bl, "type") != "ByteLevel" || flag_or(bl, "add_prefix_space", true) ||
      flag_or(bl, "use_regex", true))
    return "";
  return split["pattern"]["Regex"].get<std::string>();
}

/// tokenizer.ggml.pre of a byte-level tokenizer.json, or ConfigError.
std::string byte_level_pre(const HfTokenizer& tok) {
  const std::string regex = byte_level_split_regex(tok.pre_tokenizer_json());
  const BytePre* found = nullptr;
  for (const BytePre& p : kBytePres)
    if (regex == p.regex) found = &p;
  if (!found)
    throw ConfigError(msg("export gguf", "{}: pre_tokenizer {} is not one llama.cpp implements: "
                          "GGUF's tokenizer.ggml.pre is written for Split(regex, Isolated) + "
                          "ByteLevel(add_prefix_space false, use_regex false) with the regex of "
                          "llama.cpp's {}; llama.cpp would split this text differently",
                          tok.file(), tok.pre_tokenizer_json().dump(), known_pres()));
  if (tok.ignore_merges() != found->ignore_merges)
    throw ConfigError(msg("export gguf", "{}: model.ignore_merges is {} but llama.cpp's '{}' "
                          "pre-tokenizer runs with ignore_merges {}: words in the vocabulary "
                          "would tokenize differently", tok.file(), tok.ignore_merges(),
                          found->name, found->ignore_merges));
  const json& norm = tok.normalizer_json();
  const bool nfc = norm.is_object() && str_or_empty(norm, "type") == "NFC";
  if (!norm.is_null() && !(nfc && found->nfc_allowed))
    throw ConfigError(msg("export gguf", "{}: normalizer {} with pre-tokenizer '{}': llama.cpp "
                          "runs no normalizer there{}", tok.file(), norm.dump(), found->name,
                          found->nfc_allowed ? " (NFC is accepted: it is what Qwen2/3 ship)" : ""));
  if (tok.byte_fallback())
    throw ConfigError(msg("export gguf", "{}: model.byte_fallback with a byte-level pre-tokenizer: "
                          "llama.cpp's BPE tokenizer has no byte fallback", tok.file()));
  return found->name;
}

/// Checks that llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm_session) runs the same
/// pipeline: a ▁ before the text and after each special token, every ' ' as ▁, one word,
/// unknown characters as their "<0xNN>" bytes.
void check_sentencepiece_pipeline(const HfTokenizer& tok) {
  const json& norm = tok.normalizer_json();
  const json& pre = tok.pre_tokenizer_json();
  const json legacy = json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
  const bool prepend_replace = norm == legacy && pre.is_null();
  const bool metaspace = norm.is_null() && pre.is_object() &&
                         str_or_empty(pre, "type") == "Metaspace" && str_or_empty(pre, "replacement") == kSpace && !flag_or(pre, "split", true) &&
                         (str_or_empty(pre, "prepend_scheme") == "always" ||
                          str_or_empty(pre, "prepend_scheme") == "first");
  if (!prepend_replace && !metaspace)
    throw ConfigError(msg("export gguf", "{}: normalizer {} and pre_tokenizer {}: llama.cpp's "
                          "SentencePiece tokenizer (tokenizer.ggml.model 'llama') reproduces "
                          "normalizers Prepend('\u2581') + Replace(' ', '\u2581') without a "
                          "pre-tokenizer, or Metaspace('\u2581', prepend_scheme always/first, "
                          "split false) without a normalizer", tok.file(), norm.dump(),
                          pre.dump()));
  if (!tok.byte_fallback())
    throw ConfigError(msg("export gguf", "{}: model.byte_fallback is false: llama.cpp's "
                          "SentencePiece tokenizer writes unknown characters as <0xNN> byte "
                          "tokens, this tokenizer as its unk_token", tok.file()));
}

/// Scores that make llama.cpp's SentencePiece merge loop apply the BPE merges in rank order:
/// the token made by the merge of rank r scores -r (its lowest r); the others -(merges).
std::vector<float> merge_rank_scores(const HfTokenizer& tok, int64_t V) {
  const auto& merges = tok.merges();
  std::vector<float> scores(size_t(V), -float(merges.size()));
  for (size_t r = merges.size(); r-- > 0;) {  // descending, so the lowest rank is written last
    const auto id = tok.token_to_id(merges[r].first + merges[r].second);
    if (id && *id < V) scores[size_t(*id)] = -float(r);
  }
  return scores;
}

}  // namespace

GgufVocab vocab_from_tokenizer(const Tokenizer& tok) {
  GgufVocab v;
  v.bos_id = tok.bos_id();
  v.eos_id = tok.eos_id();
  v.unk_id = tok.unk_id();
  for (int64_t id = 0; id < tok.vocab_size(); ++id) {
    uint8_t byte = 0;
    std::string text;
    GgufTokenType type = GgufTokenType::NORMAL;
    if (id == v.unk_id) {
      text = "<unk>", type = GgufTokenType::UNKNOWN;
    } else if (id == v.bos_id) {
      text = "<s>", type = GgufTokenType::CONTROL;
    } else if (id == v.eos_id) {
      text = "</s>", type = GgufTokenType::CONTROL;
    } else if (tok.is_byte_token(id, &byte)) {
      text = fmt::format("<0x{:02X}>", byte), type = GgufTokenType::BYTE;
    } else {
      text = replace_all(tok.piece(id), " ", kSpace);
    }
    v.tokens.push_back(text);
    v.scores.push_back(tok.score(id));
    v.types.push_back(int64_t(type));
  }
  return v;
}

GgufVocab vocab_from_hf_tokenizer(const HfTokenizer& tok, int64_t vocab_size) {
  if (tok.vocab_size() > vocab_size)
    throw FormatError(msg("export gguf", "{}: the tokenizer has ids up to {} but config.json's "
                          "vocab_size is {}", tok.file(), tok.vocab_size() - 1, vocab_size));
  GgufVocab v;
  const bool byte_level = tok.kind() == HfModelKind::kByteLevelBpe;
  if (byte_level) {
    v.model = "gpt2";
    v.pre = byte_level_pre(tok);
    for (const auto& [a, b] : tok.merges()) v.merges.push_back(a + " " + b);
  } else {
    check_sentencepiece_pipeline(tok);
    v.model = "llama";
    v.pre = "default";  // TextModel._set_vocab_llama_hf
    v.scores = merge_rank_scores(tok, vocab_size);
  }
  std::unordered_map<std::string, int64_t> seen;
  for (int64_t id = 0; id < vocab_size; ++id) {
    const bool has = id < tok.vocab_size() && tok.token_type(id) != HfTokenType::kUnused;
    v.tokens.push_back(has ? tok.token(id) : fmt::format("[PAD{}]", id));
    v.types.push_back(has ? int64_t(tok.token_type(id)) : int64_t(GgufTokenType::UNUSED));
    const auto [it, fresh] = seen.emplace(v.tokens.back(), id);
    if (!fresh)  // llama.cpp maps each text to one id (llama_vocab::impl::load asserts it)
      throw ConfigError(msg("export gguf", "{}: ids {} and {} both have the text '{}'", tok.file(),
                            it->second, id, v.tokens.back()));
  }
  v.bos_id = tok.bos_id();
  v.eos_id = tok.eos_id();
  v.unk_id = tok.unk_id();
  v.pad_id = tok.pad_id();
  v.add_bos = tok.add_bos();
  v.add_eos = tok.add_eos();
  v.chat_template = tok.chat_template();
  return v;
}

GgufVocab vocab_from_checkpoint(const fs::path& dir, int64_t vocab_size) {
  if (fs::exists(dir / "tokenizer.json"))
    return vocab_from_hf_tokenizer(HfTokenizer::from_folder(dir), vocab_size);
  if (fs::exists(dir / "tokenizer.bin"))
    return vocab_from_tokenizer(Tokenizer::from_llama2c(dir / "tokenizer.bin", vocab_size));
  throw ConfigError(msg("export gguf", "{}: no tokenizer.json or tokenizer.bin: the GGUF must "
                        "carry the tokenizer; provide the checkpoint's tokenizer.json (Hugging "
                        "Face; transformers' tokenizer.save_pretrained writes it{}) or llama2.c's "
                        "tokenizer.bin", dir.string(),
                        fs::exists(dir / "tokenizer.model") ? "; tokenizer.model is not read"
                                                            : ""));
}

}  // namespace ac
