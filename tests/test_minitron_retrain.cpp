// The lightweight retraining (search/minitron.h retrain_top_candidates) on the small random
// model of the search tests, with the roofline cost model of a GPU spec:
//   - exactly the top_k candidates by KL after pruning are retrained, the best after retraining
//     is chosen (and only it);
//   - each retrained KL equals an independent prune -> distill -> KL of the same candidate;
//   - the search tokens grow by exactly the forward tokens spent (teacher + student);
//   - bad options and an unranked search are ConfigErrors.
#include <algorithm>
#include <optional>
#include <set>

#include "pipeline/limits.h"
#include "common/error.h"
#include "distill/bld.h"
#include "prune/pruning_map.h"
#include "hardware/cost_model.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/minitron.h"
#include "search/outcome.h"
#include "search/placement.h"
#include "search/repair.h"
#include "search_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::gpu_scenario;
using ac::test::importance_of;
using ac::test::random_tokens;
using ac::test::random_text;
using ac::test::small_model;

namespace {

struct Fixture {
  LlamaModel teacher = small_model();
  Importance imp = importance_of(teacher);
  // llama.cpp builds any per-layer structure: this parent's FFN width (96) is no DeciLM width.
  Scenario sc = gpu_scenario({}, "llama.cpp");
  std::vector<at::Tensor> calib = {random_tokens(2, 16, 97, 11), random_tokens(2, 16, 97, 12)};
  TokenDataset train = random_text(4000, 97, 13);

  SearchResult search() {
    CostFn cost = [&](const ModelConfig& c) { return predict(c, sc, nullptr); };
    MinitronOptions mo;
    mo.width_granularity = 16;
    mo.max_ranked = 6;
    // Binding: halfway between the smallest uniform shape's TPOT and the parent's.
    double least = 1e300;
    for (int64_t D : uniform_space(teacher.config, mo).hidden_sizes) least = D;
    ModelConfig smallest = teacher.config;
    smallest.hidden_size = int64_t(least);
    for (auto& l : smallest.layers) l = LayerConfig{1, 1, l.head_dim, 16};
    const double full = cost(teacher.config).tpot_ms, low = cost(smallest).tpot_ms;
    Limits lim;
    lim.tpot_ms = low + 0.1 * (full - low);
    return minitron_search(teacher, imp, cost, lim, calib, mo);
  }

  RetrainOptions retrain(int64_t top_k) {
    RetrainOptions o;
    o.top_k = top_k;
    o.distill.token_budget = 4 * 2 * 32;  // 4 steps of [2, 32]
    o.distill.batch_size = 2;
    o.distill.seq_len = 32;
    o.distill.lr = 2e-3;
    o.distill.min_lr = 2e-4;
    o.distill.warmup_steps = 1;
    o.distill.seed = 7;
    o.distill.show_progress = false;
    return o;
  }
};

int64_t tokens_of(const std::vector<at::Tensor>& batches) {
  int64_t n = 0;
  for (const auto& b : batches) n += b.numel();
  return n;
}

// Indices of r's candidates ranked by KL after pruning, best first (the retraining's order).
std::vector<size_t> ranked_by_prune_loss(const SearchResult& r) {
  std::vector<size_t> ranked;
  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (r.candidates[i].loss_after_prune >= 0) ranked.push_back(i);
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    return r.candidates[a].loss_after_prune < r.candidates[b].loss_after_prune;
  });
  return ranked;
}

// A short differentiable search on the fixture's model (12 steps of [2, 16] windows).
SearchSettings small_search_settings() {
  SearchSettings st;
  st.autocompress.space = ac::test::space_options();
  st.autocompress.steps = 12;
  st.autocompress.show_progress = false;
  st.autocompress_batch_size = 2;
  st.autocompress_seq_len = 16;
  st.autocompress_batches = 2;
  return st;
}

}  // namespace

