// Our exports read back by the field's code. `autocompress export` writes small random models
// (a homogeneous Llama and a heterogeneous DeciLM) in every format and dtype, and
// tests/golden/judge_exports.py reads the folders with gguf-py's GGUFReader and
// gguf.quants.dequantize and with Hugging Face transformers (versions pinned in
// tests/golden/requirements-hf.txt; docs/benchmarks.md, "gguf-py and transformers read our
// exports", has what it compares and the worst differences measured):
//
//   GgufPyReadsEveryGgufWeWrite: f32, f16, bf16, q8_0 and q4_0 GGUFs of both models (`llama` and
//     `deci`, tokenizer included): every metadata key and its type against what our config.json
//     and tokenizer.bin say, every tensor's name, type and shape, and its values dequantized by
//     gguf-py against the fp32 weights exported (f32, f16, bf16: exactly the source rounded to the
//     type; q8_0, q4_0: within ggml's quantization error bound per block);
//   TransformersReadsOurHfAndDeciLMExports: the homogeneous HF export (f32 and bf16) loaded with
//     AutoModelForCausalLM.from_pretrained in float32 gives our logits (max |diff| / max |logit|
//     <= 1e-5, tests/test_hf_golden.cpp says why); the DeciLM export's config.json is read by
//     AutoConfig.from_pretrained(trust_remote_code=True) through the configuration_decilm.py the
//     export writes, with every layer's shape as ours;
//   TransformersReadsOurPrunedMoeExports: a Qwen3-MoE and a Mixtral fixture (tests/golden/hf-moe/)
//     pruned to 3 experts of width 8, top-2, in every sparse layer and written by
//     save_moe_checkpoint load in Qwen3MoeForCausalLM / MixtralForCausalLM with no missing or
//     unexpected tensor and give our logits (tests/golden/judge_moe_export.py, 1e-5 relative);
//   TransformersReadsOurPrunedNemotronHExports: the two Nemotron-H fixtures
//     (tests/golden/hf-nemotron-h/) pruned the same way in every layer of a kind (Mamba heads and
//     head_dim, attention heads, MLP, expert and shared expert widths, experts where the router
//     has one group, a removed layer) and written by save_nemotron_h_checkpoint load in
//     NemotronHForCausalLM with no missing or unexpected tensor and give our logits
//     (tests/golden/judge_moe_export.py, 1e-5 relative to the class run in float64; the float32
//     run's difference is printed);
//   LlamaCppConverterAgreesWithOurNemotronHGguf: llama.cpp's own convert_hf_to_gguf.py (from the
//     source node-llama-cpp ships) writes the same tensors, bytes and keys as `export --format
//     gguf` for a tiny NemotronH MoE with Llama 3's tokenizer, and llama.cpp continues our GGUF of
//     it and of a hybrid with MLP layers as transformers' generate() does
//     (tests/golden/judge_nemotron_h_gguf.py);
//   LmEvalAgreesWithOurTaskScorer: lm-evaluation-harness (tests/golden/judge_lm_eval.py) runs
//     40 items of each task family (make-tasks on stories the teacher samples) as local tasks
//     with `--model hf` on the CPU, on stories15M and on a depth-pruned stories15M exported as
//     HF; every request's token ids, loglikelihood (within 1e-3 nats) and is_greedy, and every
//     item's acc / acc_norm equal ours from `eval --samples-out` (docs/eval.md, "Agreement with
//     lm-evaluation-harness").
//
// The judge's Python is the environment of scripts/setup_torch_venv.sh ($AC_TORCH_VENV, default
// ~/.cache/autocompress/torch-2.11). Where it is absent or lacks a package (CI has no PyPI), each
// test is SKIPPED saying so, and ctest reports it skipped (tests/labels.cmake, label `judge`).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "export/gguf_model.h"
#include "export/moe_hf_export.h"
#include "export/nemotron_h_export.h"
#include "importance/moe_importance.h"
#include "importance/nemotron_h_importance.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/llama.h"
#include "prune/moe_prune.h"
#include "prune/nemotron_h_prune.h"
#include "gguf_fixture.h"
#include "test_util.h"

