// Hybrid and MoE config.json (model/nemotron_h_config.h, model/moe_family_config.h): tiny
// Nemotron-H, nemotron_h_puzzle, Qwen3-MoE and Mixtral configs read into one part per layer, their
// parameter counts computed by hand, written back and read again equal, malformed ones refused
// by file and field; the published Nemotron 3 Super and Nano configs give their published sizes;
// the stages that compute a model refuse hybrid configs.
#include "common/error.h"
#include "hardware/validate.h"
#include "model/config.h"
#include "model/weights.h"
#include "hybrid_fixture.h"
#include "test_support.h"
#include "test_paths.h"

using namespace ac;
using json = nlohmann::json;
using ac::test::expect_error;
using ac::test::tiny_nemotron_h;


TEST(HybridConfig, NemotronHLayersOnePartEach) {
  const ModelConfig c = config_from_hf_json(tiny_nemotron_h(), "tiny.json");
  ASSERT_EQ(c.num_layers(), 4);
  EXPECT_TRUE(c.is_hybrid());
  EXPECT_FALSE(c.rope);
  EXPECT_FALSE(c.mlp_gated);
  const auto& L = c.layers;
  EXPECT_TRUE(L[0].has_mamba() && !L[0].has_attention() && !L[0].has_ffn() && !L[0].has_moe());
  EXPECT_EQ(L[0].mamba->d_inner(), 24);
  EXPECT_EQ(L[0].mamba->conv_dim(), 24 + 2 * 2 * 5);
  EXPECT_EQ(L[0].mamba->in_proj_width(), 24 + 44 + 4);
  EXPECT_TRUE(L[1].has_attention() && !L[1].has_ffn());
  EXPECT_EQ(L[1].num_key_value_heads, 2);
  EXPECT_TRUE(L[2].has_ffn() && !L[2].has_attention());
  EXPECT_EQ(L[2].intermediate_size, 24);
  ASSERT_TRUE(L[3].has_moe());
  EXPECT_EQ(L[3].moe->num_experts, 6);
  EXPECT_EQ(L[3].moe->moe_latent_size, 7);
  EXPECT_FALSE(L[3].moe->gated);
  EXPECT_TRUE(L[3].moe->router_bias);
}

// By hand: embeddings + head 2*100*16 + final norm 16 = 3216;
// Mamba-2: in_proj 16*72 + conv 44*3 + 44 + dt_bias/A_log/D 12 + norm 24 + out_proj 24*16 +
//   block norm 16 = 1764;
// attention: q 16*32 + k 16*16 + v 16*16 + o 32*16 + norm 16 = 1552;
// relu² MLP: up + down 2*16*24 + norm 16 = 784;
// MoE: router 6*16 + bias 6 + latent 2*16*7 + experts 6*2*7*10 + shared 2*16*12 + norm 16 = 1566;
// total 8882; active: 2 experts of 140 instead of 6: 8882 - 4*140 = 8322.
TEST(HybridConfig, NemotronHParametersByHand) {
  const ModelConfig c = config_from_hf_json(tiny_nemotron_h(), "tiny.json");
  EXPECT_EQ(c.layers[0].mamba->num_parameters(16), 1764 - 16);
  EXPECT_EQ(c.layers[3].moe->num_parameters(16), 1566 - 16);
  EXPECT_EQ(c.num_parameters(), 8882);
  EXPECT_EQ(c.num_active_parameters(), 8322);
}

TEST(HybridConfig, LayersBlockTypeReadsAsThePattern) {
  json j = tiny_nemotron_h();
  j.erase("hybrid_override_pattern");
  j["layers_block_type"] = {"mamba", "attention", "mlp", "moe"};
  const ModelConfig a = config_from_hf_json(tiny_nemotron_h(), "a.json");
  const ModelConfig b = config_from_hf_json(j, "b.json");
  EXPECT_EQ(a.layers, b.layers);
  // Written back under the spelling it was read with.
  const json out = config_to_hf_json(b);
  EXPECT_EQ(out["layers_block_type"], j["layers_block_type"]);
  EXPECT_FALSE(out.contains("hybrid_override_pattern"));
  // transformers 5.25 saves "linear_attention" and "full_attention" for M and *: read, and
  // written back the same way.
  j["layers_block_type"] = {"linear_attention", "full_attention", "mlp", "moe"};
  const ModelConfig c = config_from_hf_json(j, "c.json");
  EXPECT_EQ(a.layers, c.layers);
  EXPECT_EQ(config_to_hf_json(c)["layers_block_type"], j["layers_block_type"]);
}

