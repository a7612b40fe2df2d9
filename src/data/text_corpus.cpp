#include "data/text_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>

#include "common/error.h"
#include "common/json_io.h"
#include "data/token_file.h"
#include "io/hf_unicode.h"
#include "io/text_tokenizer.h"

namespace ac {
namespace {

const char* const kWhere = "text_corpus";

/// The largest cut <= s.size() that does not split a UTF-8 sequence (s.size() when the tail is not
/// UTF-8 at all: the validator reports it then).
size_t utf8_cut(std::string_view s) {
  const size_t k = s.size();
  size_t i = k;
  while (i > 0 && k - i < 4) {
    const auto c = static_cast<unsigned char>(s[--i]);
    if ((c & 0xC0) != 0x80) return c >= 0xC0 && hf::utf8_length(c) > k - i && i > 0 ? i : k;
  }
  return k;
}

/// The paragraph rule of text_corpus.h over the pieces of a text (whole lines, or parts of a line
/// longer than the limit): says before which piece a new paragraph starts.
class ParagraphCutter {
 public:
  explicit ParagraphCutter(size_t max_bytes) : max_bytes_(max_bytes) {}

  bool cut_before(std::string_view piece, bool starts_line, bool ends_line) {
    const bool blank = starts_line && ends_line && (piece == "\n" || piece == "\r\n");
    const bool cut = size_ > 0 && ((after_blank_ && !blank) || size_ + piece.size() > max_bytes_);
    if (cut) size_ = 0;
    size_ += piece.size();
    after_blank_ = blank;
    return cut;
  }

 private:
  size_t max_bytes_, size_ = 0;
  bool after_blank_ = false;  // the last piece was a blank line
};

/// Calls f(piece, starts_line, ends_line) for the lines of `text`, lines longer than `max_bytes`
/// in parts cut at UTF-8 boundaries.
void for_each_piece(std::string_view text, size_t max_bytes,
                    const std::function<void(std::string_view, bool, bool)>& f) {
  size_t pos = 0;
  bool starts_line = true;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const size_t line_end = nl == std::string_view::npos ? text.size() : nl + 1;
    size_t end = line_end;
    if (end - pos > max_bytes) end = pos + utf8_cut(text.substr(pos, max_bytes));
    f(text.substr(pos, end - pos), starts_line, end == line_end);
    starts_line = end == line_end;
    pos = end;
  }
}

/// One piece of a file as LineReader returns it, with where it lies.
struct Piece {
  std::string text;
  int64_t line = 1;     // 1-based line of its first byte
  uint64_t offset = 0;  // file offset of its first byte
  uint64_t column = 0;  // bytes of the line before it
  bool starts_line = true, ends_line = true;
};

/// Reads a file as whole lines (the '\n' kept) of at most `max_bytes`, longer lines in parts cut
/// at UTF-8 boundaries, with line numbers and byte offsets. Memory: a 64 KiB buffer and a piece.
class LineReader {
 public:
  explicit LineReader(const fs::path& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw FormatError(msg(kWhere, "{}: cannot open", path.string()));
    if (fill() && end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0)
      pos_ = 3, offset_ = 3;  // a UTF-8 byte-order mark is not text
  }

  /// The next piece into `p`; false at the end of the file.
  bool next(Piece& p, size_t max_bytes) {
    p.text.swap(carry_);
    carry_.clear();
    p.line = line_, p.offset = offset_, p.column = column_, p.starts_line = column_ == 0;
    bool newline = false;
    while (!newline && p.text.size() < max_bytes && (pos_ < end_ || fill())) {
      const size_t avail = std::min(end_ - pos_, max_bytes - p.text.size());
      const char* b = buf_.data() + pos_;
      const auto* nl = static_cast<const char*>(std::memchr(b, '\n', avail));
      const size_t take = nl ? size_t(nl - b) + 1 : avail;
      p.text.append(b, take);
      pos_ += take;
      newline = nl != nullptr;
    }
    if (p.text.empty()) return false;
    p.ends_line = newline || p.text.size() < max_bytes;  // a newline, or the end of the file
    if (!p.ends_line) {
      const size_t keep = utf8_cut(p.text);
      carry_.assign(p.text, keep, std::string::npos);
      p.text.resize(keep);
    }
    offset_ += p.text.size();
    column_ = p.ends_line ? 0 : column_ + p.text.size();
    line_ += newline ? 1 : 0;
    return true;
  }

 private:
  bool fill() {
    if (!in_) return false;
    in_.read(buf_.data(), std::streamsize(buf_.size()));
    if (in_.bad()) throw FormatError(msg(kWhere, "{}: read failed", path_.string()));
    pos_ = 0, end_ = size_t(in_.gcount());
    return end_ > 0;
  }

