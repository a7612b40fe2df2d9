// llama.cpp as a measured engine (pipeline/llamacpp_engine.h, hardware/engine_calibration.h):
//   - the cost model with a llama.cpp calibration, against hand-computed work and buffers;
//   - what llama.cpp runs of a removed part (the GGUF stubs) is costed;
//   - rows of whole q8_0 blocks in the search space, the Minitron grid and the calibration prunes;
//   - the calibration's JSON in the profile, and one clear error for a bad one;
//   - with the real llama.cpp (client tier): its own KV and model buffers equal the cost
//     model's, and a calibration followed by a validation measures what it says.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "common/error.h"
#include "export/gguf_model.h"
#include "gguf_fixture.h"
#include "hardware/cost_model.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "pipeline/llamacpp_engine.h"
#include "search/minitron.h"
#include "search/search_space.h"
#include "search_fixture.h"
#include "test_util.h"

namespace ac {
namespace {

using test::TempDir;

// cpu-llamacpp (q8_0, fp16 KV cache, 1 thread) with a workload of 8 + 8 tokens.
Scenario tiny_llamacpp_scenario() {
  Scenario s = find_scenario("cpu-llamacpp");
  s.workload.prompt_tokens = 8;
  s.workload.output_tokens = 8;
  return s;
}

// A profile of this CPU holding nothing but a llama.cpp calibration for `s`.
Profile profile_with(const Scenario& s, const PhaseCorrection& prefill, const PhaseCorrection& decode,
                     const EngineMemoryModel& memory) {
  Profile p;
  p.identity.device = "cpu";
  p.identity.cores = 2;
  EngineCalibration e;
  e.engine = "llama.cpp";
  e.threads = 1;
  e.weight_dtype = s.workload.weight_dtype;
  e.kv_cache_dtype = s.workload.kv_cache_dtype;
  e.correction.fitted = true;
  e.correction.prefill = prefill;
  e.correction.decode = decode;
  e.memory = memory;
  p.set_engine_calibration(e);
  return p;
}

// D 64, one layer of 2 query heads x 32 in 1 KV group, FFN 128, V 256, tied head.
ModelConfig tiny_config() {
  ModelConfig c = ModelConfig::uniform(/*V=*/256, /*D=*/64, /*L=*/1, LayerConfig{2, 1, 32, 128});
  c.tie_word_embeddings = true;
  return c;
}

PhaseCorrection coefficients(double gemm, double attention, double elementwise, double lm_head,
                             double per_part, double per_step) {
  return PhaseCorrection::from_coefficients({gemm, attention, elementwise, lm_head, per_part, per_step});
}

TEST(LlamaCppEngine, CostIsTheFittedSumOfHandComputedWork) {
  const Scenario s = tiny_llamacpp_scenario();
  const PhaseCorrection c = coefficients(1, 10, 100, 1000, 0.5, 0.25);
  const Profile p = profile_with(s, c, c, {});
  const CostEstimate e = predict(tiny_config(), s, &p);
  EXPECT_EQ(e.source, "profile+llama.cpp");
  // Work in millions (q8_0: 34 bytes per 32 weights). Decode, one token at the median context
  // C = 8 + ceil(8 / 2) = 12:
  //   GEMMs: q 64x64 + k 32x64 + v 32x64 + o 64x64 + gate, up 128x64 + down 64x128 = 36864
  //   weights, times 1.0625 bytes; the head 256 x 64 x 1.0625;
  //   attention: C x head_dim x (H + G) = 12 x 32 x 3;
  //   elementwise values: attention rmsnorm + add (64 + 64), FFN rmsnorm + silu_mul + add
  //   (64 + 128 + 64), embedding + final norm (64 + 64) = 512; two parts; one step.
  const double wb = 34.0 / 32;
  const double tpot = 1 * 36864 * wb * 1e-6 + 10 * 12 * 32 * 3 * 1e-6 + 100 * 512 * 1e-6 +
                      1000 * 256 * 64 * wb * 1e-6 + 0.5 * 2 + 0.25;
  EXPECT_NEAR(e.tpot_ms, tpot, 1e-12 * tpot);
  // Prefill of 8 tokens: GEMMs x 8 rows, causal attention 8 x 9 / 2 x 32 x 2 heads, the head
  // on the last position, elementwise (128 + 256) x 8 + embedding 8 x 64 + final norm 64.
  const double ttft = 8 * 36864 * wb * 1e-6 + 10 * 36 * 32 * 2 * 1e-6 +
                      100 * ((128 + 256) * 8 + 8 * 64 + 64) * 1e-6 + 1000 * 256 * 64 * wb * 1e-6 +
                      0.5 * 2 + 0.25;
  EXPECT_NEAR(e.ttft_ms, ttft, 1e-12 * ttft);
}

TEST(LlamaCppEngine, MemoryIsWeightsKvCacheAndTheEnginesOwnBuffers) {
  const Scenario s = tiny_llamacpp_scenario();
  EngineMemoryModel m;
  m.ubatch_tokens = 512;
  m.coefficients = {1, 2, 3, 0.5, 5000};
  const Profile p = profile_with(s, {}, {}, m);
  const CostEstimate e = predict(tiny_config(), s, &p);
  // q8_0 weights per part (truncated each): attention 64 + 2*64*64 + 2*64*32 = 12352, FFN
  // 64 + 3*64*128 = 24640, embedding + final norm 256*64 + 64 = 16448.
  EXPECT_EQ(e.weight_bytes, int64_t(12352 * 1.0625) + int64_t(24640 * 1.0625) + int64_t(16448 * 1.0625));
  // K and V of one KV head of 32 in f16 for n_ctx = 8 + 8 rounded up to llama.cpp's 256.
  EXPECT_EQ(e.kv_cache_bytes, 2 * 32 * 256 * 2);
  // Logits buffer V x 4; compute buffer u = min(512, 256) rows of V x 4 logits, and u x 4 x
  // (1 x D 64 + 2 x F 128 + 3 x Q 64 + 0.5 x H 2 x n_ctx 256) + 5000.
  EXPECT_EQ(e.activation_bytes, 256 * 4 + 256 * 256 * 4 + 256 * 4 * (64 + 2 * 128 + 3 * 64 + 256) + 5000);
  EXPECT_EQ(e.reserve_bytes, 0);  // every buffer is in the engine's own model
  EXPECT_EQ(e.peak_memory_bytes, e.weight_bytes + e.kv_cache_bytes + e.activation_bytes);
}

TEST(LlamaCppEngine, RemovedPartsCostTheStubsTheGgufCarries) {
  Scenario s = tiny_llamacpp_scenario();
  const PhaseCorrection c = coefficients(1, 1, 1, 1, 0.5, 0.25);
  const Profile p = profile_with(s, c, c, {});
  ModelConfig two = ModelConfig::uniform(256, 64, 2, LayerConfig{2, 1, 32, 128});
  // Layer 1 without FFN: llama.cpp runs a zero FFN of width 1 there (export/gguf_model.h).
  ModelConfig no_ffn = two, width_one = two;
  no_ffn.layers[1].ffn_no_op = true;
  no_ffn.layers[1].intermediate_size = 0;
  width_one.layers[1].intermediate_size = 1;
  EXPECT_DOUBLE_EQ(predict(no_ffn, s, &p).tpot_ms, predict(width_one, s, &p).tpot_ms);
  // Layer 0 without attention: one zero head of the model's head_dim.
  ModelConfig no_attn = two, one_head = two;
  no_attn.layers[0].attention_no_op = true;
  no_attn.layers[0].num_attention_heads = no_attn.layers[0].num_key_value_heads = 0;
  one_head.layers[0].num_attention_heads = one_head.layers[0].num_key_value_heads = 1;
  EXPECT_DOUBLE_EQ(predict(no_attn, s, &p).tpot_ms, predict(one_head, s, &p).tpot_ms);
  // ... but the same layer 1 without attention costs nothing: llama.cpp skips it.
  ModelConfig no_attn1 = two, all_attn = two;
  no_attn1.layers[1].attention_no_op = true;
  no_attn1.layers[1].num_attention_heads = no_attn1.layers[1].num_key_value_heads = 0;
  EXPECT_LT(predict(no_attn1, s, &p).tpot_ms, predict(all_attn, s, &p).tpot_ms - 0.5);
  // Another engine runs nothing for a removed FFN.
  Scenario vllm = test::gpu_scenario({}, "vllm");
  EXPECT_LT(predict(no_ffn, vllm, nullptr).tpot_ms, predict(width_one, vllm, nullptr).tpot_ms);
}

TEST(LlamaCppEngine, SnapToRowsKeepsWholeBlocks) {
  ModelConfig c = ModelConfig::uniform(32000, 288, 3, LayerConfig{5, 5, 48, 467});
  c.layers[1].attention_no_op = true;
  c.layers[1].num_attention_heads = c.layers[1].num_key_value_heads = 0;
  c.layers[1].intermediate_size = 172;
  c.layers[2] = LayerConfig{3, 1, 48, 20};
  const ModelConfig s = snap_to_rows(c, 32);
  EXPECT_EQ(s.hidden_size, 288);
  // 5 x 48 = 240 is 7.5 blocks: 4 heads (192), KV heads the largest divisor of 4 up to 5.
  EXPECT_EQ(s.layers[0].num_attention_heads, 4);
  EXPECT_EQ(s.layers[0].num_key_value_heads, 4);
  EXPECT_EQ(s.layers[0].intermediate_size, 448);
  EXPECT_FALSE(s.layers[1].has_attention());
  EXPECT_EQ(s.layers[1].intermediate_size, 160);
  EXPECT_EQ(s.layers[2].num_attention_heads, 2);  // 3 x 48 = 144: 2 heads (96)
  EXPECT_EQ(s.layers[2].num_key_value_heads, 1);
  EXPECT_EQ(s.layers[2].intermediate_size, 32);  // at least one block
  EXPECT_EQ(describe(snap_to_rows(c, 1)), describe(c));
}

TEST(LlamaCppEngine, SearchSpaceAndMinitronGridKeepRowsOfWholeBlocks) {
  const LlamaModel m = test::small_model();  // D 64, H 8 x head_dim 8 in 2 groups, F 96
  SearchSpaceOptions o = test::space_options();  // granularity 16
  o.row_multiple = 32;
  const SearchSpace space = build_search_space(m.config, test::importance_of(m), o);
  for (int64_t D : space.hidden_sizes) EXPECT_EQ(D % 32, 0) << D;
  bool some_heads_dropped = false;
  for (const auto& layer : space.attention)
    for (const LayerConfig& a : layer) {
      if (!a.has_attention()) continue;
      EXPECT_EQ(a.num_attention_heads * a.head_dim % 32, 0) << a.num_attention_heads;
      some_heads_dropped |= a.num_attention_heads < 8;
    }
  EXPECT_TRUE(some_heads_dropped);  // 4 heads x 8 = 32: the rule leaves choices
  for (const auto& layer : space.ffn)
    for (const LayerConfig& f : layer) {
      if (f.has_ffn()) {
        EXPECT_TRUE(f.intermediate_size % 32 == 0 || f.intermediate_size == 96) << f.intermediate_size;
      }
    }
  MinitronOptions mo;
  mo.width_granularity = 16;
  mo.row_multiple = 32;
  const UniformSpace grid = uniform_space(m.config, mo);
  for (int64_t D : grid.hidden_sizes) EXPECT_EQ(D % 32, 0) << D;
  for (int64_t F : grid.ffn_widths) EXPECT_EQ(F % 32, 0) << F;
  EXPECT_EQ(weight_row_multiple("q8_0"), 32);
  EXPECT_EQ(weight_row_multiple("q4_0"), 32);
  EXPECT_EQ(weight_row_multiple("fp16"), 1);
}

TEST(LlamaCppEngine, CalibrationSurvivesTheProfileFileAndABadOneIsNamed) {
  const Scenario s = tiny_llamacpp_scenario();
  EngineMemoryModel m;
  m.ubatch_tokens = 256;
  m.coefficients = {1, 2, 3, 4, 1234.5};
  Profile p = profile_with(s, coefficients(1, 2, 3, 4, 0.5, -0.25), coefficients(5, 6, 7, 8, 0.1, 0.2), m);
  p.identity.cpu_model = "test";
  p.engines[0].weights_repacked_into = "AMX";
  TempDir tmp;
  save_profile(tmp.path / "p.json", p);
  const Profile back = load_profile(tmp.path / "p.json");
  ASSERT_EQ(back.engines.size(), 1u);
  EXPECT_EQ(back.engines[0].to_json(), p.engines[0].to_json());
  EXPECT_EQ(back.engines[0].weights_repacked_into, "AMX");
  ASSERT_NE(back.engine_calibration(s), nullptr);
  EXPECT_EQ(predict(tiny_config(), s, &back).tpot_ms, predict(tiny_config(), s, &p).tpot_ms);
  // Another thread count or weight type is not this calibration.
  Scenario other = s;
  other.workload.threads = 2;
  EXPECT_EQ(back.engine_calibration(other), nullptr);
  other = s;
  other.workload.weight_dtype = "q4_0";
  EXPECT_EQ(back.engine_calibration(other), nullptr);

  json j = p.to_json();
  j["engines"][0]["memory"]["coefficients"].erase(4);
  write_json_file(tmp.path / "bad.json", j);
  try {
    load_profile(tmp.path / "bad.json");
    FAIL() << "a calibration with 4 memory coefficients loaded";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("engines[0].memory.coefficients"), std::string::npos)
        << e.what();
  }
}

// llama.cpp's model buffers for stories15M in q8_0 (D 288, 6 layers of 6 heads x 48, FFN 768,
// V 32000, tied head) on a CPU with AMX, by hand from ggml's AMX sources
// (hardware/llamacpp_buffers.h): every projection and the tied head go to the AMX buffer at 38
// bytes per 32 values (34 of the q8_0 block, 4 of compensation): (6 x (4 x 288 x 288 + 3 x 288 x
// 768) + 32000 x 288) x 38 / 32 = 18 035 712 bytes; the mapped span runs from token_embd to the
// last layer's ffn_norm, the file less that layer's three FFN matrices (3 x 235 008 bytes):
// 15 447 168. llama.cpp itself logged "AMX model buffer size = 17.20 MiB" and "CPU_Mapped model
// buffer size = 14.73 MiB" for that file (docs/benchmarks.md, "llama.cpp on a CPU with AMX").
TEST(LlamaCppEngine, AmxBuffersOfStories15MAreWhatLlamaCppLogged) {
  ModelConfig c = ModelConfig::uniform(32000, 288, 6, LayerConfig{6, 6, 48, 768});
  c.tie_word_embeddings = true;
  const std::vector<GgufTensorExtent> file = model_gguf_extents(c, GgmlType::Q8_0);
  uint64_t file_bytes = 0;
  for (const GgufTensorExtent& t : file) file_bytes += t.bytes;
  const LlamaCppModelBuffers amx = llamacpp_model_buffers(file, /*tied_output=*/true, "AMX");
  EXPECT_EQ(amx.repacked, 18035712u);
  EXPECT_EQ(amx.mapped, 15447168u);
  EXPECT_EQ(amx.mapped, file_bytes - 3 * 235008u);
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(double(amx.repacked) / mib, 17.20, 0.005);
  EXPECT_NEAR(double(amx.mapped) / mib, 14.73, 0.005);
  // Without a repack the model buffer is the file's tensors (the span of them all).
  const LlamaCppModelBuffers plain = llamacpp_model_buffers(file, true, "");
  EXPECT_EQ(plain.repacked, 0u);
  EXPECT_EQ(plain.mapped, file_bytes);
  // The cost model counts the same for a profile calibrated where llama.cpp repacked into AMX.
  Scenario s = tiny_llamacpp_scenario();
  s.workload.weight_dtype = "q8_0";
  Profile p = profile_with(s, {}, {}, {});
  const int64_t gguf = predict(c, s, &p).weight_bytes;
  EngineCalibration ec = *p.engine_calibration(s);
  ec.weights_repacked_into = "AMX";
  p.set_engine_calibration(ec);
  EXPECT_EQ(predict(c, s, &p).weight_bytes - gguf, int64_t(amx.total()) - int64_t(file_bytes));
  // AMX's rules: rows a multiple of 32, rows of whole blocks (q8_0, q4_0) or of 16 (F16).
  EXPECT_FALSE(amx_takes(GgmlType::Q8_0, 48, 288));   // one head of 48: N % 32
  EXPECT_TRUE(amx_takes(GgmlType::Q8_0, 96, 288));
  EXPECT_FALSE(amx_takes(GgmlType::F16, 64, 200));    // K % 16
  EXPECT_TRUE(amx_takes(GgmlType::F16, 64, 208));
  EXPECT_FALSE(amx_takes(GgmlType::F32, 64, 256));
  EXPECT_EQ(amx_bytes(GgmlType::Q4_0, 64, 256), 64u * 8 * 18);
  EXPECT_EQ(amx_bytes(GgmlType::F16, 64, 208), 64u * 208 * 2);
  test::expect_error<ConfigError>([&] { llamacpp_model_buffers(file, true, "CPU_REPACK"); },
                                  {"CPU_REPACK", "only llama.cpp's AMX"});
}

TEST(LlamaCppEngine, AWeightCopyBesideTheMappedFileIsNamed) {
  LlamaCppBuffers b;
  EXPECT_EQ(b.repacked_into(), "");
  b.model_buffer_types = {"CPU_Mapped"};
  EXPECT_EQ(b.repacked_into(), "");
  b.model_buffer_types = {"CPU"};
  EXPECT_EQ(b.repacked_into(), "");
  b.model_buffer_types = {"AMX", "CPU_Mapped"};  // as llama.cpp logs it on a CPU with AMX
  EXPECT_EQ(b.repacked_into(), "AMX");
  b.model_buffer_types = {"CPU_Mapped", "CPU_REPACK"};
  EXPECT_EQ(b.repacked_into(), "CPU_REPACK");
  EXPECT_EQ(b.to_json().at("model_buffer_types"), json({"CPU_Mapped", "CPU_REPACK"}));
}

// ---------------------------------------------------------------------------------------------
// With the real llama.cpp (tools/llamacpp, scripts/setup_node.sh).

TEST(LlamaCppEngineClient, ItsOwnKvAndModelBuffersAreThePredictedOnes) {
  Scenario s = tiny_llamacpp_scenario();
  // Three layers, rows of whole q8_0 blocks; layer 1 without FFN (a width-1 F16 stub is written).
  ModelConfig c = ModelConfig::uniform(300, 256, 3, LayerConfig{4, 2, 64, 512});
  c.layers[1].ffn_no_op = true;
  c.layers[1].intermediate_size = 0;
  c.layers[2] = LayerConfig{2, 1, 64, 256};
  const LlamaModel m{c, random_weights(c, 3)};
  TempDir tmp;
  LlamaCppRunOptions ro;
  ro.rounds = 1;
  const LlamaCppRun run = measure_llamacpp_models({&m}, test::synthetic_vocab(300), s.workload,
                                                  ro, tmp.path);
  ASSERT_EQ(run.models.size(), 1u);
  EXPECT_EQ(run.context_tokens, 256);  // 8 + 8 rounded up to the KV block
  const LlamaCppBuffers& b = run.models[0].buffers;
  ASSERT_FALSE(b.model_buffer_types.empty()) << "no model buffer line in llama.cpp's log";
  // Calibrated here, the profile says where llama.cpp put the weights.
  Profile p = profile_with(s, {}, {}, {});
  EngineCalibration ec = *p.engine_calibration(s);
  ec.weights_repacked_into = b.repacked_into();
  p.set_engine_calibration(ec);
  const CostEstimate e = predict(c, s, &p);
  // llama.cpp prints MiB with two decimals: within 0.005 MiB.
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(double(b.kv), double(e.kv_cache_bytes), 0.0051 * mib);
  EXPECT_EQ(e.kv_cache_bytes, 2 * 256 * (2 * 64 + 2 * 64 + 1 * 64) * 2);  // K and V, f16
  // The model buffer: q8_0 blocks, plus what the prediction leaves out (F32 norms, the F16
  // stub, 32-byte alignment): within 2%; on a CPU with AMX, the repacked copy beside the mapped
  // span (hardware/llamacpp_buffers.h) as well. Another repack kind is not modelled: the mapped
  // file alone is then at least the GGUF's bytes.
  if (b.repacked_into().empty() || b.repacked_into() == "AMX") {
    EXPECT_NEAR(double(b.model), double(e.weight_bytes), 0.02 * double(e.weight_bytes))
        << "model buffers " << fmt::format("{}", fmt::join(b.model_buffer_types, ", "));
    std::cout << "model buffers (" << fmt::format("{}", fmt::join(b.model_buffer_types, ", "))
              << "): " << b.model << " bytes, predicted " << e.weight_bytes << "\n";
  } else {
    EXPECT_GT(double(b.model), double(e.weight_bytes));
    std::cout << "note: llama.cpp repacked the weights into " << b.repacked_into()
              << " buffers: model buffers " << b.model << " bytes against the GGUF's "
              << e.weight_bytes << "\n";
  }
  EXPECT_NEAR(double(b.output), 300.0 * 4, 0.0051 * mib);
  const Measurement& meas = run.models[0].measured;
  EXPECT_GT(meas.ttft_ms, 0);
  EXPECT_GT(meas.tpot_ms, 0);
  EXPECT_LE(meas.tpot_ms, meas.tpot_median_ms);
  EXPECT_EQ(meas.samples.step_ms.size(), 1u);
  EXPECT_EQ(meas.samples.step_ms[0].size(), 7u);  // 8 tokens: 7 decode intervals
  EXPECT_FALSE(fs::exists(tmp.path / "model0.gguf.err") && fs::file_size(tmp.path / "model0.gguf.err") > 0);
}

TEST(LlamaCppEngineClient, CalibrationThenValidationMeasureWhatTheySay) {
  Scenario s = tiny_llamacpp_scenario();
  Profile p;
  p.identity.device = "cpu";
  p.identity.cores = 2;
  // A vocabulary large enough that the logits are most of the compute buffer, as in every
  // real checkpoint (stories15M: 32000 x 4 bytes per row of the micro-batch).
  const ModelConfig base = ModelConfig::uniform(4000, 128, 2, LayerConfig{4, 2, 32, 256});
  const GgufVocab vocab = test::synthetic_vocab(4000);
  TempDir tmp;
  LlamaCppCalibrationOptions o;
  o.count = 6;
  o.rounds = 2;
  o.scratch = tmp.path / "calibration";
  const EngineCalibration ec = calibrate_llamacpp(p, base, vocab, s, o);
  EXPECT_EQ(ec.engine, "llama.cpp");
  EXPECT_EQ(ec.threads, 1);
  EXPECT_EQ(ec.weight_dtype, "q8_0");
  EXPECT_EQ(ec.correction.fit.models, 7);  // the base and 6 prunes
  EXPECT_FALSE(ec.release.empty());
  EXPECT_FALSE(fs::exists(o.scratch)) << "the GGUF scratch folder must be removed";
  // Memory is deterministic: llama.cpp's buffers against the fitted model, within 3%, where
  // llama.cpp uses the GGUF's tensors as they are or repacks them into AMX buffers (modelled,
  // hardware/llamacpp_buffers.h); another repack kind is left out of the prediction.
  const bool repacked = !ec.weights_repacked_into.empty() && ec.weights_repacked_into != "AMX";
  if (!repacked) {
    EXPECT_LT(ec.memory.mape_percent, 3.0);
  }
  p.set_engine_calibration(ec);
  std::vector<ModelConfig> archs = random_architectures(base, 3, /*seed=*/99);
  for (auto& a : archs) a = snap_to_rows(a, 32);
  EngineCalibration refit;
  const ValidationReport r = validate_llamacpp(archs, base, s, p, vocab, 2, tmp.path / "v",
                                               o, &refit);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(refit.correction.fit.models, 7);
  if (!repacked) {
    EXPECT_LT(r.mape_memory, 3.0);
  }
  for (const auto& row : r.rows) {
    EXPECT_GT(row.measured.tpot_ms, 0);
    EXPECT_EQ(row.predicted.source, "profile+llama.cpp");
  }
  EXPECT_TRUE(std::isfinite(r.mape_ttft) && std::isfinite(r.mape_tpot));
}

TEST(LlamaCppEngine, ARefusedScenarioIsNamed) {
  Scenario s = tiny_llamacpp_scenario();
  Profile p;
  p.identity.device = "cpu";
  s.workload.batch_size = 4;
  try {
    calibrate_llamacpp(p, tiny_config(), test::synthetic_vocab(256), s, {});
    FAIL() << "batch 4 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size 4"), std::string::npos) << e.what();
  }
  s = tiny_llamacpp_scenario();
  s.workload.weight_dtype = "int8";
  EXPECT_THROW(gguf_type_for("int8"), ConfigError);
  s = tiny_llamacpp_scenario();
  s.engine = "native";
  EXPECT_THROW(calibrate_llamacpp(p, tiny_config(), test::synthetic_vocab(256), s, {}), ConfigError);
}

}  // namespace
}  // namespace ac
