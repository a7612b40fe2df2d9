// autocompress: compress an LLM to fit a deployment. One subcommand per pipeline stage
// (docs/design.md, "The pipeline"); `compress` runs them all.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "common/error.h"
#include "common/runtime.h"
#include "distill/distill.h"

namespace ac::cli {
std::vector<std::pair<int, CommandSetup>>& command_registry() {
  static std::vector<std::pair<int, CommandSetup>> r;
  return r;
}
}  // namespace ac::cli

namespace {

/// Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// "unknown subcommand 'prun' (did you mean prune?)" and the subcommands of `app`, or "" when
/// `argv` names subcommands that exist. CLI11 alone reports a mistyped subcommand as "A
/// subcommand is required", which does not say what was wrong with the word typed.
std::string unknown_subcommand_message(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const std::vector<CLI::App*> subs = at->get_subcommands({});
    if (word.empty() || word[0] == '-' || subs.empty()) return "";
    const auto named = std::find_if(subs.begin(), subs.end(),
                                    [&](const CLI::App* s) { return s->check_name(word); });
    if (named != subs.end()) {
      at = *named;
      path += word + " ";
      continue;
    }
    const auto positional = [](const CLI::Option* o) { return !o->nonpositional(); };
    if (!at->get_options(positional).empty()) return "";  // an argument, not a subcommand
    std::string best, names;
    size_t best_distance = std::string::npos, width = 0;
    for (const CLI::App* s : subs) width = std::max(width, s->get_name().size());
    for (CLI::App* s : subs) {
      if (s->get_group().empty()) continue;  // hidden
      const size_t d = edit_distance(word, s->get_name());
      if (d < best_distance) best_distance = d, best = s->get_name();
      names += fmt::format("\n  {:<{}}  {}", s->get_name(), width, s->get_description());
    }
    // Close enough to be a typo: at most 2 edits, or a third of the word.
    const bool suggest = best_distance <= std::max<size_t>(2, word.size() / 3);
    return fmt::format("error: unknown subcommand '{}{}'{}\nsubcommands:{}", path, word,
                       suggest ? fmt::format(" (did you mean {}{}?)", path, best) : "", names);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  ac::ensure_fast_blas_kernels();  // may re-execute this program with OPENBLAS_CORETYPE set
  CLI::App app{"autocompress: compress an LLM so that it fits a deployment (AutoCompress method)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  auto& reg = ac::cli::command_registry();
  std::stable_sort(reg.begin(), reg.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, setup] : reg) setup(app);
  ac::init_torch_threads();
  if (const std::string unknown = unknown_subcommand_message(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "%s\n", unknown.c_str());
    return static_cast<int>(CLI::ExitCodes::ExtrasError);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ac::Interrupted& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.signal > 0 ? 128 + e.signal : 1;  // the shell's status for a signal's end
  } catch (const ac::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "error: torch: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