TEST(HybridConfig, NemotronHWritesBackEqual) {
  const ModelConfig c = config_from_hf_json(tiny_nemotron_h(), "tiny.json");
  const json out = config_to_hf_json(c);
  EXPECT_EQ(out["model_type"], "nemotron_h");
  EXPECT_EQ(out["hybrid_override_pattern"], "M*-E");
  EXPECT_FALSE(out.contains("block_configs"));
  EXPECT_EQ(config_from_hf_json(out, "out.json").layers, c.layers);
}

// Layers of one kind that differ are a nemotron_h_puzzle with block_configs; a removed layer is
// left out of the pattern.
TEST(HybridConfig, PuzzleBlockConfigsRoundTrip) {
  json j = tiny_nemotron_h();
  j["hybrid_override_pattern"] = "MEME*";
  ModelConfig c = config_from_hf_json(j, "tiny.json");
  c.layers[3].moe->num_experts = 4;
  c.layers[3].moe->num_experts_per_tok = 1;
  c.layers[3].moe->moe_intermediate_size = 8;
  c.layers[2] = LayerConfig{};  // a removed Mamba-2 layer
  c.layers[2].attention_no_op = c.layers[2].ffn_no_op = true;
  const json out = config_to_hf_json(c);
  EXPECT_EQ(out["model_type"], "nemotron_h_puzzle");
  EXPECT_EQ(out["architectures"][0], "NemotronHPuzzleForCausalLM");
  EXPECT_EQ(out["hybrid_override_pattern"], "MEE*");
  ASSERT_EQ(out["block_configs"].size(), 4u);
  EXPECT_EQ(out["block_configs"][2]["block_type"], "moe");
  EXPECT_EQ(out["block_configs"][2]["num_experts_per_tok"], 1);
  EXPECT_EQ(out["block_configs"][2]["moe_intermediate_size"], 8);
  const ModelConfig back = config_from_hf_json(out, "out.json");
  ASSERT_EQ(back.num_layers(), 4);
  EXPECT_EQ(back.layers[1], c.layers[1]);
  EXPECT_EQ(back.layers[2], c.layers[3]);
  EXPECT_EQ(back.layers[3], c.layers[4]);
}

TEST(HybridConfig, RefusesBadNemotronH) {
  json j = tiny_nemotron_h();
  j["hybrid_override_pattern"] = "M*X";
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"bad.json", "hybrid_override_pattern[2]", "'X'"});
  j = tiny_nemotron_h();
  j.erase("hybrid_override_pattern");
  j["layers_block_type"] = {"mamba", "sliding_attention"};
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"layers_block_type[1]", "sliding_attention", "mamba"});
  j = tiny_nemotron_h();
  j["mlp_hidden_act"] = "silu";
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); }, {"mlp_hidden_act", "relu2"});
  j = tiny_nemotron_h();
  j["block_configs"] = {{{"block_type", "mamba"}}, {{"block_type", "moe"}, {"expert_count", 3}}};
  j.erase("hybrid_override_pattern");
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"block_configs[1]", "'expert_count'"});
  j = tiny_nemotron_h();
  j["block_configs"] = {{{"block_type", "mamba"}}, {{"block_type", "moe"}}};
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"pattern M*-E", "block types ME"});
  j = tiny_nemotron_h();
  j["num_experts_per_tok"] = 9;
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"num_experts_per_tok must be in 1..6, found 9", "bad.json"});
  j = tiny_nemotron_h();
  j["mamba_n_groups"] = 4;  // the other spelling of n_groups, disagreeing
  expect_error<FormatError>([&] { config_from_hf_json(j, "bad.json"); },
                            {"'n_groups' 2 and 'mamba_n_groups' 4"});
}

