#include "io/hf_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstring>

#include "common/error.h"
#include "io/hf_unicode.h"

namespace ac::hf {

namespace {

[[noreturn]] void refuse(const std::string& where, size_t at, const std::string& what) {
  throw FormatError(msg("hf_tokenizer", "{}: regex construct {} at character {} is not "
                        "supported (it means something else in PCRE2 than in Oniguruma, the "
                        "tokenizers library's engine)", where, what, at));
}

/// Rewrites one escape `\c` at pattern[i] (i points at the backslash); returns the characters
/// consumed.
size_t rewrite_escape(const std::string& p, size_t i, bool in_class, const std::string& where,
                      std::string& out) {
  if (i + 1 >= p.size()) refuse(where, i, "'\\' at the end");
  const char c = p[i + 1];
  switch (c) {
    case 's': out += "\\p{White_Space}"; return 2;
    case 'S': out += "\\P{White_Space}"; return 2;
    case 'v': out += "\\x0B"; return 2;
    case 'u': {
      if (i + 6 > p.size()) refuse(where, i, "'\\u' without 4 hex digits");
      out += "\\x{" + p.substr(i + 2, 4) + "}";
      return 6;
    }
    case 'h': case 'H': case 'w': case 'W': case 'b': case 'B': case 'G': case 'K':
    case 'R': case 'X': case 'N': case 'O': case 'y': case 'Y': case 'g': case 'k':
      refuse(where, i, std::string("'\\") + c + "'");
    default:
      out.append(p, i, 2);
      return 2;
  }
}

/// Copies a [...] class starting at pattern[i]; returns the characters consumed.
size_t rewrite_class(const std::string& p, size_t i, const std::string& where, std::string& out) {
  const size_t start = i;
  out += p[i++];
  if (i < p.size() && p[i] == '^') out += p[i++];
  if (i < p.size() && p[i] == ']') out += p[i++];  // a literal ']' first in the class
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '\\') {
      i += rewrite_escape(p, i, /*in_class=*/true, where, out);
    } else if (p[i] == '[') {
      refuse(where, i, p.compare(i, 2, "[:") == 0 ? "'[:...:]' (POSIX bracket)"
                                                  : "'[' inside a class (nested class)");
    } else if (p.compare(i, 2, "&&") == 0) {
      refuse(where, i, "'&&' (class intersection)");
    } else {
      out += p[i++];
    }
  }
  if (i >= p.size()) refuse(where, start, "'[' without its ']'");
  out += p[i++];
  return i - start;
}

/// Checks a group opening "(?" at pattern[i]; copies what PCRE2 reads the same way.
size_t rewrite_group(const std::string& p, size_t i, const std::string& where, std::string& out) {
  static const char* kSame[] = {"(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>", "(?i:", "(?-i:", "(?<"};
  for (const char* s : kSame) {
    const size_t n = std::strlen(s);
    if (p.compare(i, n, s) == 0) {
      out.append(s, n);
      return n;
    }
  }
  refuse(where, i, "'" + p.substr(i, 4) + "' (inline flags other than (?i:...))");
}

}  // namespace

std::string oniguruma_to_pcre2(const std::string& p, const std::string& where) {
  std::string out;
  out.reserve(p.size() + 32);
  for (size_t i = 0; i < p.size();) {
    if (p[i] == '\\') i += rewrite_escape(p, i, /*in_class=*/false, where, out);
    else if (p[i] == '[') i += rewrite_class(p, i, where, out);
    else if (p.compare(i, 2, "(?") == 0) i += rewrite_group(p, i, where, out);
    else out += p[i++];
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where)
    : rewritten_(oniguruma_to_pcre2(pattern, where)), where_(where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* ctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(ctx, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten_.data()),
                                   rewritten_.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
                                   &error, &offset, ctx);
  pcre2_compile_context_free(ctx);
  if (!code) {
    PCRE2_UCHAR text[256];
    pcre2_get_error_message(error, text, sizeof(text));
    throw FormatError(msg("hf_tokenizer", "{}: regex '{}' does not compile (PCRE2: {} at offset "
                          "{} of '{}')", where, pattern, reinterpret_cast<const char*>(text),
                          offset, rewritten_));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it interprets
  code_ = std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
}

namespace {

/// Per-thread match data and a JIT stack large enough for long runs of one class.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr);
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(ctx, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

}  // namespace

void Regex::find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  thread_local MatchScratch scratch;
  auto* code = static_cast<const pcre2_code*>(code_.get());
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t from = 0;
  bool have_prev = false;
  size_t prev_end = 0;
  while (from <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, scratch.data,
                               scratch.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR m[256];
      pcre2_get_error_message(rc, m, sizeof(m));
      throw FormatError(msg("hf_tokenizer", "{}: regex match failed: {}", where_,
                            reinterpret_cast<const char*>(m)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_prev && prev_end == e) {  // the onig crate's rule for empty matches
      if (from >= text.size()) break;
      from += utf8_length(static_cast<unsigned char>(text[from]));
      continue;
    }
    out.emplace_back(uint32_t(s), uint32_t(e));
    have_prev = true;
    prev_end = e;
    from = e;
  }
}

}  // namespace ac::hf
