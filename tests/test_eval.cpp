// Evaluation: perplexity of a uniform model is V, a model agrees with itself, the NLL equals a
// plain per-position computation, sliding windows, errors, and the sample/distill/eval CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "test_paths.h"
#include "common/error.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "eval/eval.h"
#include "io/checkpoint.h"
#include "test_util.h"

namespace ac {
namespace {

ModelConfig tiny_config() {
  return ModelConfig::uniform(40, 24, 2, LayerConfig{3, 1, 8, 32});
}

LlamaModel random_model(uint64_t seed, double std = 0.3) {
  LlamaModel m{tiny_config(), {}};
  m.weights = random_weights(m.config, seed, std);
  return m;
}

EvalOptions quiet(int64_t T, int64_t B = 4) {
  EvalOptions o;
  o.seq_len = T;
  o.batch_size = B;
  o.show_progress = false;
  return o;
}

TEST(Evaluate, UniformLogitsGivePerplexityV) {
  LlamaModel m = random_model(1);
  m.weights.norm = at::zeros_like(m.weights.norm);  // final hidden = 0 -> logits 0 -> uniform
  EvalResult r = evaluate(m, nullptr, test::random_text(333, 40, 1), quiet(16));
  EXPECT_NEAR(r.perplexity, 40.0, 40.0 * 1e-5);
  EXPECT_NEAR(r.mean_nll, std::log(40.0), 1e-6);
  EXPECT_EQ(r.sequences, 20);          // 333 / 16 windows
  EXPECT_EQ(r.tokens, 20 * 15);        // T - 1 predictions per window
  EXPECT_FALSE(r.to_json().contains("kl_to_teacher"));
}

TEST(Evaluate, AModelAgreesWithItself) {
  LlamaModel m = random_model(2);
  EvalResult r = evaluate(m, &m, test::random_text(300, 40, 2), quiet(12));
  EXPECT_NEAR(r.kl_to_teacher, 0.0, 1e-6);
  EXPECT_EQ(r.top1_agreement, 1.0);
  nlohmann::json j = r.to_json();
  for (const char* k : {"perplexity", "mean_nll", "kl_to_teacher", "top1_agreement", "tokens",
                        "sequences"})
    EXPECT_TRUE(j.contains(k)) << k;
}

TEST(Evaluate, MatchesPlainPerPositionComputation) {
  LlamaModel m = random_model(3), t = random_model(4);
  TokenDataset data = test::random_text(5 * 9, 40, 3);
  EvalResult r = evaluate(m, &t, data, quiet(9, /*B=*/2));  // batches of 2, 2, 1
  // Reference in float64, one window and one position at a time.
  double nll = 0, kl = 0, agree = 0;
  int64_t n = 0;
  for (int64_t w = 0; w < 5; ++w) {
    at::Tensor x = data.windows(w, 1, 9);
    at::Tensor lq = at::log_softmax(m.forward(x).to(at::kDouble), -1)[0];
    at::Tensor lp = at::log_softmax(t.forward(x).to(at::kDouble), -1)[0];
    for (int64_t pos = 0; pos < 8; ++pos, ++n) {
      nll -= lq[pos][x[0][pos + 1].item<int64_t>()].item<double>();
      kl += (lp[pos].exp() * (lp[pos] - lq[pos])).sum().item<double>();
      agree += lp[pos].argmax().item<int64_t>() == lq[pos].argmax().item<int64_t>();
    }
  }
  EXPECT_EQ(r.tokens, n);
  EXPECT_NEAR(r.mean_nll, nll / n, 1e-5);
  EXPECT_NEAR(r.kl_to_teacher, kl / n, 1e-5);
  EXPECT_DOUBLE_EQ(r.top1_agreement, agree / n);
  EXPECT_GT(r.kl_to_teacher, 0.01);  // two different random models
}

TEST(SlidingWindow, ScoresEveryTokenOnceAndEqualsOneWindowWhenItFits) {
  LlamaModel m = random_model(5);
  TokenDataset data = test::random_text(30, 40, 5);
  EvalResult r = sliding_window_perplexity(m, data.ids(), /*context=*/8, /*stride=*/3);
  EXPECT_EQ(r.tokens, 29);
  EvalResult whole = sliding_window_perplexity(m, data.ids(), /*context=*/64, /*stride=*/16);
  EvalResult packed = evaluate(m, nullptr, {data.windows(0, 1, 30)}, quiet(30));
  EXPECT_EQ(whole.tokens, 29);
  EXPECT_NEAR(whole.mean_nll, packed.mean_nll, 1e-6);
  // Uniform model: V whatever the windows.
  m.weights.norm = at::zeros_like(m.weights.norm);
  EXPECT_NEAR(sliding_window_perplexity(m, data.ids(), 8, 3).perplexity, 40.0, 1e-3);
  EXPECT_THROW(sliding_window_perplexity(m, data.ids(), 8, 8), ConfigError);
}

TEST(Evaluate, Errors) {
  LlamaModel m = random_model(6);
  LlamaModel other{ModelConfig::uniform(41, 24, 1, LayerConfig{3, 1, 8, 32}), {}};
  other.weights = random_weights(other.config, 1);
  EXPECT_THROW(evaluate(m, &other, test::random_text(100, 40, 6), quiet(8)), ConfigError);
  EXPECT_THROW(evaluate(m, nullptr, test::random_text(100, 41, 6), quiet(8)), ConfigError);  // ids >= V
  EXPECT_THROW(evaluate(m, nullptr, std::vector<at::Tensor>{}, quiet(8)), ConfigError);
}

// ---------------------------------------------------------------------------------------------
// The CLI: sample -> distill -> eval on tiny checkpoints.

int run_cli(const std::string& args) {
  const char* bin = std::getenv("AC_BIN");
  std::string exe = bin ? bin : ac::test::binary_dir().string() + "/autocompress";
  return std::system(("AC_QUIET=1 " + exe + " " + args + " >/dev/null 2>&1").c_str());
}

TEST(Cli, SampleDistillEval) {
  fs::path d = fs::temp_directory_path() / fmt::format("ac_test_cli_train_{}", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  LlamaModel teacher = random_model(7);
  LlamaModel student = random_model(8);
  save_checkpoint_atomic(d / "teacher", teacher);
  save_checkpoint_atomic(d / "student", student);
  const std::string D = d.string();
  ASSERT_EQ(run_cli(fmt::format("sample --model {0}/teacher --count 40 --seq-len 24 --seed 1 "
                                "--out {0}/train.bin", D)), 0);
  ASSERT_EQ(run_cli(fmt::format("sample --model {0}/teacher --count 8 --seq-len 24 --seed 2 "
                                "--out {0}/held.bin --exclude {0}/train.bin", D)), 0);
  TokenFile train = read_token_file(d / "train.bin"), held = read_token_file(d / "held.bin");
  EXPECT_EQ(train.vocab_size, 40);
  EXPECT_EQ(document_overlap(train.ids, held.ids, 1).overlapping_documents, 0);
  ASSERT_EQ(run_cli(fmt::format("distill --teacher {0}/teacher --student {0}/student --data "
                                "{0}/train.bin --tokens 256 --batch-size 2 --seq-len 16 "
                                "--out {0}/distilled", D)), 0);
  EXPECT_TRUE(fs::exists(d / "distilled" / "config.json"));
  EXPECT_TRUE(fs::exists(d / "distilled" / "distill_log.csv"));
  EXPECT_FALSE(fs::exists(d / "distilled.state"));
  nlohmann::json info = read_json_file(d / "distilled" / "distill.json");
  EXPECT_EQ(info["steps"].get<int64_t>(), 8);
  ASSERT_EQ(run_cli(fmt::format("eval --model {0}/distilled --teacher {0}/teacher --data "
                                "{0}/train.bin --seq-len 16 --out {0}/eval.json", D)), 0);
  nlohmann::json e = read_json_file(d / "eval.json")["models"][0]["eval"];
  EXPECT_GT(e["perplexity"].get<double>(), 1.0);
  EXPECT_TRUE(e.contains("top1_agreement"));
  EXPECT_TRUE(e.contains("topk_overlap"));
  // A bad input fails with a non-zero exit code.
  EXPECT_NE(run_cli(fmt::format("eval --model {0}/distilled --data {0}/missing.bin", D)), 0);
  fs::remove_all(d);
}

}  // namespace
}  // namespace ac
