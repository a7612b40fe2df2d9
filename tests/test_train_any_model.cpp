// Distillation, evaluation and generation of the MoE (Qwen3-MoE, Mixtral) and Nemotron-H model
// kinds (model/trainable.h; distill/distill.h, eval/eval.h and generate's overloads).
//
//   GradientsMatchTransformers: autograd through our forwards (the Mamba-2 chunked scan, the
//     conv1d, the gated RMSNorm, relu² MLPs, the sigmoid router with its correction bias, the
//     shared and latent experts; the softmax top-k router and SwiGLU experts) against
//     transformers' own gradients of the mean next-token cross-entropy on the committed goldens
//     (tests/golden/hf_golden_gradients.py, float64: the difference is our fp32 error);
//   ParametersAreTheModelsTensors: what the optimizer trains (no correction bias, a tied head
//     once) and that to_device keeps the tying;
//   DistillLowersHeldOutKl{NemotronH,Moe}: a few steps from a perturbed copy toward its teacher
//     lower the KL on held-out windows the training never saw;
//   DistillResumesBitForBit: a Nemotron-H run stopped and resumed equals one run straight through;
//   DistillUnderBf16Autocast: both kinds train with their forwards under bf16 autocast;
//   EvalAgainstItself / PerplexityIsTransformersNll: the KL of a model to itself is 0 with top-1
//     agreement 1, and the perplexity is exp of the mean NLL of transformers' own logits;
//   GreedyGenerationFollowsTheGoldens: greedy generate picks the argmax of transformers'
//     step-by-step logits first, then each token is the argmax of a full forward over the text;
//   GenerateCliTakesEveryKind: `autocompress generate` on a Nemotron-H and a Qwen3-MoE folder
//     prints what the library's greedy generate continues;
//   refusals: the Llama-only hidden-state loss and learning-curve evaluations.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include "common/error.h"
#include "data/dataset.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/safetensors.h"
#include "io/text_tokenizer.h"
#include "model/trainable.h"
#include "golden_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

// Largest |ours - transformers| / max |transformers| over the gradients of a fixture, fp32 against
// float64 (measured on machine B: at most 1.1e-5, nemotronh-latent-bf16-sharded's in_proj bias;
// docs/benchmarks.md).
constexpr double kGradTolerance = 3e-5;
constexpr double kLossTolerance = 1e-6;  // relative, the loss (measured at most 9.1e-8)

fs::path golden(const std::string& rel) { return ac::test::source_dir() / "tests/golden" / rel; }

// Our gradient for a name of grads.safetensors: a per-expert name "...experts.e.up_proj.weight"
// is row e of the fused "...experts.up_proj".
at::Tensor find_grad(const std::map<std::string, at::Tensor>& ours, const std::string& name) {
  static const std::regex per_expert(R"((.*\.experts)\.(\d+)\.(\w+)\.weight)");
  std::smatch m;
  if (std::regex_match(name, m, per_expert)) {
    const std::string fused = m[1].str() + "." + m[3].str();
    EXPECT_TRUE(ours.count(fused)) << fused;
    if (!ours.count(fused) || !ours.at(fused).defined()) return at::Tensor();
    return ours.at(fused).select(0, std::stoll(m[2].str()));
  }
  EXPECT_TRUE(ours.count(name)) << name;
  return ours.count(name) ? ours.at(name) : at::Tensor();
}

