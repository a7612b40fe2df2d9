#include "hardware/cost_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/runtime.h"
#include "common/units.h"
#include "export/gguf_model.h"
#include "hardware/llamacpp_buffers.h"
#include "hardware/mamba2_cost.h"
#include "hardware/moe_cost.h"
#include "hardware/roofline.h"

namespace ac {

PartCost& PartCost::operator+=(const PartCost& o) {
  ttft_ms += o.ttft_ms;
  tpot_ms += o.tpot_ms;
  tpot_warm_ms += o.tpot_warm_ms;
  weight_bytes += o.weight_bytes;
  kv_cache_bytes += o.kv_cache_bytes;
  state_bytes += o.state_bytes;
  activation_bytes = std::max(activation_bytes, o.activation_bytes);
  return *this;
}

int64_t kv_capacity_tokens(const Workload& w, const EngineSpec& engine) {
  int64_t b = engine.kv_block_size_tokens;
  return (w.context_tokens() + b - 1) / b * b;
}

namespace {

// Latency source for one op: the native profile's tables, or the device roofline.
class OpCosts {
 public:
  // hidden_size: the model's, where the profile's in-forward ratios are read (0: none).
  OpCosts(const Scenario& s, const Profile* p, int64_t hidden_size = 0)
      : s_(s), p_(p), engine_(p ? p->engine_calibration(s) : nullptr), hidden_size_(hidden_size) {
    const Workload& w = s.workload;
    tp_ = double(w.tensor_parallel);
    wbytes_ = dtype_bytes(w.weight_dtype, "predict");
    kvbytes_ = dtype_bytes(w.kv_cache_dtype, "predict");
    abytes_ = w.weight_dtype == "fp32" ? 4.0 : 2.0;
    if (!use_tables()) rf_.emplace(s, p);
    has_residency_ = use_tables() && !engine_ && p_->tables.count("gemm_warm") &&
                     p_->tables.count("lm_head_warm") && p_->tables.count("working_set");
  }
  // Whether the profile times GEMMs with cache-resident weights too (profile.h: *_warm).
  bool has_residency() const { return has_residency_; }
  // The share of the weights costed as cache-resident: 0 (cold tables) or 1 (warm tables); the
  // model's own share mixes the two (combine).
  void set_residency(double h) { residency_ = h; }
  // The native engine, or an engine measured here (its correction over the same tables).
  bool use_tables() const { return p_ && (s_.engine == "native" || engine_); }
  const EngineCalibration* engine_calibration() const { return engine_; }