TEST(MinitronRetrain, RetrainsTheTopKAndKeepsTheBestAfterRetraining) {
  Fixture f;
  SearchResult r = f.search();
  const std::vector<size_t> ranked = ranked_by_prune_loss(r);
  ASSERT_GE(ranked.size(), 3u) << "the fixture must rank at least 3 candidates";
  const int64_t before = r.search_tokens;
  const RetrainOptions opt = f.retrain(3);
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);

  // Exactly the 3 best by KL after pruning were retrained.
  for (size_t k = 0; k < r.candidates.size(); ++k) {
    const bool top = std::find(ranked.begin(), ranked.begin() + 3, k) != ranked.begin() + 3;
    EXPECT_EQ(r.candidates[k].loss_after_retrain >= 0, top) << "candidate " << k;
  }
  // The chosen one has the lowest KL after retraining, and it alone is chosen.
  size_t best = ranked[0];
  for (size_t k = 0; k < 3; ++k)
    if (r.candidates[ranked[k]].loss_after_retrain < r.candidates[best].loss_after_retrain) best = ranked[k];
  EXPECT_EQ(std::count_if(r.candidates.begin(), r.candidates.end(), [](const Candidate& c) { return c.chosen; }), 1);
  EXPECT_TRUE(r.candidates[best].chosen);
  EXPECT_EQ(describe(r.best.config), describe(r.candidates[best].config));
  EXPECT_DOUBLE_EQ(r.best.loss_after_retrain, r.candidates[best].loss_after_retrain);
  // The retraining changed the weights (on this random teacher and random text it need not
  // lower the KL; the by-hand check below pins the value).
  EXPECT_NE(r.best.loss_after_retrain, r.best.loss_after_prune);

  // Tokens: the teacher over the calibration batches once; per candidate its distillation
  // (teacher + student forward of every token) and one student pass over the calibration.
  const int64_t calib = tokens_of(f.calib);
  EXPECT_EQ(r.search_tokens - before, calib + 3 * (2 * opt.distill.token_budget + calib));

  // Independent: prune, distill and measure the chosen candidate again by hand.
  LlamaModel student = drop_removed_blocks(prune_model(f.teacher, f.imp, r.best.target));
  student.weights = clone(student.config, student.weights);
  distill(f.teacher, student, f.train, opt.distill);
  std::vector<at::Tensor> teacher_logprobs;
  {
    at::NoGradGuard no_grad;
    for (const auto& b : f.calib) teacher_logprobs.push_back(at::log_softmax(f.teacher.forward(b), -1));
  }
  const double kl = mean_kl(teacher_logprobs, student, f.calib);
  std::printf("chosen %s: KL after pruning %.5f, after retraining %.5f (by hand %.5f)\n",
              describe(r.best.config).c_str(), r.best.loss_after_prune, r.best.loss_after_retrain, kl);
  EXPECT_NEAR(kl, r.best.loss_after_retrain, 1e-6);
}

// schedule_tokens: a retraining is the first steps of the final run's own schedule. Its KL equals
// that of a full-budget distillation of the same candidate observed (by the learning-curve hook)
// after the same steps, and differs from a short run of its own (another warm-up and decay).
TEST(MinitronRetrain, APrefixOfTheFinalScheduleIsTheFinalRunsStart) {
  Fixture f;
  SearchResult r = f.search();
  const int64_t before = r.search_tokens;
  RetrainOptions opt = f.retrain(1);
  // The final run: 16 steps, 2 of warm-up, 4 retrained. A run of its own with the same
  // warm-up decays to min_lr by its 4th step; the final schedule is still near lr there.
  opt.distill.warmup_steps = 2;
  opt.schedule_tokens = 4 * opt.distill.token_budget;
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  EXPECT_EQ(r.search_tokens - before, tokens_of(f.calib) + 2 * opt.distill.token_budget + tokens_of(f.calib));

  std::vector<at::Tensor> reference;
  {
    at::NoGradGuard no_grad;
    for (const auto& b : f.calib) reference.push_back(at::log_softmax(f.teacher.forward(b), -1));
  }
  DistillOptions final_run = opt.distill;
  final_run.token_budget = opt.schedule_tokens;
  final_run.eval_at_tokens = {opt.distill.token_budget};
  double at_prefix = -1;
  final_run.on_eval = [&](int64_t, int64_t, const LlamaModel& s) { at_prefix = mean_kl(reference, s, f.calib); };
  LlamaModel student = drop_removed_blocks(prune_model(f.teacher, f.imp, r.best.target));
  student.weights = clone(student.config, student.weights);
  distill(f.teacher, student, f.train, final_run);
  EXPECT_NEAR(at_prefix, r.best.loss_after_retrain, 1e-6);

  LlamaModel own = drop_removed_blocks(prune_model(f.teacher, f.imp, r.best.target));
  own.weights = clone(own.config, own.weights);
  distill(f.teacher, own, f.train, opt.distill);  // 4 steps with their own decay
  EXPECT_GT(std::abs(mean_kl(reference, own, f.calib) - r.best.loss_after_retrain), 1e-6);
}