// The mean next-token CE of `model` on the fixture's tokens, backward, and the gradients and loss
// compared with grads.safetensors. Returns the largest relative difference of the gradients.
template <class M>
double compare_gradients(const M& model, const fs::path& dir) {
  std::vector<NamedTensor> params = named_parameters(model);
  for (auto& [name, t] : params) t.requires_grad_(true);
  const at::Tensor tokens = ac::test::read_golden_tokens(dir);  // [B, T]
  const int64_t T = tokens.size(1), V = model.config.vocab_size;
  const at::Tensor logits = model.forward(tokens);  // [B, T, V]
  const at::Tensor loss = at::cross_entropy_loss(logits.narrow(1, 0, T - 1).reshape({-1, V}),
                                                 tokens.narrow(1, 1, T - 1).reshape({-1}));
  loss.backward();
  SafetensorsFile golden_grads(dir / "grads.safetensors");
  const double hf_loss = golden_grads.get("loss").item<double>();
  const double loss_diff = std::abs(loss.item<double>() - hf_loss) / hf_loss;
  std::printf("[grad-golden] %-40s loss %.7f, transformers %.7f, relative %.3g\n",
              dir.filename().c_str(), loss.item<double>(), hf_loss, loss_diff);
  EXPECT_LE(loss_diff, kLossTolerance) << dir;
  std::map<std::string, at::Tensor> grads;
  for (const auto& [name, t] : params) grads[name] = t.grad();
  double worst = 0;
  for (const std::string& name : golden_grads.names()) {
    if (name == "loss") continue;
    const at::Tensor g = find_grad(grads, name);
    EXPECT_TRUE(g.defined()) << name << ": no gradient";
    if (!g.defined()) continue;
    EXPECT_GT(golden_grads.get(name).abs().max().item<double>(), 0) << name << ": tests nothing";
    worst = std::max(worst, ac::test::golden_relative_diff(g, golden_grads.get(name), name,
                                                           "grad-golden"));
  }
  for (auto& [name, t] : params) {
    t.mutable_grad() = at::Tensor();
    t.requires_grad_(false);
  }
  return worst;
}

NemotronHModel nemotron(const std::string& name) {
  return load_nemotron_h_checkpoint(golden("hf-nemotron-h/" + name));
}
MoeModel moe(const std::string& name) { return load_moe_checkpoint(golden("hf-moe/" + name)); }

// Every trainable tensor times (1 + sigma N(0, 1)), seeded: a student its teacher can correct.
template <class M>
void perturb(M& m, double sigma, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  for (at::Tensor& t : trainable_parameters(m))
    t.mul_(1.0 + sigma * at::randn(t.sizes(), gen, at::kFloat));
}

// Random ids over the vocabulary (BOS excluded), seeded: training and held-out streams.
TokenDataset random_tokens(int64_t vocab, int64_t n, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor ids = at::randint(3, vocab, {n}, gen, at::kLong).to(at::kInt);
  return TokenDataset(std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + n),
                      vocab);
}

DistillOptions short_run(int64_t steps) {
  DistillOptions o;
  o.batch_size = 4;
  o.seq_len = 16;
  o.token_budget = steps * o.batch_size * o.seq_len;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 2;
  o.weight_decay = 0.0;
  o.show_progress = false;
  o.checkpoint_every = 0;
  return o;
}

EvalOptions heldout_eval() {
  EvalOptions e;
  e.batch_size = 4;
  e.seq_len = 16;
  e.show_progress = false;
  return e;
}

template <class M>
void expect_distill_lowers_kl(const M& teacher, M student, const char* what) {
  const int64_t V = teacher.config.vocab_size;
  const TokenDataset train = random_tokens(V, 4096, 1), heldout = random_tokens(V, 512, 2);
  const double before = evaluate(student, &teacher, heldout, heldout_eval()).kl_to_teacher;
  const DistillResult r = distill(teacher, student, train, short_run(30));
  const double after = evaluate(student, &teacher, heldout, heldout_eval()).kl_to_teacher;
  std::printf("[distill-any] %s: held-out KL %.5f -> %.5f after %lld steps (train loss %.5f -> "
              "%.5f)\n", what, before, after, (long long)r.steps_done, r.steps.front().loss,
              r.steps.back().loss);
  EXPECT_EQ(r.steps_done, 30);
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_GT(before, 0.05) << "the perturbation should move the student away from its teacher";
  EXPECT_LT(after, 0.7 * before) << what;  // measured 0.56 (Nemotron-H) and 0.54 (Qwen3-MoE)
  for (const at::Tensor& p : trainable_parameters(student)) EXPECT_FALSE(p.requires_grad());
}

}  // namespace

