// Benchmark tasks: log-likelihood requests (both fast paths against a plain float64 forward),
// hand-made multiple-choice and cloze tasks on a bigram model whose log-probabilities are
// computed by hand, perplexity and bits per byte of uniform logits, task-file errors with line
// numbers, make-tasks items (character items checked by hand) and determinism, and the eval /
// make-tasks CLI.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "eval/eval.h"
#include "eval/loglikelihood.h"
#include "eval/make_tasks.h"
#include "eval/tasks.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"
#include "io/tokenizer.h"
#include "pipeline/story_tasks.h"
#include "test_util.h"

namespace ac {
namespace {

using test::TempDir;

// ---------------------------------------------------------------------------------------------
// A synthetic tokenizer: specials, the 256 byte tokens, then one piece per character below.
// Ids: 259 " ", 260 "a", 261 "b", 262 "c", 263 "x". No merges (no two-character pieces).

constexpr int64_t kSpace = 259, kA = 260, kB = 261, kC = 262, kX = 263, kV = 264;

void write_tokenizer(const fs::path& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) pieces.push_back(fmt::format("<0x{:02X}>", b));
  for (const char* p : {" ", "a", "b", "c", "x"}) pieces.push_back(p);
  pieces.insert(pieces.end(), extra.begin(), extra.end());  // ids kV, kV + 1, ...
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const int32_t max_len = 6;
  put(&max_len, 4);
  for (const std::string& p : pieces) {
    const float score = 0;
    const int32_t len = int32_t(p.size());
    put(&score, 4);
    put(&len, 4);
    put(p.data(), p.size());
  }
  std::ofstream(dir / "tokenizer.bin", std::ios::binary).write(out.data(), std::streamsize(out.size()));
}

const TextTokenizer& tokenizer() {
  static TempDir dir;
  static const std::unique_ptr<TextTokenizer> t = [] {
    write_tokenizer(dir.path);
    return load_tokenizer(dir.path, kV);
  }();
  return *t;
}

// The bigram logits B[prev][next]: zero except the entries below.
double bigram_logit(int64_t prev, int64_t next) {
  if (prev == kSpace && next == kA) return 3;
  if (prev == kSpace && next == kB) return 1;
  if (prev == kB && next == kB) return 4;
  if (prev == kX && next == kSpace) return 1;
  return 0;
}

// log softmax(B[prev])[next], in closed form: every row has V - (boosted) zero logits.
double bigram_logprob(int64_t prev, int64_t next) {
  double z = 0;
  for (int64_t j = 0; j < kV; ++j) z += std::exp(bigram_logit(prev, j));
  return bigram_logit(prev, next) - std::log(z);
}

// A decoder that is exactly that bigram model: one-hot embeddings (D = V), blocks whose output
// projections are zero (so the residual stream is the embedding), and a head that undoes the
// final RMSNorm's scale: rms(e_i) = sqrt(1/D + eps), so logits = B[i].
LlamaModel bigram_model(double (*logit)(int64_t prev, int64_t next) = bigram_logit) {
  LlamaModel m{ModelConfig::uniform(kV, kV, 2, LayerConfig{2, 1, 4, 8}), {}};
  m.weights = random_weights(m.config, 11, 0.3);
  m.weights.embed_tokens = at::eye(kV, at::kFloat);
  for (auto& l : m.weights.layers) {
    l.o_proj.zero_();
    l.down_proj.zero_();
  }
  m.weights.norm = at::ones({kV}, at::kFloat);
  const double scale = std::sqrt(1.0 / double(kV) + m.config.rms_norm_eps);
  std::vector<double> head(size_t(kV * kV));  // [V out, D in]: head[j][i] = B[i][j]
  for (int64_t i = 0; i < kV; ++i)
    for (int64_t j = 0; j < kV; ++j) head[size_t(j * kV + i)] = logit(i, j) * scale;
  m.weights.lm_head = at::tensor(head, at::kDouble).view({kV, kV}).to(at::kFloat);
  return m;
}

TEST(BigramModel, LogitsAreTheTable) {
  LlamaModel m = bigram_model();
  at::Tensor x = at::tensor(std::vector<int64_t>{1, kX, kSpace, kB, kA}, at::kLong).view({1, 5});
  at::Tensor lp = at::log_softmax(m.forward(x).to(at::kDouble), -1)[0];
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t next : {kSpace, kA, kB, int64_t(0)})
      EXPECT_NEAR(lp[t][next].item<double>(), bigram_logprob(x[0][t].item<int64_t>(), next), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Requests: both fast paths against one float64 forward per request.

LlamaModel random_model(uint64_t seed, int64_t vocab = 40) {
  LlamaModel m{ModelConfig::uniform(vocab, 24, 2, LayerConfig{3, 1, 8, 32}), {}};
  m.weights = random_weights(m.config, seed, 0.3);
  return m;
}

LoglikelihoodResult plain_reference(const LlamaModel& m, const LoglikelihoodRequest& r,
                                    int64_t max_len) {
  std::vector<int64_t> input = r.context;
  input.insert(input.end(), r.continuation.begin(), r.continuation.end() - 1);
  const int64_t drop = std::max<int64_t>(0, int64_t(input.size()) - max_len);
  input.erase(input.begin(), input.begin() + drop);
  at::Tensor lp = at::log_softmax(
      m.forward(at::tensor(input, at::kLong).view({1, -1})).to(at::kDouble), -1)[0];
  LoglikelihoodResult out;
  out.is_greedy = true;
  const int64_t first = int64_t(r.context.size()) - 1 - drop;
  for (size_t j = 0; j < r.continuation.size(); ++j) {
    at::Tensor row = lp[first + int64_t(j)];
    out.loglikelihood += row[r.continuation[j]].item<double>();
    out.is_greedy = out.is_greedy && row.argmax().item<int64_t>() == r.continuation[j];
  }
  out.tokens = int64_t(r.continuation.size());
  return out;
}

std::vector<int64_t> ids(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

TEST(Loglikelihood, FastPathsEqualOneFloat64ForwardPerRequest) {
  LlamaModel m = random_model(21);
  m.config.max_position_embeddings = 30;  // the 40-token requests below lose context
  std::vector<LoglikelihoodRequest> reqs;
  for (int64_t i = 0; i < 7; ++i) {  // items of 1-4 choices sharing a context of odd lengths
    std::vector<int64_t> ctx = ids(test::random_tokens(1, 3 + 5 * i, 40, 100 + i)[0]);
    for (int64_t c = 0; c <= i % 4; ++c)
      reqs.push_back({ctx, ids(test::random_tokens(1, 1 + (c * 3 + i) % 6, 40, 200 + 10 * i + c)[0])});
  }
  reqs.push_back({ids(test::random_tokens(1, 40, 40, 300)[0]), {5, 6, 7}});   // truncated
  reqs.push_back({ids(test::random_tokens(1, 40, 40, 300)[0]), {8}});         // truncated, shared ctx
  reqs.push_back({{1}, {4}});                                                // 1-token context
  // Contexts that are prefixes of one another (items cut from one story): chains, a branch.
  const std::vector<int64_t> story = ids(test::random_tokens(1, 26, 40, 400)[0]);
  auto cut = [&](size_t a, size_t b) { return std::vector<int64_t>(story.begin() + a, story.begin() + b); };
  reqs.push_back({cut(0, 5), cut(5, 8)});             // the story's own next tokens
  reqs.push_back({cut(0, 5), {3, 3}});
  reqs.push_back({cut(0, 12), cut(12, 13)});
  reqs.push_back({cut(0, 12), {9, 8, 7, 6}});
  reqs.push_back({cut(0, 20), cut(20, 26)});
  std::vector<int64_t> branch = cut(0, 12);
  branch.push_back(5);
  reqs.push_back({branch, {6, 7}});
  // A greedy continuation: the argmax chain of the model itself.
  std::vector<int64_t> g = {1, 7, 9};
  LoglikelihoodRequest greedy{g, {}};
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> all = greedy.context;
    all.insert(all.end(), greedy.continuation.begin(), greedy.continuation.end());
    greedy.continuation.push_back(
        m.forward(at::tensor(all, at::kLong).view({1, -1}))[0][-1].argmax().item<int64_t>());
  }
  reqs.push_back(greedy);
  for (bool share : {true, false}) {
    LoglikelihoodOptions o;
    o.share_contexts = share;
    o.max_batch_tokens = 50;  // several padded batches
    std::vector<LoglikelihoodResult> got = loglikelihoods(m, reqs, o);
    ASSERT_EQ(got.size(), reqs.size());
    double worst = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      LoglikelihoodResult want = plain_reference(m, reqs[i], 30);
      worst = std::max(worst, std::abs(got[i].loglikelihood - want.loglikelihood));
      EXPECT_NEAR(got[i].loglikelihood, want.loglikelihood, 1e-4) << "request " << i;
      EXPECT_EQ(got[i].is_greedy, want.is_greedy) << "request " << i;
      EXPECT_EQ(got[i].tokens, want.tokens);
    }
    std::printf("share_contexts=%d: largest |ll - float64 reference| = %.3g\n", int(share), worst);
    EXPECT_TRUE(got.back().is_greedy);
  }
}

TEST(Loglikelihood, Errors) {
  LlamaModel m = random_model(22);
  m.config.max_position_embeddings = 8;
  EXPECT_THROW(loglikelihoods(m, {{{}, {3}}}), ConfigError);
  EXPECT_THROW(loglikelihoods(m, {{{1}, {}}}), ConfigError);
  EXPECT_THROW(loglikelihoods(m, {{{1}, {40}}}), ConfigError);                       // id >= V
  EXPECT_THROW(loglikelihoods(m, {{{1}, {3, 3, 3, 3, 3, 3, 3, 3, 3}}}), ConfigError);  // > 8
}

// A near-certain token keeps its small log-probability, as lm-eval's log_softmax gives it: after
// 'a' the logit of 'b' is 20 and the other 263 are 0, so log p(b | a) = -log1p(263 e^-20) =
// -5.4e-7. logit - logsumexp in float32 rounds it to 0 (the ulp at 20 is 1.9e-6), which made a
// choice and its extension by such a token ("Tim", "Timmy") tie exactly.
TEST(Loglikelihood, NearCertainTokenKeepsItsSmallLogProbability) {
  const LlamaModel m =
      bigram_model([](int64_t prev, int64_t next) { return prev == kA && next == kB ? 20.0 : 0.0; });
  const double want = -std::log1p(double(kV - 1) * std::exp(-20.0));
  const std::vector<LoglikelihoodResult> r = loglikelihoods(m, {{{1, kA}, {kB}}});
  EXPECT_LT(r[0].loglikelihood, -1e-7);
  EXPECT_NEAR(r[0].loglikelihood, want, 2e-7);
  EXPECT_TRUE(r[0].is_greedy);
}

// ---------------------------------------------------------------------------------------------
// Hand-made tasks on the bigram model.

// ll of the continuation " " + `choice` after a context ending in 'x', by hand.
double choice_ll(const std::string& choice) {
  auto id = [](char c) { return c == 'a' ? kA : c == 'b' ? kB : c == 'c' ? kC : kX; };
  double ll = bigram_logprob(kX, kSpace);
  int64_t prev = kSpace;
  for (char c : choice) ll += bigram_logprob(prev, id(c)), prev = id(c);
  return ll;
}

TEST(Tasks, HandMadeMultipleChoiceEqualsHandComputedScores) {
  // ll("a") = lp(x, ' ') + lp(' ', a) is the highest total; per byte "bbb" wins:
  //   lp(' ', b) + 2 lp(b, b) = (1 - 5.652) + 2 (4 - 5.761) = -8.17, plus lp(x, ' ') = -5.58:
  //   "a": -2.65 - 5.58 = -8.23 per 1 byte; "bbb": -13.75 / 3 = -4.58 per byte.
  ASSERT_GT(choice_ll("a"), choice_ll("bbb"));
  ASSERT_GT(choice_ll("bbb") / 3, choice_ll("a") / 1);
  ASSERT_GT(choice_ll("a"), choice_ll("b"));
  Task t;
  t.name = "hand";
  t.format = TaskFormat::kMultipleChoice;
  t.items = {{"x", {"a", "bbb"}, 1, {}, 1},        // acc 0, acc_norm 1
             {"x", {"bbb", "a"}, 1, {}, 2},        // acc 1, acc_norm 0
             {"x", {"a", "b"}, 0, {}, 3},          // acc 1, acc_norm 1
             {"x  ", {"bbb", "a", "b"}, 0, {}, 4}};  // trailing spaces move: acc 0, acc_norm 1
  LlamaModel m = bigram_model();
  const std::vector<LoglikelihoodRequest> reqs = task_requests(t, tokenizer());
  ASSERT_EQ(reqs.size(), 9u);
  EXPECT_EQ(reqs[1].context, (std::vector<int64_t>{1, kSpace, kX}));  // BOS, dummy prefix, "x"
  EXPECT_EQ(reqs[1].continuation, (std::vector<int64_t>{kSpace, kB, kB, kB}));
  EXPECT_EQ(reqs[6].context, (std::vector<int64_t>{1, kSpace, kX}));  // "x  ": spaces moved
  EXPECT_EQ(reqs[6].continuation, (std::vector<int64_t>{kSpace, kSpace, kSpace, kB, kB, kB}));
  const std::vector<LoglikelihoodResult> lls = loglikelihoods(m, reqs);
  const std::vector<std::string> flat = {"a", "bbb", "bbb", "a", "a", "b", "bbb", "a", "b"};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(lls[i].loglikelihood, choice_ll(flat[i]), 1e-4) << i;
  TaskResult r = score_task(t, lls);
  EXPECT_EQ(r.n, 4);
  EXPECT_DOUBLE_EQ(r.metric("acc").value, 0.5);
  EXPECT_DOUBLE_EQ(r.metric("acc_norm").value, 0.75);
  EXPECT_NEAR(r.metric("acc").std_error, std::sqrt(0.5 * 0.5 / 3), 1e-12);
  EXPECT_NEAR(r.metric("acc_norm").std_error, std::sqrt(0.75 * 0.25 / 3), 1e-12);
  EXPECT_NEAR(r.baseline, (0.5 + 0.5 + 0.5 + 1.0 / 3) / 4, 1e-12);
  EXPECT_EQ(evaluate_task(m, tokenizer(), t).to_json()["metrics"]["acc_norm"]["value"], 0.75);
}

TEST(Tasks, HandMadeClozeEqualsHandComputedScores) {
  // After 'x' the argmax is ' ', after ' ' it is 'a', after 'b' it is 'b', after 'a' token 0.
  Task t;
  t.name = "cloze";
  t.format = TaskFormat::kLoglikelihood;
  t.items = {{"x", {"a"}, 0, {}, 1},     // greedy: ' ' then 'a'
             {"x", {"bb"}, 0, {}, 2},    // ' ' then 'b': not greedy
             {"x", {"ab"}, 0, {}, 3},    // 'b' after 'a': not greedy
             {"x", {"a"}, 0, {}, 4}};    // greedy again
  TaskResult r = evaluate_task(bigram_model(), tokenizer(), t);
  const double ll[] = {choice_ll("a"), choice_ll("bb"), choice_ll("ab"), choice_ll("a")};
  const double mean = (ll[0] + ll[1] + ll[2] + ll[3]) / 4;
  double ss = 0;
  for (double v : ll) ss += (v - mean) * (v - mean);
  EXPECT_DOUBLE_EQ(r.metric("acc").value, 0.5);
  EXPECT_NEAR(r.metric("acc").std_error, std::sqrt(0.25 / 3), 1e-12);
  EXPECT_NEAR(r.metric("loglikelihood").value, mean, 1e-4);
  EXPECT_NEAR(r.metric("loglikelihood").std_error, std::sqrt(ss / 3) / 2, 1e-4);
  EXPECT_NEAR(r.metric("perplexity").value, std::exp(-mean), std::exp(-mean) * 1e-5);
  EXPECT_TRUE(r.to_json()["metrics"]["perplexity"]["stderr"].is_null());
  EXPECT_DOUBLE_EQ(r.baseline, 0.5);  // "a" is half the targets
  EXPECT_EQ(r.continuation_tokens, 2 + 3 + 3 + 2);
}

TEST(Tasks, StderrIsLmEvalMeanStderr) {
  EXPECT_TRUE(std::isnan(mean_stderr({1.0})));
  // lm_eval.api.metrics.mean_stderr([1, 0, 0]) = sqrt(((2/3)^2 + 2 (1/3)^2) / 2) / sqrt(3)
  EXPECT_NEAR(mean_stderr({1, 0, 0}), std::sqrt((4.0 / 9 + 2.0 / 9) / 2) / std::sqrt(3.0), 1e-15);
}

// HFLM._encode_pair (lm_eval/api/model.py): the context is encode(context) on its own, and the
// continuation is what encode(context + continuation) holds after as many tokens, even where the
// whole text merges across the boundary. With the piece "x " (id kV), "x a" encodes as
// [BOS, ' ', "x ", a], so the continuation is [a] after the context [BOS, ' ', x].
TEST(Tasks, ContextIsEncodedOnItsOwnAsLmEvalDoes) {
  TempDir dir;
  write_tokenizer(dir.path, {"x "});
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(dir.path, kV + 1);
  ASSERT_EQ(tok->encode("x a", true), (std::vector<int64_t>{1, kSpace, kV, kA}));
  Task t;
  t.name = "merge";
  t.format = TaskFormat::kMultipleChoice;
  t.items = {{"x", {"a", "bb"}, 0, {}, 1}};
  const std::vector<LoglikelihoodRequest> reqs = task_requests(t, *tok);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].context, (std::vector<int64_t>{1, kSpace, kX}));
  EXPECT_EQ(reqs[0].continuation, (std::vector<int64_t>{kA}));
  EXPECT_EQ(reqs[1].context, (std::vector<int64_t>{1, kSpace, kX}));
  EXPECT_EQ(reqs[1].continuation, (std::vector<int64_t>{kB, kB}));
}

