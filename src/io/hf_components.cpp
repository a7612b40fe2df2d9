#include "io/hf_components.h"

#include <algorithm>
#include <optional>

#include "common/error.h"
#include "io/hf_regex.h"
#include "io/hf_unicode.h"

namespace ac::hf {

void unsupported(const JsonPath& at, const std::string& what, const std::string& supported) {
  throw FormatError(msg("hf_tokenizer", "{}: {} {} is not supported (supported: {})", at.file,
                        at.path, what, supported));
}

namespace {

/// `j[key]` when present and not null, after checking that `j` is an object.
const json* field(const json& j, const char* key, const JsonPath& at) {
  if (!j.is_object())
    throw FormatError(msg("hf_tokenizer", "{}: {} is {}, expected an object", at.file, at.path,
                          j.dump()));
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const json& v, const char* key, const char* expected,
                             const JsonPath& at) {
  throw FormatError(msg("hf_tokenizer", "{}: {}.{} is {}, expected {}", at.file, at.path, key,
                        v.dump(), expected));
}

}  // namespace

bool bool_field(const json& j, const char* key, bool fallback, const JsonPath& at) {
  const json* v = field(j, key, at);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(*v, key, "true or false", at);
  return v->get<bool>();
}

std::string string_field(const json& j, const char* key, const std::string& fallback,
                         const JsonPath& at) {
  const json* v = field(j, key, at);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(*v, key, "a string", at);
  return v->get<std::string>();
}

json array_or_empty(const json& j, const char* key, const JsonPath& at) {
  const json* v = field(j, key, at);
  if (!v) return json::array();
  if (!v->is_array()) wrong_type(*v, key, "an array", at);
  return *v;
}

namespace {

using Range = std::pair<uint32_t, uint32_t>;

std::string type_of(const json& j, const JsonPath& at) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw FormatError(msg("hf_tokenizer", "{}: {} has no \"type\"", at.file, at.path));
  return j["type"].get<std::string>();
}

std::string get_string(const json& j, const char* key, const JsonPath& at,
                       std::optional<std::string> fallback = std::nullopt) {
  if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  if (fallback && (!j.contains(key) || j[key].is_null())) return *fallback;
  throw FormatError(msg("hf_tokenizer", "{}: {}.{} is missing or not a string", at.file, at.path,
                        key));
}

/// A Split / Replace pattern: {"String": s} (literal) or {"Regex": r} (Oniguruma).
class Pattern {
 public:
  Pattern(const json& j, const JsonPath& at) {
    if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
      regex_.emplace(j["Regex"].get<std::string>(), at.file + ": " + at.path + ".Regex");
    } else if (j.is_object() && j.contains("String") && j["String"].is_string()) {
      literal_ = j["String"].get<std::string>();
      if (literal_.empty()) unsupported(at.child("String"), "\"\" (an empty pattern)", "non-empty strings");
    } else {
      unsupported(at, j.dump(), "{\"String\": ...} or {\"Regex\": ...}");
    }
  }
  /// Appends every match of the pattern in `text` (the onig crate's find_iter order).
  void find_all(std::string_view text, std::vector<Range>& out) const {
    if (regex_) return regex_->find_all(text, out);
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size()))
      out.emplace_back(uint32_t(at), uint32_t(at + literal_.size()));
  }

 private:
  std::optional<Regex> regex_;
  std::string literal_;
};

/// Replaces every match of `pattern` in `text` by `content` (tokenizers' NormalizedString::replace).
std::string replace_all(const Pattern& pattern, std::string_view text, const std::string& content) {
  thread_local std::vector<Range> matches;
  matches.clear();
  pattern.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  uint32_t prev = 0;
  for (const auto& [b, e] : matches) {
    out.append(text.data() + prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(text.data() + prev, text.size() - prev);
  return out;
}

// ---- normalizers ----

struct NormalFormNormalizer : Normalizer {
  NormalForm form;
  explicit NormalFormNormalizer(NormalForm f) : form(f) {}
  void normalize(std::string& text) const override {
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (!ascii) text = unicode_normalize(text, form);
  }
};

struct PrependNormalizer : Normalizer {  // normalizers/prepend.rs: only a non-empty text
  std::string prepend;
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prepend);
  }
};

