// Distillation: the loss against hand-computed values and a plain reference, masking and -inf
// safety, the schedule, a short run that lowers the KL, bit-exact resume, skipped steps, CLI.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "distill/loss.h"
#include "eval/eval.h"
#include "io/checkpoint.h"
#include "test_util.h"

namespace ac {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("ac_test_distill_{}_{}", ::getpid(), n++);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

at::Tensor logits3(std::vector<std::vector<float>> rows) {  // [1, T, V]
  std::vector<at::Tensor> ts;
  for (auto& r : rows) ts.push_back(at::tensor(r, at::kFloat));
  return at::stack(ts).unsqueeze(0);
}

TEST(DistillLoss, KlMatchesHandComputedValues) {
  // p = softmax([0, ln 3]) = [1/4, 3/4], q = softmax([0, 0]) = [1/2, 1/2]
  // KL = 1/4 ln(1/2) + 3/4 ln(3/2) = -0.1732868 + 0.3040988 = 0.1308120359
  at::Tensor t = logits3({{0.f, float(std::log(3.0))}});
  at::Tensor s = logits3({{0.f, 0.f}});
  EXPECT_NEAR(distill_loss(t, s, {}, {}, 1.0, 0.0).kl.item<double>(), 0.1308120359, 1e-6);
  // tau = 2: p = softmax([0, ln(3)/2]) = [1/(1+sqrt 3), sqrt 3/(1+sqrt 3)] = [0.3660254, 0.6339746]
  // KL = 0.3660254 ln(2 * 0.3660254) + 0.6339746 ln(2 * 0.6339746) = 0.0363408; x tau^2 = 0.1453631
  EXPECT_NEAR(distill_loss(t, s, {}, {}, 2.0, 0.0).kl.item<double>(), 0.1453631315, 1e-6);
  // CE on tokens [0, 1]: position 0 predicts token 1 with q = 1/2: ln 2 = 0.6931472.
  // loss = 0.75 * KL_mean + 0.25 * CE, KL_mean over both positions (both are [1/4,3/4] vs 1/2).
  at::Tensor t2 = logits3({{0.f, float(std::log(3.0))}, {0.f, float(std::log(3.0))}});
  at::Tensor s2 = logits3({{0.f, 0.f}, {0.f, 0.f}});
  at::Tensor tokens = at::tensor({0, 1}, at::kLong).view({1, 2});
  DistillLoss l = distill_loss(t2, s2, tokens, {}, 1.0, 0.25);
  EXPECT_NEAR(l.ce.item<double>(), 0.6931471806, 1e-6);
  EXPECT_NEAR(l.loss.item<double>(), 0.75 * 0.1308120359 + 0.25 * 0.6931471806, 1e-6);
}

TEST(DistillLoss, InfiniteLogitsAndFullMaskStayFinite) {
  // Teacher forbids token 0: p = [0, 1/2, 1/2]; q uniform 1/3: KL = ln(3/2) = 0.4054651.
  at::Tensor t = logits3({{-kInf, 0.f, 0.f}});
  at::Tensor s = logits3({{0.f, 0.f, 0.f}}).requires_grad_(true);
  DistillLoss l = distill_loss(t, s, {}, {}, 1.0, 0.0);
  EXPECT_NEAR(l.loss.item<double>(), 0.4054651081, 1e-6);
  l.loss.backward();
  EXPECT_TRUE(s.grad().isfinite().all().item<bool>());
  // The student forbids it too: KL = 0, no 0 * -inf.
  at::Tensor s2 = logits3({{-kInf, 0.f, 0.f}}).requires_grad_(true);
  DistillLoss l2 = distill_loss(t, s2, {}, {}, 1.0, 0.0);
  EXPECT_NEAR(l2.loss.item<double>(), 0.0, 1e-7);
  l2.loss.backward();
  EXPECT_FALSE(s2.grad().isnan().any().item<bool>());

  // Every position masked, and the masked teacher rows are all -inf (padding): loss 0, grads 0.
  at::Tensor tm = logits3({{-kInf, -kInf, -kInf}, {-kInf, -kInf, -kInf}});
  at::Tensor sm = at::randn({1, 2, 3}).requires_grad_(true);
  at::Tensor mask = at::zeros({1, 2}, at::kBool);
  at::Tensor tokens = at::tensor({0, 1}, at::kLong).view({1, 2});
  DistillLoss lm = distill_loss(tm, sm, tokens, mask, 2.0, 0.5);
  EXPECT_EQ(lm.loss.item<double>(), 0.0);
  lm.loss.backward();
  EXPECT_TRUE(sm.grad().isfinite().all().item<bool>());
  EXPECT_EQ(sm.grad().abs().max().item<double>(), 0.0);

  // Half masked: equals the unmasked loss of the kept position alone.
  at::Tensor th = logits3({{0.f, 1.f, 2.f}, {-kInf, -kInf, -kInf}});
  at::Tensor sh = logits3({{1.f, 0.f, 0.f}, {0.f, 0.f, 0.f}});
  at::Tensor half = at::tensor({1, 0}, at::kInt).to(at::kBool).view({1, 2});
  EXPECT_NEAR(distill_loss(th, sh, {}, half, 1.0, 0.0).loss.item<double>(),
              distill_loss(th.slice(1, 0, 1), sh.slice(1, 0, 1), {}, {}, 1.0, 0.0)
                  .loss.item<double>(), 1e-7);
}

TEST(DistillLoss, FastPathMatchesPlainReferenceAndItsGradient) {
  at::manual_seed(3);
  at::Tensor t = at::randn({2, 5, 33}) * 3;
  at::Tensor mask = at::rand({2, 5}) > 0.3;
  for (double tau : {1.0, 2.0}) {
    at::Tensor s1 = (at::randn({2, 5, 33}) * 2).requires_grad_(true);
    at::Tensor s2 = s1.detach().clone().requires_grad_(true);
    at::Tensor fast = distill_loss(t, s1, {}, mask, tau, 0.0).loss;
    at::Tensor per = kl_per_position_reference(at::log_softmax(t / tau, -1),
                                               at::log_softmax(s2 / tau, -1));  // [2, 5]
    at::Tensor ref = (per * mask).sum() / mask.sum() * (tau * tau);
    EXPECT_NEAR(fast.item<double>(), ref.item<double>(), 1e-5) << "tau " << tau;
    fast.backward();
    ref.backward();
    double diff = (s1.grad() - s2.grad()).abs().max().item<double>();
    EXPECT_LT(diff, 1e-6) << "largest gradient difference, tau " << tau;
  }
}

TEST(DistillSchedule, WarmupThenCosineToMinLr) {
  DistillOptions o;
  o.lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(lr_at(0, 24, o), 0.25e-3);
  EXPECT_DOUBLE_EQ(lr_at(3, 24, o), 1e-3);
  EXPECT_NEAR(lr_at(4, 24, o), 1e-3, 1e-12);       // cosine starts at the peak
  EXPECT_NEAR(lr_at(23, 24, o), 1e-4, 1e-12);      // ends at min_lr on the last step
  EXPECT_NEAR(lr_at(4 + 19 / 2.0, 24, o), 5.5e-4, 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Training on tiny random models.

ModelConfig tiny_config(bool tied) {
  ModelConfig c = ModelConfig::uniform(48, 32, 2, LayerConfig{4, 2, 8, 48});
  c.tie_word_embeddings = tied;
  return c;
}

LlamaModel make_teacher(bool tied) {
  LlamaModel t{tiny_config(tied), {}};
  t.weights = random_weights(t.config, 11, /*std=*/0.3);  // peaked, far from uniform
  return t;
}

LlamaModel perturbed_student(const LlamaModel& teacher, double noise) {
  LlamaModel s{teacher.config, clone(teacher.config, teacher.weights)};
  at::NoGradGuard g;
  at::manual_seed(5);
  for (auto& p : s.weights.parameters()) p.add_(at::randn_like(p) * noise);
  return s;
}

DistillOptions small_options(int64_t steps) {
  DistillOptions o;
  o.batch_size = 4;
  o.seq_len = 16;
  o.token_budget = steps * 4 * 16;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 2;
  o.checkpoint_every = 0;
  o.show_progress = false;
  o.seed = 9;
  return o;
}

TEST(Distill, ShortRunLowersHeldOutKl) {
  LlamaModel teacher = make_teacher(/*tied=*/true);
  LlamaModel student = perturbed_student(teacher, 0.05);
  TokenDataset train = test::random_text(4000, 48, 1), held = test::random_text(640, 48, 2);
  EvalOptions eo;
  eo.seq_len = 16;
  eo.show_progress = false;
  double before = evaluate(student, &teacher, held, eo).kl_to_teacher;
  DistillOptions o = small_options(60);
  o.lr = 5e-3;
  o.min_lr = 5e-4;
  DistillResult r = distill(teacher, student, train, o);
  double after = evaluate(student, &teacher, held, eo).kl_to_teacher;
  EXPECT_EQ(r.steps_done, 60);
  EXPECT_EQ(r.tokens, 60 * 64);
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_LT(after, 0.7 * before) << "held-out KL before " << before << " after " << after;
  auto mean = [&](size_t from) {
    double s = 0;
    for (size_t i = from; i < from + 10; ++i) s += r.loss_curve[i];
    return s / 10;
  };
  EXPECT_LT(mean(50), 0.7 * mean(0)) << "training loss, first vs last 10 steps";
  // The tied head is still the embedding, updated together, and grads are released.
  EXPECT_TRUE(student.weights.lm_head.is_same(student.weights.embed_tokens));
  EXPECT_FALSE(student.weights.embed_tokens.requires_grad());
  EXPECT_FALSE(student.weights.embed_tokens.grad().defined());
}

// The learning-curve hook: called once after the step that first reaches each requested token
// count (two counts reached in one step: one call), with the student as it is then; its KL there
// equals the KL of the same run stopped at that step (evaluated after distill() returns).
TEST(Distill, LearningCurveHookSeesTheStudentAtTheRequestedTokens) {
  LlamaModel teacher = make_teacher(/*tied=*/true);
  TokenDataset train = test::random_text(4000, 48, 1), held = test::random_text(640, 48, 2);
  EvalOptions eo;
  eo.seq_len = 16;
  eo.show_progress = false;
  DistillOptions o = small_options(8);  // 64 tokens a step
  o.eval_at_tokens = {64, 100, 128, 300, 64 * 8, 1 << 20};
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::vector<double> kls;
  o.on_eval = [&](int64_t step, int64_t tokens, const LlamaModel& s) {
    calls.emplace_back(step, tokens);
    kls.push_back(evaluate(s, &teacher, held, eo).kl_to_teacher);
  };
  LlamaModel student = perturbed_student(teacher, 0.05);
  distill(teacher, student, train, o);
  // 64 -> step 1; 100 and 128 -> step 2 (one call); 300 -> step 5; 512 -> step 8; 2^20: never.
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {2, 128}, {5, 320}, {8, 512}}));
  ASSERT_EQ(kls.size(), 4u);
  EXPECT_DOUBLE_EQ(kls.back(), evaluate(student, &teacher, held, eo).kl_to_teacher);
  DistillOptions two = small_options(8);
  two.stop_after_steps = 2;
  LlamaModel stopped = perturbed_student(teacher, 0.05);
  distill(teacher, stopped, train, two);
  EXPECT_NEAR(kls[1], evaluate(stopped, &teacher, held, eo).kl_to_teacher, 1e-6)
      << "the hook at step 2 against the same run stopped after 2 steps";
  EXPECT_LT(kls.back(), kls.front());
}

