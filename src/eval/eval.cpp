#include "eval/eval.h"

#include <cmath>
#include <type_traits>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "io/text_tokenizer.h"
#include "model/stage_memory.h"
#include "model/trainable.h"

namespace ac {

nlohmann::json EvalResult::to_json() const {
  nlohmann::json j = {{"perplexity", perplexity}, {"mean_nll", mean_nll}, {"tokens", tokens},
                      {"sequences", sequences},   {"wall_s", wall_s}};
  if (has_teacher) {
    j["kl_to_teacher"] = kl_to_teacher;
    j["top1_agreement"] = top1_agreement;
    j["topk_overlap"] = topk_overlap;
    j["top_k"] = top_k;
  }
  if (has_bytes) {
    j["bits_per_byte"] = bits_per_byte;
    j["bytes"] = bytes;
  }
  return j;
}

TokenBytes TokenBytes::from_tokenizer(const TextTokenizer& tokenizer) {
  const int64_t V = tokenizer.vocab_size();
  TokenBytes t;
  t.bos_id = tokenizer.bos_id().value_or(-1);
  t.bytes = at::empty({V}, at::kLong);
  t.leading_space = at::zeros({V}, at::kBool);
  auto bytes = t.bytes.accessor<int64_t, 1>();
  auto space = t.leading_space.accessor<bool, 1>();
  const bool dummy_prefix = tokenizer.adds_dummy_prefix();
  for (int64_t id = 0; id < V; ++id) {
    const std::string p = tokenizer.token_bytes(id);
    bytes[id] = int64_t(p.size());
    space[id] = dummy_prefix && !p.empty() && p[0] == ' ';
  }
  return t;
}

int64_t TokenBytes::count(const at::Tensor& targets, const at::Tensor& prev) const {
  const at::Tensor t = targets.to(bytes.device()), p = prev.to(bytes.device());
  at::Tensor after_bos = p.eq(bos_id).logical_and(leading_space.index({t}));
  return bytes.index({t}).sum().item<int64_t>() - after_bos.sum().item<int64_t>();
}

std::optional<TokenBytes> token_bytes_of_checkpoint(const fs::path& dir, int64_t vocab_size) {
  if (!fs::exists(dir / "tokenizer.json") && !fs::exists(dir / "tokenizer.bin")) return std::nullopt;
  TokenBytes t = TokenBytes::from_tokenizer(*load_tokenizer(dir, vocab_size));
  // Hub checkpoints pad the embedding past the tokenizer (Qwen2.5 / Qwen3: 151,669 tokens,
  // vocab_size 151,936): the padding ids have no text, so they hold no bytes.
  const int64_t pad = vocab_size - t.bytes.size(0);
  if (pad > 0) {
    t.bytes = at::cat({t.bytes, at::zeros({pad}, at::kLong)});
    t.leading_space = at::cat({t.leading_space, at::zeros({pad}, at::kBool)});
  }
  return t;
}

namespace {

struct Sums {
  double nll = 0, kl = 0, agree = 0, overlap = 0;
  int64_t tokens = 0, sequences = 0, bytes = 0;
};

template <class M>
void check_options(const M& model, const M* teacher, const EvalOptions& opt, const char* where) {
  if (teacher && teacher->config.vocab_size != model.config.vocab_size)
    throw ConfigError(msg(where, "teacher vocab_size {} differs from model vocab_size {}",
                          teacher->config.vocab_size, model.config.vocab_size));
  if (teacher && (opt.top_k < 1 || opt.top_k > model.config.vocab_size))
    throw ConfigError(msg(where, "top_k {} outside [1, {}] (the vocabulary)", opt.top_k,
                          model.config.vocab_size));
  if (opt.token_bytes && opt.token_bytes->bytes.size(0) != model.config.vocab_size)
    throw ConfigError(msg(where, "the tokenizer has {} tokens, more than the model's vocab_size "
                          "{}: the tokenizer belongs to another model",
                          opt.token_bytes->bytes.size(0), model.config.vocab_size));
}

// Scores positions t < T-1 of one batch [B, T] where `scored` [B, T-1] bool holds (undefined =
// every position): NLL of x_{t+1}, KL / top-1 / top-k to the teacher, bytes of x_{t+1}.
template <class M>
void score_batch(const M& model, const M* teacher, const at::Tensor& tokens,
                 const at::Tensor& scored, const EvalOptions& opt, Sums& s) {
  const int64_t T = tokens.size(1), V = model.config.vocab_size;
  // Logits of the scored positions only: [N, V], targets and previous tokens [N].
  auto pick = [&](const at::Tensor& x) {
    return scored.defined() ? x.index({scored}) : x.reshape({-1, x.size(-1)});
  };
  at::Tensor next = tokens.slice(1, 1, T), prev = tokens.slice(1, 0, T - 1);  // [B, T-1]
  at::Tensor target = scored.defined() ? next.index({scored}) : next.reshape({-1});
  at::Tensor logq = at::log_softmax(pick(model.forward(tokens).slice(1, 0, T - 1)), -1);  // [N,V]
  AC_CHECK(logq.size(1) == V, "logits width {} vs V {}", logq.size(1), V);
  s.nll -= logq.gather(-1, target.unsqueeze(-1)).to(at::kDouble).sum().item<double>();
  s.tokens += target.size(0);
  s.sequences += tokens.size(0);
  if (opt.token_bytes)
    s.bytes += opt.token_bytes->count(target, scored.defined() ? prev.index({scored})
                                                               : prev.reshape({-1}));
  if (!teacher) return;
  at::Tensor logp = at::log_softmax(pick(teacher->forward(tokens).slice(1, 0, T - 1)), -1);
  at::Tensor p = logp.exp();
  at::Tensor kl = at::xlogy(p, p).sum(-1) -
                  (p * logq.clamp_min(std::numeric_limits<float>::lowest())).sum(-1);  // [N]
  s.kl += kl.to(at::kDouble).sum().item<double>();
  s.agree += logp.argmax(-1).eq(logq.argmax(-1)).sum().item<double>();
  at::Tensor tp = std::get<1>(logp.topk(opt.top_k, -1)), tq = std::get<1>(logq.topk(opt.top_k, -1));
  at::Tensor shared = tp.unsqueeze(-1).eq(tq.unsqueeze(-2)).any(-1);  // [N, k]
  s.overlap += shared.sum().item<double>() / double(opt.top_k);
}

// The evaluated model and the teacher on the evaluation's device (the same tensors when they
// are there already).
template <class M>
struct OnDevice {
  M model;
  std::optional<M> teacher_model;
  OnDevice(const M& m, const M* t, const c10::Device& d, int64_t B, int64_t T) {
    // On a GPU: refused before the copy when the model, the teacher and a batch's pass do not
    // fit (model/stage_memory.h, whose plan counts dense layers: the Llama family only).
    if constexpr (std::is_same_v<M, LlamaModel>) check_fits(m, t, d, B, T);
    model = model_to_device(m, d);
    if (t) teacher_model = model_to_device(*t, d);
  }
  const M* teacher() const { return teacher_model ? &*teacher_model : nullptr; }