struct ReplaceNormalizer : Normalizer {  // normalizers/replace.rs
  Pattern pattern;
  std::string content;
  ReplaceNormalizer(const json& j, const JsonPath& at)
      : pattern(j.value("pattern", json()), at.child("pattern")),
        content(get_string(j, "content", at)) {}
  void normalize(std::string& text) const override { text = replace_all(pattern, text, content); }
};

/// Byte length of the whitespace (White_Space) that starts / ends `s`.
size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_white_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}
size_t trailing_space(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t j = start;
    if (!is_white_space(next_code_point(s, j))) break;
    end = start;
  }
  return s.size() - end;
}

struct StripNormalizer : Normalizer {  // normalizers/strip.rs Strip
  bool left, right;
  void normalize(std::string& text) const override {
    if (right) text.resize(text.size() - trailing_space(text));
    if (left) text.erase(0, leading_space(text));
  }
};

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> parts;
  void normalize(std::string& text) const override {
    for (const auto& p : parts) p->normalize(text);
  }
};

// ---- pre-tokenizers ----

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const json& j, const JsonPath& at) {
  const std::string b = j.is_string() ? j.get<std::string>() : j.dump();
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  unsupported(at, "'" + b + "'", "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

/// Splits `piece` at `matches` as NormalizedString::split does for `behavior` and adds the parts.
void split_piece(std::string_view piece, bool first, const std::vector<Range>& matches, bool invert,
                 Behavior behavior, Pieces& out) {
  struct Part {
    uint32_t b, e;
    bool match;
  };
  thread_local std::vector<Part> parts, merged;
  parts.clear();
  uint32_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != piece.size()) parts.push_back({prev, uint32_t(piece.size()), invert});
  merged.clear();
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Part& p : parts)
        if (!p.match) merged.push_back(p);
      break;
    case Behavior::kIsolated:
      merged = parts;
      break;
    case Behavior::kContiguous:
      for (const Part& p : parts) {
        if (p.match == previous_match && !merged.empty()) merged.back().e = p.e;
        else merged.push_back(p);
        previous_match = p.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.match && !previous_match && !merged.empty()) merged.back().e = p.e;
        else merged.push_back(p);
        previous_match = p.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = parts.size(); k-- > 0;) {
        const Part& p = parts[k];
        if (p.match && !previous_match && !merged.empty()) merged.back().b = p.b;
        else merged.push_back(p);
        previous_match = p.match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
  }
  for (const Part& p : merged) out.add(piece.substr(p.b, p.e - p.b), first && p.b == 0);
}

struct SplitPreTokenizer : PreTokenizer {  // pre_tokenizers/split.rs
  Pattern pattern;
  Behavior behavior;
  bool invert;
  SplitPreTokenizer(const json& j, const JsonPath& at)
      : pattern(j.value("pattern", json()), at.child("pattern")),
        behavior(parse_behavior(j.value("behavior", json()), at.child("behavior"))),
        invert(bool_field(j, "invert", false, at)) {}
  void pre_tokenize(const Pieces& in, Pieces& out) const override {
    out.clear();
    thread_local std::vector<Range> matches;
    for (const auto& p : in.pieces) {
      matches.clear();
      pattern.find_all(in.view(p), matches);
      split_piece(in.view(p), p.first, matches, invert, behavior, out);
    }
  }
};

