// The user's own text as training / calibration data: a text file, a JSONL file (as Hugging
// Face datasets export it) or a folder of them, tokenized as it is read and written as two token
// files (data/token_file.h): train and held-out.
//
// Inputs (`input`):
//   NAME.jsonl  one JSON object per line, the document's text in a string field (text_field,
//               default "text"); blank lines are skipped. NAME.json is read so too (datasets'
//               Dataset.to_json writes JSON Lines under that name by default).
//   any other   UTF-8 text, one document, read chunk by chunk (a file larger than memory works).
//   a folder    its .txt and .jsonl files (not sub-folders, not names starting with '.'), sorted
//               by name (byte order); each .txt is one document, each .jsonl line one document.
// A UTF-8 byte-order mark at the start of a file is dropped.
//
// Documents are numbered 0, 1, ... in input order: every text file and every non-blank JSONL line,
// those whose text is "" included (they add no tokens). A document's tokens are
//   [BOS if tokenizer.adds_bos()] + the ids of its paragraphs + [EOS if the tokenizer has one]
// so that documents stay apart in the stream, as the tokenizer's own conventions mark them.
//
// Paragraphs. Text is encoded paragraph by paragraph, so memory stays flat and BPE time linear
// however long a document is. A paragraph ends after a run of blank lines ("\n" or "\r\n" alone
// on their line), the blank lines kept in it, so that the paragraphs concatenate to the document
// byte for byte. A paragraph that would pass max_paragraph_bytes is cut before the line that
// passes it, a longer line at a UTF-8 character boundary.
// For byte-level BPE (Llama 3, Qwen2: tokenizer.json with a ByteLevel pre-tokenizer) the ids are
// those of the whole document, since the cuts fall where the pre-tokenizer splits anyway (tested
// on Llama 3); tokenizers that prepend a dummy-prefix space to every text they encode
// (tokenizer.bin, SentencePiece-style tokenizer.json) give every paragraph its own, as
// data/dataset.h tokenize_text_file does.
//
// Held-out split, deterministic (no seed), with N = heldout_every (20):
//   at least N documents: document i is held out whole when i % N == N - 1 (the 20th, 40th, ...);
//   fewer than N documents: the last floor(m / N) ids of each document (5%; m = its ids without
//     BOS / EOS) are held out as a document of their own, [BOS] + tail + [EOS]; the train file
//     keeps [BOS] + the rest + [EOS]. A document of fewer than N ids stays whole in train.
//
// Output: both token files are written under temporary names and renamed into place only once the
// whole input is read; after any error neither exists (an older file of the same name is kept).
//
// Errors: FormatError, one line, "[text_corpus] FILE:LINE: ..." with the byte offset in the file
// (from 0) and the column (from 1) where it helps: invalid UTF-8, a JSONL line that does not parse or is not an object, a line without the
// text field or whose field is not a string, an empty file (or a JSONL file of blank lines only),
// a folder without .txt / .jsonl files. ConfigError for invalid options or an output that
// overlaps the input.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"

namespace ac {

class TextTokenizer;

/// Options of write_text_corpus, with their defaults.
struct TextCorpusOptions {
  /// JSONL: the field that holds each document's text ("text", as datasets' to_json writes).
  std::string text_field = "text";
  /// N of the held-out rule above (>= 2): every Nth document, else the last 1/N of each.
  /// 0: nothing is held out (every document goes to train; the held-out file is empty).
  int64_t heldout_every = 20;
  /// The vocab_size recorded in both token files (the model's config.json vocab_size); 0 = the
  /// tokenizer's.
  int64_t vocab_size = 0;
  /// Longest paragraph encoded in one call, in bytes (>= 16).
  int64_t max_paragraph_bytes = int64_t(1) << 20;
};

/// What write_text_corpus read and wrote.
struct TextCorpusSummary {
  int64_t files = 0;            // input files read
  int64_t documents = 0;        // documents numbered (empty ones included)
  int64_t empty_documents = 0;  // documents that gave no ids
  bool split_by_document = true;  // false: the tails of each document were held out
  int64_t heldout_every = 20;     // N of the rule
  int64_t train_documents = 0, heldout_documents = 0;  // documents with ids in each file
  int64_t train_tokens = 0, heldout_tokens = 0;        // ids in each file (BOS / EOS included)
};

/// Reads `input` (a text file, a JSONL file or a folder of them), encodes it with `tokenizer`
/// and writes `train_out` and `heldout_out` as described above. Memory: one paragraph (or one
/// JSONL line) and two buffers of TokenFileWriter::kBufferIds ids. Throws FormatError on bad
/// input, ConfigError on bad options or outputs; nothing is written then.
TextCorpusSummary write_text_corpus(const fs::path& input, const TextTokenizer& tokenizer,
                                    const fs::path& train_out, const fs::path& heldout_out,
                                    const TextCorpusOptions& options = {});

/// One line for logs: "40 documents (1 empty) from 3 files: train 37 documents, 4096 tokens;
/// held-out 2 documents (every 20th document), 380 tokens".
std::string describe(const TextCorpusSummary& summary);

/// True when `input` is a single file read as plain text (not .jsonl / .json): ONE document,
/// whatever blank lines it holds, so it is held out by its last 1/N and gives one story.
bool is_plain_text_input(const fs::path& input);

/// How to give several documents instead of one plain-text file, for logs and errors: "plain
/// text is read as one document (blank lines are not document boundaries); for several
/// documents give JSONL, one {"text": ...} per line (`sample --text-out NAME.jsonl` writes it),
/// or a folder of .txt files" (`text_field` in place of "text").
std::string several_documents_hint(const std::string& text_field = "text");

/// A document cut into the paragraphs it is encoded in (rule above): their concatenation is
/// `text`. Paragraphs view `text`.
std::vector<std::string_view> split_paragraphs(std::string_view text,
                                               int64_t max_paragraph_bytes = int64_t(1) << 20);

}  // namespace ac
