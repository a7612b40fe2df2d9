// GGUF block quantization (io/gguf_quant.h): Q8_0 and Q4_0 blocks worked by hand (the
// fp16 scale, the int8 values, the nibbles), fp16 against torch's Half, the error bound of each
// format on random rows, the GGUF write -> read round trip of quantized tensors, truncated and
// misaligned quantized tensors, and (client tier) the quantizers against ggml's own, loaded from
// the llama.cpp libraries node-llama-cpp ships, byte for byte.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <c10/util/Half.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "io/gguf.h"
#include "io/gguf_quant.h"
#include "test_util.h"

namespace ac {
namespace {
using test::TempDir;
using test::expect_error;

std::vector<uint8_t> q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out(size_t(x.size()) / 32 * kQ8_0BlockBytes);
  quantize_row_q8_0(x.data(), out.data(), int64_t(x.size()));
  return out;
}

std::vector<uint8_t> q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out(size_t(x.size()) / 32 * kQ4_0BlockBytes);
  quantize_row_q4_0(x.data(), out.data(), int64_t(x.size()));
  return out;
}

std::vector<float> dq8_0(const std::vector<uint8_t>& b) {
  std::vector<float> y(b.size() / kQ8_0BlockBytes * 32);
  dequantize_row_q8_0(b.data(), y.data(), int64_t(y.size()));
  return y;
}

std::vector<float> dq4_0(const std::vector<uint8_t>& b) {
  std::vector<float> y(b.size() / kQ4_0BlockBytes * 32);
  dequantize_row_q4_0(b.data(), y.data(), int64_t(y.size()));
  return y;
}

/// `n` floats: normal(0, scale) with a few outliers, seeded.
std::vector<float> random_row(int64_t n, double scale, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  const at::Tensor outliers = (at::arange(n) % 37 == 0).to(at::kFloat) * 8 + 1;  // x9 every 37th
  const at::Tensor t = (at::normal(0.0, scale, {n}, g) * outliers).contiguous();
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + n);
}

// ---------------------------------------------------------------------------------------------
// blocks worked by hand (ggml-quants.c quantize_row_q8_0_ref / quantize_row_q4_0_ref)

TEST(GgufQuant, Q8_0BlocksWorkedByHand) {
  // Block A: amax 127, so d = 127 / 127 = 1 (fp16 0x3C00, bytes 00 3C) and id = 1: q = roundf(x),
  // which rounds halves away from zero (2.5 -> 3, -2.5 -> -3, 0.5 -> 1), 0.49 -> 0, 1.51 -> 2,
  // 100.4 -> 100 (0x64), -100.6 -> -101 (0x9B); x[j] = j - 16 for j >= 10 (-6 = 0xFA ... 15).
  std::vector<float> a = {127, -127, 2.5f, -2.5f, 0.5f, -0.5f, 0.49f, 1.51f, 100.4f, -100.6f};
  for (int j = 10; j < 32; ++j) a.push_back(float(j - 16));
  std::vector<uint8_t> want = {0x00, 0x3C, 0x7F, 0x81, 0x03, 0xFD, 0x01, 0xFF, 0x00, 0x02, 0x64,
                               0x9B};
  for (int j = 10; j < 32; ++j) want.push_back(uint8_t(int8_t(j - 16)));
  EXPECT_EQ(q8_0(a), want);
  const std::vector<float> a_back = dq8_0(want);
  EXPECT_EQ(a_back[2], 3.0f);
  EXPECT_EQ(a_back[9], -101.0f);

  // Block B: amax 1, d = 1/127 = 0.0078740157 in float32; in fp16 (2^-7 x (1 + m/1024)):
  // m = (127/128 ... ) 0.0078740157 * 128 = 1.007874, (1.007874 - 1) * 1024 = 8.06 -> 8: bits
  // 0 01000 0000001000 = 0x2008 (bytes 08 20), value 2^-7 x 1032/1024 = 0.00787353515625.
  // id = 1 / d = 127: 1 -> 127 (7F), -0.5 -> -63.5 -> -64 (C0), 0.25 -> 31.75 -> 32 (20),
  // 0.1 -> 12.7 -> 13 (0D). Dequantized with the fp16 d: 127 x 0.00787353515625 = 0.99993896.
  std::vector<float> b(32, 0.0f);
  b[0] = 1.0f, b[1] = -0.5f, b[2] = 0.25f, b[3] = 0.1f;
  std::vector<uint8_t> want_b(34, 0x00);
  want_b[0] = 0x08, want_b[1] = 0x20, want_b[2] = 0x7F, want_b[3] = 0xC0, want_b[4] = 0x20,
  want_b[5] = 0x0D;
  EXPECT_EQ(q8_0(b), want_b);
  EXPECT_EQ(dq8_0(want_b)[0], 127 * 0.00787353515625f);
  EXPECT_EQ(dq8_0(want_b)[1], -64 * 0.00787353515625f);

  // All zero: amax 0, d = 0 (bytes 00 00), id = 0, every q 0.
  EXPECT_EQ(q8_0(std::vector<float>(32, 0.0f)), std::vector<uint8_t>(34, 0x00));
}