  fs::path path_;
  std::ifstream in_;
  std::vector<char> buf_ = std::vector<char>(size_t(1) << 16);
  size_t pos_ = 0, end_ = 0;
  std::string carry_;  // the start of a UTF-8 sequence cut off the last piece
  int64_t line_ = 1;
  uint64_t offset_ = 0, column_ = 0;
};

/// Throws FormatError at the first invalid UTF-8 byte of `p`.
void check_utf8(const Piece& p, const fs::path& file) {
  const size_t bad = hf::find_invalid_utf8(p.text);
  if (bad == std::string::npos) return;
  throw FormatError(msg(kWhere, "{}:{}: invalid UTF-8 at byte {} (column {}): 0x{:02X}; the input "
                        "must be UTF-8 text", file.string(), p.line, p.offset + bad,
                        p.column + bad + 1, uint8_t(p.text[bad])));
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

/// JSON Lines: .jsonl, and .json given as the input itself (datasets' to_json writes JSON Lines
/// under that name by default).
bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl" || p.extension() == ".json"; }

/// Documents of a file for the choice of the held-out rule: 1 for text, the non-blank lines of
/// JSONL. Throws FormatError on an empty file.
int64_t count_documents(const fs::path& file) {
  std::error_code ec;
  if (fs::file_size(file, ec) == 0 && !ec)
    throw FormatError(msg(kWhere, "{}: empty file (0 bytes)", file.string()));
  if (!is_jsonl(file)) return 1;
  LineReader reader(file);
  Piece p;
  int64_t n = 0;
  bool blank_so_far = true;  // of the current line
  while (reader.next(p, size_t(1) << 16)) {
    blank_so_far = blank_so_far && is_blank(p.text);
    if (!p.ends_line) continue;
    n += blank_so_far ? 0 : 1;
    blank_so_far = true;
  }
  if (n == 0)
    throw FormatError(msg(kWhere, "{}: no JSON lines (the file has only blank lines)",
                          file.string()));
  return n;
}

/// The files of `input`: itself, or a folder's .txt / .jsonl files sorted by name.
std::vector<fs::path> input_files(const fs::path& input) {
  std::error_code ec;
  if (fs::is_regular_file(input, ec)) return {input};
  if (!fs::is_directory(input, ec))
    throw FormatError(msg(kWhere, "{}: no such file or folder", input.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(input, ec)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (name[0] == '.' || (ext != ".txt" && ext != ".jsonl") || !e.is_regular_file()) continue;
    files.push_back(e.path());
  }
  if (ec) throw FormatError(msg(kWhere, "{}: cannot list the folder ({})", input.string(),
                                ec.message()));
  if (files.empty())
    throw FormatError(msg(kWhere, "{}: no .txt or .jsonl files in this folder (a corpus is a text "
                          "file, a JSONL file, or a folder of them)", input.string()));
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  return files;
}

/// The document's text of one JSONL line. Throws FormatError naming file and line.
std::string jsonl_text(const Piece& p, const fs::path& file, const std::string& field) {
  const std::string where = fmt::format("{}:{}", file.string(), p.line);
  json j;
  try {
    j = json::parse(p.text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) throw std::length_error("nesting");
      return true;
    });
  } catch (const json::parse_error& e) {
    std::string why = e.what();
    const size_t colon = why.find(": ", why.find("column"));
    if (colon != std::string::npos) why = why.substr(colon + 2);
    throw FormatError(msg(kWhere, "{}: not valid JSON at byte {} (column {}): {}", where,
                          p.offset + e.byte - 1, e.byte, why));
  } catch (const std::length_error&) {
    throw FormatError(msg(kWhere, "{}: JSON nested deeper than {}", where, kMaxJsonDepth));
  }
  if (!j.is_object())
    throw FormatError(msg(kWhere, "{}: the line is a JSON {}, expected an object with a '{}' "
                          "field", where, j.type_name(), field));
  const auto it = j.find(field);
  if (it == j.end()) {
    std::string keys;
    for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
    throw FormatError(msg(kWhere, "{}: no field '{}' (the line has: {}); name the field that "
                          "holds the text (text_field)", where, field,
                          keys.empty() ? "no fields" : keys));
  }
  if (!it->is_string())
    throw FormatError(msg(kWhere, "{}: field '{}' is a {}, expected a string", where, field,
                          it->type_name()));
  return it->get<std::string>();
}

/// Frames documents, splits off the held-out ones and writes both token files.
class CorpusWriter {
 public:
  CorpusWriter(const TextTokenizer& tok, const fs::path& train, const fs::path& heldout,
               int64_t vocab_size, int64_t every, bool split_by_document)
      : tok_(tok), train_(train, vocab_size, tokenizer_fingerprint(tok)),
        heldout_(heldout, vocab_size, tokenizer_fingerprint(tok)), every_(every),
        by_document_(split_by_document) {
    summary_.split_by_document = split_by_document;
    summary_.heldout_every = every;
  }

