// UTF-8 and Unicode helpers of the tokenizer.json reader (io/hf_tokenizer.h): code point decoding
// and encoding, the White_Space property (Rust's char::is_whitespace, what the tokenizers library's
// added tokens strip with lstrip/rstrip), the GPT-2 byte-to-unicode table of the ByteLevel
// components, and the Unicode normalization forms (utf8proc, Unicode 15) of the NFC/NFD/NFKC/NFKD
// normalizers.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ac::hf {

/// Decodes the code point starting at `s[i]` of valid UTF-8 and advances `i` past it.
inline uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const uint32_t c = u[i];
  if (c < 0x80) return ++i, c;
  if (c < 0xE0) return i += 2, ((c & 0x1F) << 6) | (u[i - 1] & 0x3F);
  if (c < 0xF0) return i += 3, ((c & 0x0F) << 12) | ((u[i - 2] & 0x3F) << 6) | (u[i - 1] & 0x3F);
  i += 4;
  return ((c & 0x07) << 18) | ((u[i - 3] & 0x3F) << 12) | ((u[i - 2] & 0x3F) << 6) |
         (u[i - 1] & 0x3F);
}

/// Number of bytes of the UTF-8 sequence that starts with `lead` (1 for a continuation byte).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF) to `out`.
void append_utf8(std::string& out, uint32_t cp);

/// Byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates and code points
/// above U+10FFFF are invalid, as in Rust's str), or npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

/// Decodes bytes as UTF-8 replacing each maximal invalid subpart with U+FFFD (Rust's
/// String::from_utf8_lossy and the WHATWG TextDecoder agree on this policy).
std::string utf8_lossy(std::string_view bytes);

/// Unicode's White_Space property: Rust's char::is_whitespace, Oniguruma's \s.
bool is_white_space(uint32_t cp);

/// The GPT-2 byte-to-unicode table (tokenizers' bytes_char, OpenAI's bytes_to_unicode): byte b ->
/// the UTF-8 of a printable code point (the byte itself for '!'..'~', 0xA1..0xAC, 0xAE..0xFF;
/// U+0100 + k for the k-th other byte).
const std::array<std::string, 256>& byte_to_unicode();
/// The inverse of byte_to_unicode for a code point; -1 when cp is not in the table.
int unicode_to_byte(uint32_t cp);

/// The Unicode normalization forms of the tokenizers library's NFC, NFD, NFKC and NFKD
/// normalizers (utf8proc). `s` must be valid UTF-8. Throws FormatError if utf8proc fails.
enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
std::string unicode_normalize(std::string_view s, NormalForm form);

}  // namespace ac::hf
