// The subcommands importance, prune, distill and eval on a Nemotron-H checkpoint (the committed
// transformers fixture nemotronh-mix-fp32: Mamba-2, attention, MLP and MoE layers, vocab 131) and
// on a Qwen3-MoE one, through the built binary, held to what does not come from the CLI itself:
//
//   ChainGivesTheLibrarysPrunedModelAndKl: `importance` writes the library's scores bit for bit;
//     `prune --arch` writes a model whose logits are the library's pruned model's and, up to
//     float rounding, the parent's under the pruning's 0/1 masks; `eval --teacher` reports the
//     KL(parent || masked parent) computed here by hand from the two forwards;
//   DistillLowersHeldOutKlAndReloads: `distill` lowers the held-out KL to the teacher, and its
//     checkpoint reloads to the logits of the library's distill() with the same options;
//   RefusesAnotherParentsImportance: an importance file of another model, or of a dense one, is
//     refused naming the flag, the file and the tensor, and nothing is written;
//   RefusesLlamaOnlyFlags: each option that reads the Llama forward alone is refused naming its
//     flag, leaving nothing behind;
//   ArchJsonKeepsRemovedLayers: a Nemotron-H target with removed layers round-trips through
//     arch.json with the parent's layer indices; malformed "removed_layers" are refused;
//   MoeCli.ChainGivesTheLibrarysResults: the same chain on a Qwen3-MoE checkpoint (the fixture
//     qwen3moe-top2-fp32: sparse layers 0 and 2 of 5 experts): the library's expert scores bit
//     for bit, the masked parent's logits, the KL by hand, distill() and a lower KL.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdlib>
#include <functional>
#include <set>

#include "common/error.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "export/moe_hf_export.h"
#include "export/nemotron_h_export.h"
#include "importance/importance.h"
#include "importance/moe_importance.h"
#include "importance/nemotron_h_importance.h"
#include "io/nemotron_h_checkpoint.h"
#include "model/weights.h"
#include "io/checkpoint.h"
#include "prune/arch.h"
#include "prune/moe_prune.h"
#include "prune/nemotron_h_prune.h"
#include "nemotron_h_fixture.h"
#include "test_support.h"
#include "test_util.h"

namespace ac {
namespace {

using json = nlohmann::json;
using test::TempDir;

constexpr int64_t kSeqLen = 24, kBatch = 4;

using test::CliRun;
using test::names_in;
using test::run_cli;

void write_tokens(const fs::path& path, int64_t n, int64_t vocab, uint64_t seed) {
  const at::Tensor ids = test::random_tokens(1, n, vocab, seed).to(at::kInt).view({-1});
  write_token_file(path, std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + n),
                   vocab);
}

LayerConfig removed() {
  LayerConfig l;
  l.attention_no_op = l.ffn_no_op = true;
  return l;
}

// Every kind of the mix fixture (M * M - E M * E) shrunk, and its layer 6 (*) removed.
ModelConfig mix_target(const ModelConfig& parent) {
  ModelConfig t = parent;
  t.layers[0].mamba->mamba_num_heads = 4;  // 2 of 3 heads a group
  t.layers[5].mamba->mamba_head_dim = 3;
  t.layers[1].num_key_value_heads = 1;
  t.layers[1].num_attention_heads = 2;
  t.layers[3].intermediate_size = 13;
  t.layers[4].moe->num_experts = 3;
  t.layers[4].moe->moe_intermediate_size = 7;
  t.layers[7].moe->shared_expert_intermediate_size = 5;
  t.layers[6] = removed();
  return t;
}

// In `dir`: parent/ (the mix fixture as our writer writes it), train.tokens and heldout.tokens
// (random ids of its vocabulary), arch.json (mix_target).
struct Fixture {
  TempDir tmp, logs;
  NemotronHModel parent;
  ModelConfig target;
  Fixture() {
    parent = load_nemotron_h_checkpoint(test::nemotron_h_fixture_dir("nemotronh-mix-fp32"));
    save_nemotron_h_checkpoint(path("parent"), parent);
    const int64_t V = parent.config.vocab_size;
    write_tokens(path("train.tokens"), 2400, V, 11);
    write_tokens(path("heldout.tokens"), 1200, V, 12);
    target = mix_target(parent.config);
    write_arch(path("arch.json"), target);
  }
  fs::path path(const std::string& name) const { return tmp.path / name; }
  CliRun run(const std::string& args) const { return run_cli(args, logs.path); }
  void run_ok(const std::string& args) const {
    const CliRun r = run(args);
    ASSERT_EQ(r.rc, 0) << args << "\n" << r.err;
  }
  TokenDataset tokens(const std::string& name) const {
    return TokenDataset::load(path(name), int32_t(parent.config.bos_token_id));
  }
};

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() == b.defined() && (!a.defined() || at::equal(a, b));
}