const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct ByteLevelPreTokenizer : PreTokenizer {  // pre_tokenizers/byte_level.rs
  bool add_prefix_space, use_regex;
  std::optional<Regex> regex;
  ByteLevelPreTokenizer(const json& j, const JsonPath& at)
      : add_prefix_space(bool_field(j, "add_prefix_space", true, at)),
        use_regex(bool_field(j, "use_regex", true, at)) {
    if (use_regex) regex.emplace(kGpt2Pattern, at.file + ": " + at.path + " (GPT-2 pattern)");
  }
  bool byte_level() const override { return true; }
  void pre_tokenize(const Pieces& in, Pieces& out) const override {
    out.clear();
    const auto& table = byte_to_unicode();
    thread_local std::vector<Range> matches;
    thread_local std::string prefixed;
    for (const auto& p : in.pieces) {
      std::string_view s = in.view(p);
      if (add_prefix_space && s[0] != ' ') {
        prefixed.assign(1, ' ');
        prefixed.append(s);
        s = prefixed;
      }
      matches.clear();
      if (use_regex) regex->find_all(s, matches);
      else matches.emplace_back(0, uint32_t(s.size()));
      uint32_t prev = 0;
      auto emit = [&](uint32_t b, uint32_t e) {
        const uint32_t begin = uint32_t(out.text.size());
        for (uint32_t k = b; k < e; ++k) out.text += table[static_cast<unsigned char>(s[k])];
        out.pieces.push_back({begin, uint32_t(out.text.size()), p.first && b == 0});
      };
      for (const auto& [b, e] : matches) {  // Isolated: gaps and matches are pieces
        if (prev < b) emit(prev, b);
        if (b < e) emit(b, e);
        prev = e;
      }
      if (prev < s.size()) emit(prev, uint32_t(s.size()));
    }
  }
};

enum class PrependScheme { kAlways, kFirst, kNever };

/// Metaspace's replacement and prepend scheme (prepend_scheme, or the older add_prefix_space).
struct MetaspaceConfig {
  std::string replacement;
  PrependScheme scheme = PrependScheme::kAlways;
  MetaspaceConfig(const json& j, const JsonPath& at) : replacement(get_string(j, "replacement", at, "\u2581")) {
    size_t n = 0;
    if (replacement.empty() || (next_code_point(replacement, n), n != replacement.size()))
      unsupported(at.child("replacement"), "'" + replacement + "'", "one character");
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const std::string s = get_string(j, "prepend_scheme", at);
      if (s == "always") scheme = PrependScheme::kAlways;
      else if (s == "first") scheme = PrependScheme::kFirst;
      else if (s == "never") scheme = PrependScheme::kNever;
      else unsupported(at.child("prepend_scheme"), "'" + s + "'", "always, first, never");
    } else if (!bool_field(j, "add_prefix_space", true, at)) {
      scheme = PrependScheme::kNever;
    }
  }
};

struct MetaspacePreTokenizer : PreTokenizer {  // pre_tokenizers/metaspace.rs
  MetaspaceConfig config;
  bool split;
  MetaspacePreTokenizer(const json& j, const JsonPath& at) : config(j, at), split(bool_field(j, "split", true, at)) {}
  void pre_tokenize(const Pieces& in, Pieces& out) const override {
    out.clear();
    thread_local std::string s;
    thread_local std::vector<Range> matches;
    const std::string& rep = config.replacement;
    for (const auto& p : in.pieces) {
      s.clear();
      for (char c : in.view(p)) {
        if (c == ' ') s.append(rep);
        else s.push_back(c);
      }
      const bool prepend = s.compare(0, rep.size(), rep) != 0 &&
                           (config.scheme == PrependScheme::kAlways ||
                            (config.scheme == PrependScheme::kFirst && p.first));
      if (prepend) s.insert(0, rep);
      if (!split) {
        out.add(s, p.first);
        continue;
      }
      matches.clear();
      for (size_t at = s.find(rep); at != std::string::npos; at = s.find(rep, at + rep.size()))
        matches.emplace_back(uint32_t(at), uint32_t(at + rep.size()));
      split_piece(s, p.first, matches, /*invert=*/false, Behavior::kMergedWithNext, out);
    }
  }
};

struct SequencePreTokenizer : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  bool byte_level() const override {
    for (const auto& p : parts)
      if (p->byte_level()) return true;
    return false;
  }
  void pre_tokenize(const Pieces& in, Pieces& out) const override {
    thread_local Pieces a, b;
    const Pieces* cur = &in;
    for (size_t k = 0; k < parts.size(); ++k) {
      Pieces& dst = k + 1 == parts.size() ? out : (cur == &a ? b : a);
      parts[k]->pre_tokenize(*cur, dst);
      cur = &dst;
    }
    if (parts.empty()) out = in;
  }
};