// Trailing white space of the context moves to the continuation as Python's str.rstrip() finds
// it: Unicode White_Space and U+001C..U+001F, not U+200B (zero width space, no White_Space).
TEST(Tasks, TrailingWhiteSpaceMovesAsPythonRstrip) {
  EXPECT_EQ(python_rstrip_length(""), 0u);
  EXPECT_EQ(python_rstrip_length(" \t"), 0u);
  EXPECT_EQ(python_rstrip_length("ab \t\n\r\x0b\x0c\x1c\x1f\xc2\x85\xc2\xa0\xe3\x80\x80"), 2u);
  EXPECT_EQ(python_rstrip_length("a\xe2\x80\x8b"), 4u);       // U+200B stays
  EXPECT_EQ(python_rstrip_length("\xc3\xa9 "), 2u);            // "é " -> "é"
  Task t;
  t.name = "ws";
  t.format = TaskFormat::kLoglikelihood;
  t.items = {{"x\n", {"a"}, 0, {}, 1}};
  const std::vector<LoglikelihoodRequest> reqs = task_requests(t, tokenizer());
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].context, (std::vector<int64_t>{1, kSpace, kX}));
  EXPECT_EQ(reqs[0].continuation, (std::vector<int64_t>{3 + '\n', kSpace, kA}));  // <0x0A>
}