namespace ac {
namespace {
using json = nlohmann::json;
using test::TempDir;

/// The judge's Python, or "" with the reason in `why`: $AC_TORCH_VENV/bin/python, else
/// ~/.cache/autocompress/torch-2.11/bin/python, which must import gguf, transformers, torch,
/// safetensors and numpy.
std::string judge_python(std::string* why) {
  const char* venv = std::getenv("AC_TORCH_VENV");
  const char* home = std::getenv("HOME");
  const fs::path dir = venv ? fs::path(venv)
                            : fs::path(home ? home : "/root") / ".cache/autocompress/torch-2.11";
  const fs::path python = dir / "bin/python";
  if (!fs::exists(python)) {
    *why = fmt::format("{} does not exist: the judge needs the Python environment of "
                       "scripts/setup_torch_venv.sh (set AC_TORCH_VENV to use another one)",
                       python.string());
    return "";
  }
  const std::string probe = fmt::format(
      "'{}' -c 'import gguf, transformers, torch, safetensors, numpy' > /dev/null 2>&1",
      python.string());
  if (std::system(probe.c_str()) != 0) {
    *why = fmt::format("{} cannot import gguf, transformers, torch, safetensors and numpy: "
                       "pip install -r tests/golden/requirements-hf.txt into it",
                       python.string());
    return "";
  }
  return python.string();
}

/// Whether `python` imports `module`; otherwise `why` says what to install.
bool python_imports(const std::string& python, const char* module, std::string* why) {
  const std::string probe = fmt::format("'{}' -c 'import {}' > /dev/null 2>&1", python, module);
  if (std::system(probe.c_str()) == 0) return true;
  *why = fmt::format("{} cannot import {}: pip install -r tests/golden/requirements-hf.txt into it",
                     python, module);
  return false;
}

#define AC_JUDGE_PYTHON(var)                                     \
  std::string var##_why;                                         \
  const std::string var = judge_python(&var##_why);              \
  if (var.empty()) GTEST_SKIP() << "judge: " << var##_why

/// A checkpoint folder of a random model with a llama2.c tokenizer.bin (synthetic vocabulary).
fs::path write_source(const fs::path& dir, const ModelConfig& c, uint64_t seed) {
  fs::create_directories(dir);
  save_checkpoint(dir, LlamaModel{c, random_weights(c, seed, 0.05)});
  write_file_atomic(dir / "tokenizer.bin",
                    llama2c_tokenizer_bytes(test::synthetic_vocab(c.vocab_size), "judge"));
  return dir;
}

/// Homogeneous Llama: GQA 4/2, head_dim 24 (4 x 24 != 64), FFN width 136 (not a multiple of 32:
/// ffn_down falls back to F16 in q8_0 / q4_0), untied head, linear RoPE scaling.
ModelConfig llama_config() {
  ModelConfig c = ModelConfig::uniform(/*V=*/300, /*D=*/64, /*L=*/2,
                                       LayerConfig{/*H=*/4, /*G=*/2, /*Hd=*/24, /*F=*/136});
  c.rope_theta = 1e6;
  RopeScaling s;
  s.rope_type = "linear";
  s.factor = 2.0;
  s.raw = {{"rope_type", "linear"}, {"factor", 2.0}};
  c.rope_scaling = s;
  c.max_position_embeddings = 512;
  return c;
}

/// Heterogeneous DeciLM: D 96, H 4, Hd 16; layer 0 attention-free (a one-head zero stub in
/// GGUF), layer 1 FFN-free (a width-1 zero stub), GQA 4/2 and 4/1, FFN widths 256 / 768 / 512;
/// tied head; llama3 RoPE (rope_freqs.weight).
ModelConfig deci_config() {
  const LayerConfig base{/*H=*/4, /*G=*/4, /*Hd=*/16, /*F=*/512};
  ModelConfig c = ModelConfig::uniform(/*V=*/300, /*D=*/96, /*L=*/5, base);
  c.layers[0].attention_no_op = true;
  c.layers[0].num_attention_heads = c.layers[0].num_key_value_heads = 0;
  c.layers[1].ffn_no_op = true;
  c.layers[1].intermediate_size = 0;
  c.layers[2].num_key_value_heads = 2;
  c.layers[2].intermediate_size = 256;
  c.layers[3].intermediate_size = 768;
  c.layers[4].num_key_value_heads = 1;
  c.tie_word_embeddings = true;
  c.rope_theta = 500000.0;
  c.rope_scaling = test::llama3_rope_scaling(/*original_max_position_embeddings=*/16);
  c.max_position_embeddings = 4096;
  return c;
}

/// `autocompress export` of `src` into `out`; fails the test when the CLI fails.
void cli_export(const fs::path& src, const fs::path& out, const std::string& format,
                const std::string& dtype) {
  test::run_or_fail(fmt::format("{} export --model '{}' --out '{}' --format {} --dtype {} "
                                "> /dev/null",
                                test::cli_bin(), src.string(), out.string(), format, dtype));
}

/// Runs tests/golden/`script` on `args`, prints what it printed, and returns its exit status.
int run_judge(const std::string& python, const std::string& args, const fs::path& log,
              const char* script = "judge_exports.py") {
  const std::string cmd =
      fmt::format("HF_HUB_OFFLINE=1 '{}' '{}' {} > '{}' 2>&1", python,
                  (test::source_dir() / "tests/golden" / script).string(), args, log.string());
  const int rc = std::system(cmd.c_str());
  std::printf("%s", read_file(log).c_str());
  return rc;
}

const char* const kGgufDtypes[] = {"f32", "f16", "bf16", "q8_0", "q4_0"};

}  // namespace

TEST(Judge, GgufPyReadsEveryGgufWeWrite) {
  AC_JUDGE_PYTHON(python);
  TempDir tmp;
  std::string exports;
  for (const auto& [name, config] : {std::pair<std::string, ModelConfig>{"llama", llama_config()},
                                     {"deci", deci_config()}}) {
    const fs::path src = write_source(tmp.path / ("src-" + name), config, 7);
    for (const char* dtype : kGgufDtypes) {
      const fs::path out = tmp.path / fmt::format("{}-gguf-{}", name, dtype);
      cli_export(src, out, "gguf", dtype);
      exports += " '" + out.string() + "'";
    }
  }
  const fs::path summary = tmp.path / "summary.json";
  EXPECT_EQ(run_judge(python, fmt::format("--summary '{}'{}", summary.string(), exports),
                      tmp.path / "judge.log"), 0);
  // Every file was judged: 2 architectures x 5 dtypes, each with its keys and tensors.
  const json s = read_json_file(summary);
  ASSERT_EQ(s["gguf"].size(), 10u) << s.dump(1);
  for (const json& g : s["gguf"]) {
    EXPECT_GT(g["keys_compared"].get<int64_t>(), 25) << g.dump();
    EXPECT_GT(g["tensors_compared"].get<int64_t>(), 15) << g.dump();
  }
}

TEST(Judge, TransformersReadsOurHfAndDeciLMExports) {
  AC_JUDGE_PYTHON(python);
  init_torch_threads();
  at::NoGradGuard no_grad;
  TempDir tmp;
  const ModelConfig c = llama_config();
  const fs::path src = write_source(tmp.path / "src-llama", c, 11);
  const at::Tensor tokens = test::random_tokens(/*B=*/2, /*T=*/12, c.vocab_size, 3);
  std::string args;
  for (const char* dtype : {"f32", "bf16"}) {
    const fs::path out = tmp.path / fmt::format("llama-hf-{}", dtype);
    cli_export(src, out, "hf", dtype);
    // Our logits: the export loaded by our reader, one forward over the rows.
    const at::Tensor logits = load_checkpoint(out).forward(tokens);  // [B, T, V]
    const fs::path ours = tmp.path / fmt::format("ours-{}.safetensors", dtype);
    save_safetensors(ours, {{"tokens", tokens}, {"logits", logits.contiguous()}});
    args += fmt::format(" --logits '{}={}' '{}'", out.string(), ours.string(), out.string());
  }
  const fs::path deci_src = write_source(tmp.path / "src-deci", deci_config(), 12);
  const fs::path deci = tmp.path / "deci-hf-f32";
  cli_export(deci_src, deci, "hf", "f32");
  const json config = read_json_file(deci / "config.json");
  EXPECT_EQ(config["auto_map"]["AutoConfig"], "configuration_decilm.DeciLMConfig");
  EXPECT_TRUE(fs::exists(deci / "configuration_decilm.py"));
  args += " '" + deci.string() + "'";
  const fs::path summary = tmp.path / "summary.json";
  EXPECT_EQ(run_judge(python, fmt::format("--summary '{}'{}", summary.string(), args),
                      tmp.path / "judge.log"), 0);
  const json s = read_json_file(summary);
  EXPECT_EQ(s["hf_logits"].size(), 2u) << s.dump(1);
  EXPECT_EQ(s["decilm_config"].size(), 1u) << s.dump(1);
}

TEST(Judge, TransformersReadsOurPrunedMoeExports) {
  AC_JUDGE_PYTHON(python);
  init_torch_threads();
  at::NoGradGuard no_grad;
  TempDir tmp;
  std::string args;
  for (const char* name : {"qwen3moe-top3-step2-bf16-sharded", "mixtral-top2-fp32"}) {
    const MoeModel m = load_moe_checkpoint(test::source_dir() / "tests/golden/hf-moe" / name);
    const at::Tensor tokens = test::random_tokens(/*B=*/2, /*T=*/13, m.config.vocab_size, 5);
    // Every sparse layer to 3 experts of width 8, top-2: one expert count for config.json.
    ModelConfig target = m.config;
    for (LayerConfig& l : target.layers)
      if (l.has_moe()) {
        l.moe->num_experts = 3;
        l.moe->num_experts_per_tok = 2;
        l.moe->moe_intermediate_size = 8;
      }
    const MoeModel pruned = prune_moe_model(m, compute_moe_importance(m, {tokens}), target);
    const fs::path out = tmp.path / name;
    save_moe_checkpoint(out, pruned);
    const fs::path ours = tmp.path / fmt::format("ours-{}.safetensors", name);
    save_safetensors(ours, {{"tokens", tokens}, {"logits", pruned.forward(tokens).contiguous()}});
    args += fmt::format(" '{}={}'", out.string(), ours.string());
  }
  EXPECT_EQ(run_judge(python, args, tmp.path / "judge.log", "judge_moe_export.py"), 0);
}

TEST(Judge, LlamaCppConverterAgreesWithOurNemotronHGguf) {
  AC_JUDGE_PYTHON(python);
  TempDir tmp;
  EXPECT_EQ(run_judge(python, fmt::format("--cli '{}' --work '{}'", test::cli_bin(),
                                          tmp.path.string()),
                      tmp.path / "judge.log", "judge_nemotron_h_gguf.py"),
            0);
}

TEST(Judge, TransformersReadsOurPrunedNemotronHExports) {
  AC_JUDGE_PYTHON(python);
  init_torch_threads();
  at::NoGradGuard no_grad;
  TempDir tmp;
  std::string args;
  for (const char* name : {"nemotronh-mix-fp32", "nemotronh-latent-bf16-sharded"}) {
    const NemotronHModel m =
        load_nemotron_h_checkpoint(test::source_dir() / "tests/golden/hf-nemotron-h" / name);
    const at::Tensor tokens = test::random_tokens(/*B=*/2, /*T=*/13, m.config.vocab_size, 5);
    // Every layer of a kind to the same sizes, so that config.json's one set of fields holds
    // them (NemotronHForCausalLM has no per-layer form); the last Mamba layer removed.
    ModelConfig target = m.config;
    int64_t last_mamba = -1;
    for (size_t i = 0; i < target.layers.size(); ++i) {
      LayerConfig& l = target.layers[i];
      if (l.has_mamba()) {
        l.mamba->mamba_num_heads = l.mamba->n_groups * std::max<int64_t>(
            1, l.mamba->mamba_num_heads / l.mamba->n_groups - 1);
        l.mamba->mamba_head_dim -= 1;
        last_mamba = int64_t(i);
      } else if (l.has_attention()) {
        l.num_attention_heads -= l.num_key_value_heads;  // one query head fewer a group
      } else if (l.has_ffn()) {
        l.intermediate_size /= 2;
      } else if (l.has_moe()) {
        if (m.router.n_group == 1) l.moe->num_experts -= 2;
        l.moe->num_experts_per_tok = 1;
        l.moe->moe_intermediate_size /= 2;
        l.moe->shared_expert_intermediate_size /= 2;
      }
    }
    target.layers[size_t(last_mamba)] = LayerConfig{};
    target.layers[size_t(last_mamba)].attention_no_op = true;
    target.layers[size_t(last_mamba)].ffn_no_op = true;
    const NemotronHModel pruned =
        prune_nemotron_h_model(m, compute_nemotron_h_importance(m, {tokens}), target);
    const fs::path out = tmp.path / name;
    save_nemotron_h_checkpoint(out, pruned);
    EXPECT_EQ(read_json_file(out / "config.json")["model_type"], "nemotron_h");
    const fs::path ours = tmp.path / fmt::format("ours-{}.safetensors", name);
    save_safetensors(ours, {{"tokens", tokens}, {"logits", pruned.forward(tokens).contiguous()}});
    args += fmt::format(" '{}={}'", out.string(), ours.string());
  }
  EXPECT_EQ(run_judge(python, args, tmp.path / "judge.log", "judge_moe_export.py"), 0);
}

TEST(Judge, LmEvalAgreesWithOurTaskScorer) {
  AC_JUDGE_PYTHON(python);
  std::string why;
  if (!python_imports(python, "lm_eval", &why)) GTEST_SKIP() << "judge: " << why;
  TempDir tmp;
  const fs::path teacher = test::import_stories15m(tmp.path);
  const std::string cli = test::cli_bin(), dir = tmp.path.string();
  test::run_or_fail(fmt::format("AC_QUIET=1 {0} sample --model '{1}' --count 16 --seed 77 --out "
                                "'{2}/held.tokens' > /dev/null && AC_QUIET=1 {0} make-tasks "
                                "--model '{1}' --data '{2}/held.tokens' --out '{2}/tasks' --seed 1 "
                                "--cloze-items 40 --ending-items 40 --character-items 40 > /dev/null",
                                cli, teacher.string(), dir));
  // The compressed model: stories15M without blocks 2 and 3 (depth pruning), exported as HF.
  LlamaModel pruned = load_checkpoint(teacher);
  pruned.config.layers.erase(pruned.config.layers.begin() + 2, pruned.config.layers.begin() + 4);
  pruned.weights.layers.erase(pruned.weights.layers.begin() + 2,
                              pruned.weights.layers.begin() + 4);
  fs::create_directories(tmp.path / "pruned");
  save_checkpoint(tmp.path / "pruned", pruned);
  fs::copy_file(teacher / "tokenizer.bin", tmp.path / "pruned/tokenizer.bin");
  cli_export(tmp.path / "pruned", tmp.path / "pruned-hf", "hf", "f32");
  const fs::path summary = tmp.path / "summary.json";
  EXPECT_EQ(run_judge(python,
                      fmt::format("--cli '{0}' --work '{1}/judge' --limit 40 --summary '{2}' "
                                  "--model teacher='{3}' --model pruned='{1}/pruned-hf' "
                                  "'{1}/tasks/cloze.jsonl' '{1}/tasks/character.jsonl' "
                                  "'{1}/tasks/story_ending.jsonl'",
                                  cli, dir, summary.string(), teacher.string()),
                      tmp.path / "judge.log", "judge_lm_eval.py"),
            0);
  // Every family of both models was compared, item for item.
  const json s = read_json_file(summary);
  ASSERT_EQ(s["tasks"].size(), 6u) << s.dump(1);
  for (const json& t : s["tasks"]) {
    EXPECT_EQ(t["items"], 40) << t.dump();
    EXPECT_EQ(t["tokens_equal"], t["requests"]) << t.dump();
    EXPECT_EQ(t["is_greedy_equal"], t["requests"]) << t.dump();
    EXPECT_EQ(t["acc_equal"].get<int64_t>() + int64_t(t["near_ties"].size()), 40) << t.dump();
  }
  EXPECT_TRUE(s["failures"].empty()) << s["failures"].dump(1);
}

}  // namespace ac