// ---- decoders ----

struct ByteLevelDecoder : Decoder {  // decoders/byte_level.rs: all tokens -> bytes -> lossy UTF-8
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        const int b = unicode_to_byte(next_code_point(t, i));
        if (b < 0) all = false;
        else bytes += char(b);
      }
      if (!all) bytes.replace(mark, std::string::npos, t);  // a token outside the table: as is
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

struct ByteFallbackDecoder : Decoder {  // decoders/byte_fallback.rs
  static int byte_of(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (find_invalid_utf8(bytes) == std::string::npos) out.push_back(bytes);
      else  // one U+FFFD per byte, as the Rust decoder does
        for (size_t k = 0; k < bytes.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      bytes.clear();
    };
    for (std::string& t : tokens) {
      const int b = byte_of(t);
      if (b >= 0) {
        bytes += char(b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

struct MetaspaceDecoder : Decoder {  // decoders: pre_tokenizers/metaspace.rs decode_chain
  MetaspaceConfig config;
  MetaspaceDecoder(const json& j, const JsonPath& at) : config(j, at) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    const std::string& rep = config.replacement;
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, rep.size(), rep) == 0) {
          if (!(i == 0 && config.scheme != PrependScheme::kNever)) out += ' ';
          k += rep.size();
        } else {
          out += t[k++];
        }
      }
      tokens[i] = std::move(out);
    }
  }
};

struct ReplaceDecoder : Decoder {  // normalizers/replace.rs as a decoder
  Pattern pattern;
  std::string content;
  ReplaceDecoder(const json& j, const JsonPath& at)
      : pattern(j.value("pattern", json()), at.child("pattern")),
        content(get_string(j, "content", at)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = replace_all(pattern, t, content);
  }
};

struct FuseDecoder : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

struct StripDecoder : Decoder {  // decoders/strip.rs: up to `start` / `stop` copies of a char
  std::string content;
  size_t start, stop;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start && t.compare(b, content.size(), content) == 0; ++k)
        b += content.size();
      for (size_t k = 0; k < stop && e >= b + content.size() &&
                         t.compare(e - content.size(), content.size(), content) == 0; ++k)
        e -= content.size();
      t = t.substr(b, e - b);
    }
  }
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> parts;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts) p->decode_chain(tokens);
  }
};

const json& array_field(const json& j, const char* key, const JsonPath& at) {
  if (!j.contains(key) || !j[key].is_array())
    throw FormatError(msg("hf_tokenizer", "{}: {}.{} is missing or not an array", at.file, at.path,
                          key));
  return j[key];
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, at);
  if (type == "NFC") return std::make_unique<NormalFormNormalizer>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<NormalFormNormalizer>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<NormalFormNormalizer>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<NormalFormNormalizer>(NormalForm::kNFKD);
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prepend = get_string(j, "prepend", at);
    return n;
  }
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(j, at);
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = bool_field(j, "strip_left", true, at);
    n->right = bool_field(j, "strip_right", true, at);
    return n;
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    const json& parts = array_field(j, "normalizers", at);
    for (size_t i = 0; i < parts.size(); ++i)
      if (auto p = make_normalizer(parts[i], at.child("normalizers").index(i)))
        n->parts.push_back(std::move(p));
    return n;
  }
  unsupported(at.child("type"), "'" + type + "'", "NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip, Sequence");
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, at);
  if (type == "Split") return std::make_unique<SplitPreTokenizer>(j, at);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPreTokenizer>(j, at);
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(j, at);
  if (type == "Sequence") {
    auto s = std::make_unique<SequencePreTokenizer>();
    const json& parts = array_field(j, "pretokenizers", at);
    for (size_t i = 0; i < parts.size(); ++i) {
      auto p = make_pre_tokenizer(parts[i], at.child("pretokenizers").index(i));
      if (auto* inner = dynamic_cast<SequencePreTokenizer*>(p.get()))  // flattened: one level
        for (auto& q : inner->parts) s->parts.push_back(std::move(q));
      else if (p)
        s->parts.push_back(std::move(p));
    }
    return s;
  }
  unsupported(at.child("type"), "'" + type + "'", "ByteLevel, Metaspace, Split, Sequence");
}