// bld_tokens: each retraining starts with the blockwise local distillation (distill/bld.h) that
// the final run starts with; its KL equals prune -> BLD -> distill by hand, differs from the
// retraining without it, and the BLD's tokens count twice (teacher and blocks).
TEST(MinitronRetrain, WithBldEachRetrainingStartsFromTheBlockwiseDistillation) {
  Fixture f;
  SearchResult r = f.search();
  SearchResult plain = r;
  const int64_t before = r.search_tokens;
  RetrainOptions opt = f.retrain(1);
  opt.bld_tokens = 3 * 2 * 32;  // 3 BLD steps of [2, 32]
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  const int64_t calib = tokens_of(f.calib);
  EXPECT_EQ(r.search_tokens - before, calib + 2 * opt.bld_tokens + 2 * opt.distill.token_budget + calib);

  const PrunePlan plan = plan_pruning(f.teacher.config, f.imp, r.best.target);
  LlamaModel student = drop_removed_blocks(apply_plan(f.teacher, plan));
  student.weights = clone(student.config, student.weights);
  BldOptions b;
  b.token_budget = opt.bld_tokens;
  b.seq_len = opt.distill.seq_len;
  b.seed = opt.distill.seed;
  b.show_progress = false;
  const BldResult br = blockwise_local_distill(
      f.teacher, student, pruning_map_from_plan(f.teacher.config, plan, /*blocks_dropped=*/true),
      f.train, b);
  ASSERT_FALSE(br.blocks.empty());
  distill(f.teacher, student, f.train, opt.distill);
  std::vector<at::Tensor> reference;
  {
    at::NoGradGuard no_grad;
    for (const auto& t : f.calib) reference.push_back(at::log_softmax(f.teacher.forward(t), -1));
  }
  EXPECT_NEAR(mean_kl(reference, student, f.calib), r.best.loss_after_retrain, 1e-6);
  retrain_top_candidates(f.teacher, f.imp, plain, f.train, f.calib, f.retrain(1));
  EXPECT_EQ(describe(plain.best.config), describe(r.best.config));
  EXPECT_GT(std::abs(plain.best.loss_after_retrain - r.best.loss_after_retrain), 1e-6);
}

namespace {
// Finalist `c` of the fixture pruned, its blockwise start run by hand (the final run's options),
// then `steps` steps of the final schedule (0: none).
LlamaModel by_hand(Fixture& f, const Candidate& c, const RetrainOptions& opt, int64_t steps) {
  DistillOptions final_run = opt.distill;
  final_run.token_budget = opt.schedule_tokens;
  const PrunePlan plan = plan_pruning(f.teacher.config, f.imp, c.target);
  LlamaModel s = drop_removed_blocks(apply_plan(f.teacher, plan));
  s.weights = clone(s.config, s.weights);
  blockwise_local_distill(f.teacher, s,
                          pruning_map_from_plan(f.teacher.config, plan, /*blocks_dropped=*/true),
                          f.train, bld_options_for(final_run, opt.bld_tokens));
  if (steps > 0) {
    final_run.stop_after_steps = steps;
    distill(f.teacher, s, f.train, final_run);
  }
  return s;
}

std::vector<at::Tensor> reference_of(Fixture& f) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& t : f.calib) out.push_back(at::log_softmax(f.teacher.forward(t), -1));
  return out;
}

// The final run continuing the kept state ends weight for weight as one from scratch (the
// blockwise start, then every step of the schedule).
void expect_final_run_from_kept_state(Fixture& f, const SearchResult& r, const RetrainOptions& opt,
                                      const fs::path& dir) {
  DistillOptions final_run = opt.distill;
  final_run.token_budget = opt.schedule_tokens;
  const PrunePlan plan = plan_pruning(f.teacher.config, f.imp, r.best.target);
  LlamaModel continued = drop_removed_blocks(apply_plan(f.teacher, plan));
  continued.weights = clone(continued.config, continued.weights);
  DistillOptions resumed = final_run;
  resumed.state_dir = dir;
  resumed.resume = true;
  EXPECT_EQ(distill(f.teacher, continued, f.train, resumed).tokens, opt.schedule_tokens);
  LlamaModel scratch = by_hand(f, r.best, opt, 0);
  distill(f.teacher, scratch, f.train, final_run);
  const std::vector<at::Tensor> pc = continued.weights.parameters(), ps = scratch.weights.parameters();
  ASSERT_EQ(pc.size(), ps.size());
  double worst = 0;
  for (size_t i = 0; i < pc.size(); ++i)
    worst = std::max(worst, (pc[i] - ps[i]).abs().max().item<double>());
  EXPECT_LE(worst, 1e-6);
}
}  // namespace