// Qwen3-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0 and i is not in
// mlp_only_layers: with step 2 and [3], only layer 1. By hand: embeddings + head 2*50*8 + norm 8
// = 808; attention q 8*8 + k 8*4 + v 8*4 + o 8*8 + norm 8 + q/k norms 2*4 = 208, x4 = 832; dense
// SwiGLU 3*8*12 + norm 8 = 296, x3 = 888; MoE router 4*8 + experts 4*3*8*6 + norm 8 = 616;
// total 3144.
TEST(HybridConfig, Qwen3MoeSparseLayersByHand) {
  const json j = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"},
                  {"vocab_size", 50}, {"hidden_size", 8}, {"intermediate_size", 12},
                  {"num_hidden_layers", 4}, {"num_attention_heads", 2},
                  {"num_key_value_heads", 1}, {"head_dim", 4}, {"num_experts", 4},
                  {"num_experts_per_tok", 2}, {"moe_intermediate_size", 6},
                  {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}};
  const ModelConfig c = config_from_hf_json(j, "qwen3_moe.json");
  ASSERT_EQ(c.num_layers(), 4);
  EXPECT_TRUE(c.qk_norm);
  for (int i : {0, 2, 3}) EXPECT_TRUE(c.layers[size_t(i)].has_ffn() && !c.layers[size_t(i)].has_moe()) << i;
  ASSERT_TRUE(c.layers[1].has_moe() && c.layers[1].has_attention());
  EXPECT_TRUE(c.layers[1].moe->gated);
  EXPECT_EQ(c.layers[1].moe->moe_intermediate_size, 6);
  EXPECT_EQ(c.num_parameters(), 3144);
  EXPECT_EQ(c.num_active_parameters(), 3144 - 2 * 3 * 8 * 6);
  const json out = config_to_hf_json(c);
  EXPECT_EQ(out["model_type"], "qwen3_moe");
  EXPECT_EQ(out["mlp_only_layers"], json({0, 2, 3}));
  EXPECT_FALSE(out.contains("qk_norm"));
  EXPECT_EQ(config_from_hf_json(out, "out.json").layers, c.layers);
  // MoE layers that differ: our moe_block_configs, read back.
  ModelConfig d = c;
  d.layers = {c.layers[1], c.layers[1]};
  d.layers[1].moe->num_experts = 3;
  const json hetero = config_to_hf_json(d);
  ASSERT_TRUE(hetero.contains("moe_block_configs"));
  EXPECT_EQ(config_from_hf_json(hetero, "hetero.json").layers, d.layers);
}

