// Subcommand registry: each cmd_*.cpp registers its subcommand with a static RegisterCommand,
// so stages add their CLI without touching main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
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

}  // namespace ac::cli
