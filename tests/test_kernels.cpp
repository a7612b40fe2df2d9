// The fused kernels (model/kernels.h) against the ATen chains they replace, which float64
// tensors take: values in fp32 and gradients against float64 autograd. RMSNorm (dx, dw), RoPE
// into the heads' layout (dx), and the causal attention (dQ, dK summed over a group's query
// heads, dV), a NaN score, and bad shapes; each under every kernel ISA this CPU runs (scalar,
// AVX2, AVX-512: common/simd.h), with lengths that leave a tail of a vector.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include <limits>

#include "common/error.h"
#include "common/simd.h"
#include "model/kernels.h"
#include "model/llama.h"

namespace ac {
namespace {

// max |x - truth| / max |truth| (absolute where the truth is 0: one position's softmax has no
// gradient).
double rel_err(const at::Tensor& x, const at::Tensor& truth) {
  const at::Tensor t = truth.to(at::kDouble);
  return (x.to(at::kDouble) - t).abs().max().item<double>() /
         std::max(t.abs().max().item<double>(), 1e-12);
}

at::Tensor causal_mask(int64_t T) {
  at::Tensor pos = at::arange(T, at::kLong);
  return pos.unsqueeze(0) <= pos.unsqueeze(1);  // [T, S]: s <= t
}

TEST(Kernels, RmsNormValueAndGradientsMatchFloat64Autograd) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::Generator g = at::detail::createCPUGenerator(5);
    auto o = at::TensorOptions();
    // 288: vectors only; 44 = 2 x 16 + 12 = 5 x 8 + 4: vectors and a tail; 7, 1: a tail only.
    for (int64_t D : {288, 44, 7, 1}) {
      SCOPED_TRACE(testing::Message() << "D=" << D);
      const at::Tensor x0 = at::randn({3, 37, D}, g, o) * 3, w0 = at::randn({D}, g, o);
      const at::Tensor dy = at::randn({3, 37, D}, g, o);
      at::Tensor xd = x0.to(at::kDouble).requires_grad_(), wd = w0.to(at::kDouble).requires_grad_();
      at::Tensor yd = rms_norm(xd, wd, 1e-5);  // float64: the ATen chain
      (yd * dy.to(at::kDouble)).sum().backward();
      at::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
      at::Tensor y = rms_norm(x, w, 1e-5);
      ASSERT_EQ(y.sizes(), x0.sizes());
      EXPECT_LT(rel_err(y, yd.detach()), 1e-6);
      (y * dy).sum().backward();
      EXPECT_LT(rel_err(x.grad(), xd.grad()), 1e-5);
      EXPECT_LT(rel_err(w.grad(), wd.grad()), 1e-5);
      // HF's formula by hand on one row: x / sqrt(mean(x^2) + eps) * w.
      const at::Tensor row = x0[1][2].to(at::kDouble);
      const at::Tensor hand = row / (row.pow(2).mean() + 1e-5).sqrt() * w0.to(at::kDouble);
      EXPECT_LT(rel_err(y.detach()[1][2], hand), 1e-6);
      c10::InferenceMode guard;
      EXPECT_LT(rel_err(rms_norm(x0, w0, 1e-5), yd.detach()), 1e-6);
    }
    // A frozen weight gets no gradient; bad shapes are refused.
    at::Tensor x = at::randn({4, 6}).requires_grad_(), w = at::randn({6});
    rms_norm(x, w, 1e-6).sum().backward();
    EXPECT_TRUE(x.grad().defined());
    EXPECT_FALSE(w.grad().defined());
    EXPECT_THROW(rms_norm(x, at::randn({5}), 1e-6), ConfigError);
  }
}

