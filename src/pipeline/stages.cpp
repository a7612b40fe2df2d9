#include "pipeline/stages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/data_source.h"
#include "data/token_file.h"
#include "distill/bld.h"
#include "export/engine_loaders.h"
#include "export/gguf_model.h"
#include "export/hf_export.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/validate.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"
#include "model/finite.h"
#include "model/stage_memory.h"
#include "pipeline/llamacpp_engine.h"
#include "pipeline/llamacpp_stage.h"
#include "pipeline/steps.h"
#include "prune/arch.h"
#include "prune/depth.h"
#include "search/outcome.h"

namespace ac {

using json = nlohmann::json;

namespace {

// Seconds since `t0`, for a stage's record.
double since(double t0) { return now_s() - t0; }

const char* const kDataFiles[] = {"calibration.tokens", "train.tokens", "heldout.tokens"};

// A field of a recorded stage result; FormatError naming the record and the field.
const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(msg("compress", "{}: no field \"{}\"", where, key));
  return j.at(key);
}

// The distillation options of the run (batch, T, lr schedule, seed, device) for a token budget.
// Where AutoCompress's finalists keep their retraining states (RetrainOptions::state_root) in a
// run folder until the final run continues the chosen one's.
constexpr const char* kRetrainStateDir = ".retrain_state-autocompress";

DistillOptions distill_options(const Run& run, int64_t budget) {
  const CompressOptions& opt = run.opt;
  DistillOptions d;
  d.token_budget = budget;
  d.batch_size = opt.distill.batch;
  d.seq_len = opt.data.seq_len;
  d.lr = opt.distill.lr;
  d.min_lr = opt.distill.lr / 10;
  d.seed = opt.data.seed;
  d.allow_nonfinite = opt.in.allow_nonfinite;
  d.device = run.device;
  d.precision = run.precision;
  return d;
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

// Refuses a --data folder without the three token files before any work is done.
void check_data_dir(const fs::path& from) {
  for (const char* name : kDataFiles)
    if (!fs::is_regular_file(from / name))
      throw ConfigError(msg("compress", "--data {}: no {} there (expected the data/ folder of an "
                                        "earlier compress run)", from.string(), name));
}

}  // namespace

// The three token files in `dir`, checked against the teacher's vocabulary and, where both are
// recorded, its tokenizer (the teacher in `teacher_dir`).
Corpus read_token_files(const ModelConfig& teacher, const fs::path& teacher_dir,
                        const fs::path& dir) {
  const int32_t bos = int32_t(teacher.bos_token_id);
  Corpus c;
  TokenDataset* sets[] = {&c.calibration, &c.train, &c.heldout};
  for (int i = 0; i < 3; ++i) {
    const fs::path f = dir / kDataFiles[i];
    TokenFile file = read_token_file(f);
    check_token_file_tokenizer(file.tokenizer, f, teacher_dir, teacher.vocab_size,
                               "compress");
    *sets[i] = TokenDataset(std::move(file.ids), file.vocab_size, bos);
    if (sets[i]->vocab_size() > teacher.vocab_size)
      throw ConfigError(msg("compress", "{}: vocab_size {}, the teacher's is {}", f.string(),
                            sets[i]->vocab_size(), teacher.vocab_size));
  }
  return c;
}

namespace {

void write_token_files(const Corpus& c, int64_t vocab_size, const TokenizerFingerprint& tokenizer,
                       const fs::path& dir) {
  fs::create_directories(dir);
  const TokenDataset* sets[] = {&c.calibration, &c.train, &c.heldout};
  for (int i = 0; i < 3; ++i)
    write_token_file(dir / kDataFiles[i], sets[i]->ids(), vocab_size, tokenizer);
}

// Teacher-sampled stories (distinct seeds; held-out documents that also occur in training are
// removed).
Corpus sample_data(const LlamaModel& model, const CompressDataOptions& o,
                   const c10::Device& device) {
  const LlamaModel teacher{model.config, to_device(model.config, model.weights, device)};
  const int32_t bos = int32_t(teacher.config.bos_token_id);
  const int64_t V = teacher.config.vocab_size;
  auto sample = [&](int64_t n, uint64_t seed) {
    return sample_corpus(teacher, n, o.seq_len, /*temperature=*/1.0, /*top_p=*/0.9, seed);
  };
  Corpus c;
  std::vector<int32_t> train = sample(o.train_sequences, o.seed * 10 + 2);
  std::vector<int32_t> held = remove_overlap(sample(o.heldout_sequences, o.seed * 10 + 3), train,
                                             bos, &c.overlap_removed);
  c.calibration = TokenDataset(sample(o.calibration_sequences, o.seed * 10 + 1), V, bos);
  c.train = TokenDataset(std::move(train), V, bos);
  c.heldout = TokenDataset(std::move(held), V, bos);
  c.source = {{"source", "teacher samples"},
              {"seeds", {o.seed * 10 + 1, o.seed * 10 + 2, o.seed * 10 + 3}},
              {"temperature", 1.0}, {"top_p", 0.9}};
  return c;
}

}  // namespace

// The user's text (--data-text), tokenized with the teacher's tokenizer: the train split trains,
// its first calibration_sequences windows calibrate, the held-out split evaluates.
Corpus text_data(const ModelConfig& teacher, const CompressOptions& opt) {
  const int64_t V = teacher.vocab_size;
  const int32_t bos = int32_t(teacher.bos_token_id);
  const CompressDataOptions& o = opt.data;
  TextData t = tokenize_text_data(opt.in.data_text, opt.in.model_dir, V, opt.in.text_field);
  for (const auto& [part, n] : {std::pair<const char*, size_t>{"train", t.train.size()},
                                {"held-out", t.heldout.size()}})
    if (int64_t(n) < o.seq_len)
      throw ConfigError(msg("compress", "--data-text {}: the {} split has {} tokens, less than "
                            "one window of --seq-len {} ({})", opt.in.data_text.string(), part, n,
                            o.seq_len, describe(t.summary)));
  const int64_t calib_tokens =
      std::min<int64_t>(int64_t(t.train.size()), o.calibration_sequences * o.seq_len);
  Corpus c;
  c.source = {{"source", "text"}, {"path", opt.in.data_text.string()},
              {"text_field", opt.in.text_field}, {"tokenizer", t.tokenizer},
              {"corpus", describe(t.summary)}, {"documents", t.summary.documents},
              {"files", t.summary.files},
              {"heldout_rule", t.summary.split_by_document
                                   ? fmt::format("every {}th document", t.summary.heldout_every)
                                   : fmt::format("the last 1/{} of each document",
                                                 t.summary.heldout_every)}};
  c.calibration =
      TokenDataset(std::vector<int32_t>(t.train.begin(), t.train.begin() + calib_tokens), V, bos);
  c.train = TokenDataset(std::move(t.train), V, bos);
  c.heldout = TokenDataset(std::move(t.heldout), V, bos);
  return c;
}

namespace {

// Reloads the exported checkpoint and checks it gives the student's logits bit for bit.
double export_roundtrip_diff(const fs::path& dir, const LlamaModel& student, const at::Tensor& batch) {
  at::NoGradGuard no_grad;
  LlamaModel back = load_checkpoint(dir);
  return (back.forward(batch) - student.forward(batch)).abs().max().item<double>();
}

// Lightweight retraining of a method's top candidates (search/minitron.h): a few steps of
// distillation with the main run's batch and lr, warming up over the same share of its steps.
RetrainOptions retrain_options(const Run& run, const RetrainChoice& c) {
  const CompressOptions& opt = run.opt;
  RetrainOptions r;
  r.top_k = c.top_k;
  const int64_t batch_tokens = std::max<int64_t>(1, opt.distill.batch * opt.data.seq_len);
  const int64_t budget = std::max(batch_tokens, c.tokens > 0 ? c.tokens : opt.distill.tokens / 8);
  r.distill = distill_options(run, budget);
  if (c.final_schedule) {  // the final run's warm-up and decay; only its first `budget` tokens
    r.schedule_tokens = opt.distill.tokens;
    return r;
  }
  // The main run warms up over 10 of its 64 steps; a retraining of a few steps the same share.
  r.distill.warmup_steps = std::max<int64_t>(1, budget / batch_tokens / 6);
  return r;
}

SearchSettings search_settings(const Run& run) {
  const CompressOptions& opt = run.opt;
  // The width step is left unset: search_step takes the profile's (hardware/granularity.h).
  SearchSettings s;
  s.minitron_retrain = opt.search.minitron_retrain.top_k > 0;
  if (s.minitron_retrain) s.retrain = retrain_options(run, opt.search.minitron_retrain);
  s.autocompress_retrain = opt.search.autocompress_retrain.top_k > 0;
  if (s.autocompress_retrain) {
    s.autocompress_retrain_options = retrain_options(run, opt.search.autocompress_retrain);
    s.autocompress_retrain_options.bld_tokens = distill_bld_tokens(opt);
    const std::string& j = opt.search.autocompress_judge;
    s.autocompress_retrain_options.judge = j == "blockwise" ? FinalistJudge::blockwise
                                           : j == "halving" ? FinalistJudge::halving
                                                            : FinalistJudge::retraining;
    // The chosen finalist's retraining is the final run's start (same schedule, data and seed):
    // kept, the final run continues it. A hidden-state loss changes the final run's options
    // (the retraining has none), so there it starts over.
    if (opt.search.autocompress_retrain.final_schedule && opt.distill.hidden_loss_weight == 0)
      s.autocompress_retrain_options.state_root = run.folder.path() / kRetrainStateDir;
  }
  s.autocompress.space.max_blocks_removed = opt.search.max_removed_layers;
  // The seed of the run also seeds the differentiable search's Gumbel noise.
  s.autocompress.seed = opt.data.seed;
  s.autocompress_attention_caps = opt.search.attention_caps.empty()
                                      ? default_attention_caps(run.teacher.config)
                                      : opt.search.attention_caps;
  s.autocompress_restarts = opt.search.autocompress_restarts;
  s.device = run.device;
  s.precision = run.precision;
  return s;
}

// One method's search, fitted to the measurement (pipeline/measured_fit.h): its candidate is
// measured beside the teacher before it is distilled, and searched again under tightened
// limits while it breaks one. A method is never held to limits that another method's overshoot
// tightened. `tokens_all` / `seconds_all` count every attempt.
SearchedMethod search_method(Run& run, const std::string& method, const Corpus& data,
                             const Importance& imp, const SearchSettings& settings,
                             const fs::path& arch_file, int64_t* tokens_all, double* seconds_all) {
  SearchedMethod m;
  m.method = method;
  SearchOutcome outcome;
  std::optional<LlamaModel> candidate;  // the pruned model of the last search
  auto search = [&](const Limits& lim) {
    outcome = search_step(method, run.teacher, imp, run.scenario, run.scenario_profile,
                          run.limits.searching(lim), data.calibration, run.opt.data.seq_len,
                          settings, &data.train);
    *tokens_all += outcome.search_tokens;
    *seconds_all += outcome.seconds;
    candidate = prune_step(run.teacher, imp, outcome.best.target).model;
    return candidate->config;
  };
  m.search_limits = run.limits.for_search;
  if (run.not_measured.empty() && run.opt.measure.fit_attempts > 0) {
    FitCallbacks cb;
    cb.search = search;
    cb.predict = [&](const ModelConfig& c) {
      return predict(c, run.scenario, run.scenario_profile);
    };
    cb.measure = [&](const ModelConfig& c) {
      // The pruned model that `search` left (its latency does not depend on the weights).
      if (!candidate || describe(candidate->config) != describe(c))
        throw InternalError("[compress] the fit to the measurement asked for an architecture "
                            "other than the searched candidate");
      log_info(fmt::format("[compress] {}: measuring the teacher and the searched architecture "
                           "in paired rounds ({})", method, run.scenario.engine));
      return std::move(run.measure_group({&*candidate}).front());
    };
    const std::vector<FitAttempt> attempts =
        fit_to_measurement(run.limits.as_written, run.limits.for_search, cb,
                           run.opt.measure.fit_attempts, run.opt.measure.fit_margin);
    const FitAttempt& fitted = fitted_attempt(attempts);
    if (&fitted != &attempts.back()) search(fitted.search_limits);  // the kept attempt
    m.search_limits = fitted.search_limits;
    m.fitted_rounds = fitted.rounds;
    for (const FitAttempt& a : attempts) m.fit_attempts.push_back(a.to_json());
  } else {
    search(run.limits.for_search);
  }
  m.target = outcome.best.target;
  m.search_tokens = outcome.search_tokens;
  m.search_seconds = outcome.seconds;
  m.candidates = int64_t(outcome.search.value("candidates", json::array()).size());
  m.summary = outcome.summary();
  m.arch_file = arch_file;
  // arch.json of the method; the "comparison" of every method is added when all have run.
  write_search_outputs(run.folder.path() / m.arch_file, outcome, run.scenario.name);
  return m;
}

}  // namespace

json SearchedMethod::to_json() const {
  return {{"method", method}, {"arch_file", arch_file.string()},
          {"target", config_to_hf_json(target)}, {"search_tokens", search_tokens},
          {"search_seconds", search_seconds}, {"candidates", candidates}, {"summary", summary},
          {"search_limits", search_limits.to_json()}, {"fit_attempts", fit_attempts}};
}

SearchedMethod SearchedMethod::from_json(const json& j, const std::string& where) {
  SearchedMethod m;
  try {
    m.method = field(j, "method", where).get<std::string>();
    m.arch_file = field(j, "arch_file", where).get<std::string>();
    m.target = config_from_hf_json(field(j, "target", where), where + " target");
    m.search_tokens = field(j, "search_tokens", where).get<int64_t>();
    m.search_seconds = field(j, "search_seconds", where).get<double>();
    m.candidates = field(j, "candidates", where).get<int64_t>();
    m.summary = field(j, "summary", where);
    m.search_limits = limits_from_json(field(j, "search_limits", where), where + " search_limits");
    m.fit_attempts = field(j, "fit_attempts", where);
  } catch (const json::exception& e) {
    throw FormatError(msg("compress", "{}: a field of the wrong type ({})", where, e.what()));
  }
  return m;
}

EvalOptions Run::eval_options() const {
  EvalOptions eo;
  eo.seq_len = opt.data.seq_len;
  eo.token_bytes = token_bytes ? &*token_bytes : nullptr;  // bits per byte
  eo.device = device;
  return eo;
}

std::vector<PairedRounds> Run::measure_group(const std::vector<const LlamaModel*>& students,
                                             std::vector<PairedRounds> priors) const {
  if (llamacpp_engine)
    return measure_paired_group_llamacpp(teacher, students, *gguf_vocab, scenario.workload,
                                         scenario.limits, opt.measure.rounds,
                                         folder.path() / ".llama_cpp_rounds", std::move(priors));
  // On the scenario's device: this CPU, or its GPU in a build with CUDA.
  const c10::Device dev = measurement_device(scenario);
  const LlamaModel t{teacher.config, to_device(teacher.config, teacher.weights, dev)};
  std::vector<LlamaModel> on_device;
  on_device.reserve(students.size());
  for (const LlamaModel* s : students)
    on_device.push_back(LlamaModel{s->config, to_device(s->config, s->weights, dev)});
  std::vector<const LlamaModel*> ptrs;
  for (const LlamaModel& s : on_device) ptrs.push_back(&s);
  return measure_paired_group(t, ptrs, scenario.workload, scenario.limits, opt.measure.rounds,
                              std::move(priors));
}

Run open_run(const CompressOptions& opt, std::optional<RunFolder> resumed) {
  init_torch_threads();
  const double t_start = now_s();
  std::vector<fs::path> inputs{opt.in.model_dir};
  for (const fs::path& p : {opt.in.profile_path, opt.in.data_dir, opt.in.data_text})
    if (!p.empty()) inputs.push_back(p);
  check_not_overwriting_inputs(inputs, opt.in.out_dir, "compress");
  Scenario scenario = find_scenario(opt.in.scenario);
  if (!opt.in.data_dir.empty() && !opt.in.data_text.empty())
    throw ConfigError(msg("compress", "give at most one of --data (an earlier run's token files) "
                          "and --data-text (your text)"));
  const PairedOptions& r = opt.measure.rounds;
  if (r.min_rounds < 2 || r.max_rounds < r.min_rounds)
    throw ConfigError(msg("compress", "--measure-rounds {} and --max-measure-rounds {}: expected "
                          "2 <= measure-rounds <= max-measure-rounds", r.min_rounds, r.max_rounds));
  // The blockwise start refuses less than one step, which it would say only after the search.
  const int64_t bld_step = bld_step_tokens(opt);
  if (opt.distill.bld_tokens < -1 ||
      (opt.distill.bld_tokens > 0 && opt.distill.bld_tokens < bld_step))
    throw ConfigError(msg("compress", "--distill-bld-tokens {}: expected 0 (off), -1 (a sixteenth "
                          "of --distill-tokens) or at least one step of {} x {} = {} tokens",
                          opt.distill.bld_tokens, BldOptions{}.batch_size, opt.data.seq_len,
                          bld_step));
  if (opt.search.autocompress_judge != "halving" && opt.search.autocompress_judge != "blockwise" &&
      opt.search.autocompress_judge != "retraining")
    throw ConfigError(msg("compress", "--autocompress-judge: expected halving, blockwise or "
                          "retraining, found '{}'", opt.search.autocompress_judge));
  if (!opt.in.data_dir.empty()) check_data_dir(opt.in.data_dir);
  if (!opt.in.data_text.empty() && !fs::exists(opt.in.data_text))
    throw ConfigError(msg("compress", "--data-text {}: no such file or folder",
                          opt.in.data_text.string()));
  const c10::Device device = parse_device(opt.compute.device);
  const Precision precision = parse_precision(opt.compute.precision, device);
  LlamaModel teacher = load_checkpoint(opt.in.model_dir);
  // Refused before minutes of profiling and sampling (importance and distill would refuse too).
  require_finite(teacher, opt.in.model_dir.string(), "compress", opt.in.allow_nonfinite);
  // Up front (before the run folder exists), on a GPU: the search's supernet pass (the teacher
  // with every layer's activations) must fit; the distillation is checked again with its
  // student when it starts.
  check_fits_device(forward_memory(teacher.config, SearchSettings{}.autocompress_batch_size,
                                   SearchSettings{}.autocompress_seq_len, /*with_grad=*/true,
                                   precision),
                    device, "compress");
  log_info(fmt::format("[compress] teacher {} ({} parameters), scenario {}",
                       describe(teacher.config), teacher.config.num_parameters(), scenario.name));
  // The tokenizer is read now, so that a bad file is refused before minutes of profiling (the
  // data, bits per byte, the tasks and the GGUF export read it later).
  for (const char* f : {"tokenizer.json", "tokenizer.bin", "tokenizer.model"})
    if (fs::exists(opt.in.model_dir / f)) {
      load_tokenizer(opt.in.model_dir, teacher.config.vocab_size);
      break;
    }
  const bool llamacpp_engine = scenario.engine == "llama.cpp" && scenario.device == "cpu";
  std::optional<GgufVocab> vocab;
  if (llamacpp_engine) vocab = vocab_from_checkpoint(opt.in.model_dir, teacher.config.vocab_size);
  RunFolder folder = resumed ? std::move(*resumed)
                             : RunFolder::create(opt.in.out_dir, opt.to_json());
  Run run{opt, std::move(folder)};
  run.t_start = t_start;
  run.device = device;
  run.precision = precision;
  log_info(fmt::format("[compress] computing on {} in {}", device_name(device),
                       describe_precision(precision)));
  run.teacher = std::move(teacher);
  run.scenario = std::move(scenario);
  run.llamacpp_engine = llamacpp_engine;
  run.gguf_vocab = std::move(vocab);
  run.token_bytes = token_bytes_of_checkpoint(opt.in.model_dir, run.teacher.config.vocab_size);
  return run;
}

void stage_profile(Run& run) {
  const double t0 = now_s();
  const fs::path file = run.folder.path() / "profile.json";
  const bool done = run.folder.completed("profile").has_value();
  if (done) {
    run.profile = load_profile(file);
  } else if (!run.opt.in.profile_path.empty()) {
    run.profile = load_profile(run.opt.in.profile_path);
  } else {
    // The latency correction is fitted on real forwards of calibration prunes (docs/design.md,
    // "The fitted correction"); a scenario for another device uses this profile only for the
    // llama.cpp stage, and a scenario served by llama.cpp has its own calibration (below).
    ProfileOptions po;
    po.calibrate = run.scenario.device == "cpu" && !run.llamacpp_engine;
    run.profile = run_profile({run.teacher.config}, profiled_workload(run.scenario), po);
  }
  use_profile_gemm_backend(run.profile);  // the GEMM library its tables were timed with
  // A reused profile must be of this machine: its tables cost this CPU's scenario, and the
  // llama.cpp stage's prediction runs here.
  if (done || !run.opt.in.profile_path.empty()) check_profile_is_this_machine(run.profile);
  // The scenario's costs come from this profile only when it targets this device; a GPU
  // scenario is costed by the roofline of its spec.
  run.scenario_profile =
      run.profile.identity.device == run.scenario.device ? &run.profile : nullptr;
  if (done) return;
  // llama.cpp serving on this CPU: llama.cpp itself is measured (pipeline/llamacpp_engine.h: its
  // own correction and memory model, at the scenario's threads and weight type) unless the
  // profile already holds that calibration.
  if (run.llamacpp_engine && !run.profile.engine_calibration(run.scenario)) {
    LlamaCppCalibrationOptions lo;
    lo.scratch = run.folder.path() / ".llama_cpp_calibration";
    run.profile.set_engine_calibration(
        calibrate_llamacpp(run.profile, run.teacher.config, *run.gguf_vocab, run.scenario, lo));
  }
  save_profile(file, run.profile);
  run.folder.complete("profile", {"profile.json"}, json::object(), since(t0));
}

Corpus stage_data(Run& run) {
  const double t0 = now_s();
  const fs::path dir = run.folder.path() / "data";
  const int64_t V = run.teacher.config.vocab_size;
  if (std::optional<json> done = run.folder.completed("data")) {
    Corpus c = read_token_files(run.teacher.config, run.opt.in.model_dir, dir);
    c.source = field(*done, "source", "stages.json data");
    c.overlap_removed = field(*done, "overlap_removed", "stages.json data").get<int64_t>();
    return c;
  }
  Corpus c;
  if (!run.opt.in.data_text.empty()) {
    c = text_data(run.teacher.config, run.opt);
  } else if (!run.opt.in.data_dir.empty()) {
    c = read_token_files(run.teacher.config, run.opt.in.model_dir, run.opt.in.data_dir);
    c.source = {{"source", "token files"}, {"path", run.opt.in.data_dir.string()}};
  } else {
    c = sample_data(run.teacher, run.opt.data, run.device);
  }
  write_token_files(c, V, model_tokenizer_fingerprint(run.opt.in.model_dir, V), dir);
  run.folder.complete("data", {"data"},
                      {{"source", c.source}, {"overlap_removed", c.overlap_removed}}, since(t0));
  return c;
}

void measure_teacher(Run& run) {
  const double t0 = now_s();
  fs::path llamacpp_script;
  run.not_measured = run.llamacpp_engine ? llamacpp_client("measure.mjs", &llamacpp_script)
                                         : not_measurable_reason(run.scenario);
  run.teacher_measured.reset();
  if (run.not_measured.empty() && run.llamacpp_engine) {
    LlamaCppRunOptions ro;
    const int64_t threads = run.scenario.workload.threads;
    ro.threads = threads > 0 ? int(threads) : cpu_cores();
    ro.rounds = run.opt.measure.rounds.min_rounds;
    const fs::path scratch = run.folder.path() / ".llama_cpp_teacher";
    run.teacher_measured = measure_llamacpp_models({&run.teacher}, *run.gguf_vocab,
                                                   run.scenario.workload, ro, scratch)
                               .models.front()
                               .measured;
    fs::remove_all(scratch);
  } else if (run.not_measured.empty()) {
    // On the scenario's device: this CPU, or its GPU in a build with CUDA.
    const c10::Device dev = measurement_device(run.scenario);
    run.teacher_measured = measure_native(
        LlamaModel{run.teacher.config, to_device(run.teacher.config, run.teacher.weights, dev)},
        run.scenario.workload, run.opt.measure.rounds.min_rounds, /*show_progress=*/true);
  } else {
    log_warn("[compress] costs are predicted only, nothing is measured: " + run.not_measured);
  }
  run.teacher_predicted = predict(run.teacher.config, run.scenario, run.scenario_profile);
  run.limits = RunLimits::resolve(
      run.scenario.limits, run.opt.search.safety_margin, run.teacher_predicted,
      run.teacher_measured ? std::optional<CostEstimate>(run.teacher_measured->as_estimate())
                           : std::nullopt);
  log_info(fmt::format("[compress] measure_teacher done in {:.1f} s", since(t0)));
}

Importance stage_importance(Run& run, const Corpus& data) {
  const double t0 = now_s();
  const fs::path file = run.folder.path() / "importance.safetensors";
  if (run.folder.completed("importance")) {
    Importance imp = load_importance(file);
    check_importance_matches(run.teacher.config, imp, "compress");
    return imp;
  }
  ImportanceStep is;
  is.seq_len = run.opt.data.seq_len;
  is.importance.allow_nonfinite = run.opt.in.allow_nonfinite;
  is.importance.device = run.device;
  Importance imp = importance_step(run.teacher, data.calibration, is, "compress");
  save_importance(file, imp);
  run.folder.complete("importance", {"importance.safetensors"}, json::object(), since(t0));
  return imp;
}

Searches stage_search(Run& run, const Corpus& data, const Importance& imp) {
  const double t0 = now_s();
  Searches out;
  std::vector<SearchedMethod>& methods = out.methods;
  if (std::optional<json> done = run.folder.completed("search")) {
    const std::string where = "stages.json search";
    const json& list = field(*done, "methods", where);
    for (size_t i = 0; i < list.size(); ++i)
      methods.push_back(SearchedMethod::from_json(list[i], fmt::format("{}.methods[{}]", where, i)));
    out.tokens_all_attempts = field(*done, "search_tokens_all_attempts", where).get<int64_t>();
    out.seconds_all_attempts = field(*done, "search_seconds_all_attempts", where).get<double>();
    return out;
  }
  const SearchSettings settings = search_settings(run);
  int64_t& tokens_all = out.tokens_all_attempts;
  double& seconds_all = out.seconds_all_attempts;
  const std::vector<std::string> names = search_methods(run.opt.search.method);
  for (size_t i = 0; i < names.size(); ++i)
    methods.push_back(search_method(run, names[i], data, imp, settings,
                                    i == 0 ? fs::path("arch.json")
                                           : method_arch_path("arch.json", names[i]),
                                    &tokens_all, &seconds_all));
  // Every arch file carries the comparison of all methods' searches.
  json rows = json::array();
  for (const SearchedMethod& m : methods) rows.push_back(m.summary);
  std::vector<std::string> files;
  json list = json::array();
  for (const SearchedMethod& m : methods) {
    const fs::path arch = run.folder.path() / m.arch_file;
    json j = read_arch_json(arch);
    j["comparison"] = rows;
    write_json_file(arch, j);
    files.push_back(m.arch_file.string());
    list.push_back(m.to_json());
  }
  run.folder.complete("search", files,
                      {{"methods", list}, {"search_tokens_all_attempts", tokens_all},
                       {"search_seconds_all_attempts", seconds_all}},
                      since(t0));
  return out;
}

FinishedMethod finish_method(Run& run, const Corpus& data, const Importance& imp,
                             const SearchedMethod& m, bool main) {
  const double t0 = now_s();
  const std::string stage = "finish:" + m.method;
  FinishedMethod f;
  f.method = m.method;
  f.model_path = main ? "model" : "model-" + m.method;
  const std::string log_name = main ? "distill_log.csv" : "distill_log." + m.method + ".csv";
  const std::string tasks_name = main ? "tasks" : "tasks-" + m.method;
  const fs::path dir = run.folder.path();
  if (std::optional<json> done = run.folder.completed(stage)) {
    f.student = load_checkpoint(dir / f.model_path);
    const std::string where = "stages.json " + stage;
    f.eval_after_prune = field(*done, "eval_after_prune", where);
    f.eval = field(*done, "eval", where);
    f.distill = field(*done, "distill", where);
    f.tasks = field(*done, "tasks", where);
    f.reload_max_abs_diff = field(*done, "reload_max_abs_diff", where).get<double>();
    return f;
  }
  log_info(fmt::format("[compress] {}: prune, distill, evaluate and save {}", m.method,
                       describe(drop_removed_blocks(m.target))));
  PrunedModel pruned = prune_step(run.teacher, imp, m.target);
  f.student = std::move(pruned.model);
  f.student.weights = clone(f.student.config, f.student.weights);
  const EvalOptions eo = run.eval_options();
  f.eval_after_prune = eval_step(f.student, &run.teacher, data.heldout, eo).to_json();
  log_info(fmt::format("[compress] {}: prune done (KL to the teacher {:.4f}); distilling",
                       m.method, f.eval_after_prune.value("kl_to_teacher", 0.0)));

  DistillOptions dopt = distill_options(run, run.opt.distill.tokens);
  dopt.log_path = dir / log_name;
  dopt.hidden_loss_weight = run.opt.distill.hidden_loss_weight;
  dopt.hidden_map = std::move(pruned.map);
  // A run killed inside the distillation resumes from its last checkpoint.
  dopt.state_dir = dir / (".distill_state-" + m.method);
  dopt.resume = true;
  // AutoCompress's chosen finalist was retrained as this run's first steps, after a blockwise
  // local distillation: its kept state is where this run continues (the same steps again would
  // give the same model).
  std::optional<RetrainedState> continued;
  const fs::path continued_record = dopt.state_dir / "continued_retraining.json";
  if (m.method == "autocompress") {
    continued = adopt_retraining_state(dir / kRetrainStateDir, f.student.config,
                                       dopt.token_budget, dopt.state_dir);
    if (continued) {
      write_json_file(continued_record, {{"distill_tokens", continued->distill_tokens},
                                         {"bld_tokens", continued->bld_tokens}});
    } else if (fs::exists(continued_record)) {  // a resumed run that had continued it
      const json j = read_json_file(continued_record);
      continued = RetrainedState{j.at("distill_tokens").get<int64_t>(),
                                 j.at("bld_tokens").get<int64_t>()};
    }
  }
  fs::remove_all(dir / kRetrainStateDir);
  if (continued && continued->distill_tokens > 0)
    log_info(fmt::format("[compress] {}: the distillation continues the chosen finalist's "
                         "retraining ({} tokens, after a blockwise start of {} tokens)",
                         m.method, continued->distill_tokens, continued->bld_tokens));
  else if (continued)
    log_info(fmt::format("[compress] {}: the distillation starts from the chosen finalist's "
                         "blockwise start ({} tokens), which judged it", m.method,
                         continued->bld_tokens));
  // Without it, the final run starts as the finalists did: a blockwise local distillation, then
  // the schedule from its first step. Every method's final run does: the final recipe is the
  // same for every architecture, so that the comparison is of the architectures (Minitron's
  // own protocol, arXiv 2407.14679, has none: with it, Minitron's shapes ended 0.026-0.057 KL
  // better, docs/benchmarks.md, "with the same final recipe"). A resumed run's state already
  // holds the student after it.
  int64_t bld_tokens = 0;
  const int64_t bld_budget = distill_bld_tokens(run.opt);
  if (!continued && bld_budget > 0) {
    const BldOptions bo = bld_options_for(dopt, bld_budget);
    const int64_t per_step = bo.batch_size * bo.seq_len;
    bld_tokens = bo.token_budget / per_step * per_step;
    if (!fs::exists(dopt.state_dir / kDistillStateFile)) {
      log_info(fmt::format("[compress] {}: blockwise local distillation, {} tokens", m.method,
                           bld_tokens));
      blockwise_local_distill(run.teacher, f.student, *dopt.hidden_map, data.train, bo);
    }
  }
  const DistillResult d =
      distill_step(run.teacher, f.student, data.train, dopt, "compress",
                   fmt::format("autocompress compress --resume {} continues from it",
                               run.opt.in.out_dir.string()));
  fs::remove_all(dopt.state_dir);
  f.distill = {{"tokens", d.tokens}, {"steps", d.steps_done}, {"skipped_steps", d.skipped_steps},
               {"bld_tokens", bld_tokens},
               {"continued_retraining_tokens", continued ? continued->distill_tokens : 0},
               {"continued_bld_tokens", continued ? continued->bld_tokens : 0},
               {"wall_s", d.wall_s},
               {"first_loss", d.loss_curve.empty() ? 0.0 : d.loss_curve.front()},
               {"last_loss", d.loss_curve.empty() ? 0.0 : d.loss_curve.back()},
               {"device", device_name(dopt.device)},
               {"device_peak_bytes", d.device_peak_bytes}};
  f.eval = eval_step(f.student, &run.teacher, data.heldout, eo).to_json();

  // In-domain tasks (cloze, story ending, character) from the held-out stories; the same items
  // for every method, whose teacher scores the main result's row holds.
  StoryTasksStageOptions topt;
  topt.teacher_dir = run.opt.in.model_dir;
  topt.seed = run.opt.data.seed;
  topt.max_items = run.opt.data.task_items;
  topt.out_dir = dir / tasks_name;
  topt.files_prefix = tasks_name;
  topt.score_teacher = main;
  // Scored on the run's device (the same tensors on the CPU).
  f.tasks = run_story_tasks_stage(
      LlamaModel{run.teacher.config, to_device(run.teacher.config, run.teacher.weights, run.device)},
      LlamaModel{f.student.config, to_device(f.student.config, f.student.weights, run.device)},
      data.heldout.ids(), topt);

  fs::create_directories(dir / f.model_path);
  save_checkpoint(dir / f.model_path, f.student, run.opt.in.model_dir);
  f.reload_max_abs_diff = export_roundtrip_diff(dir / f.model_path, f.student,
                                                data.heldout.windows(0, 1, run.opt.data.seq_len));
  if (f.reload_max_abs_diff != 0)
    throw InternalError(fmt::format("[compress] the exported checkpoint does not reload to the "
                                    "same logits (max diff {})", f.reload_max_abs_diff));
  std::vector<std::string> files{f.model_path, log_name};
  if (fs::exists(dir / tasks_name)) files.push_back(tasks_name);
  run.folder.complete(stage, files,
                      {{"eval_after_prune", f.eval_after_prune}, {"eval", f.eval},
                       {"distill", f.distill}, {"tasks", f.tasks},
                       {"reload_max_abs_diff", f.reload_max_abs_diff}},
                      since(t0));
  return f;
}

json stage_eval_teacher(Run& run, const Corpus& data) {
  const double t0 = now_s();
  if (std::optional<json> done = run.folder.completed("eval_teacher"))
    return field(*done, "eval", "stages.json eval_teacher");
  const json e = eval_step(run.teacher, nullptr, data.heldout, run.eval_options()).to_json();
  run.folder.complete("eval_teacher", {}, {{"eval", e}}, since(t0));
  return e;
}

json stage_export(Run& run, const FinishedMethod& main) {
  const double t0 = now_s();
  if (std::optional<json> done = run.folder.completed("export")) return *done;
  const fs::path dir = run.folder.path();
  std::vector<std::string> files;
  // Served by llama.cpp: the GGUF of the scenario's weight type is what the user runs.
  json gguf = nullptr;
  if (run.llamacpp_engine) {
    // What `autocompress export --format gguf` writes from the saved checkpoint (with its reload
    // check); the engine's own check follows.
    const ExportOptions eo =
        ExportOptions::gguf_only(gguf_type_for(run.scenario.workload.weight_dtype));
    export_model(dir / main.model_path, dir / "gguf", eo);
    gguf = {{"path", "gguf/model.gguf"}, {"type", ggml_type_name(eo.dtype)},
            {"bytes", int64_t(fs::file_size(dir / "gguf" / "model.gguf"))}};
    files.push_back("gguf");
  }
  // The files as the scenario's engine loads them (export/engine_loaders.h, written from each
  // loader's source): the search proposed only what its rules allow; this reads the files.
  // (llama.cpp on another device: no GGUF is written here.)
  json engine_check = nullptr;
  const std::string& engine = run.scenario.engine;
  if (engine == "vllm" || engine == "tensorrt-llm" || run.llamacpp_engine) {
    const fs::path f = run.llamacpp_engine ? dir / "gguf" / "model.gguf" : dir / main.model_path;
    const std::vector<std::string> errors =
        engine_load_errors(engine, f, run.scenario.workload.tensor_parallel);
    engine_check = {{"engine", engine}, {"loads", errors.empty()}, {"errors", errors}};
    if (!errors.empty())
      log_warn(fmt::format("[compress] {} would not load {}: {}", engine, f.string(),
                           fmt::join(errors, "; ")));
  }
  const json result = {{"gguf", gguf}, {"engine_check", engine_check}};
  run.folder.complete("export", files, result, since(t0));
  return result;
}

MeasuredModels stage_measure(Run& run, const std::vector<SearchedMethod>& searched,
                             const std::vector<FinishedMethod>& finished) {
  const double t0 = now_s();
  MeasuredModels out;
  if (!run.not_measured.empty()) return out;
  auto adopt = [&](const json& r) {
    out.teacher = field(r, "teacher", "stages.json measure");
    run.limits.measured = limits_from_json(field(r, "limits", "stages.json measure"),
                                           "stages.json measure limits");
    for (const json& m : field(r, "methods", "stages.json measure"))
      out.methods.push_back({m.at("measured"), m.at("verdict"), m.at("failures").get<std::string>()});
  };
  if (std::optional<json> done = run.folder.completed("measure")) {
    adopt(*done);
    return out;
  }
  // Every model beside the teacher in the same rounds (hardware/paired_measure.h): each limit is
  // judged on the per-round ratios with a 95% interval, so that a machine's drift between
  // minutes cannot flip a verdict, and no method is measured in a quieter minute than another.
  // The fit loop's rounds of the same architecture (its latency does not depend on the weights'
  // values) are pooled with these.
  std::vector<const LlamaModel*> students;
  std::vector<PairedRounds> priors;
  for (size_t i = 0; i < finished.size(); ++i) {
    students.push_back(&finished[i].student);
    const bool same = searched[i].fitted_rounds &&
                      describe(drop_removed_blocks(searched[i].target)) ==
                          describe(finished[i].student.config);
    priors.push_back(same ? *searched[i].fitted_rounds : PairedRounds{});
  }
  log_info(fmt::format("[compress] measuring the teacher and {} compressed model(s) in paired "
                       "rounds ({} from the fit before distillation)", students.size(),
                       priors.front().rounds()));
  const std::vector<PairedRounds> rounds = run.measure_group(students, std::move(priors));
  const Measurement teacher = rounds.front().teacher_pooled();
  json methods = json::array();
  for (const PairedRounds& r : rounds) {
    const PairedVerdict v = judge_paired(r, run.scenario.limits);
    methods.push_back({{"measured", r.student_pooled().to_json()}, {"verdict", v.to_json()},
                       {"failures", v.failures()}});
  }
  const json result = {
      {"teacher", teacher.to_json()},
      {"limits", run.limits.measured_against(teacher.as_estimate()).to_json()},
      {"methods", methods}};
  run.folder.complete("measure", {}, result, since(t0));
  adopt(result);
  return out;
}

json stage_llamacpp(Run& run, const FinishedMethod& main) {
  const double t0 = now_s();
  if (std::optional<json> done = run.folder.completed("llama_cpp"))
    return field(*done, "llama_cpp", "stages.json llama_cpp");
  LlamaCppStageOptions lopt;
  lopt.tokenizer_dir = run.opt.in.model_dir;
  lopt.work_dir = run.folder.path() / ".llama_cpp";
  const json l = run_llamacpp_stage(run.teacher, main.student, run.scenario, &run.profile, lopt);
  run.folder.complete("llama_cpp", {}, {{"llama_cpp", l}}, since(t0));
  return l;
}

}  // namespace ac
