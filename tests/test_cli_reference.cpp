// docs/cli.md is the CLI's own account of its flags (`autocompress cli-reference`): the committed
// file equals what the program prints, every flag it lists for a subcommand is in that
// subcommand's --help, the old spellings still work with a warning, and a flag that is required
// on one subcommand is named when it is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <vector>

#include "test_util.h"

namespace fs = std::filesystem;

namespace {

// stdout (and stderr with `merge`) of a shell command, and its exit status.
std::pair<std::string, int> run(const std::string& cmd, bool merge = false) {
  const ac::test::CommandOutput r = ac::test::run_command(cmd, merge);
  return {r.out, r.status};
}

}  // namespace

TEST(CliReference, DocsCliMdIsWhatTheProgramPrints) {
  const auto [printed, status] = run(ac::test::cli_bin() + " cli-reference");
  ASSERT_EQ(status, 0);
  const fs::path doc = ac::test::source_dir() / "docs/cli.md";
  EXPECT_EQ(ac::read_file(doc), printed)
      << "docs/cli.md is stale: run `build/autocompress cli-reference > docs/cli.md`";
}

TEST(CliReference, EveryListedFlagIsInItsSubcommandsHelp) {
  const std::string md = ac::read_file(ac::test::source_dir() / "docs/cli.md");
  const std::regex section("^## ([a-z0-9 -]+)$");
  const std::regex flag_row("^\\| `(--[a-z0-9-]+|[A-Z_.]+)` \\|");
  std::istringstream lines(md);
  std::string line, sub, help;
  int flags = 0, subcommands = 0;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (!std::regex_match(line, m, section)) break;  // the shared-flags table: not a subcommand
      sub = m[1];
      help = run(ac::test::cli_bin() + " " + sub + " --help").first;
      subcommands += !help.empty();
      continue;
    }
    if (help.empty() || !std::regex_search(line, m, flag_row)) continue;
    ++flags;
    EXPECT_NE(help.find(std::string(m[1]) + " "), std::string::npos) << sub << " " << m[1];
  }
  EXPECT_GE(subcommands, 18);
  EXPECT_GE(flags, 150);
}

TEST(CliReference, OldSpellingsWorkWithAWarningAndAMissingScenarioIsNamed) {
  const std::string bin = ac::test::cli_bin();
  const fs::path config = ac::test::source_dir() / "tests/fixtures/configs/llama-3.1-8b.json";
  const auto [old_out, old_status] = run(bin + " plan --config " + config.string() +
                                             " --scenario h100-serving --granularity 128 --json",
                                         /*merge=*/true);
  EXPECT_EQ(old_status, 0) << old_out;
  EXPECT_NE(old_out.find("plan --granularity is deprecated and will be removed: use "
                         "--width-granularity"), std::string::npos) << old_out;
  EXPECT_NE(old_out.find("\"width_granularity\": 128"), std::string::npos) << old_out;
  const auto [new_out, new_status] = run(bin + " plan --config " + config.string() +
                                         " --scenario h100-serving --width-granularity 128 --json",
                                         /*merge=*/true);
  EXPECT_EQ(new_status, 0);
  EXPECT_EQ(new_out.find("deprecated"), std::string::npos) << new_out;
  const std::vector<std::string> missing_scenario = {
      "cost --config " + config.string(), "plan --config " + config.string(), "profile",
      "validate --profile p.json"};
  for (const std::string& sub : missing_scenario) {
    const auto [out, status] = run(bin + " " + sub, true);
    EXPECT_NE(status, 0) << sub;
    EXPECT_NE(out.find("--scenario is required"), std::string::npos) << sub << ": " << out;
  }
}
