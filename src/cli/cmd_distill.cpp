// `autocompress distill`: distills a (pruned) student toward its teacher on token data and
// writes the distilled checkpoint atomically, with its step log. Resumable: the state lives in
// OUT.state (or --state-dir) until the output is written; Ctrl-C saves it at the next step.
// Data-parallel: start the same command once per rank with --world-size, --rank and one
// --init-method (file:///shared/path or tcp://host:port); rank 0 writes the state and output.
// A Nemotron-H teacher and student (config.json's model_type nemotron_h / nemotron_h_puzzle), or
// a Qwen3-MoE / Mixtral pair, are distilled on their logits by the same loop (distill/distill.h,
// model/trainable.h); the options that read the Llama forward's hidden states are refused for
// them by name.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/checkpoint_kind.h"
#include "cli/command.h"
#include "cli/data_options.h"
#include "cli/device_options.h"
#include "cli/flag_checks.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "distill/bld.h"
#include "distill/data_parallel.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "export/moe_hf_export.h"
#include "export/nemotron_h_export.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/text_tokenizer.h"
#include "model/finite.h"
#include "model/trainable.h"
#include "pipeline/steps.h"
#include "prune/pruning_map.h"

namespace ac::cli {
namespace {

struct DistillArgs {
  std::string teacher, student, out, state_dir;
  DataArgs data;
  json data_source;  // what --data read (distill.json)
  std::string pruning_map;  // default: STUDENT/pruning_map.json
  bool hidden_plain_mse = false;
  std::string init_method;
  int world_size = 1, rank = 0;
  double rendezvous_timeout_s = 300;
  DistillOptions opt;
  DeviceArgs compute;
  std::string eval_data;             // held-out data of the learning curve (--eval-data)
  std::vector<int64_t> eval_at;      // tokens at which it is evaluated (--eval-at-tokens)
  int64_t eval_batches = -1;         // batches of 8 windows per evaluation (< 0: all)
  BldOptions bld;                    // --bld-*: blockwise local distillation first
  bool bld_on = false;               // --bld-tokens > 0
};

const std::string kEvalLogHeader = "step,tokens,kl_to_teacher,mean_nll,top1_agreement,wall_s\n";

// The rows of an eval_log.csv (header dropped) whose step is below `step`: a resumed run goes
// through the steps after its saved state again, and their rows are written anew.
std::string eval_rows_before(const fs::path& log, int64_t step) {
  std::string kept;
  if (!fs::exists(log)) return kept;
  std::istringstream in(read_file(log));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line))
    if (!line.empty() && std::stoll(line.substr(0, line.find(','))) < step) kept += line + "\n";
  return kept;
}

// --eval-at-tokens: the student evaluated against the teacher on the held-out data after the
// step that reaches each token count, one row of OUT.state/eval_log.csv each (the learning curve
// bench/ranking.sh reads).
void add_learning_curve(DistillArgs& a, const LlamaModel& teacher,
                        const std::shared_ptr<TokenDataset>& heldout) {
  const fs::path log = a.opt.state_dir / "eval_log.csv";
  write_file_atomic(log, kEvalLogHeader + (a.opt.resume ? eval_rows_before(log, INT64_MAX) : ""));
  a.opt.eval_at_tokens = a.eval_at;
  EvalOptions eo;
  eo.seq_len = a.opt.seq_len;
  eo.max_batches = a.eval_batches;
  eo.show_progress = false;
  eo.device = a.opt.device;
  a.opt.on_eval = [&teacher, heldout, eo, log](int64_t step, int64_t tokens,
                                               const LlamaModel& student) {
    EvalResult r = evaluate(student, &teacher, *heldout, eo);
    write_file_atomic(log, kEvalLogHeader + eval_rows_before(log, step) +
                               fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.3f}\n", step, tokens,
                                           r.kl_to_teacher, r.mean_nll, r.top1_agreement,
                                           r.wall_s));
    log_info(fmt::format("[distill] held-out at {} tokens: KL {:.4f}, top-1 {:.4f}", tokens,
                         r.kl_to_teacher, r.top1_agreement));
  };
}

