// GGUF export: the container's byte layout (hand-computed), corrupt files refused with clear
// errors, model <-> GGUF round trips to identical logits (homogeneous, heterogeneous with
// attention-free and FFN-free layers, rope_theta and llama3 / linear rope_scaling), the layout
// without weights (what the llama.cpp memory model reads), and q8_0 / q4_0 GGUFs (the types of
// their tensors, reloads to the logits of the quantized-then-dequantized source).
#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "io/gguf.h"
#include "export/gguf_model.h"
#include "export/hf_export.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "model/llama.h"
#include "export_fixture.h"

namespace ac {
namespace {
using json = nlohmann::json;
using test::TempDir;
using test::expect_error;
using namespace export_test;

// ---------------------------------------------------------------------------------------------
// GGUF container

TEST(Gguf, ByteLayoutMatchesTheSpecAndReversesDims) {
  TempDir tmp;
  const fs::path p = tmp.path / "t.gguf";
  at::Tensor t = at::arange(0, 6, at::kFloat).view({2, 3});  // torch [2, 3]
  write_gguf(p, {{"general.alignment", GgufValue::u32(32)}}, {{"t", t, GgmlType::F32}});
  const std::string b = bytes_of(p);
  // Offsets computed by hand from the layout in gguf.h.
  // 98 bytes of header and info, padded to 128, + 24 data bytes padded to 32 (gguf.cpp pads
  // after every tensor, the last one included).
  ASSERT_EQ(b.size(), 160u);
  EXPECT_EQ(b.substr(0, 4), "GGUF");
  EXPECT_EQ(at_offset<uint32_t>(b, 4), 3u);    // version
  EXPECT_EQ(at_offset<uint64_t>(b, 8), 1u);    // tensor_count
  EXPECT_EQ(at_offset<uint64_t>(b, 16), 1u);   // kv count
  EXPECT_EQ(at_offset<uint64_t>(b, 24), 17u);  // strlen("general.alignment")
  EXPECT_EQ(b.substr(32, 17), "general.alignment");
  EXPECT_EQ(at_offset<uint32_t>(b, 49), 4u);   // UINT32
  EXPECT_EQ(at_offset<uint32_t>(b, 53), 32u);
  EXPECT_EQ(at_offset<uint64_t>(b, 57), 1u);   // strlen("t")
  EXPECT_EQ(b[65], 't');
  EXPECT_EQ(at_offset<uint32_t>(b, 66), 2u);   // n_dims
  EXPECT_EQ(at_offset<uint64_t>(b, 70), 3u);   // ne[0] = torch's LAST dim
  EXPECT_EQ(at_offset<uint64_t>(b, 78), 2u);   // ne[1] = torch's first dim
  EXPECT_EQ(at_offset<uint32_t>(b, 86), 0u);   // F32
  EXPECT_EQ(at_offset<uint64_t>(b, 90), 0u);   // offset in the data section
  for (int i = 98; i < 128; ++i) EXPECT_EQ(b[size_t(i)], 0) << i;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at_offset<float>(b, 128 + 4 * size_t(i)), float(i));

