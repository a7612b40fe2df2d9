#include "io/gguf_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace ac {

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t load_d(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  return d;
}

void store_d(uint8_t* block, float d) {
  const uint16_t h = fp32_to_fp16(d);
  std::memcpy(block, &h, 2);
}

}  // namespace

// ggml-impl.h ggml_compute_fp32_to_fp16 (from the FP16 library): scaling by 2^112 then 2^-110
// rounds the mantissa to fp16's in the FPU, so the result is round-to-nearest-even, with
// overflow to infinity and fp16 subnormals handled by the added bias.
uint16_t fp32_to_fp16(float f) {
  const float scale_to_inf = 0x1.0p+112f, scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = bits_of(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = float_of((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bits_of(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// ggml-impl.h ggml_compute_fp16_to_fp32.
float fp16_to_fp32(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float normalized = float_of((two_w >> 4) + exp_offset) * 0x1.0p-112f;
  const uint32_t magic_mask = 126u << 23;
  const float denormalized = float_of((two_w >> 17) | magic_mask) - 0.5f;
  const uint32_t denormalized_cutoff = 1u << 27;
  return float_of(sign | bits_of(two_w < denormalized_cutoff ? denormalized : normalized));
}

void quantize_row_q8_0(const float* x, uint8_t* out, int64_t n) {
  AC_CHECK(n % kQ8_0BlockValues == 0, "q8_0 row of {} values", n);
  for (int64_t b = 0; b < n / kQ8_0BlockValues; ++b) {
    const float* xb = x + b * kQ8_0BlockValues;
    uint8_t* yb = out + b * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0BlockValues; ++j) {  // ggml's MAX: a NaN is kept, as there
      const float a = std::fabs(xb[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_d(yb, d);
    for (int64_t j = 0; j < kQ8_0BlockValues; ++j)
      yb[2 + j] = uint8_t(int8_t(std::roundf(xb[j] * id)));
  }
}

void quantize_row_q4_0(const float* x, uint8_t* out, int64_t n) {
  AC_CHECK(n % kQ4_0BlockValues == 0, "q4_0 row of {} values", n);
  constexpr int64_t half = kQ4_0BlockValues / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockValues; ++b) {
    const float* xb = x + b * kQ4_0BlockValues;
    uint8_t* yb = out + b * kQ4_0BlockBytes;
    float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign
    for (int64_t j = 0; j < kQ4_0BlockValues; ++j)
      if (amax < std::fabs(xb[j])) amax = std::fabs(xb[j]), max = xb[j];
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_d(yb, d);
    for (int64_t j = 0; j < half; ++j) {
      const float x0 = xb[j] * id, x1 = xb[half + j] * id;
      const auto q0 = uint8_t(std::min<int>(15, int8_t(x0 + 8.5f)));
      const auto q1 = uint8_t(std::min<int>(15, int8_t(x1 + 8.5f)));
      yb[2 + j] = uint8_t(q0 | q1 << 4);
    }
  }
}

void dequantize_row_q8_0(const uint8_t* in, float* y, int64_t n) {
  AC_CHECK(n % kQ8_0BlockValues == 0, "q8_0 row of {} values", n);
  for (int64_t b = 0; b < n / kQ8_0BlockValues; ++b) {
    const uint8_t* xb = in + b * kQ8_0BlockBytes;
    float* yb = y + b * kQ8_0BlockValues;
    const float d = fp16_to_fp32(load_d(xb));
    for (int64_t j = 0; j < kQ8_0BlockValues; ++j) yb[j] = float(int8_t(xb[2 + j])) * d;
  }
}

void dequantize_row_q4_0(const uint8_t* in, float* y, int64_t n) {
  AC_CHECK(n % kQ4_0BlockValues == 0, "q4_0 row of {} values", n);
  constexpr int64_t half = kQ4_0BlockValues / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockValues; ++b) {
    const uint8_t* xb = in + b * kQ4_0BlockBytes;
    float* yb = y + b * kQ4_0BlockValues;
    const float d = fp16_to_fp32(load_d(xb));
    for (int64_t j = 0; j < half; ++j) {
      yb[j] = float((xb[2 + j] & 0x0F) - 8) * d;
      yb[half + j] = float((xb[2 + j] >> 4) - 8) * d;
    }
  }
}

}  // namespace ac
