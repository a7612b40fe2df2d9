#include "hardware/mamba2_cost.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "hardware/roofline.h"

namespace ac {

static double state_dtype_bytes(const std::string& dtype) {
  // config.json spells torch dtypes; the scenario's names are the project's.
  if (dtype == "float32") return 4;
  if (dtype == "bfloat16" || dtype == "float16") return 2;
  return dtype_bytes(dtype, "mamba2_state_bytes");
}

int64_t mamba2_state_bytes_per_sequence(const Mamba2Config& m, double conv_bytes) {
  return int64_t(double(m.conv_state_elements()) * conv_bytes +
                 double(m.ssm_state_elements()) * state_dtype_bytes(m.ssm_state_dtype));
}

namespace {

// The SSM's time in one phase (see the header), per GPU.
double ssm_ms(const Roofline& rf, const Phase& ph, const Mamba2Config& m, double ssm_bytes) {
  const double nh = double(m.mamba_num_heads) / rf.tp(), P = double(m.mamba_head_dim),
               N = double(m.ssm_state_size), Gm = double(m.n_groups) / rf.tp();
  const double B = double(ph.B), state = nh * P * N;
  const double io = double(ph.M) * (2 * nh * P + 2 * Gm * N + nh) * rf.act_bytes();
  if (!ph.prefill)
    return rf.op_ms(ph, 5.0 * B * state, io + 2.0 * B * state * ssm_bytes, 1);
  const double T = double(ph.T_or_C), Q = std::min(double(m.chunk_size), T);
  const double flops = 2.0 * B * T * (Q * N * Gm + Q * P * nh + 2.0 * N * P * nh);
  const double chunks = B * std::ceil(T / Q);
  const double bytes = io + 2.0 * chunks * state * 4.0 + B * state * ssm_bytes;
  return rf.op_ms(ph, flops, bytes, 5);
}

double mixer_ms(const Roofline& rf, const Phase& ph, const ModelConfig& c, const Mamba2Config& m,
                bool fuse_add_norm) {
  const double M = double(ph.M), D = double(c.hidden_size), tp = rf.tp();
  const double conv_dim = double(m.conv_dim()) / tp, d_inner = double(m.d_inner()) / tp;
  double t = rf.elementwise_ms(ph, M * D) + rf.gemm_ms(ph, M, double(m.in_proj_width()), D);
  double conv_bytes = 2.0 * M * conv_dim * rf.act_bytes();
  if (!ph.prefill) conv_bytes += 2.0 * double(ph.B) * double(m.conv_kernel - 1) * conv_dim * rf.act_bytes();
  t += rf.op_ms(ph, 2.0 * M * conv_dim * double(m.conv_kernel), conv_bytes, 1);
  t += ssm_ms(rf, ph, m, state_dtype_bytes(m.ssm_state_dtype));
  t += rf.elementwise_ms(ph, M * d_inner, 2) + rf.gemm_ms(ph, M, D, double(m.d_inner()));
  if (!fuse_add_norm) t += rf.elementwise_ms(ph, M * D, 2);
  return t;
}

int64_t mixer_activation_bytes(const ModelConfig& c, const Mamba2Config& m, const Scenario& s,
                               const Roofline& rf) {
  const Workload& w = s.workload;
  const double chunk = s.engine_spec.prefill_chunk_tokens.value;
  const double rows = chunk > 0 ? std::min(double(w.batch_size * w.prompt_tokens), chunk)
                                : double(w.batch_size * w.prompt_tokens);
  const double tp = rf.tp(), D = double(c.hidden_size);
  const double widths = double(m.in_proj_width() + m.conv_dim() + m.d_inner()) / tp;
  const double states = std::ceil(rows / double(m.chunk_size)) * double(m.ssm_state_elements()) / tp;
  return int64_t(rf.act_bytes() * (2 * rows * D + rows * widths) + 4.0 * states);
}

}  // namespace

PartCost mamba2_part_cost(const ModelConfig& c, const LayerConfig& l, const Scenario& s,
                          const Profile* p) {
  AC_CHECK(l.mamba.has_value(), "mamba2_part_cost on a layer without a Mamba-2 mixer");
  require_roofline("Mamba-2", s, p);
  const Roofline rf(s, p);
  const Mamba2Config& m = *l.mamba;
  const bool add = s.engine_spec.fuses("add_rmsnorm");
  PartCost r;
  r.ttft_ms = mixer_ms(rf, prefill_phase(s.workload), c, m, add);
  r.tpot_ms = r.tpot_warm_ms = mixer_ms(rf, decode_phase(s.workload), c, m, add);
  const int64_t params = c.hidden_size + m.num_parameters(c.hidden_size);
  r.weight_bytes = int64_t(double(params) * rf.weight_bytes() / rf.tp());
  r.state_bytes = int64_t(double(s.workload.batch_size) *
                          double(mamba2_state_bytes_per_sequence(m, rf.act_bytes())) / rf.tp());
  r.activation_bytes = mixer_activation_bytes(c, m, s, rf);
  return r;
}

}  // namespace ac
