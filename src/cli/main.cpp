// autocompress: compress an LLM to fit a deployment. One subcommand per pipeline stage
// (docs/design.md, "The pipeline"); `compress` runs them all.
#include <algorithm>
#include <cstdio>

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