// state_root: the chosen finalist's retraining (its blockwise start and the final schedule's first
// steps) is kept, and a final run that continues it ends with the same model as a final run
// from scratch (blockwise start, then every step of the schedule), weight for weight.
TEST(MinitronRetrain, TheFinalRunContinuesTheChosenRetrainingToTheSameModel) {
  Fixture f;
  ac::test::TempDir tmp;
  SearchResult r = f.search();
  RetrainOptions opt = f.retrain(2);
  opt.distill.warmup_steps = 2;
  opt.schedule_tokens = 4 * opt.distill.token_budget;  // 16 steps, the first 4 retrained
  opt.bld_tokens = 3 * 2 * 32;                          // 3 blockwise steps of [2, 32]
  opt.state_root = tmp.path / "states";
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  std::set<std::string> kept;
  for (const auto& e : fs::directory_iterator(opt.state_root)) kept.insert(e.path().filename().string());
  EXPECT_EQ(kept, (std::set<std::string>{"chosen", "chosen.json"}));  // the other finalist's gone

  // Another architecture or another schedule does not take it.
  ModelConfig other = r.best.config;
  other.layers.front().intermediate_size += 16;
  EXPECT_FALSE(adopt_retraining_state(opt.state_root, other, opt.schedule_tokens, tmp.path / "x"));
  EXPECT_FALSE(adopt_retraining_state(opt.state_root, r.best.config, 2 * opt.schedule_tokens,
                                      tmp.path / "x"));
  const std::optional<RetrainedState> s =
      adopt_retraining_state(opt.state_root, r.best.config, opt.schedule_tokens, tmp.path / "final");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->distill_tokens, opt.distill.token_budget);
  EXPECT_EQ(s->bld_tokens, opt.bld_tokens);
  EXPECT_FALSE(adopt_retraining_state(opt.state_root, r.best.config, opt.schedule_tokens,
                                      tmp.path / "again"));  // moved, not copied

  // Continued (the student after the blockwise start and 4 steps) against from scratch (the
  // blockwise start, then all 16 steps).
  expect_final_run_from_kept_state(f, r, opt, tmp.path / "final");
}


// FinalistJudge::blockwise: each finalist is judged by its KL right after its blockwise start
// (equal to prune -> BLD -> KL by hand), no distillation step runs, the teacher's states of the
// blockwise batches are computed once for every finalist (the search tokens grow by the
// reference pass, the teacher's blockwise tokens once, and each finalist's blockwise tokens and
// judging pass), and the kept state is the final schedule's step 0.
TEST(MinitronRetrain, JudgedAfterTheBlockwiseStartAloneTheTeacherRunsOnceForEveryFinalist) {
  Fixture f;
  ac::test::TempDir tmp;
  SearchResult r = f.search();
  const int64_t before = r.search_tokens;
  RetrainOptions opt = f.retrain(2);
  opt.schedule_tokens = 4 * opt.distill.token_budget;
  opt.bld_tokens = 3 * 2 * 32;  // 3 blockwise steps of [2, 32]
  opt.judge = FinalistJudge::blockwise;
  opt.state_root = tmp.path / "states";
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  const int64_t calib = tokens_of(f.calib);
  EXPECT_EQ(r.search_tokens - before, calib + opt.bld_tokens + 2 * (opt.bld_tokens + calib));
  const std::vector<at::Tensor> reference = reference_of(f);
  int judged = 0;
  for (const Candidate& c : r.candidates) {
    if (c.loss_after_bld < 0) continue;
    ++judged;
    EXPECT_NEAR(mean_kl(reference, by_hand(f, c, opt, 0), f.calib), c.loss_after_bld, 1e-6)
        << describe(c.config);
    EXPECT_EQ(c.loss_after_retrain, c.loss_after_bld);
    EXPECT_LE(r.best.loss_after_bld, c.loss_after_bld);
  }
  EXPECT_EQ(judged, 2);
  const std::optional<RetrainedState> st =
      adopt_retraining_state(opt.state_root, r.best.config, opt.schedule_tokens, tmp.path / "final");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->distill_tokens, 0);
  EXPECT_EQ(st->bld_tokens, opt.bld_tokens);
  expect_final_run_from_kept_state(f, r, opt, tmp.path / "final");
}

