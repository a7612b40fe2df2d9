// Golden tests of the forward pass against an independent float64 implementation
// (tests/golden/reference.py, python3-torch), on small random configs that cover GQA, qkv bias,
// an untied head, head_dim != hidden/heads, llama3 rope_scaling and heterogeneous blocks, and on
// the real stories15M. Plus KV-cache decode == full forward, and greedy generation of stories15M.
#include <fstream>

#include "common/error.h"
#include "common/runtime.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/llama.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;
using ac::test::random_tokens;

namespace {

// Runs the python reference on `m` (saved to a temp checkpoint) and returns float64 logits.
at::Tensor reference_logits(const LlamaModel& m, const at::Tensor& tokens, const fs::path& dir) {
  fs::create_directories(dir / "ckpt");
  save_checkpoint(dir / "ckpt", m);
  nlohmann::json tj = nlohmann::json::array();
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t t = 0; t < tokens.size(1); ++t) row.push_back(tokens[b][t].item<int64_t>());
    tj.push_back(row);
  }
  std::ofstream(dir / "tokens.json") << tj.dump();
  std::string cmd = ac::test::debian_python() + " " +
                    (ac::test::source_dir() / "tests/golden/reference.py").string() + " " +
                    (dir / "ckpt").string() + " " + (dir / "tokens.json").string() + " " +
                    (dir / "ref.safetensors").string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return SafetensorsFile(dir / "ref.safetensors").get("logits").clone();
}

// Relative error: max |ours - ref| / max |ref|; prints the largest difference.
double compare(const at::Tensor& ours, const at::Tensor& ref, const std::string& what) {
  double max_diff = (ours.to(at::kDouble) - ref).abs().max().item<double>();
  double scale = ref.abs().max().item<double>();
  std::printf("[golden] %s: largest |diff| %.3g, max |ref| %.3g, relative %.3g\n", what.c_str(),
              max_diff, scale, max_diff / scale);
  return max_diff / scale;
}

struct Case {
  std::string name;
  ModelConfig config;
};

std::vector<Case> golden_cases() {
  std::vector<Case> cases;
  LayerConfig gqa{/*H=*/8, /*G=*/2, /*Hd=*/8, /*F=*/37};
  ModelConfig c = ModelConfig::uniform(/*V=*/67, /*D=*/48, /*L=*/2, gqa);  // Hd 8 != 48/8
  c.tie_word_embeddings = false;
  cases.push_back({"gqa_untied_headdim", c});

  ModelConfig q = ModelConfig::uniform(61, 33, 2, LayerConfig{4, 4, 6, 29});
  q.attention_bias = true;
  q.tie_word_embeddings = true;
  q.model_type = "qwen2";
  q.architecture = "Qwen2ForCausalLM";
  q.rope_theta = 1000000.0;
  cases.push_back({"qkv_bias_tied", q});

  ModelConfig r = ModelConfig::uniform(50, 32, 2, LayerConfig{4, 1, 16, 40});
  // A short original context, so that every branch is hit at T = 31.
  r.rope_scaling = ac::test::llama3_rope_scaling(/*original_max_position_embeddings=*/16);
  r.rope_theta = 500000.0;
  cases.push_back({"llama3_rope", r});

  ModelConfig h = ModelConfig::uniform(40, 24, 4, LayerConfig{6, 3, 4, 30});
  h.layers[1].attention_no_op = true;
  h.layers[1].num_attention_heads = h.layers[1].num_key_value_heads = 0;
  h.layers[2].ffn_no_op = true;
  h.layers[2].intermediate_size = 0;
  h.layers[3].num_key_value_heads = 1;
  h.layers[3].intermediate_size = 17;
  cases.push_back({"heterogeneous", h});
  return cases;
}

}  // namespace

TEST(Golden, RandomConfigsMatchFloat64Reference) {
  ac::init_torch_threads();
  for (const auto& gc : golden_cases()) {
    TempDir tmp;
    LlamaModel m{gc.config, random_weights(gc.config, 7, 0.1)};
    at::Tensor tokens = random_tokens(2, 31, gc.config.vocab_size, 3);
    at::Tensor ours = m.forward(tokens);
    at::Tensor ref = reference_logits(m, tokens, tmp.path);
    ASSERT_EQ(ours.sizes(), ref.sizes());
    EXPECT_LT(compare(ours, ref, gc.name), 1e-4) << gc.name;
  }
}

