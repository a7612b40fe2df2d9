#include "hardware/expected_cost.h"

#include "common/error.h"

namespace ac {

namespace {

at::Tensor f64(const std::vector<double>& v, int64_t rows) {
  return at::tensor(v, at::kDouble).view({rows, -1});
}

// Costs of `choices` at every hidden size, with `part` = attention_part_cost or ffn_part_cost.
template <typename Part>
void cost_choices(const ModelConfig& base, const std::vector<LayerConfig>& choices,
                  const std::vector<int64_t>& hidden, const Scenario& s, const Profile* p,
                  Part part, at::Tensor* ttft, at::Tensor* tpot, at::Tensor* tpot_warm,
                  at::Tensor* bytes, at::Tensor* act) {
  std::vector<double> t, d, dw, b, a;
  for (int64_t D : hidden) {
    ModelConfig c = base;
    c.hidden_size = D;
    for (const auto& l : choices) {
      PartCost pc = part(c, l, s, p);
      t.push_back(pc.ttft_ms);
      d.push_back(pc.tpot_ms);
      dw.push_back(pc.tpot_warm_ms);
      b.push_back(double(pc.weight_bytes + pc.kv_cache_bytes));
      a.push_back(double(pc.activation_bytes));
    }
  }
  int64_t n = int64_t(hidden.size());
  *ttft = f64(t, n), *tpot = f64(d, n), *tpot_warm = f64(dw, n), *bytes = f64(b, n), *act = f64(a, n);
}

// The residency curve at x (piecewise linear, constant beyond its ends; residency_at in
// profile.h), differentiable in x: h_0 + sum_k slope_k clamp(x - x_k, 0, x_{k+1} - x_k).
at::Tensor residency_of(const std::vector<std::pair<double, double>>& curve, const at::Tensor& x) {
  if (curve.empty()) return at::zeros_like(x);
  at::Tensor h = at::full_like(x, curve.front().second);
  for (size_t k = 0; k + 1 < curve.size(); ++k) {
    const auto [x0, h0] = curve[k];
    const auto [x1, h1] = curve[k + 1];
    h = h + (h1 - h0) / (x1 - x0) * at::clamp(x - x0, 0.0, x1 - x0);
  }
  return h;
}

}  // namespace

ChoiceTables build_choice_tables(const ModelConfig& base,
                                 const std::vector<std::vector<LayerConfig>>& attention_choices,
                                 const std::vector<std::vector<LayerConfig>>& ffn_choices,
                                 const std::vector<int64_t>& hidden_sizes, const Scenario& s,
                                 const Profile* p) {
  if (attention_choices.size() != base.layers.size() || ffn_choices.size() != base.layers.size())
    throw ConfigError(msg("expected_cost", "{} layers but {} attention and {} FFN choice lists",
                          base.layers.size(), attention_choices.size(), ffn_choices.size()));
  ChoiceTables t;
  t.hidden_sizes = hidden_sizes.empty() ? std::vector<int64_t>{base.hidden_size} : hidden_sizes;
  for (size_t i = 0; i < base.layers.size(); ++i) {
    LayerChoiceTable l;
    l.attention_choices = attention_choices[i];
    l.ffn_choices = ffn_choices[i];
    cost_choices(base, l.attention_choices, t.hidden_sizes, s, p, attention_part_cost,
                 &l.attn_ttft_ms, &l.attn_tpot_ms, &l.attn_tpot_warm_ms, &l.attn_bytes,
                 &l.attn_activation_bytes);
    cost_choices(base, l.ffn_choices, t.hidden_sizes, s, p, ffn_part_cost, &l.ffn_ttft_ms,
                 &l.ffn_tpot_ms, &l.ffn_tpot_warm_ms, &l.ffn_bytes, &l.ffn_activation_bytes);
    t.layers.push_back(std::move(l));
  }
  std::vector<double> ft, fd, fdw, fb, fa;
  for (int64_t D : t.hidden_sizes) {
    ModelConfig c = base;
    c.hidden_size = D;
    PartCost f = fixed_cost(c, s, p);
    ft.push_back(f.ttft_ms);
    fd.push_back(f.tpot_ms);
    fdw.push_back(f.tpot_warm_ms);
    fb.push_back(double(f.weight_bytes));
    fa.push_back(double(f.activation_bytes));
  }
  t.fixed_ttft_ms = at::tensor(ft, at::kDouble);
  t.fixed_tpot_ms = at::tensor(fd, at::kDouble);
  t.fixed_tpot_warm_ms = at::tensor(fdw, at::kDouble);
  if (p) t.residency_curve = p->residency_curve(s.workload.batch_size);
  t.fixed_bytes = at::tensor(fb, at::kDouble);
  t.fixed_activation_bytes = at::tensor(fa, at::kDouble);
  CostEstimate empty = combine({}, {}, PartCost{}, s, "");
  t.reserve_bytes = double(empty.reserve_bytes);
  t.batch_size = s.workload.batch_size;
  t.output_tokens = s.workload.output_tokens;
  return t;
}

ExpectedCost expected_cost(const ChoiceTables& t, const at::Tensor& p_hidden,
                           const std::vector<at::Tensor>& p_attention,
                           const std::vector<at::Tensor>& p_ffn) {
  const int64_t nD = int64_t(t.hidden_sizes.size());
  if (p_hidden.dim() != 1 || p_hidden.size(0) != nD)
    throw ConfigError(msg("expected_cost", "p_hidden: expected [{}], found {}", nD,
                          p_hidden.sizes().vec()));
  if (p_attention.size() != t.layers.size() || p_ffn.size() != t.layers.size())
    throw ConfigError(msg("expected_cost", "{} layers but {} attention and {} FFN probability rows",
                          t.layers.size(), p_attention.size(), p_ffn.size()));
  at::Tensor ph = p_hidden.to(at::kDouble);
  // Per hidden size [nD]: sums over layers of expected part costs.
  at::Tensor ttft = t.fixed_ttft_ms.clone(), tpot = t.fixed_tpot_ms.clone(),
             tpot_warm = t.fixed_tpot_warm_ms.clone(), bytes = t.fixed_bytes.clone();
  std::vector<at::Tensor> act;  // per layer part [nD]
  for (size_t i = 0; i < t.layers.size(); ++i) {
    const LayerChoiceTable& l = t.layers[i];
    at::Tensor pa = p_attention[i].to(at::kDouble), pf = p_ffn[i].to(at::kDouble);
    if (pa.dim() != 1 || pa.size(0) != l.attn_ttft_ms.size(1) || pf.dim() != 1 ||
        pf.size(0) != l.ffn_ttft_ms.size(1))
      throw ConfigError(msg("expected_cost", "layer {}: probabilities {} and {}, expected [{}] "
                                             "and [{}]", i, pa.sizes().vec(), pf.sizes().vec(),
                            l.attn_ttft_ms.size(1), l.ffn_ttft_ms.size(1)));
    ttft = ttft + at::mv(l.attn_ttft_ms, pa) + at::mv(l.ffn_ttft_ms, pf);
    tpot = tpot + at::mv(l.attn_tpot_ms, pa) + at::mv(l.ffn_tpot_ms, pf);
    tpot_warm = tpot_warm + at::mv(l.attn_tpot_warm_ms, pa) + at::mv(l.ffn_tpot_warm_ms, pf);
    bytes = bytes + at::mv(l.attn_bytes, pa) + at::mv(l.ffn_bytes, pf);
    act.push_back(at::mv(l.attn_activation_bytes, pa));
    act.push_back(at::mv(l.ffn_activation_bytes, pf));
  }
  at::Tensor layer_act = act.empty() ? at::zeros({nD}, at::kDouble)
                                     : std::get<0>(at::stack(act).max(0));  // [nD]
  // Per hidden size: the decode step's cold and warm costs mixed by the residency of its bytes.
  if (!t.residency_curve.empty())
    tpot = tpot - residency_of(t.residency_curve, bytes) * (tpot - tpot_warm);
  ExpectedCost e;
  e.ttft_ms = at::dot(ph, ttft);
  e.tpot_ms = at::dot(ph, tpot);
  e.peak_memory_bytes = at::dot(ph, bytes + layer_act + t.fixed_activation_bytes) + t.reserve_bytes;
  e.throughput_tokens_per_s = double(t.batch_size * t.output_tokens) * 1e3 /
                              (e.ttft_ms + double(t.output_tokens) * e.tpot_ms);
  return e;
}

}  // namespace ac
