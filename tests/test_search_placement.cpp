// Attention-placement variants (search/placement.h) and the ranking's KL after pruning
// (search/differentiable.h ranking_kl) on the small random model of the search tests:
//   - each variant moves one layer's attention (heads and KV heads as they were) to the next
//     kept layer, removed blocks skipped; nothing else changes; the list is hand-derived here;
//   - a variant that removes attention where the space does not offer it (a capped space), or
//     that leaves a layer with neither attention nor FFN, is not one;
//   - ranking_kl equals an independent prune -> KL on the ranking's batches, counts their tokens
//     once, and a second call is a lookup.
#include "common/error.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/differentiable.h"
#include "search/placement.h"
#include "search_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::attention_removed;
using ac::test::ffn_removed;
using ac::test::importance_of;
using ac::test::random_tokens;
using ac::test::small_model;
using ac::test::space_options;

TEST(SearchPlacement, EachVariantMovesOneLayersAttentionToTheNextKeptLayer) {
  LlamaModel m = small_model();  // 4 layers, H8/G2, F96
  const Importance imp = importance_of(m);
  const SearchSpace s = build_search_space(m.config, imp, space_options());
  // Layer 0 keeps 4 of 8 heads in 1 KV group (an option of every layer), layer 1 has no
  // attention, layer 2 keeps all 8 heads, layer 3 is a removed block.
  ModelConfig t = m.config;
  t.layers[0].num_attention_heads = 4;
  t.layers[0].num_key_value_heads = 1;
  t.layers[1] = attention_removed(t.layers[1]);
  t.layers[3] = ffn_removed(attention_removed(t.layers[3]));
  bool offered = false;
  for (const LayerConfig& o : s.attention[1])
    offered |= o.has_attention() && o.num_attention_heads == 4 && o.num_key_value_heads == 1;
  ASSERT_TRUE(offered) << "the test needs H4/G1 among the space's attention options";

  // By hand: the kept layers are 0, 1, 2; the pairs (0, 1) and (1, 2) differ in attention.
  ModelConfig a = t;  // (0, 1): layer 1 takes H4/G1, layer 0 loses its attention
  a.layers[1].num_attention_heads = 4;
  a.layers[1].num_key_value_heads = 1;
  a.layers[1].attention_no_op = false;
  a.layers[0] = attention_removed(t.layers[0]);
  ModelConfig b = t;  // (1, 2): layer 1 takes H8/G2, layer 2 loses its attention
  b.layers[1].num_attention_heads = 8;
  b.layers[1].num_key_value_heads = 2;
  b.layers[1].attention_no_op = false;
  b.layers[2] = attention_removed(t.layers[2]);
  const std::vector<ModelConfig> v = attention_placement_variants(t, s);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(describe(v[0]), describe(a));
  EXPECT_EQ(v[0].layers, a.layers);
  EXPECT_EQ(describe(v[1]), describe(b));
  EXPECT_EQ(v[1].layers, b.layers);
  for (const ModelConfig& x : v) {
    EXPECT_EQ(x.hidden_size, t.hidden_size);
    int64_t free = 0;
    for (size_t l = 0; l < x.layers.size(); ++l) {
      free += x.layers[l].is_present() && !x.layers[l].has_attention();
      EXPECT_EQ(x.layers[l].intermediate_size, t.layers[l].intermediate_size) << l;
      EXPECT_EQ(x.layers[l].is_present(), t.layers[l].is_present()) << l;
    }
    EXPECT_EQ(free, 1) << describe(x);
  }

  // Every layer has attention: no variant.
  EXPECT_TRUE(attention_placement_variants(m.config, s).empty());
  // A layer with attention but no FFN next to one with FFN but no attention: the exchange
  // would leave a layer with neither, a removed block, another structure.
  ModelConfig f = m.config;
  f.layers[0] = ffn_removed(f.layers[0]);
  f.layers[1] = attention_removed(f.layers[1]);
  const std::vector<ModelConfig> fv = attention_placement_variants(f, s);
  ASSERT_EQ(fv.size(), 1u);  // only (1, 2)
  EXPECT_TRUE(fv[0].layers[1].has_attention());
  EXPECT_FALSE(fv[0].layers[2].has_attention());
  // A wrong layer count is refused.
  ModelConfig shorter = m.config;
  shorter.layers.pop_back();
  EXPECT_THROW(attention_placement_variants(shorter, s), ConfigError);
}

TEST(SearchPlacement, ACappedSpaceKeepsAttentionWhereItOffersNoRemoval) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  imp.block_influence = at::tensor({0.5, 0.1, 0.3, 0.2}, at::kFloat);  // lowest: 1, then 3
  SearchSpaceOptions o = space_options();
  o.max_attention_removed = 1;  // only layer 1 may lose its attention
  const SearchSpace capped = build_search_space(m.config, imp, o);
  ModelConfig t = m.config;
  t.layers[1] = attention_removed(t.layers[1]);
  // Moving it to layer 0 or 2 would remove attention there, which this space does not offer.
  EXPECT_TRUE(attention_placement_variants(t, capped).empty());
  // The uncapped space offers both.
  const SearchSpace wide = build_search_space(m.config, imp, space_options());
  const std::vector<ModelConfig> v = attention_placement_variants(t, wide);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].layers[0].has_attention());
  EXPECT_FALSE(v[1].layers[2].has_attention());
}

TEST(SearchPlacement, RankingKlIsTheKlOfThePrunedTargetOnTheRankingsBatches) {
  LlamaModel m = small_model();
  const Importance imp = importance_of(m);
  const std::vector<at::Tensor> batches = {random_tokens(2, 16, 97, 8), random_tokens(2, 16, 97, 9),
                                           random_tokens(2, 16, 97, 10)};
  DifferentiableOptions opt;
  opt.rank_batches = 2;
  ModelConfig t = m.config;
  t.layers[1] = attention_removed(t.layers[1]);
  t.layers[2].intermediate_size = 48;
  SharedSearchState shared;
  int64_t tokens = 0;
  EXPECT_THROW(ranking_kl(m, imp, t, batches, opt, shared, &tokens), InternalError);
  shared.teacher_reference = teacher_logprobs(m, batches);
  const double kl = ranking_kl(m, imp, t, batches, opt, shared, &tokens);
  EXPECT_EQ(tokens, 2 * 2 * 16);  // the first two batches
  // Independently: prune, drop the removed blocks, KL against the teacher on those batches.
  const std::vector<at::Tensor> first(batches.begin(), batches.begin() + 2);
  const LlamaModel pruned = drop_removed_blocks(prune_model(m, imp, t));
  EXPECT_NEAR(kl, mean_kl(teacher_logprobs(m, first), pruned, first), 1e-6);
  EXPECT_GT(kl, 0);
  // Again: looked up, no tokens.
  EXPECT_EQ(ranking_kl(m, imp, t, batches, opt, shared, &tokens), kl);
  EXPECT_EQ(tokens, 2 * 2 * 16);
}