namespace {

/// TemplateProcessing's "single" template: [SpecialToken...] {Sequence A} [SpecialToken...].
void add_template(const json& j, const JsonPath& at, PostProcessor& pp) {
  const json& single = array_field(j, "single", at);
  const json specials = j.value("special_tokens", json::object());
  std::vector<int32_t> before, after;
  bool seen_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& item = single[i];
    const JsonPath here = at.child("single").index(i);
    if (item.contains("Sequence")) {
      if (string_field(item["Sequence"], "id", "", here.child("Sequence")) != "A" || seen_a)
        unsupported(here, item.dump(), "one {\"Sequence\": {\"id\": \"A\"}} in \"single\"");
      seen_a = true;
    } else if (item.contains("SpecialToken")) {
      const std::string name = string_field(item["SpecialToken"], "id", "", here.child("SpecialToken"));
      if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        throw FormatError(msg("hf_tokenizer", "{}: {} names special token '{}' that {}.special_tokens "
                              "does not define", at.file, here.path, name, at.path));
      for (const json& id : specials[name]["ids"]) {
        if (!json_holds<int32_t>(id))
          throw FormatError(msg("hf_tokenizer", "{}: {}.special_tokens['{}'].ids holds {}", at.file,
                                at.path, name, id.dump()));
        (seen_a ? after : before).push_back(id.get<int32_t>());
      }
    } else {
      unsupported(here, item.dump(), "SpecialToken, Sequence");
    }
  }
  if (!seen_a) unsupported(at.child("single"), "without {\"Sequence\": {\"id\": \"A\"}}", "templates with $A");
  pp.prefix.insert(pp.prefix.begin(), before.begin(), before.end());
  pp.suffix.insert(pp.suffix.end(), after.begin(), after.end());
}

void add_post_processor(const json& j, const JsonPath& at, PostProcessor& pp) {
  if (j.is_null()) return;
  const std::string type = type_of(j, at);
  if (type == "ByteLevel") return;  // offsets only: no ids added
  if (type == "TemplateProcessing") return add_template(j, at, pp);
  if (type == "Sequence") {
    const json& parts = array_field(j, "processors", at);
    for (size_t i = 0; i < parts.size(); ++i)
      add_post_processor(parts[i], at.child("processors").index(i), pp);
    return;
  }
  unsupported(at.child("type"), "'" + type + "'", "ByteLevel, TemplateProcessing, Sequence");
}

}  // namespace

PostProcessor make_post_processor(const json& j, const JsonPath& at) {
  PostProcessor pp;
  add_post_processor(j, at, pp);
  return pp;
}

std::unique_ptr<Decoder> make_decoder(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, at);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j, at);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j, at);
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = get_string(j, "content", at);
    if (!json_holds<int64_t>(j.value("start", json(0))) || !json_holds<int64_t>(j.value("stop", json(0))))
      throw FormatError(msg("hf_tokenizer", "{}: {}.start / .stop must be integers", at.file, at.path));
    d->start = size_t(std::max<int64_t>(0, j.value("start", int64_t(0))));
    d->stop = size_t(std::max<int64_t>(0, j.value("stop", int64_t(0))));
    return d;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<SequenceDecoder>();
    const json& parts = array_field(j, "decoders", at);
    for (size_t i = 0; i < parts.size(); ++i)
      if (auto p = make_decoder(parts[i], at.child("decoders").index(i)))
        s->parts.push_back(std::move(p));
    return s;
  }
  unsupported(at.child("type"), "'" + type + "'",
              "ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip, Sequence");
}

}  // namespace ac::hf
