// Hugging Face tokenizer.json (io/hf_tokenizer.h). Input: the file's text. An accepted tokenizer
// must encode text (valid UTF-8, with and without special tokens) to ids inside its vocabulary,
// decode them without failing, and decode every id it holds; text that is not UTF-8 may only be
// refused with a typed error.
#include "common/json_io.h"
#include "fuzz_util.h"
#include "io/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "tokenizer.json";
  ac::fuzz::expect_ok_or_error([&] {
    const ac::json j = ac::parse_json_text(ac::fuzz::as_text(data, size), file);
    const ac::HfTokenizer t = ac::HfTokenizer::from_json(j, ac::json(), file);
    for (const char* text : {"Once upon a time", " a  b\n\n\tc", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac 1234567",
                             "<s> <|begin_of_text|> \xe4\xb8\xad\xe6\x96\x87", ""}) {
      for (bool special : {false, true}) {
        const std::vector<int64_t> ids = t.encode(text, special);
        for (int64_t id : ids) AC_FUZZ_ASSERT(id >= 0 && id < t.vocab_size());
        (void)t.decode(ids, /*skip_special_tokens=*/false);
        (void)t.decode(ids, /*skip_special_tokens=*/true);
      }
    }
    std::vector<int64_t> all;
    for (int64_t id = 0; id < t.vocab_size() && id < 4096; ++id) all.push_back(id);
    (void)t.decode(all, false);
  }, file);
  try {  // not UTF-8: refused by a typed error, never a crash
    const ac::json j = ac::parse_json_text(ac::fuzz::as_text(data, size), file);
    (void)ac::HfTokenizer::from_json(j, ac::json(), file).encode("\xff\xfe bad \xc3", true);
  } catch (const ac::Error&) {
  }
  return 0;
}