TEST(Model, KVCacheDecodeEqualsFullForward) {
  for (const auto& gc : golden_cases()) {
    LlamaModel m{gc.config, random_weights(gc.config, 11, 0.1)};
    at::Tensor tokens = random_tokens(2, 12, gc.config.vocab_size, 5);
    at::Tensor full = m.forward(tokens);
    KVCache cache = KVCache::allocate(gc.config, 2, 12);
    ForwardOptions fo;
    fo.cache = &cache;
    std::vector<at::Tensor> parts{m.forward(tokens.narrow(1, 0, 5), fo)};
    for (int64_t t = 5; t < 12; ++t) parts.push_back(m.forward(tokens.narrow(1, t, 1), fo));
    double diff = (at::cat(parts, 1) - full).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << gc.name;
  }
}

TEST(Model, PaddingMaskedKeysAreIgnored) {
  ModelConfig c = golden_cases()[0].config;
  LlamaModel m{c, random_weights(c, 1, 0.1)};
  at::Tensor a = random_tokens(1, 6, c.vocab_size, 1);
  at::Tensor b = at::cat({a, random_tokens(1, 3, c.vocab_size, 2)}, 1);  // 3 extra tokens
  at::Tensor mask = at::ones({1, 9}, at::kLong);
  mask.narrow(1, 6, 3).zero_();
  ForwardOptions fo;
  fo.attention_mask = &mask;
  // Causal attention: the first 6 positions never see the 3 extra ones anyway; the masked
  // padding positions must still give finite values.
  at::Tensor out = m.forward(b, fo);
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  EXPECT_LT((out.narrow(1, 0, 6) - m.forward(a)).abs().max().item<double>(), 1e-5);
}

TEST(Model, BadTokensAreAClearError) {
  ModelConfig c = golden_cases()[0].config;
  LlamaModel m{c, random_weights(c, 1)};
  at::Tensor bad = at::full({1, 3}, c.vocab_size, at::kLong);
  try {
    m.forward(bad);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
}

TEST(Config, HfJsonRoundTripKeepsEveryField) {
  for (const auto& gc : golden_cases()) {
    nlohmann::json j = config_to_hf_json(gc.config);
    ModelConfig back = config_from_hf_json(j, "config.json");
    EXPECT_EQ(back.layers.size(), gc.config.layers.size());
    for (size_t i = 0; i < back.layers.size(); ++i)
      EXPECT_TRUE(back.layers[i] == gc.config.layers[i]) << gc.name << " layer " << i;
    EXPECT_EQ(back.hidden_size, gc.config.hidden_size);
    EXPECT_EQ(back.rope_theta, gc.config.rope_theta);
    EXPECT_EQ(back.tie_word_embeddings, gc.config.tie_word_embeddings);
    EXPECT_EQ(back.attention_bias, gc.config.attention_bias);
    EXPECT_EQ(back.rope_scaling.has_value(), gc.config.rope_scaling.has_value());
    EXPECT_EQ(config_to_hf_json(back), j) << gc.name;
  }
}

TEST(Config, ExplicitHeadDimIsNeverDerived) {
  nlohmann::json j = {{"vocab_size", 10},        {"hidden_size", 64}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 32},    {"intermediate_size", 8},
                      {"num_hidden_layers", 1}};
  EXPECT_EQ(config_from_hf_json(j, "config.json").layers[0].head_dim, 32);
  j["num_key_value_heads"] = 3;
  EXPECT_THROW(config_from_hf_json(j, "config.json"), FormatError);
}

namespace {
// A config.json as transformers 5 writes a Llama 3 (rope_parameters, dtype), shrunk.
nlohmann::json transformers5_llama3() {
  return {{"model_type", "llama"}, {"vocab_size", 10}, {"hidden_size", 16},
          {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"intermediate_size", 8},
          {"num_hidden_layers", 1}, {"max_position_embeddings", 4096}, {"dtype", "bfloat16"},
          {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                               {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}}};
}
}  // namespace

// transformers 5 moved rope_theta into "rope_parameters" and renamed torch_dtype "dtype"; the
// reader follows its precedence (modeling_rope_utils.py convert_rope_params_to_dict).
TEST(Config, ReadsTheSpellingOfTransformers5) {
  nlohmann::json j = transformers5_llama3();
  ModelConfig c = config_from_hf_json(j, "config.json");
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 8.0);
  // Not in the object: transformers 5 takes max_position_embeddings.
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(config_to_hf_json(c)["rope_parameters"], j["rope_parameters"]);
  // Inside the object, rope_theta wins over a top-level one.
  j["rope_theta"] = 10000.0;
  EXPECT_EQ(config_from_hf_json(j, "config.json").rope_theta, 500000.0);
  // A non-empty legacy rope_scaling wins over rope_parameters, as in transformers.
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  c = config_from_hf_json(j, "config.json");
  EXPECT_EQ(c.rope_scaling->rope_type, "linear");
  EXPECT_EQ(c.rope_theta, 10000.0);
  // A default rope_parameters scales nothing: the forward equals the legacy rope_theta alone.
  nlohmann::json d = transformers5_llama3();
  d["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000.0}};
  nlohmann::json legacy = transformers5_llama3();
  legacy.erase("rope_parameters");
  legacy["rope_theta"] = 1000.0;
  const ModelConfig cd = config_from_hf_json(d, "config.json"),
                    cl = config_from_hf_json(legacy, "config.json");
  for (int64_t pos0 : {0, 7})
    EXPECT_TRUE(at::equal(rope_tables(cd, 8, pos0, 5).first, rope_tables(cl, 8, pos0, 5).first));
}

