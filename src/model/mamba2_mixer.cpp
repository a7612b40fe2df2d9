#include "model/mamba2_mixer.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/gemm.h"

namespace ac {

Mamba2State Mamba2State::zeros(const Mamba2Config& m, int64_t batch, const c10::Device& device) {
  const auto opt = at::TensorOptions().dtype(at::kFloat).device(device);
  return {at::zeros({batch, m.conv_dim(), m.conv_kernel - 1}, opt),
          at::zeros({batch, m.mamba_num_heads, m.mamba_head_dim, m.ssm_state_size}, opt)};
}

at::Tensor ssd_scan(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                    const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                    at::Tensor& state) {
  if (x.dim() != 4 || Bm.dim() != 4 || Cm.sizes() != Bm.sizes() || dt.dim() != 3 ||
      x.size(2) % Bm.size(2) != 0 || state.dim() != 4)
    throw ConfigError(fmt::format("[ssd_scan] expected x [B, T, nh, P], dt [B, T, nh], B and C "
                                  "[B, T, Gm, N] with nh a multiple of Gm, state [B, nh, P, N]; "
                                  "found x {}, dt {}, B {}, C {}, state {}", x.sizes().vec(),
                                  dt.sizes().vec(), Bm.sizes().vec(), Cm.sizes().vec(),
                                  state.sizes().vec()));
  const int64_t T = x.size(1), nh = x.size(2), per_group = nh / Bm.size(2);
  // Each group's B and C serve its nh / Gm heads (mamba2_chunk_scan: repeat_interleave).
  const at::Tensor Bh = Bm.to(at::kFloat).repeat_interleave(per_group, 2);  // [B, T, nh, N]
  const at::Tensor Ch = Cm.to(at::kFloat).repeat_interleave(per_group, 2);
  const at::Tensor dA = at::exp(dt.to(at::kFloat) * A.to(at::kFloat));    // [B, T, nh]
  const at::Tensor xf = x.to(at::kFloat), dtf = dt.to(at::kFloat);
  at::Tensor s = state.to(at::kFloat);
  std::vector<at::Tensor> ys;
  ys.reserve(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    // As mamba2_selective_state_update: dB = dt B, dBx = dB x, state = state dA + dBx.
    const at::Tensor dB = dtf.select(1, t).unsqueeze(-1) * Bh.select(1, t);        // [B, nh, N]
    const at::Tensor dBx = dB.unsqueeze(2) * xf.select(1, t).unsqueeze(-1);         // [B, nh, P, N]
    s = s * dA.select(1, t).unsqueeze(-1).unsqueeze(-1) + dBx;
    ys.push_back(at::matmul(s, Ch.select(1, t).unsqueeze(-1)).squeeze(-1));         // [B, nh, P]
  }
  state = s;
  at::Tensor y = at::stack(ys, 1);                                                 // [B, T, nh, P]
  return y + xf * D.to(at::kFloat).view({1, 1, nh, 1});
}

at::Tensor mamba2_mixer(const at::Tensor& h, const Mamba2Config& m, const Mamba2Weights& w,
                        double eps, Mamba2State* state) {
  const int64_t B = h.size(0), T = h.size(1), nh = m.mamba_num_heads, P = m.mamba_head_dim,
                N = m.ssm_state_size, Gm = m.n_groups, d_inner = m.d_inner(),
                conv_dim = m.conv_dim(), Kc = m.conv_kernel;
  const at::Tensor proj = ac::linear(h, w.in_proj, w.in_proj_bias);  // [B, T, d_inner+conv_dim+nh]
  const at::Tensor z = proj.narrow(-1, 0, d_inner);
  const at::Tensor xBC = proj.narrow(-1, d_inner, conv_dim).transpose(1, 2);  // [B, conv_dim, T]
  const at::Tensor dt_raw = proj.narrow(-1, d_inner + conv_dim, nh);          // [B, T, nh]

  // The causal depthwise conv: the Kc - 1 inputs before the first token (the state, or zeros as
  // causal_conv1d_fn's left padding) then this forward's; the state keeps the last Kc - 1.
  Mamba2State fresh;
  if (!state) {
    fresh = Mamba2State::zeros(m, B, h.device());
    state = &fresh;
  }
  const at::Tensor inputs = at::cat({state->conv, xBC}, 2);  // [B, conv_dim, Kc - 1 + T]
  state->conv = inputs.narrow(2, T, Kc - 1).contiguous();
  const at::Tensor conv = at::silu(at::conv1d(inputs, w.conv1d, w.conv1d_bias,
                                              /*stride=*/at::IntArrayRef{1},
                                              /*padding=*/at::IntArrayRef{0},
                                              /*dilation=*/at::IntArrayRef{1},
                                              /*groups=*/conv_dim))
                              .transpose(1, 2);  // [B, T, conv_dim]
  const at::Tensor x = conv.narrow(-1, 0, d_inner).reshape({B, T, nh, P});
  const at::Tensor Bm = conv.narrow(-1, d_inner, Gm * N).reshape({B, T, Gm, N});
  const at::Tensor Cm = conv.narrow(-1, d_inner + Gm * N, Gm * N).reshape({B, T, Gm, N});

  // softplus with torch's default threshold 20 (F.softplus); time_step_limit is (0, inf), a
  // no-op after softplus (the loader refuses other limits).
  const at::Tensor dt = at::softplus(dt_raw + w.dt_bias, /*beta=*/1, /*threshold=*/20);
  const at::Tensor A = -at::exp(w.A_log.to(at::kFloat));
  const at::Tensor y = ssd_scan(x, dt, A, Bm, Cm, w.D, state->ssm).reshape({B, T, d_inner});

  // NemotronHRMSNormGated: the gate before the norm (norm_before_gate=False), one RMS per group.
  at::Tensor g = (y * at::silu(z)).reshape({B, T, Gm, d_inner / Gm});
  g = g * at::rsqrt(g.pow(2).mean(-1, /*keepdim=*/true) + eps);
  g = g.reshape({B, T, d_inner}) * w.norm;
  return ac::linear(g, w.out_proj, w.out_proj_bias);  // [B, T, D]
}

}  // namespace ac
