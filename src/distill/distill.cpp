#include "distill/distill.h"

#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <csignal>
#include <cmath>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "common/cpu_allocator.h"
#include "common/error.h"
#include "common/json_io.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "distill/data_parallel.h"
#include "distill/fused_kl.h"
#include "distill/hidden_loss.h"
#include "distill/loss.h"
#include "distill/stop_signal.h"
#include "model/finite.h"
#include "model/stage_memory.h"
#include "model/trainable.h"

namespace ac {

namespace {

constexpr int kRecordFields = 10;  // StepRecord as a row of doubles in the state file
constexpr int kRecordFieldsV1 = 9;  // states written before the hidden-state loss (no `hidden`)

}  // namespace

void clear_gradients(const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) {
    at::Tensor q = p;  // a handle on the same TensorImpl: mutable_grad() needs a non-const one
    q.mutable_grad().reset();
  }
}

void stop_if_interrupted(const DistillResult& r, const std::string& stage,
                         const std::string& how_to_resume) {
  if (r.interrupted)
    throw Interrupted(msg(stage.c_str(), "interrupted by a signal during distillation at step {} "
                                         "of {}: {}", r.steps_done, r.total_steps, how_to_resume),
                      r.stop_signal);
}

double lr_at(int64_t step, int64_t total_steps, const DistillOptions& opt) {
  if (step < opt.warmup_steps) return opt.lr * double(step + 1) / double(opt.warmup_steps);
  int64_t decay_steps = std::max<int64_t>(1, total_steps - opt.warmup_steps - 1);
  double progress = std::min(1.0, double(step - opt.warmup_steps) / double(decay_steps));
  return opt.min_lr + 0.5 * (opt.lr - opt.min_lr) * (1.0 + std::cos(M_PI * progress));
}

// ---------------------------------------------------------------------------------------------

namespace {

/// Options that must not change across a resume, as JSON (doubles round-trip exactly).
json fingerprint(const DistillOptions& o, int64_t total_steps, int64_t num_params) {
  return json{{"token_budget", o.token_budget}, {"batch_size", o.batch_size},
              {"seq_len", o.seq_len},           {"grad_accum", o.grad_accum},
              {"seed", o.seed},                 {"lr", o.lr},
              {"min_lr", o.min_lr},             {"warmup_steps", o.warmup_steps},
              {"weight_decay", o.weight_decay}, {"grad_clip", o.grad_clip},
              {"temperature", o.temperature},   {"ce_weight", o.ce_weight},
              {"beta1", o.beta1},               {"beta2", o.beta2},
              {"adam_eps", o.adam_eps},         {"total_steps", total_steps},
              {"num_params", num_params},
              {"hidden_loss_weight", o.hidden_loss_weight},
              {"hidden_loss_normalize", o.hidden_loss_normalize}};
}

/// The value an option had in states saved before it existed (the behaviour then).
json legacy_option(const std::string& key) {
  if (key == "hidden_loss_weight") return 0.0;
  if (key == "hidden_loss_normalize") return true;
  return nullptr;
}

at::Tensor records_to_tensor(const std::vector<StepRecord>& rs) {
  at::Tensor t = at::empty({int64_t(rs.size()), kRecordFields}, at::kDouble);
  auto a = t.accessor<double, 2>();
  for (size_t i = 0; i < rs.size(); ++i) {
    const StepRecord& r = rs[i];
    double row[kRecordFields] = {double(r.step), double(r.tokens), r.loss, r.kl, r.ce, r.lr,
                                 r.grad_norm, r.tokens_per_s, r.skipped ? 1.0 : 0.0, r.hidden};
    for (int j = 0; j < kRecordFields; ++j) a[int64_t(i)][j] = row[j];
  }
  return t;
}

std::vector<StepRecord> records_from_tensor(const at::Tensor& t) {
  std::vector<StepRecord> rs(size_t(t.size(0)));
  auto a = t.accessor<double, 2>();
  for (size_t i = 0; i < rs.size(); ++i) {
    auto row = a[int64_t(i)];
    StepRecord& r = rs[i];
    r.step = int64_t(row[0]);
    r.tokens = int64_t(row[1]);
    r.loss = row[2];
    r.kl = row[3];
    r.ce = row[4];
    r.lr = row[5];
    r.grad_norm = row[6];
    r.tokens_per_s = row[7];
    r.skipped = row[8] != 0;
    r.hidden = t.size(1) > kRecordFieldsV1 ? row[9] : NAN;
  }
  return rs;
}

std::string csv_row(const StepRecord& r) {
  return fmt::format("{},{},{:.8g},{:.8g},{:.8g},{:.8g},{:.8g},{:.1f},{},{:.8g}\n", r.step,
                     r.tokens, r.loss, r.kl, r.ce, r.lr, r.grad_norm, r.tokens_per_s,
                     r.skipped ? 1 : 0, r.hidden);
}
constexpr const char* kCsvHeader =
    "step,tokens,loss,kl,ce,lr,grad_norm,tokens_per_s,skipped,hidden\n";

// The training loop over one model kind M (LlamaModel, MoeModel, NemotronHModel; the kind's
// operations in model/trainable.h). The fused head and the hidden-state loss read the Llama
// forward's hidden states: kLlama holds them to that kind, and check_inputs refuses them for the
// others.
template <class M>
class Trainer {
 public:
  static constexpr bool kLlama = std::is_same_v<M, LlamaModel>;
  Trainer(const M& teacher, M& student, const TokenDataset& data, const DistillOptions& opt);
  DistillResult run();

