#include "io/hf_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <mutex>

#include "common/error.h"
#include "io/hf_bpe.h"
#include "io/hf_components.h"
#include "io/hf_unicode.h"

namespace ac {

using hf::JsonPath;

namespace {

/// Leftmost-longest matcher of the added tokens' contents (the aho-corasick automaton with
/// MatchKind::LeftmostLongest of the tokenizers library's AddedVocabulary, as a byte trie).
class AddedTrie {
 public:
  struct Match {
    uint32_t begin, end;
    int32_t token;  // index into added_tokens
  };
  void add(std::string_view s, int32_t token) {
    if (s.empty()) return;
    first_byte_[static_cast<unsigned char>(s[0])] = true;
    int32_t node = 0;
    for (char c : s) {
      const int32_t next = child(node, static_cast<unsigned char>(c));
      if (next >= 0) {
        node = next;
        continue;
      }
      nodes_[size_t(node)].next.emplace_back(static_cast<unsigned char>(c), int32_t(nodes_.size()));
      node = int32_t(nodes_.size());
      nodes_.emplace_back();
    }
    if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = token;
  }
  bool empty() const { return nodes_.size() == 1; }
  /// Non-overlapping matches, left to right, the longest at each start.
  void find_all(std::string_view text, std::vector<Match>& out) const {
    for (size_t i = 0; i < text.size();) {
      if (!first_byte_[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      int32_t node = 0, best = -1;
      size_t best_end = 0;
      for (size_t j = i; j < text.size(); ++j) {
        node = child(node, static_cast<unsigned char>(text[j]));
        if (node < 0) break;
        if (nodes_[size_t(node)].token >= 0) best = nodes_[size_t(node)].token, best_end = j + 1;
      }
      if (best < 0) {
        ++i;
        continue;
      }
      out.push_back({uint32_t(i), uint32_t(best_end), best});
      i = best_end;
    }
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;
    int32_t token = -1;
  };
  int32_t child(int32_t node, unsigned char c) const {
    for (const auto& [b, n] : nodes_[size_t(node)].next)
      if (b == c) return n;
    return -1;
  }
  std::vector<Node> nodes_{1};
  bool first_byte_[256] = {};
};

/// Rust regex's \w (Alphabetic, marks, decimal numbers, connector punctuation), for single_word.
bool is_word_char(uint32_t cp) {
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return cp == 0x200C || cp == 0x200D;
  }
}

uint32_t last_code_point(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return hf::next_code_point(s, start);
}

/// A section of the text: plain text to normalize and pre-tokenize, or one added token.
struct Section {
  uint32_t begin, end;
  int32_t token;  // index into added_tokens, -1 for plain text
};

/// Encode-time buffers, reused across calls (guarded by Impl::mutex).
struct EncodeState {
  hf::WordCache cache;
  hf::BpeModel::Scratch scratch;
  hf::Pieces pieces, pre_tokenized;
  std::vector<AddedTrie::Match> matches;
  std::vector<Section> sections, subsections;
  std::string normalized;
  std::vector<int32_t> ids;
};

std::string config_token(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

}  // namespace

struct HfTokenizer::Impl {
  std::string file;
  json normalizer_json, pre_tokenizer_json;
  hf::BpeModel model;
  std::unique_ptr<hf::Normalizer> normalizer;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer;
  hf::PostProcessor post;
  std::unique_ptr<hf::Decoder> decoder;
  std::vector<HfAddedToken> added;
  std::vector<int32_t> added_of_id;  // id -> index into added, -1
  AddedTrie raw_trie, normalized_trie;
  std::vector<std::string> vocab;  // id -> token text, added tokens included
  HfModelKind kind = HfModelKind::kSentencePieceBpe;
  int64_t bos = -1, eos = -1, pad = -1, unk = -1;
  bool add_bos = false, add_eos = false;
  std::string chat_template;
  mutable std::mutex mutex;
  mutable EncodeState state;