// lm-eval's acc_norm divides by len(choice) of a Python str, code points; bytes would pick the
// other choice here: "ab" -3 / 2 chars = -1.5 beats "éé" -4 / 2 chars = -2, but per byte
// "éé" -4 / 4 = -1 would win.
TEST(Tasks, AccNormDividesByCodePointsAsLmEval) {
  EXPECT_EQ(code_points("ab"), 2);
  EXPECT_EQ(code_points("\xc3\xa9\xc3\xa9"), 2);
  EXPECT_EQ(code_points("\xf0\x9f\x98\x80x"), 2);
  Task t;
  t.name = "norm";
  t.format = TaskFormat::kMultipleChoice;
  t.items = {{"x", {"ab", "\xc3\xa9\xc3\xa9"}, 0, {}, 1}};
  std::vector<LoglikelihoodResult> lls(2);
  lls[0].loglikelihood = -3;
  lls[1].loglikelihood = -4;
  const TaskResult r = score_task(t, lls);
  EXPECT_DOUBLE_EQ(r.metric("acc").value, 1.0);
  EXPECT_DOUBLE_EQ(r.metric("acc_norm").value, 1.0);
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_DOUBLE_EQ(r.items[0].acc_norm, 1.0);
}

// `eval --samples-out`: per item the scores that make up the metrics and the token ids scored.
TEST(Tasks, SampleJsonHoldsEachItemsScoresAndTokens) {
  Task t;
  t.name = "hand";
  t.format = TaskFormat::kMultipleChoice;
  t.items = {{"x", {"a", "bbb"}, 1, "first", 1}, {"x  ", {"bbb", "a", "b"}, 0, {}, 2}};
  const TaskResult r = evaluate_task(bigram_model(), tokenizer(), t);
  const std::vector<LoglikelihoodRequest> reqs = task_requests(t, tokenizer());
  ASSERT_EQ(r.items.size(), 2u);
  const nlohmann::json j0 = task_sample_json(t, r, 0), j1 = task_sample_json(t, r, 1);
  EXPECT_EQ(j0["task"], "hand");
  EXPECT_EQ(j0["doc_id"], 0);
  EXPECT_EQ(j0["id"], "first");
  EXPECT_TRUE(j1["id"].is_null());
  EXPECT_EQ(j1["line"], 2);
  EXPECT_EQ(j1["gold"], 0);
  EXPECT_EQ(j1["choices"].size(), 3u);
  EXPECT_EQ(j0["context_tokens"].get<std::vector<int64_t>>(), reqs[0].context);
  EXPECT_EQ(j1["continuation_tokens"][0].get<std::vector<int64_t>>(), reqs[2].continuation);
  EXPECT_NEAR(j0["loglikelihoods"][1].get<double>(), choice_ll("bbb"), 1e-4);
  EXPECT_EQ(j0["acc"], 0.0);       // "a" has the higher total
  EXPECT_EQ(j0["acc_norm"], 1.0);  // "bbb" per character
  EXPECT_EQ(j0["is_greedy"].size(), 2u);
  double acc = 0;
  for (const TaskItemScore& s : r.items) acc += s.acc;
  EXPECT_DOUBLE_EQ(acc / 2, r.metric("acc").value);
  EXPECT_THROW(task_sample_json(t, r, 2), ConfigError);
  t.format = TaskFormat::kLoglikelihood;
  t.items = {{"x", {"a"}, 0, {}, 1}};
  const nlohmann::json c = task_sample_json(t, evaluate_task(bigram_model(), tokenizer(), t), 0);
  EXPECT_FALSE(c.contains("gold"));
  EXPECT_FALSE(c.contains("acc_norm"));
  EXPECT_EQ(c["acc"], 1.0);  // ' ' then 'a' is the greedy continuation
  EXPECT_EQ(c["is_greedy"][0], true);
}