 private:
  void check_inputs() const;
  void build_optimizer();
  StepRecord train_step(int64_t step);
  void set_lr(double lr);
  std::string serialize_state(int64_t step) const;
  void save_state(int64_t step);
  int64_t restore_state(const std::string& bytes, const std::string& source);
  int64_t load_state();
  bool is_main() const { return !opt_.parallel || opt_.parallel->is_main(); }
  int world_size() const { return opt_.parallel ? opt_.parallel->world_size() : 1; }
  void open_log(int64_t resume_step);
  void log_step(const StepRecord& r);
  void maybe_eval(int64_t step_done);
  fs::path state_file() const { return opt_.state_dir / kDistillStateFile; }

  const M& teacher_;
  M& student_;
  const TokenDataset& data_;
  const DistillOptions& opt_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  int64_t tokens_per_step_ = 0, total_steps_ = 0;
  std::vector<StepRecord> records_;
  double wall_before_ = 0;  // training seconds of earlier runs (resume)
  double lr_scale_ = 1.0;   // product of skip_lr_factor over the restores
  int64_t restores_ = 0;
  int64_t vocab_ = 0;       // ids compared by the loss: vocab_size, or shared_vocab
  // The KL with the heads inside (fused_linear_kl_loss) when the loss is the KL alone (no CE:
  // it needs the student's full log-softmax; no hidden-state loss: its forward returns logits)
  // and the logits would be large (use_fused_head, fused_kl.h).
  bool use_fused_head(int64_t positions) const {
    if constexpr (kLlama)
      return opt_.ce_weight == 0 && opt_.hidden_loss_weight <= 0 &&
             cpu_fast_path({&student_.weights.lm_head}) && ac::use_fused_head(positions, vocab_);
    return false;
  }
  std::string snapshot_;    // the last checkpoint, in memory (serialize_state)
  std::ofstream log_;
};

template <class M>
Trainer<M>::Trainer(const M& teacher, M& student, const TokenDataset& data,
                    const DistillOptions& opt)
    : teacher_(teacher), student_(student), data_(data), opt_(opt) {
  check_inputs();
  vocab_ = opt.shared_vocab > 0 ? opt.shared_vocab : student.config.vocab_size;
  if (opt.shared_vocab > 0 && teacher.config.vocab_size != student.config.vocab_size && is_main())
    log_info(fmt::format("[distill] teacher vocab {} and student vocab {} share a prefix of {} "
                         "ids: KL over those ids, both distributions renormalised",
                         teacher.config.vocab_size, student.config.vocab_size, vocab_));
  tokens_per_step_ = opt.batch_size * opt.seq_len * opt.grad_accum;
  total_steps_ = opt.token_budget / tokens_per_step_;
  if (total_steps_ < 1)
    throw ConfigError(msg("distill", "token budget {} is smaller than one step of {} tokens "
                          "(batch_size {} x seq_len {} x grad_accum {})", opt.token_budget,
                          tokens_per_step_, opt.batch_size, opt.seq_len, opt.grad_accum));
  // A tied head must be the embedding tensor itself, so that both uses share one gradient.
  tie_head(student_);
  params_ = trainable_parameters(student_);
  for (auto& p : params_) p.requires_grad_(true);
  build_optimizer();
}

template <class M>
void Trainer<M>::check_inputs() const {
  const char* where = "distill";
  const DistillOptions& o = opt_;
  if (o.batch_size < 1 || o.seq_len < 2 || o.grad_accum < 1 || o.warmup_steps < 0)
    throw ConfigError(msg(where, "batch_size >= 1, seq_len >= 2, grad_accum >= 1 and "
                          "warmup_steps >= 0 required, found {}, {}, {}, {}", o.batch_size,
                          o.seq_len, o.grad_accum, o.warmup_steps));
  if (!(o.lr > 0) || !(o.min_lr >= 0) || o.min_lr > o.lr)
    throw ConfigError(msg(where, "need 0 <= min_lr <= lr and lr > 0, found lr {} min_lr {}", o.lr,
                          o.min_lr));
  const int64_t vt = teacher_.config.vocab_size, vs = student_.config.vocab_size;
  if (vt != vs && o.shared_vocab != std::min(vt, vs))
    throw ConfigError(msg(where, "teacher vocab_size {} differs from student vocab_size {}: "
                          "distillation needs the same tokenizer, or one token table that is a "
                          "prefix of the other (shared_vocab = {}, found {})", vt, vs,
                          std::min(vt, vs), o.shared_vocab));
  if (o.shared_vocab < 0 || o.shared_vocab > std::min(vt, vs))
    throw ConfigError(msg(where, "shared_vocab {} outside [0, {}]", o.shared_vocab,
                          std::min(vt, vs)));
  if (embedding(teacher_).is_alias_of(embedding(student_)))
    throw ConfigError(msg(where, "teacher and student share weights; clone the student first"));
  data_.check_vocab(o.shared_vocab > 0 ? o.shared_vocab : vs, where,
                    o.shared_vocab > 0 ? "shared vocabulary" : "student");
  if (!(o.hidden_loss_weight >= 0) || !std::isfinite(o.hidden_loss_weight))
    throw ConfigError(msg(where, "hidden_loss_weight must be finite and >= 0, found {}",
                          o.hidden_loss_weight));
  if (!kLlama && o.hidden_loss_weight > 0)
    throw ConfigError(msg(where, "the hidden-state loss (hidden_loss_weight {}) is implemented "
                          "for the Llama family only; this student is {}: use the logit loss "
                          "alone (hidden_loss_weight 0)", o.hidden_loss_weight,
                          model_kind_name(student_)));
  if (!kLlama && o.on_eval && !o.eval_at_tokens.empty())
    throw ConfigError(msg(where, "learning-curve evaluations (eval_at_tokens, on_eval) take a "
                          "Llama-family student; this student is {}", model_kind_name(student_)));
  if (o.hidden_loss_weight > 0) {
    if (!o.hidden_map)
      throw ConfigError(msg(where, "hidden_loss_weight {} needs the pruning map (student -> "
                            "teacher layers and kept channels; pruning_map.json from `prune`)",
                            o.hidden_loss_weight));
    check_pruning_map(*o.hidden_map, teacher_.config, student_.config, "the pruning map");
  }
  if (o.batch_size % world_size() != 0)
    throw ConfigError(msg(where, "batch_size {} does not split over {} data-parallel ranks",
                          o.batch_size, world_size()));
}

template <class M>
void Trainer<M>::build_optimizer() {
  // Decoupled weight decay on matrices only: norms and biases are not decayed.
  std::vector<at::Tensor> decay, no_decay;
  for (auto& p : params_) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto base = torch::optim::AdamWOptions(opt_.lr)
                  .betas({opt_.beta1, opt_.beta2})
                  .eps(opt_.adam_eps)
                  .weight_decay(opt_.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(base));
  if (!no_decay.empty()) {
    auto nd = base;
    nd.weight_decay(0.0);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(nd));
  }
  optim_ = std::make_unique<torch::optim::AdamW>(std::move(groups), base);
}