// Every score of `a` and `b` equal bit for bit; the count of defined tensors compared.
int64_t expect_same_importance(const NemotronHImportance& a, const NemotronHImportance& b) {
  EXPECT_EQ(a.num_tokens, b.num_tokens);
  EXPECT_TRUE(same(a.block_influence, b.block_influence));
  EXPECT_EQ(a.num_layers(), b.num_layers());
  int64_t compared = 0;
  for (int64_t i = 0; i < std::min(a.num_layers(), b.num_layers()); ++i) {
    const NemotronHLayerImportance &x = a.layers[size_t(i)], &y = b.layers[size_t(i)];
    for (auto [p, q] : {std::pair{&x.mamba_channels, &y.mamba_channels},
                        {&x.mamba_heads, &y.mamba_heads}, {&x.mamba_head_dim, &y.mamba_head_dim},
                        {&x.heads, &y.heads}, {&x.kv_groups, &y.kv_groups}, {&x.ffn, &y.ffn},
                        {&x.shared_ffn, &y.shared_ffn}, {&x.moe.experts, &y.moe.experts},
                        {&x.moe.expert_ffn, &y.moe.expert_ffn},
                        {&x.moe.routing_share, &y.moe.routing_share},
                        {&x.moe.output_norm, &y.moe.output_norm}}) {
      EXPECT_TRUE(same(*p, *q)) << "layer " << i;
      compared += p->defined();
    }
  }
  return compared;
}

// Mean over the predicted positions (t < T - 1 of every window) of KL(p || q), in nats, from
// the two models' logits: the definition of eval/eval.h, computed here in float64.
double kl_by_hand(const std::vector<at::Tensor>& batches,
                  const std::function<at::Tensor(const at::Tensor&)>& teacher,
                  const std::function<at::Tensor(const at::Tensor&)>& student) {
  double sum = 0;
  int64_t n = 0;
  for (const at::Tensor& b : batches) {
    const int64_t T = b.size(1);
    const at::Tensor p = at::log_softmax(teacher(b).slice(1, 0, T - 1).to(at::kDouble), -1);
    const at::Tensor q = at::log_softmax(student(b).slice(1, 0, T - 1).to(at::kDouble), -1);
    sum += (p.exp() * (p - q)).sum().item<double>();
    n += b.size(0) * (T - 1);
  }
  return sum / double(n);
}

std::string common_flags() {
  return fmt::format("--seq-len {} --batch-size {}", kSeqLen, kBatch);
}

