// `autocompress tokenize`: the ids a checkpoint's tokenizer (tokenizer.json or tokenizer.bin,
// io/text_tokenizer.h) gives a text, and with --decode the text back, to check a tokenizer or a
// prompt. The text is encoded whole, with the special tokens the tokenizer adds to a text
// (Llama's BOS); data/text_corpus.h encodes training data paragraph by paragraph instead.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "cli/command.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "io/hf_tokenizer.h"
#include "io/hf_unicode.h"
#include "io/text_tokenizer.h"
#include "model/config.h"

namespace ac::cli {
namespace {

struct TokenizeArgs {
  std::string model, text_file, prompt;  // text_file empty: encode the prompt ("" allowed)
  bool json_out = false, decode = false;
};

/// The text to encode: the prompt, or the file's bytes (which must be UTF-8).
std::string input_text(const TokenizeArgs& a) {
  if (a.text_file.empty()) return a.prompt;
  std::string text = read_file(a.text_file);
  const size_t bad = hf::find_invalid_utf8(text);
  if (bad != std::string::npos)
    throw FormatError(msg("tokenize", "{}: invalid UTF-8 at byte {} (0x{:02X}); the text must be "
                          "UTF-8", a.text_file, bad, uint8_t(text[bad])));
  return text;
}

/// The tokenizer of --model and the vocab_size it is checked against: config.json's when the
/// folder has one. A tokenizer.json alone needs no model (its own vocabulary is the size); a
/// tokenizer.bin does, since llama2.c's file does not store its token count.
std::pair<std::unique_ptr<TextTokenizer>, int64_t> tokenizer_of(const std::string& model) {
  const fs::path config_path = fs::path(model) / "config.json";
  if (fs::exists(config_path)) {
    const int64_t V =
        config_from_hf_json(read_json_file(config_path), config_path.string()).vocab_size;
    return {load_tokenizer(model, V), V};
  }
  if (!fs::exists(fs::path(model) / "tokenizer.json"))
    throw FormatError(msg("tokenize", "--model {}: no config.json, and no tokenizer.json to read "
                          "alone (expected config.json beside tokenizer.bin: llama2.c's file "
                          "does not store its token count)", model));
  HfTokenizer hf = HfTokenizer::from_folder(model);
  const int64_t V = hf.vocab_size();
  return {make_text_tokenizer(std::move(hf), fs::path(model) / "tokenizer.json"), V};
}

void run(const TokenizeArgs& a) {
  const auto [tok, vocab_size] = tokenizer_of(a.model);
  const std::vector<int64_t> ids = tok->encode(input_text(a), /*add_special_tokens=*/true);
  const std::string back = a.decode ? tok->decode(ids, /*skip_special_tokens=*/true) : "";
  if (a.json_out) {
    json out = {{"model", a.model}, {"tokenizer", tok->kind()}, {"vocab_size", vocab_size},
                {"tokens", ids.size()}, {"ids", ids}};
    if (a.decode) out["text"] = back;
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  fmt::print("{}\n", fmt::join(ids, " "));
  if (a.decode) fmt::print("{}\n", back);
}

RegisterCommand reg(16, [](CLI::App& app) {
  auto* s = app.add_subcommand("tokenize", "Print the token ids of a text (and with --decode the "
                                           "text back) with a checkpoint's tokenizer");
  auto a = std::make_shared<TokenizeArgs>();
  s->add_option("--model", a->model, "Checkpoint folder (config.json, tokenizer.json or "
                                     "tokenizer.bin)")->required();
  auto* text = s->add_option("--text", a->text_file, "UTF-8 text file to encode (whole)");
  auto* prompt = s->add_option("--prompt", a->prompt, "Text to encode");
  text->excludes(prompt);
  s->add_flag("--json", a->json_out, "Print one JSON object: tokenizer, vocab_size, tokens, ids "
                                     "(and text with --decode)");
  s->add_flag("--decode", a->decode, "Also print the ids decoded back to text (special tokens "
                                     "skipped)");
  s->callback([a, text, prompt] {
    if (text->count() == 0 && prompt->count() == 0)
      throw ConfigError(msg("tokenize", "give the text with --text FILE or --prompt TEXT"));
    run(*a);
  });
});

}  // namespace
}  // namespace ac::cli