TEST(GgufQuant, Q4_0BlocksWorkedByHand) {
  // Block P: the largest magnitude is 8 (x[0]; x[1] = -8 ties and the first one wins), so
  // d = 8 / -8 = -1 (fp16 0xBC00, bytes 00 BC), id = -1, q = min(15, (int8)(8.5 - x)):
  //   x[0..15]  8 -8  0  1 -1 .5 -.5  7 -7 3.2 -3.7 2.5 -2.5  6  4 -4
  //   q         0 15  8  7  9  8   9  1 15   5   12   6   11  2  4 12   (-8: 16.5 -> 16 -> 15)
  //   x[16..31] 7 6 5 ... -8 (x[16+j] = 7 - j): q = j + 1, the last 16 -> 15
  // qs[j] = q[j] | q[16+j] << 4: 0x10 0x2F 0x38 0x47 0x59 0x68 0x79 0x81 0x9F 0xA5 0xBC 0xC6
  // 0xDB 0xE2 0xF4 0xFC. Dequantized (q - 8) x -1: -8 comes back as -7 (clipped, error 1 = |d|).
  std::vector<float> p = {8, -8, 0, 1, -1, 0.5f, -0.5f, 7, -7, 3.2f, -3.7f, 2.5f, -2.5f, 6, 4, -4};
  for (int j = 0; j < 16; ++j) p.push_back(float(7 - j));
  const std::vector<uint8_t> want_p = {0x00, 0xBC, 0x10, 0x2F, 0x38, 0x47, 0x59, 0x68, 0x79,
                                       0x81, 0x9F, 0xA5, 0xBC, 0xC6, 0xDB, 0xE2, 0xF4, 0xFC};
  EXPECT_EQ(q4_0(p), want_p);
  const std::vector<float> p_back = dq4_0(want_p);
  EXPECT_EQ(p_back[0], 8.0f);
  EXPECT_EQ(p_back[1], -7.0f);
  EXPECT_EQ(p_back[31], -7.0f);

  // Block N, a negative max: -16 first (16 ties), d = -16 / -8 = 2 (fp16 0x4000, bytes 00 40),
  // id = 0.5, q = min(15, (int8)(x/2 + 8.5)):
  //   x   -16 16  0  1 -1  3 14 15 15.5 -15 -3  2   (the rest 0: q 8)
  //   q     0 15  8  9  8 10 15 15   15   1  7  9
  //   back -16 14 0  2  0  4 14 14   14 -14 -2  2   (16 and 15.5 clip to 7 x 2 = 14)
  // qs[j] = q[j] | 8 << 4 (x[16..31] = 0): 0x80 0x8F 0x88 0x89 0x88 0x8A 0x8F 0x8F 0x8F 0x81 0x87
  // 0x89, then 0x88.
  std::vector<float> n = {-16, 16, 0, 1, -1, 3, 14, 15, 15.5f, -15, -3, 2};
  n.resize(32, 0.0f);
  std::vector<uint8_t> want_n = {0x00, 0x40, 0x80, 0x8F, 0x88, 0x89, 0x88, 0x8A, 0x8F, 0x8F,
                                 0x8F, 0x81, 0x87, 0x89};
  want_n.resize(18, 0x88);
  EXPECT_EQ(q4_0(n), want_n);
  const std::vector<float> want_back = {-16, 14, 0, 2, 0, 4, 14, 14, 14, -14, -2, 2};
  for (size_t j = 0; j < want_back.size(); ++j) EXPECT_EQ(dq4_0(want_n)[j], want_back[j]) << j;

  // All zero: max stays 0.0, d = 0 / -8 = -0.0 (fp16 0x8000, bytes 00 80), id = 0, q = 8 for
  // every value (0x88); dequantized (8 - 8) x -0 = -0, equal to 0.
  std::vector<uint8_t> want_z(18, 0x88);
  want_z[0] = 0x00, want_z[1] = 0x80;
  EXPECT_EQ(q4_0(std::vector<float>(32, 0.0f)), want_z);
  for (float v : dq4_0(want_z)) EXPECT_EQ(v, 0.0f);
}

