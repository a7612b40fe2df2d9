// The llama_cpp stage of compress: the real llama.cpp runs the GGUF exports of stories15M and a
// pruned copy; its measured TPOT is reported beside the llama.cpp-engine prediction; a machine
// without the client gets a reason, never a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "common/runtime.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "pipeline/llamacpp_stage.h"
#include "test_util.h"

namespace ac {
namespace {

using test::TempDir;

struct Stories15M {
  TempDir tmp;
  fs::path dir = tmp.path / "ckpt";
  Stories15M() {
    const fs::path src = test::stories15m_dir();
    if (!fs::exists(src / "model.bin"))
      throw std::runtime_error(src.string() + ": run scripts/fetch_stories15m.sh");
    import_llama2c(src / "model.bin", src / "tokenizer.bin", dir);
  }
};

TEST(LlamaCppStage, MeasuresTpotOfBothModelsBesideThePrediction) {
  init_torch_threads();
  Stories15M s;
  const LlamaModel teacher = load_checkpoint(s.dir);
  LlamaModel narrow = teacher;  // the same weights with two blocks' FFNs removed: a deci GGUF
  narrow.config.layers[2].ffn_no_op = narrow.config.layers[4].ffn_no_op = true;
  Scenario scenario = find_scenario("cpu-local");
  LlamaCppStageOptions opt;
  opt.tokenizer_dir = s.dir;
  opt.work_dir = s.tmp.path / "work";
  opt.prompt_tokens = 16;
  opt.output_tokens = 16;
  opt.repeats = 2;
  const Profile profile = run_profile({teacher.config}, scenario.workload);
  const nlohmann::json r = run_llamacpp_stage(teacher, narrow, scenario, &profile, opt);
  ASSERT_TRUE(r.value("ran", false)) << r.dump(2);
  for (const char* name : {"teacher", "compressed"}) {
    const auto& m = r[name];
    ASSERT_TRUE(m.contains("tpot_ms_measured")) << r.dump(2);
    EXPECT_GT(m["tpot_ms_measured"].get<double>(), 0.0);
    EXPECT_GT(m["tpot_ms_predicted"].get<double>(), 0.0);
    const int64_t generated = m["generated_tokens"].get<int64_t>();
    EXPECT_GT(generated, 1);
    // Every decode step of both runs pooled (greedy: each run decodes the same tokens); the
    // 10th percentile lies at or below the median step and below the slowest run's mean.
    EXPECT_EQ(m["decode_intervals"].get<int64_t>(), 2 * (generated - 1)) << m.dump();
    ASSERT_EQ(m["tpot_ms_runs"].size(), 2u);
    EXPECT_LE(m["tpot_ms_measured"].get<double>(), m["tpot_ms_median"].get<double>());
    EXPECT_LE(m["tpot_ms_measured"].get<double>(),
              std::max(m["tpot_ms_runs"][0].get<double>(), m["tpot_ms_runs"][1].get<double>()));
  }
  // The teacher-calibrated prediction: the compressed prediction x teacher measured / predicted.
  const double factor = r["teacher"]["tpot_ms_measured"].get<double>() /
                        r["teacher"]["tpot_ms_predicted"].get<double>();
  EXPECT_DOUBLE_EQ(r["teacher_calibration_factor"].get<double>(), factor);
  const double calibrated = r["compressed"]["tpot_ms_predicted"].get<double>() * factor;
  EXPECT_DOUBLE_EQ(r["compressed"]["tpot_ms_predicted_teacher_calibrated"].get<double>(), calibrated);
  const double measured = r["compressed"]["tpot_ms_measured"].get<double>();
  EXPECT_DOUBLE_EQ(r["compressed"]["teacher_calibrated_error"].get<double>(),
                   (calibrated - measured) / measured);
  EXPECT_EQ(r["prompt_tokens"].get<int64_t>(), 16);
  EXPECT_FALSE(fs::exists(opt.work_dir)) << "the GGUF scratch folder must be removed";
}

TEST(LlamaCppStage, WithoutTheClientItSaysWhyAndDoesNotFail) {
  // A data root with the data files but no tools/llamacpp: the stage reports the reason.
  TempDir root;
  for (const char* kind : {"devices", "engines", "scenarios"})
    fs::copy(test::source_dir() / kind, root.path / kind);
  const char* old = std::getenv("AC_DATA_DIR");
  std::string saved = old ? old : "";
  ::setenv("AC_DATA_DIR", root.path.c_str(), 1);
  ModelConfig c = ModelConfig::uniform(300, 32, 2, LayerConfig{4, 2, 8, 48});
  LlamaModel m{c, random_weights(c, 1)};
  LlamaCppStageOptions opt;
  opt.work_dir = root.path / "work";
  nlohmann::json r;
  try {
    r = run_llamacpp_stage(m, m, find_scenario("cpu-local"), nullptr, opt);
  } catch (...) {
    old ? ::setenv("AC_DATA_DIR", saved.c_str(), 1) : ::unsetenv("AC_DATA_DIR");
    throw;
  }
  old ? ::setenv("AC_DATA_DIR", saved.c_str(), 1) : ::unsetenv("AC_DATA_DIR");
  EXPECT_FALSE(r["ran"].get<bool>());
  EXPECT_NE(r["reason"].get<std::string>().find("measure.mjs"), std::string::npos) << r.dump();
  EXPECT_FALSE(fs::exists(opt.work_dir));
}

}  // namespace
}  // namespace ac
