// Subcommand registry: each cmd_*.cpp registers its subcommand with a static RegisterCommand,
// so stages add their CLI without touching main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace ac::cli {

using CommandSetup = std::function<void(CLI::App& app)>;

/// All registered setups, sorted by `order` (the order of `autocompress --help`).
std::vector<std::pair<int, CommandSetup>>& command_registry();

struct RegisterCommand {
  RegisterCommand(int order, CommandSetup setup) {
    command_registry().emplace_back(order, std::move(setup));
  }
};

/// The old spelling `old_flag` of `new_flag`, kept for one release: hidden from --help and
/// docs/cli.md, it sets the same `value` and says on stderr which flag replaces it.
template <typename T>
void add_deprecated_spelling(CLI::App* sub, const std::string& old_flag, const std::string& new_flag,
                             T& value) {
  const std::string where = sub->get_name();
  sub->add_option(old_flag, value)->group("")->each([where, old_flag, new_flag](const std::string&) {
    std::fprintf(stderr, "warning: %s %s is deprecated and will be removed: use %s\n",
                 where.c_str(), old_flag.c_str(), new_flag.c_str());
  });
}

}  // namespace ac::cli