// ---------------------------------------------------------------------------------------------
// Perplexity and bits per byte of uniform logits.

TEST(Perplexity, AllZeroOutputWeightsGiveTheVocabularySizeAndBitsPerByte) {
  LlamaModel m = bigram_model();
  m.weights.lm_head = at::zeros_like(m.weights.lm_head);  // logits 0: uniform over V
  // BOS " a b" " c" BOS " a": targets ' '(after BOS: 0 bytes) a b ' ' c BOS ' '(0) a -> 5 bytes.
  const std::vector<int32_t> stream = {1, kSpace, kA, kB, kSpace, kC, 1, kSpace, kA};
  TokenBytes tb = TokenBytes::from_tokenizer(tokenizer());
  EvalOptions o;
  o.show_progress = false;
  o.token_bytes = &tb;
  o.batch_size = 2;
  EvalResult whole = evaluate(m, nullptr, {at::tensor(std::vector<int64_t>(stream.begin(), stream.end()),
                                                      at::kLong).view({1, -1})}, o);
  EvalResult slide = sliding_window_evaluate(m, &m, stream, /*context=*/4, /*stride=*/1, o);
  for (const EvalResult& r : {whole, slide}) {
    EXPECT_EQ(r.tokens, 8);
    EXPECT_NEAR(r.perplexity, double(kV), 1e-3);
    EXPECT_EQ(r.bytes, 5);
    EXPECT_NEAR(r.bits_per_byte, 8 * std::log2(double(kV)) / 5, 1e-5);
  }
  EXPECT_EQ(slide.sequences, 6);  // windows start at 0..5 (the last one ends at 9)
  EXPECT_NEAR(slide.kl_to_teacher, 0, 1e-6);
  EXPECT_DOUBLE_EQ(slide.topk_overlap, 1.0);
}

TEST(Perplexity, BatchedSlidingWindowEqualsOneWindowAtATime) {
  LlamaModel m = random_model(23), t = random_model(24);
  std::vector<int64_t> s = ids(test::random_tokens(1, 61, 40, 7)[0]);
  std::vector<int32_t> stream(s.begin(), s.end());
  EvalOptions one, many;
  one.show_progress = many.show_progress = false;
  one.batch_size = 1;
  many.batch_size = 4;
  EvalResult a = sliding_window_evaluate(m, &t, stream, 16, 5, one);
  EvalResult b = sliding_window_evaluate(m, &t, stream, 16, 5, many);
  EXPECT_EQ(a.tokens, 60);
  EXPECT_EQ(b.tokens, 60);
  EXPECT_NEAR(a.mean_nll, b.mean_nll, 1e-6);
  EXPECT_NEAR(a.kl_to_teacher, b.kl_to_teacher, 1e-6);
  EXPECT_DOUBLE_EQ(a.topk_overlap, b.topk_overlap);
  EXPECT_GT(a.kl_to_teacher, 0.01);
}