  GgufFile g(p);
  EXPECT_EQ(g.ggml_ne("t"), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(g.shape("t"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.data_offset("t"), 128u);
  EXPECT_TRUE(g.tensor("t").equal(t));
}

TEST(Gguf, MetadataTypesAndTensorDtypesRoundTrip) {
  TempDir tmp;
  const fs::path p = tmp.path / "m.gguf";
  at::Tensor w = at::randn({5, 7}, at::kFloat);  // odd sizes: padding between tensors
  write_gguf(p,
             {{"a.u32", GgufValue::u32(4000000000)},
              {"a.f32", GgufValue::f32(1e-5)},
              {"a.bool", GgufValue::boolean(true)},
              {"a.str", GgufValue::str("h\xC3\xA9llo")},
              {"a.arr", GgufValue::i32_array({0, -3, 7})},
              {"a.strs", GgufValue::str_array({"x", "", "\xE2\x96\x81y"})}},
             {{"w32", w, GgmlType::F32}, {"w16", w, GgmlType::F16}, {"wbf", w, GgmlType::BF16}});
  GgufFile g(p);
  EXPECT_EQ(g.get_int("a.u32"), 4000000000);
  EXPECT_EQ(g.get_float("a.f32"), double(1e-5f));
  EXPECT_EQ(g.find("a.bool")->ints[0], 1);
  EXPECT_EQ(g.get_string("a.str"), "h\xC3\xA9llo");
  EXPECT_EQ(g.get_int_or_array("a.arr", 3), (std::vector<int64_t>{0, -3, 7}));
  EXPECT_EQ(g.find("a.strs")->strings, (std::vector<std::string>{"x", "", "\xE2\x96\x81y"}));
  EXPECT_TRUE(g.tensor("w32").equal(w));
  EXPECT_TRUE(g.tensor("w16").equal(w.to(at::kHalf)));
  EXPECT_TRUE(g.tensor("wbf").equal(w.to(at::kBFloat16)));
  for (const auto& n : g.tensor_names()) EXPECT_EQ(g.data_offset(n) % 32, 0u) << n;
  EXPECT_THROW(g.get_int_or_array("a.arr", 4), FormatError);
  EXPECT_THROW(g.get_string("a.u32"), FormatError);
}

void expect_format_error(const fs::path& p, const std::string& needle) {
  try {
    GgufFile g(p);
    FAIL() << "expected FormatError containing '" << needle << "'";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Gguf, CorruptFilesThrowClearErrors) {
  TempDir tmp;
  const fs::path good = tmp.path / "good.gguf", bad = tmp.path / "bad.gguf";
  write_gguf(good, {{"k", GgufValue::u32(1)}}, {{"t", at::ones({4, 4}), GgmlType::F32}});
  const std::string b = bytes_of(good);
  auto with = [&](std::string x) { write_file_atomic(bad, x); };

  with("GGML" + b.substr(4));
  expect_format_error(bad, "not a GGUF file");
  std::string v2 = b;
  v2[4] = 2;
  with(v2);
  expect_format_error(bad, "version 2");
  with(b.substr(0, b.size() - 10));
  expect_format_error(bad, "truncated");
  with(b.substr(0, 30));
  expect_format_error(bad, "truncated");
  std::string huge = b;  // the key length claims 2^40 bytes
  const uint64_t n = 1ull << 40;
  std::memcpy(&huge[24], &n, 8);
  with(huge);
  expect_format_error(bad, "limit");
  std::string quant = b;  // tensor type -> Q4_0 (2): rows of 4 values are no whole block
  const size_t type_at = b.find('t', 40) + 1 + 4 + 16;
  quant[type_at] = 2;
  with(quant);
  expect_format_error(bad, "tensor 't' of type Q4_0 has rows of ne[0] = 4 values, not a multiple "
                           "of its block size 32");
  quant[type_at] = 12;  // Q4_K
  with(quant);
  expect_format_error(bad, "ggml type 12");
}

// ---------------------------------------------------------------------------------------------
// model <-> GGUF

TEST(GgufModel, QkRowsAreInLlamaCppOrderAndPermuteBack) {
  // Head of Hd 4: HF rotate-half rows [r0 r1 r2 r3] = pairs (r0,r2), (r1,r3); llama.cpp wants
  // the pairs adjacent: [r0 r2 r1 r3].
  at::Tensor w = at::arange(0, 8, at::kFloat).view({8, 1});  // 2 heads of Hd 4
  at::Tensor u = unpermute_rotary_rows(w, 2).view({8});
  EXPECT_TRUE(u.equal(at::tensor({0.f, 2.f, 1.f, 3.f, 4.f, 6.f, 5.f, 7.f})));
  EXPECT_TRUE(permute_rotary_rows(unpermute_rotary_rows(w, 2), 2).equal(w));
}

TEST(GgufModel, HomogeneousRoundTripGivesIdenticalLogits) {
  init_torch_threads();
  TempDir tmp;
  ModelConfig c = ModelConfig::uniform(300, 48, 2, LayerConfig{6, 2, 8, 40});
  c.attention_bias = true;  // q/k biases are permuted like the rows
  c.rope_theta = 123456.0;
  RopeScaling s;
  s.rope_type = "linear";
  s.factor = 2.5;
  s.raw = {{"rope_type", "linear"}, {"factor", 2.5}};
  c.rope_scaling = s;
  const LlamaModel m{c, random_weights(c, 3, 0.2)};
  write_model_gguf(tmp.path / "m.gguf", m, synthetic_vocab(300));
  GgufFile g(tmp.path / "m.gguf");
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(g.get_string("llama.rope.scaling.type"), "linear");
  EXPECT_FLOAT_EQ(float(g.get_float("llama.rope.freq_base")), 123456.f);
  EXPECT_TRUE(g.has_tensor("output.weight"));  // untied
  EXPECT_EQ(g.ggml_ne("blk.0.ffn_down.weight"), (std::vector<int64_t>{40, 48}));  // torch [48, 40]
  const GgufModel back = read_model_gguf(tmp.path / "m.gguf");
  EXPECT_EQ(back.model.config.rope_theta, 123456.0);
  ASSERT_TRUE(back.model.config.rope_scaling.has_value());
  EXPECT_EQ(back.model.config.rope_scaling->raw, s.raw);
  const double d = max_diff(logits(back.model), logits(m));
  std::printf("homogeneous GGUF round trip: max |logit diff| = %g\n", d);
  EXPECT_EQ(d, 0.0);

  // A GGUF from another writer has only the standard keys: drop ours and read it again.
  GgufMetadata standard;
  for (const auto& kv : g.metadata())
    if (kv.first.rfind("autocompress.", 0) != 0) standard.push_back(kv);
  std::vector<GgufTensorOut> tensors;
  for (const auto& n : g.tensor_names()) tensors.push_back({n, g.tensor(n), g.type(n)});
  write_gguf(tmp.path / "plain.gguf", standard, tensors);
  const GgufModel plain = read_model_gguf(tmp.path / "plain.gguf");
  EXPECT_FLOAT_EQ(float(plain.model.config.rope_theta), 123456.f);
  EXPECT_EQ(plain.model.config.rope_scaling->rope_type, "linear");
  EXPECT_EQ(plain.model.config.rope_scaling->factor, 2.5);
  EXPECT_FALSE(plain.model.config.tie_word_embeddings);
  EXPECT_TRUE(plain.model.config.attention_bias);
  EXPECT_LT(max_diff(logits(plain.model), logits(m)), 1e-4);  // eps/theta now via float32 keys
}

TEST(GgufModel, HeterogeneousRoundTripKeepsFreeLayersAndLlama3Rope) {
  init_torch_threads();
  TempDir tmp;
  const ModelConfig c = deci_config();
  const LlamaModel m{c, random_weights(c, 5, 0.2)};
  write_model_gguf(tmp.path / "m.gguf", m, synthetic_vocab(300));
  GgufFile g(tmp.path / "m.gguf");
  EXPECT_EQ(g.get_string("general.architecture"), "deci");
  EXPECT_EQ(g.get_int_or_array("deci.attention.head_count", 5),
            (std::vector<int64_t>{4, 0, 4, 4, 4}));
  EXPECT_EQ(g.get_int_or_array("deci.attention.head_count_kv", 5),
            (std::vector<int64_t>{4, 0, 4, 2, 4}));
  // Layer 2 (attention, no FFN) is a width-1 zero FFN for llama.cpp (see gguf_model.h).
  EXPECT_EQ(g.get_int_or_array("deci.feed_forward_length", 5),
            (std::vector<int64_t>{512, 256, 1, 512, 768}));
  EXPECT_EQ(g.get_int("deci.attention.key_length"), 16);
  EXPECT_TRUE(g.has_tensor("rope_freqs.weight"));
  EXPECT_FALSE(g.has_tensor("blk.1.attn_q.weight"));
  const GgufModel back = read_model_gguf(tmp.path / "m.gguf");
  for (size_t i = 0; i < c.layers.size(); ++i)
    EXPECT_TRUE(back.model.config.layers[i] == c.layers[i]) << "layer " << i;
  EXPECT_EQ(back.model.config.rope_theta, 500000.0);
  EXPECT_EQ(back.model.config.rope_scaling->raw, c.rope_scaling->raw);
  EXPECT_EQ(back.model.config.extra["my_field"], "kept");
  const double d = max_diff(logits(back.model), logits(m));
  std::printf("heterogeneous GGUF round trip: max |logit diff| = %g\n", d);
  EXPECT_EQ(d, 0.0);
}

// model_gguf_layout / model_gguf_extents (what the llama.cpp memory model reads, without
// weights) are the file write_model_gguf writes: names in order, types (F16 where q8_0 / q4_0
// rows are not whole blocks), shapes and offsets, for a deci file with an FFN-free layer and
// llama3's rope_freqs, one whose layer 0 has no attention (the one-head stub), and an untied
// homogeneous llama file.
TEST(GgufModel, LayoutWithoutWeightsIsTheWrittenFile) {
  ModelConfig stub0 = deci_config();
  stub0.layers[0] = no_attn(stub0.layers[0]);
  ModelConfig untied = ModelConfig::uniform(/*V=*/300, /*D=*/64, /*L=*/2, LayerConfig{4, 2, 16, 96});
  untied.tie_word_embeddings = false;
  int checked = 0;
  for (const ModelConfig& c : {deci_config(), stub0, untied})
    for (GgmlType dtype : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
      TempDir tmp;
      GgufExportOptions o;
      o.dtype = dtype;
      write_model_gguf(tmp.path / "m.gguf", LlamaModel{c, random_weights(c, 5, 0.2)},
                       synthetic_vocab(300), o);
      const GgufFile g(tmp.path / "m.gguf");
      const std::vector<GgufTensorPlan> plan = model_gguf_layout(c, dtype);
      const std::vector<GgufTensorExtent> ext = model_gguf_extents(c, dtype);
      const std::vector<std::string> names = g.tensor_names();
      ASSERT_EQ(plan.size(), names.size());
      ASSERT_EQ(ext.size(), names.size());
      const uint64_t start = g.data_offset(names.front());
      for (size_t i = 0; i < names.size(); ++i) {
        SCOPED_TRACE(names[i] + " " + ggml_type_name(dtype));
        EXPECT_EQ(plan[i].name, names[i]);
        EXPECT_EQ(plan[i].type, g.type(names[i]));
        EXPECT_EQ(plan[i].dims, g.shape(names[i]));
        EXPECT_EQ(ext[i].type, g.type(names[i]));
        EXPECT_EQ(ext[i].offset, g.data_offset(names[i]) - start);
        const std::vector<int64_t> ne = g.ggml_ne(names[i]);
        EXPECT_EQ(ext[i].row_length, ne[0]);
        EXPECT_EQ(ext[i].rows, ne.size() > 1 ? ne[1] : 1);
        EXPECT_EQ(ext[i].bytes, ggml_bytes(g.type(names[i]), uint64_t(ne[0] * ext[i].rows)));
        ++checked;
      }
    }
  EXPECT_GT(checked, 100);
}

TEST(GgufModel, Llama3RopeFactorsMatchTheConverterFormula) {
  ModelConfig c = deci_config();  // theta 5e5, factor 8, low 1, high 4, original 16
  at::Tensor f = llama3_rope_factors(c, 16);
  // By hand: wavelen_i = 2*pi*5e5^(2i/16); high_wavelen = 4, low_wavelen = 16.
  // i = 0: wavelen 6.28 (between): smooth = (16/6.283 - 1)/3 = 0.5155, factor = 1/((1-s)/8 + s)
  const double w0 = 2 * M_PI, s0 = (16.0 / w0 - 1.0) / 3.0;
  EXPECT_FLOAT_EQ(f[0].item<float>(), float(1.0 / ((1.0 - s0) / 8.0 + s0)));
  EXPECT_FLOAT_EQ(f[7].item<float>(), 8.0f);  // wavelen 2*pi*5e5^(14/16) >> 16
}

// llama.cpp takes the head size from layer 0's head count: an attention-free layer 0 is written
// as one zero head (gguf_model.h) and read back as attention-free, with the same logits.
TEST(GgufModel, Layer0WithoutAttentionIsOneZeroHeadAndReadsBack) {
  ModelConfig c = deci_config();
  c.layers[0] = no_attn(c.layers[0]);
  const LlamaModel m{c, random_weights(c, 1)};
  TempDir tmp;
  write_model_gguf(tmp.path / "x.gguf", m, synthetic_vocab(300));
  GgufFile g(tmp.path / "x.gguf");
  const int64_t L = c.num_layers();
  EXPECT_EQ(g.get_int_or_array("deci.attention.head_count", L)[0], 1);
  EXPECT_EQ(g.get_int_or_array("deci.attention.head_count_kv", L)[0], 1);
  EXPECT_EQ(g.get_int_or_array("autocompress.attention_free_layers", 1), (std::vector<int64_t>{0}));
  EXPECT_TRUE(g.has_tensor("blk.0.attn_output.weight"));
  const GgufModel back = read_model_gguf(tmp.path / "x.gguf");
  for (size_t i = 0; i < c.layers.size(); ++i)
    EXPECT_TRUE(back.model.config.layers[i] == c.layers[i]) << "layer " << i;
  EXPECT_EQ(max_diff(logits(back.model), logits(m)), 0.0);
}

TEST(GgufModel, RefusesWhatLlamaCppCannotRun) {
  ModelConfig c = deci_config();
  c.layers[3].head_dim = c.layers[0].head_dim / 2;  // GGUF has one attention.key_length
  const LlamaModel m{c, random_weights(c, 1)};
  TempDir tmp;
  try {
    write_model_gguf(tmp.path / "x.gguf", m, synthetic_vocab(300));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("one attention.key_length"), std::string::npos);
  }
  GgufVocab dup = synthetic_vocab(300);
  dup.tokens[299] = "<s>";  // BOS text twice: not exactly one id
  const LlamaModel ok{deci_config(), random_weights(deci_config(), 1)};
  EXPECT_THROW(write_model_gguf(tmp.path / "y.gguf", ok, dup), ConfigError);
}

// ---------------------------------------------------------------------------------------------
// quantized GGUF (q8_0, q4_0; gguf_model.h gguf_tensor_type)

TEST(GgufModel, QuantizedExportReloadsToTheQuantizedSourceLogits) {
  init_torch_threads();
  TempDir tmp;
  // D 64: rows of whole blocks; F 40: ffn_down's rows of 40 values fall back to F16. Untied.
  const ModelConfig c =
      ModelConfig::uniform(/*V=*/300, /*D=*/64, /*L=*/2, LayerConfig{4, 2, 16, 40});
  const LlamaModel m{c, random_weights(c, 6, 0.2)};
  const fs::path src = write_checkpoint(tmp.path / "src", m);
  for (const GgmlType q : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const ExportOptions opt = ExportOptions::gguf_only(q);
    const fs::path out = tmp.path / ggml_dtype_string(q);
    EXPECT_EQ(export_model(src, out, opt).max_logit_diff_gguf, 0.0) << ggml_type_name(q);
    const GgufFile g(out / "model.gguf");
    EXPECT_EQ(g.get_int("general.file_type"), q == GgmlType::Q8_0 ? 7 : 2);  // llama_ftype
    // Every 2-D weight with rows of whole blocks, the embeddings and the head included
    // (llama-quantize --pure); 1-D tensors F32.
    for (const char* n : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight",
                          "blk.1.attn_k.weight", "blk.1.attn_v.weight", "blk.1.attn_output.weight",
                          "blk.0.ffn_gate.weight", "blk.1.ffn_up.weight"})
      EXPECT_EQ(g.type(n), q) << n;
    EXPECT_EQ(g.type("blk.0.ffn_down.weight"), GgmlType::F16);
    EXPECT_EQ(g.type("blk.0.attn_norm.weight"), GgmlType::F32);
    EXPECT_EQ(g.type("output_norm.weight"), GgmlType::F32);
    // Independently of export_model's own check: the stored tensors are the source's,
    // quantized and dequantized (q rows in llama.cpp's order) or rounded to fp16.
    const LayerWeights& l0 = m.weights.layers[0];
    EXPECT_TRUE(g.tensor("blk.0.attn_q.weight")
                    .equal(ggml_round_trip(unpermute_rotary_rows(l0.q_proj, 4), q)));
    EXPECT_TRUE(g.tensor("token_embd.weight").equal(ggml_round_trip(m.weights.embed_tokens, q)));
    EXPECT_TRUE(g.tensor("blk.0.ffn_down.weight").equal(l0.down_proj.to(at::kHalf).to(at::kFloat)));
    const GgufModel back = read_model_gguf(out / "model.gguf");
    EXPECT_EQ(back.dtype, q);
    const double d = max_diff(logits(back.model), logits(round_to_gguf(m, q)));
    const double vs_fp32 = max_diff(logits(back.model), logits(m));
    std::printf("%s GGUF: max |logit diff| %g against the dequantized source, %g against fp32\n",
                ggml_type_name(q), d, vs_fp32);
    EXPECT_EQ(d, 0.0);
    EXPECT_GT(vs_fp32, 0.0);  // and quantization did change the model
  }
}

TEST(GgufModel, QuantizedDeciKeepsItsFreeLayersExactly) {
  init_torch_threads();
  TempDir tmp;
  ModelConfig c = deci_config();  // D 96, Hd 16; layer 1 attention-free, layer 2 FFN-free
  c.layers[0] = no_attn(c.layers[0]);  // a one-head zero stub in the file
  const LlamaModel m{c, random_weights(c, 8, 0.2)};
  write_model_gguf(tmp.path / "x.gguf", m, synthetic_vocab(300), {GgmlType::Q4_0, "autocompress"});
  const GgufFile g(tmp.path / "x.gguf");
  EXPECT_EQ(g.type("blk.0.attn_q.weight"), GgmlType::Q4_0);       // [16, 96]: zero blocks
  EXPECT_EQ(g.type("blk.0.attn_output.weight"), GgmlType::F16);   // [96, 16]: rows of 16
  EXPECT_EQ(g.type("blk.2.ffn_gate.weight"), GgmlType::Q4_0);     // [1, 96] width-1 stub
  EXPECT_EQ(g.type("blk.2.ffn_down.weight"), GgmlType::F16);      // [96, 1]
  EXPECT_EQ(g.type("blk.4.ffn_down.weight"), GgmlType::Q4_0);     // [96, 768]
  const GgufModel back = read_model_gguf(tmp.path / "x.gguf");
  for (size_t i = 0; i < c.layers.size(); ++i)
    EXPECT_TRUE(back.model.config.layers[i] == c.layers[i]) << "layer " << i;
  EXPECT_EQ(max_diff(logits(back.model), logits(round_to_gguf(m, GgmlType::Q4_0))), 0.0);
}

}  // namespace
}  // namespace ac