// FinalistJudge::halving: every finalist is judged after its blockwise start, the better half
// (at least 2) by that KL go on to the retraining (continuing their step-0 state: the same
// model as prune -> BLD -> the schedule's first steps by hand) and the best after it is kept;
// the others are not retrained. Tokens: the reference pass, the teacher's blockwise tokens once,
// each finalist's blockwise tokens and judging pass, and each retrained one's steps twice and a
// second judging pass.
TEST(MinitronRetrain, HalvingRetrainsTheBetterHalfByTheKlAfterTheBlockwiseStart) {
  Fixture f;
  ac::test::TempDir tmp;
  SearchResult r = f.search();
  const int64_t before = r.search_tokens;
  RetrainOptions opt = f.retrain(5);
  opt.schedule_tokens = 4 * opt.distill.token_budget;  // 16 steps, the first 4 retrained
  opt.bld_tokens = 3 * 2 * 32;
  opt.judge = FinalistJudge::halving;
  opt.state_root = tmp.path / "states";
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  std::vector<const Candidate*> judged, retrained;
  for (const Candidate& c : r.candidates) {
    if (c.loss_after_bld >= 0) judged.push_back(&c);
    if (c.loss_after_retrain >= 0) retrained.push_back(&c);
  }
  const size_t n = judged.size();
  ASSERT_GE(n, 3u) << "the fixture should rank at least 3 distinct candidates";
  ASSERT_EQ(retrained.size(), std::max<size_t>(2, (n + 1) / 2));
  std::vector<double> bld;
  for (const Candidate* c : judged) bld.push_back(c->loss_after_bld);
  std::sort(bld.begin(), bld.end());
  const double cut = bld[retrained.size() - 1];
  const std::vector<at::Tensor> reference = reference_of(f);
  for (const Candidate* c : retrained) {
    EXPECT_LE(c->loss_after_bld, cut) << describe(c->config);
    EXPECT_NEAR(mean_kl(reference, by_hand(f, *c, opt, 4), f.calib), c->loss_after_retrain, 1e-6)
        << describe(c->config);
    EXPECT_LE(r.best.loss_after_retrain, c->loss_after_retrain);
  }
  for (const Candidate* c : judged)
    if (c->loss_after_retrain < 0) {
      EXPECT_GE(c->loss_after_bld, cut) << describe(c->config);
    }
  const int64_t calib = tokens_of(f.calib);
  EXPECT_EQ(r.search_tokens - before,
            calib + opt.bld_tokens + int64_t(n) * (opt.bld_tokens + calib) +
                int64_t(retrained.size()) * (2 * opt.distill.token_budget + calib));
  const std::optional<RetrainedState> st =
      adopt_retraining_state(opt.state_root, r.best.config, opt.schedule_tokens, tmp.path / "final");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->distill_tokens, opt.distill.token_budget);
  expect_final_run_from_kept_state(f, r, opt, tmp.path / "final");
}

TEST(MinitronRetrain, TopKLargerThanTheRankedSetRetrainsEveryRankedCandidate) {
  Fixture f;
  SearchResult r = f.search();
  const int64_t n_ranked = std::count_if(r.candidates.begin(), r.candidates.end(),
                                         [](const Candidate& c) { return c.loss_after_prune >= 0; });
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, f.retrain(1000));
  EXPECT_EQ(std::count_if(r.candidates.begin(), r.candidates.end(),
                          [](const Candidate& c) { return c.loss_after_retrain >= 0; }),
            n_ranked);
}

TEST(MinitronRetrain, BadOptionsAndAnUnrankedSearchAreConfigErrors) {
  Fixture f;
  SearchResult r = f.search();
  EXPECT_THROW(retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, f.retrain(0)), ConfigError);
  SearchResult unranked = r;
  for (auto& c : unranked.candidates) c.loss_after_prune = -1;
  try {
    retrain_top_candidates(f.teacher, f.imp, unranked, f.train, f.calib, f.retrain(2));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no candidate was ranked"), std::string::npos) << e.what();
  }
}

