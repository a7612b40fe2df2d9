#include "pipeline/compress.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/data_source.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "export/engine_loaders.h"
#include "export/gguf_model.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/granularity.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "hardware/validate.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"
#include "model/finite.h"
#include "pipeline/compare.h"
#include "pipeline/llamacpp_engine.h"
#include "pipeline/llamacpp_stage.h"
#include "pipeline/measured_fit.h"
#include "pipeline/report.h"
#include "pipeline/report_html.h"
#include "pipeline/story_tasks.h"
#include "prune/arch.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "prune/pruning_map.h"
#include "search/minitron.h"
#include "search/outcome.h"

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

// Calibration, training and held-out sets: teacher-sampled stories (distinct seeds; held-out
// documents that also occur in training are removed), an earlier run's token files, or the
// user's text.
struct Corpus {
  TokenDataset calibration, train, heldout;
  int64_t overlap_removed = 0;
  json source;  // report.json "data": where the sets came from
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
  c.source = {{"source", "teacher samples"},
              {"seeds", {opt.seed * 10 + 1, opt.seed * 10 + 2, opt.seed * 10 + 3}},
              {"temperature", 1.0}, {"top_p", 0.9}};
  return c;
}

// The user's text (--data-text), tokenized with the teacher's tokenizer: the train split trains,
// its first calibration_sequences windows calibrate, the held-out split evaluates.
Corpus text_data(const LlamaModel& teacher, const CompressOptions& opt, const fs::path& dir) {
  fs::create_directories(dir);
  const int64_t V = teacher.config.vocab_size;
  const int32_t bos = int32_t(teacher.config.bos_token_id);
  TextData t = tokenize_text_data(opt.data_text, opt.model_dir, V, opt.text_field);
  for (const auto& [part, n] : {std::pair<const char*, size_t>{"train", t.train.size()},
                                {"held-out", t.heldout.size()}})
    if (int64_t(n) < opt.seq_len)
      throw ConfigError(msg("compress", "--data-text {}: the {} split has {} tokens, less than "
                            "one window of --seq-len {} ({})", opt.data_text.string(), part, n,
                            opt.seq_len, describe(t.summary)));
  const int64_t calib_tokens =
      std::min<int64_t>(int64_t(t.train.size()), opt.calibration_sequences * opt.seq_len);
  std::vector<int32_t> calib(t.train.begin(), t.train.begin() + calib_tokens);
  write_token_file(dir / "calibration.tokens", calib, V);
  write_token_file(dir / "train.tokens", t.train, V);
  write_token_file(dir / "heldout.tokens", t.heldout, V);
  Corpus c;
  c.source = {{"source", "text"}, {"path", opt.data_text.string()},
              {"text_field", opt.text_field}, {"tokenizer", t.tokenizer},
              {"corpus", describe(t.summary)}, {"documents", t.summary.documents},
              {"files", t.summary.files},
              {"heldout_rule", t.summary.split_by_document
                                   ? fmt::format("every {}th document", t.summary.heldout_every)
                                   : fmt::format("the last 1/{} of each document",
                                                 t.summary.heldout_every)}};
  c.calibration = TokenDataset(std::move(calib), V, bos);
  c.train = TokenDataset(std::move(t.train), V, bos);
  c.heldout = TokenDataset(std::move(t.heldout), V, bos);
  return c;
}

// The workload this CPU is profiled for: the scenario's; when the scenario targets another
// device, what the llama.cpp stage runs here (pipeline/llamacpp_stage.h): one sequence of the
// scenario's prompt and output lengths in fp32 (the f32 GGUF). Profiling a GPU scenario's batch
// (1024 sequences of stories15m-serving) on this CPU would take long and serve nothing.
Workload profiled_workload(const Scenario& s) {
  Workload w = s.workload;
  if (s.device != "cpu") {
    w.weight_dtype = w.kv_cache_dtype = "fp32";
    w.batch_size = 1;
  }
  return w;
}