// --device of a rank: "cuda" (no index) in a data-parallel run is this rank's GPU,
// cuda:(rank mod the visible GPUs), one per process as NCCL expects; an explicit cuda:N stays.
c10::Device rank_device(const DistillArgs& a) {
  c10::Device d = a.compute.resolve();
  if (d.is_cuda() && a.compute.device == "cuda" && a.world_size > 1)
    d = c10::Device(c10::kCUDA, c10::DeviceIndex(a.rank % std::max(1, cuda_device_count())));
  return d;
}

/// Teacher and student vocabularies differ: allowed when one tokenizer's token table is a
/// prefix of the other's (compared by the bytes each id stands for, TextTokenizer::token_bytes);
/// returns the shared id count. Throws ConfigError naming the first differing id otherwise.
int64_t shared_vocab_size(const DistillArgs& a, const ModelConfig& teacher,
                          const ModelConfig& student) {
  int64_t vt = teacher.vocab_size, vs = student.vocab_size;
  const std::unique_ptr<TextTokenizer> tt = load_tokenizer(a.teacher, vt);
  const std::unique_ptr<TextTokenizer> ts = load_tokenizer(a.student, vs);
  const int64_t n = std::min({vt, vs, tt->vocab_size(), ts->vocab_size()});
  for (int64_t i = 0; i < n; ++i)
    if (tt->token_bytes(i) != ts->token_bytes(i))
      throw ConfigError(msg("distill", "teacher {} (vocab {}) and student {} (vocab {}): token "
                            "{} is '{}' in one and '{}' in the other; distillation needs the "
                            "same tokenizer or one token table that is a prefix of the other",
                            a.teacher, vt, a.student, vs, i, tt->token_bytes(i),
                            ts->token_bytes(i)));
  return std::min(vt, vs);
}

// The student's checkpoint files into the staging folder `dir`, in its kind's layout.
void save_student(const fs::path& dir, const LlamaModel& m, const fs::path& tokenizer_from) {
  save_checkpoint(dir, m, tokenizer_from);
}
void save_student(const fs::path& dir, const NemotronHModel& m, const fs::path& tokenizer_from) {
  write_nemotron_h_files(dir, m, tokenizer_from);
}
void save_student(const fs::path& dir, const MoeModel& m, const fs::path& tokenizer_from) {
  write_moe_files(dir, m, tokenizer_from);
}

template <class M>
void write_output(const DistillArgs& a, const M& student, const DistillResult& r) {
  StagingDir staging(a.out);
  save_student(staging.path(), student, /*tokenizer_from=*/a.student);
  if (fs::exists(a.opt.log_path)) fs::copy_file(a.opt.log_path, staging.path() / "distill_log.csv");
  if (fs::path bld = a.opt.state_dir / "bld.json"; fs::exists(bld))
    fs::copy_file(bld, staging.path() / "bld.json");
  if (fs::path eval_log = a.opt.state_dir / "eval_log.csv"; fs::exists(eval_log))
    fs::copy_file(eval_log, staging.path() / "eval_log.csv");
  // The distilled model is still the teacher's slice: keep the map beside it.
  if (fs::path map = fs::path(a.student) / kPruningMapFile; fs::exists(map))
    fs::copy_file(map, staging.path() / kPruningMapFile);
  double last = r.loss_curve.empty() ? NAN : r.loss_curve.back();
  nlohmann::json j = {{"teacher", a.teacher},        {"student", a.student},
                      {"data", a.data_source},              {"steps", r.steps_done},
                      {"tokens", r.tokens},          {"skipped_steps", r.skipped_steps},
                      {"wall_s", r.wall_s},          {"final_loss", last},
                      {"tokens_per_s", r.tokens / std::max(r.wall_s, 1e-9)},
                      {"batch_size", a.opt.batch_size}, {"seq_len", a.opt.seq_len},
                      {"grad_accum", a.opt.grad_accum}, {"lr", a.opt.lr},
                      {"min_lr", a.opt.min_lr},      {"temperature", a.opt.temperature},
                      {"ce_weight", a.opt.ce_weight}, {"seed", a.opt.seed},
                      {"hidden_loss_weight", a.opt.hidden_loss_weight},
                      {"hidden_loss_normalize", a.opt.hidden_loss_normalize},
                      {"world_size", a.world_size},  {"restores", r.restores},
                      {"lr_scale", r.lr_scale},      {"shared_vocab", a.opt.shared_vocab},
                      {"device", device_name(a.opt.device)},
                      {"precision", precision_name(a.opt.precision)}};
  write_json_file(staging.path() / "distill.json", j);
  staging.commit();
}