TEST(Kernels, RopeIntoTheHeadsLayoutMatchesFloat64Autograd) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::Generator g = at::detail::createCPUGenerator(6);
    auto o = at::TensorOptions();
    // Half a head of 5 (a tail only) and of 21 (16 + 5, 2 x 8 + 5: vectors and a tail).
    for (const int64_t Hd : {10, 42}) {
    SCOPED_TRACE(testing::Message() << "Hd=" << Hd);
    const int64_t B = 2, T = 13, Hh = 3;
    ModelConfig c;
    c.rope_theta = 10000;
    auto [cos, sin] = rope_tables(c, Hd, 4, T);  // positions 4..16
    const at::Tensor x0 = at::randn({B, T, Hh, Hd}, g, o), dy = at::randn({B, Hh, T, Hd}, g, o);
    at::Tensor xd = x0.to(at::kDouble).requires_grad_();
    at::Tensor yd = rope_to_heads(xd, cos.to(at::kDouble), sin.to(at::kDouble));
    (yd * dy.to(at::kDouble)).sum().backward();
    // By hand on one vector: x[b=1, t=5, h=2] rotated by position 4 + 5 = 9.
    const at::Tensor v = x0[1][5][2].to(at::kDouble);
    at::Tensor hand = at::empty({Hd}, at::kDouble);
    for (int64_t i = 0; i < Hd / 2; ++i) {
      const double th = 9.0 / std::pow(10000.0, 2.0 * double(i) / double(Hd));
      const double a = v[i].item<double>(), b = v[i + Hd / 2].item<double>();
      hand[i] = a * std::cos(th) - b * std::sin(th);
      hand[i + Hd / 2] = b * std::cos(th) + a * std::sin(th);
    }
    EXPECT_LT(rel_err(yd.detach()[1][2][5], hand), 1e-6);

    at::Tensor x = x0.clone().requires_grad_();
    at::Tensor y = rope_to_heads(x, cos, sin);
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{B, Hh, T, Hd}));
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_LT(rel_err(y, yd.detach()), 1e-6);
    (y * dy).sum().backward();
    EXPECT_LT(rel_err(x.grad(), xd.grad()), 1e-6);
    {
      c10::InferenceMode guard;
      EXPECT_LT(rel_err(rope_to_heads(x0, cos, sin), yd.detach()), 1e-6);
    }
    EXPECT_THROW(rope_to_heads(x0.narrow(3, 0, 9), cos.narrow(1, 0, 9), sin.narrow(1, 0, 9)),
                 ConfigError);  // odd head_dim
    EXPECT_THROW(rope_to_heads(x0, cos.narrow(0, 0, 5), sin.narrow(0, 0, 5)), ConfigError);
    }
  }
}

TEST(Kernels, SwigluValueAndGradientsMatchFloat64Autograd) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::Generator g = at::detail::createCPUGenerator(8);
    auto o = at::TensorOptions();
    // 2 x 7 x 37 elements: vectors of 16 and a tail; gates out to +-100 (the clamped exponent).
    at::Tensor g0 = at::randn({2, 7, 37}, g, o) * 4, u0 = at::randn({2, 7, 37}, g, o);
    g0[0][0][0] = 100.0f;
    g0[0][0][1] = -100.0f;
    g0[1][6][36] = -90.0f;
    const at::Tensor dy = at::randn({2, 7, 37}, g, o);
    at::Tensor gd = g0.to(at::kDouble).requires_grad_(), ud = u0.to(at::kDouble).requires_grad_();
    at::Tensor yd = swiglu(gd, ud);  // float64: silu(g) * u in ATen
    (yd * dy.to(at::kDouble)).sum().backward();
    at::Tensor gt = g0.clone().requires_grad_(), ut = u0.clone().requires_grad_();
    at::Tensor y = swiglu(gt, ut);
    EXPECT_LT(rel_err(y, yd.detach()), 1e-6);
    (y * dy).sum().backward();
    EXPECT_LT(rel_err(gt.grad(), gd.grad()), 1e-6);
    EXPECT_LT(rel_err(ut.grad(), ud.grad()), 1e-6);
    // By hand: silu(1) * 2 = 2 / (1 + e^-1).
    EXPECT_NEAR(swiglu(at::ones({1}), at::full({1}, 2.0f)).item<float>(), 2.0 / (1.0 + std::exp(-1.0)),
                1e-6);
    {
      c10::InferenceMode guard;
      EXPECT_LT(rel_err(swiglu(g0, u0), yd.detach()), 1e-6);
    }
    at::Tensor gn = g0.clone();
    gn[1][2][20] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(swiglu(gn, u0)[1][2][20].isnan().item<bool>());
    EXPECT_THROW(swiglu(g0, u0.narrow(2, 0, 36)), ConfigError);
  }
}

