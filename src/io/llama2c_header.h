// The header of a llama2.c checkpoint (Karpathy's run.c, "legacy" version-0 layout), without
// torch (the fuzz targets link only this; io/llama2c.h reads the weights).
//
// model.bin: seven little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len; vocab_size > 0: the output head shares the embedding, < 0: a separate
// head follows), then the fp32 arrays listed in io/llama2c.h.
// Limits (docs/formats.md "Limits"): every field in 1..2^20 (vocab_size non-zero within
// +-2^20), dim = n_heads x an even head_dim, n_heads a multiple of n_kv_heads, and the file
// exactly as long as the header implies (computed in 128 bits: no size can wrap around).
#pragma once
#include <cstdint>
#include <string>

namespace ac {

/// The seven int32 of the version-0 header.
struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

inline constexpr uint64_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);
inline constexpr int32_t kLlama2cMaxField = 1 << 20;

/// Parses and validates the header from the first `n` bytes of a file of `file_bytes` bytes
/// (`n` may be less than the file: only 28 bytes are read). Throws FormatError "[llama2c] FILE:
/// ..." naming the field and the value found, or the expected and found file size.
Llama2cHeader parse_llama2c_header(const uint8_t* data, uint64_t n, uint64_t file_bytes,
                                   const std::string& file);

/// Bytes of a version-0 file with this (validated) header: 28 + 4 x (V x D + L x D + 2 x L x D
/// x D + 2 x L x G x Hd x D + L x D + 3 x L x F x D + D + seq_len x Hd (+ V x D untied)).
uint64_t llama2c_expected_bytes(const Llama2cHeader& h);

}  // namespace ac