// --bld-tokens: blockwise local distillation of the changed blocks (distill/bld.h) before the
// distillation, on the same data; its per-block losses go to OUT.state/bld.json (then OUT/).
void run_bld(DistillArgs& a, const LlamaModel& teacher, LlamaModel& student,
             const TokenDataset& data) {
  a.bld.device = a.opt.device;
  a.bld.seq_len = a.opt.seq_len;
  a.bld.seed = a.opt.seed;
  a.bld.show_progress = a.opt.show_progress;
  BldResult b = blockwise_local_distill(teacher, student, *a.opt.hidden_map, data, a.bld);
  json blocks = json::array();
  for (const BldBlock& k : b.blocks) {
    blocks.push_back({{"student_layer", k.student_layer}, {"teacher_layers", {k.teacher_first, k.teacher_end}},
                      {"loss_before", k.loss_before}, {"loss_after", k.loss_after}});
    log_info(fmt::format("[distill] bld: layer {} (teacher [{}, {})): block loss {:.4f} -> {:.4f}",
                         k.student_layer, k.teacher_first, k.teacher_end, k.loss_before,
                         k.loss_after));
  }
  write_json_file(a.opt.state_dir / "bld.json",
                  {{"tokens", b.tokens}, {"steps", b.steps}, {"batch_size", a.bld.batch_size},
                   {"seq_len", a.bld.seq_len}, {"lr", a.bld.lr}, {"min_lr", a.bld.min_lr},
                   {"wall_s", b.wall_s}, {"blocks", blocks}});
  log_info(fmt::format("[distill] bld: {} of {} blocks trained on {} tokens in {:.1f} s",
                       b.blocks.size(), student.config.num_layers(), b.tokens, b.wall_s));
}

// The state folder of a run, made here when absent and removed again if the run stops before
// it saved any state (a refused option, unreadable data, a failed rendezvous): a refused distill
// leaves nothing behind, while a stopped one keeps what --resume needs. Only the rank that
// writes the state (`owner`, rank 0) removes it: the others may end before it saves.
class StateDirGuard {
 public:
  StateDirGuard(fs::path dir, bool owner)
      : dir_(std::move(dir)), made_here_(owner && !fs::exists(dir_)) {
    fs::create_directories(dir_);
  }
  ~StateDirGuard() {
    std::error_code ec;
    if (made_here_ && fs::exists(dir_, ec) && !fs::exists(dir_ / kDistillStateFile, ec))
      fs::remove_all(dir_, ec);
  }
  StateDirGuard(const StateDirGuard&) = delete;
  StateDirGuard& operator=(const StateDirGuard&) = delete;

 private:
  fs::path dir_;
  bool made_here_;
};

// --world-size > 1: this rank joins the group (null for one process).
std::unique_ptr<DataParallel> start_parallel(DistillArgs& a) {
  if (a.world_size <= 1) return nullptr;
  if (a.init_method.empty())
    throw ConfigError(msg("distill", "--world-size {} needs --init-method (file:///path or "
                          "tcp://host:port)", a.world_size));
  auto parallel = std::make_unique<DataParallel>(a.init_method, a.rank, a.world_size,
                                                 a.rendezvous_timeout_s, a.opt.device);
  a.opt.parallel = parallel.get();
  if (a.rank != 0) a.opt.show_progress = false;
  return parallel;
}