// ---------------------------------------------------------------------------------------------
// Task files.

void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

void expect_bad(const TempDir& d, const std::string& content, const std::string& where,
                const std::string& needle) {
  const fs::path p = d.path / "bad.jsonl";
  write(p, content);
  try {
    read_task_file(p);
    ADD_FAILURE() << "no error for: " << content;
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p.string() + where), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(TaskFile, RoundTripsAndBadLinesNameTheLine) {
  TempDir d;
  const std::string mc = "{\"format\": \"multiple_choice\", \"name\": \"t\"}\n";
  const std::string good = R"({"context": "x", "choices": ["a", "b"], "gold": 1})" "\n";
  expect_bad(d, mc + good + "\n{\"context\": \"x\", \"choices\": [\"a\"], \"gold\": 0}\n", ":4:",
             "at least 2");
  expect_bad(d, mc + good + R"({"context": "x", "choices": ["a", "b"], "gold": 2})", ":3:",
             "'gold' is 2, outside [0, 2)");
  expect_bad(d, mc + good + R"({"context": "x", "choices": ["a", "b"], "label": 0})", ":3:",
             "unknown key 'label'");
  expect_bad(d, mc + R"({"context": "x", "choices": ["a", "b"], "gold": 0, "format": "loglikelihood"})",
             ":2:", "the header says \"multiple_choice\"");
  expect_bad(d, mc + good + "{\"context\": \"x\", \"choices\": [\"a\", \"b\"], gold: 0}\n", ":3:",
             "invalid JSON");
  expect_bad(d, mc + R"({"context": "", "choices": ["a", "b"], "gold": 0})", ":2:", "'context' is empty");
  expect_bad(d, mc + R"({"context": "x", "choices": ["a", ""], "gold": 0})", ":2:", "choice 1");
  expect_bad(d, mc + R"({"context": "x", "choices": ["a", "b"], "gold": "0"})", ":2:", "integer");
  expect_bad(d, "{\"format\": \"loglikelihood\"}\n{\"context\": \"x\", \"choices\": [\"a\"]}\n",
             ":2:", "unknown key 'choices'");
  expect_bad(d, "{\"format\": \"loglikelihood\"}\n{\"context\": \"x\"}\n", ":2:", "missing key 'target'");
  expect_bad(d, "{\"name\": \"t\"}\n" + good, ":1:", "no 'format'");
  expect_bad(d, "{\"format\": \"generate\"}\n" + good, ":1:", "expected \"multiple_choice\"");
  expect_bad(d, mc, "", "a header but no items");
  expect_bad(d, "", "", "empty file");

  Task t;
  t.name = "round";
  t.format = TaskFormat::kLoglikelihood;
  t.meta = {{"seed", 3}};
  t.items = {{"Tom went to the", {"park"}, 0, "s0-1", 0}, {"\"Hi!\" said Sue to", {"Ann"}, 0, {}, 0}};
  write_task_file(d.path / "round.jsonl", t);
  Task back = read_task_file(d.path / "round.jsonl");
  EXPECT_EQ(back.name, "round");
  EXPECT_EQ(back.meta, t.meta);
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[1].context, t.items[1].context);
  EXPECT_EQ(back.items[1].choices, t.items[1].choices);
  EXPECT_EQ(back.items[0].id, "s0-1");
  EXPECT_EQ(back.items[1].line, 3);
}

// ---------------------------------------------------------------------------------------------
// make-tasks.

const std::vector<std::string> kStories = {
    "Once upon a time, there was a girl named Lily. She liked to play with her red ball. "
    "\"Look at me!\" said Lily. Her mom smiled at her.\n\nThe sun was warm and bright. They went "
    "home together.",
    "Tom had a big dog. The dog liked to run in the park. One day, the dog ran away! Tom looked "
    "for the dog everywhere. He found it under a tree and they were happy. The end",
    "A little bird sat on a branch. It sang a happy song every morning. The children heard the "
    "bird and danced. \"What a nice song,\" said Ben. The bird sang again for them.",
    "Sue and Max wanted to bake a cake. They put flour and eggs in a bowl. Max dropped an egg on "
    "the floor. Sue laughed and helped him clean it up.",
};

TEST(MakeTasks, SentencesAndItems) {
  const std::string& s = kStories[0];
  std::vector<SentenceSpan> sp = split_sentences(s);
  std::vector<std::string> got;
  for (auto x : sp) got.push_back(s.substr(x.begin, x.end - x.begin));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "Once upon a time, there was a girl named Lily.",
                     "She liked to play with her red ball.", "\"Look at me!\" said Lily.",
                     "Her mom smiled at her.", "The sun was warm and bright.",
                     "They went home together."}));
  EXPECT_EQ(split_sentences(kStories[1]).size(), 5u);  // "The end" has no full stop
  EXPECT_FALSE(valid_utf8("a\xC3"));
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9"));

  MakeTasksOptions o;
  o.seed = 5;
  o.num_choices = 3;
  StoryTasks t = make_story_tasks(kStories, o);
  EXPECT_EQ(t.stories, 4);
  for (const TaskItem& it : t.cloze.items) {
    const size_t story = std::stoul(it.id.get<std::string>().substr(1));
    EXPECT_EQ(kStories[story].rfind(it.context + " " + it.choices[0], 0), 0u) << it.context;
    EXPECT_NE(std::string(".!?\"").find(kStories[story][it.context.size() + 1 + it.choices[0].size()]),
              std::string::npos);
  }
  // Every sentence-final word, counted by hand: Lily, ball, Lily, her, bright, together / dog,
  // park, away, everywhere, happy / branch, morning, danced, Ben, them / cake, bowl, floor, up.
  EXPECT_EQ(t.cloze.items.size(), 20u);
  for (const TaskItem& it : t.story_ending.items) {
    ASSERT_EQ(it.choices.size(), 3u);
    const size_t story = std::stoul(it.id.get<std::string>().substr(1));
    EXPECT_EQ(kStories[story].rfind(it.context, 0), 0u);
    EXPECT_NE(kStories[story].find(it.choices[size_t(it.gold)], it.context.size()), std::string::npos);
    for (size_t c = 0; c < 3; ++c)
      if (int64_t(c) != it.gold) {
        EXPECT_EQ(kStories[story].find(it.choices[c]), std::string::npos);
      }
  }
  o.cloze_items = 3;
  EXPECT_EQ(make_story_tasks(kStories, o).cloze.items.size(), 3u);
  EXPECT_THROW(make_story_tasks({"No sentence here"}, o), ConfigError);
}