  // An engine measured here (engine_): each op's *work* in its own units, which the engine's
  // fitted correction turns into milliseconds (hardware/engine_calibration.h): a GEMM's weight
  // bytes times its rows, the attention's cached keys and values read (decode) or its causal
  // score products (prefill), an elementwise op's values; millions of each.
  double gemm(const Phase& ph, int64_t N, int64_t K) const {
    if (engine_) return corr(ph).gemm * double(ph.M) * double(N) * double(K) * wbytes_ * 1e-6;
    if (use_tables())
      return corr(ph).gemm * in_forward(ph, 0) *
             resident(ph, "gemm", {double(ph.M), double(N), double(K)});
    return rf_->gemm_ms(ph, double(ph.M), double(N), double(K));
  }
  double lm_head(const Phase& ph, int64_t V, int64_t D) const {
    if (engine_) return corr(ph).lm_head * double(ph.B) * double(V) * double(D) * wbytes_ * 1e-6;
    if (use_tables())
      return corr(ph).lm_head * in_forward(ph, 3) *
             resident(ph, "lm_head", {double(ph.B), double(V), double(D)});
    Phase last = ph;
    last.M = ph.B;  // logits of the last position only
    return gemm(last, V, D);
  }
  double attention(const Phase& ph, int64_t H, int64_t G, int64_t Hd) const {
    if (engine_) {
      const double C = double(ph.T_or_C), B = double(ph.B), hd = double(Hd);
      const double work = ph.prefill ? B * C * (C + 1) / 2 * hd * double(H)
                                     : B * C * hd * double(H + G);
      return corr(ph).attention * work * 1e-6;
    }
    if (use_tables()) {
      const char* t = ph.prefill ? "attention_prefill" : "attention_decode";
      return corr(ph).attention * in_forward(ph, 1) *
             p_->table(t).lookup({double(ph.B), double(Hd), double(G), double(H), double(ph.T_or_C)}, t);
    }
    double h = double(H) / tp_, g = double(G) / tp_;
    double Tq = ph.prefill ? double(ph.T_or_C) : 1.0, C = double(ph.T_or_C);
    double causal = ph.prefill ? 0.5 : 1.0;  // flash kernels skip the masked half
    double fl = 4.0 * ph.B * h * Tq * C * Hd * causal;
    double by = 2.0 * ph.B * g * C * Hd * kvbytes_ + 2.0 * ph.B * h * Tq * Hd * abytes_;
    int kernels = 2;  // RoPE + cache write
    if (!s_.engine_spec.fuses("attention")) {
      by += 3.0 * ph.B * h * Tq * C * 4.0;  // scores written, read by softmax, probs read
      kernels += 3;
    }
    if (s_.engine_spec.fuses("rope")) kernels -= 1;
    return rf_->op_ms(ph, fl, by, kernels);
  }
  // An elementwise op over M x W values reading `reads` and writing one tensor.
  double small(const char* table, const Phase& ph, int64_t W, int reads = 1) const {
    if (engine_) return corr(ph).elementwise * double(ph.M) * double(W) * 1e-6;
    if (use_tables())
      return corr(ph).elementwise * in_forward(ph, 2) *
             p_->table(table).lookup({double(ph.M), double(W)}, table);
    return rf_->elementwise_ms(ph, double(ph.M) * double(W), reads);
  }
  // Once-per-call work beside the layers; Hd: head dim of the first attention layer.
  double step_overhead(const Phase& ph, int64_t Hd, int64_t V) const {
    if (!use_tables()) return s_.engine_spec.per_step_overhead_ms.value;
    if (engine_) return corr(ph).per_step_ms;
    double T = ph.prefill ? double(ph.T_or_C) : 1.0;
    double t = p_->table("step").lookup({double(ph.B), T, double(Hd), double(V)}, "step");
    return corr(ph).step_table * t + corr(ph).per_step_ms +
           (ph.prefill ? p_->calibration.prefill_step_ms : p_->calibration.decode_step_ms);
  }
  // The correction's constant per attention or FFN part present (0 without a profile).
  double part_overhead(const Phase& ph) const { return use_tables() ? corr(ph).per_part_ms : 0.0; }
  double wbytes() const { return wbytes_; }
  double kvbytes() const { return kvbytes_; }
  double abytes() const { return abytes_; }
  double tp() const { return tp_; }

