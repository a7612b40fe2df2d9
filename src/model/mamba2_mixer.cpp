#include "model/mamba2_mixer.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "common/error.h"
#include "common/gemm.h"

namespace ac {

Mamba2State Mamba2State::zeros(const Mamba2Config& m, int64_t batch, const c10::Device& device) {
  const auto opt = at::TensorOptions().dtype(at::kFloat).device(device);
  return {at::zeros({batch, m.conv_dim(), m.conv_kernel - 1}, opt),
          at::zeros({batch, m.mamba_num_heads, m.mamba_head_dim, m.ssm_state_size}, opt)};
}

namespace {

void check_scan_shapes(const char* where, const at::Tensor& x, const at::Tensor& dt,
                       const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& state) {
  const bool ok = x.dim() == 4 && Bm.dim() == 4 && Cm.sizes() == Bm.sizes() && dt.dim() == 3 &&
                  state.dim() == 4 && Bm.size(2) > 0 && x.size(2) % Bm.size(2) == 0 &&
                  dt.size(0) == x.size(0) && dt.size(1) == x.size(1) && dt.size(2) == x.size(2) &&
                  Bm.size(0) == x.size(0) && Bm.size(1) == x.size(1);
  if (!ok)
    throw ConfigError(fmt::format("[{}] expected x [B, T, nh, P], dt [B, T, nh], B and C "
                                  "[B, T, Gm, N] with nh a multiple of Gm, state [B, nh, P, N]; "
                                  "found x {}, dt {}, B {}, C {}, state {}", where,
                                  x.sizes().vec(), dt.sizes().vec(), Bm.sizes().vec(),
                                  Cm.sizes().vec(), state.sizes().vec()));
}

// segment_sum of modeling_nemotron_h.py: x [..., Q] -> [..., Q, Q] with out[i][j] the sum of
// x over (j, i] for i >= j and -inf above the diagonal (exp of it: the decay from j to i).
at::Tensor segment_sum(const at::Tensor& x) {
  const int64_t Q = x.size(-1);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.push_back(Q);
  const auto opt = at::TensorOptions().dtype(at::kBool).device(x.device());
  at::Tensor s = x.unsqueeze(-1).expand(shape);  // [..., Q(i), Q(j)] = x[i]
  s = s.masked_fill(at::ones({Q, Q}, opt).tril(-1).logical_not(), 0.0).cumsum(-2);
  return s.masked_fill(at::ones({Q, Q}, opt).tril(0).logical_not(),
                       -std::numeric_limits<float>::infinity());
}

}  // namespace

at::Tensor ssd_scan(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                    const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                    at::Tensor& state) {
  check_scan_shapes("ssd_scan", x, dt, Bm, Cm, state);
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


at::Tensor ssd_chunk_scan(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                          const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                          at::Tensor& state, int64_t chunk_size) {
  check_scan_shapes("ssd_chunk_scan", x, dt, Bm, Cm, state);
  if (chunk_size < 1)
    throw ConfigError(fmt::format("[ssd_chunk_scan] chunk_size {} (expected >= 1)", chunk_size));
  const int64_t Bt = x.size(0), T = x.size(1), nh = x.size(2), P = x.size(3), Q = chunk_size;
  const int64_t pad = (Q - T % Q) % Q, c = (T + pad) / Q;
  const at::Tensor xf = x.to(at::kFloat), dtf = dt.to(at::kFloat);
  // Padded positions have no input and no decay (dt A = 0), so the final state is the last
  // real position's.
  auto chunks = [&](const at::Tensor& t) {  // [B, T, ...] -> [B, c, Q, ...]
    std::vector<int64_t> p(size_t(2 * (t.dim() - 1)), 0);
    p.back() = pad;  // constant_pad_nd lists the last dimension first: T is the last pair
    std::vector<int64_t> shape = {Bt, c, Q};
    for (int64_t d = 2; d < t.dim(); ++d) shape.push_back(t.size(d));
    return at::constant_pad_nd(t, p, 0).reshape(shape);
  };
  const int64_t per_group = nh / Bm.size(2);
  const at::Tensor Bh = chunks(Bm.to(at::kFloat).repeat_interleave(per_group, 2));  // [b,c,l,h,n]
  const at::Tensor Ch = chunks(Cm.to(at::kFloat).repeat_interleave(per_group, 2));
  const at::Tensor xd = chunks(xf * dtf.unsqueeze(-1));                             // [b,c,l,h,p]
  const at::Tensor Adt = chunks(A.to(at::kFloat) * dtf).permute({0, 3, 1, 2});      // [b,h,c,l]
  const at::Tensor A_cumsum = Adt.cumsum(-1);

  // 1. Within each chunk: y_l = sum_{s <= l} (C_l . B_s) decay(s -> l) dt_s x_s.
  const at::Tensor L = at::exp(segment_sum(Adt));                         // [b,h,c,l,s]
  const at::Tensor G = at::einsum("bclhn,bcshn->bclsh", {Ch, Bh});        // [b,c,l,s,h]
  const at::Tensor M = G * L.permute({0, 2, 3, 4, 1});
  const at::Tensor Y_diag = at::einsum("bclsh,bcshp->bclhp", {M, xd});    // [b,c,l,h,p]
  // 2. Each chunk's contribution to the state at its end.
  const at::Tensor decay_states = at::exp(A_cumsum.narrow(-1, Q - 1, 1) - A_cumsum);  // [b,h,c,l]
  const at::Tensor B_decay = Bh * decay_states.permute({0, 2, 3, 1}).unsqueeze(-1);
  at::Tensor states = at::einsum("bclhn,bclhp->bchpn", {B_decay, xd});    // [b,c,h,p,n]
  // 3. The states at the chunks' starts, from the initial state and every chunk before.
  states = at::cat({state.to(at::kFloat).unsqueeze(1), states}, 1);       // [b,c+1,h,p,n]
  const at::Tensor chunk_ends = at::constant_pad_nd(A_cumsum.select(-1, Q - 1), {1, 0}, 0);
  const at::Tensor decay_chunk = at::exp(segment_sum(chunk_ends)).transpose(1, 3);  // [b,z,c,h]
  const at::Tensor new_states = at::einsum("bzch,bzhpn->bchpn", {decay_chunk, states});
  state = new_states.select(1, c).contiguous();
  // 4. Each position's output from its chunk's start state.
  const at::Tensor Y_off =
      at::einsum("bclhn,bchpn->bclhp", {Ch, new_states.narrow(1, 0, c)}) *
      at::exp(A_cumsum).permute({0, 2, 3, 1}).unsqueeze(-1);
  const at::Tensor y = (Y_diag + Y_off).reshape({Bt, c * Q, nh, P}).narrow(1, 0, T);
  return y + xf * D.to(at::kFloat).view({1, 1, nh, 1});
}

at::Tensor mamba2_mixer(const at::Tensor& h, const Mamba2Config& m, const Mamba2Weights& w,
                        double eps, Mamba2State* state, const Mamba2Hooks* hooks) {
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
  const at::Tensor y = (T == 1 ? ssd_scan(x, dt, A, Bm, Cm, w.D, state->ssm)
                                : ssd_chunk_scan(x, dt, A, Bm, Cm, w.D, state->ssm, m.chunk_size))
                           .reshape({B, T, d_inner});

  // NemotronHRMSNormGated: the gate before the norm (norm_before_gate=False), one RMS per group.
  at::Tensor g = (y * at::silu(z)).reshape({B, T, Gm, d_inner / Gm});
  if (hooks && hooks->channels.defined()) {
    // A pruned mixer's groups hold only the kept channels: the mean square over those.
    const at::Tensor keep = hooks->channels.to(g.device()).reshape({Gm, d_inner / Gm});
    g = g * keep;
    g = g * at::rsqrt(g.pow(2).sum(-1, /*keepdim=*/true) / keep.sum(-1, /*keepdim=*/true) + eps);
  } else {
    g = g * at::rsqrt(g.pow(2).mean(-1, /*keepdim=*/true) + eps);
  }
  g = g.reshape({B, T, d_inner}) * w.norm;
  if (hooks && hooks->on_out_proj_input) hooks->on_out_proj_input(g);
  return ac::linear(g, w.out_proj, w.out_proj_bias);  // [B, T, D]
}

}  // namespace ac