  void begin_document() {
    const int64_t index = summary_.documents++;
    out_ = by_document_ && every_ > 0 && index % every_ == every_ - 1 ? &heldout_ : &train_;
    doc_start_ = out_->count();
    if (tok_.adds_bos()) out_->push_back(int32_t(*tok_.bos_id()));
    content_start_ = out_->count();
  }

  void add_text(std::string_view paragraph) {
    ids_.clear();
    for (const int64_t id : tok_.encode(paragraph, /*add_special_tokens=*/false)) {
      AC_CHECK(id >= 0 && id < tok_.vocab_size(), "token id {} of {}", id, tok_.kind());
      ids_.push_back(int32_t(id));
    }
    out_->append(ids_);
  }

  void end_document() {
    const int64_t m = out_->count() - content_start_;
    if (m == 0) {  // nothing but BOS: no document
      out_->truncate(doc_start_);
      ++summary_.empty_documents;
      return;
    }
    if (!by_document_ && m / every_ > 0) move_tail(m / every_);
    if (tok_.eos_id()) out_->push_back(int32_t(*tok_.eos_id()));
    ++(out_ == &heldout_ ? summary_.heldout_documents : summary_.train_documents);
  }

  void skip_document() {
    ++summary_.documents;
    ++summary_.empty_documents;
  }

  TextCorpusSummary commit() {
    summary_.train_tokens = train_.count();
    summary_.heldout_tokens = heldout_.count();
    train_.commit();
    try {
      heldout_.commit();
    } catch (...) {
      std::error_code ec;
      fs::remove(train_.path(), ec);  // neither file, as promised
      throw;
    }
    return summary_;
  }

 private:
  /// The last n ids of the train document become a held-out document, [BOS] + tail + [EOS].
  void move_tail(int64_t n) {
    const int64_t from = train_.count() - n;
    if (tok_.adds_bos()) heldout_.push_back(int32_t(*tok_.bos_id()));
    for (int64_t k = from; k < train_.count(); k += int64_t(TokenFileWriter::kBufferIds))
      heldout_.append(train_.read(k, std::min(int64_t(TokenFileWriter::kBufferIds),
                                              train_.count() - k)));
    if (tok_.eos_id()) heldout_.push_back(int32_t(*tok_.eos_id()));
    ++summary_.heldout_documents;
    train_.truncate(from);
  }

  const TextTokenizer& tok_;
  TokenFileWriter train_, heldout_;
  int64_t every_;
  bool by_document_;
  TokenFileWriter* out_ = nullptr;  // the file of the current document
  int64_t doc_start_ = 0, content_start_ = 0;
  std::vector<int32_t> ids_;
  TextCorpusSummary summary_;
};

void read_text_file(const fs::path& file, CorpusWriter& out, size_t max_bytes) {
  LineReader reader(file);
  ParagraphCutter cutter(max_bytes);
  Piece p;
  std::string paragraph;
  out.begin_document();
  while (reader.next(p, max_bytes)) {
    check_utf8(p, file);
    if (cutter.cut_before(p.text, p.starts_line, p.ends_line)) {
      out.add_text(paragraph);
      paragraph.clear();
    }
    paragraph += p.text;
  }
  if (!paragraph.empty()) out.add_text(paragraph);
  out.end_document();
}

void read_jsonl_file(const fs::path& file, CorpusWriter& out, const TextCorpusOptions& o) {
  LineReader reader(file);
  Piece p;
  while (reader.next(p, kMaxJsonBytes + 1)) {
    if (!p.ends_line || p.text.size() > kMaxJsonBytes)
      throw FormatError(msg(kWhere, "{}:{}: line longer than the {} MiB limit of a JSON line",
                            file.string(), p.line, kMaxJsonBytes >> 20));
    check_utf8(p, file);
    if (is_blank(p.text)) continue;
    const std::string text = jsonl_text(p, file, o.text_field);
    if (text.empty()) {
      out.skip_document();
      continue;
    }
    out.begin_document();
    for (std::string_view par : split_paragraphs(text, o.max_paragraph_bytes)) out.add_text(par);
    out.end_document();
  }
}

void check_options(const fs::path& input, const TextTokenizer& tok, const fs::path& train,
                   const fs::path& heldout, const TextCorpusOptions& o) {
  if ((o.heldout_every != 0 && o.heldout_every < 2) || o.max_paragraph_bytes < 16 ||
      o.vocab_size < 0 || o.text_field.empty())
    throw ConfigError(msg(kWhere, "heldout_every must be 0 or >= 2, max_paragraph_bytes >= 16, "
                          "vocab_size >= 0 and text_field non-empty; found {}, {}, {}, '{}'",
                          o.heldout_every, o.max_paragraph_bytes, o.vocab_size, o.text_field));
  if (o.vocab_size > 0 && tok.vocab_size() > o.vocab_size)
    throw ConfigError(msg(kWhere, "{} has {} ids but the token files are for vocab_size {}",
                          tok.kind(), tok.vocab_size(), o.vocab_size));
  if (tok.adds_bos() && !tok.bos_id())
    throw ConfigError(msg(kWhere, "{}: adds BOS but names no BOS id", tok.kind()));
  std::error_code ec;
  if (fs::weakly_canonical(fs::absolute(train), ec) ==
      fs::weakly_canonical(fs::absolute(heldout), ec))
    throw ConfigError(msg(kWhere, "the train and held-out outputs are the same file '{}'",
                          train.string()));
  check_not_overwriting_inputs({input}, train, kWhere);
  check_not_overwriting_inputs({input}, heldout, kWhere);
}

}  // namespace