struct SingleThread {
  int saved = at::get_num_threads();
  SingleThread() { at::set_num_threads(1); }
  ~SingleThread() { at::set_num_threads(saved); }
};

void expect_same_weights(const LlamaModel& a, const LlamaModel& b) {
  auto pa = a.weights.parameters(), pb = b.weights.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::equal(pa[i], pb[i])) << "param " << i;
}

TEST(Distill, ResumeAfterStopOrSignalIsBitExact) {
  SingleThread one;
  LlamaModel teacher = make_teacher(/*tied=*/false);
  TokenDataset data = test::random_text(3000, 48, 3);
  const int64_t N = 8;

  TempDir d;
  LlamaModel ref = perturbed_student(teacher, 0.1);
  DistillOptions o = small_options(N);
  o.grad_accum = 2;
  o.token_budget *= 2;
  o.state_dir = d.path / "ref";
  DistillResult full = distill(teacher, ref, data, o);
  ASSERT_EQ(full.loss_curve.size(), size_t(N));

  // (a) stop after N/2 steps (as a killed run that saved), then resume with a fresh student.
  LlamaModel a = perturbed_student(teacher, 0.1);
  o.state_dir = d.path / "a";
  o.log_path = d.path / "a.csv";
  o.stop_after_steps = N / 2;
  DistillResult first = distill(teacher, a, data, o);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.stop_signal, 0);  // stopped by stop_after_steps, not by a signal
  EXPECT_EQ(first.steps_done, N / 2);
  LlamaModel a2 = perturbed_student(teacher, 0.1);  // the state restores the weights
  o.stop_after_steps = -1;
  o.resume = true;
  DistillResult rest = distill(teacher, a2, data, o);
  EXPECT_EQ(rest.loss_curve, full.loss_curve);  // bit for bit
  expect_same_weights(a2, ref);
  std::string csv = read_file(o.log_path);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), N + 1);  // header + one row per step

  // (b) SIGINT during step 3: the run saves at the step boundary and returns; resume matches.
  LlamaModel b = perturbed_student(teacher, 0.1);
  o.state_dir = d.path / "b";
  o.log_path.clear();
  o.resume = false;
  o.on_step = [](const StepRecord& r) {
    if (r.step == 2) std::raise(SIGINT);
  };
  DistillResult cut = distill(teacher, b, data, o);
  EXPECT_TRUE(cut.interrupted);
  EXPECT_EQ(cut.stop_signal, SIGINT);
  EXPECT_EQ(cut.steps_done, 3);
  // Inside a stage the stop is an Interrupted carrying the signal (the CLI exits 128 + it).
  try {
    stop_if_interrupted(cut, "compress", "resume it");
    ADD_FAILURE() << "no Interrupted";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signal, SIGINT);
    EXPECT_NE(std::string(e.what()).find("[compress] interrupted by a signal during distillation "
                                         "at step 3"), std::string::npos) << e.what();
  }
  o.on_step = nullptr;
  o.resume = true;
  LlamaModel b2 = perturbed_student(teacher, 0.1);
  EXPECT_EQ(distill(teacher, b2, data, o).loss_curve, full.loss_curve);
  expect_same_weights(b2, ref);
}