template <class M>
void Trainer<M>::set_lr(double lr) {
  for (auto& g : optim_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

template <class M>
StepRecord Trainer<M>::train_step(int64_t step) {
  double t0 = now_s();
  StepRecord r;
  r.step = step;
  r.lr = lr_at(step, total_steps_, opt_) * lr_scale_;
  set_lr(r.lr);
  clear_gradients(params_);
  const int64_t world = world_size(), rank = opt_.parallel ? opt_.parallel->rank() : 0;
  const int64_t shard = opt_.batch_size / world;
  double loss = 0, kl = 0, ce = 0, hidden = 0;
  const bool use_hidden = opt_.hidden_loss_weight > 0;
  for (int64_t micro = 0; micro < opt_.grad_accum; ++micro) {
    at::Tensor tokens = data_.batch(step * opt_.grad_accum + micro, opt_.batch_size,
                                    opt_.seq_len, opt_.seed);  // [B, T]
    if (world > 1) tokens = tokens.narrow(0, rank * shard, shard).contiguous();  // [B/W, T]
    tokens = tokens.to(opt_.device);
    DistillLoss l;
    at::Tensor hidden_loss;  // []
    if (use_fused_head(tokens.numel())) {
      if constexpr (kLlama) {
        // The heads inside the loss (fused_kl.h): the [B, T, V] logits are never held.
        at::Tensor teacher_hidden;  // [B, T, Dt]
        {
          c10::InferenceMode no_autograd;
          teacher_hidden = teacher_.hidden_states(tokens);
        }
        at::Tensor student_hidden = student_.hidden_states(tokens);  // [B, T, Ds]
        l.loss = fused_linear_kl_loss(
            teacher_hidden, teacher_.weights.lm_head.narrow(0, 0, vocab_), student_hidden,
            student_.weights.lm_head.narrow(0, 0, vocab_), /*keep=*/{}, opt_.temperature);
        l.kl = l.loss.detach();
      }
    } else {
      at::Tensor teacher_logits, student_logits;  // [B, T, V], [B, T, V]
      {
        // The forwards in the run's precision; the loss below on fp32 logits.
        AutocastScope autocast(opt_.device, opt_.precision);
        if (use_hidden) {
          if constexpr (kLlama) {
            HiddenForward f = forward_with_hidden_loss(teacher_, student_, tokens,
                                                       *opt_.hidden_map, /*keep=*/{},
                                                       opt_.hidden_loss_normalize);
            teacher_logits = f.teacher_logits;
            student_logits = f.student_logits;
            hidden_loss = f.loss.to(at::kFloat);
          }
        } else {
          {
            c10::InferenceMode no_autograd;  // lighter than NoGradGuard: no version counters
            teacher_logits = teacher_.forward(tokens);
          }
          student_logits = student_.forward(tokens);
        }
      }
      teacher_logits = teacher_logits.to(at::kFloat);
      student_logits = student_logits.to(at::kFloat);
      if (teacher_logits.size(-1) != vocab_) teacher_logits = teacher_logits.narrow(-1, 0, vocab_);
      if (student_logits.size(-1) != vocab_) student_logits = student_logits.narrow(-1, 0, vocab_);
      l = distill_loss(teacher_logits, student_logits, tokens, {}, opt_.temperature,
                       opt_.ce_weight);
    }
    if (use_hidden) {
      l.loss = l.loss + hidden_loss * opt_.hidden_loss_weight;
      hidden += hidden_loss.item<double>();
    }
    (l.loss / double(opt_.grad_accum)).backward();
    loss += l.loss.item<double>();
    kl += l.kl.item<double>();
    ce += l.ce.defined() ? l.ce.item<double>() : NAN;
  }
  if (opt_.parallel || opt_.after_backward) {
    std::vector<at::Tensor> grads;
    for (auto& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.mutable_grad());
    }
    if (opt_.parallel) {
      opt_.parallel->allreduce_mean(grads);
      loss = opt_.parallel->allreduce_sum(loss) / double(world);
      kl = opt_.parallel->allreduce_sum(kl) / double(world);
      ce = opt_.parallel->allreduce_sum(ce) / double(world);
      if (use_hidden) hidden = opt_.parallel->allreduce_sum(hidden) / double(world);
    }
    if (opt_.after_backward) opt_.after_backward(step, grads);
  }
  r.loss = loss / double(opt_.grad_accum);
  r.kl = kl / double(opt_.grad_accum);
  r.ce = ce / double(opt_.grad_accum);
  r.hidden = use_hidden ? hidden / double(opt_.grad_accum) : NAN;
  double max_norm = opt_.grad_clip > 0 ? opt_.grad_clip : std::numeric_limits<double>::infinity();
  r.grad_norm = torch::nn::utils::clip_grad_norm_(params_, max_norm);
  r.skipped = !std::isfinite(r.loss) || !std::isfinite(r.grad_norm);
  if (r.skipped) {
    if (is_main())
      log_warn(fmt::format("[distill] step {}: non-finite loss {} or gradient norm {}: step "
                           "skipped", step, r.loss, r.grad_norm));
    clear_gradients(params_);
  } else {
    optim_->step();
  }
  r.tokens = (step + 1) * tokens_per_step_;
  r.tokens_per_s = double(tokens_per_step_) / std::max(now_s() - t0, 1e-9);
  return r;
}

// ---------------------------------------------------------------------------------------------
// State: one torch archive, written to a temporary file and renamed.

template <class M>
std::string Trainer<M>::serialize_state(int64_t step) const {
  torch::serialize::OutputArchive ar;
  json meta = {{"version", 1},
               {"step", step},
               {"wall_s", wall_before_},
               {"lr_scale", lr_scale_},
               {"restores", restores_},
               {"options", fingerprint(opt_, total_steps_, int64_t(params_.size()))}};
  ar.write("meta", c10::IValue(meta.dump()));
  ar.write("records", records_to_tensor(records_));
  for (size_t i = 0; i < params_.size(); ++i)
    ar.write("student/" + std::to_string(i), params_[i].detach(), /*is_buffer=*/true);
  torch::serialize::OutputArchive optim_ar;
  optim_->save(optim_ar);
  ar.write("optimizer", optim_ar);
  std::ostringstream bytes;
  ar.save_to(bytes);
  return bytes.str();
}

template <class M>
void Trainer<M>::save_state(int64_t step) {
  snapshot_ = serialize_state(step);
  if (opt_.state_dir.empty() || !is_main()) return;
  fs::create_directories(opt_.state_dir);
  write_file_atomic(state_file(), snapshot_);
}

template <class M>
int64_t Trainer<M>::load_state() {
  return restore_state(read_file(state_file()), state_file().string());
}

template <class M>
int64_t Trainer<M>::restore_state(const std::string& bytes, const std::string& file) {
  const char* where = "distill";
  torch::serialize::InputArchive ar;
  c10::IValue meta_v;
  at::Tensor records;
  try {
    std::istringstream in(bytes);
    ar.load_from(in, opt_.device);  // the parameters and the optimizer state onto the run's device
    ar.read("meta", meta_v);
    ar.read("records", records);
  } catch (const c10::Error& e) {
    throw FormatError(msg(where, "{}: not a readable distillation state ({}); remove it to start "
                          "over", file, e.what_without_backtrace()));
  }
  json meta = json::parse(meta_v.toStringRef());
  json want = fingerprint(opt_, total_steps_, int64_t(params_.size()));
  if (records.dim() != 2 || records.size(1) < kRecordFieldsV1 || records.size(1) > kRecordFields)
    throw FormatError(msg(where, "{}: step records of shape [{}], expected [steps, {}]", file,
                          fmt::join(records.sizes(), ", "), kRecordFields));
  for (auto& [key, value] : want.items()) {
    const json& opts = meta["options"];
    json saved = opts.contains(key) ? opts[key] : legacy_option(key);
    if (saved != value)
      throw ConfigError(msg(where, "{}: the state was saved with {} = {}, the options now say {}: "
                            "resume with the same options or remove the state folder", file, key,
                            saved.dump(), value.dump()));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor saved;
    ar.read("student/" + std::to_string(i), saved, /*is_buffer=*/true);
    if (saved.sizes() != params_[i].sizes())
      throw ConfigError(msg(where, "{}: student parameter {} has shape [{}] in the state, [{}] in "
                            "the student: another student architecture?", file, i,
                            fmt::join(saved.sizes(), ", "), fmt::join(params_[i].sizes(), ", ")));
    params_[i].copy_(saved);
  }
  torch::serialize::InputArchive optim_ar;
  ar.read("optimizer", optim_ar);
  optim_->load(optim_ar);
  records_ = records_from_tensor(records);
  wall_before_ = meta["wall_s"].get<double>();
  lr_scale_ = meta.value("lr_scale", 1.0);
  restores_ = meta.value("restores", int64_t(0));
  snapshot_ = bytes;
  return meta["step"].get<int64_t>();
}

template <class M>
void Trainer<M>::open_log(int64_t resume_step) {
  if (opt_.log_path.empty() || !is_main()) return;
  // Rewrite the rows of the steps the state holds (drops rows logged after the last save).
  std::string text = kCsvHeader;
  for (const auto& r : records_)
    if (r.step < resume_step) text += csv_row(r);
  write_file_atomic(opt_.log_path, text);
  log_.open(opt_.log_path, std::ios::app);
  if (!log_)
    throw FormatError(msg("distill", "{}: cannot open the step log", opt_.log_path.string()));
}

template <class M>
void Trainer<M>::log_step(const StepRecord& r) {
  if (!log_.is_open()) return;
  log_ << csv_row(r);
  log_.flush();
}

// Calls on_eval once after the step that first reaches one or more of eval_at_tokens.
template <class M>
void Trainer<M>::maybe_eval(int64_t step_done) {
  if constexpr (kLlama) {  // other kinds: refused in check_inputs
    if (!opt_.on_eval || !is_main()) return;
    const int64_t before = (step_done - 1) * tokens_per_step_, now = step_done * tokens_per_step_;
    for (int64_t t : opt_.eval_at_tokens)
      if (t > before && t <= now) {
        opt_.on_eval(step_done, now, student_);
        return;
      }
  }
}

template <class M>
DistillResult Trainer<M>::run() {
  int64_t step = 0;
  bool have_state = !opt_.state_dir.empty() && fs::exists(state_file());
  if (have_state && !opt_.resume)
    throw ConfigError(msg("distill", "{} exists from an earlier run: pass resume (--resume) to "
                          "continue it, or remove the folder to start over", state_file().string()));
  if (have_state) {
    step = load_state();
    if (is_main()) log_info(fmt::format("[distill] resuming at step {} of {}", step, total_steps_));
  } else {
    snapshot_ = serialize_state(0);  // what repeated non-finite steps fall back to
  }
  open_log(step);
  StopSignalScope signals;  // the loop stops at a step boundary on SIGINT / SIGTERM
  Progress progress("distill", (total_steps_ - step) * tokens_per_step_, "tok");
  double t0 = now_s();
  int64_t steps_this_run = 0, consecutive_skips = 0;
  bool interrupted = false;
  int stop_signal = 0;
  while (step < total_steps_) {
    stop_signal = StopSignalScope::pending();
    bool stop = stop_signal != 0;
    if (opt_.parallel) stop = opt_.parallel->allreduce_sum(stop ? 1.0 : 0.0) > 0;  // all ranks stop
    if (stop || (opt_.stop_after_steps >= 0 && steps_this_run >= opt_.stop_after_steps)) {
      interrupted = true;
      break;
    }
    StepRecord r = train_step(step);
    records_.push_back(r);
    log_step(r);
    ++step;
    ++steps_this_run;
    if (opt_.on_step) opt_.on_step(r);
    maybe_eval(step);
    consecutive_skips = r.skipped ? consecutive_skips + 1 : 0;
    if (opt_.max_consecutive_skips > 0 && consecutive_skips >= opt_.max_consecutive_skips) {
      if (restores_ >= opt_.max_restores)
        throw Error(msg("distill", "{} restores of the last checkpoint with a lower learning "
                        "rate did not stop the non-finite steps (step {}, lr scale {}): the run "
                        "diverges", restores_, step, lr_scale_));
      int64_t restores = restores_ + 1;
      double lr_scale = lr_scale_ * opt_.skip_lr_factor;
      int64_t back_to = restore_state(snapshot_, "the last checkpoint");
      restores_ = restores;
      lr_scale_ = lr_scale;
      if (is_main())
        log_warn(fmt::format("[distill] {} non-finite steps in a row at step {}: restored the "
                             "checkpoint of step {}, learning rate x{} from now on (restore {} "
                             "of at most {})", consecutive_skips, step, back_to, lr_scale_,
                             restores_, opt_.max_restores));
      step = back_to;
      consecutive_skips = 0;
      continue;
    }
    if (opt_.checkpoint_every > 0 && step % opt_.checkpoint_every == 0 && step < total_steps_) {
      wall_before_ += now_s() - t0;
      t0 = now_s();
      save_state(step);
    }
    if (opt_.show_progress && is_main())
      progress.update(steps_this_run * tokens_per_step_,
                    fmt::format("step {}/{} loss {:.4f} lr {:.2e}", step, total_steps_, r.loss,
                                r.lr));
  }
  wall_before_ += now_s() - t0;
  save_state(step);
  if (interrupted && is_main() && !opt_.state_dir.empty())
    log_info(fmt::format("[distill] stopped at step {} of {}; state saved to {}", step,
                         total_steps_, opt_.state_dir.string()));
  else if (opt_.show_progress && is_main())
    progress.finish();

  DistillResult res;
  res.steps = records_;
  for (const auto& r : records_) {
    res.loss_curve.push_back(r.loss);
    res.skipped_steps += r.skipped;
  }
  res.total_steps = total_steps_;
  res.steps_done = step;
  res.tokens = step * tokens_per_step_;
  res.wall_s = wall_before_;
  res.interrupted = interrupted;
  res.stop_signal = interrupted ? stop_signal : 0;
  res.restores = restores_;
  res.lr_scale = lr_scale_;
  return res;
}

// Llama-only: the memory plan (model/stage_memory.h) counts dense layers, so the other kinds
// are not checked against the GPU's memory before the copy.
template <class M>
DistillResult distill_any(const M& teacher, M& student, const TokenDataset& data,
                          const DistillOptions& opt) {
  require_finite(teacher, "the teacher", "distill", opt.allow_nonfinite);
  require_finite(student, "the student", "distill", opt.allow_nonfinite);
  if constexpr (std::is_same_v<M, LlamaModel>) {
    // Refused before anything is copied when the step cannot fit the GPU (model/stage_memory.h).
    const int64_t shard =
        opt.batch_size / std::max(1, opt.parallel ? opt.parallel->world_size() : 1);
    check_fits_device(distill_memory(teacher.config, student.config, std::max<int64_t>(1, shard),
                                     opt.seq_len, opt.precision),
                      opt.device, "distill");
  }
  // Both models on the run's device (the same tensors when they are there already: then the
  // student is trained in place).
  const c10::Device home = embedding(student).device();
  reset_device_peak(opt.device);
  const M on_teacher = model_to_device(teacher, opt.device);
  M on_student = model_to_device(student, opt.device);
  DistillResult result;
  {
    Trainer<M> trainer(on_teacher, on_student, data, opt);
    struct ReleaseGrad {  // leave the student as it came: no grads, no requires_grad
      std::vector<at::Tensor> ps;
      ~ReleaseGrad() {
        for (auto& p : ps) {
          p.mutable_grad() = at::Tensor();
          p.requires_grad_(false);
        }
      }
    } release{trainable_parameters(on_student)};
    // Every step allocates the same logits, gradients and activations: reuse the blocks
    // instead of a fresh mmap (and its page faults) each time (common/cpu_allocator.h).
    LargeBlockCache block_cache;
    result = trainer.run();
  }
  result.device_peak_bytes = device_allocated_bytes_peak(opt.device);
  student = model_to_device(on_student, home);
  return result;
}

}  // namespace

DistillResult distill(const LlamaModel& teacher, LlamaModel& student, const TokenDataset& data,
                      const DistillOptions& opt) {
  return distill_any(teacher, student, data, opt);
}

DistillResult distill(const MoeModel& teacher, MoeModel& student, const TokenDataset& data,
                      const DistillOptions& opt) {
  return distill_any(teacher, student, data, opt);
}

DistillResult distill(const NemotronHModel& teacher, NemotronHModel& student,
                      const TokenDataset& data, const DistillOptions& opt) {
  return distill_any(teacher, student, data, opt);
}

}  // namespace ac