  void split_added(std::string_view text, const AddedTrie& trie, std::vector<Section>& out) const;
  void encode_plain(std::string_view text, bool first, EncodeState& st) const;
  void model_pieces(const hf::Pieces& pieces, EncodeState& st) const;
};

// ---- encode ----

/// AddedVocabulary::find_matches: the trie's matches with single_word, lstrip and rstrip applied.
void HfTokenizer::Impl::split_added(std::string_view text, const AddedTrie& trie,
                                    std::vector<Section>& out) const {
  out.clear();
  thread_local std::vector<AddedTrie::Match> matches;
  matches.clear();
  trie.find_all(text, matches);
  uint32_t start_offset = 0;
  for (const auto& m : matches) {
    const HfAddedToken& t = added[size_t(m.token)];
    uint32_t start = m.begin, stop = m.end;
    if (start < start_offset) continue;  // swallowed by the previous token's rstrip
    if (t.single_word) {
      const bool word_before = start > 0 && is_word_char(last_code_point(text.substr(0, start)));
      size_t k = stop;
      const bool word_after = stop < text.size() && is_word_char(hf::next_code_point(text, k));
      if (word_before || word_after) continue;
    }
    if (t.lstrip) {
      while (start > start_offset) {
        size_t prev = start - 1;
        while (prev > 0 && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) --prev;
        size_t k = prev;
        if (!hf::is_white_space(hf::next_code_point(text, k))) break;
        start = uint32_t(prev);
      }
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t k = stop;
        if (!hf::is_white_space(hf::next_code_point(text, k))) break;
        stop = uint32_t(k);
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, m.token});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, uint32_t(text.size()), -1});
}

void HfTokenizer::Impl::model_pieces(const hf::Pieces& pieces, EncodeState& st) const {
  for (const auto& p : pieces.pieces) model.tokenize(pieces.view(p), st.ids, st.scratch, st.cache);
}

/// One section without raw added tokens: normalize, split normalized added tokens, pre-tokenize,
/// run the model.
void HfTokenizer::Impl::encode_plain(std::string_view text, bool first, EncodeState& st) const {
  std::string_view s = text;
  if (normalizer) {
    st.normalized.assign(text);
    normalizer->normalize(st.normalized);
    s = st.normalized;
  }
  if (s.empty()) return;
  if (normalized_trie.empty()) {
    st.subsections.assign(1, {0, uint32_t(s.size()), -1});
  } else {
    split_added(s, normalized_trie, st.subsections);
  }
  for (const Section& sub : st.subsections) {
    if (sub.token >= 0) {
      st.ids.push_back(int32_t(added[size_t(sub.token)].id));
      continue;
    }
    st.pieces.clear();
    st.pieces.add(s.substr(sub.begin, sub.end - sub.begin), first && sub.begin == 0);
    if (pre_tokenizer) {
      pre_tokenizer->pre_tokenize(st.pieces, st.pre_tokenized);
      model_pieces(st.pre_tokenized, st);
    } else {
      model_pieces(st.pieces, st);
    }
  }
}

std::vector<int64_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = hf::find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    throw ConfigError(msg("hf_tokenizer", "encode: the text is not valid UTF-8 at byte {} of {}",
                          bad, text.size()));
  if (text.size() >= (size_t(1) << 31))
    throw ConfigError(msg("hf_tokenizer", "encode: {} bytes of text in one call; split it (at most "
                          "2 GiB)", text.size()));
  const Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mutex);
  EncodeState& st = im.state;
  st.ids.clear();
  if (add_special_tokens) st.ids.assign(im.post.prefix.begin(), im.post.prefix.end());
  im.split_added(text, im.raw_trie, st.sections);
  for (const Section& sec : st.sections) {
    if (sec.token >= 0) st.ids.push_back(int32_t(im.added[size_t(sec.token)].id));
    else im.encode_plain(text.substr(sec.begin, sec.end - sec.begin), sec.begin == 0, st);
  }
  if (add_special_tokens) st.ids.insert(st.ids.end(), im.post.suffix.begin(), im.post.suffix.end());
  return std::vector<int64_t>(st.ids.begin(), st.ids.end());
}

