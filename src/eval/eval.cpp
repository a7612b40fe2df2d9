#include "eval/eval.h"

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"

namespace ac {

nlohmann::json EvalResult::to_json() const {
  nlohmann::json j = {{"perplexity", perplexity}, {"mean_nll", mean_nll}, {"tokens", tokens},
                      {"sequences", sequences},   {"wall_s", wall_s}};
  if (has_teacher) {
    j["kl_to_teacher"] = kl_to_teacher;
    j["top1_agreement"] = top1_agreement;
  }
  return j;
}

namespace {

struct Sums {
  double nll = 0, kl = 0, agree = 0;
  int64_t tokens = 0, sequences = 0;
};

// Scores positions t < T-1 of one batch [B, T]: NLL of x_{t+1}, and KL / top-1 to the teacher.
void score_batch(const LlamaModel& model, const LlamaModel* teacher, const at::Tensor& tokens,
                 Sums& s) {
  const int64_t T = tokens.size(1);
  at::Tensor logq = at::log_softmax(model.forward(tokens).slice(1, 0, T - 1), -1);  // [B,T-1,V]
  at::Tensor next = tokens.slice(1, 1, T).unsqueeze(-1);                           // [B,T-1,1]
  s.nll -= logq.gather(-1, next).sum().item<double>();
  s.tokens += tokens.size(0) * (T - 1);
  s.sequences += tokens.size(0);
  if (!teacher) return;
  at::Tensor logp = at::log_softmax(teacher->forward(tokens).slice(1, 0, T - 1), -1);
  at::Tensor p = logp.exp();
  at::Tensor kl = at::xlogy(p, p).sum(-1) -
                  (p * logq.clamp_min(std::numeric_limits<float>::lowest())).sum(-1);  // [B,T-1]
  s.kl += kl.to(at::kDouble).sum().item<double>();
  s.agree += logp.argmax(-1).eq(logq.argmax(-1)).sum().item<double>();
}

EvalResult finish(const Sums& s, bool has_teacher, double t0) {
  EvalResult r;
  r.tokens = s.tokens;
  r.sequences = s.sequences;
  r.mean_nll = s.nll / double(std::max<int64_t>(s.tokens, 1));
  r.perplexity = std::exp(r.mean_nll);
  r.has_teacher = has_teacher;
  if (has_teacher) {
    r.kl_to_teacher = s.kl / double(std::max<int64_t>(s.tokens, 1));
    r.top1_agreement = s.agree / double(std::max<int64_t>(s.tokens, 1));
  }
  r.wall_s = now_s() - t0;
  return r;
}

}  // namespace

EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher,
                    const std::vector<at::Tensor>& batches, const EvalOptions& opt) {
  const char* where = "evaluate";
  if (batches.empty()) throw ConfigError(msg(where, "no data to evaluate"));
  if (teacher && teacher->config.vocab_size != model.config.vocab_size)
    throw ConfigError(msg(where, "teacher vocab_size {} differs from model vocab_size {}",
                          teacher->config.vocab_size, model.config.vocab_size));
  at::NoGradGuard no_grad;
  double t0 = now_s();
  Sums s;
  int64_t total = 0;
  for (const auto& b : batches) total += b.size(0);
  Progress progress("eval", total, "seq");
  for (const auto& b : batches) {
    if (b.dim() != 2 || b.size(1) < 2)
      throw ConfigError(msg(where, "a batch has shape [{}], expected [B, T] with T >= 2",
                            fmt::join(b.sizes(), ", ")));
    score_batch(model, teacher, b.to(at::kLong), s);
    if (opt.show_progress) progress.update(s.sequences);
  }
  if (opt.show_progress) progress.finish();
  return finish(s, teacher != nullptr, t0);
}

EvalResult evaluate(const LlamaModel& model, const LlamaModel* teacher, const TokenDataset& data,
                    const EvalOptions& opt) {
  data.check_vocab(model.config.vocab_size, "evaluate", "model");
  return evaluate(model, teacher, data.sequential_batches(opt.batch_size, opt.seq_len,
                                                          opt.max_batches), opt);
}

EvalResult sliding_window_perplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                     int64_t context, int64_t stride) {
  const int64_t N = int64_t(ids.size());
  if (!(stride > 0 && stride < context) || N < 2)
    throw ConfigError(msg("sliding_window_perplexity", "need 0 < stride < context and at least "
                          "2 tokens, found stride {} context {} tokens {}", stride, context, N));
  at::NoGradGuard no_grad;
  double t0 = now_s();
  Sums s;
  int64_t scored_until = 1;  // tokens [1, scored_until) already predicted
  for (int64_t begin = 0; scored_until < N; begin += stride) {
    int64_t end = std::min(begin + context, N);
    std::vector<int64_t> w(ids.begin() + begin, ids.begin() + end);
    at::Tensor tokens = at::tensor(w, at::kLong).view({1, -1});  // [1, W]
    // Logits at position t predict token t+1; score targets [scored_until, end).
    int64_t first = scored_until - 1 - begin;  // first position whose target is new
    at::Tensor logq = at::log_softmax(model.forward(tokens).slice(1, first, end - begin - 1), -1);
    at::Tensor target = tokens.slice(1, first + 1, end - begin).unsqueeze(-1);
    s.nll -= logq.gather(-1, target).sum().item<double>();
    s.tokens += end - scored_until;
    s.sequences += 1;
    scored_until = end;
  }
  return finish(s, false, t0);
}

}  // namespace ac