// Mixtral: every layer an MoE of num_local_experts SwiGLU experts of intermediate_size. By hand:
// embeddings + head + norm 808; attention (H2/G2, Hd 8/2 = 4) q, k, v, o 8*8 each + norm 8 = 264,
// x2 = 528; MoE router 3*8 + experts 3*3*8*6 + norm 8 = 464, x2 = 928; total 2264.
TEST(HybridConfig, MixtralEveryLayerMoeByHand) {
  const json j = {{"architectures", {"MixtralForCausalLM"}}, {"model_type", "mixtral"},
                  {"vocab_size", 50}, {"hidden_size", 8}, {"intermediate_size", 6},
                  {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                  {"num_key_value_heads", 2}, {"num_local_experts", 3},
                  {"num_experts_per_tok", 1}};
  const ModelConfig c = config_from_hf_json(j, "mixtral.json");
  for (const auto& l : c.layers) {
    ASSERT_TRUE(l.has_moe());
    EXPECT_EQ(l.moe->num_experts, 3);
    EXPECT_EQ(l.moe->moe_intermediate_size, 6);
  }
  EXPECT_EQ(c.num_parameters(), 2264);
  const json out = config_to_hf_json(c);
  EXPECT_EQ(out["num_local_experts"], 3);
  EXPECT_EQ(out["intermediate_size"], 6);
  EXPECT_EQ(config_from_hf_json(out, "out.json").layers, c.layers);
}

// transformers 5 maps num_experts to num_local_experts in both families (attribute_map), and its
// save_pretrained writes Qwen3-MoE's count as num_local_experts: either name is read, written
// back under the name it was read by, and two different values are refused.
TEST(HybridConfig, ExpertCountUnderEitherName) {
  json j = {{"model_type", "qwen3_moe"}, {"vocab_size", 50}, {"hidden_size", 8},
            {"intermediate_size", 12}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
            {"num_key_value_heads", 1}, {"head_dim", 4}, {"num_local_experts", 5},
            {"num_experts_per_tok", 2}, {"moe_intermediate_size", 6}};
  const ModelConfig c = config_from_hf_json(j, "qwen3_moe.json");
  ASSERT_TRUE(c.layers[0].has_moe());
  EXPECT_EQ(c.layers[0].moe->num_experts, 5);
  const json out = config_to_hf_json(c);
  EXPECT_EQ(out["num_local_experts"], 5);
  EXPECT_FALSE(out.contains("num_experts"));
  j["num_experts"] = 4;
  expect_error<FormatError>([&] { config_from_hf_json(j, "qwen3_moe.json"); },
                            {"qwen3_moe.json", "num_experts 4 and num_local_experts 5 differ"});
  json m = {{"model_type", "mixtral"}, {"vocab_size", 50}, {"hidden_size", 8},
            {"intermediate_size", 6}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
            {"num_experts", 3}, {"num_experts_per_tok", 1}};
  EXPECT_EQ(config_from_hf_json(m, "mixtral.json").layers[0].moe->num_experts, 3);
}

// What the MoE families' reader accepts, their writer writes back: the per-layer attention of
// DeciLM's block_configs and a dense layer without an FFN are refused, naming the file.
TEST(HybridConfig, MoeFamiliesRefuseWhatTheyCannotWriteBack) {
  const json mixtral = {{"model_type", "mixtral"}, {"vocab_size", 50}, {"hidden_size", 8},
                        {"intermediate_size", 6}, {"num_hidden_layers", 2},
                        {"num_attention_heads", 2}, {"num_local_experts", 3},
                        {"num_experts_per_tok", 1}};
  json j = mixtral;
  j["block_configs"] = {{{"attention", {{"no_op", true}}}, {"ffn", {{"no_op", true}}}},
                        {{"attention", {{"n_heads_in_group", 1}}}, {"ffn", {{"ffn_mult", 1.0}}}}};
  expect_error<FormatError>([&] { config_from_hf_json(j, "config.json"); },
                            {"config.json", "mixtral", "'block_configs'", "'moe_block_configs'"});
  const json qwen = {{"model_type", "qwen3_moe"}, {"vocab_size", 50}, {"hidden_size", 8},
                     {"intermediate_size", 0}, {"num_hidden_layers", 2},
                     {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 4},
                     {"num_experts", 4}, {"num_experts_per_tok", 2},
                     {"moe_intermediate_size", 6}, {"mlp_only_layers", {1}}};
  expect_error<FormatError>([&] { config_from_hf_json(qwen, "config.json"); },
                            {"config.json", "layer 1 is dense", "'intermediate_size'", "found 0"});
  j = qwen;
  j.erase("mlp_only_layers");  // every layer sparse: the dense width is not needed
  const ModelConfig c = config_from_hf_json(j, "config.json");
  EXPECT_EQ(config_to_hf_json(c)["model_type"], "qwen3_moe");
  EXPECT_EQ(config_from_hf_json(config_to_hf_json(c), "out.json").layers, c.layers);
}

// The stages that compute a model take dense decoders only (issue 42 adds the hybrid forward).
TEST(HybridConfig, DenseStagesRefuseHybrid) {
  const ModelConfig c = config_from_hf_json(tiny_nemotron_h(), "tiny.json");
  expect_error<ConfigError>([&] { random_weights(c, 1, 0.02); },
                            {"random_weights", "Mamba-2, MoE or relu²", "`autocompress cost` and `plan`"});
}

// The published shapes (architectures/*.json): Nemotron 3 Super 120.7B parameters (12.8B a
// token), Nemotron 3 Nano 31.6B (3.6B a token).
TEST(HybridConfig, PublishedNemotron3Sizes) {
  const ModelConfig super_ =
      read_architecture(test::source_dir() / "architectures/nemotron-3-super-120b-a12b.json");
  EXPECT_EQ(super_.num_layers(), 88);
  EXPECT_EQ(super_.num_parameters(), 120668707840);
  EXPECT_EQ(super_.num_active_parameters(), 12770237440);
  int64_t m = 0, e = 0, a = 0;
  for (const auto& l : super_.layers) m += l.has_mamba(), e += l.has_moe(), a += l.has_attention();
  EXPECT_EQ(m, 40);
  EXPECT_EQ(e, 40);
  EXPECT_EQ(a, 8);
  const ModelConfig nano =
      read_architecture(test::source_dir() / "architectures/nemotron-3-nano-30b-a3b.json");
  EXPECT_EQ(nano.num_layers(), 52);
  EXPECT_EQ(nano.num_parameters(), 31577940288);
  EXPECT_EQ(nano.num_active_parameters(), 3580076352);
}
