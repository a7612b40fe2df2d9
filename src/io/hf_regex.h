// The regular expressions of tokenizer.json (Split pre-tokenizer, Replace normalizer/decoder
// "Regex" patterns). The tokenizers library compiles them with Oniguruma (Ruby syntax); this
// compiles them with PCRE2 (UTF, UCP, JIT) after checking that the pattern means the same in both:
//   \s, \S      -> \p{White_Space}, \P{White_Space} (Oniguruma's Unicode \s; PCRE2's \s differs
//                  on U+180E);
//   \uHHHH      -> \x{HHHH};  \v -> \x0B (a vertical tab in Oniguruma, a class in PCRE2);
//   ^ $         -> line anchors at \n (PCRE2_MULTILINE), as in Oniguruma's Ruby syntax;
//   (?i:...)    -> kept (Unicode simple case folding in both; Oniguruma's multi-character folds
//                  such as "ss" ~ U+00DF are not reproduced).
// Refused with a FormatError that names the file and JSON path (never a different split):
// \h \H (hex digit in Oniguruma, horizontal space in PCRE2), \w \W \b \B (word characters differ
// on marks), \G \K \R \X \N \O \y \Y \g \k, inline flags other than i, POSIX brackets [[:alpha:]],
// nested classes and && intersections inside [...].
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ac::hf {

/// A compiled tokenizer.json regex (PCRE2, JIT when available). Immutable and thread-safe.
class Regex {
 public:
  /// Compiles an Oniguruma pattern. `where` names errors ("FILE: pre_tokenizer.pattern.Regex").
  /// Throws FormatError on a construct listed above or a pattern PCRE2 rejects.
  Regex(const std::string& pattern, const std::string& where);

  /// Appends the byte range [begin, end) of every match in `text` (valid UTF-8), left to right,
  /// non-overlapping, as the onig crate's find_iter: an empty match right where the previous
  /// match ended is skipped by one character. Empty matches elsewhere are reported.
  /// Throws FormatError if PCRE2 fails (match limit, JIT stack).
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

  /// The PCRE2 pattern actually compiled (after the rewrites above).
  const std::string& pcre2_pattern() const { return rewritten_; }

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8
  std::string rewritten_, where_;
};

/// Rewrites an Oniguruma pattern for PCRE2 (see the header comment) or throws FormatError naming
/// `where` and the construct.
std::string oniguruma_to_pcre2(const std::string& pattern, const std::string& where);

}  // namespace ac::hf
