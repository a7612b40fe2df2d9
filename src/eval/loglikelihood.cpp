#include "eval/loglikelihood.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "common/error.h"
#include "common/gemm.h"
#include "common/progress.h"

namespace ac {

namespace {

const char* const kWhere = "loglikelihood";

// A request's model input after left truncation, and the position that predicts cont[0].
struct Prepared {
  std::vector<int64_t> input;  // [L] = (context ++ continuation)[:-1], at most max_len
  int64_t first = 0;           // logits at `first` predict continuation[0]
  bool truncated = false;
};

Prepared prepare(const LoglikelihoodRequest& r, size_t index, int64_t max_len, int64_t V) {
  const int64_t Tc = int64_t(r.context.size()), Tn = int64_t(r.continuation.size());
  if (Tc == 0 || Tn == 0)
    throw ConfigError(msg(kWhere, "request {}: {} is empty (need at least one token each; add "
                          "BOS to the context)", index, Tc == 0 ? "the context" : "the continuation"));
  for (const auto* part : {&r.context, &r.continuation})
    for (int64_t id : *part)
      if (id < 0 || id >= V)
        throw ConfigError(msg(kWhere, "request {}: token id {} outside [0, {}) of the model",
                              index, id, V));
  Prepared p;
  p.input = r.context;
  p.input.insert(p.input.end(), r.continuation.begin(), r.continuation.end() - 1);
  const int64_t drop = std::max<int64_t>(0, int64_t(p.input.size()) - max_len);
  if (drop >= Tc)
    throw ConfigError(msg(kWhere, "request {}: the continuation has {} tokens; with one context "
                          "token it does not fit the model's {} positions", index, Tn, max_len));
  p.input.erase(p.input.begin(), p.input.begin() + drop);
  p.first = Tc - 1 - drop;
  p.truncated = drop > 0;
  return p;
}

// The output head on hidden states h [N, D] at positions predicting `targets` [N]; adds each
// consecutive run of `count` positions to results[index]. Chunked so that [n, V] stays small.
struct Segment { size_t index; int64_t count; };

// Token ids or indices [n] int64 on the model's device.
at::Tensor on_model(const LlamaModel& m, const std::vector<int64_t>& v) {
  return at::tensor(v, at::kLong).to(m.weights.embed_tokens.device());
}

void score_positions(const LlamaModel& m, const at::Tensor& h, const std::vector<int64_t>& targets,
                     const std::vector<Segment>& segments, std::vector<LoglikelihoodResult>& out) {
  constexpr int64_t kChunk = 512;
  const int64_t N = h.size(0);
  AC_CHECK(int64_t(targets.size()) == N, "{} targets for {} positions", targets.size(), N);
  at::Tensor target = on_model(m, targets);
  std::vector<double> ll(static_cast<size_t>(N));
  std::vector<uint8_t> greedy(static_cast<size_t>(N));
  for (int64_t s = 0; s < N; s += kChunk) {
    const int64_t n = std::min(kChunk, N - s);
    at::Tensor logits = ac::linear(h.narrow(0, s, n), m.weights.lm_head);  // [n, V]
    at::Tensor t = target.narrow(0, s, n).unsqueeze(-1);                    // [n, 1]
    // log_softmax, then the target's entry, as HFLM._loglikelihood_tokens does: it subtracts
    // the row's max before the sum, so a token of probability 1 - 1e-6 keeps its -1e-6. Taking
    // logit - logsumexp instead cancels two numbers of the logits' size and rounds such a
    // log-probability to 0 at float32's ulp there (2e-6 at |logit| ~ 20), which made "Tim"
    // and "Timmy" (whose "my" is near-certain) tie exactly.
    at::Tensor lp = at::log_softmax(logits, -1).gather(-1, t).squeeze(-1).to(at::kCPU, at::kDouble);
    at::Tensor g = logits.argmax(-1).eq(t.squeeze(-1)).to(at::kCPU, at::kByte);
    std::copy_n(lp.data_ptr<double>(), n, ll.begin() + s);
    std::copy_n(g.data_ptr<uint8_t>(), n, greedy.begin() + s);
  }
  int64_t pos = 0;
  for (const Segment& seg : segments) {
    LoglikelihoodResult& r = out[seg.index];
    r.loglikelihood = 0;
    r.is_greedy = true;
    for (int64_t j = 0; j < seg.count; ++j, ++pos) {
      r.loglikelihood += ll[size_t(pos)];
      r.is_greedy = r.is_greedy && greedy[size_t(pos)];
    }
    r.tokens = seg.count;
  }
  AC_CHECK(pos == N, "segments cover {} of {} positions", pos, N);
}

// Right-padded batches of whole inputs, longest first.
void run_padded(const LlamaModel& m, const std::vector<LoglikelihoodRequest>& requests,
                const std::vector<Prepared>& prep, std::vector<size_t> todo,
                const LoglikelihoodOptions& opt, std::vector<LoglikelihoodResult>& out,
                const std::function<void(int64_t)>& done) {
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) {
    return prep[a].input.size() > prep[b].input.size();
  });
  for (size_t i = 0; i < todo.size();) {
    const int64_t L = int64_t(prep[todo[i]].input.size());
    size_t j = i + 1;
    while (j < todo.size() && int64_t(j - i + 1) * L <= opt.max_batch_tokens) ++j;
    const int64_t b = int64_t(j - i);
    std::vector<int64_t> flat(size_t(b * L), 0);  // pad id 0: any valid id, never attended
    std::vector<int64_t> rows, cols, targets;
    std::vector<Segment> segments;
    for (int64_t r = 0; r < b; ++r) {
      const size_t k = todo[i + size_t(r)];
      std::copy(prep[k].input.begin(), prep[k].input.end(), flat.begin() + r * L);
      const auto& cont = requests[k].continuation;
      for (size_t c = 0; c < cont.size(); ++c) {
        rows.push_back(r);
        cols.push_back(prep[k].first + int64_t(c));
        targets.push_back(cont[c]);
      }
      segments.push_back({k, int64_t(cont.size())});
    }
    at::Tensor h = m.hidden_states(on_model(m, flat).view({b, L}));  // [b, L, D]
    at::Tensor hs = h.index({on_model(m, rows), on_model(m, cols)});  // [N, D]
    score_positions(m, hs, targets, segments, out);
    done(b);
    i = j;
  }
}