std::string HfTokenizer::normalize(std::string_view text) const {
  std::string s(text);
  if (impl_->normalizer) impl_->normalizer->normalize(s);
  return s;
}

// ---- decode ----

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= int64_t(im.vocab.size())) continue;
    const int32_t a = im.added_of_id[size_t(id)];
    if (a >= 0 && skip_special_tokens && im.added[size_t(a)].special) continue;
    if (a < 0 && im.vocab[size_t(id)].empty()) continue;  // an id no token has
    tokens.push_back(im.vocab[size_t(id)]);
  }
  if (!im.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  im.decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

// ---- loading ----

namespace {

HfAddedToken parse_added_token(const json& j, const JsonPath& at) {
  if (!j.is_object() || !j.contains("id") || !json_holds<int32_t>(j["id"]) || j["id"].get<int32_t>() < 0 ||
      !j.contains("content") || !j["content"].is_string() || j["content"].get<std::string>().empty())
    throw FormatError(msg("hf_tokenizer", "{}: {} needs a non-negative \"id\" and a non-empty "
                          "\"content\", found {}", at.file, at.path, j.dump()));
  HfAddedToken t;
  t.id = j["id"].get<int32_t>();
  t.content = j["content"].get<std::string>();
  t.special = hf::bool_field(j, "special", false, at);
  t.lstrip = hf::bool_field(j, "lstrip", false, at);
  t.rstrip = hf::bool_field(j, "rstrip", false, at);
  t.single_word = hf::bool_field(j, "single_word", false, at);
  t.normalized = hf::bool_field(j, "normalized", !t.special, at);
  return t;
}

/// The added tokens with the ids the tokenizers library gives them (the model's id when the
/// content is in the vocabulary, else the next free id); a file id that disagrees is an error.
void load_added_tokens(const json& tok, const std::string& file, HfTokenizer::Impl& im) {
  const json list = hf::array_or_empty(tok, "added_tokens", {file, "(root)"});
  const int64_t model_size = int64_t(im.model.tokens().size());
  int64_t max_added = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonPath at{file, "added_tokens[" + std::to_string(i) + "]"};
    HfAddedToken t = parse_added_token(list[i], at);
    const bool dup = std::any_of(im.added.begin(), im.added.end(),
                                 [&](const HfAddedToken& o) { return o.content == t.content; });
    if (dup) continue;
    int64_t expect = im.model.find(t.content);
    if (expect < 0) expect = max_added >= model_size ? max_added + 1 : model_size;
    if (expect != t.id)
      throw FormatError(msg("hf_tokenizer", "{}: {} '{}' has id {} but the tokenizers library "
                            "assigns it id {} (model.vocab holds {} tokens)", file, at.path,
                            t.content, t.id, expect, model_size));
    max_added = std::max(max_added, t.id);
    im.added.push_back(std::move(t));
  }
}

void build_vocab(HfTokenizer::Impl& im) {
  im.vocab = im.model.tokens();
  for (const auto& t : im.added)
    if (t.id >= int64_t(im.vocab.size())) im.vocab.resize(size_t(t.id + 1));
  im.added_of_id.assign(im.vocab.size(), -1);
  for (size_t k = 0; k < im.added.size(); ++k) {
    const HfAddedToken& t = im.added[k];
    im.vocab[size_t(t.id)] = t.content;
    im.added_of_id[size_t(t.id)] = int32_t(k);
    if (t.normalized && im.normalizer) {
      std::string n = t.content;
      im.normalizer->normalize(n);
      im.normalized_trie.add(n, int32_t(k));
    } else {
      im.raw_trie.add(t.content, int32_t(k));
    }
  }
}

std::string chat_template_of(const json& config) {
  if (!config.is_object() || !config.contains("chat_template")) return "";
  const json& c = config["chat_template"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array() || c.empty()) return "";
  // A list of {"name", "template"}; anything else is not a template this tool can name.
  for (const json& t : c)
    if (t.is_object() && t.contains("name") && t["name"] == "default" && t.contains("template") &&
        t["template"].is_string())
      return t["template"].get<std::string>();
  return c[0].is_object() && c[0].contains("template") && c[0]["template"].is_string()
             ? c[0]["template"].get<std::string>() : "";
}

void load_config(const json& config, HfTokenizer& tok, HfTokenizer::Impl& im) {
  auto id_of = [&](const char* key) -> int64_t {
    const std::string s = config_token(config, key);
    const auto id = s.empty() ? std::nullopt : tok.token_to_id(s);
    return id ? *id : -1;
  };
  im.bos = id_of("bos_token");
  if (im.bos < 0 && !im.post.prefix.empty()) im.bos = im.post.prefix.front();
  im.eos = id_of("eos_token");
  im.pad = id_of("pad_token");
  im.unk = im.model.unk_id() >= 0 ? im.model.unk_id() : id_of("unk_token");
  const bool template_bos = !im.post.prefix.empty() && im.post.prefix.front() == im.bos;
  const bool template_eos = !im.post.suffix.empty() && im.post.suffix.back() == im.eos;
  im.add_bos = config.is_object() && config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
                   ? config["add_bos_token"].get<bool>() : template_bos;
  im.add_eos = config.is_object() && config.contains("add_eos_token") && config["add_eos_token"].is_boolean()
                   ? config["add_eos_token"].get<bool>() : template_eos;
  im.chat_template = chat_template_of(config);
}

}  // namespace