TEST(NemotronHCli, ChainGivesTheLibrarysPrunedModelAndKl) {
  at::NoGradGuard no_grad;
  Fixture fx;
  ASSERT_TRUE(is_nemotron_h_checkpoint(fx.path("parent")));
  // importance: the library's scores on the same windows, bit for bit.
  fx.run_ok(fmt::format("importance --model {} --data {} --out {} {}", fx.path("parent").string(),
                        fx.path("train.tokens").string(), fx.path("imp.safetensors").string(),
                        common_flags()));
  const NemotronHImportance from_cli = load_nemotron_h_importance(fx.path("imp.safetensors"));
  const NemotronHImportance from_library = compute_nemotron_h_importance(
      fx.parent, fx.tokens("train.tokens").sequential_batches(kBatch, kSeqLen));
  EXPECT_EQ(expect_same_importance(from_cli, from_library), 3 * 3 + 2 * 2 + 1 + 2 * 5);
  EXPECT_GT(from_cli.num_tokens, 2000);

  // prune: the library's pruned model, and the parent under the plan's masks.
  fx.run_ok(fmt::format("prune --model {} --importance {} --arch {} --out {}",
                        fx.path("parent").string(), fx.path("imp.safetensors").string(),
                        fx.path("arch.json").string(), fx.path("pruned").string()));
  const NemotronHModel pruned = load_nemotron_h_checkpoint(fx.path("pruned"));
  EXPECT_EQ(pruned.config.num_layers(), 7);  // layer 6 left out
  EXPECT_EQ(read_json_file(fx.path("pruned") / "config.json")["model_type"], "nemotron_h_puzzle");
  const NemotronHPrunePlan plan = plan_nemotron_h_pruning(fx.parent, from_library, fx.target);
  const NemotronHModel library_pruned = apply_nemotron_h_plan(fx.parent, plan);
  EXPECT_EQ(pruned.config.num_parameters(), fx.target.num_parameters());
  NemotronHForwardOptions masked;
  const NemotronHMasks masks = nemotron_h_masks_for_plan(fx.parent.config, plan);
  masked.masks = &masks;
  const at::Tensor probe = test::random_tokens(2, 17, fx.parent.config.vocab_size, 3);
  const at::Tensor ours = pruned.forward(probe);
  EXPECT_TRUE(at::equal(ours, library_pruned.forward(probe)));
  const double masked_diff = (ours - fx.parent.forward(probe, masked)).abs().max().item<double>();
  std::printf("pruned vs masked parent: largest logit difference %.3g\n", masked_diff);
  EXPECT_LE(masked_diff, 1e-4);
  EXPECT_GT((ours - fx.parent.forward(probe)).abs().max().item<double>(), 1e-3);

  // eval: the held-out KL of the masked parent to the parent, by hand.
  fx.run_ok(fmt::format("eval --model {} --teacher {} --data {} --out {} {}",
                        fx.path("pruned").string(), fx.path("parent").string(),
                        fx.path("heldout.tokens").string(), fx.path("eval.json").string(),
                        common_flags()));
  const json e = read_json_file(fx.path("eval.json"))["models"][0]["eval"];
  const std::vector<at::Tensor> heldout =
      fx.tokens("heldout.tokens").sequential_batches(kBatch, kSeqLen);
  const double kl = kl_by_hand(
      heldout, [&](const at::Tensor& b) { return fx.parent.forward(b); },
      [&](const at::Tensor& b) { return fx.parent.forward(b, masked); });
  std::printf("held-out KL: eval %.8f, by hand (masked parent) %.8f\n",
              e["kl_to_teacher"].get<double>(), kl);
  EXPECT_GT(kl, 1e-3);
  EXPECT_NEAR(e["kl_to_teacher"].get<double>(), kl, 1e-5 * std::max(1.0, kl));
  EXPECT_EQ(e["tokens"].get<int64_t>(),
            fx.tokens("heldout.tokens").num_windows(kSeqLen) * (kSeqLen - 1));
}

