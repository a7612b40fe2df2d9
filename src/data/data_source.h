// The data of every stage that reads data (importance, search, distill, eval, make-tasks, and
// compress --data-text): a token file, or the user's own text, tokenized as it is read with the
// checkpoint's own tokenizer.
//
// What `--data PATH` may name (the same flag, the same rules, on every subcommand):
//   a token file (data/token_file.h; recognized by its magic "ACTOK2" or "ACTOK1", whatever its
//     name): its ids, used whole; refused when it records a tokenizer other than the model's;
//   anything else: text as data/text_corpus.h reads it: a UTF-8 text file, a JSONL file (one JSON
//     object per line, the text in `--text-field`, default "text", as Hugging Face datasets'
//     to_json writes it) or a folder of .txt / .jsonl files. It is tokenized with the model's
//     tokenizer (io/text_tokenizer.h load_tokenizer: tokenizer.json, else tokenizer.bin),
//     documents framed by the tokenizer's BOS / EOS, and split into train and held-out by
//     text_corpus.h's rule (every 20th document held out; with fewer than 20 documents, the last
//     5% of each). `--split` picks the part a stage reads:
//       train    the default of the stages that fit something (importance, search, distill);
//       heldout  the default of the stages that measure (eval, make-tasks), so that evaluating on
//                the file a model was distilled on measures text the model did not see;
//       all      every document, nothing held out.
//     The text is tokenized into a scratch folder (removed afterwards): memory stays flat while
//     reading however large the text is; the ids of the part read are then held in memory.
//
// Errors: one FormatError / ConfigError line from the layer that found it: the token file
// reader, the tokenizer loader, or text_corpus.h ("[text_corpus] FILE:LINE: ..."), plus
// "[STAGE] --data PATH: ..." for a missing path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"
#include "data/text_corpus.h"
#include "data/token_file.h"

namespace ac {

/// The part of a text input a stage reads (see above).
enum class DataSplit { kTrain, kHeldout, kAll };

/// "train", "heldout", "all".
const char* to_string(DataSplit split);
/// The inverse; throws ConfigError naming the flag and the accepted values.
DataSplit parse_data_split(const std::string& name);

/// A stage's data input: the CLI's --data, --text-field and --split.
struct DataSpec {
  fs::path path;                         // --data
  std::string text_field = "text";       // --text-field (JSONL)
  DataSplit split = DataSplit::kTrain;   // --split (text inputs only)
};

/// The ids a stage reads and where they came from.
struct LoadedData {
  std::vector<int32_t> ids;  // [N] the stream, documents framed as data/token_file.h says
  /// The vocabulary the ids were written for: the token file's (0 = unknown), or the model's.
  int64_t vocab_size = 0;
  /// For reports: {"path", "format": "tokens" | "text", "tokens": N} and, for text,
  /// {"tokenizer", "split", "text_field", "corpus": text_corpus.h describe(), "documents",
  ///  "files"}.
  json source;
  /// One line for logs: "data/train.tokens: 8192 tokens (token file)", "moby.txt: train split,
  /// 212345 tokens of 1 document from 1 file (tokenizer.json (byte-level BPE))".
  std::string description;
};

/// True when `path` is a regular file that opens with the token file magic.
bool is_token_file(const fs::path& path);

/// The train and held-out ids of a text input, tokenized with `model_dir`'s tokenizer for a
/// model of `vocab_size` ids. `heldout_every` as TextCorpusOptions (0: nothing held out).
struct TextData {
  std::vector<int32_t> train, heldout;  // [N_train], [N_heldout]
  TextCorpusSummary summary;
  std::string tokenizer;  // TextTokenizer::kind()
};
TextData tokenize_text_data(const fs::path& input, const fs::path& model_dir, int64_t vocab_size,
                            const std::string& text_field, int64_t heldout_every = 20);

/// The fingerprint (data/token_file.h) of the tokenizer in `model_dir` for a model of
/// `vocab_size` ids; unknown when the folder has no tokenizer file or it cannot be read (the
/// stages that need the tokenizer say why themselves; a check of data must not refuse more).
TokenizerFingerprint model_tokenizer_fingerprint(const fs::path& model_dir, int64_t vocab_size);

/// Refuses ids written with another tokenizer than `model_dir`'s, when both are known: such
/// ids fit the vocabulary, so no other check catches them, and they mean other text. Throws
/// ConfigError "[where] FLAG FILE was written with a tokenizer of 32000 tokens (vocabulary hash
/// ...); the model DIR's tokenizer (tokenizer.json (byte-level BPE)) has 151669 tokens (...):
/// ...". Nothing to check when `written_with` is unknown (a version-1 file).
void check_token_file_tokenizer(const TokenizerFingerprint& written_with, const fs::path& file,
                                const fs::path& model_dir, int64_t vocab_size, const char* where,
                                const std::string& flag = "--data");

/// Reads `spec` for the model in `model_dir` (config.json vocab_size `vocab_size`): a token file
/// whole, or the `spec.split` part of a text input (above). `where` names the stage in errors.
/// Throws ConfigError when the path does not exist, the part read has no ids (e.g. the
/// held-out part of a text too short to hold anything out) or a token file was written with
/// another tokenizer (check_token_file_tokenizer), FormatError from the readers.
LoadedData load_data(const DataSpec& spec, const fs::path& model_dir, int64_t vocab_size,
                     const char* where);

}  // namespace ac