TEST(Config, RefusesWhatTheForwardDoesNotCompute) {
  auto refused = [](nlohmann::json j, const std::vector<std::string>& needles) {
    ac::test::expect_error<FormatError>([&] { config_from_hf_json(j, "dir/config.json"); },
                                        needles);
  };
  nlohmann::json j = transformers5_llama3();
  j["rope_parameters"]["rope_type"] = "dynamic";
  refused(j, {"dir/config.json", "rope_parameters.rope_type 'dynamic' is not supported",
              "expected default, linear or llama3"});
  j = transformers5_llama3();
  j["rope_parameters"]["partial_rotary_factor"] = 0.5;
  refused(j, {"dir/config.json", "rope_parameters.partial_rotary_factor 0.5",
              "expected 1.0"});
  j = transformers5_llama3();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  refused(j, {"rope_parameters.full_attention: RoPE per layer type is not supported"});
  j = transformers5_llama3();
  j["hidden_act"] = "gelu";
  refused(j, {"dir/config.json", "hidden_act 'gelu' is not supported", "expected silu"});
}

// The window transformers applies (masking_utils): Mistral's whenever set, Qwen2 / Qwen3's only
// with use_sliding_window on a "sliding_attention" layer, Llama's never.
TEST(Config, SlidingWindowAsTransformersAppliesIt) {
  nlohmann::json j = transformers5_llama3();
  j["sliding_window"] = 64;
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::nullopt);
  j["model_type"] = "mistral";
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::optional<int64_t>(64));
  j["sliding_window"] = nullptr;
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::nullopt);
  j["model_type"] = "qwen2";
  j["sliding_window"] = 64;
  j["use_sliding_window"] = false;  // Qwen2.5's config.json: sliding_window 131072, unused
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::nullopt);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;  // layers from 1 on slide: none of this 1-layer model
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::nullopt);
  j["max_window_layers"] = 0;
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::optional<int64_t>(64));
  j["layer_types"] = {"full_attention"};  // written by transformers 5: it wins
  EXPECT_EQ(config_from_hf_json(j, "config.json").sliding_window, std::nullopt);
}

// ---- stories15M (the real model) ----

namespace {
const LlamaModel& stories15m(fs::path* ckpt_out = nullptr) {
  static TempDir tmp;
  static LlamaModel m = [] {
    fs::path dir = ac::test::stories15m_dir();
    import_llama2c(dir / "model.bin", dir / "tokenizer.bin", tmp.path / "ckpt");
    return load_checkpoint(tmp.path / "ckpt");
  }();
  if (ckpt_out) *ckpt_out = tmp.path / "ckpt";
  return m;
}
}  // namespace

TEST(Stories15M, LogitsMatchFloat64Reference) {
  ac::init_torch_threads();
  fs::path ckpt;
  const LlamaModel& m = stories15m(&ckpt);
  Tokenizer tok = Tokenizer::from_checkpoint(ckpt, m.config.vocab_size);
  at::Tensor tokens =
      at::tensor(tok.encode("Once upon a time, there was a little girl named Lily.", true), at::kLong)
          .view({1, -1});
  TempDir tmp;
  at::Tensor ref = reference_logits(m, tokens, tmp.path);
  EXPECT_LT(compare(m.forward(tokens), ref, "stories15M"), 1e-4);
}

TEST(Stories15M, GreedyContinuationIsTheKnownText) {
  ac::init_torch_threads();
  fs::path ckpt;
  const LlamaModel& m = stories15m(&ckpt);
  Tokenizer tok = Tokenizer::from_checkpoint(ckpt, m.config.vocab_size);
  GenerateOptions go;
  go.max_new_tokens = 24;
  std::vector<int64_t> prompt = tok.encode("Once upon a time", true);
  std::vector<int64_t> ids = prompt;
  for (int64_t t : generate(m, prompt, go)) ids.push_back(t);
  std::string text = tok.decode(ids);
  const std::string known =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "sunshine.";
  EXPECT_EQ(text.substr(0, known.size()), known) << text;
}