TEST(Distill, StateErrors) {
  LlamaModel teacher = make_teacher(true);
  TokenDataset data = test::random_text(1000, 48, 4);
  TempDir d;
  DistillOptions o = small_options(2);
  o.state_dir = d.path;
  LlamaModel s = perturbed_student(teacher, 0.1);
  distill(teacher, s, data, o);
  EXPECT_THROW(distill(teacher, s, data, o), ConfigError);  // state exists, no resume
  o.resume = true;
  o.lr *= 2;
  EXPECT_THROW(distill(teacher, s, data, o), ConfigError);  // options changed
  o.lr /= 2;
  write_file_atomic(d.path / kDistillStateFile, "garbage");
  EXPECT_THROW(distill(teacher, s, data, o), FormatError);
  o.state_dir.clear();
  o.token_budget = 10;  // less than one step
  EXPECT_THROW(distill(teacher, s, data, o), ConfigError);
  o.token_budget = 64;
  LlamaModel alias = teacher;  // shares the teacher's tensors
  EXPECT_THROW(distill(teacher, alias, data, o), ConfigError);
}

TEST(Distill, NonFiniteStepsAreSkippedAndLogged) {
  LlamaModel teacher = make_teacher(true);
  teacher.weights.norm = at::full_like(teacher.weights.norm, NAN);  // NaN teacher logits
  LlamaModel s = perturbed_student(make_teacher(true), 0.1);
  LlamaModel before{s.config, clone(s.config, s.weights)};
  TempDir d;
  DistillOptions o = small_options(3);
  o.log_path = d.path / "log.csv";
  o.max_consecutive_skips = 0;  // no restore: every step is skipped and logged
  o.allow_nonfinite = true;
  DistillResult r = distill(teacher, s, test::random_text(1000, 48, 5), o);
  EXPECT_EQ(r.skipped_steps, 3);
  expect_same_weights(s, before);
  std::string csv = read_file(o.log_path);
  EXPECT_NE(csv.find(",1,nan\n"), std::string::npos) << csv;  // skipped = 1, then hidden (off)
}

