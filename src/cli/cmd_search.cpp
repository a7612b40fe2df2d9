// `autocompress search`: chooses an architecture that meets the scenario's limits (search/).
#include <cstdio>

#include "cli/command.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/profile.h"
#include "io/checkpoint.h"
#include "prune/arch.h"
#include "search/minitron.h"

namespace {
struct SearchArgs {
  std::string model, importance, scenario, profile, data, out, method = "minitron";
  int64_t seq_len = 256, batches = 1;
  double safety_margin = 0.05;
};

ac::cli::RegisterCommand reg(50, [](CLI::App& app) {
  auto a = std::make_shared<SearchArgs>();
  CLI::App* s = app.add_subcommand("search", "Search an architecture under the scenario's limits; writes arch.json");
  s->add_option("--model", a->model, "teacher checkpoint folder")->required();
  s->add_option("--importance", a->importance, "importance.safetensors (autocompress importance)")->required();
  s->add_option("--scenario", a->scenario, "scenario name or path")->required();
  s->add_option("--profile", a->profile, "profile.json of this device (autocompress profile); roofline from the spec when absent");
  s->add_option("--data", a->data, "calibration token file to rank candidates")->required();
  s->add_option("--out", a->out, "arch.json to write")->required();
  s->add_option("--method", a->method, "search method")->check(CLI::IsMember({"minitron"}))->capture_default_str();
  s->add_option("--seq-len", a->seq_len, "tokens per calibration window")->capture_default_str();
  s->add_option("--batches", a->batches, "calibration batches of 8 windows used for ranking")->capture_default_str();
  s->add_option("--safety-margin", a->safety_margin, "meet limits x (1 - margin) by the model")->capture_default_str();
  s->callback([a] {
    ac::LlamaModel teacher = ac::load_checkpoint(a->model);
    ac::Scenario scenario = ac::find_scenario(a->scenario);
    std::optional<ac::Profile> profile;
    if (!a->profile.empty()) profile = ac::load_profile(a->profile);
    const ac::Profile* p = profile ? &*profile : nullptr;
    ac::Limits limits = scenario.limits;
    if (limits.has_relative()) {
      ac::log_info("[search] the scenario has limits relative to the teacher: measuring it");
      ac::Measurement m = ac::measure_native(teacher, scenario.workload, 3);
limits = limits.resolve(m.as_estimate());
    }
    ac::Importance imp = ac::load_importance(a->importance);
    ac::TokenDataset data = ac::TokenDataset::load(a->data, int32_t(teacher.config.bos_token_id));
    std::vector<at::Tensor> batches = data.sequential_batches(8, a->seq_len, a->batches);
    ac::MinitronOptions mo;
    mo.safety_margin = a->safety_margin;
    ac::CostFn cost = [&](const ac::ModelConfig& c) { return ac::predict(c, scenario, p); };
    ac::SearchResult r = ac::minitron_search(teacher, imp, cost, limits, batches, mo);
    ac::write_arch(a->out, r.best.target, {{"search", r.to_json()}, {"limits", limits.to_json()},
                                           {"scenario", scenario.name}});
    std::printf("%s: %s, predicted TPOT %.3f ms, TTFT %.3f ms, %s\n", a->out.c_str(),
                ac::describe(r.best.config).c_str(), r.best.cost.tpot_ms, r.best.cost.ttft_ms,
                r.best.cost.source.c_str());
  });
});
}  // namespace