HfTokenizer HfTokenizer::from_json(const json& tok, const json& config, const std::string& file) {
  // Every field is type-checked where it is read (hf::bool_field and the like); this is the
  // backstop for a shape no check foresaw: still one typed error naming the file.
  try {
    return from_json_checked(tok, config, file);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(msg("hf_tokenizer", "{}: not a tokenizer.json this tool reads: {}", file,
                          e.what()));
  }
}

HfTokenizer HfTokenizer::from_json_checked(const json& tok, const json& config,
                                           const std::string& file) {
  if (!tok.is_object() || !tok.contains("model"))
    throw FormatError(msg("hf_tokenizer", "{}: no \"model\": not a tokenizer.json", file));
  for (const char* key : {"truncation", "padding"})
    if (tok.contains(key) && !tok[key].is_null())
      hf::unsupported({file, key}, tok[key].dump(), "null (encode whole texts, no padding)");
  auto im = std::make_shared<Impl>();
  im->file = file;
  const json& model = tok["model"];
  const size_t max_ids = (model.is_object() && model.contains("vocab") ? model["vocab"].size() : 0) +
                         hf::array_or_empty(tok, "added_tokens", {file, "(root)"}).size();
  im->model = hf::BpeModel::from_json(model, file, max_ids);
  im->normalizer_json = tok.value("normalizer", json());
  im->pre_tokenizer_json = tok.value("pre_tokenizer", json());
  im->normalizer = hf::make_normalizer(im->normalizer_json, {file, "normalizer"});
  im->pre_tokenizer = hf::make_pre_tokenizer(im->pre_tokenizer_json, {file, "pre_tokenizer"});
  im->post = hf::make_post_processor(tok.value("post_processor", json()), {file, "post_processor"});
  im->decoder = hf::make_decoder(tok.value("decoder", json()), {file, "decoder"});
  load_added_tokens(tok, file, *im);
  build_vocab(*im);
  im->kind = im->pre_tokenizer && im->pre_tokenizer->byte_level() ? HfModelKind::kByteLevelBpe
                                                                  : HfModelKind::kSentencePieceBpe;
  HfTokenizer t(im);
  load_config(config, t, *im);
  return t;
}