// The options that read the Llama forward's hidden states or its learning-curve hook
// (distill/distill.h refuses them for the other kinds), each refused by its flag before anything
// is loaded or written; and a student of another kind than the teacher's.
template <class M>
void refuse_for_kind(const DistillArgs& a, const CheckpointKind<M>& kind) {
  std::vector<std::string> why;
  if (a.opt.hidden_loss_weight > 0)
    why.push_back("--hidden-loss-weight: the hidden-state loss reads the Llama forward's hidden "
                  "states through pruning_map.json; this student is distilled on its logits");
  if (a.bld.token_budget > 0)
    why.push_back("--bld-tokens: the blockwise local distillation trains Llama-family blocks "
                  "through pruning_map.json");
  if (!a.pruning_map.empty())
    why.push_back("--pruning-map: read by the hidden-state loss and --bld-tokens only; `prune` "
                  "of this kind writes none");
  if (!a.eval_at.empty() || !a.eval_data.empty())
    why.push_back("--eval-at-tokens / --eval-data: the learning curve evaluates a Llama-family "
                  "student; run `eval` on the output instead");
  if (!why.empty())
    throw ConfigError(msg("distill", "{} is a {} checkpoint:\n  - {}", a.teacher, kind.name,
                          fmt::join(why, "\n  - ")));
  if (!kind.is_kind(a.student))
    throw ConfigError(msg("distill", "--teacher {} is a {} checkpoint and --student {} is not: "
                          "teacher and student must be of one kind", a.teacher, kind.name,
                          a.student));
}

// A teacher and student of another kind: the same loop on their logits (distill/distill.h).
template <class M>
void run_kind(DistillArgs& a, const CheckpointKind<M>& kind) {
  refuse_for_kind(a, kind);
  a.opt.device = rank_device(a);
  a.opt.precision = a.compute.resolve_precision(a.opt.device);
  const M teacher = kind.load(a.teacher);
  M student = kind.load(a.student);
  check_seq_len_fits(a.opt.seq_len, teacher.config, a.teacher, "distill");
  check_seq_len_fits(a.opt.seq_len, student.config, a.student, "distill");
  require_finite(teacher, a.teacher, "distill", a.opt.allow_nonfinite);
  require_finite(student, a.student, "distill", a.opt.allow_nonfinite);
  if (teacher.config.vocab_size != student.config.vocab_size)
    a.opt.shared_vocab = shared_vocab_size(a, teacher.config, student.config);
  if (a.opt.token_budget == 0)
    throw ConfigError(msg("distill", "--tokens 0 trains nothing"));
  std::unique_ptr<DataParallel> parallel = start_parallel(a);
  const TokenDataset data =
      load_dataset(a.data.spec(DataSplit::kTrain), a.teacher, teacher.config.vocab_size,
                   int32_t(teacher.config.bos_token_id), "distill", &a.data_source);
  a.opt.state_dir = a.state_dir.empty() ? fs::path(a.out + ".state") : fs::path(a.state_dir);
  a.opt.log_path = a.opt.state_dir / "distill_log.csv";
  const StateDirGuard state_guard(a.opt.state_dir, /*owner=*/a.rank == 0);
  log_info(fmt::format("[distill] {} {} -> {}: {} tokens of {}, on {} in {}",
                       model_kind_name(student), a.student, a.out, a.opt.token_budget,
                       a.data.path, device_name(a.opt.device),
                       describe_precision(a.opt.precision)));
  const DistillResult r = distill_step(teacher, student, data, a.opt, "distill",
                                       "rerun the same command with --resume to continue");
  if (parallel && !parallel->is_main()) return;  // rank 0 writes the output
  write_output(a, student, r);
  fs::remove_all(a.opt.state_dir);
  log_info(fmt::format("[distill] {} steps, {} tokens, final loss {:.4f} -> {}", r.steps_done,
                       r.tokens, r.loss_curve.empty() ? NAN : r.loss_curve.back(), a.out));
}

