#include "pipeline/compress.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "pipeline/report.h"
#include "prune/arch.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/minitron.h"

namespace ac {

namespace {

using json = nlohmann::json;

// Wall time of each stage, in order.
struct StageTimer {
  json stages = json::array();
  double t = now_s();
  void done(const std::string& stage) {
    double s = now_s() - t;
    stages.push_back({{"stage", stage}, {"seconds", s}});
    log_info(fmt::format("[compress] {} done in {:.1f} s", stage, s));
    t = now_s();
  }
};

// Teacher-sampled stories: calibration, training and held-out sets from distinct seeds; held-out
// documents that also occur in training are removed.
struct Corpus {
  TokenDataset calibration, train, heldout;
  int64_t overlap_removed = 0;
};

Corpus sample_data(const LlamaModel& teacher, const CompressOptions& opt, const fs::path& dir) {
  fs::create_directories(dir);
  const int32_t bos = int32_t(teacher.config.bos_token_id);
  auto sample = [&](int64_t n, uint64_t seed) {
    return sample_corpus(teacher, n, opt.seq_len, /*temperature=*/1.0, /*top_p=*/0.9, seed);
  };
  Corpus c;
  std::vector<int32_t> calib = sample(opt.calibration_sequences, opt.seed * 10 + 1);
  std::vector<int32_t> train = sample(opt.train_sequences, opt.seed * 10 + 2);
  std::vector<int32_t> held = remove_overlap(sample(opt.heldout_sequences, opt.seed * 10 + 3),
                                             train, bos, &c.overlap_removed);
  write_token_file(dir / "calibration.tokens", calib, teacher.config.vocab_size);
  write_token_file(dir / "train.tokens", train, teacher.config.vocab_size);
  write_token_file(dir / "heldout.tokens", held, teacher.config.vocab_size);
  c.calibration = TokenDataset(std::move(calib), teacher.config.vocab_size, bos);
  c.train = TokenDataset(std::move(train), teacher.config.vocab_size, bos);
  c.heldout = TokenDataset(std::move(held), teacher.config.vocab_size, bos);
  return c;
}

// Reloads the exported checkpoint and checks it gives the student's logits bit for bit.
double export_roundtrip_diff(const fs::path& dir, const LlamaModel& student, const at::Tensor& batch) {
  at::NoGradGuard no_grad;
  LlamaModel back = load_checkpoint(dir);
  return (back.forward(batch) - student.forward(batch)).abs().max().item<double>();
}

}  // namespace

json run_compress(const CompressOptions& opt) {
  init_torch_threads();
  StageTimer timer;
  const double t_start = now_s();
  check_not_overwriting_input(opt.model_dir, opt.out_dir, "compress");
  Scenario scenario = find_scenario(opt.scenario);
  LlamaModel teacher = load_checkpoint(opt.model_dir);
  log_info(fmt::format("[compress] teacher {} ({} parameters), scenario {}",
                       describe(teacher.config), teacher.config.num_parameters(), scenario.name));
  StagingDir out(opt.out_dir);
  timer.done("load");

  // profile: this device's latency tables at the shapes the search will consider.
  Profile profile = opt.profile_path.empty()
                        ? run_profile({teacher.config}, scenario.workload)
                        : load_profile(opt.profile_path);
  save_profile(out.path() / "profile.json", profile);
  timer.done("profile");

  Corpus data = sample_data(teacher, opt, out.path() / "data");
  timer.done("sample");

  // The teacher measured on this device: relative limits resolve against it.
  Measurement teacher_measured = measure_native(teacher, scenario.workload, opt.measure_repeats);
  // Relative limits ("0.6 x the teacher's TPOT") resolve against the teacher's measurement for
  // the measured check, and against the teacher's prediction for the search, so that the search
  // compares predictions with predictions and a profile/measurement offset cancels out.
  Limits limits = scenario.limits.resolve(teacher_measured.as_estimate());
  CostEstimate teacher_predicted = predict(teacher.config, scenario, &profile);
  Limits search_limits = scenario.limits.resolve(teacher_predicted);
  timer.done("measure_teacher");

  std::vector<at::Tensor> calib = data.calibration.sequential_batches(8, opt.seq_len);
  ImportanceOptions io;
  Importance imp = compute_importance(teacher, calib, io);
  save_importance(out.path() / "importance.safetensors", imp);
  timer.done("importance");

  MinitronOptions mo;
  mo.safety_margin = opt.safety_margin;
  CostFn cost = [&](const ModelConfig& c) { return predict(c, scenario, &profile); };
  std::vector<at::Tensor> rank_batches(calib.begin(), calib.begin() + std::min<size_t>(1, calib.size()));
  SearchResult search = minitron_search(teacher, imp, cost, search_limits, rank_batches, mo);
  json arch_extra = {{"search", search.to_json()},
                     {"limits", search_limits.to_json()},
                     {"scenario", scenario.name}};
  write_arch(out.path() / "arch.json", search.best.target, arch_extra);
  timer.done("search");

  LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, search.best.target));
  student.weights = clone(student.config, student.weights);
  EvalOptions eo;
  eo.seq_len = opt.seq_len;
  EvalResult pruned_eval = evaluate(student, &teacher, data.heldout, eo);
  timer.done("prune");

  DistillOptions dopt;
  dopt.token_budget = opt.distill_tokens;
  dopt.batch_size = opt.distill_batch;
  dopt.seq_len = opt.seq_len;
  dopt.lr = opt.distill_lr;
  dopt.min_lr = opt.distill_lr / 10;
  dopt.seed = opt.seed;
  dopt.log_path = out.path() / "distill_log.csv";
  DistillResult dres = distill(teacher, student, data.train, dopt);
  timer.done("distill");

  EvalResult teacher_eval = evaluate(teacher, nullptr, data.heldout, eo);
  EvalResult student_eval = evaluate(student, &teacher, data.heldout, eo);
  timer.done("eval");

  fs::create_directories(out.path() / "model");
  save_checkpoint(out.path() / "model", student, opt.model_dir);
  double roundtrip = export_roundtrip_diff(out.path() / "model", student,
                                           data.heldout.windows(0, 1, opt.seq_len));
  if (roundtrip != 0)
    throw InternalError(fmt::format("[compress] the exported checkpoint does not reload to the "
                                    "same logits (max diff {})", roundtrip));
  timer.done("export");

  Measurement student_measured = measure_native(student, scenario.workload, opt.measure_repeats);
  CostEstimate student_predicted = predict(student.config, scenario, &profile);
  timer.done("validate");

  json report = {
      {"scenario", {{"name", scenario.name}, {"device", scenario.device}, {"engine", scenario.engine},
                    {"workload", {{"prompt_tokens", scenario.workload.prompt_tokens},
                                  {"output_tokens", scenario.workload.output_tokens},
                                  {"batch_size", scenario.workload.batch_size}}},
                    {"limits", limits.to_json()},
                    {"limits_for_search", search_limits.to_json()},
                    {"limits_as_written", scenario.limits.to_json()}}},
      {"device", {{"cpu_model", profile.identity.cpu_model}, {"cores", profile.identity.cores},
                  {"threads", profile.identity.threads}, {"torch", profile.identity.torch_version}}},
      {"date", today_utc()},
      {"teacher", {{"config", describe(teacher.config)}, {"parameters", teacher.config.num_parameters()},
                   {"predicted", teacher_predicted.to_json()},
                   {"measured", teacher_measured.to_json()},
                   {"eval", teacher_eval.to_json()}}},
      {"compressed", {{"config", describe(student.config)},
                      {"hf_config", config_to_hf_json(student.config)},
                      {"parameters", student.config.num_parameters()},
                      {"predicted", student_predicted.to_json()},
                      {"measured", student_measured.to_json()},
                      {"limits_predicted", check_limits(student_predicted, search_limits)},
                      {"limits_measured", check_limits(student_measured.as_estimate(), limits)},
                      {"eval_after_prune", pruned_eval.to_json()},
                      {"eval", student_eval.to_json()}}},
      {"search", {{"method", search.method}, {"candidates", int64_t(search.candidates.size())},
                  {"search_tokens", search.search_tokens}, {"safety_margin", opt.safety_margin}}},
      {"distill", {{"tokens", dres.tokens}, {"steps", dres.steps_done}, {"skipped_steps", dres.skipped_steps},
                   {"wall_s", dres.wall_s},
                   {"first_loss", dres.loss_curve.empty() ? 0.0 : dres.loss_curve.front()},
                   {"last_loss", dres.loss_curve.empty() ? 0.0 : dres.loss_curve.back()}}},
      {"data", {{"calibration_tokens", data.calibration.num_tokens()},
                {"train_tokens", data.train.num_tokens()},
                {"heldout_tokens", data.heldout.num_tokens()},
                {"heldout_documents_removed_for_overlap", data.overlap_removed}}},
      {"export", {{"path", "model"}, {"reload_max_abs_diff", roundtrip}}},
  };
  timer.done("report");
  report["stages"] = timer.stages;
  report["total_seconds"] = now_s() - t_start;
  write_json_file(out.path() / "report.json", report);
  write_file_atomic(out.path() / "report.md", render_report_md(report));
  out.commit();
  return report;
}

}  // namespace ac