  static void check_fits(const LlamaModel& m, const LlamaModel* t, const c10::Device& d, int64_t B,
                         int64_t T) {
    MemoryPlan p = forward_memory(m.config, B, T, /*with_grad=*/false, Precision::fp32);
    if (t) p.parts.emplace_back("teacher weights", 4 * t->config.num_parameters());
    check_fits_device(p, d, "eval");
  }
};

EvalResult finish(const Sums& s, bool has_teacher, const EvalOptions& opt, double t0) {
  EvalResult r;
  const double n = double(std::max<int64_t>(s.tokens, 1));
  r.tokens = s.tokens;
  r.sequences = s.sequences;
  r.mean_nll = s.nll / n;
  r.perplexity = std::exp(r.mean_nll);
  r.has_teacher = has_teacher;
  if (has_teacher) {
    r.kl_to_teacher = s.kl / n;
    r.top1_agreement = s.agree / n;
    r.topk_overlap = s.overlap / n;
    r.top_k = opt.top_k;
  }
  if (opt.token_bytes) {
    r.has_bytes = true;
    r.bytes = s.bytes;
    r.bits_per_byte = s.bytes > 0 ? s.nll / (std::log(2.0) * double(s.bytes)) : 0.0;
  }
  r.wall_s = now_s() - t0;
  return r;
}

template <class M>
EvalResult evaluate_batches(const M& model, const M* teacher,
                            const std::vector<at::Tensor>& batches, const EvalOptions& opt) {
  const char* where = "evaluate";
  if (batches.empty()) throw ConfigError(msg(where, "no data to evaluate"));
  check_options(model, teacher, opt, where);
  at::NoGradGuard no_grad;
  double t0 = now_s();
  const OnDevice<M> on(model, teacher, opt.device, batches.front().size(0),
                    batches.front().dim() == 2 ? batches.front().size(1) : 1);
  Sums s;
  int64_t total = 0;
  for (const auto& b : batches) total += b.size(0);
  Progress progress("eval", total, "seq");
  for (const auto& b : batches) {
    if (b.dim() != 2 || b.size(1) < 2)
      throw ConfigError(msg(where, "a batch has shape [{}], expected [B, T] with T >= 2",
                            fmt::join(b.sizes(), ", ")));
    score_batch(on.model, on.teacher(), b.to(opt.device, at::kLong), at::Tensor(), opt, s);
    if (opt.show_progress) progress.update(s.sequences);
  }
  if (opt.show_progress) progress.finish();
  return finish(s, teacher != nullptr, opt, t0);
}

template <class M>
EvalResult evaluate_data(const M& model, const M* teacher, const TokenDataset& data,
                         const EvalOptions& opt) {
  data.check_vocab(model.config.vocab_size, "evaluate", "model");
  return evaluate_batches(model, teacher, data.sequential_batches(opt.batch_size, opt.seq_len,
                                                                  opt.max_batches), opt);
}

}  // namespace

EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt) {
  return evaluate_batches(model, teacher, batches, opt);
}
EvalResult evaluate(const MoeModel& model, const MoeModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt) {
  return evaluate_batches(model, teacher, batches, opt);
}
EvalResult evaluate(const NemotronHModel& model, const NemotronHModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt) {
  return evaluate_batches(model, teacher, batches, opt);
}

EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt) {
  return evaluate_data(model, teacher, data, opt);
}
EvalResult evaluate(const MoeModel& model, const MoeModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt) {
  return evaluate_data(model, teacher, data, opt);
}
EvalResult evaluate(const NemotronHModel& model, const NemotronHModel* teacher,
                    const TokenDataset& data, const EvalOptions& opt) {
  return evaluate_data(model, teacher, data, opt);
}

EvalResult sliding_window_evaluate(const LlamaModel& model, const LlamaModel* teacher,
                                   const std::vector<int32_t>& ids, int64_t context,
                                   int64_t stride, const EvalOptions& opt) {
  const char* where = "sliding_window";
  const int64_t N = int64_t(ids.size());
  if (!(stride > 0 && stride < context) || N < 2)
    throw ConfigError(msg(where, "need 0 < stride < context and at least 2 tokens, found "
                          "stride {} context {} tokens {}", stride, context, N));
  check_options(model, teacher, opt, where);
  // Windows [begin, end); each scores targets [first_target, end), those not scored before.
  struct Window { int64_t begin, end, first_target; };
  std::vector<Window> windows;
  for (int64_t begin = 0, scored_until = 1; scored_until < N; begin += stride) {
    const int64_t end = std::min(begin + context, N);
    windows.push_back({begin, end, scored_until});
    scored_until = end;
  }
  at::NoGradGuard no_grad;
  double t0 = now_s();
  const OnDevice<LlamaModel> on(model, teacher, opt.device, std::max<int64_t>(opt.batch_size, 1),
                                context);
  Sums s;
  Progress progress("eval", int64_t(windows.size()), "window");
  const int64_t B = std::max<int64_t>(opt.batch_size, 1);
  for (size_t i = 0; i < windows.size();) {
    // A batch of consecutive windows of the same length (only the last one can be shorter).
    const int64_t W = windows[i].end - windows[i].begin;
    size_t j = i;
    while (j < windows.size() && int64_t(j - i) < B && windows[j].end - windows[j].begin == W) ++j;
    const int64_t b = int64_t(j - i);
    std::vector<int64_t> flat;
    flat.reserve(size_t(b * W));
    at::Tensor scored = at::zeros({b, W - 1}, at::kBool);  // [b, W-1]
    for (size_t w = i; w < j; ++w) {
      const Window& win = windows[w];
      flat.insert(flat.end(), ids.begin() + win.begin, ids.begin() + win.end);
      // Logits at position t predict token t+1: targets [first_target, end).
      scored[int64_t(w - i)].slice(0, win.first_target - 1 - win.begin).fill_(true);
    }
    score_batch(on.model, on.teacher(), at::tensor(flat, at::kLong).view({b, W}).to(opt.device),
                scored.to(opt.device), opt, s);
    if (opt.show_progress) progress.update(int64_t(j));
    i = j;
  }
  if (opt.show_progress) progress.finish();
  return finish(s, teacher != nullptr, opt, t0);
}

EvalResult sliding_window_perplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                     int64_t context, int64_t stride) {
  EvalOptions opt;
  opt.show_progress = false;
  return sliding_window_evaluate(model, nullptr, ids, context, stride, opt);
}

}  // namespace ac