void run(DistillArgs& a) {
  check_not_overwriting_inputs({a.teacher, a.student, a.data.path, a.eval_data}, a.out,
                               "distill");
  check_output_flag("distill", "--out", a.out, OutputKind::kFolder);
  if (is_nemotron_h_checkpoint(a.teacher)) return run_kind(a, kNemotronH);
  if (is_moe_family_checkpoint(a.teacher)) return run_kind(a, kMoe);
  a.opt.device = rank_device(a);
  a.opt.precision = a.compute.resolve_precision(a.opt.device);
  LlamaModel teacher = load_checkpoint(a.teacher);
  LlamaModel student = load_checkpoint(a.student);
  check_seq_len_fits(a.opt.seq_len, teacher.config, a.teacher, "distill");
  check_seq_len_fits(a.opt.seq_len, student.config, a.student, "distill");
  if (!a.opt.allow_nonfinite) {  // refused here with the folder names, before any state is made
    require_finite(teacher, a.teacher, "distill", /*allow=*/false);
    require_finite(student, a.student, "distill", /*allow=*/false);
  }
  if (teacher.config.vocab_size != student.config.vocab_size)
    a.opt.shared_vocab = shared_vocab_size(a, teacher.config, student.config);
  a.bld_on = a.bld.token_budget > 0;
  if (a.opt.hidden_loss_weight > 0 || a.bld_on) {  // refused here, with the file name, before any state
    fs::path map_file = a.pruning_map.empty() ? fs::path(a.student) / kPruningMapFile
                                              : fs::path(a.pruning_map);
    a.opt.hidden_map = read_pruning_map(map_file);
    check_pruning_map(*a.opt.hidden_map, teacher.config, student.config,
                      fmt::format("{} (teacher {}, student {})", map_file.string(), a.teacher,
                                  a.student));
    a.opt.hidden_loss_normalize = !a.hidden_plain_mse;
  }
  if (a.opt.token_budget == 0 && !a.bld_on)
    throw ConfigError(msg("distill", "--tokens 0 trains nothing; it is allowed only with "
                          "--bld-tokens > 0 (blockwise local distillation alone)"));
  std::unique_ptr<DataParallel> parallel = start_parallel(a);
  TokenDataset data =
      load_dataset(a.data.spec(DataSplit::kTrain), a.teacher, teacher.config.vocab_size,
                   int32_t(teacher.config.bos_token_id), "distill", &a.data_source);
  a.opt.state_dir = a.state_dir.empty() ? fs::path(a.out + ".state") : fs::path(a.state_dir);
  a.opt.log_path = a.opt.state_dir / "distill_log.csv";
  const StateDirGuard state_guard(a.opt.state_dir, /*owner=*/a.rank == 0);
  if (!a.eval_at.empty()) {
    if (a.eval_data.empty())
      throw ConfigError(msg("distill", "--eval-at-tokens needs --eval-data (the held-out text the "
                            "student is evaluated on)"));
    DataSpec spec = a.data.spec(DataSplit::kHeldout);
    spec.path = a.eval_data;
    add_learning_curve(a, teacher,
                       std::make_shared<TokenDataset>(load_dataset(
                           spec, a.teacher, teacher.config.vocab_size,
                           int32_t(teacher.config.bos_token_id), "distill --eval-data")));
  }
  log_info(fmt::format("[distill] {} -> {}: {} tokens of {} ({} per step), on {} in {}{}",
                       a.student, a.out, a.opt.token_budget, a.data.path,
                       a.opt.batch_size * a.opt.seq_len * a.opt.grad_accum,
                       device_name(a.opt.device), describe_precision(a.opt.precision),
                       parallel ? fmt::format(", {} ranks over {}", a.world_size,
                                              parallel->backend())
                                : ""));
  // A resumed run's state already holds the student after its blockwise distillation.
  if (a.bld_on && !(a.opt.resume && fs::exists(a.opt.state_dir / kDistillStateFile)))
    run_bld(a, teacher, student, data);
  DistillResult r;
  if (a.opt.token_budget > 0)
    r = distill_step(teacher, student, data, a.opt, "distill",
                     "rerun the same command with --resume to continue");
  if (parallel && !parallel->is_main()) return;  // rank 0 writes the output
  write_output(a, student, r);
  fs::remove_all(a.opt.state_dir);
  log_info(fmt::format("[distill] {} steps, {} tokens, {:.0f} tokens/s, final loss {:.4f} -> {}",
                       r.steps_done, r.tokens, r.tokens / std::max(r.wall_s, 1e-9),
                       r.loss_curve.empty() ? NAN : r.loss_curve.back(), a.out));
}