// Stories with characters: names that also occur as lower-case words elsewhere ("rose", "sunny"),
// possessives, and names that occur only at the start of sentences ("Then", "One").
const std::vector<std::string> kCharacterStories = {
    "Rose had a cat. The cat liked Rose. Then Rose and Tim played. Tim was happy and Rose smiled.",
    "Tim saw a red rose in the garden. He gave the rose to Mia. Mia said thank you to Tim. Then "
    "Mia ran home.",
    "It was a sunny day. Sunny the dog ran to Ben. Ben threw a ball to Sunny. Sunny was happy with "
    "Ben.",
    "Max and Lily went to the park. They saw Max's friend Sam. Sam said hi to Lily and Max. Lily "
    "and Sam played.",
    "Sue liked to sing. One day, Sue sang for Amy. Amy clapped for Sue. Then the sun went down.",
};

// The words of a text, lower-cased: maximal runs of ASCII letters (a plainer cut than make_tasks,
// which also drops runs beside a digit or a non-ASCII byte; none occur in these stories).
std::set<std::string> lower_words(const std::string& text) {
  std::set<std::string> out;
  std::string w;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      w += char(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.insert(w);
      w.clear();
    }
  }
  return out;
}

std::string lowered(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t story_of(const TaskItem& it) { return std::stoul(it.id.get<std::string>().substr(1)); }

TEST(MakeTasks, CharacterNamesAreMidSentenceWords) {
  // Tom, Ann, Sam, Eve: mid-sentence. Max and Lily (before "'s") once mid-sentence. Not names:
  // The, One, Bob, Kim (only at the start of a sentence, a line or after ':'), Look (after an
  // opening quote), Brown (after "Mr."), Mr, Sunday, I (stop list), TV, McDo (not capitalized
  // words), Zo and Jo (beside a non-ASCII byte or a digit).
  const std::string text =
      "The dog saw Tom. The end. One day, \"Look!\" said Ann to Mr. Brown on Sunday. I ran.\n"
      "Bob sat. Zo\xC3\xAB and Jo2 and TV and McDo met Eve: Kim ran.\nKim sat. \"Hi,\" Sam said. "
      "Max ran. They saw Max and Lily's ball.";
  EXPECT_EQ(character_names(text),
            (std::vector<std::string>{"Ann", "Eve", "Lily", "Max", "Sam", "Tom"}));
  EXPECT_EQ(character_names("Tom ran. Tom sat! \"Tom?\" Tom said.\nTom"),
            std::vector<std::string>{});
  EXPECT_EQ(character_names("Then they saw Then."), std::vector<std::string>{"Then"});
}

TEST(MakeTasks, CharacterItemsCheckedByHand) {
  // Names: Tom (story 0; "named Tom"), Ben (1), Lily and Max (2). Not names: Once, One, Sue,
  // She (sentence-initial only). Story 0 has two later mentions of Tom, in sentences 1 and 2;
  // its distractors are the other names, Ben, Lily and Max, exactly the 3 needed. Ben is
  // mentioned once (no item) but is a distractor. Story 2 has 2 distractors (Ben, Tom), fewer
  // than 3: no item.
  const std::vector<std::string> stories = {
      "Once upon a time, there was a cat named Tom. Tom liked milk. One day, Tom saw a dog.",
      "Sue had a hat. She gave it to Ben.",
      "Lily met Max. Max said hi to Lily.",
  };
  MakeTasksOptions o;
  for (uint64_t seed : {0, 1, 2, 3}) {
    o.seed = seed;
    const Task t = make_story_tasks(stories, o).character;
    EXPECT_EQ(t.name, "character");
    EXPECT_EQ(t.format, TaskFormat::kMultipleChoice);
    ASSERT_EQ(t.items.size(), 2u);
    EXPECT_EQ(t.items[0].id, "s0-1");
    EXPECT_EQ(t.items[0].context, "Once upon a time, there was a cat named Tom.");
    EXPECT_EQ(t.items[1].id, "s0-2");
    EXPECT_EQ(t.items[1].context, "Once upon a time, there was a cat named Tom. Tom liked milk. "
                                  "One day,");
    for (const TaskItem& it : t.items) {
      EXPECT_EQ(it.choices[size_t(it.gold)], "Tom");
      std::vector<std::string> sorted = it.choices;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, (std::vector<std::string>{"Ben", "Lily", "Max", "Tom"}));
    }
  }
  // With 2 choices story 2 has enough distractors: one item for its sentence 1, which mentions
  // both Max and Lily after their first occurrence; the seed picks the mention.
  o.num_choices = 2;
  std::set<std::string> contexts;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    o.seed = seed;
    const Task t = make_story_tasks(stories, o).character;
    ASSERT_EQ(t.items.size(), 3u);
    const TaskItem& it = t.items[2];
    EXPECT_EQ(it.id, "s2-1");
    const std::string gold = it.choices[size_t(it.gold)];
    EXPECT_EQ(gold, it.context == "Lily met Max." ? "Max" : "Lily") << it.context;
    const std::string other = it.choices[size_t(1 - it.gold)];
    EXPECT_TRUE(other == "Ben" || other == "Tom") << other;
    contexts.insert(it.context);
  }
  EXPECT_EQ(contexts, (std::set<std::string>{"Lily met Max.", "Lily met Max. Max said hi to"}));
}