std::vector<std::string_view> split_paragraphs(std::string_view text, int64_t max_paragraph_bytes) {
  std::vector<std::string_view> out;
  ParagraphCutter cutter(size_t(std::max<int64_t>(max_paragraph_bytes, 4)));
  size_t start = 0, pos = 0;
  for_each_piece(text, size_t(std::max<int64_t>(max_paragraph_bytes, 4)),
                 [&](std::string_view piece, bool starts_line, bool ends_line) {
                   if (cutter.cut_before(piece, starts_line, ends_line)) {
                     out.push_back(text.substr(start, pos - start));
                     start = pos;
                   }
                   pos += piece.size();
                 });
  if (pos > start) out.push_back(text.substr(start, pos - start));
  return out;
}

TextCorpusSummary write_text_corpus(const fs::path& input, const TextTokenizer& tokenizer,
                                    const fs::path& train_out, const fs::path& heldout_out,
                                    const TextCorpusOptions& options) {
  check_options(input, tokenizer, train_out, heldout_out, options);
  const std::vector<fs::path> files = input_files(input);
  int64_t documents = 0;
  for (const fs::path& f : files) documents += count_documents(f);
  const int64_t vocab = options.vocab_size > 0 ? options.vocab_size : tokenizer.vocab_size();
  CorpusWriter out(tokenizer, train_out, heldout_out, vocab, options.heldout_every,
                   /*split_by_document=*/documents >= options.heldout_every);  // always for 0
  for (const fs::path& f : files) {
    if (is_jsonl(f)) read_jsonl_file(f, out, options);
    else read_text_file(f, out, size_t(options.max_paragraph_bytes));
  }
  TextCorpusSummary s = out.commit();
  s.files = int64_t(files.size());
  return s;
}

bool is_plain_text_input(const fs::path& input) {
  std::error_code ec;
  return fs::is_regular_file(input, ec) && !is_jsonl(input);
}

std::string several_documents_hint(const std::string& text_field) {
  return fmt::format("plain text is read as one document (blank lines are not document "
                     "boundaries); for several documents give JSONL, one {{\"{}\": ...}} per "
                     "line (`sample --text-out NAME.jsonl` writes it), or a folder of .txt files",
                     text_field);
}

std::string describe(const TextCorpusSummary& s) {
  auto docs = [](int64_t n) { return fmt::format("{} document{}", n, n == 1 ? "" : "s"); };
  const std::string rule = s.heldout_every == 0 ? "nothing held out"
                           : s.split_by_document
                               ? fmt::format("every {}th document", s.heldout_every)
                               : fmt::format("the last 1/{} of each document", s.heldout_every);
  return fmt::format("{} ({} empty) from {} file{}: train {}, {} tokens; held-out {} ({}), {} "
                     "tokens", docs(s.documents), s.empty_documents, s.files,
                     s.files == 1 ? "" : "s", docs(s.train_documents), s.train_tokens,
                     docs(s.heldout_documents), rule, s.heldout_tokens);
}

}  // namespace ac
