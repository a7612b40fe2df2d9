// A synthetic GGUF vocabulary for tests that write GGUFs of random models (export_fixture.h's
// users, test_llamacpp_engine.cpp, test_judge.cpp).
#pragma once
#include <fmt/format.h>

#include <string>

#include "io/gguf_vocab.h"

namespace ac::test {

/// A SentencePiece-style vocabulary with llama2.c's layout: <unk> <s> </s>, 256 byte tokens,
/// then V - 259 pieces (some with spaces).
inline GgufVocab synthetic_vocab(int64_t V) {
  GgufVocab v;
  for (int64_t id = 0; id < V; ++id) {
    std::string t;
    int64_t type = 1;
    if (id == 0) t = "<unk>", type = 2;
    else if (id == 1) t = "<s>", type = 3;
    else if (id == 2) t = "</s>", type = 3;
    else if (id <= 258) t = fmt::format("<0x{:02X}>", id - 3), type = 6;
    else if (id == 259) t = "\xE2\x96\x81";  // the space piece (the dummy prefix)
    else t = fmt::format("\xE2\x96\x81w{}", id);
    v.tokens.push_back(t);
    v.scores.push_back(-float(id));
    v.types.push_back(type);
  }
  return v;
}

}  // namespace ac::test
