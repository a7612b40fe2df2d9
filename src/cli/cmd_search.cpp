// `autocompress search`: chooses an architecture that meets the scenario's limits (search/).
#include <cstdio>
#include <limits>

#include "pipeline/limits.h"
#include "cli/command.h"
#include "cli/data_options.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/profile.h"
#include "io/checkpoint.h"
#include "pipeline/steps.h"
#include "search/outcome.h"

namespace {
struct SearchArgs {
  std::string model, importance, scenario, profile, train_data, out, method = "autocompress";
  ac::cli::DataArgs data;
  int64_t seq_len = 256, batches = 1, retrain_top_k = 0, retrain_tokens = 16384;
  int64_t autocompress_retrain_top_k = 0, autocompress_retrain_tokens = 8192;
  int64_t autocompress_bld_tokens = 0;
  ac::SearchSettings settings;
  double safety_margin = 0.05;
  ac::cli::DeviceArgs compute;
};

ac::cli::RegisterCommand reg(50, [](CLI::App& app) {
  auto a = std::make_shared<SearchArgs>();
  ac::SearchSettings& st = a->settings;
  ac::DifferentiableOptions& d = st.autocompress;
  CLI::App* s = app.add_subcommand("search", "Search an architecture under the scenario's limits; writes arch.json and two SVGs beside it");
  s->add_option("--model", a->model, "teacher checkpoint folder")->required();
  s->add_option("--importance", a->importance, "importance.safetensors (autocompress importance)")->required();
  s->add_option("--scenario", a->scenario, "scenario name or path")->required();
  s->add_option("--profile", a->profile, "profile.json of this device (autocompress profile); roofline from the spec when absent");
  ac::cli::add_data_options(s, a->data, "calibration data (ranking, search steps, KL after pruning)", ac::DataSplit::kTrain)->required();
  s->add_option("--out", a->out, "arch.json to write (with --method both: the autocompress one; minitron's goes to ARCH.minitron.json)")->required();
  s->add_option("--method", a->method, "search method: autocompress (differentiable), minitron (uniform grid) or both side by side")->check(CLI::IsMember({"autocompress", "minitron", "both"}))->capture_default_str();
  s->add_option("--seq-len", a->seq_len, "tokens per calibration window (minitron ranking, KL after pruning)")->check(ac::cli::positive_tokens())->capture_default_str();
  s->add_option("--batches", a->batches, "calibration batches of 8 windows for minitron's ranking and the KL after pruning")->capture_default_str();
  s->add_option("--minitron-retrain-top-k", a->retrain_top_k, "minitron: the best K candidates by KL after pruning are each distilled for --minitron-retrain-tokens on --train-data, then ranked again (0 = off; off by default here, where no training data is given, on by default in compress)")->capture_default_str();
  s->add_option("--minitron-retrain-tokens", a->retrain_tokens, "minitron: distillation tokens per retrained candidate (batches of 8 x --seq-len; counted as search tokens)")->capture_default_str();
  s->add_option("--autocompress-retrain-top-k", a->autocompress_retrain_top_k, "autocompress: its best K distinct proposals by KL after pruning are each distilled for --autocompress-retrain-tokens on --train-data, then ranked again (0 = off; off by default here, where no training data is given, on by default in compress)")->capture_default_str();
  s->add_option("--autocompress-retrain-tokens", a->autocompress_retrain_tokens, "autocompress: distillation tokens per retrained proposal (batches of 8 x --seq-len; counted as search tokens)")->capture_default_str();
  s->add_option("--autocompress-bld-tokens", a->autocompress_bld_tokens, "autocompress: each retrained proposal starts with a blockwise local distillation of this many tokens of --train-data (counted twice as search tokens; 0 = off, the default here; compress's default is on)")->check(CLI::NonNegativeNumber)->capture_default_str();
  s->add_option("--train-data", a->train_data, "training data of the retraining (required with --minitron-retrain-top-k or --autocompress-retrain-top-k): a token file or text, read as --data is (--text-field, --split)");
  s->add_option("--safety-margin", a->safety_margin, "meet limits x (1 - margin) by the model")->capture_default_str();
  s->add_option("--width-granularity", d.space.width_granularity, "widths are multiples of this (both methods; default: the profile's derived granularity, else the device's)");
  s->add_option("--max-removed-layers", d.space.max_blocks_removed, "autocompress: whole layers the search may remove, at most (-1: a third of the layers, as Minitron's depth pruning)")->check(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()))->capture_default_str();
  s->add_option("--max-attention-free-layers", st.autocompress_attention_caps, "autocompress: one search per value, each offering \"attention removed\" in at most that many layers, those of lowest block influence (-1: any); every search's pick is a finalist of the retraining (default: -1 and a third of the layers)")->delimiter(',');
  s->add_option("--autocompress-restarts", st.autocompress_restarts, "autocompress: the widest space's search (the first --max-attention-free-layers) this many times, restart k with the Gumbel seed --seed + 1000 k; every restart's pick is a finalist of the retraining, counted as search tokens (1 here: without --autocompress-retrain-top-k the first search's pick is the result)")->check(CLI::Range(int64_t(1), int64_t(64)))->capture_default_str();
  s->add_option("--steps", d.steps, "autocompress: optimisation steps at most")->capture_default_str();
  s->add_option("--search-batch", st.autocompress_batch_size, "autocompress: windows per step")->capture_default_str();
  s->add_option("--search-seq-len", st.autocompress_seq_len, "autocompress: tokens per window")->check(ac::cli::positive_tokens())->capture_default_str();
  s->add_option("--search-batches", st.autocompress_batches, "autocompress: distinct batches cycled over")->capture_default_str();
  s->add_option("--logit-lr", d.logit_lr, "autocompress: Adam step on the architecture logits")->capture_default_str();
  s->add_option("--dual-lr", d.dual_lr, "autocompress: dual ascent step of the multipliers")->capture_default_str();
  s->add_option("--seed", d.seed, "autocompress: Gumbel noise seed")->capture_default_str();
  s->add_option("--cost-weight", d.cost_weight, "autocompress: weight of the Lagrangian cost term (0 = distillation loss only)")->capture_default_str();
  s->add_option("--straight-through", d.straight_through, "autocompress: hard one-hot Gumbel samples in the forward pass (true) or soft ones (false)")->capture_default_str();
  s->add_option("--init-full-logit", d.init_full_logit, "autocompress: initial logit of the parent's option")->capture_default_str();
  s->add_option("--importance-init", d.importance_init, "autocompress: initial logits also lowered by this x the importance each option gives up (0 = off)")->capture_default_str();
  s->add_option("--rank-batches", d.rank_batches, "autocompress: search batches per KL evaluation of the ranked candidates and the refinement (0 = argmax + repair only)")->capture_default_str();
  s->add_option("--max-ranked", d.max_ranked, "autocompress: candidates ranked by KL at most")->capture_default_str();
  s->add_option("--refine-evaluations", d.refine_evaluations, "autocompress: KL evaluations of the local search after the ranking")->capture_default_str();
  ac::cli::add_device_options(s, a->compute, /*with_precision=*/true);
  s->callback([a] {
    ac::init_torch_threads();
    a->settings.device = a->compute.resolve();
    a->settings.precision = a->compute.resolve_precision(a->settings.device);
    ac::check_not_overwriting_inputs({a->model, a->importance, a->profile, a->data.path, a->train_data},
                                     a->out, "search");
    ac::cli::check_output_flag("search", "--out", a->out);
    a->settings.minitron_batches = a->batches;
    if (a->retrain_top_k > 0) {
      if (a->train_data.empty())
        throw ac::ConfigError("[search] --minitron-retrain-top-k needs --train-data (the text the candidates are distilled on)");
      a->settings.minitron_retrain = true;
      a->settings.retrain.top_k = a->retrain_top_k;
      a->settings.retrain.distill.token_budget = a->retrain_tokens;
      a->settings.retrain.distill.seq_len = a->seq_len;
      a->settings.retrain.distill.warmup_steps = 1;
    }
    if (a->autocompress_retrain_top_k > 0) {
      if (a->train_data.empty())
        throw ac::ConfigError("[search] --autocompress-retrain-top-k needs --train-data (the text the proposals are distilled on)");
      a->settings.autocompress_retrain = true;
      ac::RetrainOptions& r = a->settings.autocompress_retrain_options;
      r.top_k = a->autocompress_retrain_top_k;
      r.distill.token_budget = a->autocompress_retrain_tokens;
      r.distill.seq_len = a->seq_len;
      r.distill.warmup_steps = 1;
      r.bld_tokens = a->autocompress_bld_tokens;
    }
    ac::LlamaModel teacher = ac::load_checkpoint(a->model);
    ac::cli::check_seq_len_fits(a->seq_len, teacher.config, a->model, "search");
    if (a->settings.autocompress_attention_caps.empty())
      a->settings.autocompress_attention_caps = ac::default_attention_caps(teacher.config);
    ac::Scenario scenario = ac::find_scenario(a->scenario);
    std::optional<ac::Profile> profile;
    if (!a->profile.empty()) profile = ac::cli::load_profile_flag(a->profile, "search");
    const ac::Profile* p = profile ? &*profile : nullptr;
    // As in compress: the search compares predictions with predictions, so relative limits
    // resolve against the teacher's prediction (a profile/measurement offset cancels out).
    if (scenario.limits.has_relative())
      ac::log_info("[search] the scenario has limits relative to the teacher: resolving them "
                   "against its predicted cost");
    const ac::RunLimits limits = ac::RunLimits::resolve(
        scenario.limits, a->safety_margin, ac::predict(teacher.config, scenario, p));
    ac::Importance imp = ac::load_importance(a->importance);
    ac::check_importance_matches(teacher.config, imp, "search", "--importance " + a->importance,
                                 (ac::fs::path(a->model) / "config.json").string());
    const int32_t bos = int32_t(teacher.config.bos_token_id);
    const ac::DataSpec spec = a->data.spec(ac::DataSplit::kTrain);
    ac::TokenDataset data =
        ac::load_dataset(spec, a->model, teacher.config.vocab_size, bos, "search");
    std::optional<ac::TokenDataset> train;
    if (!a->train_data.empty()) {
      ac::DataSpec train_spec = spec;
      train_spec.path = a->train_data;
      train = ac::load_dataset(train_spec, a->model, teacher.config.vocab_size, bos, "search");
    }
    std::vector<ac::SearchOutcome> outcomes;
    for (const std::string& m : ac::search_methods(a->method))
      outcomes.push_back(ac::search_step(m, teacher, imp, scenario, p, limits, data, a->seq_len,
                                         a->settings, train ? &*train : nullptr));
    // Evaluation (not a search cost): KL after pruning of every result on the same windows.
    std::vector<at::Tensor> eval_batches = data.sequential_batches(8, a->seq_len, a->batches);
    nlohmann::json comparison = nlohmann::json::array();
    for (const auto& o : outcomes) {
      nlohmann::json row = o.summary();
      row["kl_after_prune"] = ac::kl_after_prune(teacher, imp, o.best.target, eval_batches);
      int64_t tokens = 0;
      for (const auto& b : eval_batches) tokens += b.numel();
      row["kl_tokens"] = tokens;
      comparison.push_back(row);
      std::printf("%-12s %s: predicted TPOT %.3f ms, TTFT %.3f ms, memory %.1f MiB (%s); KL after "
                  "prune %.4f; search tokens %lld\n",
                  o.method.c_str(), ac::describe(o.best.config).c_str(), o.best.cost.tpot_ms,
                  o.best.cost.ttft_ms, double(o.best.cost.peak_memory_bytes) / (1 << 20),
                  o.best.cost.source.c_str(), row["kl_after_prune"].get<double>(),
                  (long long)o.search_tokens);
    }
    for (size_t i = 0; i < outcomes.size(); ++i) {
      ac::fs::path path = i == 0 ? ac::fs::path(a->out) : ac::method_arch_path(a->out, outcomes[i].method);
      ac::write_search_outputs(path, outcomes[i], scenario.name,
                               {{"comparison", comparison}, {"evaluation", comparison[i]}});
      std::printf("wrote %s\n", path.c_str());
    }
  });
});
}  // namespace