TEST(Distill, RepeatedNonFiniteStepsRestoreTheCheckpointWithALowerLr) {
  SingleThread one;
  LlamaModel teacher = make_teacher(true);
  TokenDataset data = test::random_text(3000, 48, 6);
  DistillOptions o = small_options(10);
  o.checkpoint_every = 4;
  o.max_consecutive_skips = 2;
  o.skip_lr_factor = 0.5;
  // Steps 5 and 6 get NaN gradients once: two skips in a row restore the checkpoint of step 4.
  int injected = 0;
  o.after_backward = [&](int64_t step, std::vector<at::Tensor>& grads) {
    if ((step == 5 || step == 6) && injected < 2) {
      grads[0].fill_(NAN);
      ++injected;
    }
  };
  std::vector<StepRecord> seen;
  o.on_step = [&](const StepRecord& r) { seen.push_back(r); };
  LlamaModel s = perturbed_student(teacher, 0.1);
  DistillResult r = distill(teacher, s, data, o);
  EXPECT_EQ(r.restores, 1);
  EXPECT_DOUBLE_EQ(r.lr_scale, 0.5);
  EXPECT_EQ(r.steps_done, 10);
  ASSERT_EQ(r.steps.size(), 10u);  // the undone steps 4..6 are replaced by their replays
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(r.steps[size_t(i)].step, i);
  EXPECT_EQ(r.skipped_steps, 0);
  // 7 steps ran before the restore (0..6), then 4..9 again: 13 in all.
  ASSERT_EQ(seen.size(), 13u);
  EXPECT_TRUE(seen[5].skipped && seen[6].skipped);
  for (int64_t i = 4; i < 10; ++i)
    EXPECT_DOUBLE_EQ(r.steps[size_t(i)].lr, 0.5 * lr_at(i, 10, o)) << "step " << i;
  EXPECT_DOUBLE_EQ(r.steps[3].lr, lr_at(3, 10, o));
  // The replayed step 4 starts from the restored weights: it equals the first step 4 but for
  // the learning rate, so its loss (computed before the update) is identical.
  EXPECT_EQ(seen[4].loss, seen[7].loss);

  // A run that never recovers (NaN teacher) stops with an error after max_restores.
  LlamaModel bad = make_teacher(true);
  bad.weights.norm = at::full_like(bad.weights.norm, NAN);
  DistillOptions ob = small_options(6);
  ob.max_consecutive_skips = 2;
  ob.max_restores = 2;
  ob.allow_nonfinite = true;
  LlamaModel s2 = perturbed_student(teacher, 0.1);
  try {
    distill(bad, s2, data, ob);
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diverges"), std::string::npos) << e.what();
  }
}

