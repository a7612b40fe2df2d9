#include "io/llama2c_header.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace ac {

Llama2cHeader parse_llama2c_header(const uint8_t* data, uint64_t n, uint64_t file_bytes,
                                   const std::string& file) {
  if (n < kLlama2cHeaderBytes || file_bytes < kLlama2cHeaderBytes)
    throw FormatError(msg("llama2c", "{}: file is {} bytes, shorter than the {}-byte header",
                          file, file_bytes, kLlama2cHeaderBytes));
  Llama2cHeader h{};
  std::memcpy(&h, data, kLlama2cHeaderBytes);
  const std::pair<const char*, int32_t> fields[] = {
      {"dim", h.dim},         {"hidden_dim", h.hidden_dim}, {"n_layers", h.n_layers},
      {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads}, {"seq_len", h.seq_len}};
  for (const auto& [name, v] : fields)
    if (v <= 0 || v > kLlama2cMaxField)
      throw FormatError(msg("llama2c", "{}: header field {} = {}, expected 1..{}", file, name, v,
                            kLlama2cMaxField));
  if (h.vocab_size == 0 || h.vocab_size < -kLlama2cMaxField || h.vocab_size > kLlama2cMaxField)
    throw FormatError(msg("llama2c", "{}: header field vocab_size = {}, expected a non-zero "
                          "value within +-{}", file, h.vocab_size, kLlama2cMaxField));
  if (h.dim % h.n_heads != 0 || (h.dim / h.n_heads) % 2 != 0)
    throw FormatError(msg("llama2c", "{}: header field dim {} is not n_heads {} times an even "
                          "head_dim", file, h.dim, h.n_heads));
  if (h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0)
    throw FormatError(msg("llama2c", "{}: header field n_heads {} is not a multiple of "
                          "n_kv_heads {}", file, h.n_heads, h.n_kv_heads));
  const uint64_t expected = llama2c_expected_bytes(h);
  if (file_bytes != expected)
    throw FormatError(msg("llama2c", "{}: file is {} bytes, expected {} from the header (dim {}, "
                          "hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}, "
                          "seq_len {}): truncated or not a version-0 llama2.c model?",
                          file, file_bytes, expected, h.dim, h.hidden_dim, h.n_layers, h.n_heads,
                          h.n_kv_heads, h.vocab_size, h.seq_len));
  return h;
}

uint64_t llama2c_expected_bytes(const Llama2cHeader& h) {
  // 128-bit math: every field is <= 2^20, so each term is < 2^62 but 4 x their sum is not
  // (a wrapped size could match a small file); a size past 2^64 saturates, matching no file.
  using u128 = unsigned __int128;
  const u128 D = uint64_t(h.dim), F = uint64_t(h.hidden_dim), L = uint64_t(h.n_layers);
  const u128 V = uint64_t(std::abs(int64_t(h.vocab_size)));
  const u128 Hd = D / uint64_t(h.n_heads), KV = Hd * uint64_t(h.n_kv_heads);
  u128 floats = V * D                    // token_embedding
                + L * D                  // rms_att
                + L * D * D + 2 * L * KV * D + L * D * D  // wq, wk, wv, wo
                + L * D                  // rms_ffn
                + 3 * L * F * D          // w1, w2, w3
                + D                      // rms_final
                + u128(uint64_t(h.seq_len)) * Hd;  // freq_cis_real + _imag, [seq, Hd/2] each
  if (h.vocab_size < 0) floats += V * D;  // wcls
  const u128 bytes = kLlama2cHeaderBytes + 4 * floats;
  return bytes > u128(UINT64_MAX) ? UINT64_MAX : uint64_t(bytes);
}

}  // namespace ac