struct Case {
  int64_t B, G, R, T, Hd;
};

TEST(CausalAttention, ValueAndGradientsMatchTheMaskedAttentionInFloat64) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    // GQA (R = 3 query heads per KV group), rows that are not a multiple of 16 lanes, one
    // position, and multi-head attention (R = 1).
    for (const Case& c : {Case{2, 2, 3, 37, 8}, Case{1, 1, 1, 1, 4}, Case{3, 4, 1, 20, 16}}) {
      SCOPED_TRACE(testing::Message() << "B=" << c.B << " G=" << c.G << " R=" << c.R
                                      << " T=" << c.T << " Hd=" << c.Hd);
      at::Generator g = at::detail::createCPUGenerator(11);
      auto o = at::TensorOptions();
      // Scores of a few units: peaked rows, as trained attention has.
      const at::Tensor q0 = 2 * at::randn({c.B, c.G, c.R, c.T, c.Hd}, g, o);
      const at::Tensor k0 = 2 * at::randn({c.B, c.G, c.T, c.Hd}, g, o);
      const at::Tensor v0 = at::randn({c.B, c.G, c.T, c.Hd}, g, o);
      const at::Tensor dout = at::randn({c.B, c.G, c.R, c.T, c.Hd}, g, o);

      // Truth: the ATen path (float64 tensors take it) with float64 autograd.
      at::Tensor qd = q0.to(at::kDouble).requires_grad_(), kd = k0.to(at::kDouble).requires_grad_(),
                 vd = v0.to(at::kDouble).requires_grad_();
      at::Tensor od = causal_attention(qd, kd, vd);
      (od * dout.to(at::kDouble)).sum().backward();
      // The ATen path is the masked grouped attention.
      EXPECT_LT(rel_err(od.detach(), grouped_attention(q0, k0, v0, causal_mask(c.T))), 1e-5);

      at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
                 v = v0.clone().requires_grad_();
      at::Tensor out = causal_attention(q, k, v);
      ASSERT_EQ(out.sizes(), q0.sizes());
      EXPECT_LT(rel_err(out, od.detach()), 1e-5);
      (out * dout).sum().backward();
      EXPECT_LT(rel_err(q.grad(), qd.grad()), 1e-5);
      EXPECT_LT(rel_err(k.grad(), kd.grad()), 1e-5);
      EXPECT_LT(rel_err(v.grad(), vd.grad()), 1e-5);

      // Without autograd, the same value; transposed (non-contiguous) inputs are fine.
      c10::InferenceMode guard;
      EXPECT_LT(rel_err(causal_attention(q0, k0, v0), od.detach()), 1e-5);
      const at::Tensor kt = k0.transpose(2, 3).contiguous().transpose(2, 3);
      EXPECT_LT(rel_err(causal_attention(q0, kt, v0), od.detach()), 1e-5);
    }
  }
}

TEST(CausalAttention, ANanScoreIsNotHiddenAndBadShapesAreRefused) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::Tensor q = at::randn({1, 1, 2, 9, 4}), k = at::randn({1, 1, 9, 4}), v = at::randn({1, 1, 9, 4});
    q[0][0][1][5][2] = std::numeric_limits<float>::quiet_NaN();  // head 1, query 5
    at::Tensor o = causal_attention(q, k, v);
    EXPECT_TRUE(o[0][0][1][5].isnan().all().item<bool>());
    EXPECT_FALSE(o[0][0][0].isnan().any().item<bool>());  // the other head is untouched
    EXPECT_FALSE(o[0][0][1][4].isnan().any().item<bool>());

    EXPECT_THROW(causal_attention(q.squeeze(0), k, v), ConfigError);
    EXPECT_THROW(causal_attention(q, k.narrow(2, 0, 8), v.narrow(2, 0, 8)), ConfigError);
    EXPECT_THROW(causal_attention(q, k, v.narrow(3, 0, 2)), ConfigError);
  }
}

}  // namespace
}  // namespace ac