// A search that lists one architecture twice (the differentiable search's refined pick is often
// one of its ranked proposals) retrains it once: top_k counts distinct architectures.
TEST(MinitronRetrain, AnArchitectureListedTwiceIsRetrainedOnce) {
  Fixture f;
  SearchResult r = f.search();
  const std::vector<size_t> ranked = ranked_by_prune_loss(r);
  ASSERT_GE(ranked.size(), 2u);
  // The best candidate again, at the end of the list: ranked second by KL after pruning.
  r.candidates.push_back(r.candidates[ranked[0]]);
  r.candidates.back().chosen = false;
  const int64_t before = r.search_tokens;
  const RetrainOptions opt = f.retrain(2);
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, opt);
  EXPECT_GE(r.candidates[ranked[0]].loss_after_retrain, 0);
  EXPECT_GE(r.candidates[ranked[1]].loss_after_retrain, 0) << "the second distinct one";
  EXPECT_LT(r.candidates.back().loss_after_retrain, 0) << "the copy was retrained again";
  const int64_t calib = tokens_of(f.calib);
  EXPECT_EQ(r.search_tokens - before, calib + 2 * (2 * opt.distill.token_budget + calib));
}

// The differentiable search with retraining (run_search_method, autocompress_retrain): its best
// distinct proposals are retrained, the pick is the best after retraining, the tokens counted.
TEST(MinitronRetrain, TheDifferentiableSearchRetrainsItsBestDistinctProposals) {
  Fixture f;
  CostFn cost = [&](const ModelConfig& c) { return predict(c, f.sc, nullptr); };
  const double full = cost(f.teacher.config).tpot_ms;
  const double least =
      smallest_reachable(build_search_space(f.teacher.config, f.imp, ac::test::space_options()), cost)
          .tpot_ms;
  Limits lim;
  lim.tpot_ms = least + 0.6 * (full - least);  // binding, reachable
  const RunLimits run = RunLimits::absolute(lim, 0);  // lim is inside the reachable range
  SearchSettings st = small_search_settings();
  TokenDataset calibration = random_text(2000, 97, 17);
  const SearchOutcome plain = run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr,
                                                run, calibration, 16, st, &f.train);
  st.autocompress_retrain = true;
  st.autocompress_retrain_options = f.retrain(2);
  const SearchOutcome o = run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run,
                                            calibration, 16, st, &f.train);
  const nlohmann::json& cands = o.search["candidates"];
  int retrained = 0;
  double best_after = 1e300;
  for (const auto& c : cands)
    if (c["loss_after_retrain"].get<double>() >= 0) {
      ++retrained;
      best_after = std::min(best_after, c["loss_after_retrain"].get<double>());
    }
  EXPECT_EQ(retrained, 2) << cands.dump();
  EXPECT_DOUBLE_EQ(o.best.loss_after_retrain, best_after);
  EXPECT_LE(o.best.cost.tpot_ms, lim.tpot_ms);
  // The retraining spent tokens: 2 candidates x (teacher + student forward of the budget).
  EXPECT_GE(o.search_tokens - plain.search_tokens, 2 * 2 * st.autocompress_retrain_options.distill.token_budget);
}

// Two candidates that deploy as one shape with other layers removed are two candidates: both
// retrained (told apart by the target; by the deployed config alone the second was dropped as
// a duplicate, and the one with the lower KL after pruning decided alone).
TEST(MinitronRetrain, OneShapeWithOtherLayersRemovedIsAnotherCandidate) {
  Fixture f;
  auto without_block = [&](size_t l) {
    ModelConfig t = f.teacher.config;
    t.layers[l].attention_no_op = t.layers[l].ffn_no_op = true;
    t.layers[l].num_attention_heads = t.layers[l].num_key_value_heads = 0;
    t.layers[l].intermediate_size = 0;
    return t;
  };
  SearchResult r;
  r.method = "autocompress";
  for (size_t l : {1, 2}) {
    Candidate c = costed_candidate(without_block(l), [](const ModelConfig&) { return CostEstimate{}; }, {});
    c.loss_after_prune = 0.5 + 0.1 * double(l);
    r.candidates.push_back(c);
  }
  ASSERT_EQ(describe(r.candidates[0].config), describe(r.candidates[1].config));
  retrain_top_candidates(f.teacher, f.imp, r, f.train, f.calib, f.retrain(2));
  EXPECT_GE(r.candidates[0].loss_after_retrain, 0);
  EXPECT_GE(r.candidates[1].loss_after_retrain, 0);
  EXPECT_NE(r.candidates[0].loss_after_retrain, r.candidates[1].loss_after_retrain);
}

