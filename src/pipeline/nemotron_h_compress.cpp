#include "pipeline/nemotron_h_compress.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/accelerator.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "export/nemotron_h_export.h"
#include "export/nemotron_h_gguf.h"
#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/nemotron_h_importance.h"
#include "io/gguf_vocab.h"
#include "io/nemotron_h_checkpoint.h"
#include "model/nemotron_h_config.h"
#include "model/trainable.h"
#include "pipeline/stages.h"
#include "plan/plan.h"
#include "prune/nemotron_h_prune.h"
#include "search/nemotron_h_differentiable.h"
#include "search/nemotron_h_minitron.h"

namespace ac {

using json = nlohmann::json;

namespace {

const char* const kWhere = "compress";

void refuse_unsupported(const CompressOptions& opt, const Scenario& s) {
  std::vector<std::string> why;
  if (s.device_spec.kind == "cpu")
    why.push_back(fmt::format("--scenario {}: device {} is a CPU; a hybrid model's layers are "
                              "costed on a GPU's roofline only (a predicted GPU scenario)",
                              opt.in.scenario, s.device));
  if (opt.in.data_text.empty() && opt.in.data_dir.empty())
    why.push_back("no --data-text or --data: sampling training stories from a Nemotron-H teacher "
                  "is not implemented; give your text (--data-text FILE) or token files");
  if (opt.search.method != "autocompress" && opt.search.method != "minitron" &&
      opt.search.method != "both")
    why.push_back(fmt::format("--method {}: expected autocompress, minitron or both",
                              opt.search.method));
  if (!opt.search.autocompress_retrain.final_schedule)
    why.push_back("--autocompress-retrain-schedule own: a hybrid model's finalists are retrained "
                  "as the start of the final run only (final)");
  if (opt.distill.hidden_loss_weight > 0)
    why.push_back("--hidden-loss-weight: the hidden-state loss reads the Llama forward's hidden "
                  "states; a Nemotron-H student is distilled on its logits");
  if (!opt.in.profile_path.empty())
    why.push_back("--profile: a hybrid model is costed on the GPU's roofline, not a CPU profile");
  if (!why.empty())
    throw ConfigError(msg(kWhere, "{} is a Nemotron-H (hybrid) checkpoint:\n  - {}",
                          opt.in.model_dir.string(), fmt::join(why, "\n  - ")));
}

// Of the plans' suggestions (every one meets the limits by the cost model), those the pruning
// can build, ranked by KL(teacher || pruned) on the calibration windows (lowest first, as the
// dense pipeline ranks its candidates); `considered` lists each with the share of importance it
// removes and that KL. Adds the forward tokens to `search_tokens`.
struct Finalist {
  PlanSuggestion suggestion;
  double kl_after_pruning = 0;
};

std::vector<Finalist> rank_suggestions(const std::vector<const Plan*>& plans,
                                       const NemotronHModel& teacher,
                                       const NemotronHImportance& imp,
                                       const std::vector<at::Tensor>& calibration,
                                       json& considered, int64_t& search_tokens) {
  const std::vector<at::Tensor> reference = nemotron_h_logprobs(teacher, calibration);
  const int64_t window_tokens = tokens_in(calibration);
  search_tokens += window_tokens;
  std::set<std::string> seen;
  std::vector<Finalist> out;
  for (const Plan* plan : plans) {
    std::vector<const PlanSuggestion*> all;
    if (plan->per_layer) all.push_back(&*plan->per_layer);
    for (const PlanSuggestion& s : plan->levers) all.push_back(&s);
    for (const PlanSuggestion* s : all) {
      if (!seen.insert(describe(s->config)).second) continue;  // the same architecture again
      json row = {{"label", s->label}, {"describe", describe(s->config)}, {"changes", s->changes}};
      try {
        validate_nemotron_h_target(teacher.config, s->config, teacher.router.n_group);
        row["importance_removed"] = nemotron_h_importance_loss(imp, teacher.config, s->config);
        const double kl = nemotron_h_calibration_kl(
            reference, prune_nemotron_h_model(teacher, imp, s->config), calibration);
        search_tokens += window_tokens;
        row["kl_after_pruning"] = kl;
        out.push_back({*s, kl});
      } catch (const ConfigError& e) {
        row["refused_by_pruning"] = e.what();
      }
      considered.push_back(row);
    }
  }
  if (out.empty())
    throw InfeasibleError(msg(kWhere, "no plan that meets the limits can be pruned from the "
                              "teacher:\n{}", considered.dump(2)));
  std::stable_sort(out.begin(), out.end(), [](const Finalist& a, const Finalist& b) {
    return a.kl_after_pruning < b.kl_after_pruning;
  });
  return out;
}

// What both searches share: the teacher, its importance, the calibration windows (each [B, T])
// and the training text, and the final distillation's options (a retraining is its start).
struct SearchInputs {
  const NemotronHModel& teacher;
  const NemotronHImportance& imp;
  const std::vector<at::Tensor>& calibration;
  const TokenDataset& train;
  const DistillOptions& distill;
};

// AutoCompress's pick on the hybrid path (the file header's step 3).
struct AutoCompressPick {
  PlanSuggestion chosen;
  std::string verdict;
  json considered = json::array(), retrained = json::array();
  fs::path resume_from;  // the kept finalist's retraining, which the final run continues
  int64_t search_tokens = 0;
  json differentiable;   // HybridSearchResult::to_json (null: the teacher already fits)
};

AutoCompressPick autocompress_pick(const SearchInputs& in, const CompressOptions& opt,
                                   const Scenario& scenario, const std::string& config_path,
                                   const Plan& by_size, const fs::path& retrain_dir) {
  const ModelConfig& parent = in.teacher.config;
  AutoCompressPick p;
  const QualityLoss quality = [&](const ModelConfig& from, const ModelConfig& to) {
    return nemotron_h_importance_loss(in.imp, parent, to) -
           nemotron_h_importance_loss(in.imp, parent, from);
  };
  // Two descents: moves priced by that importance, and by the parameters they remove (a greedy
  // price can spend the one allowed layer removal on a cheap but small gain and stall); the
  // suggestions of both are the candidates.
  const Plan plan = plan_deployment(parent, config_path, scenario, nullptr, {}, quality);
  if (plan.verdict == "no_fit" && by_size.verdict == "no_fit")
    throw InfeasibleError(msg(kWhere, "nothing the plan reaches meets the limits of {}:\n{}",
                              scenario.name, plan.to_text()));
  p.verdict = plan.verdict;
  if (plan.verdict == "fits") {
    p.chosen.kind = "parent";
    p.chosen.label = "the teacher already fits";
    p.chosen.config = parent;
    p.chosen.cost = plan.full;
    return p;
  }
  // The differentiable search's pick (search/nemotron_h_differentiable.h) joins the descents'
  // suggestions; all are ranked alike.
  HybridSearchOptions ho;
  ho.seed = opt.data.seed;
  const HybridSearchResult learned =
      nemotron_h_differentiable_search(in.teacher, in.imp, plan, in.calibration, ho, quality);
  p.search_tokens += learned.search_tokens;
  p.differentiable = learned.to_json();
  Plan searched;
  if (learned.suggestion) searched.levers.push_back(*learned.suggestion);
  const std::vector<Finalist> finalists =
      rank_suggestions({&searched, &plan, &by_size}, in.teacher, in.imp, in.calibration,
                       p.considered, p.search_tokens);
  p.chosen = finalists.front().suggestion;
  // The best few by KL after pruning, each retrained as the start of the final run (its warm-up
  // and decay; the dense pipeline's protocol, CompressSearchOptions::autocompress_retrain): the
  // lowest KL after pruning is not the best after recovery (docs/benchmarks.md, "The ranking of
  // candidates"). The kept one's run continues.
  const RetrainChoice& rc = opt.search.autocompress_retrain;
  const int64_t top_k = std::min<int64_t>(rc.top_k, int64_t(finalists.size()));
  if (top_k < 2) return p;
  const int64_t step_tokens = in.distill.batch_size * in.distill.seq_len;
  const int64_t prefix_tokens =
      rc.tokens > 0 ? rc.tokens : std::max<int64_t>(step_tokens, in.distill.token_budget / 8);
  const std::vector<at::Tensor> reference = nemotron_h_logprobs(in.teacher, in.calibration);
  const int64_t window_tokens = tokens_in(in.calibration);
  p.search_tokens += window_tokens;
  double best_kl = 0;
  for (int64_t k = 0; k < top_k; ++k) {
    const Finalist& f = finalists[size_t(k)];
    NemotronHModel cand = clone_model(prune_nemotron_h_model(in.teacher, in.imp, f.suggestion.config));
    DistillOptions ro = in.distill;
    ro.state_dir = retrain_dir / fmt::format("candidate-{}", k);
    ro.stop_after_steps = std::max<int64_t>(1, prefix_tokens / step_tokens);
    ro.show_progress = false;
    const DistillResult r = distill(in.teacher, cand, in.train, ro);
    if (r.stop_signal != 0) stop_if_interrupted(r, "compress");
    const double kl = nemotron_h_calibration_kl(reference, cand, in.calibration);
    p.search_tokens += 2 * r.tokens + window_tokens;  // teacher and student forwards, then the KL
    p.retrained.push_back({{"describe", describe(f.suggestion.config)},
                           {"kl_after_pruning", f.kl_after_pruning},
                           {"kl_after_retraining", kl}, {"tokens", r.tokens}});
    log_info(fmt::format("[search] autocompress retraining {}/{}: {}: KL after pruning {:.4f}, "
                         "after {} tokens {:.4f}", k + 1, top_k, describe(f.suggestion.config),
                         f.kl_after_pruning, r.tokens, kl));
    if (k == 0 || kl < best_kl) best_kl = kl, p.chosen = f.suggestion, p.resume_from = ro.state_dir;
  }
  return p;
}

// Minitron's pick on the hybrid path (the file header's step 3b): its grid, the best top_k by KL
// after pruning each retrained on a short run of its own, the best after that.
struct MinitronPick {
  NemotronHGridCandidate chosen;
  json search;  // report.json "minitron_search"
};

MinitronPick minitron_pick(const SearchInputs& in, const CompressOptions& opt,
                           const Scenario& scenario, const Plan& by_size) {
  NemotronHGridOptions go;
  go.width_granularity = by_size.options.width_granularity;
  NemotronHGrid grid =
      nemotron_h_minitron_grid(in.teacher, in.imp, scenario, by_size.limits, in.calibration, go);
  const RetrainChoice& rc = opt.search.minitron_retrain;
  // top_k 0: the best by KL after pruning, not retrained.
  const int64_t top_k = std::clamp<int64_t>(rc.top_k, 0, int64_t(grid.ranked.size()));
  DistillOptions ro = in.distill;
  ro.token_budget = rc.tokens > 0 ? rc.tokens
                                  : std::max<int64_t>(in.distill.batch_size * in.distill.seq_len,
                                                      in.distill.token_budget / 8);
  ro.show_progress = false;
  const std::vector<at::Tensor> reference =
      top_k > 0 ? nemotron_h_logprobs(in.teacher, in.calibration) : std::vector<at::Tensor>{};
  const int64_t window_tokens = tokens_in(in.calibration);
  if (top_k > 0) grid.search_tokens += window_tokens;
  size_t best = 0;
  std::vector<double> after_retrain(size_t(top_k), 0.0);  // KL on the calibration windows
  for (int64_t k = 0; k < top_k; ++k) {
    const NemotronHGridCandidate& c = grid.ranked[size_t(k)];
    NemotronHModel cand = clone_model(prune_nemotron_h_model(in.teacher, in.imp, c.config));
    const DistillResult r = distill(in.teacher, cand, in.train, ro);
    stop_if_interrupted(r, "compress");
    after_retrain[size_t(k)] = nemotron_h_calibration_kl(reference, cand, in.calibration);
    grid.search_tokens += 2 * r.tokens + window_tokens;
    if (after_retrain[size_t(k)] < after_retrain[best]) best = size_t(k);
    log_info(fmt::format("[search] minitron retraining {}/{}: {}: KL after pruning {:.4f}, after "
                         "{} tokens {:.4f}", k + 1, top_k, c.shape, c.kl_after_pruning, r.tokens,
                         after_retrain[size_t(k)]));
  }
  json rows = json::array();
  for (size_t i = 0; i < grid.ranked.size(); ++i) {
    const NemotronHGridCandidate& c = grid.ranked[i];
    json row = {{"shape", c.shape}, {"describe", describe(c.config)},
                {"parameters", c.config.num_parameters()}, {"kl_after_pruning", c.kl_after_pruning}};
    if (int64_t(i) < top_k) row["kl_after_retraining"] = after_retrain[i];
    row["chosen"] = i == best;
    rows.push_back(row);
  }
  log_info(fmt::format("[compress] minitron: {} ({})", grid.ranked[best].shape,
                       describe(grid.ranked[best].config)));
  return {grid.ranked[best],
          {{"shapes", grid.shapes}, {"buildable", grid.buildable}, {"feasible", grid.feasible},
           {"retrained", top_k}, {"retrain_tokens", ro.token_budget},
           {"search_tokens", grid.search_tokens}, {"ranked", rows}}};
}

json eval_json(const EvalResult& e) {
  return {{"kl_to_teacher", e.kl_to_teacher}, {"perplexity", e.perplexity},
          {"top1_agreement", e.top1_agreement}, {"tokens", e.tokens}};
}

std::string render_md(const json& r) {
  std::string md = fmt::format("# compress: {} for {}\n\n", r["teacher"]["path"].get<std::string>(),
                               r["scenario"]["name"].get<std::string>());
  md += fmt::format("Teacher {} ({} parameters); student {} ({} parameters), chosen by \"{}\"."
                    "\n\n",
                    r["teacher"]["describe"].get<std::string>(),
                    r["teacher"]["parameters"].get<int64_t>(),
                    r["student"]["describe"].get<std::string>(),
                    r["student"]["parameters"].get<int64_t>(),
                    r["plan"]["label"].get<std::string>());
  md += "| | teacher | student | limit |\n|---|---|---|---|\n";
  for (const auto& [name, lim] : r["limits"].items()) {
    const double t = r["teacher"]["predicted"].value(name, 0.0);
    const double s = r["student"]["predicted"].value(name, 0.0);
    md += fmt::format("| {} (predicted) | {:.6g} | {:.6g} | {:.6g} |\n", name, t, s,
                      lim.get<double>());
  }
  if (r["plan"]["kind"] == "minitron")
    md += fmt::format("\nMinitron's homogeneous grid: {} shapes, {} meet the limits; the best {} by "
                      "KL after pruning retrained on {} tokens each, the best after that kept. It "
                      "removes {:.4f} of the measured importance.\n",
                      r["minitron_search"]["shapes"].get<int64_t>(),
                      r["minitron_search"]["feasible"].get<int64_t>(),
                      r["minitron_search"]["retrained"].get<int64_t>(),
                      r["minitron_search"]["retrain_tokens"].get<int64_t>(),
                      r["plan"]["importance_removed"].get<double>());
  else if (!r["plan"]["retrained"].empty())
    md += fmt::format("\nWhat the plan changed (of {} architectures that meet the limits, the best "
                      "{} by KL to the teacher on the calibration text right after pruning were "
                      "each retrained on {} tokens as the start of the final run, and the best "
                      "after that continued; it removes {:.4f} of the measured importance):\n\n",
                      r["plan"]["considered"].size(), r["plan"]["retrained"].size(),
                      r["plan"]["retrained"][0]["tokens"].get<int64_t>(),
                      r["plan"]["importance_removed"].get<double>());
  else
    md += fmt::format("\nWhat the plan changed (of {} architectures that meet the limits, the one "
                      "closest to the teacher on the calibration text right after pruning; it "
                      "removes {:.4f} of the measured importance):\n\n",
                      r["plan"]["considered"].size(), r["plan"]["importance_removed"].get<double>());
  for (const auto& c : r["plan"]["changes"]) md += "- " + c.get<std::string>() + "\n";
  md += fmt::format("\n| held-out | after pruning | after distillation ({} tokens) |\n|---|---|---|\n",
                    r["distill"]["tokens"].get<int64_t>());
  for (const char* k : {"kl_to_teacher", "perplexity", "top1_agreement"})
    md += fmt::format("| {} | {:.4f} | {:.4f} |\n", k, r["eval_after_prune"][k].get<double>(),
                      r["eval"][k].get<double>());
  if (r["comparison"].size() > 1) {
    md += "\nThe methods, each pruned from the teacher and distilled with the same budget and data "
          "(search tokens: every forward token their choice cost):\n\n| method | architecture | "
          "parameters | search tokens | held-out KL after pruning | after distillation | "
          "perplexity | model |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& c : r["comparison"])
      md += fmt::format("| {} | {} | {} | {} | {:.4f} | {:.4f} | {:.4f} | {} |\n",
                        c["method"].get<std::string>(), c["describe"].get<std::string>(),
                        c["parameters"].get<int64_t>(), c["search_tokens"].get<int64_t>(),
                        c["kl_after_pruning"].get<double>(), c["kl_to_teacher"].get<double>(),
                        c["perplexity"].get<double>(), c["model"].get<std::string>());
  }
  md += fmt::format("\nTeacher held-out perplexity {:.4f}.\n\nFiles: {}.\n",
                    r["teacher"]["eval"]["perplexity"].get<double>(),
                    fmt::join(r["files"].get<std::vector<std::string>>(), ", "));
  for (const auto& n : r["export"]["notes"]) md += "\n" + n.get<std::string>() + "\n";
  return md;
}

}  // namespace

json compress_nemotron_h(const CompressOptions& opt) {
  const double t0 = now_s();
  const Scenario scenario = find_scenario(opt.in.scenario);
  refuse_unsupported(opt, scenario);
  check_not_overwriting_input(opt.in.model_dir, opt.in.out_dir, kWhere);
  const c10::Device device = parse_device(opt.compute.device);
  NemotronHModel teacher = load_nemotron_h_checkpoint(opt.in.model_dir);
  require_finite(teacher, opt.in.model_dir.string(), kWhere, opt.in.allow_nonfinite);
  log_info(fmt::format("[compress] teacher {} ({} parameters), a Nemotron-H: the hybrid pipeline "
                       "(pipeline/nemotron_h_compress.h)", describe(teacher.config),
                       teacher.config.num_parameters()));

  // 1. data
  const Corpus data = opt.in.data_text.empty()
                          ? read_token_files(teacher.config, opt.in.model_dir, opt.in.data_dir)
                          : text_data(teacher.config, opt);
  const int64_t T = opt.data.seq_len, B = opt.distill.batch;
  const std::vector<at::Tensor> calibration = data.calibration.sequential_batches(B, T, -1);
  const std::vector<at::Tensor> heldout = data.heldout.sequential_batches(B, T, -1);
  if (calibration.empty() || heldout.empty())
    throw ConfigError(msg(kWhere, "the calibration or held-out text holds less than one window of "
                          "--seq-len {} (x --distill-batch {})", T, B));

  // 2. importance
  const NemotronHImportance imp = compute_nemotron_h_importance(teacher, calibration);
  const std::string config_path = (opt.in.model_dir / "config.json").string();
  const bool run_autocompress = opt.search.method != "minitron";
  const bool run_minitron = opt.search.method != "autocompress";
  // The parameter-priced plan resolves the limits and the width granularity for both methods.
  const Plan by_size = plan_deployment(teacher.config, config_path, scenario, nullptr);

  EvalOptions eo;
  eo.batch_size = B;
  eo.seq_len = T;
  eo.device = device;
  DistillOptions dopt;
  dopt.token_budget = opt.distill.tokens;
  dopt.batch_size = B;
  dopt.seq_len = T;
  dopt.lr = opt.distill.lr;
  dopt.min_lr = opt.distill.lr / 10;
  dopt.seed = opt.data.seed;
  dopt.allow_nonfinite = opt.in.allow_nonfinite;
  dopt.device = device;
  StagingDir staging(opt.in.out_dir);

  // 3. the searches
  const SearchInputs in{teacher, imp, calibration, data.train, dopt};
  std::optional<AutoCompressPick> ac;
  std::optional<MinitronPick> mi;
  if (run_autocompress) {
    ac = autocompress_pick(in, opt, scenario, config_path, by_size, staging.path() / ".retrain");
    log_info(fmt::format("[compress] plan \"{}\": {}", ac->chosen.label, describe(ac->chosen.config)));
  }
  if (run_minitron) mi = minitron_pick(in, opt, scenario, by_size);
  PlanSuggestion chosen;  // the main result (model/)
  if (ac) {
    chosen = ac->chosen;
  } else {
    chosen.kind = "minitron";
    chosen.label = "minitron grid: " + mi->chosen.shape;
    chosen.config = mi->chosen.config;
    chosen.cost = mi->chosen.cost;
  }

  const EvalResult teacher_eval = evaluate(teacher, nullptr, heldout, eo);
  // 4-6. pruning, distillation and export of one method's pick, into `model_dir_name`.
  auto finish = [&](const ModelConfig& config, const std::string& model_dir_name,
                    const std::string& gguf_name, const std::string& log_name,
                    const fs::path& resume_state) {
    NemotronHModel student = clone_model(prune_nemotron_h_model(teacher, imp, config));
    const EvalResult after_prune = evaluate(student, &teacher, heldout, eo);
    log_info(fmt::format("[compress] {}: after pruning: held-out KL {:.4f}", model_dir_name,
                         after_prune.kl_to_teacher));
    DistillOptions fo = dopt;
    fo.log_path = staging.path() / log_name;
    if (!resume_state.empty()) fo.state_dir = resume_state, fo.resume = true;
    const DistillResult d = distill(teacher, student, data.train, fo);
    stop_if_interrupted(d, "distill");
    const EvalResult after = evaluate(student, &teacher, heldout, eo);
    log_info(fmt::format("[compress] {}: after distillation ({} tokens): held-out KL {:.4f}",
                         model_dir_name, d.tokens, after.kl_to_teacher));
    json exported = {{"files", json::array({model_dir_name + "/"})}, {"notes", json::array()}};
    fs::create_directories(staging.path() / model_dir_name);
    write_nemotron_h_files(staging.path() / model_dir_name, student, opt.in.model_dir);
    {
      at::NoGradGuard no_grad;
      const at::Tensor probe = heldout.front().slice(0, 0, 1);
      const double diff =
          (load_nemotron_h_checkpoint(staging.path() / model_dir_name).forward(probe) -
           student.forward(probe)).abs().max().item<double>();
      if (diff != 0)
        throw InternalError(msg(kWhere, "the exported student reloads to logits that differ by "
                                "{}", diff));
      exported["hf_reload_max_logit_diff"] = diff;
    }
    try {
      check_nemotron_h_gguf_exportable(student.config);
      const GgufVocab vocab = vocab_from_checkpoint(opt.in.model_dir, student.config.vocab_size);
      write_nemotron_h_gguf(staging.path() / gguf_name, student, vocab);
      exported["files"].push_back(gguf_name);
      exported["gguf_architecture"] = nemotron_h_gguf_architecture(student.config);
    } catch (const ConfigError& e) {
      exported["notes"].push_back(fmt::format("No {}: {}", gguf_name, e.what()));
    }
    return json{{"describe", describe(student.config)},
                {"parameters", student.config.num_parameters()},
                {"config", nemotron_h_config_to_hf_json(student.config)},
                {"eval_after_prune", eval_json(after_prune)},
                {"eval", eval_json(after)},
                {"distill", {{"tokens", d.tokens}, {"steps", d.steps_done}, {"seconds", d.wall_s}}},
                {"export", exported}};
  };
  const json main_result =
      finish(chosen.config, "model", "model.gguf", "distill_log.csv",
             ac ? ac->resume_from : fs::path());
  json comparison = json::array();
  auto row_of = [&](const char* method, const json& r, const CostEstimate& cost, int64_t tokens,
                    const std::string& dir) {
    return json{{"method", method}, {"describe", r["describe"]}, {"parameters", r["parameters"]},
                {"predicted", cost.to_json()}, {"search_tokens", tokens},
                {"kl_after_pruning", r["eval_after_prune"]["kl_to_teacher"]},
                {"kl_to_teacher", r["eval"]["kl_to_teacher"]},
                {"perplexity", r["eval"]["perplexity"]}, {"model", dir}};
  };
  comparison.push_back(row_of(ac ? "autocompress" : "minitron", main_result,
                              chosen.cost,
                              ac ? ac->search_tokens : mi->search["search_tokens"].get<int64_t>(),
                              "model/"));
  json files = main_result["export"]["files"];
  if (ac && mi) {
    const json m = finish(mi->chosen.config, "model-minitron", "model-minitron.gguf",
                          "distill_log.minitron.csv", {});
    comparison.push_back(row_of("minitron", m, mi->chosen.cost,
                                mi->search["search_tokens"].get<int64_t>(), "model-minitron/"));
    for (const auto& f : m["export"]["files"]) files.push_back(f);
    files.push_back("distill_log.minitron.csv");
  }
  files.push_back("distill_log.csv");

  // 7. report
  json removed_layers = json::array();  // the teacher's layers the student does not have
  for (size_t i = 0; i < chosen.config.layers.size(); ++i)
    if (!chosen.config.layers[i].is_present()) removed_layers.push_back(int64_t(i));
  json report = {
      {"kind", "nemotron_h"},
      {"method", opt.search.method},
      {"scenario", {{"name", scenario.name}, {"device", scenario.device},
                    {"engine", scenario.engine}}},
      {"limits", json::object()},
      {"teacher", {{"path", opt.in.model_dir.string()}, {"describe", describe(teacher.config)},
                   {"parameters", teacher.config.num_parameters()},
                   {"predicted", by_size.full.to_json()}, {"eval", eval_json(teacher_eval)}}},
      {"student", {{"describe", main_result["describe"]},
                   {"parameters", main_result["parameters"]},
                   {"predicted", chosen.cost.to_json()},
                   {"config", main_result["config"]}}},
      {"plan", {{"label", chosen.label}, {"kind", chosen.kind}, {"changes", chosen.changes},
                {"verdict", ac ? ac->verdict : by_size.verdict},
                {"importance_removed", nemotron_h_importance_loss(imp, teacher.config,
                                                                  chosen.config)},
                {"removed_layers", removed_layers},
                {"considered", ac ? ac->considered : json::array()},
                {"retrained", ac ? ac->retrained : json::array()},
                {"differentiable", ac ? ac->differentiable : json(nullptr)}}},
      {"eval_after_prune", main_result["eval_after_prune"]},
      {"eval", main_result["eval"]},
      {"distill", main_result["distill"]},
      {"export", main_result["export"]},
      {"comparison", comparison},
      {"files", files},
      {"total_seconds", now_s() - t0},
  };
  if (mi) report["minitron_search"] = mi->search;
  const Limits& l = by_size.limits;
  if (l.ttft_ms) report["limits"]["ttft_ms"] = *l.ttft_ms;
  if (l.tpot_ms) report["limits"]["tpot_ms"] = *l.tpot_ms;
  if (l.min_throughput_tokens_per_s)
    report["limits"]["throughput_tokens_per_s"] = *l.min_throughput_tokens_per_s;
  if (l.peak_memory_bytes) report["limits"]["peak_memory_bytes"] = double(*l.peak_memory_bytes);
  fs::remove_all(staging.path() / ".retrain");  // the finalists' states: not part of the result
  write_json_file(staging.path() / "report.json", report);
  write_file_atomic(staging.path() / "report.md", render_md(report));
  staging.commit();
  return report;
}

}  // namespace ac
