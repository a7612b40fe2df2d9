// The small model, importance and GPU scenario that the search tests (test_search.cpp,
// test_search_refine.cpp) share.
#pragma once
#include "data/dataset.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "model/llama.h"
#include "search/search_space.h"
#include "test_util.h"

namespace ac::test {

/// D 64, 4 layers of 8 query heads in 2 KV groups (head_dim 8), FFN 96, vocab 97; untied.
inline LlamaModel small_model() {
  ModelConfig c = ModelConfig::uniform(/*V=*/97, /*D=*/64, /*L=*/4, LayerConfig{8, 2, 8, 96});
  c.tie_word_embeddings = false;
  return LlamaModel{c, random_weights(c, /*seed=*/21, /*std=*/0.3)};
}

/// Activation importance of `m` on one random batch [4, 16] (seed 5).
inline Importance importance_of(const LlamaModel& m) {
  ImportanceOptions opt;
  opt.show_progress = false;
  return compute_importance(m, {random_tokens(4, 16, m.config.vocab_size, 5)}, opt);
}

/// A GPU scenario costed by the roofline of the spec (no profile), big enough a workload that
/// widths matter beside the kernel launches.
/// `engine`: engines/<engine>.json (its loader rules shape run_search_method's space).
inline Scenario gpu_scenario(const Limits& limits = {}, const std::string& engine = "vllm") {
  json j = {{"name", "test"}, {"device", "h100-sxm"}, {"engine", engine},
            {"workload", {{"prompt_tokens", 512}, {"output_tokens", 128}, {"batch_size", 64},
                          {"weight_dtype", "bf16"}, {"kv_cache_dtype", "bf16"}}}};
  Scenario s = scenario_from_json(j, "test.json", source_dir());
  s.limits = limits;
  return s;
}

/// Widths in steps of 16 down to 40% of the parent.
inline SearchSpaceOptions space_options() {
  SearchSpaceOptions o;
  o.width_granularity = 16;
  o.min_width_fraction = 0.4;
  return o;
}

}  // namespace ac::test
