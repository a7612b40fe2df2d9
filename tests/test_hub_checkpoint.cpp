// A Hub-shaped checkpoint end to end (tests/hub_checkpoint.h: Llama 3 architecture, bf16 weights
// in two shards with an index, the real Llama 3 tokenizer files, rope_scaling llama3, GQA):
//   LoadsWithItsTokenizer: the shards load to the bf16 weights, the config keeps GQA and llama3
//     RoPE, and `autocompress tokenize` gives Llama 3's own ids for a known text;
//   CompressOnAGpuScenarioWithText: `compress --data-text` (Moby Dick) on a spec-derived GPU
//     scenario (predicted only): the report names the data and the tokenizer, the result is
//     smaller, meets the limit by the cost model, and carries the tokenizer files byte for byte;
//   CompressOnTheCpuThenItsGgufRunsInLlamaCpp: the same on this CPU (profiled and measured, the
//     native engine as cpu-local, TPOT at most 0.9 x the teacher's) at small budgets; `export --format gguf` of the result loads in llama.cpp, which
//     tokenizes the hard cases as ours and continues a prompt greedily as our engine does.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "common/json_io.h"
#include "hub_checkpoint.h"
#include "common/runtime.h"
#include "io/checkpoint.h"
#include "io/hf_tokenizer.h"
#include "model/llama.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// Runs a shell command and returns its stdout; fails the test on a non-zero exit.
std::string output_of(const std::string& cmd) {
  const ac::test::CommandOutput r = ac::test::run_command(cmd);
  EXPECT_EQ(r.status, 0) << cmd;
  return r.out;
}

/// The opening of Moby Dick, at least `bytes` long and cut after a paragraph, written to `dir`.
fs::path moby_dick_opening(const fs::path& dir, size_t bytes) {
  const std::string book = slurp(ac::test::moby_dick_file());
  const fs::path text = dir / fmt::format("moby-dick-{}.txt", bytes);
  write_file_atomic(text, book.substr(0, book.find("\n\n", bytes) + 2));
  return text;
}

/// A scenario file `dir`/NAME.json: batch 1, `tokens` prompt and output tokens, weights and KV
/// cache in `dtype`, one limit: TPOT at most `fraction` of the teacher's.
fs::path write_tpot_scenario(const fs::path& dir, const std::string& name, const std::string& device,
                             const std::string& engine, int64_t tokens, const std::string& dtype,
                             double fraction) {
  const fs::path path = dir / (name + ".json");
  write_json_file(path, {{"name", name}, {"device", device}, {"engine", engine},
                         {"workload", {{"prompt_tokens", tokens}, {"output_tokens", tokens},
                                       {"batch_size", 1}, {"weight_dtype", dtype},
                                       {"kv_cache_dtype", dtype}, {"tensor_parallel", 1}}},
                         {"limits", {{"tpot_ms", {{"fraction_of_teacher", fraction}}}}}});
  return path;
}

// Writes the checkpoint into $AC_HUB_CHECKPOINT_OUT and stops (to try the CLI on it by hand).
TEST(HubCheckpoint, WriteForManualUse) {
  const char* out = std::getenv("AC_HUB_CHECKPOINT_OUT");
  if (!out) GTEST_SKIP() << "set AC_HUB_CHECKPOINT_OUT=DIR to write the checkpoint there";
  ac::test::write_hub_checkpoint(out);
}