 private:
  // A GEMM table's latency: the cold entry (weights streamed from memory), or with residency_ 1
  // the warm one (weights in the last-level cache; never above the cold one). The prefill keeps
  // the cold entry: its GEMMs (M = B x T rows) are bound by arithmetic, not by where the weights
  // come from, and costing them warm made the calibration's uncorrected TTFT error 18-24%
  // instead of 5-6% (docs/benchmarks.md, 2026-12-05).
  double resident(const Phase& ph, const char* table, const std::vector<double>& q) const {
    const double cold = p_->table(table).lookup(q, table);
    if (residency_ <= 0 || ph.prefill) return cold;
    const std::string w = std::string(table) + "_warm";
    return cold - residency_ * std::max(0.0, cold - p_->table(w).lookup(q, w));
  }
  // The profile's in-forward ratio of factor term `term` at the model's hidden size: the
  // native engine's decode tables only (hardware/in_forward.h); 1 otherwise.
  double in_forward(const Phase& ph, int term) const {
    if (ph.prefill || engine_ || !p_ || hidden_size_ <= 0) return 1.0;
    return in_forward_ratio(p_->in_forward, term, hidden_size_);
  }
  // The profile's fitted correction of this phase (identity when not fitted).
  const PhaseCorrection& corr(const Phase& ph) const {
    static const PhaseCorrection identity;
    const LatencyCorrection& c = engine_ ? engine_->correction : p_->correction;
    if (!c.fitted) return identity;
    return ph.prefill ? c.prefill : c.decode;
  }
  const Scenario& s_;
  const Profile* p_;
  const EngineCalibration* engine_;
  double tp_ = 1, wbytes_ = 4, kvbytes_ = 4, abytes_ = 4;
  std::optional<Roofline> rf_;  // the device roofline, when the tables are not used
  double residency_ = 0;  // 0: the cold tables, 1: the warm ones (decode only)
  int64_t hidden_size_ = 0;
  bool has_residency_ = false;
};

void check_profile(const Scenario& s, const Profile* p) {
  if (p && p->identity.device != s.device)
    throw ConfigError(msg("predict", "the profile was measured on device '{}' ({}), the scenario "
                                     "'{}' targets device '{}': profile that device (`autocompress "
                                     "profile --device {}`)",
                          p->identity.device, p->identity.cpu_model, s.name, s.device, s.device));
  // An engine measured here is costed from its own work features, not the tables.
  if (p && p->workload.prompt_tokens > 0 && !p->engine_calibration(s) &&
      (p->workload.batch_size != s.workload.batch_size ||
       p->workload.prompt_tokens != s.workload.prompt_tokens ||
       p->workload.output_tokens != s.workload.output_tokens)) {
    static bool warned = false;  // predict runs many times in a search: say it once
    if (!warned)
      log_warn(fmt::format("[predict] the profile was measured for B={} prompt {} output {}, the "
                           "scenario '{}' has B={} prompt {} output {}: its tables are "
                           "extrapolated; profile with this scenario for accurate costs",
                           p->workload.batch_size, p->workload.prompt_tokens,
                           p->workload.output_tokens, s.name, s.workload.batch_size,
                           s.workload.prompt_tokens, s.workload.output_tokens));
    warned = true;
  }
  if (!p && s.device_spec.kind == "cpu")
    throw ConfigError(msg("predict", "scenario '{}' targets a CPU, whose latency comes from its "
                                     "profile: run `autocompress profile --device cpu --scenario "
                                     "{}` and pass its file with --profile (expected a profile, found "
                                     "none)", s.name, s.name));
}

double attention_ms(const OpCosts& op, const Phase& ph, const ModelConfig& c,
                    const LayerConfig& l, bool fuse_qkv, bool fuse_add_norm) {
  const int64_t D = c.hidden_size, H = l.num_attention_heads, G = l.num_key_value_heads,
                Hd = l.head_dim;
  double t = op.part_overhead(ph) + op.small("rmsnorm", ph, D);
  if (fuse_qkv)
    t += op.gemm(ph, (H + 2 * G) * Hd, D);
  else
    t += op.gemm(ph, H * Hd, D) + 2 * op.gemm(ph, G * Hd, D);
  if (c.attention_bias && !fuse_qkv)
    t += op.small("add", ph, H * Hd) + 2 * op.small("add", ph, G * Hd);
  t += op.attention(ph, H, G, Hd) + op.gemm(ph, D, H * Hd);
  if (!fuse_add_norm) t += op.small("add", ph, D, 2);
  return t;
}

double ffn_ms(const OpCosts& op, const Phase& ph, const ModelConfig& c, const LayerConfig& l,
              bool fuse_gate_up, bool fuse_silu, bool fuse_add_norm) {
  const int64_t D = c.hidden_size, F = l.intermediate_size;
  double t = op.part_overhead(ph) + op.small("rmsnorm", ph, D);
  if (!c.mlp_gated)  // relu² (Nemotron-H): up, the activation, down
    return t + op.gemm(ph, F, D) + op.small("silu_mul", ph, F, 1) + op.gemm(ph, D, F) +
           (fuse_add_norm ? 0.0 : op.small("add", ph, D, 2));
  t += fuse_gate_up ? op.gemm(ph, 2 * F, D) : 2 * op.gemm(ph, F, D);
  t += fuse_silu ? op.small("silu_mul", ph, F, 2) : op.small("silu_mul", ph, F, 2) * 2;
  t += op.gemm(ph, D, F);
  if (!fuse_add_norm) t += op.small("add", ph, D, 2);
  return t;
}

}  // namespace

// Rows of one prefill pass: the whole batch's prompt (B*T), or the engine's chunk when it
// prefills in chunks (chunked prefill / micro-batches).
static double prefill_rows(const Workload& w, const EngineSpec& e) {
  const double M = double(w.batch_size * w.prompt_tokens), chunk = e.prefill_chunk_tokens.value;
  return chunk > 0 ? std::min(M, chunk) : M;
}

// Live bytes at the attention's peak during the prefill. As the native forward holds them
// (model/llama.cpp): residual x and normed h [M, D], rotated q [M, H*Hd], scores and
// probabilities [B, H, T, T], the values broadcast to H heads [B, H, T, Hd] and the output
// [B, H, T, Hd]; k and v live in the KV cache. An engine that fuses the attention (flash
// attention: Dao et al. 2022) never holds the scores and reads the G KV heads directly: x, h,
// q and the output over the rows of one prefill pass.
static int64_t attention_activation_bytes(const ModelConfig& c, const LayerConfig& l,
                                          const Workload& w, const EngineSpec& e, double abytes,
                                          double tp) {
  const double B = double(w.batch_size), T = double(w.prompt_tokens);
  const double H = double(l.num_attention_heads) / tp, Hd = double(l.head_dim);
  const double D = double(c.hidden_size);
  if (e.fuses("attention")) {
    const double M = prefill_rows(w, e);
    return int64_t(abytes * (2 * M * D + 2 * M * H * Hd));
  }
  const double M = B * T;
  double broadcast_v = l.num_key_value_heads == l.num_attention_heads ? 0 : B * H * T * Hd;
  return int64_t(abytes * (2 * M * D + M * H * Hd + 2 * B * H * T * T + broadcast_v + B * H * T * Hd));
}

// The FFN's peak: x, h [M, D] and the four [M, F] tensors of silu(gate(h)) * up(h), which live
// together until the end of that expression; M = the rows of one prefill pass.
static int64_t ffn_activation_bytes(const ModelConfig& c, const LayerConfig& l, const Workload& w,
                                    const EngineSpec& e, double abytes, double tp) {
  const double M = prefill_rows(w, e), D = double(c.hidden_size);
  return int64_t(abytes * (2 * M * D + 4 * M * double(l.intermediate_size) / tp));
}

// What llama.cpp runs of a removed part, as export/gguf_model.h writes a heterogeneous model for
// its deci graph: an FFN-free layer that keeps its attention carries a zero FFN of width 1
// (llama.cpp skips a layer whose n_ff is 0), and an attention-free layer 0 one zero head
// (llama.cpp reads the head size from layer 0). Those stubs are computed for every token.
static std::optional<LayerConfig> engine_stub(const ModelConfig& c, const LayerConfig& l,
                                              const Scenario& s, bool attention) {
  // Nemotron-H's llama.cpp graph builds each layer's one part (src/models/nemotron-h.cpp): no
  // stubs.
  if (s.engine != "llama.cpp" || c.is_hybrid()) return std::nullopt;
  LayerConfig stub = l;
  stub.attention_no_op = stub.ffn_no_op = false;
  if (!attention && !l.has_ffn() && l.has_attention()) {
    stub.intermediate_size = 1;
    return stub;
  }
  if (attention && !l.has_attention() && l.has_ffn() && !c.layers.empty() && &l == &c.layers[0]) {
    stub.num_attention_heads = stub.num_key_value_heads = 1;
    for (const auto& o : c.layers)
      if (o.has_attention()) {
        stub.head_dim = o.head_dim;
        break;
      }
    if (stub.head_dim < 1) stub.head_dim = 1;
    return stub;
  }
  return std::nullopt;
}

PartCost attention_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                             const Profile* p) {
  if (l.has_mamba()) return mamba2_part_cost(c, l, s, p);  // the layer's mixer is a Mamba-2
  PartCost r;
  if (!l.has_attention()) {
    if (auto stub = engine_stub(c, l, s, /*attention=*/true)) return attention_part_cost(c, *stub, s, p);
    return r;
  }
  check_profile(s, p);
  OpCosts op(s, p, c.hidden_size);
  const EngineSpec& e = s.engine_spec;
  bool qkv = e.fuses("qkv_proj") && !op.use_tables(), add = e.fuses("add_rmsnorm") && !op.use_tables();
  Phase pre = prefill_phase(s.workload), dec = decode_phase(s.workload);
  r.ttft_ms = attention_ms(op, pre, c, l, qkv, add);
  r.tpot_ms = r.tpot_warm_ms = attention_ms(op, dec, c, l, qkv, add);
  if (op.has_residency()) {
    op.set_residency(1);
    r.tpot_warm_ms = attention_ms(op, dec, c, l, qkv, add);
  }
  const int64_t D = c.hidden_size, q = l.num_attention_heads * l.head_dim,
                kv = l.num_key_value_heads * l.head_dim;
  int64_t params = D + 2 * D * q + 2 * D * kv + (c.attention_bias ? q + 2 * kv : 0);
  r.weight_bytes = int64_t(double(params) * op.wbytes() / op.tp());
  r.kv_cache_bytes = int64_t(2.0 * s.workload.batch_size * kv * kv_capacity_tokens(s.workload, e) *
                             op.kvbytes() / op.tp());
  // An engine measured here has its buffers in fixed_cost (its compute buffer is sized for the
  // whole graph, not per layer).
  if (!op.engine_calibration())
    r.activation_bytes = attention_activation_bytes(c, l, s.workload, e, op.abytes(), op.tp());
  return r;
}