TEST(TrainAnyModel, GradientsMatchTransformers) {
  const double nm = compare_gradients(nemotron("nemotronh-mix-fp32"),
                                      golden("hf-nemotron-h/nemotronh-mix-fp32"));
  const double nl = compare_gradients(nemotron("nemotronh-latent-bf16-sharded"),
                                      golden("hf-nemotron-h/nemotronh-latent-bf16-sharded"));
  const double qm =
      compare_gradients(moe("qwen3moe-top2-fp32"), golden("hf-moe/qwen3moe-top2-fp32"));
  const double mx = compare_gradients(moe("mixtral-top2-fp32"), golden("hf-moe/mixtral-top2-fp32"));
  std::printf("[grad-golden] largest relative gradient difference: nemotron-h %.3g / %.3g, "
              "qwen3-moe %.3g, mixtral %.3g\n", nm, nl, qm, mx);
  for (double d : {nm, nl, qm, mx}) EXPECT_LE(d, kGradTolerance);
}

TEST(TrainAnyModel, ParametersAreTheModelsTensors) {
  const NemotronHModel m = nemotron("nemotronh-mix-fp32");
  int64_t n = 0, numel = 0;
  bool a_log = false;
  for (const auto& [name, t] : named_parameters(m)) {
    EXPECT_EQ(name.find("e_score_correction_bias"), std::string::npos) << name;
    a_log |= name == "model.layers.0.mixer.A_log";
    ++n;
    numel += t.numel();
  }
  EXPECT_TRUE(a_log);
  // transformers' NemotronHForCausalLM.named_parameters() of this fixture: 55 tensors.
  EXPECT_EQ(n, 55);
  const MoeModel tied = moe("qwen3moe-top3-step2-bf16-sharded");  // tie_word_embeddings
  ASSERT_TRUE(tied.config.tie_word_embeddings);
  for (const auto& [name, t] : named_parameters(tied)) EXPECT_NE(name, "lm_head.weight");
  const MoeModel moved = model_to_device(tied, c10::kCPU);
  EXPECT_TRUE(moved.weights.lm_head.is_same(moved.weights.embed_tokens));
}

TEST(TrainAnyModel, DistillLowersHeldOutKlNemotronH) {
  const NemotronHModel teacher = nemotron("nemotronh-mix-fp32");
  NemotronHModel student = nemotron("nemotronh-mix-fp32");  // its own storage
  perturb(student, 0.3, 7);
  expect_distill_lowers_kl(teacher, student, "nemotron-h");
}

TEST(TrainAnyModel, DistillLowersHeldOutKlMoe) {
  const MoeModel teacher = moe("qwen3moe-top2-fp32");
  MoeModel student = moe("qwen3moe-top2-fp32");
  perturb(student, 0.3, 8);
  expect_distill_lowers_kl(teacher, student, "qwen3-moe");
}

TEST(TrainAnyModel, DistillResumesBitForBit) {
  const NemotronHModel teacher = nemotron("nemotronh-mix-fp32");
  const TokenDataset train = random_tokens(teacher.config.vocab_size, 2048, 3);
  NemotronHModel straight = nemotron("nemotronh-mix-fp32");
  NemotronHModel resumed = nemotron("nemotronh-mix-fp32");
  perturb(straight, 0.3, 9);
  perturb(resumed, 0.3, 9);
  distill(teacher, straight, train, short_run(6));
  TempDir dir;
  DistillOptions o = short_run(6);
  o.state_dir = dir.path / "state";
  o.resume = true;
  o.stop_after_steps = 3;
  const DistillResult first = distill(teacher, resumed, train, o);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.steps_done, 3);
  NemotronHModel reloaded = nemotron("nemotronh-mix-fp32");  // the state carries the weights
  o.stop_after_steps = -1;
  const DistillResult second = distill(teacher, reloaded, train, o);
  EXPECT_EQ(second.steps_done, 6);
  const auto a = trainable_parameters(straight), b = trainable_parameters(reloaded);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << i;
}

TEST(TrainAnyModel, EvalAgainstItself) {
  const NemotronHModel n = nemotron("nemotronh-mix-fp32");
  const MoeModel q = moe("mixtral-top2-fp32");
  const EvalResult rn = evaluate(n, &n, random_tokens(n.config.vocab_size, 256, 4), heldout_eval());
  const EvalResult rq = evaluate(q, &q, random_tokens(q.config.vocab_size, 256, 4), heldout_eval());
  std::printf("[eval-any] KL to itself: nemotron-h %.3g, mixtral %.3g\n", rn.kl_to_teacher,
              rq.kl_to_teacher);
  for (const EvalResult& r : {rn, rq}) {
    EXPECT_LE(std::abs(r.kl_to_teacher), 1e-6);  // fp32 rounding of log(exp(log p)) only
    EXPECT_DOUBLE_EQ(r.top1_agreement, 1.0);
    EXPECT_DOUBLE_EQ(r.topk_overlap, 1.0);
  }
}