TEST(GgufQuant, Fp16IsTorchHalfRoundToNearestEven) {
  // Every fp16 bit pattern converts to the float torch gives it (NaNs stay NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ours = fp16_to_fp32(uint16_t(h));
    const float torch = float(c10::Half(uint16_t(h), c10::Half::from_bits()));
    if (std::isnan(torch)) EXPECT_TRUE(std::isnan(ours)) << h;
    else ASSERT_EQ(ours, torch) << h;
  }
  // fp32 -> fp16: halfway cases (ties to even), subnormals, overflow, and random floats.
  std::vector<float> xs = {1.0f + 0x1.0p-11f, 1.0f + 3 * 0x1.0p-11f, 65504.0f, 65519.0f,
                           65520.0f, 1e10f, 0x1.0p-24f, 0x1.0p-25f, 0x1.8p-25f, 3e-8f, -0.0f,
                           INFINITY, -INFINITY};
  at::Generator g = at::detail::createCPUGenerator(7);
  at::Tensor r = at::randn({20000}, g) * at::pow(10.0, at::randint(-9, 6, {20000}, g));
  for (int64_t i = 0; i < r.numel(); ++i) xs.push_back(r.data_ptr<float>()[i]);
  for (float x : xs) ASSERT_EQ(fp32_to_fp16(x), c10::Half(x).x) << x;
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1.0p-11f), 0x3C00);  // tie: down to the even mantissa
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1.0p-11f), 0x3C02);  // tie: up to the even mantissa
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
}

// ---------------------------------------------------------------------------------------------
// error bounds and the container

// q8_0: q = round(x / d) with |x / d| <= 127, so |x - q d| <= d/2 with the float32 d; the file
// holds d16 = fp16(d), adding |q| |d - d16| <= 127 |d - d16|. q4_0: q - 8 = round(x / d) for
// x / d <= 7.5, error <= |d|/2; above, x is on the other side of max with |x| > 15/16 of it and
// clips to q - 8 = 7, error <= |d| (the value -max itself comes back as 7/8 of it); the fp16 d
// adds 8 |d - d16|. Checked on rows of 33 blocks at scales from 1e-6 to 1e3.
TEST(GgufQuant, RoundTripErrorIsWithinEachFormatsBound) {
  for (double scale : {1e-6, 1e-3, 0.02, 1.0, 1e3}) {
    const std::vector<float> x = random_row(33 * 32, scale, uint64_t(scale * 1e6) + 1);
    const std::vector<float> y8 = dq8_0(q8_0(x)), y4 = dq4_0(q4_0(x));
    double worst8 = 0, worst4 = 0;  // largest error / |d| seen
    for (size_t b = 0; b < 33; ++b) {
      float amax = 0, max = 0;
      for (size_t j = 0; j < 32; ++j)
        if (amax < std::fabs(x[b * 32 + j])) amax = std::fabs(x[b * 32 + j]), max = x[b * 32 + j];
      const double d8 = amax / 127.0f, d4 = std::fabs(max / -8.0f);
      const double h8 = std::fabs(d8 - float(c10::Half(float(d8)))),
                   h4 = std::fabs(d4 - std::fabs(float(c10::Half(float(d4)))));
      for (size_t j = 0; j < 32; ++j) {
        const size_t i = b * 32 + j;
        const double e8 = std::fabs(double(x[i]) - y8[i]), e4 = std::fabs(double(x[i]) - y4[i]);
        const bool clipped = x[i] / (max / -8.0f) > 7.5f;
        EXPECT_LE(e8, d8 / 2 * (1 + 1e-6) + 127 * h8) << "q8_0 scale " << scale << " i " << i;
        EXPECT_LE(e4, (clipped ? d4 : d4 / 2) * (1 + 1e-6) + 8 * h4)
            << "q4_0 scale " << scale << " i " << i << (clipped ? " (clipped)" : "");
        worst8 = std::max(worst8, e8 / d8), worst4 = std::max(worst4, e4 / d4);
      }
    }
    std::printf("scale %g: largest error q8_0 %.4f d, q4_0 %.4f d\n", scale, worst8, worst4);
  }
}

