#include "pipeline/compress.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "common/accelerator.h"
#include "distill/bld.h"
#include "hardware/cost_model.h"
#include "model/stage_memory.h"
#include "pipeline/report.h"
#include "pipeline/report_html.h"
#include "pipeline/stages.h"

namespace ac {

using json = nlohmann::json;

json CompressOptions::to_json() const {
  return {
      {"in", {{"model_dir", in.model_dir.string()}, {"scenario", in.scenario},
              {"out_dir", in.out_dir.string()}, {"profile_path", in.profile_path.string()},
              {"data_dir", in.data_dir.string()}, {"data_text", in.data_text.string()},
              {"text_field", in.text_field}, {"allow_nonfinite", in.allow_nonfinite}}},
      {"compute", {{"device", compute.device}, {"precision", compute.precision}}},
      {"data", {{"seed", data.seed}, {"seq_len", data.seq_len},
                {"calibration_sequences", data.calibration_sequences},
                {"train_sequences", data.train_sequences},
                {"heldout_sequences", data.heldout_sequences}, {"task_items", data.task_items}}},
      {"search", {{"method", search.method}, {"safety_margin", search.safety_margin},
                  {"minitron_retrain", {search.minitron_retrain.top_k, search.minitron_retrain.tokens}},
                  {"autocompress_retrain",
                   {search.autocompress_retrain.top_k, search.autocompress_retrain.tokens,
                    search.autocompress_retrain.final_schedule}},
                  {"attention_caps", search.attention_caps},
                  {"autocompress_restarts", search.autocompress_restarts},
                  {"autocompress_judge", search.autocompress_judge},
                  {"max_removed_layers", search.max_removed_layers}}},
      {"distill", {{"tokens", distill.tokens}, {"batch", distill.batch}, {"lr", distill.lr},
                   {"hidden_loss_weight", distill.hidden_loss_weight},
                   {"bld_tokens", distill.bld_tokens}}},
      {"measure", {{"min_rounds", measure.rounds.min_rounds},
                   {"max_rounds", measure.rounds.max_rounds},
                   {"max_half_width", measure.rounds.max_half_width},
                   {"fit_attempts", measure.fit_attempts}, {"fit_margin", measure.fit_margin}}}};
}

int64_t distill_bld_tokens(const CompressOptions& o) {
  if (o.distill.bld_tokens >= 0) return o.distill.bld_tokens;
  if (o.distill.tokens <= 0) return 0;
  // At least one step of the blockwise start, which refuses less.
  return std::max(o.distill.tokens / 16, bld_step_tokens(o));
}

int64_t bld_step_tokens(const CompressOptions& o) {
  return BldOptions{}.batch_size * o.data.seq_len;
}

CompressOptions CompressOptions::from_json(const json& j, const std::string& where) {
  // Every field is required: the record is written by to_json of this version.
  auto at = [&](const char* group, const char* key) -> const json& {
    if (!j.contains(group) || !j[group].is_object() || !j[group].contains(key))
      throw FormatError(msg("compress", "{}: options.{}.{}: missing", where, group, key));
    return j[group][key];
  };
  CompressOptions o;
  try {
    o.in.model_dir = at("in", "model_dir").get<std::string>();
    o.in.scenario = at("in", "scenario").get<std::string>();
    o.in.out_dir = at("in", "out_dir").get<std::string>();
    o.in.profile_path = at("in", "profile_path").get<std::string>();
    o.in.data_dir = at("in", "data_dir").get<std::string>();
    o.in.data_text = at("in", "data_text").get<std::string>();
    o.in.text_field = at("in", "text_field").get<std::string>();
    o.in.allow_nonfinite = at("in", "allow_nonfinite").get<bool>();
    o.compute.device = at("compute", "device").get<std::string>();
    o.compute.precision = at("compute", "precision").get<std::string>();
    o.data.seed = at("data", "seed").get<uint64_t>();
    o.data.seq_len = at("data", "seq_len").get<int64_t>();
    o.data.calibration_sequences = at("data", "calibration_sequences").get<int64_t>();
    o.data.train_sequences = at("data", "train_sequences").get<int64_t>();
    o.data.heldout_sequences = at("data", "heldout_sequences").get<int64_t>();
    o.data.task_items = at("data", "task_items").get<int64_t>();
    o.search.method = at("search", "method").get<std::string>();
    o.search.safety_margin = at("search", "safety_margin").get<double>();
    const json& mr = at("search", "minitron_retrain");
    o.search.minitron_retrain = {mr.at(0).get<int64_t>(), mr.at(1).get<int64_t>()};
    const json& ar = at("search", "autocompress_retrain");
    // [top_k, tokens, final_schedule]; runs recorded before the schedule choice have two.
    o.search.autocompress_retrain = {ar.at(0).get<int64_t>(), ar.at(1).get<int64_t>(),
                                     ar.size() > 2 && ar.at(2).get<bool>()};
    if (j["search"].contains("attention_caps"))  // recorded since the caps exist
      o.search.attention_caps = j["search"]["attention_caps"].get<std::vector<int64_t>>();
    // Recorded since the restarts exist; a run from before searched once.
    o.search.autocompress_restarts = j["search"].value("autocompress_restarts", int64_t(1));
    // Recorded since the finalists may be judged after their blockwise start alone.
    o.search.autocompress_judge = j["search"].value("autocompress_judge", std::string("retraining"));
    // Recorded as the search's option (AutoCompress's alone) until every method's final
    // distillation started with it.
    if (j["search"].contains("autocompress_bld_tokens"))
      o.distill.bld_tokens = j["search"]["autocompress_bld_tokens"].get<int64_t>();
    if (j["search"].contains("max_removed_layers"))  // recorded since the flag exists
      o.search.max_removed_layers = j["search"]["max_removed_layers"].get<int64_t>();
    o.distill.tokens = at("distill", "tokens").get<int64_t>();
    o.distill.batch = at("distill", "batch").get<int64_t>();
    o.distill.lr = at("distill", "lr").get<double>();
    o.distill.hidden_loss_weight = at("distill", "hidden_loss_weight").get<double>();
    if (j["distill"].contains("bld_tokens"))
      o.distill.bld_tokens = j["distill"]["bld_tokens"].get<int64_t>();
    o.measure.rounds.min_rounds = at("measure", "min_rounds").get<int>();
    o.measure.rounds.max_rounds = at("measure", "max_rounds").get<int>();
    o.measure.rounds.max_half_width = at("measure", "max_half_width").get<double>();
    o.measure.fit_attempts = at("measure", "fit_attempts").get<int>();
    o.measure.fit_margin = at("measure", "fit_margin").get<double>();
  } catch (const json::exception& e) {
    throw FormatError(msg("compress", "{}: an option of the wrong type ({})", where, e.what()));
  }
  return o;
}

namespace {

// One row of the comparison: a method's search, its model, and its measurement (null when
// nothing is measured here).
ComparisonRow comparison_row(const Run& run, const SearchedMethod& s, const FinishedMethod& f,
                             const MeasuredMethod* m) {
  ComparisonRow row;
  row.method = s.method;
  row.config = describe(f.student.config);
  row.parameters = f.student.config.num_parameters();
  // The final model's blockwise start and distillation are every method's final recipe, not
  // its search: a final run that continued the chosen finalist's retraining (its blockwise
  // start, then the schedule's first steps) has those tokens in its own run, and the search
  // counted them (teacher and model: twice each; the blockwise start's teacher states, shared by
  // the finalists, are the final run's own), so they come off.
  row.search_tokens = s.search_tokens -
                      2 * f.distill.value("continued_retraining_tokens", int64_t(0)) -
                      2 * f.distill.value("continued_bld_tokens", int64_t(0));
  row.search_seconds = s.search_seconds;
  row.model = f.model_path;
  const CostEstimate predicted = predict(f.student.config, run.scenario, run.scenario_profile);
  row.predicted = predicted.to_json();
  row.limits_predicted = check_limits(predicted, s.search_limits);
  row.measured = m ? m->measured : json(nullptr);
  row.limits_measured = m ? json(m->failures) : json(nullptr);
  row.measured_verdict = m ? m->verdict : json(nullptr);
  row.eval_after_prune = f.eval_after_prune;
  row.eval = f.eval;
  row.distill = f.distill;
  row.tasks = f.tasks;
  row.fit_attempts = s.fit_attempts;
  return row;
}

// The process's peak resident set (bytes): the CPU run's peak memory.
int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // Linux: kilobytes
}

// Where the run computed and how fast the main method's distillation went: tokens/s, and on a
// GPU that is the scenario's (devices/*.json) the MFU against its dense peak in the run's
// precision.
RunReport::Compute compute_section(const Run& run, const FinishedMethod& f) {
  RunReport::Compute c;
  c.device = device_name(run.device);
  c.precision = precision_name(run.precision);
  const double tokens = f.distill.at("tokens").get<double>();
  const double wall = f.distill.at("wall_s").get<double>();
  const double flops = distill_flops_per_token(run.teacher.config, f.student.config,
                                               run.opt.data.seq_len);
  c.distill_flops_per_token = flops;
  if (tokens > 0 && wall > 0) c.distill_tokens_per_s = tokens / wall;
  if (run.device.is_cuda()) {
    c.gpu = cuda_device_name(run.device.has_index() ? run.device.index() : 0);
    c.peak_memory_bytes = f.distill.value("device_peak_bytes", int64_t(0));
    const DeviceSpec& spec = run.scenario.device_spec;
    if (c.distill_tokens_per_s.is_number() && gpu_name_matches(spec, c.gpu))
      c.distill_mfu = c.distill_tokens_per_s.get<double>() * flops /
                      spec.peak_flops_for(precision_name(run.precision));
  } else {
    c.peak_memory_bytes = peak_rss_bytes();
  }
  return c;
}

// report.json from every stage's result; the main result is the first method.
RunReport make_report(const Run& run, const Searches& searches,
                      const std::vector<FinishedMethod>& finished, const json& teacher_eval,
                      const json& exported, const MeasuredModels& measured, const json& llama_cpp,
                      const Corpus& data) {
  const std::vector<SearchedMethod>& searched = searches.methods;
  RunReport r;
  const Scenario& sc = run.scenario;
  r.scenario = {sc.name, sc.device, sc.engine, sc.workload.prompt_tokens,
                sc.workload.output_tokens, sc.workload.batch_size,
                run.limits.measured.to_json(), searched.front().search_limits.to_json(),
                run.limits.as_written.to_json()};
  const ProfileIdentity& id = run.profile.identity;
  r.device = {id.cpu_model, id.cores, id.threads, id.torch_version};
  r.compute = compute_section(run, finished.front());
  r.date = today_utc();
  r.teacher = {describe(run.teacher.config), run.teacher.config.num_parameters(),
               run.teacher_predicted.to_json(), measured.teacher, teacher_eval};
  for (size_t i = 0; i < searched.size(); ++i)
    r.comparison.push_back(comparison_row(run, searched[i], finished[i],
                                          measured.methods.empty() ? nullptr : &measured.methods[i]));
  const ComparisonRow& main = r.comparison.front();
  const FinishedMethod& f = finished.front();
  r.compressed = {main.config, config_to_hf_json(f.student.config), main.parameters,
                  main.predicted, main.measured, main.limits_predicted, main.limits_measured,
                  main.measured_verdict, main.eval_after_prune, main.eval};
  r.search = {searched.front().method, searched.front().candidates, main.search_tokens,
              searches.tokens_all_attempts, main.search_seconds, searches.seconds_all_attempts,
              run.limits.safety_margin};
  const json& d = f.distill;
  r.distill = {d.at("tokens").get<int64_t>(), d.at("steps").get<int64_t>(),
               d.at("skipped_steps").get<int64_t>(), d.at("wall_s").get<double>(),
               d.at("first_loss").get<double>(), d.at("last_loss").get<double>()};
  r.data = {data.source, data.calibration.num_tokens(), data.train.num_tokens(),
            data.heldout.num_tokens(), data.overlap_removed};
  r.exported = {f.model_path, f.reload_max_abs_diff, exported.at("gguf"),
                exported.at("engine_check")};
  r.fit = {run.opt.measure.fit_attempts, run.opt.measure.fit_margin, searched.front().fit_attempts};
  r.not_measured = run.not_measured;
  r.tasks = f.tasks;
  r.llama_cpp = llama_cpp;
  for (const json& s : run.folder.stage_times())
    r.stages.push_back({s.at("stage").get<std::string>(), s.at("seconds").get<double>(),
                        s.at("resumed").get<bool>()});
  return r;
}

// The pipeline, stage by stage (pipeline/stages.h), on an opened run.
RunReport run_stages(Run run) {
  // The user's text is read first: a bad file is refused before minutes of profiling.
  std::optional<Corpus> text;
  if (!run.opt.in.data_text.empty()) text = stage_data(run);
  stage_profile(run);
  const Corpus data = text ? std::move(*text) : stage_data(run);
  measure_teacher(run);
  const Importance imp = stage_importance(run, data);
  const Searches searches = stage_search(run, data, imp);
  const std::vector<SearchedMethod>& searched = searches.methods;
  std::vector<FinishedMethod> finished;
  for (size_t i = 0; i < searched.size(); ++i)
    finished.push_back(finish_method(run, data, imp, searched[i], /*main=*/i == 0));
  const json teacher_eval = stage_eval_teacher(run, data);
  const json exported = stage_export(run, finished.front());
  const MeasuredModels measured = stage_measure(run, searched, finished);
  const json llama_cpp = stage_llamacpp(run, finished.front());
  RunReport report = make_report(run, searches, finished, teacher_eval, exported, measured,
                                 llama_cpp, data);
  report.total_seconds = now_s() - run.t_start;
  const fs::path dir = run.folder.path();
  write_json_file(dir / "report.json", report.to_json());
  write_file_atomic(dir / "report.md", render_report_md(report));
  write_report_html(dir, report);  // beside report.md: plots, every number's provenance
  run.folder.commit();
  return report;
}

}  // namespace

RunReport run_compress(const CompressOptions& opt) {
  return run_stages(open_run(opt, std::nullopt));
}

RunReport resume_compress(const fs::path& out_dir) {
  RunFolder folder = RunFolder::resume(out_dir);
  const CompressOptions opt = CompressOptions::from_json(
      folder.options(), (folder.path() / "stages.json").string());
  log_info(fmt::format("[compress] resuming the run of {} (teacher {}, scenario {})",
                       out_dir.string(), opt.in.model_dir.string(), opt.in.scenario));
  return run_stages(open_run(opt, std::move(folder)));
}

}  // namespace ac
