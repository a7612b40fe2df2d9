#include "data/data_source.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/runtime.h"
#include "data/token_file.h"
#include "io/text_tokenizer.h"

namespace ac {
namespace {

/// A folder under the system's temporary directory, removed with everything in it when the
/// object goes (the tokenized text is only a step on the way into memory).
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "autocompress-data-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw FormatError(msg("data", "cannot create a scratch folder {}: {}", tmpl,
                            std::strerror(errno)));
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

const char* to_string(DataSplit split) {
  switch (split) {
    case DataSplit::kTrain: return "train";
    case DataSplit::kHeldout: return "heldout";
    case DataSplit::kAll: return "all";
  }
  return "?";
}

DataSplit parse_data_split(const std::string& name) {
  for (DataSplit s : {DataSplit::kTrain, DataSplit::kHeldout, DataSplit::kAll})
    if (name == to_string(s)) return s;
  throw ConfigError(msg("data", "--split: expected train, heldout or all, found '{}'", name));
}

bool is_token_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char head[sizeof(kTokenFileMagic)] = {};
  f.read(head, sizeof head);
  return f.gcount() == std::streamsize(sizeof head) &&
         (std::memcmp(head, kTokenFileMagic, sizeof head) == 0 ||
          std::memcmp(head, kTokenFileMagicV1, sizeof head) == 0);
}

TokenizerFingerprint model_tokenizer_fingerprint(const fs::path& model_dir, int64_t vocab_size) {
  std::error_code ec;
  if (!fs::exists(model_dir / "tokenizer.json", ec) && !fs::exists(model_dir / "tokenizer.bin", ec))
    return {};
  try {
    return tokenizer_fingerprint(*load_tokenizer(model_dir, vocab_size));
  } catch (const Error&) {
    return {};
  }
}

void check_token_file_tokenizer(const TokenizerFingerprint& written_with, const fs::path& file,
                                const fs::path& model_dir, int64_t vocab_size, const char* where,
                                const std::string& flag) {
  if (!written_with.known()) return;
  const TokenizerFingerprint model = model_tokenizer_fingerprint(model_dir, vocab_size);
  if (!model.known() || model == written_with) return;
  throw ConfigError(msg(where, "{} {} was written with {}; the model {} has {}: its ids would "
                        "stand for other text (sample the data from this model, or give text "
                        "to tokenize with its tokenizer)", flag, file.string(),
                        written_with.describe(), model_dir.string(), model.describe()));
}

TextData tokenize_text_data(const fs::path& input, const fs::path& model_dir, int64_t vocab_size,
                            const std::string& text_field, int64_t heldout_every) {
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(model_dir, vocab_size);
  log_info(fmt::format("[data] tokenizing {} with {} of {}", input.string(), tok->kind(),
                       model_dir.string()));
  ScratchDir scratch;
  TextCorpusOptions o;
  o.text_field = text_field;
  o.heldout_every = heldout_every;
  o.vocab_size = vocab_size;
  TextData d;
  d.summary = write_text_corpus(input, *tok, scratch.path() / "train.tokens",
                                scratch.path() / "heldout.tokens", o);
  d.train = read_token_file(scratch.path() / "train.tokens").ids;
  d.heldout = read_token_file(scratch.path() / "heldout.tokens").ids;
  d.tokenizer = tok->kind();
  log_info(fmt::format("[data] {}: {}", input.string(), describe(d.summary)));
  if (is_plain_text_input(input))  // a first-hour surprise: blank lines do not split stories
    log_info(fmt::format("[data] {}: {}", input.string(), several_documents_hint(text_field)));
  return d;
}

LoadedData load_data(const DataSpec& spec, const fs::path& model_dir, int64_t vocab_size,
                     const char* where) {
  std::error_code ec;
  if (spec.path.empty()) throw ConfigError(msg(where, "--data: no path given"));
  if (!fs::exists(spec.path, ec))
    throw ConfigError(msg(where, "--data {}: no such file or folder", spec.path.string()));
  LoadedData out;
  if (is_token_file(spec.path)) {
    TokenFile f = read_token_file(spec.path);
    check_token_file_tokenizer(f.tokenizer, spec.path, model_dir, vocab_size, where);
    out.ids = std::move(f.ids);
    out.vocab_size = f.vocab_size;
    out.source = {{"path", spec.path.string()}, {"format", "tokens"},
                  {"tokens", int64_t(out.ids.size())}};
    out.description = fmt::format("{}: {} tokens (token file)", spec.path.string(), out.ids.size());
    return out;
  }
  TextData t = tokenize_text_data(spec.path, model_dir, vocab_size, spec.text_field,
                                  spec.split == DataSplit::kAll ? 0 : 20);
  const bool held = spec.split == DataSplit::kHeldout;
  out.ids = std::move(held ? t.heldout : t.train);
  out.vocab_size = vocab_size;
  const int64_t documents = held ? t.summary.heldout_documents : t.summary.train_documents;
  out.source = {{"path", spec.path.string()},   {"format", "text"},
                {"tokenizer", t.tokenizer},      {"split", to_string(spec.split)},
                {"text_field", spec.text_field}, {"tokens", int64_t(out.ids.size())},
                {"documents", documents},        {"files", t.summary.files},
                {"corpus", describe(t.summary)}};
  out.description = fmt::format("{}: {} split, {} tokens of {} document{} ({})",
                                spec.path.string(), to_string(spec.split), out.ids.size(),
                                documents, documents == 1 ? "" : "s", t.tokenizer);
  if (out.ids.empty())
    throw ConfigError(msg(where, "--data {}: the {} split has no tokens ({}); use --split all to "
                          "read every document", spec.path.string(), to_string(spec.split),
                          describe(t.summary)));
  return out;
}

}  // namespace ac