// The distillation options of the run (batch, T, lr schedule, seed) for a token budget.
DistillOptions distill_options(const CompressOptions& opt, int64_t budget) {
  DistillOptions d;
  d.token_budget = budget;
  d.batch_size = opt.distill_batch;
  d.seq_len = opt.seq_len;
  d.lr = opt.distill_lr;
  d.min_lr = opt.distill_lr / 10;
  d.seed = opt.seed;
  d.allow_nonfinite = opt.allow_nonfinite;
  return d;
}

const char* const kDataFiles[] = {"calibration.tokens", "train.tokens", "heldout.tokens"};

// Refuses a --data folder without the three token files before any work is done.
void check_data_dir(const fs::path& from) {
  for (const char* name : kDataFiles)
    if (!fs::is_regular_file(from / name))
      throw ConfigError(msg("compress", "--data {}: no {} there (expected the data/ folder of an "
                                        "earlier compress run)", from.string(), name));
}

// The token files of an earlier run's data/ folder (reused instead of sampling again): the same
// three sets, checked against the teacher's vocabulary by TokenDataset::load. Copied into `dir`.
Corpus reuse_data(const LlamaModel& teacher, const fs::path& from, const fs::path& dir) {
  fs::create_directories(dir);
  const int32_t bos = int32_t(teacher.config.bos_token_id);
  Corpus c;
  TokenDataset* sets[] = {&c.calibration, &c.train, &c.heldout};
  for (int i = 0; i < 3; ++i) {
    const fs::path f = from / kDataFiles[i];
    *sets[i] = TokenDataset::load(f, bos);
    if (sets[i]->vocab_size() > teacher.config.vocab_size)
      throw ConfigError(msg("compress", "{}: vocab_size {}, the teacher's is {}", f.string(),
                            sets[i]->vocab_size(), teacher.config.vocab_size));
    write_token_file(dir / kDataFiles[i], sets[i]->ids(), teacher.config.vocab_size);
  }
  c.source = {{"source", "token files"}, {"path", from.string()}};
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
  std::vector<fs::path> inputs{opt.model_dir};
  for (const fs::path& p : {opt.profile_path, opt.data_dir, opt.data_text})
    if (!p.empty()) inputs.push_back(p);
  check_not_overwriting_inputs(inputs, opt.out_dir, "compress");
  Scenario scenario = find_scenario(opt.scenario);
  if (!opt.data_dir.empty() && !opt.data_text.empty())
    throw ConfigError(msg("compress", "give at most one of --data (an earlier run's token files) "
                          "and --data-text (your text)"));
  if (opt.measure.min_rounds < 2 || opt.measure.max_rounds < opt.measure.min_rounds)
    throw ConfigError(msg("compress", "--measure-rounds {} and --max-measure-rounds {}: expected "
                          "2 <= measure-rounds <= max-measure-rounds", opt.measure.min_rounds,
                          opt.measure.max_rounds));
  if (!opt.data_dir.empty()) check_data_dir(opt.data_dir);
  if (!opt.data_text.empty() && !fs::exists(opt.data_text))
    throw ConfigError(msg("compress", "--data-text {}: no such file or folder",
                          opt.data_text.string()));
  LlamaModel teacher = load_checkpoint(opt.model_dir);
  // Refused before minutes of profiling and sampling (importance and distill would refuse too).
  require_finite(teacher, opt.model_dir.string(), "compress", opt.allow_nonfinite);
  log_info(fmt::format("[compress] teacher {} ({} parameters), scenario {}",
                       describe(teacher.config), teacher.config.num_parameters(), scenario.name));
  // The tokenizer is read now, so that a bad file is refused before minutes of profiling (the
  // data, bits per byte, the tasks and the GGUF export read it later).
  for (const char* f : {"tokenizer.json", "tokenizer.bin", "tokenizer.model"})
    if (fs::exists(opt.model_dir / f)) {
      load_tokenizer(opt.model_dir, teacher.config.vocab_size);
      break;
    }
  StagingDir out(opt.out_dir);
  timer.done("load");
  // The user's text is read first: a bad file is refused before minutes of profiling.
  std::optional<Corpus> text_corpus;
  if (!opt.data_text.empty()) {
    text_corpus = text_data(teacher, opt, out.path() / "data");
    timer.done("tokenize");
  }

  // profile: this device's latency tables at the shapes the search will consider.
  // The latency correction is fitted on real forwards of calibration prunes (docs/design.md,
  // "The fitted correction"); without it the bare table sums were 7-25% off (docs/benchmarks.md).
  ProfileOptions profile_options;
  // A scenario for another device uses this profile only for the llama.cpp stage (run here):
  // the correction, fitted for the native engine, is not needed there.
  // A scenario served by llama.cpp has its own calibration (below) and needs no native one.
  const bool llamacpp_engine = scenario.engine == "llama.cpp" && scenario.device == "cpu";
  profile_options.calibrate = scenario.device == "cpu" && !llamacpp_engine;
  Profile profile = opt.profile_path.empty()
                        ? run_profile({teacher.config}, profiled_workload(scenario), profile_options)
                        : load_profile(opt.profile_path);
  use_profile_gemm_backend(profile);  // the GEMM library its tables were timed with
  // A reused profile must be of this machine: its tables cost this CPU's scenario, and the
  // llama.cpp stage's prediction runs here.
  if (!opt.profile_path.empty()) check_profile_is_this_machine(profile);
  // llama.cpp serving on this CPU: llama.cpp itself is measured (pipeline/llamacpp_engine.h: its
  // own correction and memory model, at the scenario's threads and weight type) unless the
  // profile already holds that calibration. Its GGUFs carry the teacher's tokenizer.
  std::optional<GgufVocab> gguf_vocab;
  if (llamacpp_engine) {
    gguf_vocab = vocab_from_checkpoint(opt.model_dir, teacher.config.vocab_size);
    if (!profile.engine_calibration(scenario)) {
      LlamaCppCalibrationOptions lo;
      lo.scratch = out.path() / ".llama_cpp_calibration";
      profile.set_engine_calibration(
          calibrate_llamacpp(profile, teacher.config, *gguf_vocab, scenario, lo));
    }
  }
  save_profile(out.path() / "profile.json", profile);
  // The scenario's costs come from this profile only when it targets this device; a GPU
  // scenario is costed by the roofline of its spec (the profile still serves the llama.cpp
  // stage, which runs here).
  const Profile* scenario_profile = profile.identity.device == scenario.device ? &profile : nullptr;
  timer.done("profile");

  Corpus data = text_corpus ? std::move(*text_corpus)
                : !opt.data_dir.empty() ? reuse_data(teacher, opt.data_dir, out.path() / "data")
                                        : sample_data(teacher, opt, out.path() / "data");
  if (!text_corpus) timer.done("sample");

  // The teacher measured on this device: relative limits resolve against it. A scenario for
  // another device (a GPU costed by its spec sheet) has nothing here to measure: its costs are
  // predictions only, and the report says so.
  fs::path llamacpp_script;
  const std::string not_measured = llamacpp_engine
                                       ? llamacpp_client("measure.mjs", &llamacpp_script)
                                       : not_measurable_reason(scenario);
  // The teacher and a student in paired rounds, in the scenario's engine (prior: rounds of the
  // same architecture measured before).
  auto measure_pair = [&](const LlamaModel& t, const LlamaModel& s, PairedRounds prior) {
    if (llamacpp_engine)
      return measure_paired_llamacpp(t, s, *gguf_vocab, scenario.workload, scenario.limits,
                                     opt.measure, out.path() / ".llama_cpp_rounds", prior);
    const c10::Device dev = measurement_device(scenario);  // the scenario's GPU with CUDA
    return measure_paired(LlamaModel{t.config, to_device(t.config, t.weights, dev)},
                          LlamaModel{s.config, to_device(s.config, s.weights, dev)},
                          scenario.workload, scenario.limits, opt.measure, prior);
  };
  std::optional<Measurement> teacher_measured;
  if (not_measured.empty() && llamacpp_engine) {
    LlamaCppRunOptions ro;
    ro.threads = scenario.workload.threads > 0 ? int(scenario.workload.threads) : cpu_cores();
    ro.rounds = opt.measure.min_rounds;
    teacher_measured = measure_llamacpp_models({&teacher}, *gguf_vocab, scenario.workload, ro,
                                               out.path() / ".llama_cpp_teacher")
                           .models.front()
                           .measured;
    fs::remove_all(out.path() / ".llama_cpp_teacher");
  } else if (not_measured.empty()) {
    // On the scenario's device: this CPU, or its GPU in a build with CUDA.
    const c10::Device dev = measurement_device(scenario);
    teacher_measured = measure_native(
        LlamaModel{teacher.config, to_device(teacher.config, teacher.weights, dev)},
        scenario.workload, opt.measure.min_rounds, /*show_progress=*/true);
  }
  else
    log_warn("[compress] costs are predicted only, nothing is measured: " + not_measured);
  // Relative limits ("0.6 x the teacher's TPOT") resolve against the teacher's measurement for
  // the measured check, and against the teacher's prediction for the search, so that the search
  // compares predictions with predictions and a profile/measurement offset cancels out.
  CostEstimate teacher_predicted = predict(teacher.config, scenario, scenario_profile);
  Limits search_limits = scenario.limits.resolve(teacher_predicted);
  Limits limits = teacher_measured ? scenario.limits.resolve(teacher_measured->as_estimate())
                                   : search_limits;
  timer.done("measure_teacher");

  std::vector<at::Tensor> calib = data.calibration.sequential_batches(8, opt.seq_len);
  ImportanceOptions io;
  io.allow_nonfinite = opt.allow_nonfinite;
  Importance imp = compute_importance(teacher, calib, io);
  save_importance(out.path() / "importance.safetensors", imp);
  timer.done("importance");

  // Search: one method, or several side by side ("both": autocompress first, the main result;
  // minitron's architecture goes through the same prune / distill / eval as a comparison).
  SearchSettings search_settings;
  search_settings.safety_margin = opt.safety_margin;
  // Widths in the step this device runs efficiently (derived by the profile; hardware/granularity.h).
  search_settings.autocompress.space.width_granularity = search_settings.minitron.width_granularity =
      width_granularity_for(scenario_profile, scenario.device_spec);
  // Lightweight retraining of each method's top candidates (search/minitron.h): a few steps of
  // distillation with the main run's batch and lr, warming up over the same share of its steps.
  auto retrain_options = [&](int64_t top_k, int64_t tokens, int64_t default_divisor) {
    RetrainOptions r;
    r.top_k = top_k;
    const int64_t batch_tokens = std::max<int64_t>(1, opt.distill_batch * opt.seq_len);
    const int64_t budget =
        std::max(batch_tokens, tokens > 0 ? tokens : opt.distill_tokens / default_divisor);
    r.distill = distill_options(opt, budget);
    // The main run warms up over 10 of its 64 steps; a retraining of a few steps the same share.
    r.distill.warmup_steps = std::max<int64_t>(1, budget / batch_tokens / 6);
    return r;
  };
  if (opt.minitron_retrain_top_k > 0) {
    search_settings.minitron_retrain = true;
    search_settings.retrain = retrain_options(opt.minitron_retrain_top_k,
                                              opt.minitron_retrain_tokens, 8);
  }
  if (opt.autocompress_retrain_top_k > 0) {
    search_settings.autocompress_retrain = true;
    search_settings.autocompress_retrain_options = retrain_options(
        opt.autocompress_retrain_top_k, opt.autocompress_retrain_tokens, 8);
  }
  // The seed of the run also seeds the differentiable search's Gumbel noise.
  search_settings.autocompress.seed = opt.seed;
  // Every method's search (the first is the main result), each fitted to the measurement on its
  // own (pipeline/measured_fit.h): its candidate is measured beside the teacher before it is
  // distilled and searched again under tightened limits while it breaks one. A method is never
  // held to limits that another method's overshoot tightened. Tokens and seconds of every
  // attempt are counted.
  struct MethodFit {
    SearchOutcome outcome;
    Limits search_limits;             // what the kept search held its predictions to
    std::vector<FitAttempt> attempts;  // empty when nothing is measured here
  };
  std::vector<MethodFit> fits;
  int64_t search_tokens_all = 0;
  double search_seconds_all = 0;
  PrunePlan plan;
  std::optional<LlamaModel> candidate;
  for (const std::string& m : search_methods(opt.method)) {
    MethodFit f;
    f.search_limits = search_limits;
    PrunePlan method_plan;
    std::optional<LlamaModel> method_candidate;
    auto search_one = [&](const Limits& lim) {
      f.outcome = run_search_method(m, teacher, imp, scenario, scenario_profile, lim,
                                    data.calibration, opt.seq_len, search_settings, &data.train);
      search_tokens_all += f.outcome.search_tokens;
      search_seconds_all += f.outcome.seconds;
      method_plan = plan_pruning(teacher.config, imp, f.outcome.best.target);
      method_candidate = drop_removed_blocks(apply_plan(teacher, method_plan));
      return method_candidate->config;
    };
    if (not_measured.empty() && opt.fit_attempts > 0) {
      FitCallbacks cb;
      cb.search = search_one;
      cb.predict = [&](const ModelConfig& c) { return predict(c, scenario, scenario_profile); };
      cb.measure = [&](const ModelConfig& c) {
        // The pruned model that `search` left (its latency does not depend on the weights, but
        // it is the model the user gets): it must be the architecture asked for.
        if (!method_candidate || describe(method_candidate->config) != describe(c))
          throw InternalError("[compress] the fit to the measurement asked for an architecture "
                              "other than the searched candidate");
        log_info(fmt::format("[compress] {}: measuring the teacher and the searched architecture "
                             "in paired rounds ({})", m, scenario.engine));
        return measure_pair(teacher, *method_candidate, PairedRounds{});
      };
      f.attempts = fit_to_measurement(scenario.limits, search_limits, cb, opt.fit_attempts,
                                      opt.fit_margin);
      const FitAttempt& fitted = fitted_attempt(f.attempts);
      if (&fitted != &f.attempts.back()) search_one(fitted.search_limits);  // the kept attempt
      f.search_limits = fitted.search_limits;
    } else {
      search_one(search_limits);
    }
    if (fits.empty()) {  // the main result
      plan = method_plan;
      candidate = std::move(method_candidate);
    }
    fits.push_back(std::move(f));
  }
  std::vector<SearchOutcome> searches;
  json search_rows = json::array();
  for (const MethodFit& f : fits) {
    searches.push_back(f.outcome);
    search_rows.push_back(f.outcome.summary());
  }
  const std::vector<FitAttempt>& fit_attempts = fits.front().attempts;
  search_limits = fits.front().search_limits;
  for (size_t i = 0; i < searches.size(); ++i)
    write_search_outputs(i == 0 ? out.path() / "arch.json"
                                : method_arch_path(out.path() / "arch.json", searches[i].method),
                         searches[i], scenario.name, {{"comparison", search_rows}});
  const SearchOutcome& search = searches.front();
  timer.done("search");

  LlamaModel student = std::move(*candidate);
  candidate.reset();
  student.weights = clone(student.config, student.weights);
  EvalOptions eo;
  eo.seq_len = opt.seq_len;
  std::optional<TokenBytes> token_bytes =
      token_bytes_of_checkpoint(opt.model_dir, teacher.config.vocab_size);
  eo.token_bytes = token_bytes ? &*token_bytes : nullptr;  // bits per byte
  EvalResult pruned_eval = evaluate(student, &teacher, data.heldout, eo);
  timer.done("prune");

  DistillOptions dopt = distill_options(opt, opt.distill_tokens);
  dopt.log_path = out.path() / "distill_log.csv";
  dopt.hidden_loss_weight = opt.distill_hidden_loss_weight;
  dopt.hidden_map = pruning_map_from_plan(teacher.config, plan, /*blocks_dropped=*/true);
  DistillResult dres = distill(teacher, student, data.train, dopt);
  stop_if_interrupted(dres, "compress");
  timer.done("distill");

  EvalResult teacher_eval = evaluate(teacher, nullptr, data.heldout, eo);
  EvalResult student_eval = evaluate(student, &teacher, data.heldout, eo);
  timer.done("eval");

  // In-domain tasks (cloze, story ending, character) from the held-out stories: teacher vs
  // compressed.
  StoryTasksStageOptions task_opt;
  task_opt.teacher_dir = opt.model_dir;
  task_opt.seed = opt.seed;
  task_opt.max_items = opt.task_items;
  task_opt.out_dir = out.path() / "tasks";
  json tasks = run_story_tasks_stage(teacher, student, data.heldout.ids(), task_opt);
  timer.done("tasks");

  fs::create_directories(out.path() / "model");
  save_checkpoint(out.path() / "model", student, opt.model_dir);
  double roundtrip = export_roundtrip_diff(out.path() / "model", student,
                                           data.heldout.windows(0, 1, opt.seq_len));
  if (roundtrip != 0)
    throw InternalError(fmt::format("[compress] the exported checkpoint does not reload to the "
                                    "same logits (max diff {})", roundtrip));
  // Served by llama.cpp: the GGUF of the scenario's weight type is what the user runs.
  json gguf_export = nullptr;
  if (llamacpp_engine) {
    GgufExportOptions g;
    g.dtype = gguf_type_for(scenario.workload.weight_dtype);
    fs::create_directories(out.path() / "gguf");
    write_model_gguf(out.path() / "gguf" / "model.gguf", student, *gguf_vocab, g);
    gguf_export = {{"path", "gguf/model.gguf"}, {"type", ggml_type_name(g.dtype)},
                   {"bytes", int64_t(fs::file_size(out.path() / "gguf" / "model.gguf"))}};
  }
  // The files as the scenario's engine loads them (export/engine_loaders.h, written from each
  // loader's source): the search proposed only what its rules allow; this reads the files.
  json engine_check = nullptr;
  // (llama.cpp on another device: no GGUF is written here.)
  if (scenario.engine == "vllm" || scenario.engine == "tensorrt-llm" || llamacpp_engine) {
    const fs::path files = llamacpp_engine ? out.path() / "gguf" / "model.gguf" : out.path() / "model";
    const std::vector<std::string> errors =
        engine_load_errors(scenario.engine, files, scenario.workload.tensor_parallel);
    engine_check = {{"engine", scenario.engine}, {"loads", errors.empty()}, {"errors", errors}};
    if (!errors.empty())
      log_warn(fmt::format("[compress] {} would not load {}: {}", scenario.engine,
                           files.string(), fmt::join(errors, "; ")));
  }
  timer.done("export");

  // The student and the teacher again, in paired rounds (hardware/paired_measure.h): every
  // limit is judged on the per-round ratios with a 95% interval, so that a machine's drift
  // between minutes cannot flip the verdict. The fit loop's rounds of the same architecture
  // (its latency does not depend on the weights' values) are pooled with these. The limits are
  // resolved again against the pooled teacher.
  std::optional<Measurement> student_measured;
  std::optional<PairedVerdict> measured_verdict;
  if (not_measured.empty()) {
    PairedRounds prior;
    if (!fit_attempts.empty() && describe(fitted_attempt(fit_attempts).config) == describe(student.config))
      prior = fitted_attempt(fit_attempts).rounds;
    log_info(fmt::format("[compress] measuring the teacher and the compressed model in paired "
                         "rounds ({} from the fit before distillation)", prior.rounds()));
    const PairedRounds rounds = measure_pair(teacher, student, prior);
    teacher_measured = rounds.teacher_pooled();
    student_measured = rounds.student_pooled();
    measured_verdict = judge_paired(rounds, scenario.limits);
    limits = scenario.limits.resolve(teacher_measured->as_estimate());
  }
  CostEstimate student_predicted = predict(student.config, scenario, scenario_profile);
  timer.done("validate");

  // The real llama.cpp on the GGUF exports: its measured TPOT beside the llama.cpp prediction.
  LlamaCppStageOptions lopt;
  lopt.tokenizer_dir = opt.model_dir;
  lopt.work_dir = out.path() / ".llama_cpp";
  json llama_cpp = run_llamacpp_stage(teacher, student, scenario, &profile, lopt);
  timer.done("llama_cpp");

  // The other methods' architectures: same distillation budget and data, same held-out set.
  CompareContext cmp{&teacher, &imp, &scenario, scenario_profile, &data.train, &data.heldout,
                     limits, search_limits, dopt, eo, opt.measure, not_measured,
                     opt.model_dir};
  cmp.tasks = task_opt;  // the same tasks for every method
  cmp.measure_pair = measure_pair;  // the same engine and protocol for every method
  json comparison = json::array();
  comparison.push_back(comparison_row(search, student.config, student_predicted,
                                      student_measured ? &*student_measured : nullptr,
                                      pruned_eval, student_eval, dres, cmp, "model"));
  comparison.back()["tasks"] = tasks;
  if (measured_verdict) {
    comparison.back()["limits_measured"] = measured_verdict->failures();
    comparison.back()["measured_verdict"] = measured_verdict->to_json();
  }
  for (size_t i = 1; i < searches.size(); ++i) {
    const std::string& m = searches[i].method;
    CompareContext method_cmp = cmp;
    method_cmp.search_limits = fits[i].search_limits;  // what its own fit kept
    comparison.push_back(run_method_for_comparison(searches[i], method_cmp,
                                                   out.path() / ("model-" + m), "model-" + m,
                                                   out.path() / ("distill_log." + m + ".csv")));
    json attempts = json::array();
    for (const FitAttempt& a : fits[i].attempts) attempts.push_back(a.to_json());
    comparison.back()["fit_attempts"] = attempts;
    timer.done("compare_" + m);
  }

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
                   {"measured", teacher_measured ? teacher_measured->to_json() : json(nullptr)},
                   {"eval", teacher_eval.to_json()}}},
      {"compressed", {{"config", describe(student.config)},
                      {"hf_config", config_to_hf_json(student.config)},
                      {"parameters", student.config.num_parameters()},
                      {"predicted", student_predicted.to_json()},
                      {"measured", student_measured ? student_measured->to_json() : json(nullptr)},
                      {"limits_predicted", check_limits(student_predicted, search_limits)},
                      {"limits_measured", measured_verdict ? json(measured_verdict->failures())
                                                           : json(nullptr)},
                      {"measured_verdict", measured_verdict ? measured_verdict->to_json()
                                                            : json(nullptr)},
                      {"eval_after_prune", pruned_eval.to_json()},
                      {"eval", student_eval.to_json()}}},
      {"search", {{"method", search.method},
                  {"candidates", int64_t(search.search.value("candidates", json::array()).size())},
                  {"search_tokens", search.search_tokens}, {"search_seconds", search.seconds},
                  {"search_tokens_all_attempts", search_tokens_all},
                  {"search_seconds_all_attempts", search_seconds_all},
                  {"safety_margin", opt.safety_margin}}},
      {"comparison", comparison},
      {"distill", {{"tokens", dres.tokens}, {"steps", dres.steps_done}, {"skipped_steps", dres.skipped_steps},
                   {"wall_s", dres.wall_s},
                   {"first_loss", dres.loss_curve.empty() ? 0.0 : dres.loss_curve.front()},
                   {"last_loss", dres.loss_curve.empty() ? 0.0 : dres.loss_curve.back()}}},
      {"data", {{"source", data.source},
                {"calibration_tokens", data.calibration.num_tokens()},
                {"train_tokens", data.train.num_tokens()},
                {"heldout_tokens", data.heldout.num_tokens()},
                {"heldout_documents_removed_for_overlap", data.overlap_removed}}},
      {"export", {{"path", "model"}, {"reload_max_abs_diff", roundtrip}, {"gguf", gguf_export},
                  {"engine_check", engine_check}}},
  };
  json fit = {{"max_attempts", opt.fit_attempts}, {"margin", opt.fit_margin},
              {"attempts", json::array()}};
  for (const FitAttempt& a : fit_attempts) fit["attempts"].push_back(a.to_json());
  report["fit"] = fit;
  report["not_measured"] = not_measured;  // why nothing was measured; "" = measured here
  report["tasks"] = tasks;
  report["llama_cpp"] = llama_cpp;
  timer.done("report");
  report["stages"] = timer.stages;
  report["total_seconds"] = now_s() - t_start;
  write_json_file(out.path() / "report.json", report);
  write_file_atomic(out.path() / "report.md", render_report_md(report));
  write_report_html(out.path(), report);  // beside report.md: plots, every number's provenance
  out.commit();
  return report;
}

}  // namespace ac