TEST(TrainAnyModel, PerplexityIsTransformersNll) {
  const std::pair<fs::path, bool> fixtures[] = {
      {golden("hf-nemotron-h/nemotronh-mix-fp32"), true},
      {golden("hf-moe/qwen3moe-top2-fp32"), false}};
  for (const auto& [dir, hybrid] : fixtures) {
    const at::Tensor tokens = ac::test::read_golden_tokens(dir);  // [B, T]
    const int64_t T = tokens.size(1);
    // exp(mean NLL) of transformers' prefill logits, in double.
    const at::Tensor logits = ac::test::read_golden_logits(dir, "prefill").to(at::kDouble);
    const at::Tensor nll = -at::log_softmax(logits.narrow(1, 0, T - 1), -1)
                                .gather(-1, tokens.narrow(1, 1, T - 1).unsqueeze(-1));
    const double want = std::exp(nll.mean().item<double>());
    EvalOptions e = heldout_eval();
    const std::vector<at::Tensor> batches{tokens};
    const EvalResult r = hybrid ? evaluate(load_nemotron_h_checkpoint(dir), nullptr, batches, e)
                                : evaluate(load_moe_checkpoint(dir), nullptr, batches, e);
    const double rel = std::abs(r.perplexity - want) / want;
    std::printf("[eval-any] %-32s perplexity %.6f, exp(mean NLL) of transformers %.6f, relative "
                "%.3g\n", dir.filename().c_str(), r.perplexity, want, rel);
    EXPECT_EQ(r.tokens, tokens.size(0) * (T - 1));
    EXPECT_LE(rel, 1e-5);
  }
}

TEST(TrainAnyModel, GreedyGenerationFollowsTheGoldens) {
  const std::pair<fs::path, bool> fixtures[] = {
      {golden("hf-nemotron-h/nemotronh-mix-fp32"), true},
      {golden("hf-moe/qwen3moe-top2-fp32"), false}};
  for (const auto& [dir, hybrid] : fixtures) {
    const at::Tensor tokens = ac::test::read_golden_tokens(dir);
    const at::Tensor decode = ac::test::read_golden_logits(dir, "decode");  // [B, N, V]
    const int64_t p0 = ac::test::read_golden_logits(dir, "decode_positions")[0].item<int64_t>();
    // Row 0's first p0 + 1 tokens as the prompt: the first pick is transformers' argmax there.
    std::vector<int64_t> prompt(tokens[0].data_ptr<int64_t>(),
                                tokens[0].data_ptr<int64_t>() + p0 + 1);
    GenerateOptions go;
    go.max_new_tokens = 6;
    go.stop_at_eos = false;
    const NemotronHModel n = hybrid ? load_nemotron_h_checkpoint(dir) : NemotronHModel{};
    const MoeModel q = hybrid ? MoeModel{} : load_moe_checkpoint(dir);
    auto full_forward = [&](const at::Tensor& ids) {
      at::NoGradGuard no_grad;
      return hybrid ? n.forward(ids) : q.forward(ids);
    };
    const std::vector<int64_t> out = hybrid ? generate(n, prompt, go) : generate(q, prompt, go);
    ASSERT_EQ(out.size(), 6u);
    EXPECT_EQ(out[0], decode[0][0].argmax().item<int64_t>()) << dir;
    std::vector<int64_t> text = prompt;
    for (int64_t t : out) {
      const at::Tensor ids = at::tensor(text, at::kLong).view({1, -1});
      EXPECT_EQ(t, full_forward(ids)[0][-1].argmax().item<int64_t>())
          << dir << " after " << text.size() << " tokens";
      text.push_back(t);
    }
  }
}