RegisterCommand reg(70, [](CLI::App& app) {
  auto* s = app.add_subcommand("distill", "Distill a student toward its teacher (logit KL, "
                                          "Minitron); resumable");
  auto a = std::make_shared<DistillArgs>();
  DistillOptions& o = a->opt;
  s->add_option("--teacher", a->teacher, "Teacher checkpoint folder")->required();
  s->add_option("--student", a->student, "Student checkpoint folder (e.g. from prune)")
      ->required();
  add_data_options(s, a->data, "Training data", DataSplit::kTrain)->required();
  s->add_option("--tokens", o.token_budget, "Token budget")->required();
  s->add_option("--out", a->out, "Output checkpoint folder (written atomically)")->required();
  s->add_flag("--resume", o.resume, "Continue from the saved state");
  s->add_flag("--allow-nonfinite", o.allow_nonfinite,
              "Distill even if the teacher or student has NaN/Inf weights (refused by default)");
  s->add_option("--state-dir", a->state_dir, "Resumable state folder (default OUT.state)");
  s->add_option("--batch-size", o.batch_size, "Sequences per micro-batch")->capture_default_str();
  s->add_option("--seq-len", o.seq_len, "Tokens per sequence")
      ->check(positive_tokens())
      ->capture_default_str();
  s->add_option("--grad-accum", o.grad_accum, "Micro-batches per step")->capture_default_str();
  s->add_option("--lr", o.lr, "Peak learning rate")->capture_default_str();
  s->add_option("--min-lr", o.min_lr, "Final learning rate (cosine)")->capture_default_str();
  s->add_option("--warmup", o.warmup_steps, "Warm-up steps")->capture_default_str();
  s->add_option("--weight-decay", o.weight_decay, "AdamW weight decay")->capture_default_str();
  s->add_option("--grad-clip", o.grad_clip, "Max gradient norm (<= 0: off)")
      ->capture_default_str();
  s->add_option("--kl-temperature", o.temperature, "temperature of the teacher and student softmax in the KL loss (Hinton et al. 2015)")->capture_default_str();
  ac::cli::add_deprecated_spelling(s, "--temperature", "--kl-temperature", o.temperature);
  s->add_option("--ce-weight", o.ce_weight, "Weight of next-token CE in the loss")
      ->capture_default_str();
  s->add_option("--hidden-loss-weight", o.hidden_loss_weight,
                "Weight of the hidden-state loss between mapped layers (0 = off); needs the "
                "student's pruning_map.json")
      ->capture_default_str();
  s->add_option("--pruning-map", a->pruning_map,
                "pruning_map.json of the student (default STUDENT/pruning_map.json)");
  s->add_flag("--hidden-loss-plain-mse", a->hidden_plain_mse,
              "Hidden-state loss as plain MSE (default: MSE / teacher variance per layer)");
  s->add_option("--checkpoint-every", o.checkpoint_every, "Steps between state saves")
      ->capture_default_str();
  s->add_option("--seed", o.seed, "Data order seed")->capture_default_str();
  s->add_option("--world-size", a->world_size, "Data-parallel processes (one command per rank)")
      ->capture_default_str();
  s->add_option("--rank", a->rank, "This process's rank in [0, world-size)")
      ->capture_default_str();
  s->add_option("--init-method", a->init_method,
                "Rendezvous of the ranks: file:///shared/path or tcp://host:port");
  s->add_option("--rendezvous-timeout", a->rendezvous_timeout_s, "Seconds to wait for the ranks")
      ->capture_default_str();
  s->add_option("--eval-data", a->eval_data,
                "Held-out data of the learning curve (--eval-at-tokens), read as --data is");
  s->add_option("--eval-at-tokens", a->eval_at,
                "Token counts after which the student's KL to the teacher on --eval-data is "
                "written to OUT/eval_log.csv (comma-separated, e.g. 1024,8192,65536)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  s->add_option("--eval-batches", a->eval_batches,
                "Batches of 8 windows per learning-curve evaluation (< 0: the whole --eval-data)")
      ->capture_default_str();
  a->bld.token_budget = 0;  // off unless asked for
  s->add_option("--bld-tokens", a->bld.token_budget,
                "Blockwise local distillation first (Puzzle, arXiv 2411.19146): teacher tokens "
                "each changed block is trained on to reproduce its teacher layers' output from "
                "their input (0 = off); needs the student's pruning_map.json. With --tokens 0, "
                "the blockwise distillation alone")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  s->add_option("--bld-lr", a->bld.lr, "Peak learning rate of the blockwise distillation")
      ->capture_default_str();
  s->add_option("--bld-batch-size", a->bld.batch_size,
                "Sequences per step of the blockwise distillation (of --seq-len tokens)")
      ->capture_default_str();
  add_device_options(s, a->compute, /*with_precision=*/true);
  s->add_option("--max-consecutive-skips", o.max_consecutive_skips,
                "Non-finite steps in a row that restore the last checkpoint")
      ->capture_default_str();
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
