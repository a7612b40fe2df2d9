// The compute flags every model-running subcommand shares (common/accelerator.h): --device, and
// --precision where a stage trains (distill, search, compress), with one wording everywhere.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "common/accelerator.h"

namespace ac::cli {

/// The flags' values as CLI11 fills them.
struct DeviceArgs {
  std::string device = "cpu", precision = "auto";
  /// The device; throws ConfigError naming --device (parse_device).
  c10::Device resolve() const { return parse_device(device); }
  /// The precision on `d`; throws ConfigError naming --precision (parse_precision).
  Precision resolve_precision(const c10::Device& d) const { return parse_precision(precision, d); }
};

/// Adds --device to `s`, and --precision when `with_precision`.
inline void add_device_options(CLI::App* s, DeviceArgs& a, bool with_precision) {
  s->add_option("--device", a.device,
                "Where the model runs: cpu, cuda (= cuda:0) or cuda:N (a build with CUDA)")
      ->capture_default_str();
  if (with_precision)
    s->add_option("--precision", a.precision,
                  "Arithmetic of the forward and backward passes: auto (bf16 autocast on CUDA, "
                  "fp32 on the CPU), fp32 or bf16 (weights, optimizer state and loss stay fp32)")
        ->capture_default_str();
}

}  // namespace ac::cli