TEST(NemotronHCli, DistillLowersHeldOutKlAndReloads) {
  at::NoGradGuard no_grad;
  Fixture fx;
  const NemotronHImportance imp = compute_nemotron_h_importance(
      fx.parent, fx.tokens("train.tokens").sequential_batches(kBatch, kSeqLen));
  save_nemotron_h_checkpoint(fx.path("student"), prune_nemotron_h_model(fx.parent, imp, fx.target));
  const int64_t tokens = 12 * kBatch * kSeqLen;
  fx.run_ok(fmt::format("distill --teacher {} --student {} --data {} --tokens {} --lr 3e-3 "
                        "--warmup 2 --out {} {}",
                        fx.path("parent").string(), fx.path("student").string(),
                        fx.path("train.tokens").string(), tokens, fx.path("distilled").string(),
                        common_flags()));
  EXPECT_FALSE(fs::exists(fx.path("distilled.state")));
  EXPECT_TRUE(fs::exists(fx.path("distilled") / "distill_log.csv"));
  EXPECT_EQ(read_json_file(fx.path("distilled") / "distill.json")["steps"].get<int64_t>(), 12);

  // Lower held-out KL to the teacher than the pruned student's.
  const TokenDataset heldout = fx.tokens("heldout.tokens");
  EvalOptions eo;
  eo.batch_size = kBatch;
  eo.seq_len = kSeqLen;
  eo.show_progress = false;
  const NemotronHModel before = load_nemotron_h_checkpoint(fx.path("student"));
  const NemotronHModel after = load_nemotron_h_checkpoint(fx.path("distilled"));
  const double kl_before = evaluate(before, &fx.parent, heldout, eo).kl_to_teacher;
  const double kl_after = evaluate(after, &fx.parent, heldout, eo).kl_to_teacher;
  std::printf("held-out KL to the teacher: pruned %.5f, distilled %.5f\n", kl_before, kl_after);
  EXPECT_LT(kl_after, 0.9 * kl_before);

  // The written checkpoint is the library's distill() with the same options.
  NemotronHModel library = load_nemotron_h_checkpoint(fx.path("student"));
  DistillOptions opt;
  opt.token_budget = tokens;
  opt.batch_size = kBatch;
  opt.seq_len = kSeqLen;
  opt.lr = 3e-3;
  opt.warmup_steps = 2;
  opt.show_progress = false;
  opt.state_dir = fx.path("library.state");
  {
    at::AutoGradMode grad(true);
    distill(fx.parent, library, fx.tokens("train.tokens"), opt);
  }
  const at::Tensor probe = test::random_tokens(2, 17, fx.parent.config.vocab_size, 4);
  const double diff = (after.forward(probe) - library.forward(probe)).abs().max().item<double>();
  const double moved = (after.forward(probe) - before.forward(probe)).abs().max().item<double>();
  std::printf("distilled checkpoint vs the library's distill(): largest logit difference %.3g "
              "(training moved them by %.3g)\n", diff, moved);
  EXPECT_LE(diff, 1e-4);
  EXPECT_GT(moved, 1e-2);
}

TEST(NemotronHCli, RefusesAnotherParentsImportance) {
  at::NoGradGuard no_grad;
  Fixture fx;
  // The importance of the pruned model (other widths, one layer fewer) and of its padded twin.
  const NemotronHImportance imp = compute_nemotron_h_importance(
      fx.parent, fx.tokens("train.tokens").sequential_batches(kBatch, kSeqLen));
  ModelConfig narrower = fx.parent.config;
  narrower.layers[0].mamba->mamba_num_heads = 4;
  const NemotronHModel other = prune_nemotron_h_model(fx.parent, imp, narrower);
  save_nemotron_h_importance(
      fx.path("other.safetensors"),
      compute_nemotron_h_importance(other, fx.tokens("train.tokens").sequential_batches(4, 24)));
  const ModelConfig dense = ModelConfig::uniform(48, 32, 2, LayerConfig{4, 2, 8, 48});
  ImportanceOptions io;
  io.show_progress = false;
  save_importance(fx.path("dense.safetensors"),
                  compute_importance(LlamaModel{dense, random_weights(dense, 7, 0.3)},
                                     {test::random_tokens(2, 12, 48, 5)}, io));
  const std::set<std::string> before = names_in(fx.tmp.path);
  auto refused = [&](const std::string& importance, const std::vector<std::string>& needles) {
    const CliRun r = fx.run(fmt::format("prune --model {} --importance {} --arch {} --out {}",
                                        fx.path("parent").string(), importance,
                                        fx.path("arch.json").string(), fx.path("out").string()));
    EXPECT_NE(r.rc, 0);
    std::printf("%s", r.err.c_str());
    for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
    EXPECT_EQ(names_in(fx.tmp.path), before) << r.err;
  };
  const std::string file = fx.path("other.safetensors").string();
  refused(file, {"--importance " + file, "tensor 'layers.0.mamba_channels' has shape [4, 5]",
                 "expected [6, 5]", (fx.path("parent") / "config.json").string(),
                 "mamba_num_heads", "computed for another model?"});
  refused(fx.path("dense.safetensors").string(),
          {"dense.safetensors", "not a Nemotron-H importance file?"});
  // A target the pruning cannot build names the arch file, the layer and the field.
  ModelConfig bad = fx.parent.config;
  bad.layers[3].intermediate_size = 40;  // above the parent's 26
  write_arch(fx.path("bad_arch.json"), bad);
  save_nemotron_h_importance(fx.path("imp.safetensors"), imp);
  const std::set<std::string> with_inputs = names_in(fx.tmp.path);
  const CliRun r = fx.run(fmt::format("prune --model {} --importance {} --arch {} --out {}",
                                      fx.path("parent").string(),
                                      fx.path("imp.safetensors").string(),
                                      fx.path("bad_arch.json").string(), fx.path("out").string()));
  EXPECT_NE(r.rc, 0);
  std::printf("%s", r.err.c_str());
  for (const std::string& n : {std::string("--arch ") + fx.path("bad_arch.json").string(),
                               std::string("layer 3"), std::string("intermediate_size 40"),
                               (fx.path("parent") / "config.json").string()})
    EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
  EXPECT_EQ(names_in(fx.tmp.path), with_inputs);
}