HfTokenizer HfTokenizer::from_files(const fs::path& tokenizer_json, const fs::path& tokenizer_config) {
  const json tok = read_json_file(tokenizer_json);
  const json config = tokenizer_config.empty() ? json() : read_json_file(tokenizer_config);
  return from_json(tok, config, tokenizer_json.string());
}

HfTokenizer HfTokenizer::from_folder(const fs::path& dir) {
  const fs::path tj = dir / "tokenizer.json", tc = dir / "tokenizer_config.json";
  if (!fs::exists(tj)) {
    if (fs::exists(dir / "tokenizer.model"))
      throw FormatError(msg("hf_tokenizer", "{}: has tokenizer.model (a SentencePiece protobuf) but "
                            "no tokenizer.json; the SentencePiece format is not read: provide "
                            "tokenizer.json (the Hugging Face repo usually has it; else write one "
                            "with transformers: AutoTokenizer.from_pretrained(dir).save_pretrained(dir))",
                            dir.string()));
    throw FormatError(msg("hf_tokenizer", "{}: no tokenizer.json", dir.string()));
  }
  return from_files(tj, fs::exists(tc) ? tc : fs::path());
}

// ---- accessors ----

int64_t HfTokenizer::vocab_size() const { return int64_t(impl_->vocab.size()); }

const std::string& HfTokenizer::token(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw ConfigError(msg("hf_tokenizer", "token id {} outside [0, {})", id, vocab_size()));
  return impl_->vocab[size_t(id)];
}

std::optional<int64_t> HfTokenizer::token_to_id(std::string_view token) const {
  for (const auto& t : impl_->added)
    if (t.content == token) return t.id;
  const int32_t id = impl_->model.find(token);
  return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
}

HfTokenType HfTokenizer::token_type(int64_t id) const {
  const std::string& t = token(id);
  const int32_t a = impl_->added_of_id[size_t(id)];
  if (id == impl_->model.unk_id()) return HfTokenType::kUnknown;
  if (a >= 0) return impl_->added[size_t(a)].special ? HfTokenType::kControl : HfTokenType::kUserDefined;
  if (t.empty()) return HfTokenType::kUnused;
  if (impl_->kind == HfModelKind::kSentencePieceBpe && t.size() == 6 && t.compare(0, 3, "<0x") == 0 &&
      t[5] == '>') {
    for (int b = 0; b < 256; ++b)
      if (impl_->model.byte_id(uint8_t(b)) == id) return HfTokenType::kByte;
  }
  return HfTokenType::kNormal;
}

const std::vector<std::pair<std::string, std::string>>& HfTokenizer::merges() const {
  return impl_->model.merges();
}
const std::vector<HfAddedToken>& HfTokenizer::added_tokens() const { return impl_->added; }
HfModelKind HfTokenizer::kind() const { return impl_->kind; }
bool HfTokenizer::ignore_merges() const { return impl_->model.ignore_merges(); }
bool HfTokenizer::byte_fallback() const { return impl_->model.byte_fallback(); }
const json& HfTokenizer::normalizer_json() const { return impl_->normalizer_json; }
const json& HfTokenizer::pre_tokenizer_json() const { return impl_->pre_tokenizer_json; }
const std::string& HfTokenizer::file() const { return impl_->file; }
int64_t HfTokenizer::bos_id() const { return impl_->bos; }
int64_t HfTokenizer::eos_id() const { return impl_->eos; }
int64_t HfTokenizer::pad_id() const { return impl_->pad; }
int64_t HfTokenizer::unk_id() const { return impl_->unk; }
bool HfTokenizer::add_bos() const { return impl_->add_bos; }
bool HfTokenizer::add_eos() const { return impl_->add_eos; }
const std::string& HfTokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace ac