PartCost ffn_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                       const Profile* p) {
  if (l.has_moe()) return moe_part_cost(c, l, s, p);  // the layer's channel part is an MoE
  PartCost r;
  if (!l.has_ffn()) {
    if (auto stub = engine_stub(c, l, s, /*attention=*/false)) return ffn_part_cost(c, *stub, s, p);
    return r;
  }
  check_profile(s, p);
  OpCosts op(s, p, c.hidden_size);
  const EngineSpec& e = s.engine_spec;
  bool native = op.use_tables();
  bool gu = e.fuses("gate_up_proj") && !native, silu = e.fuses("silu_mul") || native,
       add = e.fuses("add_rmsnorm") && !native;
  Phase pre = prefill_phase(s.workload), dec = decode_phase(s.workload);
  r.ttft_ms = ffn_ms(op, pre, c, l, gu, silu, add);
  r.tpot_ms = r.tpot_warm_ms = ffn_ms(op, dec, c, l, gu, silu, add);
  if (op.has_residency()) {
    op.set_residency(1);
    r.tpot_warm_ms = ffn_ms(op, dec, c, l, gu, silu, add);
  }
  int64_t params = c.hidden_size + (c.mlp_gated ? 3 : 2) * c.hidden_size * l.intermediate_size;
  r.weight_bytes = int64_t(double(params) * op.wbytes() / op.tp());
  if (!op.engine_calibration())
    r.activation_bytes = ffn_activation_bytes(c, l, s.workload, e, op.abytes(), op.tp());
  return r;
}