TEST(NemotronHCli, RefusesLlamaOnlyFlags) {
  Fixture fx;
  save_nemotron_h_checkpoint(fx.path("student"), fx.parent);
  const std::set<std::string> before = names_in(fx.tmp.path);
  const std::string parent = fx.path("parent").string(), data = fx.path("train.tokens").string(),
                    student = fx.path("student").string(), out = fx.path("out").string();
  const std::pair<std::string, std::string> cases[] = {
      {fmt::format("distill --teacher {} --student {} --data {} --tokens 100 --out {} "
                   "--hidden-loss-weight 1", parent, student, data, out),
       "--hidden-loss-weight"},
      {fmt::format("distill --teacher {} --student {} --data {} --tokens 100 --out {} "
                   "--bld-tokens 100", parent, student, data, out),
       "--bld-tokens"},
      {fmt::format("distill --teacher {} --student {} --data {} --tokens 100 --out {} "
                   "--eval-data {} --eval-at-tokens 50", parent, student, data, out, data),
       "--eval-at-tokens"},
      {fmt::format("eval --model {} --data {} --tasks {}", student, data,
                   fx.path("tasks.jsonl").string()),
       "--tasks"},
      {fmt::format("eval --model {} --teacher {} --data {} --stride 8", student, parent, data),
       "--stride 8"},
      {fmt::format("importance --model {} --data {} --out {} --layer-drop-loss", parent, data,
                   fx.path("imp.safetensors").string()),
       "--layer-drop-loss"},
      {fmt::format("importance --model {} --data {} --out {} --resume", parent, data,
                   fx.path("imp.safetensors").string()),
       "--resume"},
      {fmt::format("prune --model {} --importance x --arch {} --out {} --keep-removed-blocks",
                   parent, fx.path("arch.json").string(), out),
       "--keep-removed-blocks"},
  };
  for (const auto& [args, flag] : cases) {
    const CliRun r = fx.run(args);
    std::printf("%s", r.err.c_str());
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("Nemotron-H"), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(names_in(fx.tmp.path), before) << args;
  }
}

TEST(NemotronHCli, ArchJsonKeepsRemovedLayers) {
  TempDir tmp;
  const NemotronHModel m =
      load_nemotron_h_checkpoint(test::nemotron_h_fixture_dir("nemotronh-mix-fp32"));
  ModelConfig t = mix_target(m.config);
  t.layers[0] = removed();
  const fs::path file = tmp.path / "arch.json";
  write_arch(file, t, {{"note", "kept"}});
  const json j = read_json_file(file);
  EXPECT_EQ(j["removed_layers"], json::array({0, 6}));
  EXPECT_EQ(j["note"], "kept");
  const ModelConfig back = read_arch(file);
  ASSERT_EQ(back.num_layers(), m.config.num_layers());
  for (size_t i = 0; i < t.layers.size(); ++i) EXPECT_EQ(back.layers[i], t.layers[i]) << i;
  validate_nemotron_h_target(m.config, back);  // the parent's layer indices
  // Malformed lists, and a list beside a dense target.
  for (const json& bad : {json::array({6, 0}), json::array({0, 0}), json::array({9}),
                          json(3), json::array({"a"})}) {
    json k = j;
    k["removed_layers"] = bad;
    write_json_file(file, k);
    test::expect_error<FormatError>([&] { read_arch(file); },
                                    {file.string(), "\"removed_layers\" must list ascending"});
  }
  write_arch(file, ModelConfig::uniform(48, 32, 3, LayerConfig{4, 2, 8, 48}));
  json dense = read_json_file(file);
  dense["removed_layers"] = json::array({1});
  write_json_file(file, dense);
  test::expect_error<FormatError>([&] { read_arch(file); },
                                  {file.string(), "is for a Nemotron-H target"});
}