using Groups = std::map<std::vector<int64_t>, std::vector<size_t>>;  // context -> requests

bool is_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// A chain of contexts, each a prefix of the last one (e.g. the items of one story): the longest
// context runs once (batch 1, KV cache, hidden states of every position); each context's
// requests take their first position from it and run the rest of their continuations together
// on a copy of the cache cut at that context's length.
void run_chain(const LlamaModel& m, const std::vector<LoglikelihoodRequest>& requests,
               const std::vector<Groups::const_iterator>& chain,
               std::vector<LoglikelihoodResult>& out) {
  const std::vector<int64_t>& longest = chain.back()->first;
  const int64_t T = int64_t(longest.size());
  KVCache cache = KVCache::allocate(m.config, 1, T, m.weights.embed_tokens.device());
  ForwardOptions fo;
  fo.cache = &cache;
  at::Tensor h_ctx = m.hidden_states(on_model(m, longest).view({1, T}), fo)[0];  // [T, D]
  std::vector<at::Tensor> hs;
  std::vector<int64_t> targets;
  std::vector<Segment> segments;
  for (const auto& it : chain) {
    const std::vector<size_t>& group = it->second;
    const int64_t Tc = int64_t(it->first.size()), C = int64_t(group.size());
    int64_t max_tn = 0;
    for (size_t k : group) max_tn = std::max<int64_t>(max_tn, int64_t(requests[k].continuation.size()));
    at::Tensor h_cont;  // [C, max_tn - 1, D]
    if (max_tn > 1) {
      KVCache wide = KVCache::allocate(m.config, C, Tc + max_tn - 1, m.weights.embed_tokens.device());
      for (size_t l = 0; l < cache.k.size(); ++l) {
        if (!cache.k[l].defined()) continue;
        wide.k[l].narrow(2, 0, Tc).copy_(cache.k[l].narrow(2, 0, Tc).expand({C, -1, -1, -1}));
        wide.v[l].narrow(2, 0, Tc).copy_(cache.v[l].narrow(2, 0, Tc).expand({C, -1, -1, -1}));
      }
      wide.length = Tc;
      std::vector<int64_t> flat(size_t(C * (max_tn - 1)), 0);  // right-padded
      for (int64_t r = 0; r < C; ++r) {
        const auto& cont = requests[group[size_t(r)]].continuation;
        std::copy(cont.begin(), cont.end() - 1, flat.begin() + r * (max_tn - 1));
      }
      ForwardOptions wo;
      wo.cache = &wide;
      h_cont = m.hidden_states(on_model(m, flat).view({C, max_tn - 1}), wo);
    }
    for (int64_t r = 0; r < C; ++r) {
      const auto& cont = requests[group[size_t(r)]].continuation;
      const int64_t Tn = int64_t(cont.size());
      hs.push_back(h_ctx.narrow(0, Tc - 1, 1));
      if (Tn > 1) hs.push_back(h_cont[r].narrow(0, 0, Tn - 1));
      targets.insert(targets.end(), cont.begin(), cont.end());
      segments.push_back({group[size_t(r)], Tn});
    }
  }
  score_positions(m, at::cat(hs, 0), targets, segments, out);
}

}  // namespace

std::vector<LoglikelihoodResult> loglikelihoods(const LlamaModel& model,
                                                const std::vector<LoglikelihoodRequest>& requests,
                                                const LoglikelihoodOptions& opt) {
  const int64_t max_len = opt.max_length > 0 ? opt.max_length
                                             : model.config.max_position_embeddings;
  if (max_len < 1 || opt.max_batch_tokens < 1)
    throw ConfigError(msg(kWhere, "max_length {} and max_batch_tokens {} must be positive",
                          max_len, opt.max_batch_tokens));
  std::vector<Prepared> prep;
  prep.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    prep.push_back(prepare(requests[i], i, max_len, model.config.vocab_size));

  // Untruncated requests go to the KV-cache path (grouped by context), the rest are padded.
  Groups groups;
  std::vector<size_t> padded;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (opt.share_contexts && !prep[i].truncated)
      groups[requests[i].context].push_back(i);
    else
      padded.push_back(i);
  }
  at::NoGradGuard no_grad;
  std::vector<LoglikelihoodResult> out(requests.size());
  Progress progress("loglikelihood", int64_t(requests.size()), "req");
  int64_t finished = 0;
  auto done = [&](int64_t n) {
    finished += n;
    if (opt.show_progress) progress.update(finished);
  };
  // Contexts in lexicographic order: those that are a prefix of another one come right before
  // it, so each run of "prefix of the next" is a chain served by one context pass.
  std::vector<Groups::const_iterator> chain;
  int64_t chained = 0;
  for (auto it = groups.cbegin(); it != groups.cend(); ++it) {
    chain.push_back(it);
    chained += int64_t(it->second.size());
    auto next = std::next(it);
    if (next != groups.cend() && is_prefix(it->first, next->first)) continue;
    run_chain(model, requests, chain, out);
    done(chained);
    chain.clear();
    chained = 0;
  }
  run_padded(model, requests, prep, padded, opt, out, done);
  if (opt.show_progress) progress.finish();
  return out;
}

}  // namespace ac
