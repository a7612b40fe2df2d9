#include "hardware/moe_cost.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "hardware/roofline.h"

namespace ac {

double expected_distinct_experts(int64_t E, int64_t k, double tokens) {
  if (E < 1 || k < 1 || k > E || !(tokens >= 0))
    throw ConfigError(msg("expected_distinct_experts", "expected 1 <= k <= E and tokens >= 0, "
                                                       "found k {}, E {}, tokens {}", k, E, tokens));
  return double(E) * (1.0 - std::pow(1.0 - double(k) / double(E), tokens));
}

namespace {

// Rows of one prefill pass (the engine's chunk, or the whole batch's prompt).
double pass_rows(const Scenario& s) {
  const double M = double(s.workload.batch_size * s.workload.prompt_tokens);
  const double chunk = s.engine_spec.prefill_chunk_tokens.value;
  return chunk > 0 ? std::min(M, chunk) : M;
}

// The routed experts of one phase (see the header), per GPU.
double experts_ms(const Roofline& rf, const Phase& ph, const ModelConfig& c, const MoeConfig& m,
                  double rows_per_pass) {
  const double M = double(ph.M), k = double(m.num_experts_per_tok);
  const double Din = double(m.expert_input_width(c.hidden_size)), Fe = double(m.moe_intermediate_size);
  const double expert_bytes = double(m.expert_parameters(c.hidden_size)) * rf.weight_bytes();
  const double passes = std::ceil(M / rows_per_pass);
  const double touched = expected_distinct_experts(m.num_experts, m.num_experts_per_tok, rows_per_pass);
  const double flops = 2.0 * M * k * double(m.matrices()) * Din * Fe / rf.tp();
  const double bytes = (passes * touched * expert_bytes +
                        M * k * (2.0 * Din + double(m.matrices()) * Fe) * rf.act_bytes()) / rf.tp();
  return rf.op_ms(ph, flops, bytes, 4);
}

double moe_ms(const Roofline& rf, const Phase& ph, const ModelConfig& c, const MoeConfig& m,
              double rows_per_pass, bool fuse_add_norm) {
  const double M = double(ph.M), D = double(c.hidden_size), E = double(m.num_experts);
  const double Lt = double(m.moe_latent_size), Fs = double(m.shared_expert_intermediate_size);
  // The router is replicated on every GPU (vLLM ReplicatedLinear): not divided by tp.
  double t = rf.elementwise_ms(ph, M * D) +
             rf.op_ms(ph, 2.0 * M * E * D, (E * D * rf.weight_bytes() + M * (D + E) * rf.act_bytes()), 1) +
             rf.elementwise_ms(ph, M * E);
  if (Lt > 0) t += rf.gemm_ms(ph, M, Lt, D) + rf.gemm_ms(ph, M, D, Lt);
  t += experts_ms(rf, ph, c, m, rows_per_pass);
  if (Fs > 0)
    t += rf.gemm_ms(ph, M, (m.gated ? 2 : 1) * Fs, D) + rf.elementwise_ms(ph, M * Fs / rf.tp(), 1) +
         rf.gemm_ms(ph, M, D, Fs) + rf.elementwise_ms(ph, M * D, 2);
  if (!fuse_add_norm) t += rf.elementwise_ms(ph, M * D, 2);
  return t;
}

int64_t moe_activation_bytes(const ModelConfig& c, const MoeConfig& m, double rows,
                             const Roofline& rf) {
  const double D = double(c.hidden_size), k = double(m.num_experts_per_tok), tp = rf.tp();
  const double Din = double(m.expert_input_width(c.hidden_size));
  const double Fe = double(m.moe_intermediate_size), Fs = double(m.shared_expert_intermediate_size);
  const double mats = double(m.matrices());
  const double values = 2 * rows * D + rows * double(m.moe_latent_size) +
                        rows * k * (2 * Din + mats * Fe) / tp + rows * mats * Fs / tp;
  return int64_t(rf.act_bytes() * values + 4.0 * rows * double(m.num_experts));
}

}  // namespace

PartCost moe_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                       const Profile* p) {
  AC_CHECK(l.moe.has_value(), "moe_part_cost on a layer without an MoE");
  require_roofline("MoE", s, p);
  const Roofline rf(s, p);
  const MoeConfig& m = *l.moe;
  const bool add = s.engine_spec.fuses("add_rmsnorm");
  const double rows = pass_rows(s);
  PartCost r;
  r.ttft_ms = moe_ms(rf, prefill_phase(s.workload), c, m, rows, add);
  // A decode step is one pass over the batch's B rows.
  r.tpot_ms = r.tpot_warm_ms =
      moe_ms(rf, decode_phase(s.workload), c, m, double(s.workload.batch_size), add);
  const int64_t params = c.hidden_size + m.num_parameters(c.hidden_size);
  r.weight_bytes = int64_t(double(params) * rf.weight_bytes() / rf.tp());
  r.activation_bytes = moe_activation_bytes(c, m, rows, rf);
  return r;
}

}  // namespace ac
