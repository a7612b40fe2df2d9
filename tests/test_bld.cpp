// Blockwise local distillation (distill/bld.h): which blocks it trains, that each starts from the
// teacher's own residual stream (its first loss equals a value computed from the teacher's
// states alone), that it lowers each trained block's loss and the whole student's KL to the
// teacher, and that it leaves every other weight as it was.
#include <gtest/gtest.h>

#include "common/error.h"
#include "distill/bld.h"
#include "distill/hidden_loss.h"
#include "distill/loss.h"
#include "pipeline/compress.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search_fixture.h"
#include "test_util.h"

namespace ac {
namespace {

constexpr int64_t kV = 48, kD = 32, kF = 48;

ModelConfig tiny(int64_t layers) {
  ModelConfig c = ModelConfig::uniform(kV, kD, layers, LayerConfig{4, 2, 8, kF});
  c.tie_word_embeddings = true;
  return c;
}

// The teacher's layers `keep` on the full hidden size: the student depth pruning leaves.
LlamaModel drop_layers(const LlamaModel& t, const std::vector<int64_t>& keep) {
  LlamaModel s{t.config, clone(t.config, t.weights)};
  s.config.layers.clear();
  s.weights.layers.clear();
  for (int64_t l : keep) {
    s.config.layers.push_back(t.config.layers[size_t(l)]);
    s.weights.layers.push_back(clone(t.config, t.weights).layers[size_t(l)]);
  }
  return s;
}

PruningMap map_of_layers(const ModelConfig& teacher, std::vector<int64_t> layers) {
  PruningMap m = identity_pruning_map(teacher);
  m.layers = std::move(layers);
  return m;
}

// The teacher with layer `l`'s FFN cut to its first F/2 neurons.
LlamaModel narrow_ffn(const LlamaModel& t, int64_t l) {
  LlamaModel s{t.config, clone(t.config, t.weights)};
  s.config.layers[size_t(l)].intermediate_size = kF / 2;
  LayerWeights& w = s.weights.layers[size_t(l)];
  w.gate_proj = w.gate_proj.narrow(0, 0, kF / 2).clone();
  w.up_proj = w.up_proj.narrow(0, 0, kF / 2).clone();
  w.down_proj = w.down_proj.narrow(1, 0, kF / 2).clone();
  return s;
}

// Mean KL(teacher || student) per token on `tokens`, without autograd.
double kl_to_teacher(const LlamaModel& t, const LlamaModel& s, const at::Tensor& tokens) {
  at::NoGradGuard g;
  return distill_loss(t.forward(tokens), s.forward(tokens), tokens, at::Tensor(), 1.0, 0.0)
      .kl.item<double>();
}

BldOptions small_options(int64_t tokens) {
  BldOptions o;
  o.token_budget = tokens;
  o.batch_size = 2;
  o.seq_len = 16;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.show_progress = false;
  return o;
}

TEST(Bld, TrainsTheBlocksThatDifferFromTheTeacherLayersTheyStandFor) {
  const ModelConfig t = tiny(3);
  EXPECT_TRUE(bld_changed_blocks(t, t, identity_pruning_map(t)).empty());
  ModelConfig ffn = t;
  ffn.layers[1].intermediate_size = kF / 2;
  EXPECT_EQ(bld_changed_blocks(t, ffn, identity_pruning_map(t)), (std::vector<int64_t>{1}));
  ModelConfig no_attn = t;
  no_attn.layers[2].attention_no_op = true;
  EXPECT_EQ(bld_changed_blocks(t, no_attn, identity_pruning_map(t)), (std::vector<int64_t>{2}));
  // Depth: layer 1 dropped. Student block 0 stands for teacher layers [0, 2), block 1 for [2, 3).
  ModelConfig two = t;
  two.layers.pop_back();
  const PruningMap mid = map_of_layers(t, {0, 2});
  EXPECT_EQ(bld_span(mid, 0, 3), std::make_pair(int64_t(0), int64_t(2)));
  EXPECT_EQ(bld_span(mid, 1, 3), std::make_pair(int64_t(2), int64_t(3)));
  EXPECT_EQ(bld_changed_blocks(t, two, mid), (std::vector<int64_t>{0}));
  // Layer 0 dropped: the first block reads the embedding, so it stands for [0, 2) too.
  const PruningMap first = map_of_layers(t, {1, 2});
  EXPECT_EQ(bld_span(first, 0, 3), std::make_pair(int64_t(0), int64_t(2)));
  EXPECT_EQ(bld_changed_blocks(t, two, first), (std::vector<int64_t>{0}));
  // The last layer dropped: the last block stands for [1, 3).
  EXPECT_EQ(bld_span(map_of_layers(t, {0, 1}), 1, 3), std::make_pair(int64_t(1), int64_t(3)));
  // A narrower hidden size changes every block.
  ModelConfig narrow = t;
  narrow.hidden_size = 24;
  PruningMap m24 = identity_pruning_map(t);
  m24.hidden_channels = at::arange(24, at::kLong);
  EXPECT_EQ(bld_changed_blocks(t, narrow, m24), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Bld, EachBlockStartsFromTheTeachersStatesAndOnlyChangedBlocksMove) {
  const LlamaModel teacher{tiny(3), random_weights(tiny(3), 11, 0.3)};
  LlamaModel student = drop_layers(teacher, {0, 2});
  const LlamaModel before{student.config, clone(student.config, student.weights)};
  const TokenDataset data = test::random_text(4000, kV, 12);
  const BldOptions o = small_options(32 * 200);
  const BldResult r = blockwise_local_distill(teacher, student, map_of_layers(teacher.config, {0, 2}),
                                              data, o);
  ASSERT_EQ(r.blocks.size(), 1u);
  EXPECT_EQ(r.blocks[0].student_layer, 0);
  EXPECT_EQ(r.blocks[0].teacher_first, 0);
  EXPECT_EQ(r.blocks[0].teacher_end, 2);
  EXPECT_EQ(r.steps, 200);
  EXPECT_EQ(r.tokens, 32 * 200);
  // The first loss, from the teacher's states alone: student block 0 is teacher layer 0, so on
  // the teacher's embedding it gives x_1, and its target is x_2 (teacher layer 1 is dropped).
  const at::Tensor tokens = data.batch(0, o.batch_size, o.seq_len, o.seed + 1);
  ResidualCapture states({0, 1}, at::Tensor());
  {
    at::NoGradGuard g;
    ForwardOptions fo;
    fo.observer = &states;
    teacher.hidden_states(tokens, fo);
  }
  const double want = hidden_state_loss({states.states[0]}, {states.states[1]}, {}, true)
                          .item<double>();
  EXPECT_NEAR(r.blocks[0].loss_before, want, 1e-5 * want);
  EXPECT_GT(want, 1e-3);  // teacher layer 1 does something: there is a gap to close
  EXPECT_LT(r.blocks[0].loss_after, 0.8 * r.blocks[0].loss_before);
  // Block 0 moved; block 1, the embedding and the final norm did not.
  EXPECT_FALSE(at::equal(student.weights.layers[0].down_proj, before.weights.layers[0].down_proj));
  for (const at::Tensor& p : {student.weights.layers[0].down_proj, student.weights.layers[1].q_proj})
    EXPECT_FALSE(p.requires_grad());
  const std::vector<at::Tensor> a = student.weights.parameters(), b = before.weights.parameters();
  const size_t block1 = a.size() - 1 - 9;  // layer 1's 9 tensors, then the final norm
  for (size_t k = block1; k < a.size(); ++k) EXPECT_TRUE(at::equal(a[k], b[k])) << "tensor " << k;
  EXPECT_TRUE(at::equal(a[0], b[0]));  // the (tied) embedding
}

TEST(Bld, AnFfnPrunedBlockRecoversAndTheWholeStudentGetsCloser) {
  const LlamaModel teacher{tiny(3), random_weights(tiny(3), 21, 0.3)};
  LlamaModel student = narrow_ffn(teacher, 1);
  const TokenDataset data = test::random_text(6000, kV, 22);
  const at::Tensor held = test::random_tokens(4, 16, kV, 23);
  const double kl_before = kl_to_teacher(teacher, student, held);
  const BldResult r = blockwise_local_distill(teacher, student, identity_pruning_map(teacher.config),
                                              data, small_options(32 * 200));
  ASSERT_EQ(r.blocks.size(), 1u);
  EXPECT_EQ(r.blocks[0].student_layer, 1);
  EXPECT_LT(r.blocks[0].loss_after, 0.85 * r.blocks[0].loss_before);  // half its neurons: not all
  EXPECT_LT(kl_to_teacher(teacher, student, held), kl_before);
  EXPECT_TRUE(at::equal(student.weights.layers[0].q_proj, teacher.weights.layers[0].q_proj));
  EXPECT_TRUE(at::equal(student.weights.layers[2].down_proj, teacher.weights.layers[2].down_proj));
}

TEST(Bld, LeavesAnUnchangedStudentAloneAndRefusesABudgetBelowOneStep) {
  const LlamaModel teacher{tiny(2), random_weights(tiny(2), 31, 0.3)};
  LlamaModel same{teacher.config, clone(teacher.config, teacher.weights)};
  const TokenDataset data = test::random_text(2000, kV, 32);
  const BldResult r = blockwise_local_distill(teacher, same, identity_pruning_map(teacher.config),
                                              data, small_options(32 * 4));
  EXPECT_TRUE(r.blocks.empty());
  EXPECT_EQ(r.tokens, 0);
  EXPECT_TRUE(at::equal(same.weights.layers[1].down_proj, teacher.weights.layers[1].down_proj));
  LlamaModel cut = narrow_ffn(teacher, 0);
  try {
    blockwise_local_distill(teacher, cut, identity_pruning_map(teacher.config), data,
                            small_options(31));
    ADD_FAILURE() << "a budget below one step was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("below one step of 2 x 16 tokens"), std::string::npos)
        << e.what();
  }
}

// A student of `teacher` pruned to `target` by the fixture's importance, with its own weights.
LlamaModel pruned(const LlamaModel& teacher, const ModelConfig& target, PruningMap* map) {
  const PrunePlan plan = plan_pruning(teacher.config, test::importance_of(teacher), target);
  *map = pruning_map_from_plan(teacher.config, plan, /*blocks_dropped=*/true);
  LlamaModel s = drop_removed_blocks(apply_plan(teacher, plan));
  s.weights = clone(s.config, s.weights);
  return s;
}

void expect_same_weights(const LlamaModel& a, const LlamaModel& b) {
  const std::vector<at::Tensor> pa = a.weights.parameters(), pb = b.weights.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::equal(pa[i], pb[i])) << "tensor " << i;
}

// The search's finalists share the teacher's states through a BldTeacherCache: each student
// (here one on a narrower hidden size, whose channels the importance picks, not the first ones,
// and one with a layer dropped and an FFN cut) ends weight for weight as without the cache, the
// teacher runs on each batch once (the second student's teacher tokens are 0), a cache without
// room keeps nothing, and one bound to other batches is refused.
TEST(Bld, ATeacherStateCacheGivesTheSameStudentsAndRunsTheTeacherOnce) {
  const LlamaModel teacher = test::small_model();  // D = 64, 4 layers
  const TokenDataset data = test::random_text(4000, teacher.config.vocab_size, 41);
  ModelConfig narrow = teacher.config;
  narrow.hidden_size = 48;
  ModelConfig cut = teacher.config;
  cut.layers[1].intermediate_size = 48;
  cut.layers[3].attention_no_op = true;
  BldOptions o = small_options(32 * 5);
  o.lr = 1e-3;
  PruningMap m_narrow, m_cut;
  LlamaModel a = pruned(teacher, narrow, &m_narrow), b = pruned(teacher, cut, &m_cut);
  ASSERT_FALSE(at::equal(m_narrow.hidden_channels, at::arange(48, at::kLong)));
  LlamaModel a_ref{a.config, clone(a.config, a.weights)}, b_ref{b.config, clone(b.config, b.weights)};
  const BldResult ra_ref = blockwise_local_distill(teacher, a_ref, m_narrow, data, o);
  const BldResult rb_ref = blockwise_local_distill(teacher, b_ref, m_cut, data, o);
  EXPECT_EQ(ra_ref.teacher_tokens, ra_ref.tokens);  // without a cache: every batch
  EXPECT_EQ(rb_ref.teacher_tokens, 32 * 5);

  BldTeacherCache cache;
  const BldResult ra = blockwise_local_distill(teacher, a, m_narrow, data, o, &cache);
  const BldResult rb = blockwise_local_distill(teacher, b, m_cut, data, o, &cache);
  EXPECT_EQ(ra.teacher_tokens, 32 * 5);
  EXPECT_EQ(rb.teacher_tokens, 0);
  EXPECT_EQ(rb.tokens, 32 * 5);
  EXPECT_EQ(cache.states.size(), 6u);  // 5 steps and the evaluation batch
  EXPECT_GT(cache.bytes, 0);
  expect_same_weights(a, a_ref);
  expect_same_weights(b, b_ref);
  EXPECT_DOUBLE_EQ(rb.blocks.back().loss_after, rb_ref.blocks.back().loss_after);

  BldTeacherCache none;
  none.max_bytes = 0;
  LlamaModel b2 = pruned(teacher, cut, &m_cut);
  blockwise_local_distill(teacher, b2, m_cut, data, o, &none);
  EXPECT_TRUE(none.states.empty());
  EXPECT_EQ(blockwise_local_distill(teacher, b2, m_cut, data, o, &none).teacher_tokens, 32 * 5);

  BldOptions other = o;
  other.seed = o.seed + 1;
  LlamaModel b3 = pruned(teacher, cut, &m_cut);
  EXPECT_THROW(blockwise_local_distill(teacher, b3, m_cut, data, other, &cache), InternalError);
}

}  // namespace
}  // namespace ac

namespace ac {
// compress's blockwise start follows the distillation budget unless given: a run asked for
// 4 096 distillation tokens must not spend 8 192 on the start alone.
TEST(Bld, CompressDefaultIsASixteenthOfTheDistillationBudget) {
  CompressOptions o;
  EXPECT_EQ(o.distill.bld_tokens, -1);
  EXPECT_EQ(o.distill.tokens, 131072);
  EXPECT_EQ(distill_bld_tokens(o), 8192);
  o.distill.tokens = 65536;
  EXPECT_EQ(distill_bld_tokens(o), 4096);
  o.distill.tokens = 4096;  // a sixteenth is 256, below one step of 2 x seq_len tokens
  EXPECT_EQ(distill_bld_tokens(o), 2 * o.data.seq_len);
  o.distill.bld_tokens = 0;  // off
  EXPECT_EQ(distill_bld_tokens(o), 0);
  o.distill.bld_tokens = 1000;  // as given
  EXPECT_EQ(distill_bld_tokens(o), 1000);
}
}  // namespace ac