TEST(MakeTasks, CharacterDistractorsNeverOccurInTheStory) {
  std::set<std::string> all_names;
  for (const std::string& s : kCharacterStories)
    for (const std::string& n : character_names(s)) all_names.insert(n);
  EXPECT_EQ(all_names, (std::set<std::string>{"Amy", "Ben", "Lily", "Max", "Mia", "Rose", "Sam",
                                              "Sue", "Sunny", "Tim"}));
  std::set<int64_t> golds;
  std::set<size_t> stories_with_items;
  for (int64_t choices : {2, 3, 4})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      MakeTasksOptions o;
      o.seed = seed;
      o.num_choices = choices;
      const Task t = make_story_tasks(kCharacterStories, o).character;
      ASSERT_FALSE(t.items.empty());
      std::set<std::string> ids;
      for (const TaskItem& it : t.items) {
        EXPECT_TRUE(ids.insert(it.id.get<std::string>()).second) << "one item per sentence";
        const size_t s = story_of(it);
        const std::string& story = kCharacterStories[s];
        const std::string& gold = it.choices[size_t(it.gold)];
        golds.insert(it.gold);
        stories_with_items.insert(s);
        ASSERT_EQ(it.choices.size(), size_t(choices));
        // The story goes on with " <gold>" after the context, and gold was named before.
        ASSERT_EQ(story.rfind(it.context + " " + gold, 0), 0u) << it.context;
        const char after = story[it.context.size() + 1 + gold.size()];
        EXPECT_FALSE(std::isalpha(static_cast<unsigned char>(after))) << it.context;
        EXPECT_TRUE(lower_words(it.context).count(lowered(gold))) << gold;
        const std::set<std::string> words = lower_words(story);
        for (size_t c = 0; c < it.choices.size(); ++c) {
          EXPECT_TRUE(all_names.count(it.choices[c])) << it.choices[c];
          if (int64_t(c) == it.gold) continue;
          EXPECT_FALSE(words.count(lowered(it.choices[c])))
              << it.choices[c] << " is a word of story " << s;  // "Rose" never in story 1
        }
        EXPECT_EQ(std::set<std::string>(it.choices.begin(), it.choices.end()).size(),
                  it.choices.size());
      }
    }
  EXPECT_EQ(golds, (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(stories_with_items, (std::set<size_t>{0, 1, 2, 3, 4}));
}

TEST(MakeTasks, CharacterTaskAbsentWhenNoStoryGivesAnItem) {
  // kStories name three characters: Lily (story 0), Ben (2), Max (3, "Sue and Max"). With 4
  // choices no story has the 3 distractors it needs: the task is empty, cloze and story_ending
  // still stand, and an earlier character.jsonl in the folder is removed.
  MakeTasksOptions o;
  StoryTasks t = make_story_tasks(kStories, o);
  EXPECT_TRUE(t.character.items.empty());
  EXPECT_FALSE(t.cloze.items.empty());
  TempDir d;
  std::vector<fs::path> written =
      write_story_tasks(d.path, make_story_tasks(kCharacterStories, o), nullptr);
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(written[2], d.path / "character.jsonl");
  EXPECT_TRUE(fs::exists(d.path / "character.jsonl"));
  written = write_story_tasks(d.path, std::move(t), nullptr);
  EXPECT_EQ(written,
            (std::vector<fs::path>{d.path / "cloze.jsonl", d.path / "story_ending.jsonl"}));
  EXPECT_FALSE(fs::exists(d.path / "character.jsonl"));
  // With 2 choices: "said Lily" in sentence 2 of story 0 and "Max dropped" in sentence 2 of
  // story 3 (Ben is named once: no item).
  o.num_choices = 2;
  t = make_story_tasks(kStories, o);
  ASSERT_EQ(t.character.items.size(), 2u);
  const TaskItem& lily = t.character.items[0];
  EXPECT_EQ(lily.id, "s0-2");
  EXPECT_EQ(lily.context, "Once upon a time, there was a girl named Lily. She liked to play with "
                          "her red ball. \"Look at me!\" said");
  EXPECT_EQ(lily.choices[size_t(lily.gold)], "Lily");
  const TaskItem& max = t.character.items[1];
  EXPECT_EQ(max.id, "s3-2");
  EXPECT_EQ(max.context, "Sue and Max wanted to bake a cake. They put flour and eggs in a bowl.");
  EXPECT_EQ(max.choices[size_t(max.gold)], "Max");
  o.character_items = 0;
  EXPECT_THROW(make_story_tasks(kStories, o), ConfigError);
}

std::string slurp(const fs::path& p) { return read_file(p); }

TEST(MakeTasks, DeterministicForASeed) {
  MakeTasksOptions o;
  o.seed = 9;
  o.cloze_items = 6;
  o.ending_items = 6;
  o.character_items = 6;
  std::vector<std::string> stories = kStories;
  stories.insert(stories.end(), kCharacterStories.begin(), kCharacterStories.end());
  TempDir d;
  write_story_tasks(d.path / "a", make_story_tasks(stories, o), nullptr);
  write_story_tasks(d.path / "b", make_story_tasks(stories, o), nullptr);
  o.seed = 10;
  write_story_tasks(d.path / "c", make_story_tasks(stories, o), nullptr);
  for (const char* f : {"cloze.jsonl", "story_ending.jsonl", "character.jsonl"}) {
    EXPECT_EQ(slurp(d.path / "a" / f), slurp(d.path / "b" / f)) << f;
    EXPECT_NE(slurp(d.path / "a" / f), slurp(d.path / "c" / f)) << f;
    EXPECT_NO_THROW(read_task_file(d.path / "a" / f));
  }
}

// ---------------------------------------------------------------------------------------------
// The CLI: make-tasks from a token file, then eval of two models side by side.

// The stories of `sets` encoded one after the other, each with the tokenizer's BOS.
std::vector<int32_t> token_stream(std::initializer_list<const std::vector<std::string>*> sets) {
  std::vector<int32_t> out;
  for (const auto* set : sets)
    for (const std::string& s : *set)
      for (int64_t id : tokenizer().encode(s, /*add_special_tokens=*/true))
        out.push_back(int32_t(id));
  return out;
}

int run_cli(const std::string& args) {
  const char* bin = std::getenv("AC_BIN");
  std::string exe = bin ? bin : ac::test::binary_dir().string() + "/autocompress";
  return std::system(("AC_QUIET=1 " + exe + " " + args + " >/dev/null 2>&1").c_str());
}

TEST(Cli, MakeTasksThenEvalTwoModels) {
  TempDir d;
  const std::string D = d.path.string();
  LlamaModel a = bigram_model(), b = bigram_model();
  b.weights.lm_head = at::zeros_like(b.weights.lm_head);
  save_checkpoint_atomic(d.path / "a", a);
  save_checkpoint_atomic(d.path / "b", b);
  write_tokenizer(d.path / "a");
  write_tokenizer(d.path / "b");
  write_token_file(d.path / "held.tokens", token_stream({&kStories}), kV);
  for (const char* out : {"t1", "t2"})
    ASSERT_EQ(run_cli(fmt::format("make-tasks --model {0}/a --data {0}/held.tokens --out {0}/{1} "
                                  "--seed 4 --choices 3", D, out)), 0);
  for (const char* f : {"cloze.jsonl", "story_ending.jsonl", "character.jsonl"})
    EXPECT_EQ(slurp(d.path / "t1" / f), slurp(d.path / "t2" / f)) << f;
  Task ending = read_task_file(d.path / "t1" / "story_ending.jsonl");
  EXPECT_EQ(ending.meta["seed"], 4);
  EXPECT_EQ(ending.meta["stories"], 4);
  write_token_file(d.path / "named.tokens", token_stream({&kCharacterStories}), kV);
  ASSERT_EQ(run_cli(fmt::format("make-tasks --model {0}/a --data {0}/named.tokens --out {0}/t3 "
                                "--seed 4 --choices 3 --character-items 2", D)), 0);
  Task character = read_task_file(d.path / "t3" / "character.jsonl");
  ASSERT_EQ(character.items.size(), 2u);
  EXPECT_EQ(character.items[0].choices.size(), 3u);

  ASSERT_EQ(run_cli(fmt::format("eval --model {0}/a --model {0}/b --teacher {0}/a --data "
                                "{0}/held.tokens --seq-len 32 --tasks {0}/t1/cloze.jsonl --tasks "
                                "{0}/t1/story_ending.jsonl --out {0}/eval.json --samples-out "
                                "{0}/samples.jsonl", D)), 0);
  nlohmann::json j = read_json_file(d.path / "eval.json");
  // --samples-out: one line per model and item, whose mean acc is the task's.
  Task cloze = read_task_file(d.path / "t1" / "cloze.jsonl");
  std::vector<std::string> lines;
  for (std::istringstream in(slurp(d.path / "samples.jsonl")); std::getline(in, lines.emplace_back());) {}
  lines.pop_back();
  ASSERT_EQ(lines.size(), 2 * (cloze.items.size() + ending.items.size()));
  double acc = 0;
  for (size_t k = 0; k < ending.items.size(); ++k) {
    const nlohmann::json s = nlohmann::json::parse(lines[cloze.items.size() + k]);
    EXPECT_EQ(s["model"], D + "/a");
    EXPECT_EQ(s["task"], "story_ending");
    EXPECT_EQ(s["doc_id"], k);
    acc += s["acc"].get<double>();
  }
  EXPECT_NEAR(acc / double(ending.items.size()),
              j["models"][0]["tasks"][1]["metrics"]["acc"]["value"].get<double>(), 1e-12);
  EXPECT_NE(run_cli(fmt::format("eval --model {0}/a --data {0}/held.tokens --samples-out "
                                "{0}/s.jsonl", D)), 0);  // no --tasks
  ASSERT_EQ(j["models"].size(), 2u);
  const nlohmann::json& jb = j["models"][1];
  EXPECT_NEAR(jb["eval"]["perplexity"].get<double>(), double(kV), 1e-2);  // uniform
  EXPECT_TRUE(jb["eval"].contains("bits_per_byte"));
  ASSERT_EQ(jb["tasks"].size(), 2u);
  EXPECT_EQ(jb["tasks"][0]["task"], "cloze");
  EXPECT_NEAR(jb["tasks"][0]["metrics"]["loglikelihood"]["value"].get<double>(),
              -std::log(double(kV)) * jb["tasks"][0]["continuation_tokens"].get<double>() /
                  jb["tasks"][0]["n"].get<double>(), 1e-3);
  TaskResult direct = evaluate_task(a, tokenizer(), ending);
  EXPECT_NEAR(j["models"][0]["tasks"][1]["metrics"]["acc"]["value"].get<double>(),
              direct.metric("acc").value, 1e-12);
  EXPECT_NE(run_cli(fmt::format("eval --model {0}/a --tasks {0}/missing.jsonl", D)), 0);
}

TEST(StoryTasksStage, WritesTasksScoresBothModelsAndRendersATable) {
  TempDir d;
  write_tokenizer(d.path);
  LlamaModel teacher = bigram_model(), student = bigram_model();
  student.weights.lm_head = at::zeros_like(student.weights.lm_head);
  const std::vector<int32_t> held = token_stream({&kStories, &kCharacterStories});
  StoryTasksStageOptions o;
  o.teacher_dir = d.path;
  o.seed = 3;
  o.max_items = 5;
  o.out_dir = d.path / "tasks";
  nlohmann::json j = run_story_tasks_stage(teacher, student, held, o);
  ASSERT_FALSE(j.contains("skipped")) << j.dump();
  EXPECT_EQ(j["files"], nlohmann::json({"tasks/cloze.jsonl", "tasks/story_ending.jsonl",
                                         "tasks/character.jsonl"}));
  EXPECT_EQ(read_task_file(d.path / "tasks" / "cloze.jsonl").items.size(), 5u);
  EXPECT_EQ(read_task_file(d.path / "tasks" / "character.jsonl").items.size(), 5u);
  ASSERT_EQ(j["compressed"].size(), 3u);
  EXPECT_EQ(j["compressed"][0]["n"], 5);
  EXPECT_EQ(j["compressed"][2]["task"], "character");
  EXPECT_EQ(j["compressed"][2]["n"], 5);
  EXPECT_EQ(j["compressed"][2]["baseline"]["kind"], "chance");
  EXPECT_DOUBLE_EQ(j["compressed"][2]["baseline"]["value"].get<double>(), 0.25);
  // The student is uniform: every target token has log-probability -ln V.
  EXPECT_NEAR(j["compressed"][0]["metrics"]["loglikelihood"]["value"].get<double>(),
              -std::log(double(kV)) * j["compressed"][0]["continuation_tokens"].get<double>() / 5,
              1e-3);
  const std::string md = render_story_tasks_md(j);
  EXPECT_NE(md.find("| cloze | acc | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| story_ending | acc_norm | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| character | acc | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.2500 (chance) |\n| character | acc_norm"), std::string::npos) << md;
  o.max_items = 0;
  EXPECT_TRUE(run_story_tasks_stage(teacher, student, held, o).contains("skipped"));
  EXPECT_NE(render_story_tasks_md({{"skipped", "x"}}).find("Skipped: x"), std::string::npos);
}

}  // namespace
}  // namespace ac