TEST(HubCheckpoint, LoadsWithItsTokenizer) {
  TempDir tmp;
  const fs::path dir = tmp.path / "hub";
  const ModelConfig c = ac::test::write_hub_checkpoint(dir);
  ASSERT_FALSE(testing::Test::HasFailure());
  const LlamaModel m = load_checkpoint(dir);
  EXPECT_EQ(m.config.layers.at(0).num_key_value_heads, 2);
  EXPECT_EQ(m.config.vocab_size, 128256);
  ASSERT_TRUE(m.config.rope_scaling.has_value());
  EXPECT_EQ(m.config.rope_scaling->raw["rope_type"], "llama3");
  // The loaded fp32 weights are the bf16 values of the shards, exactly.
  const ModelWeights w = random_weights(c, 7, 0.05);
  EXPECT_TRUE(at::equal(m.weights.layers[3].k_proj, w.layers[3].k_proj.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_TRUE(at::equal(m.weights.lm_head, w.lm_head.to(at::kBFloat16).to(at::kFloat)));
  // Llama 3's ids: "Hello" 9906, " world" 1917. No BOS: this tokenizer.json (the first Llama 3
  // release's) has a ByteLevel post-processor only and tokenizer_config.json no add_bos_token,
  // so transformers adds none either.
  const std::string ids = output_of(fmt::format("{} tokenize --model {} --prompt 'Hello world'",
                                                ac::test::cli_bin(), dir.string()));
  EXPECT_EQ(ids, "9906 1917\n");
}

TEST(HubCheckpoint, CompressOnAGpuScenarioWithText) {
  TempDir tmp;
  const fs::path dir = tmp.path / "hub", run = tmp.path / "run";
  ac::test::write_hub_checkpoint(dir);
  ASSERT_TRUE(fs::exists(ac::test::moby_dick_file())) << "run scripts/setup_tokenizers.sh";
  ASSERT_FALSE(testing::Test::HasFailure());
  // The book's first 100 KB (cut after a paragraph): held out, its last 5% is about 1,200 tokens,
  // which the three evaluations over a 128256-token vocabulary score in seconds.
  const fs::path text = moby_dick_opening(tmp.path, 100000);
  // A GeForce running llama.cpp, costed by its spec sheet: TPOT at most 0.8 x the teacher's.
  const fs::path scenario = write_tpot_scenario(tmp.path, "rtx5070-hub", "rtx-5070", "llama.cpp",
                                                128, "fp16", 0.8);
  const int rc = std::system(fmt::format(
      "AC_QUIET=1 {} compress --model {} --scenario {} --method autocompress --out {} "
      "--data-text {} --seq-len 64 --calibration-sequences 8 --distill-tokens 2048 "
      "--distill-batch-size 4 --task-items 20 {} > {} 2>&1", ac::test::cli_bin(), dir.string(),
      scenario.string(), run.string(), text.string(), ac::test::kOneSearch,
      (tmp.path / "compress.log").string()).c_str());
  ASSERT_EQ(rc, 0) << slurp(tmp.path / "compress.log");
  const json r = parse_json_text(slurp(run / "report.json"), "report.json");
  const json& src = r["data"]["source"];
  EXPECT_EQ(src["source"], "text");
  EXPECT_EQ(src["tokenizer"], "tokenizer.json (byte-level BPE)");
  EXPECT_EQ(src["path"], text.string());
  EXPECT_NE(slurp(run / "report.md").find("tokenized with tokenizer.json (byte-level BPE)"),
            std::string::npos);
  EXPECT_FALSE(r["not_measured"].get<std::string>().empty());
  // The llama_cpp stage takes its vocabulary from tokenizer.json (io/gguf_vocab.h) and runs
  // both models in llama.cpp, whatever the search removed (a layer 0 without attention is one
  // zero head there: export/gguf_model.h).
  const json& lc = r["llama_cpp"];
  EXPECT_TRUE(lc.value("ran", false)) << lc.dump();
  EXPECT_EQ(r["compressed"]["limits_predicted"], "");  // met by the cost model
  EXPECT_LT(r["compressed"]["parameters"].get<int64_t>(), r["teacher"]["parameters"].get<int64_t>());
  EXPECT_GT(r["compressed"]["eval"]["kl_to_teacher"].get<double>(), 0);
  EXPECT_TRUE(r["teacher"]["eval"].contains("bits_per_byte"));
  // The result is a checkpoint of the same family with the user's tokenizer, byte for byte.
  const LlamaModel out = load_checkpoint(run / "model");
  EXPECT_EQ(out.config.vocab_size, 128256);
  ASSERT_TRUE(out.config.rope_scaling.has_value());
  EXPECT_EQ(out.config.rope_scaling->raw["rope_type"], "llama3");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(slurp(run / "model" / f), slurp(dir / f)) << f;
}

TEST(HubCheckpoint, CompressOnTheCpuThenItsGgufRunsInLlamaCpp) {
  init_torch_threads();
  TempDir tmp;
  const fs::path dir = tmp.path / "hub", run = tmp.path / "run", out = tmp.path / "export";
  ac::test::write_hub_checkpoint(dir);
  ASSERT_TRUE(fs::exists(ac::test::moby_dick_file())) << "run scripts/setup_tokenizers.sh";
  ASSERT_FALSE(testing::Test::HasFailure());
  const fs::path text = moby_dick_opening(tmp.path, 60000);
  // This CPU and the native engine as cpu-local, at shorter prompts and outputs, with a limit a
  // Llama 3 vocabulary leaves room for: its [128256, 256] head is most of each decode step.
  const fs::path scenario = write_tpot_scenario(tmp.path, "cpu-hub", "cpu", "native", 32, "fp32", 0.9);
  const int rc = std::system(fmt::format(
      "AC_QUIET=1 {0} compress --model {1} --scenario {6} --method autocompress --out {2} "
      "--data-text {3} --seq-len 32 --calibration-sequences 8 --distill-tokens 512 "
      "--distill-batch-size 2 --task-items 0 --fit-attempts 1 {7} > {4} 2>&1 && "
      "AC_QUIET=1 {0} export --model {2}/model --out {5} --format gguf >> {4} 2>&1",
      ac::test::cli_bin(), dir.string(), run.string(), text.string(),
      (tmp.path / "compress.log").string(), out.string(), scenario.string(),
      ac::test::kOneSearch).c_str());
  ASSERT_EQ(rc, 0) << slurp(tmp.path / "compress.log");
  const json r = parse_json_text(slurp(run / "report.json"), "report.json");
  EXPECT_EQ(r["data"]["source"]["source"], "text");
  EXPECT_LT(r["compressed"]["parameters"].get<int64_t>(), r["teacher"]["parameters"].get<int64_t>());
  EXPECT_TRUE(r["llama_cpp"].value("ran", false)) << r["llama_cpp"].dump();

  // The exported GGUF in llama.cpp: the hard cases tokenize as ours, greedy decoding as ours.
  const fs::path gguf = out / "model.gguf";
  const HfTokenizer tok = HfTokenizer::from_folder(run / "model");
  const std::vector<std::string> texts = ac::test::hard_cases_of(
      slurp(ac::test::source_dir() / "tests/tokenizers/hard_cases.txt"));
  const auto theirs = ac::test::llamacpp_tokenize(gguf, texts, tmp.path);
  ASSERT_EQ(theirs.size(), texts.size());
  size_t identical = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const bool same = tok.encode(texts[i], /*add_special_tokens=*/false) == theirs[i];
    identical += same;
    EXPECT_TRUE(same) << "hard case " << i << ": " << texts[i].substr(0, 120);
  }
  std::printf("[hub] compressed model's GGUF: %zu/%zu hard cases tokenized as ours by llama.cpp\n",
              identical, texts.size());
  const LlamaModel m = load_checkpoint(run / "model");
  const std::string prompt_text = "Call me Ishmael. Some years ago";
  const std::vector<int64_t> prompt = tok.encode(prompt_text, /*add_special_tokens=*/true);
  GenerateOptions g;
  g.max_new_tokens = 16;
  const std::vector<int64_t> ours = generate(m, prompt, g);
  const json lc = ac::test::run_llamacpp(gguf, prompt_text, prompt, 16, tmp.path / "greedy.json");
  EXPECT_EQ(lc["continuation"].get<std::vector<int64_t>>(), ours);
  std::printf("[hub] greedy: ours %s\n[hub] greedy: llama.cpp %s\n", tok.decode(ours, false).c_str(),
              lc["text"].get<std::string>().c_str());
}

}  // namespace