// Restarts: the first cap's search again with other Gumbel seeds (restart_seed), each
// restart's pick a finalist however small top_k is, every candidate pooled; restart 0 is the
// search of the run's own seed. A restart that repeats a pick gives its place to a placement
// variant of the picks.
TEST(MinitronRetrain, EachRestartsPickIsAFinalist) {
  EXPECT_EQ(restart_seed(7, 0), 7u);
  EXPECT_EQ(restart_seed(7, 2), 2007u);
  Fixture f;
  CostFn cost = [&](const ModelConfig& c) { return predict(c, f.sc, nullptr); };
  const double full = cost(f.teacher.config).tpot_ms;
  const double least =
      smallest_reachable(build_search_space(f.teacher.config, f.imp, ac::test::space_options()), cost).tpot_ms;
  Limits lim;
  lim.tpot_ms = least + 0.35 * (full - least);  // where the fixture's seeds pick differently
  const RunLimits run = RunLimits::absolute(lim, 0);
  SearchSettings st = small_search_settings();
  st.autocompress_attention_caps = {-1};
  st.autocompress.seed = 5;
  TokenDataset calibration = random_text(2000, 97, 17);
  std::vector<SearchOutcome> alone;
  std::set<std::string> picks;
  for (int64_t k = 0; k < 3; ++k) {
    SearchSettings one = st;
    one.autocompress.seed = restart_seed(5, k);
    alone.push_back(run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run,
                                      calibration, 16, one, &f.train));
    picks.insert(describe(alone.back().best.config));
  }
  ASSERT_EQ(picks.size(), 2u) << "the restarts must find two architectures for this test";
  st.autocompress_restarts = 3;
  st.autocompress_retrain = true;
  st.autocompress_retrain_options = f.retrain(1);  // grows to hold every pick
  const SearchOutcome o = run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run,
                                            calibration, 16, st, &f.train);
  ASSERT_EQ(o.search["searches"].size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(o.search["searches"][size_t(k)]["seed"].get<uint64_t>(), restart_seed(5, k));
    EXPECT_EQ(o.search["searches"][size_t(k)]["pick"], describe(alone[size_t(k)].best.config));
  }
  std::set<std::string> retrained;
  for (const auto& c : o.search["candidates"])
    if (c["loss_after_retrain"].get<double>() >= 0) retrained.insert(c["describe"].get<std::string>());
  // Three places, two distinct picks: the third place goes to the picks' attention-placement
  // variant (search/placement.h) that meets the limits with the lowest KL after pruning on the
  // ranking's batches, derived here independently of run_search_method.
  SearchSpaceOptions so = st.autocompress.space;
  so.structure = f.sc.engine_spec.structure;
  const SearchSpace space = build_search_space(f.teacher.config, f.imp, so);
  const std::vector<at::Tensor> rank_batches = calibration.sequential_batches(
      st.autocompress_batch_size, st.autocompress_seq_len, st.autocompress.rank_batches);
  const std::vector<at::Tensor> reference = teacher_logprobs(f.teacher, rank_batches);
  std::string best_variant;
  double best_kl = 1e300;
  size_t variants = 0;
  std::set<std::string> seen = picks;
  for (const SearchOutcome& a : alone) {
    for (const ModelConfig& v : attention_placement_variants(a.best.target, space)) {
      const Candidate k = costed_candidate(v, cost, run.search_with_margin());
      if (!k.violation.empty() || !seen.insert(describe(k.config)).second) continue;
      ++variants;
      const double kl = mean_kl(reference, drop_removed_blocks(prune_model(f.teacher, f.imp, v)),
                                rank_batches);
      if (kl < best_kl) best_kl = kl, best_variant = describe(k.config);
    }
  }
  ASSERT_GT(variants, 0u) << "the picks must have a placement variant within the limits";
  std::set<std::string> expected = picks;
  expected.insert(best_variant);
  EXPECT_EQ(retrained, expected) << o.search["candidates"].dump();
  ASSERT_EQ(o.search["placement_variants"].size(), variants) << o.search["placement_variants"].dump();
  for (const auto& v : o.search["placement_variants"]) {
    EXPECT_EQ(v["finalist"].get<bool>(), v["describe"] == best_variant) << v.dump();
    if (v["describe"] == best_variant) {
      EXPECT_NEAR(v["loss_after_prune"].get<double>(), best_kl, 1e-6);
    }
  }
  size_t pooled = 0;
  int64_t tokens = 0;
  for (const SearchOutcome& a : alone) {
    pooled += a.search["candidates"].size();
    tokens += a.search_tokens;
  }
  EXPECT_EQ(o.search["candidates"].size(), pooled + 1);  // and the variant
  EXPECT_GT(o.search_tokens, tokens);  // the three searches, the variants' KLs, the retrainings
  // The trajectory is restart 0's.
  EXPECT_EQ(o.trajectory.size(), alone[0].trajectory.size());

  // Without the retraining one search runs: its pick is the result.
  st.autocompress_retrain = false;
  const SearchOutcome plain = run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr,
                                                run, calibration, 16, st, &f.train);
  EXPECT_EQ(plain.search["searches"].size(), 1u);
  EXPECT_EQ(describe(plain.best.config), describe(alone[0].best.config));

  st.autocompress_restarts = 0;
  EXPECT_THROW(run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run, calibration,
                                 16, st, &f.train),
               ConfigError);
}