TEST(GgufQuant, WriteReadRoundTripOfQuantizedTensors) {
  TempDir tmp;
  const fs::path p = tmp.path / "q.gguf";
  at::Generator g = at::detail::createCPUGenerator(3);
  const at::Tensor w8 = at::randn({5, 96}, g), w4 = at::randn({3, 64}, g) * 0.02;
  write_gguf(p, {}, {{"w8", w8, GgmlType::Q8_0}, {"n", at::ones({7}), GgmlType::F32},
                     {"w4", w4, GgmlType::Q4_0}});
  const GgufFile f(p);
  EXPECT_EQ(f.type("w8"), GgmlType::Q8_0);
  EXPECT_EQ(f.type("w4"), GgmlType::Q4_0);
  EXPECT_EQ(f.ggml_ne("w8"), (std::vector<int64_t>{96, 5}));
  EXPECT_EQ(f.shape("w4"), (std::vector<int64_t>{3, 64}));
  // The stored bytes are the rows' blocks, in row order: 5 x 3 blocks of 34 bytes, 3 x 2 of 18.
  const std::string bytes = read_file(p);
  const std::vector<float> x8(w8.data_ptr<float>(), w8.data_ptr<float>() + w8.numel());
  const std::vector<float> x4(w4.data_ptr<float>(), w4.data_ptr<float>() + w4.numel());
  const std::vector<uint8_t> b8 = q8_0(x8), b4 = q4_0(x4);
  ASSERT_EQ(b8.size(), 15u * 34);
  ASSERT_EQ(b4.size(), 6u * 18);
  EXPECT_EQ(std::memcmp(bytes.data() + f.data_offset("w8"), b8.data(), b8.size()), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + f.data_offset("w4"), b4.data(), b4.size()), 0);
  EXPECT_EQ(f.data_offset("n") - f.data_offset("w8"), 512u);  // 510 bytes padded to 32
  // Read back: dequantized float32, what ggml_round_trip gives, near the source.
  const at::Tensor r8 = f.tensor("w8"), r4 = f.tensor("w4");
  EXPECT_EQ(r8.scalar_type(), at::kFloat);
  EXPECT_EQ(r8.sizes(), w8.sizes());
  EXPECT_TRUE(r8.equal(ggml_round_trip(w8, GgmlType::Q8_0)));
  EXPECT_TRUE(r4.equal(ggml_round_trip(w4, GgmlType::Q4_0)));
  std::vector<float> y8 = dq8_0(b8);
  EXPECT_TRUE(r8.equal(at::from_blob(y8.data(), {5, 96}, at::kFloat)));
  // d/2, plus up to 127 x fp16's relative rounding of d (2^-11): < 0.57 d <= 0.57 max|x| / 127.
  EXPECT_LT((r8 - w8).abs().max().item<double>(), 0.57 * w8.abs().max().item<double>() / 127);
  EXPECT_GT((r4 - w4).abs().max().item<double>(), 0.0);
  // Rows that are no whole number of blocks cannot be written quantized.
  expect_error<ConfigError>([&] {
    write_gguf(tmp.path / "bad.gguf", {}, {{"odd", at::ones({4, 33}), GgmlType::Q8_0}});
  }, {"tensor 'odd'", "rows of 33 values cannot be written as Q8_0", "blocks of 32"});
}

TEST(GgufQuant, TruncatedOrMisalignedQuantizedTensorNamesIt) {
  TempDir tmp;
  const fs::path p = tmp.path / "q.gguf";
  write_gguf(p, {}, {{"a.weight", at::ones({2, 32}), GgmlType::F32},
                     {"blk.0.ffn_up.weight", at::randn({4, 64}), GgmlType::Q4_0}});
  const std::string b = read_file(p);
  const GgufFile f(b, "q.gguf");
  const uint64_t start = f.data_offset("blk.0.ffn_up.weight");  // 8 blocks of 18 bytes
  EXPECT_EQ(b.size(), start + 160);  // 144 bytes, padded to the alignment 32
  for (uint64_t cut : {start + 1, start + 18, start + 143})
    expect_error<FormatError>([&] { GgufFile g(b.substr(0, cut), "cut.gguf"); },
                              {"cut.gguf", "tensor 'blk.0.ffn_up.weight' data",
                               fmt::format("[{}, {})", start, start + 144), "truncated?"});
  // ne[0] = 48: rows that are no whole number of blocks.
  std::string rows = b;
  const size_t ne0_at = b.find("blk.0.ffn_up.weight") + 19 + 4;
  ASSERT_EQ(b[ne0_at], 64);
  rows[ne0_at] = 48;
  expect_error<FormatError>([&] { GgufFile g(rows, "rows.gguf"); },
                            {"rows.gguf", "tensor 'blk.0.ffn_up.weight' of type Q4_0",
                             "ne[0] = 48", "not a multiple of its block size 32"});
  // The offset moved off the alignment.
  std::string moved = b;
  const size_t offset_at = ne0_at + 16 + 4;
  moved[offset_at] = char(moved[offset_at] + 2);
  expect_error<FormatError>([&] { GgufFile g(moved, "moved.gguf"); },
                            {"moved.gguf", "tensor 'blk.0.ffn_up.weight' offset",
                             "not a multiple of the alignment 32"});
}