TEST(TrainAnyModel, LlamaOnlyFeaturesAreRefused) {
  const NemotronHModel teacher = nemotron("nemotronh-mix-fp32");
  NemotronHModel student = nemotron("nemotronh-mix-fp32");
  const TokenDataset train = random_tokens(teacher.config.vocab_size, 1024, 5);
  DistillOptions o = short_run(2);
  o.hidden_loss_weight = 1.0;
  ac::test::expect_error<ConfigError>([&] { distill(teacher, student, train, o); },
                                      {"hidden-state loss", "Llama family only"});
  o = short_run(2);
  o.eval_at_tokens = {64};
  o.on_eval = [](int64_t, int64_t, const LlamaModel&) {};
  ac::test::expect_error<ConfigError>([&] { distill(teacher, student, train, o); },
                                      {"eval_at_tokens", "Nemotron-H"});
}

namespace {

// A tokenizer.json of single characters (ids 3..30; BOS 1, EOS 2), within every fixture's vocab.
void write_char_tokenizer(const fs::path& dir) {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz .")) {
    const int64_t id = int64_t(vocab.size());
    vocab[std::string(1, c)] = id;
  }
  nlohmann::json added = nlohmann::json::array();
  for (const char* t : {"<unk>", "<s>", "</s>"})
    added.push_back({{"id", vocab[t]}, {"content", t}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  const nlohmann::json tj = {
      {"version", "1.0"}, {"added_tokens", added}, {"normalizer", nullptr},
      {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()},
                 {"unk_token", "<unk>"}}}};
  std::ofstream(dir / "tokenizer.json") << tj.dump();
}

}  // namespace

TEST(TrainAnyModel, GenerateCliTakesEveryKind) {
  const std::pair<fs::path, bool> fixtures[] = {
      {golden("hf-nemotron-h/nemotronh-mix-fp32"), true},
      {golden("hf-moe/qwen3moe-top2-fp32"), false}};
  for (const auto& [src, hybrid] : fixtures) {
    TempDir tmp;
    const fs::path dir = tmp.path / "model";
    fs::copy(src, dir, fs::copy_options::recursive);
    write_char_tokenizer(dir);
    const auto tok = load_tokenizer(dir, hybrid ? 131 : 97);
    std::vector<int64_t> ids = tok->encode("once upon", /*add_special_tokens=*/true);
    GenerateOptions go;
    go.max_new_tokens = 5;
    const std::vector<int64_t> out = hybrid ? generate(load_nemotron_h_checkpoint(dir), ids, go)
                                            : generate(load_moe_checkpoint(dir), ids, go);
    ids.insert(ids.end(), out.begin(), out.end());
    const ac::test::CommandOutput r = ac::test::run_command(
        ac::test::cli_bin() + " generate --model " + dir.string() +
        " --prompt 'once upon' --max-new-tokens 5");
    EXPECT_EQ(r.status, 0) << src;
    EXPECT_EQ(r.out, tok->decode(ids, /*skip_special_tokens=*/true) + "\n") << src;
  }
}

// bf16 autocast (DistillOptions::precision) through both kinds' forwards: the loss on fp32
// logits stays finite and the steps are taken.
TEST(TrainAnyModel, DistillUnderBf16Autocast) {
  DistillOptions o = short_run(3);
  o.precision = Precision::bf16;
  const NemotronHModel nt = nemotron("nemotronh-mix-fp32");
  NemotronHModel ns = nemotron("nemotronh-mix-fp32");
  perturb(ns, 0.3, 10);
  const DistillResult rn = distill(nt, ns, random_tokens(nt.config.vocab_size, 1024, 6), o);
  const MoeModel mt = moe("mixtral-top2-fp32");
  MoeModel ms = moe("mixtral-top2-fp32");
  perturb(ms, 0.3, 11);
  const DistillResult rm = distill(mt, ms, random_tokens(mt.config.vocab_size, 1024, 6), o);
  for (const DistillResult& r : {rn, rm}) {
    EXPECT_EQ(r.skipped_steps, 0);
    for (const StepRecord& s : r.steps) EXPECT_TRUE(std::isfinite(s.loss) && s.loss > 0);
  }
  for (const at::Tensor& p : trainable_parameters(ns)) EXPECT_EQ(p.scalar_type(), at::kFloat);
}