TEST(Distill, PrefixVocabulariesCompareOverSharedIds) {
  // Teacher vocab 48, student vocab 40 (its token table a prefix): the KL runs over ids < 40.
  LlamaModel teacher = make_teacher(true);
  ModelConfig sc = tiny_config(true);
  sc.vocab_size = 40;
  LlamaModel student{sc, random_weights(sc, 3, 0.1)};
  TokenDataset data = test::random_text(2000, 40, 7);
  DistillOptions o = small_options(3);
  EXPECT_THROW(distill(teacher, student, data, o), ConfigError);  // no shared_vocab given
  o.shared_vocab = 40;
  DistillResult r = distill(teacher, student, data, o);
  EXPECT_EQ(r.steps_done, 3);
  EXPECT_TRUE(std::isfinite(r.loss_curve[0]));
  // The first loss equals the KL between the renormalised first-40-id distributions.
  LlamaModel s0{sc, random_weights(sc, 3, 0.1)};
  at::Tensor tokens = data.batch(0, o.batch_size, o.seq_len, o.seed);
  at::Tensor t = teacher.forward(tokens).narrow(-1, 0, 40).to(at::kDouble).log_softmax(-1);
  at::Tensor q = s0.forward(tokens).to(at::kDouble).log_softmax(-1);
  double want = (t.exp() * (t - q)).sum(-1).mean().item<double>();
  EXPECT_NEAR(r.loss_curve[0], want, 1e-5 * std::max(1.0, want));
  o.shared_vocab = 41;  // more than the smaller vocabulary
  EXPECT_THROW(distill(teacher, student, data, o), ConfigError);
  TokenDataset wide = test::random_text(2000, 48, 8);  // ids the student cannot see
  o.shared_vocab = 40;
  EXPECT_THROW(distill(teacher, student, wide, o), ConfigError);
}

