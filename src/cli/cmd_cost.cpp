// `autocompress cost`: TTFT, TPOT, throughput and peak memory of an architecture in a scenario.
#include <cstdio>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "hardware/cost_model.h"
#include "hardware/validate.h"
#include "plan/cost_report.h"

namespace {
struct CostArgs {
  std::string config, scenario, profile, teacher;
  bool json = false;
};

// Bytes with a binary prefix, as every printout of the CLI (docs/cli.md).
std::string mb(int64_t bytes) { return fmt::format("{:.2f} MiB", double(bytes) / double(1 << 20)); }

void print_text(const ac::ModelConfig& c, const ac::Scenario& s, const ac::CostEstimate& e) {
  std::printf("%s on %s / %s (B=%ld, prompt %ld, output %ld, %s), from the %s\n",
              ac::describe(c).c_str(), s.device.c_str(), s.engine.c_str(),
              long(s.workload.batch_size), long(s.workload.prompt_tokens),
              long(s.workload.output_tokens), s.workload.weight_dtype.c_str(), e.source.c_str());
  std::printf("  TTFT %.3f ms   TPOT %.3f ms   throughput %.1f tokens/s\n", e.ttft_ms, e.tpot_ms,
              e.throughput_tokens_per_s);
  std::printf("  peak memory %s = weights %s + KV cache %s + activations %s + reserve %s\n",
              mb(e.peak_memory_bytes).c_str(), mb(e.weight_bytes).c_str(),
              mb(e.kv_cache_bytes).c_str(), mb(e.activation_bytes).c_str(),
              mb(e.reserve_bytes).c_str());
  if (e.state_bytes > 0)
    std::printf("  (+ Mamba-2 state %s, constant in the context; in the peak above)\n",
                mb(e.state_bytes).c_str());
  std::printf("  %5s %10s %10s %12s %12s\n", "layer", "TTFT ms", "TPOT ms", "weights", "KV cache");
  for (size_t i = 0; i < e.layer_ttft_ms.size(); ++i)
    std::printf("  %5zu %10.4f %10.4f %12s %12s\n", i, e.layer_ttft_ms[i], e.layer_tpot_ms[i],
                mb(e.layer_weight_bytes[i]).c_str(), mb(e.layer_kv_cache_bytes[i]).c_str());
  std::printf("  fixed %10.4f %10.4f %12s   (embedding, final norm, head, step overhead)\n",
              e.fixed.ttft_ms, e.fixed.tpot_ms, mb(e.fixed.weight_bytes).c_str());
}

void run(const CostArgs& a) {
  const ac::ModelConfig c = ac::read_architecture(a.config);
  ac::Scenario s = ac::find_scenario(a.scenario);
  ac::Profile prof;
  if (!a.profile.empty()) prof = ac::cli::load_profile_flag(a.profile, "cost");
  const ac::Profile* p = a.profile.empty() ? nullptr : &prof;
  const ac::CostReport r = ac::cost_report(c, s, p, a.teacher);
  if (a.json) {
    std::printf("%s\n", r.to_json().dump(2).c_str());
    return;
  }
  print_text(r.config, s, r.estimate);
  for (const std::string& w : r.warnings) std::printf("  warning: %s\n", w.c_str());
  if (!r.unresolved.empty())
    std::printf("  %s\n", r.unresolved.c_str());
  else if (!r.limits.to_json().empty())
    std::printf("  limits %s: %s\n", r.limits.to_json().dump().c_str(),
                r.limits_broken.empty() ? "all hold" : r.limits_broken.c_str());
}

ac::cli::RegisterCommand reg(31, [](CLI::App& app) {
  auto a = std::make_shared<CostArgs>();
  CLI::App* s = app.add_subcommand("cost", "Predict TTFT, TPOT, throughput and memory of an architecture");
  s->add_option("--config", a->config, "checkpoint folder, config.json or llama2.c model.bin")->required();
  s->add_option("--scenario", a->scenario, "scenario name (scenarios/NAME.json) or path")->required();
  s->add_option("--profile", a->profile, "profile JSON of the device (required for a CPU)");
  s->add_option("--teacher", a->teacher, "teacher architecture, to resolve relative limits");
  s->add_flag("--json", a->json, "print JSON");
  s->callback([a] { run(*a); });
});
}  // namespace
