#include "hardware/in_forward.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/gemm.h"
#include "common/progress.h"
#include "hardware/calibration.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/native_ops.h"
#include "hardware/timer.h"
#include "model/kernels.h"
#include "model/weights.h"

namespace ac {

DecodeStepSplit timed_decode_step(const LlamaModel& m, std::vector<at::Tensor>& cache_k,
                                  std::vector<at::Tensor>& cache_v, int64_t pos,
                                  const at::Tensor& token) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  if (int64_t(cache_k.size()) != c.num_layers() || int64_t(cache_v.size()) != c.num_layers())
    throw ConfigError(msg("timed_decode_step", "expected a key and a value cache per layer ({}), "
                                               "found {} and {}", c.num_layers(), cache_k.size(),
                          cache_v.size()));
  DecodeStepSplit s;
  // Adds the time since t0 to acc and returns now: the next op's start.
  auto tick = [](double& acc, double t0) {
    const double t1 = timer_ms();
    acc += t1 - t0;
    return t1;
  };
  const double start = timer_ms();
  double t = start;
  at::Tensor x = at::embedding(w.embed_tokens, token);  // [1, 1, D]
  t = tick(s.elementwise, t);
  // RoPE tables once per step and head_dim, as the forward builds them (the "step" table).
  std::map<int64_t, std::pair<at::Tensor, at::Tensor>> rope;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& lc = c.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    if (lc.has_attention()) {
      const int64_t H = lc.num_attention_heads, G = lc.num_key_value_heads, Hd = lc.head_dim;
      if (pos >= cache_k[size_t(i)].size(2))
        throw ConfigError(msg("timed_decode_step", "layer {}: position {} beyond the cache's {} "
                                                   "positions", i, pos, cache_k[size_t(i)].size(2)));
      auto it = rope.find(Hd);
      if (it == rope.end()) it = rope.emplace(Hd, rope_tables(c, Hd, pos, 1)).first;
      t = timer_ms();
      at::Tensor h = rms_norm(x, lw.input_layernorm, c.rms_norm_eps);
      t = tick(s.elementwise, t);
      at::Tensor q = ac::linear(h, lw.q_proj, lw.q_bias);
      at::Tensor k = ac::linear(h, lw.k_proj, lw.k_bias);
      at::Tensor v = ac::linear(h, lw.v_proj, lw.v_bias);
      t = tick(s.gemm, t);
      at::Tensor a = native_ops::attention(q, k, v, cache_k[size_t(i)], cache_v[size_t(i)], pos, H,
                                           G, Hd, it->second.first, it->second.second, {});
      t = tick(s.attention, t);
      at::Tensor out = ac::linear(a, lw.o_proj);
      t = tick(s.gemm, t);
      x = x + out;
      t = tick(s.elementwise, t);
    }
    if (lc.has_ffn()) {
      t = timer_ms();
      at::Tensor h = rms_norm(x, lw.post_attention_layernorm, c.rms_norm_eps);
      t = tick(s.elementwise, t);
      at::Tensor g = ac::linear(h, lw.gate_proj), u = ac::linear(h, lw.up_proj);
      t = tick(s.gemm, t);
      at::Tensor act = swiglu(g, u);
      t = tick(s.elementwise, t);
      at::Tensor out = ac::linear(act, lw.down_proj);
      t = tick(s.gemm, t);
      x = x + out;
      t = tick(s.elementwise, t);
    }
  }
  t = timer_ms();
  at::Tensor h = rms_norm(x, w.norm, c.rms_norm_eps);
  t = tick(s.elementwise, t);
  s.logits = ac::linear(h, w.lm_head);
  t = tick(s.lm_head, t);
  (void)s.logits.argmax(-1);  // the forward's greedy pick, in the step table
  s.total = timer_ms() - start;
  return s;
}

std::vector<int64_t> in_forward_widths(int64_t base_hidden_size, int64_t step, int max_count) {
  if (base_hidden_size < 1 || step < 1 || max_count < 2)
    throw ConfigError(msg("in_forward_widths", "expected a hidden size, step >= 1 and max_count "
                                               ">= 2, found {}, {} and {}", base_hidden_size, step,
                          max_count));
  const int64_t lo = std::max<int64_t>(step, (base_hidden_size * 2 / 5 + step - 1) / step * step);
  std::vector<int64_t> all;
  for (int64_t d = lo; d < base_hidden_size; d += step) all.push_back(d);
  // Thin evenly to max_count - 1, then the base's own width.
  std::vector<int64_t> out;
  const size_t keep = size_t(max_count - 1);
  if (all.size() <= keep) {
    out = all;
  } else {
    for (size_t i = 0; i < keep; ++i) out.push_back(all[i * (all.size() - 1) / (keep - 1)]);
  }
  out.push_back(base_hidden_size);
  return out;
}

bool in_forward_measures(const ModelConfig& c) {
  return !c.is_hybrid() && !c.qk_norm && !c.sliding_window;
}

