// `autocompress cli-reference`: docs/cli.md, written from the parser itself, so that the
// reference and every subcommand's --help cannot disagree (a test diffs the two). Hidden options
// (the old spellings kept for one release) are left out; the table of flags shared by several
// subcommands shows their defaults side by side.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "common/markdown.h"

namespace {

// The flag's long name, e.g. "--seq-len"; a positional argument's name, e.g. "MODEL".
std::string flag_name(const CLI::Option* o) {
  return o->get_lnames().empty() ? o->get_name(/*positional=*/true) : "--" + o->get_lnames().front();
}

bool listed(const CLI::Option* o) {
  if (o->get_group().empty()) return false;  // hidden: an old spelling
  if (o->get_lnames().empty()) return o->get_positional();
  return o->get_lnames().front() != "help" && o->get_lnames().front() != "help-all";
}

std::string value_kind(const CLI::Option* o) {
  if (o->get_expected_min() == 0) return "switch";
  std::string t = o->get_type_name();
  const size_t colon = t.find(':');  // "INT:NONNEGATIVE": the check is in the description
  if (colon != std::string::npos) t = t.substr(0, colon);
  if (o->get_expected_max() > 1) t += " ...";
  return t.empty() ? "TEXT" : t;
}

std::string default_of(const CLI::Option* o) {
  if (o->get_required()) return "required";
  const std::string d = o->get_default_str();
  return d.empty() ? "" : "`" + d + "`";
}

std::vector<const CLI::App*> subcommands(const CLI::App& app) {
  std::vector<const CLI::App*> subs;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
    subs.push_back(s);
  return subs;
}

std::string reference(const CLI::App& app) {
  std::string md =
      "# Command-line reference\n\n"
      "Written by `autocompress cli-reference > docs/cli.md` from the parser itself; a test "
      "checks that this file and the program agree. `autocompress SUBCOMMAND --help` prints the "
      "same per subcommand.\n\n"
      "Units everywhere: latencies in milliseconds (`_ms`), lengths in tokens, memory in bytes "
      "in JSON and with binary prefixes (KiB, MiB, GiB) in printouts. The same flag has the same "
      "meaning on every subcommand; the table at the end lists the flags several subcommands "
      "share, with each one's default.\n\n";
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> shared;
  // A subcommand with subcommands of its own (`import llama2c`) lists each of them instead.
  std::vector<std::pair<std::string, const CLI::App*>> sections;
  for (const CLI::App* s : subcommands(app)) {
    const std::vector<const CLI::App*> nested = subcommands(*s);
    if (nested.empty()) sections.emplace_back(s->get_name(), s);
    for (const CLI::App* n : nested) sections.emplace_back(s->get_name() + " " + n->get_name(), n);
  }
  for (const auto& [name, s] : sections) {
    md += fmt::format("## {}\n\n{}\n\n", name, s->get_description());
    md += "| flag | value | default | meaning |\n|---|---|---|---|\n";
    for (const CLI::Option* o : s->get_options()) {
      if (!listed(o)) continue;
      md += fmt::format("| `{}` | {} | {} | {} |\n", flag_name(o), ac::markdown_cell(value_kind(o)),
                        ac::markdown_cell(default_of(o)), ac::markdown_cell(o->get_description()));
      if (!o->get_lnames().empty()) shared[flag_name(o)].emplace_back(name, default_of(o));
    }
    md += "\n";
  }
  md += "## Flags shared by several subcommands\n\n| flag | subcommand: default |\n|---|---|\n";
  for (const auto& [flag, uses] : shared) {
    if (uses.size() < 2) continue;
    std::string where;
    for (const auto& [sub, def] : uses)
      where += fmt::format("{}{}: {}", where.empty() ? "" : ", ", sub, def.empty() ? "none" : def);
    md += fmt::format("| `{}` | {} |\n", flag, where);
  }
  return md;
}

ac::cli::RegisterCommand reg(99, [](CLI::App& app) {
  CLI::App* s = app.add_subcommand(
      "cli-reference", "Print the Markdown reference of every subcommand's flags (docs/cli.md)");
  const CLI::App* root = &app;
  s->callback([root] { std::fputs(reference(*root).c_str(), stdout); });
});

}  // namespace