PartCost fixed_cost(const ModelConfig& c, const Scenario& s, const Profile* p) {
  check_profile(s, p);
  OpCosts op(s, p, c.hidden_size);
  PartCost r;
  const int64_t D = c.hidden_size, V = c.vocab_size;
  int64_t Hd = 0;
  for (const auto& l : c.layers)
    if (l.has_attention() && Hd == 0) Hd = l.head_dim;
  auto step_ms = [&](const Phase& ph) {
    Phase last = ph;
    last.M = ph.B;  // the final norm and the head see the last position only
    return op.small("embedding", ph, D) + op.small("rmsnorm", last, D) + op.lm_head(ph, V, D) +
           op.step_overhead(ph, Hd, V);
  };
  r.ttft_ms = step_ms(prefill_phase(s.workload));
  r.tpot_ms = r.tpot_warm_ms = step_ms(decode_phase(s.workload));
  if (op.has_residency()) {
    op.set_residency(1);
    r.tpot_warm_ms = step_ms(decode_phase(s.workload));
  }
  int64_t params = V * D * (c.tie_word_embeddings ? 1 : 2) + D;
  r.weight_bytes = int64_t(double(params) * op.wbytes() / op.tp());
  const Workload& w = s.workload;
  if (const EngineCalibration* ec = op.engine_calibration()) {
    // The engine's own output and compute buffers (hardware/engine_calibration.h).
    r.activation_bytes = int64_t(
        ec->memory.activation_bytes(c, kv_capacity_tokens(w, s.engine_spec), w.batch_size));
    if (ec->weights_repacked_into == "AMX" && !c.is_hybrid()) {
      // llama.cpp's model buffers on a CPU with AMX: the repacked copy and the span of the
      // mapped file (hardware/llamacpp_buffers.h) in place of the GGUF's bytes the parts count.
      const std::vector<GgufTensorExtent> file =
          model_gguf_extents(c, gguf_type_for(w.weight_dtype));
      int64_t file_bytes = 0;
      for (const GgufTensorExtent& t : file) file_bytes += int64_t(t.bytes);
      r.weight_bytes +=
          int64_t(llamacpp_model_buffers(file, c.tie_word_embeddings, "AMX").total()) - file_bytes;
    }
    return r;
  }
  // The logits of the last position and the RoPE tables cos, sin [T, Hd] (built in float64).
  r.activation_bytes = int64_t(op.abytes() * double(w.batch_size) * V / op.tp() +
                               6.0 * 4 * w.prompt_tokens * Hd);
  return r;
}