// Several attention caps: one differentiable search per cap, every candidate pooled, and each
// search's pick retrained first, before the ranking by KL after pruning fills top_k. A cap's
// pick never removes attention in more layers than the cap allows.
TEST(MinitronRetrain, EachCappedSearchsPickIsAFinalist) {
  Fixture f;
  CostFn cost = [&](const ModelConfig& c) { return predict(c, f.sc, nullptr); };
  const double full = cost(f.teacher.config).tpot_ms;
  SearchSpaceOptions capped = ac::test::space_options();
  capped.max_attention_removed = 1;
  const double least = smallest_reachable(build_search_space(f.teacher.config, f.imp, capped), cost).tpot_ms;
  Limits lim;
  lim.tpot_ms = least + 0.6 * (full - least);  // reachable under either cap
  const RunLimits run = RunLimits::absolute(lim, 0);
  SearchSettings st = small_search_settings();
  TokenDataset calibration = random_text(2000, 97, 17);
  std::vector<SearchOutcome> alone;
  for (int64_t cap : {-1, 1}) {
    st.autocompress_attention_caps = {cap};
    alone.push_back(run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run,
                                      calibration, 16, st, &f.train));
  }
  int64_t free_layers = 0;
  for (const LayerConfig& l : alone[1].best.target.layers) free_layers += !l.has_attention();
  EXPECT_LE(free_layers, 1) << describe(alone[1].best.config);

  st.autocompress_attention_caps = {-1, 1};
  st.autocompress_retrain = true;
  st.autocompress_retrain_options = f.retrain(2);
  const SearchOutcome o = run_search_method("autocompress", f.teacher, f.imp, f.sc, nullptr, run,
                                            calibration, 16, st, &f.train);
  ASSERT_EQ(o.search["searches"].size(), 2u);
  std::set<std::string> retrained;
  for (const auto& c : o.search["candidates"])
    if (c["loss_after_retrain"].get<double>() >= 0) retrained.insert(c["describe"].get<std::string>());
  // Both picks were finalists (were they one architecture, as here, a placement variant of it
  // takes the second place: search/placement.h).
  EXPECT_TRUE(retrained.count(describe(alone[0].best.config))) << o.search["candidates"].dump();
  EXPECT_TRUE(retrained.count(describe(alone[1].best.config))) << o.search["candidates"].dump();
  EXPECT_EQ(retrained.size(), 2u);
  const bool repeated = describe(alone[0].best.target) == describe(alone[1].best.target);
  const int64_t pooled = int64_t(alone[0].search["candidates"].size() + alone[1].search["candidates"].size());
  EXPECT_EQ(int64_t(o.search["candidates"].size()), pooled + (repeated ? 1 : 0));
  size_t variant_finalists = 0;
  for (const auto& v : o.search["placement_variants"]) variant_finalists += v["finalist"].get<bool>();
  EXPECT_EQ(variant_finalists, repeated ? 1u : 0u);
}