// ---------------------------------------------------------------------------------------------
// client: ggml's own quantizers (libggml-base.so of node-llama-cpp's llama.cpp build)

using QuantizeRow = void (*)(const float*, void*, int64_t);
using DequantizeRow = void (*)(const void*, float*, int64_t);
using Fp32ToFp16 = uint16_t (*)(float);

TEST(LlamaCpp, QuantizersMatchGgmlByteForByte) {
  const fs::path lib = test::source_dir() /
      "tools/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << lib << ": " << dlerror() << " (scripts/setup_node.sh)";
  auto sym = [&](const char* name) {
    void* s = dlsym(h, name);
    EXPECT_NE(s, nullptr) << name;
    return s;
  };
  const auto ggml_q8 = reinterpret_cast<QuantizeRow>(sym("quantize_row_q8_0_ref"));
  const auto ggml_q4 = reinterpret_cast<QuantizeRow>(sym("quantize_row_q4_0_ref"));
  const auto ggml_dq8 = reinterpret_cast<DequantizeRow>(sym("dequantize_row_q8_0"));
  const auto ggml_dq4 = reinterpret_cast<DequantizeRow>(sym("dequantize_row_q4_0"));
  const auto ggml_fp16 = reinterpret_cast<Fp32ToFp16>(sym("ggml_fp32_to_fp16"));
  ASSERT_TRUE(ggml_q8 && ggml_q4 && ggml_dq8 && ggml_dq4 && ggml_fp16);
  int64_t blocks = 0;
  // Scales down to 1e-7 put d among fp16's subnormals; 1e5 overflows d to infinity in q4_0
  // (|max| / 8 > 65504) as it does in ggml.
  for (double scale : {1e-7, 1e-5, 1e-3, 0.02, 0.3, 1.0, 50.0, 1e5}) {
    std::vector<float> x = random_row(256 * 32, scale, uint64_t(scale * 1e7) + 11);
    for (size_t i = 0; i < 64; ++i) x[i] = float(int(i % 9) - 4) * float(scale);  // exact ties
    const int64_t n = int64_t(x.size());
    std::vector<uint8_t> theirs8(size_t(n) / 32 * 34), theirs4(size_t(n) / 32 * 18);
    ggml_q8(x.data(), theirs8.data(), n);
    ggml_q4(x.data(), theirs4.data(), n);
    EXPECT_EQ(q8_0(x), theirs8) << "q8_0 at scale " << scale;
    EXPECT_EQ(q4_0(x), theirs4) << "q4_0 at scale " << scale;
    std::vector<float> y8(size_t(n), 0), y4(size_t(n), 0);
    ggml_dq8(theirs8.data(), y8.data(), n);
    ggml_dq4(theirs4.data(), y4.data(), n);
    const std::vector<float> ours8 = dq8_0(theirs8), ours4 = dq4_0(theirs4);
    EXPECT_EQ(std::memcmp(ours8.data(), y8.data(), y8.size() * 4), 0) << "q8_0 at " << scale;
    EXPECT_EQ(std::memcmp(ours4.data(), y4.data(), y4.size() * 4), 0) << "q4_0 at " << scale;
    for (float v : x) ASSERT_EQ(fp32_to_fp16(v), ggml_fp16(v)) << v;
    blocks += n / 32;
  }
  std::printf("%lld blocks of each type quantized byte for byte as ggml does\n",
              static_cast<long long>(blocks));
  dlclose(h);
}

}  // namespace
}  // namespace ac