CostEstimate combine(const std::vector<PartCost>& attention, const std::vector<PartCost>& ffn,
                     const PartCost& fixed, const Scenario& s, const std::string& source,
                     const Profile* profile) {
  AC_CHECK(attention.size() == ffn.size(), "{} attention parts vs {} FFN parts", attention.size(),
           ffn.size());
  CostEstimate e;
  e.source = source;
  PartCost total = fixed;
  for (size_t i = 0; i < attention.size(); ++i) {
    total += attention[i];
    total += ffn[i];
  }
  // The decode step's share of cache-resident weights, from what the step touches.
  const double h =
      profile ? profile->residency(double(total.weight_bytes + total.kv_cache_bytes), s.workload.batch_size)
              : 0.0;
  auto mix = [h](PartCost p) {
    p.tpot_ms -= h * (p.tpot_ms - p.tpot_warm_ms);
    return p;
  };
  e.fixed = mix(fixed);
  total = e.fixed;
  for (size_t i = 0; i < attention.size(); ++i) {
    PartCost layer = mix(attention[i]);
    layer += mix(ffn[i]);
    e.layer_ttft_ms.push_back(layer.ttft_ms);
    e.layer_tpot_ms.push_back(layer.tpot_ms);
    e.layer_weight_bytes.push_back(layer.weight_bytes);
    e.layer_kv_cache_bytes.push_back(layer.kv_cache_bytes);
    e.layer_state_bytes.push_back(layer.state_bytes);
    total += layer;
  }
  e.residency = h;
  e.ttft_ms = total.ttft_ms;
  e.tpot_ms = total.tpot_ms;
  e.weight_bytes = total.weight_bytes;
  e.kv_cache_bytes = total.kv_cache_bytes;
  e.state_bytes = total.state_bytes;
  // The largest layer's intermediates plus the logits and final hidden states.
  int64_t layer_peak = 0;
  for (size_t i = 0; i < attention.size(); ++i)
    layer_peak = std::max({layer_peak, attention[i].activation_bytes, ffn[i].activation_bytes});
  e.activation_bytes = layer_peak + fixed.activation_bytes;
  const EngineSpec& eng = s.engine_spec;
  double device_mem = s.device_spec.memory_bytes ? s.device_spec.memory_bytes->value : 0.0;
  // An engine measured here ("profile+llama.cpp") has every buffer it allocates in its memory
  // model (fixed.activation_bytes); the spec's reserve is an estimate for when it is not.
  const bool engine_measured = source.rfind("profile+", 0) == 0;
  e.reserve_bytes = engine_measured ? 0
                    : int64_t(eng.reserve_bytes.value + eng.memory_reserved_fraction.value * device_mem);
  e.peak_memory_bytes =
      e.weight_bytes + e.kv_cache_bytes + e.state_bytes + e.activation_bytes + e.reserve_bytes;
  const Workload& w = s.workload;
  double request_ms = e.ttft_ms + double(w.output_tokens) * e.tpot_ms;
  e.throughput_tokens_per_s =
      request_ms > 0 ? double(w.batch_size * w.output_tokens) / (request_ms * 1e-3) : 0.0;
  return e;
}