TEST(MoeCli, ChainGivesTheLibrarysResults) {
  at::NoGradGuard no_grad;
  TempDir tmp, logs;
  auto path = [&](const std::string& name) { return (tmp.path / name).string(); };
  auto run_ok = [&](const std::string& args) {
    const CliRun r = run_cli(args, logs.path);
    ASSERT_EQ(r.rc, 0) << args << "\n" << r.err;
  };
  const MoeModel parent =
      load_moe_checkpoint(test::source_dir() / "tests/golden/hf-moe/qwen3moe-top2-fp32");
  save_moe_checkpoint(path("parent"), parent);
  ASSERT_TRUE(is_moe_family_checkpoint(path("parent")));
  const int64_t V = parent.config.vocab_size;
  write_tokens(path("train.tokens"), 2400, V, 21);
  write_tokens(path("heldout.tokens"), 1200, V, 22);
  const int32_t bos = int32_t(parent.config.bos_token_id);
  ModelConfig target = parent.config;
  for (LayerConfig& l : target.layers)
    if (l.has_moe()) l.moe->num_experts = 3, l.moe->moe_intermediate_size = 9;
  write_arch(path("arch.json"), target);

  run_ok(fmt::format("importance --model {} --data {} --out {} {}", path("parent"),
                     path("train.tokens"), path("imp.safetensors"), common_flags()));
  const MoeImportance from_cli = load_moe_importance(path("imp.safetensors"));
  const MoeImportance from_library = compute_moe_importance(
      parent, TokenDataset::load(path("train.tokens"), bos).sequential_batches(kBatch, kSeqLen));
  EXPECT_EQ(from_cli.num_tokens, from_library.num_tokens);
  ASSERT_EQ(from_cli.num_layers(), from_library.num_layers());
  int64_t compared = 0;
  for (size_t i = 0; i < from_cli.layers.size(); ++i) {
    const MoeLayerImportance &x = from_cli.layers[i], &y = from_library.layers[i];
    for (auto [p, q] : {std::pair{&x.experts, &y.experts}, {&x.expert_ffn, &y.expert_ffn},
                        {&x.routing_share, &y.routing_share}, {&x.output_norm, &y.output_norm}}) {
      EXPECT_TRUE(same(*p, *q)) << "layer " << i;
      compared += p->defined();
    }
  }
  EXPECT_EQ(compared, 2 * 4);  // two sparse layers

  run_ok(fmt::format("prune --model {} --importance {} --arch {} --out {}", path("parent"),
                     path("imp.safetensors"), path("arch.json"), path("pruned")));
  const MoeModel pruned = load_moe_checkpoint(path("pruned"));
  EXPECT_EQ(pruned.config.num_parameters(), target.num_parameters());
  const MoePrunePlan plan = plan_moe_pruning(parent.config, from_library, target);
  const MoeMasks masks = moe_masks_for_plan(parent.config, plan);
  MoeForwardOptions masked;
  masked.masks = &masks;
  const at::Tensor probe = test::random_tokens(2, 17, V, 3);
  const at::Tensor ours = pruned.forward(probe);
  EXPECT_TRUE(at::equal(ours, prune_moe_model(parent, from_library, target).forward(probe)));
  const double masked_diff = (ours - parent.forward(probe, masked)).abs().max().item<double>();
  std::printf("MoE pruned vs masked parent: largest logit difference %.3g\n", masked_diff);
  EXPECT_LE(masked_diff, 1e-4);

  run_ok(fmt::format("eval --model {} --teacher {} --data {} --out {} {}", path("pruned"),
                     path("parent"), path("heldout.tokens"), path("eval.json"), common_flags()));
  const TokenDataset heldout = TokenDataset::load(path("heldout.tokens"), bos);
  const double kl = kl_by_hand(
      heldout.sequential_batches(kBatch, kSeqLen),
      [&](const at::Tensor& b) { return parent.forward(b); },
      [&](const at::Tensor& b) { return parent.forward(b, masked); });
  const double kl_cli =
      read_json_file(path("eval.json"))["models"][0]["eval"]["kl_to_teacher"].get<double>();
  std::printf("MoE held-out KL: eval %.8f, by hand (masked parent) %.8f\n", kl_cli, kl);
  EXPECT_GT(kl, 1e-3);
  EXPECT_NEAR(kl_cli, kl, 1e-5 * std::max(1.0, kl));

  const int64_t tokens = 12 * kBatch * kSeqLen;
  run_ok(fmt::format("distill --teacher {} --student {} --data {} --tokens {} --lr 3e-3 "
                     "--warmup 2 --out {} {}", path("parent"), path("pruned"),
                     path("train.tokens"), tokens, path("distilled"), common_flags()));
  const MoeModel after = load_moe_checkpoint(path("distilled"));
  EvalOptions eo;
  eo.batch_size = kBatch;
  eo.seq_len = kSeqLen;
  eo.show_progress = false;
  const double kl_after = evaluate(after, &parent, heldout, eo).kl_to_teacher;
  std::printf("MoE held-out KL to the teacher: pruned %.5f, distilled %.5f\n", kl_cli, kl_after);
  EXPECT_LT(kl_after, 0.95 * kl_cli);
  MoeModel library = load_moe_checkpoint(path("pruned"));
  DistillOptions opt;
  opt.token_budget = tokens;
  opt.batch_size = kBatch;
  opt.seq_len = kSeqLen;
  opt.lr = 3e-3;
  opt.warmup_steps = 2;
  opt.show_progress = false;
  opt.state_dir = path("library.state");
  {
    at::AutoGradMode grad(true);
    distill(parent, library, TokenDataset::load(path("train.tokens"), bos), opt);
  }
  const double diff = (after.forward(probe) - library.forward(probe)).abs().max().item<double>();
  std::printf("MoE distilled checkpoint vs the library's distill(): largest logit difference "
              "%.3g\n", diff);
  EXPECT_LE(diff, 1e-4);

  // Another model's importance (the pruned one's: 3 experts a layer), named with its tensor.
  save_moe_importance(path("other.safetensors"),
                      compute_moe_importance(pruned, heldout.sequential_batches(kBatch, kSeqLen)));
  const std::set<std::string> before = names_in(tmp.path);
  const CliRun other = run_cli(
      fmt::format("prune --model {} --importance {} --arch {} --out {}", path("parent"),
                  path("other.safetensors"), path("arch.json"), path("out")), logs.path);
  std::printf("%s", other.err.c_str());
  EXPECT_NE(other.rc, 0);
  for (const std::string& n : {"--importance " + path("other.safetensors"),
                               std::string("layers.0.experts has shape [3], expected [5]"),
                               path("parent") + "/config.json num_experts"})
    EXPECT_NE(other.err.find(n), std::string::npos) << other.err;
  EXPECT_EQ(names_in(tmp.path), before);

  // What runs the Llama forward alone is refused by its flag, nothing written.
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {fmt::format("distill --teacher {} --student {} --data {} --tokens 100 --out {} "
                        "--hidden-loss-weight 1", path("parent"), path("pruned"),
                        path("train.tokens"), path("out")), "--hidden-loss-weight"},
           {fmt::format("eval --model {} --data {} --stride 8", path("pruned"),
                        path("heldout.tokens")), "--stride 8"},
           {fmt::format("importance --model {} --data {} --out {} --layer-drop-loss",
                        path("parent"), path("train.tokens"), path("out.safetensors")),
            "--layer-drop-loss"},
           {fmt::format("prune --model {} --importance {} --arch {} --out {} "
                        "--keep-removed-blocks", path("parent"), path("imp.safetensors"),
                        path("arch.json"), path("out")), "--keep-removed-blocks"}}) {
    const CliRun r = run_cli(args, logs.path);
    std::printf("%s", r.err.c_str());
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("Qwen3-MoE / Mixtral"), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(names_in(tmp.path), before) << args;
  }
}

}  // namespace
}  // namespace ac