// The trainer's two paths, the heads inside the loss (fused_linear_kl_loss) and the full logits
// (fused_kl_loss): the same loss curve and the same weights after a few AdamW steps, for a
// tied and an untied head, and over a shared-vocabulary prefix (the heads narrowed).
TEST(Distill, FusedHeadTrainsLikeTheLogitsPath) {
  struct Env {  // AC_FUSED_HEAD for the scope
    explicit Env(const char* v) { setenv("AC_FUSED_HEAD", v, 1); }
    ~Env() { unsetenv("AC_FUSED_HEAD"); }
  };
  for (int shared : {0, 40}) {
    for (bool tied : {true, false}) {
      LlamaModel teacher = make_teacher(tied);
      ModelConfig sc = tiny_config(tied);
      if (shared) sc.vocab_size = shared;
      LlamaModel a{sc, random_weights(sc, 3, 0.1)}, b{sc, random_weights(sc, 3, 0.1)};
      TokenDataset data = test::random_text(2000, shared ? shared : 48, 7);
      DistillOptions o = small_options(4);
      o.shared_vocab = shared;
      o.temperature = 1.5;
      DistillResult ra, rb;
      {
        Env e("on");
        ra = distill(teacher, a, data, o);
      }
      {
        Env e("off");
        rb = distill(teacher, b, data, o);
      }
      const std::string where = fmt::format("tied {} shared {}", tied, shared);
      ASSERT_EQ(ra.loss_curve.size(), 4u) << where;
      for (size_t i = 0; i < 4; ++i)
        EXPECT_NEAR(ra.loss_curve[i], rb.loss_curve[i], 1e-5 * std::max(1.0, rb.loss_curve[i]))
            << where << " step " << i;
      auto pa = a.weights.parameters(), pb = b.weights.parameters();
      ASSERT_EQ(pa.size(), pb.size());
      for (size_t i = 0; i < pa.size(); ++i)
        EXPECT_LT((pa[i] - pb[i]).abs().max().item<double>(), 1e-4) << where << " param " << i;
      if (tied) {
        EXPECT_TRUE(a.weights.lm_head.is_same(a.weights.embed_tokens)) << where;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The CLI as separate processes: kill -9 + resume, and two data-parallel ranks.

struct CliRun {
  fs::path dir;
  std::string cli = (ac::test::binary_dir() / "autocompress").string();
  /// A model large enough that a step takes milliseconds (the kill must land mid-run).
  explicit CliRun(const fs::path& d) : dir(d) {
    ModelConfig c = ModelConfig::uniform(512, 128, 2, LayerConfig{4, 2, 32, 256});
    c.tie_word_embeddings = false;
    LlamaModel teacher{c, random_weights(c, 21, /*std=*/0.2)};
    LlamaModel student = perturbed_student(teacher, 0.05);
    for (const char* name : {"teacher", "student"}) fs::create_directories(dir / name);
    save_checkpoint(dir / "teacher", teacher);
    save_checkpoint(dir / "student", student);
    write_token_file(dir / "train.tokens", test::random_text(40000, 512, 12).ids(), 512);
  }
  std::string command(const std::string& out, int64_t steps, const std::string& extra) const {
    return fmt::format("AC_NUM_THREADS=1 AC_QUIET=1 {} distill --teacher {} --student {} --data {} "
                       "--tokens {} --batch-size 4 --seq-len 32 --lr 3e-3 --warmup 2 --seed 3 "
                       "--out {} {}", cli, (dir / "teacher").string(), (dir / "student").string(),
                       (dir / "train.tokens").string(), steps * 128, (dir / out).string(), extra);
  }
  std::vector<double> losses(const std::string& out) const {
    std::vector<double> ls;
    std::istringstream in(read_file(dir / out / "distill_log.csv"));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
      ls.push_back(std::stod(line.substr(b + 1, c - b - 1)));
    }
    return ls;
  }
};

// distill --eval-data --eval-at-tokens: one row of OUT/eval_log.csv after the step that reaches
// each count; the last row's KL is what `autocompress eval` reads of the distilled output.
TEST(DistillCli, TheLearningCurveEndsWhereEvalOfTheOutputStands) {
  TempDir d;
  CliRun run(d.path);
  write_token_file(d.path / "held.tokens", test::random_text(2000, 512, 13).ids(), 512);
  const std::string held = (d.path / "held.tokens").string();
  test::run_or_fail(run.command("out", 6, "--eval-data " + held + " --eval-at-tokens 128,300,768") +
                    " >/dev/null 2>&1");
  std::istringstream in(read_file(d.path / "out" / "eval_log.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,tokens,kl_to_teacher,mean_nll,top1_agreement,wall_s");
  std::vector<std::pair<int64_t, int64_t>> at;
  double last_kl = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    for (size_t a = 0, b; a <= line.size(); a = b + 1) {
      b = line.find(',', a);
      if (b == std::string::npos) b = line.size();
      f.push_back(line.substr(a, b - a));
    }
    ASSERT_EQ(f.size(), 6u) << line;
    at.emplace_back(std::stoll(f[0]), std::stoll(f[1]));
    last_kl = std::stod(f[2]);
  }
  EXPECT_EQ(at, (std::vector<std::pair<int64_t, int64_t>>{{1, 128}, {3, 384}, {6, 768}}));
  const fs::path scored = d.path / "eval.json";
  test::run_or_fail(fmt::format("AC_QUIET=1 {} eval --model {} --teacher {} --data {} --seq-len 32 "
                                "--out {} >/dev/null 2>&1", run.cli, (d.path / "out").string(),
                                (d.path / "teacher").string(), held, scored.string()));
  const double kl = read_json_file(scored)["models"][0]["eval"]["kl_to_teacher"].get<double>();
  EXPECT_NEAR(last_kl, kl, 2e-6) << "eval_log.csv's last row against eval of the output";
  EXPECT_NE(std::system((run.command("bad", 2, "--eval-at-tokens 128") + " >/dev/null 2>&1").c_str()), 0)
      << "--eval-at-tokens without --eval-data must be refused";
}

TEST(DistillCli, KillNineThenResumeReproducesTheLossCurve) {
  TempDir d;
  CliRun run(d.path);
  const int64_t N = 120;
  test::run_or_fail(run.command("full", N, "") + " >/dev/null 2>&1");
  // The same run, killed with SIGKILL once a checkpoint exists and some steps past it ran.
  fs::path log = d.path / "cut.state" / "distill_log.csv";
  std::string start =
      run.command("cut", N, "--checkpoint-every 5") + " >/dev/null 2>&1 & echo $!";
  FILE* p = ::popen(start.c_str(), "r");
  ASSERT_NE(p, nullptr);
  long pid = 0;
  ASSERT_EQ(std::fscanf(p, "%ld", &pid), 1);
  ::pclose(p);
  int rows = 0;
  for (int i = 0; i < 6000 && rows < 13; ++i) {  // wait for step 12 (checkpoint at 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::error_code ec;
    if (fs::exists(log, ec)) {
      std::string t = read_file(log);
      rows = int(std::count(t.begin(), t.end(), '\n')) - 1;
    }
  }
  ASSERT_GE(rows, 12) << "the run did not reach step 12 in time";
  ASSERT_LT(rows, N) << "the run ended before the kill: make its steps slower";
  ASSERT_EQ(::kill(pid_t(pid), SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(pid_t(pid), 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(fs::exists(d.path / "cut")) << "a killed run must leave no output folder";
  ASSERT_TRUE(fs::exists(d.path / "cut.state" / kDistillStateFile));
  test::run_or_fail(run.command("cut", N, "--checkpoint-every 5 --resume") + " >/dev/null 2>&1");
  std::vector<double> full = run.losses("full"), cut = run.losses("cut");
  ASSERT_EQ(full.size(), size_t(N));
  EXPECT_EQ(cut, full);  // the printed (%.8g) losses of every step, equal
  LlamaModel a = load_checkpoint(d.path / "full"), b = load_checkpoint(d.path / "cut");
  expect_same_weights(a, b);
}

TEST(DistillCli, TwoDataParallelProcessesMatchOneProcess) {
  TempDir d;
  CliRun run(d.path);
  const int64_t N = 6;
  test::run_or_fail(run.command("single", N, "") + " >/dev/null 2>&1");
  std::string init = "file://" + (d.path / "rendezvous").string();
  std::string ranks;
  for (int r = 0; r < 2; ++r)
    ranks += run.command("ddp", N, fmt::format("--world-size 2 --rank {} --init-method {} "
                                               "--rendezvous-timeout 120", r, init)) +
             " >/dev/null 2>>" + (d.path / fmt::format("rank{}.log", r)).string() +
             fmt::format(" & p{}=$!; ", r);
  test::run_or_fail(ranks + "wait $p0 && wait $p1");
  ASSERT_TRUE(fs::exists(d.path / "ddp" / "model.safetensors"))
      << read_file(d.path / "rank0.log") << read_file(d.path / "rank1.log");
  LlamaModel one = load_checkpoint(d.path / "single"), two = load_checkpoint(d.path / "ddp");
  auto p1 = one.weights.parameters(), p2 = two.weights.parameters();
  ASSERT_EQ(p1.size(), p2.size());
  double worst = 0;
  for (size_t i = 0; i < p1.size(); ++i) {
    double scale = std::max(1e-3, p1[i].abs().max().item<double>());
    worst = std::max(worst, (p1[i] - p2[i]).abs().max().item<double>() / scale);
  }
  EXPECT_LT(worst, 1e-4) << "largest relative weight difference, 1 vs 2 processes";
  // Not trivially equal: the student moved away from its starting point.
  LlamaModel start = load_checkpoint(d.path / "student");
  EXPECT_GT((start.weights.embed_tokens - two.weights.embed_tokens).abs().max().item<double>(),
            1e-3);
  std::vector<double> l1 = run.losses("single"), l2 = run.losses("ddp");
  ASSERT_EQ(l1.size(), l2.size());
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l2[i], 1e-5 * l1[i]) << "step " << i;
}

}  // namespace
}  // namespace ac
