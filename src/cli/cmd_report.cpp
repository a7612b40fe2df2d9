// `autocompress report`: re-renders report.md and report.html of a finished compress run from the
// files in its folder (pipeline/report_html.h).
#include <cstdio>

#include "cli/command.h"
#include "pipeline/report_html.h"

namespace {
ac::cli::RegisterCommand reg(101, [](CLI::App& app) {
  auto run = std::make_shared<std::string>();
  CLI::App* s = app.add_subcommand(
      "report", "Re-render report.md and report.html of a finished compress run folder");
  s->add_option("--run", *run, "the output folder of `compress` (holds report.json)")->required();
  s->callback([run] {
    ac::rerender_reports(*run);
    std::printf("report: %s/report.md, %s/report.html\n", run->c_str(), run->c_str());
  });
});
}  // namespace
