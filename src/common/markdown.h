// Text for Markdown (GitHub-flavoured tables): what report.md and docs/cli.md are written with.
#pragma once
#include <string>

namespace ac {

/// `text` as one cell of a GitHub-flavoured Markdown table: a '|' would end the cell (an
/// architecture's layers are written "[A | B]", a flag's description may hold one) and a line
/// break would end the row, so '|' becomes "\|" and a line break a space.
inline std::string markdown_cell(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n') out += ' ';
    else out += ch;
  }
  return out;
}

}  // namespace ac