CostEstimate predict(const ModelConfig& c, const Scenario& s, const Profile* p) {
  c.validate("predict");
  check_profile(s, p);
  std::vector<PartCost> attn, ffn;
  for (const auto& l : c.layers) {
    attn.push_back(attention_part_cost(c, l, s, p));
    ffn.push_back(ffn_part_cost(c, l, s, p));
  }
  const bool engine_measured = p && p->engine_calibration(s);
  const bool tables = p && (s.engine == "native" || engine_measured);
  return combine(attn, ffn, fixed_cost(c, s, p), s,
                 engine_measured ? "profile+" + s.engine : tables ? "profile" : "roofline", p);
}

json CostEstimate::to_json() const {
  return {{"ttft_ms", ttft_ms},
          {"tpot_ms", tpot_ms},
          {"throughput_tokens_per_s", throughput_tokens_per_s},
          {"weight_bytes", weight_bytes},
          {"kv_cache_bytes", kv_cache_bytes},
          {"state_bytes", state_bytes},
          {"activation_bytes", activation_bytes},
          {"reserve_bytes", reserve_bytes},
          {"peak_memory_bytes", peak_memory_bytes},
          {"layers", {{"ttft_ms", layer_ttft_ms}, {"tpot_ms", layer_tpot_ms},
                      {"weight_bytes", layer_weight_bytes},
                      {"kv_cache_bytes", layer_kv_cache_bytes},
                      {"state_bytes", layer_state_bytes}}},
          {"fixed", {{"ttft_ms", fixed.ttft_ms}, {"tpot_ms", fixed.tpot_ms},
                     {"weight_bytes", fixed.weight_bytes},
                     {"activation_bytes", fixed.activation_bytes}}},
          {"source", source},
          {"residency", residency}};
}

std::vector<LimitSlack> limit_slack(const CostEstimate& e, const Limits& l) {
  if (l.has_relative())
    throw ConfigError(msg("check_limits", "the limits hold fractions of the teacher's cost: "
                                          "resolve them first (Limits::resolve with the "
                                          "teacher's estimate or measurement)"));
  std::vector<LimitSlack> out;
  auto max_limit = [&](const char* name, std::optional<double> lim, double v) {
    if (lim) out.push_back({name, *lim, v, (*lim - v) / *lim});
  };
  max_limit("ttft_ms", l.ttft_ms, e.ttft_ms);
  max_limit("tpot_ms", l.tpot_ms, e.tpot_ms);
  if (l.peak_memory_bytes)
    max_limit("peak_memory_bytes", double(*l.peak_memory_bytes), double(e.peak_memory_bytes));
  if (l.min_throughput_tokens_per_s) {
    double lim = *l.min_throughput_tokens_per_s;
    out.push_back({"min_throughput_tokens_per_s", lim, e.throughput_tokens_per_s,
                   (e.throughput_tokens_per_s - lim) / lim});
  }
  return out;
}

std::string check_limits(const CostEstimate& e, const Limits& l) {
  std::string out;
  for (const auto& s : limit_slack(e, l)) {
    if (s.holds()) continue;
    bool minimum = s.name == "min_throughput_tokens_per_s";
    std::string clause =
        fmt::format("{}: expected {} {}, found {} ({:.1f}% {})", s.name, minimum ? ">=" : "<=",
                    limit_value_text(s.name, s.limit), limit_value_text(s.name, s.value),
                    std::fabs(s.slack) * 100, minimum ? "under" : "over");
    out += (out.empty() ? "" : "; ") + clause;
  }
  return out;
}

}  // namespace ac
