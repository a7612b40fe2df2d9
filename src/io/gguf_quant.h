// ggml's block quantizations Q8_0 and Q4_0, and its fp16, without torch (the GGUF fuzz target
// dequantizes what it reads with these).
//
// Source: llama.cpp ggml/src/ggml-common.h (block_q8_0, block_q4_0), ggml/src/ggml-quants.c
// (quantize_row_q8_0_ref, quantize_row_q4_0_ref, dequantize_row_q8_0, dequantize_row_q4_0: the
// reference quantizers llama-quantize uses for these types without an importance matrix),
// ggml/src/ggml-impl.h (ggml_compute_fp32_to_fp16, ggml_compute_fp16_to_fp32). A row of n values
// (n a multiple of 32) is n / 32 blocks, each over 32 consecutive values x[0..31]:
//
//   block_q8_0, 34 bytes: [0, 2) fp16 d, [2, 34) int8 q[32]
//     amax = max |x[j]|; d = amax / 127; id = d ? 1/d : 0; q[j] = roundf(x[j] * id)
//     value j = q[j] * d                                  (|x - value| <= d/2, plus fp16's
//                                                          rounding of d: see the tests)
//   block_q4_0, 18 bytes: [0, 2) fp16 d, [2, 18) uint8 qs[16]
//     max = the x[j] of largest magnitude, with its sign (the first such one);
//     d = max / -8; id = d ? 1/d : 0; q[j] = min(15, (int8)(x[j] * id + 8.5))
//     qs[j] = q[j] | q[j + 16] << 4  (values 0..15 in the low nibbles, 16..31 in the high)
//     value j = (q[j] - 8) * d
//
// d is stored as IEEE fp16 rounded to nearest even, computed from the float32 d; quantizing uses
// the float32 d and id, dequantizing the fp16 d. max keeps its sign so that it maps to q = 0
// exactly (-8 * d = max), and the other side reaches +7 * |d|.
#pragma once
#include <cstdint>

namespace ac {

inline constexpr int64_t kQ8_0BlockValues = 32, kQ8_0BlockBytes = 34;  // QK8_0, sizeof(block_q8_0)
inline constexpr int64_t kQ4_0BlockValues = 32, kQ4_0BlockBytes = 18;  // QK4_0, sizeof(block_q4_0)

/// float32 -> IEEE fp16 bits, round to nearest even, NaN kept (ggml_compute_fp32_to_fp16).
uint16_t fp32_to_fp16(float x);
/// IEEE fp16 bits -> float32, exact (ggml_compute_fp16_to_fp32).
float fp16_to_fp32(uint16_t h);

/// Quantizes x [n] (n a multiple of 32) into n / 32 blocks of 34 bytes at `out`
/// (quantize_row_q8_0_ref). The caller checks n; AC_CHECK otherwise.
void quantize_row_q8_0(const float* x, uint8_t* out, int64_t n);
/// Quantizes x [n] (n a multiple of 32) into n / 32 blocks of 18 bytes at `out`
/// (quantize_row_q4_0_ref).
void quantize_row_q4_0(const float* x, uint8_t* out, int64_t n);
/// n / 32 blocks of 34 bytes at `in` -> y [n] float32 (dequantize_row_q8_0).
void dequantize_row_q8_0(const uint8_t* in, float* y, int64_t n);
/// n / 32 blocks of 18 bytes at `in` -> y [n] float32 (dequantize_row_q4_0).
void dequantize_row_q4_0(const uint8_t* in, float* y, int64_t n);

}  // namespace ac