std::vector<InForwardRatio> measure_in_forward(const Profile& profile, const ModelConfig& base,
                                               const Workload& workload,
                                               const InForwardOptions& opt) {
  if (opt.rounds < 1 || opt.steps < 0)
    throw ConfigError(msg("in_forward", "rounds >= 1 and steps >= 0: found {} and {}",
                          opt.rounds, opt.steps));
  if (!in_forward_measures(base))
    throw ConfigError(msg("in_forward", "the op-by-op decode step mirrors the plain Llama-family "
                                        "forward (no qk_norm, sliding window, Mamba-2 or MoE); "
                                        "found {}", describe(base)));
  std::vector<int64_t> widths =
      opt.hidden_sizes.empty() ? in_forward_widths(base.hidden_size, 8) : opt.hidden_sizes;
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  if (widths.empty() || widths.front() < 1)
    throw ConfigError(msg("in_forward", "expected hidden sizes >= 1, found none or {}",
                          widths.empty() ? 0 : widths.front()));
  std::vector<ModelConfig> archs;
  for (int64_t D : widths) {
    ModelConfig c = base;
    c.hidden_size = D;
    archs.push_back(c);
  }
  // The positions of a real decode (prompt, prompt + 1, ...): the measured TPOT is the p10 of
  // such steps (hardware/measure.h), whose attention reads contexts from the prompt's length on.
  const int64_t first = std::max<int64_t>(1, workload.prompt_tokens);
  const int64_t span = std::max<int64_t>(1, workload.output_tokens);
  const int steps = opt.steps > 0 ? opt.steps : int(span);
  const int64_t capacity = first + span;
  c10::InferenceMode no_grad;
  std::vector<std::vector<DecodeStepSplit>> split(archs.size());
  at::Tensor token = at::randint(0, base.vocab_size, {1, 1}, at::kLong);
  Progress bar("in-forward", int64_t(archs.size()) * opt.rounds, "steps");
  for (int r = 0; r < opt.rounds; ++r)
    for (size_t i = 0; i < archs.size(); ++i) {
      // Weights rebuilt each round (the same seed): memory stays one model.
      LlamaModel m{archs[i], random_weights(archs[i], opt.weight_seed + i)};
      std::vector<at::Tensor> ck, cv;
      for (const LayerConfig& l : archs[i].layers) {
        const int64_t G = std::max<int64_t>(1, l.num_key_value_heads),
                      Hd = std::max<int64_t>(1, l.head_dim);
        ck.push_back(at::rand({1, G, capacity, Hd}));
        cv.push_back(at::rand({1, G, capacity, Hd}));
      }
      for (int k = 0; k < steps + 2; ++k) {
        const int64_t pos = first + (k < 2 ? 0 : int64_t(k - 2) % span);
        DecodeStepSplit s = timed_decode_step(m, ck, cv, pos, token);
        s.logits = at::Tensor();
        if (k >= 2) split[i].push_back(std::move(s));
      }
      if (opt.progress) bar.update(int64_t(r) * int64_t(archs.size()) + int64_t(i) + 1);
    }
  if (opt.progress) bar.finish();
  // The tables' class sums, without any ratio or correction.
  Profile bare = profile;
  bare.in_forward.clear();
  std::vector<InForwardRatio> out;
  for (size_t i = 0; i < archs.size(); ++i) {
    const PhaseFeatures dec = correction_features(bare, archs[i], workload).second;
    std::array<std::vector<double>, 4> cls;
    std::vector<double> total;
    for (const DecodeStepSplit& s : split[i]) {
      cls[0].push_back(s.gemm), cls[1].push_back(s.attention), cls[2].push_back(s.elementwise);
      cls[3].push_back(s.lm_head), total.push_back(s.total);
    }
    InForwardRatio f;
    f.hidden_size = archs[i].hidden_size;
    f.total_ms = sample_quantile(total, 0.1);
    double classes = 0;
    for (size_t k = 0; k < 4; ++k) {
      f.in_forward_ms[k] = sample_quantile(cls[k], 0.1);
      f.table_ms[k] = dec.x[k];
      classes += f.in_forward_ms[k];
    }
    // What the step spends between its timed ops (freeing each op's output, dispatch; 6-8% of
    // a stories15M step on machine C, growing with the width like the GEMMs) belongs to the
    // ops: spread over the classes in proportion, so that the scaled tables plus the step
    // table add up to the whole step at the measured widths.
    f.rest_ms = f.total_ms - dec.offset - classes;
    const double spread = classes > 0 ? std::max(1.0, (f.total_ms - dec.offset) / classes) : 1.0;
    for (size_t k = 0; k < 4; ++k)  // a class the model lacks (no attention) keeps factor 1
      f.ratio[k] = f.table_ms[k] > 0 && f.in_forward_ms[k] > 0
                       ? spread * f.in_forward_ms[k] / f.table_ms[k] : 1.0;
    out.push_back(f);
  }
  return out;
}

}  // namespace ac
