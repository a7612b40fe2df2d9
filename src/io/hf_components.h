// The components of a tokenizer.json pipeline (io/hf_tokenizer.h): normalizers, pre-tokenizers,
// post-processors and decoders, each built from its JSON object by a make_* function that refuses
// an unknown type or option with one FormatError naming the file and the JSON path.
// Semantics follow the tokenizers library's Rust sources (normalizers/, pre_tokenizers/,
// processors/, decoders/), named per class below.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_io.h"

namespace ac::hf {

/// Where a component sits: the file and the JSON path, for error messages.
struct JsonPath {
  const std::string& file;
  std::string path;
  JsonPath child(const std::string& key) const { return {file, path + "." + key}; }
  JsonPath index(size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
};

/// Throws the one FormatError of an unsupported component or option.
[[noreturn]] void unsupported(const JsonPath& at, const std::string& what,
                              const std::string& supported);

/// `j[key]` as a boolean / string / array, `fallback` when `j` has no such key or it is null.
/// Throws FormatError naming the file and the JSON path when `j` is not an object or the value
/// has another type (nlohmann's json::value() would throw its own type_error instead).
bool bool_field(const json& j, const char* key, bool fallback, const JsonPath& at);
std::string string_field(const json& j, const char* key, const std::string& fallback,
                         const JsonPath& at);
json array_or_empty(const json& j, const char* key, const JsonPath& at);

// ---- normalizers ----

/// A normalizer (tokenizers' Normalizer): rewrites the text of one section in place.
struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};
/// NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip, Sequence; null gives nullptr.
std::unique_ptr<Normalizer> make_normalizer(const json& j, const JsonPath& at);

// ---- pre-tokenizers ----

/// Pre-tokenized pieces: byte ranges of `text`. `first` marks a piece that starts at offset 0 of
/// the original input (Metaspace's prepend_scheme "first" looks at it).
struct Pieces {
  struct Piece {
    uint32_t begin, end;
    bool first;
  };
  std::string text;
  std::vector<Piece> pieces;
  void clear() { text.clear(), pieces.clear(); }
  void add(std::string_view s, bool first) {
    if (s.empty()) return;  // the tokenizers library drops empty splits
    pieces.push_back({uint32_t(text.size()), uint32_t(text.size() + s.size()), first});
    text.append(s);
  }
  std::string_view view(const Piece& p) const { return {text.data() + p.begin, p.end - p.begin}; }
};

/// A pre-tokenizer (tokenizers' PreTokenizer): `in` -> `out` (cleared first).
struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(const Pieces& in, Pieces& out) const = 0;
  /// True for ByteLevel (and a Sequence holding one): the model kind is byte-level BPE.
  virtual bool byte_level() const { return false; }
};
/// Split, ByteLevel, Metaspace, Sequence; null gives nullptr.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const JsonPath& at);

// ---- post-processors ----

/// What the post-processor adds around the ids of one sequence when add_special_tokens.
struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
};
/// TemplateProcessing ("single" template: special tokens around $A), ByteLevel (adds nothing),
/// Sequence, null.
PostProcessor make_post_processor(const json& j, const JsonPath& at);

// ---- decoders ----

/// A decoder (tokenizers' Decoder::decode_chain): rewrites the list of token strings.
struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
/// ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip, Sequence; null gives nullptr.
std::unique_ptr<Decoder> make_decoder(const json& j, const JsonPath& at);

}  // namespace ac::hf
