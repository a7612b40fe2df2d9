// The fused, chunked KL (distill/fused_kl.h) against the unfused reference (distill/loss.h
// distill_loss_reference), a float64 autograd truth, and finite differences; masking, -inf,
// temperature != 1, row-strided (shared-vocabulary) inputs, block sizes, inference tensors;
// under every kernel ISA this CPU runs (common/simd.h: the AVX-512 and AVX2 row kernels, and
// scalar, which takes the ATen path).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <fmt/format.h>

#include <cstdlib>
#include <functional>
#include <limits>

#include "common/error.h"
#include "common/simd.h"
#include "distill/fused_kl.h"
#include "distill/loss.h"

namespace ac {
namespace {

// tau^2 * mean over kept rows of KL(softmax(t/tau) || softmax(s/tau)), float64 autograd.
at::Tensor kl_float64(const at::Tensor& t, const at::Tensor& s, const at::Tensor& keep,
                      double tau) {
  at::Tensor lt = at::log_softmax(t.to(at::kDouble) / tau, -1);
  at::Tensor ls = at::log_softmax(s / tau, -1);
  at::Tensor per = (lt.exp() * (lt - ls)).sum(-1);  // [B, T]
  at::Tensor k = keep.to(at::kDouble);
  return (per * k).sum() / k.sum().clamp_min(1) * (tau * tau);
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

TEST(FusedKl, MatchesUnfusedReferenceValueAndGradient) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::manual_seed(17);
    const int64_t B = 3, T = 7, V = 257;  // odd sizes: rows do not divide into blocks evenly
    at::Tensor t = at::randn({B, T, V}) * 3;
    at::Tensor mask = at::rand({B, T}) > 0.25;
    for (double tau : {1.0, 2.5, 0.7}) {
      for (int64_t rows : {0, 1, 3, 64}) {
        at::Tensor s1 = (at::randn({B, T, V}) * 2).requires_grad_(true);
        at::Tensor s2 = s1.detach().clone().requires_grad_(true);
        at::Tensor fused = fused_kl_loss(t, s1, mask, tau, rows);
        at::Tensor ref = distill_loss_reference(t, s2, {}, mask, tau, 0.0).loss;
        EXPECT_LT(rel(fused.item<double>(), ref.item<double>()), 1e-6)
            << "tau " << tau << " rows " << rows << ": " << fused.item<double>() << " vs "
            << ref.item<double>();
        (fused * 0.5).backward();  // a grad_output != 1 goes through the scaled branch
        (ref * 0.5).backward();
        double diff = (s1.grad() - s2.grad()).abs().max().item<double>();
        double scale = s2.grad().abs().max().item<double>();
        EXPECT_LT(diff, 1e-6 * std::max(scale, 1.0) + 1e-9)
            << "largest gradient difference " << diff << ", tau " << tau << " rows " << rows;
      }
    }
  }
}

// The AVX-512 and AVX2 row kernels (libmvec's expf) and the ATen row kernel against float64 on
// the same inputs: a stories15M-sized vocabulary and an odd one (masked tail lanes), tau 1 and 2. (Rows
// with -inf logits, which the fast kernel hands to the ATen path: MaskedPositions... below.)
TEST(FusedKl, VectorKernelIsAsCloseToFloat64AsTheAtenKernel) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    if (!std::getenv("AC_FUSED_KL")) {  // never silently on the slow path here
      EXPECT_EQ(fused_kl_kernel_name(), isa == CpuIsa::scalar ? "aten" : isa_name(isa));
    }
    at::manual_seed(23);
    for (int64_t V : {32000, 1003}) {
      at::Tensor t = at::randn({2, 5, V}) * 4;
      at::Tensor s0 = at::randn({2, 5, V}) * 3;
      at::Tensor keep = at::rand({2, 5}) > 0.2;
      for (double tau : {1.0, 2.0}) {
        at::Tensor s1 = s0.clone().requires_grad_(true), s2 = s0.clone().requires_grad_(true);
        at::Tensor fast = fused_kl_loss(t, s1, keep, tau);
        at::Tensor aten = fused_kl_loss(t, s2, keep, tau, 0, FusedKlKernel::aten);
        at::Tensor s64 = s0.to(at::kDouble).requires_grad_(true);
        at::Tensor truth = kl_float64(t, s64, keep, tau);
        // The fast kernel is at least as close to float64 as ATen's, and both are close.
        const double e_fast = rel(fast.item<double>(), truth.item<double>()),
                     e_aten = rel(aten.item<double>(), truth.item<double>());
        EXPECT_LT(e_fast, std::max(2e-6, 1.5 * e_aten))
            << "V " << V << " tau " << tau << ": fast " << fast.item<double>() << ", ATen "
            << aten.item<double>() << ", float64 " << truth.item<double>();
        fast.backward();
        aten.backward();
        truth.backward();
        ASSERT_TRUE(s1.grad().isfinite().all().item<bool>());
        const double scale = s64.grad().abs().max().item<double>();
        const double g_fast = (s1.grad().to(at::kDouble) - s64.grad()).abs().max().item<double>(),
                     g_aten = (s2.grad().to(at::kDouble) - s64.grad()).abs().max().item<double>();
        EXPECT_LT(g_fast, std::max(1e-6 * scale, 1.5 * g_aten))
            << "largest gradient error: fast " << g_fast << ", ATen " << g_aten << ", scale "
            << scale << ", V " << V << " tau " << tau;
        EXPECT_LT(g_fast, 1e-5 * scale)
            << "V " << V << " tau " << tau;
      }
    }
  }
}

TEST(FusedKl, GradientMatchesFloat64AutogradAndFiniteDifferences) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::manual_seed(5);
    const int64_t B = 2, T = 3, V = 5;
    at::Tensor t = at::randn({B, T, V}) * 2;
    at::Tensor keep = at::tensor({1, 0, 1, 1, 1, 0}, at::kInt).to(at::kBool).view({B, T});
    const double tau = 1.7;
    at::Tensor s = at::randn({B, T, V}).requires_grad_(true);
    at::Tensor loss = fused_kl_loss(t, s, keep, tau);
    loss.backward();
    at::Tensor s64 = s.detach().to(at::kDouble).requires_grad_(true);
    at::Tensor truth = kl_float64(t, s64, keep, tau);
    truth.backward();
    EXPECT_NEAR(loss.item<double>(), truth.item<double>(), 1e-6 * truth.item<double>());
    double gdiff = (s.grad().to(at::kDouble) - s64.grad()).abs().max().item<double>();
    EXPECT_LT(gdiff, 1e-7) << "largest difference to float64 autograd";
    // Central differences of the fused loss itself (fp32, step 1e-2: error ~1e-4 relative).
    at::NoGradGuard ng;
    at::Tensor flat = s.detach().clone().view({-1});
    double worst = 0;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const float h = 1e-2f, x = flat[i].item<float>();
      flat[i] = x + h;
      double up = fused_kl_loss(t, flat.view({B, T, V}), keep, tau).item<double>();
      flat[i] = x - h;
      double down = fused_kl_loss(t, flat.view({B, T, V}), keep, tau).item<double>();
      flat[i] = x;
      double fd = (up - down) / (2 * h), g = s.grad().view({-1})[i].item<double>();
      worst = std::max(worst, std::abs(fd - g));
    }
    EXPECT_LT(worst, 2e-4) << "largest |finite difference - gradient|";
  }
}

TEST(FusedKl, MaskedPositionsContributeNothingAndStayFinite) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    at::manual_seed(8);
    at::Tensor t = at::randn({1, 4, 9});
    at::Tensor s0 = at::randn({1, 4, 9});
    // Garbage at the masked positions 1 and 3: all -inf teacher, NaN / +inf student.
    t[0][1].fill_(-inf);
    s0[0][1].fill_(nan);
    s0[0][3][2] = inf;
    at::Tensor keep = at::tensor({1, 0, 1, 0}, at::kInt).to(at::kBool).view({1, 4});
    at::Tensor s = s0.clone().requires_grad_(true);
    at::Tensor loss = fused_kl_loss(t, s, keep, 2.0);
    loss.backward();
    ASSERT_TRUE(std::isfinite(loss.item<double>()));
    ASSERT_TRUE(s.grad().isfinite().all().item<bool>());
    EXPECT_EQ(s.grad()[0][1].abs().max().item<float>(), 0.f);
    EXPECT_EQ(s.grad()[0][3].abs().max().item<float>(), 0.f);
    at::Tensor idx = at::tensor({0, 2}, at::kLong);
    at::Tensor sub = fused_kl_loss(t.index_select(1, idx), s0.index_select(1, idx), {}, 2.0);
    EXPECT_NEAR(loss.item<double>(), sub.item<double>(), 1e-6);
    // Every position masked: loss 0, gradient 0.
    at::Tensor none = at::zeros({1, 4}, at::kBool);
    at::Tensor s2 = s0.clone().requires_grad_(true);
    at::Tensor zero = fused_kl_loss(t, s2, none, 1.0);
    zero.backward();
    EXPECT_EQ(zero.item<float>(), 0.f);
    EXPECT_EQ(s2.grad().abs().max().item<float>(), 0.f);
    // A teacher -inf logit (p = 0 there) at a kept position: finite, as the reference.
    at::Tensor t3 = at::randn({1, 2, 6});
    t3[0][0][4] = -inf;
    at::Tensor s3 = at::randn({1, 2, 6});
    EXPECT_NEAR(fused_kl_loss(t3, s3, {}, 1.0).item<double>(),
                distill_loss_reference(t3, s3, {}, {}, 1.0, 0.0).loss.item<double>(), 1e-6);
  }
}

TEST(FusedKl, StridedInputsThreadsAndInferenceTensors) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::manual_seed(9);
    // Shared-vocabulary narrowing gives row-strided [B, T, V'] views (distill.cpp).
    at::Tensor t_full = at::randn({2, 6, 40}) * 2, s_full = at::randn({2, 6, 40});
    at::Tensor t = t_full.narrow(-1, 0, 33);
    at::Tensor s = s_full.clone().requires_grad_(true);
    at::Tensor ref_s = s_full.clone().requires_grad_(true);
    int saved = at::get_num_threads();
    at::Tensor first;
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      at::Tensor teacher_inference;
      {
        c10::InferenceMode im;  // the trainer's teacher logits are inference tensors
        teacher_inference = t_full.clone().narrow(-1, 0, 33);
      }
      at::Tensor v = fused_kl_loss(teacher_inference, s.narrow(-1, 0, 33), {}, 1.3, 2);
      if (!first.defined()) first = v.detach();
      EXPECT_EQ(v.item<float>(), first.item<float>()) << "threads " << threads;
      v.backward();
    }
    at::set_num_threads(saved);
    at::Tensor ref = distill_loss_reference(t, ref_s.narrow(-1, 0, 33), {}, {}, 1.3, 0.0).loss;
    EXPECT_LT(rel(first.item<double>(), ref.item<double>()), 1e-6);
    (ref * 2).backward();  // two backward passes above, one here with weight 2
    EXPECT_LT((s.grad() - ref_s.grad()).abs().max().item<double>(), 1e-6);
    EXPECT_EQ(s.grad().narrow(-1, 33, 7).abs().max().item<float>(), 0.f);
  }
}

TEST(FusedKl, DistillLossUsesItAndKeepsCe) {
  at::manual_seed(4);
  at::Tensor t = at::randn({2, 5, 11}), s = at::randn({2, 5, 11});
  at::Tensor tokens = at::randint(0, 11, {2, 5}, at::kLong);
  at::Tensor mask = at::rand({2, 5}) > 0.3;
  for (double tau : {1.0, 2.0}) {
    at::Tensor a = s.clone().requires_grad_(true), b = s.clone().requires_grad_(true);
    DistillLoss fast = distill_loss(t, a, tokens, mask, tau, 0.3);
    DistillLoss ref = distill_loss_reference(t, b, tokens, mask, tau, 0.3);
    EXPECT_LT(rel(fast.loss.item<double>(), ref.loss.item<double>()), 1e-6);
    EXPECT_LT(rel(fast.ce.item<double>(), ref.ce.item<double>()), 1e-6);
    fast.loss.backward();
    ref.loss.backward();
    EXPECT_LT((a.grad() - b.grad()).abs().max().item<double>(), 1e-6);
  }
  EXPECT_THROW(fused_kl_loss(t, s.narrow(-1, 0, 10), {}, 1.0), ConfigError);
  EXPECT_THROW(fused_kl_loss(t, s, {}, 0.0), ConfigError);
  EXPECT_THROW(fused_kl_loss(t.to(at::kDouble), s, {}, 1.0), ConfigError);
}

}  // namespace
// The head inside the loss: value and gradients (hidden states, head) against float64
// autograd through the logits h W^T, for chunk sizes that do and do not divide the positions,
// a mask, tau != 1, both kernels, a tied head (the same tensor also used elsewhere in the
// graph), a row-narrowed (shared-vocabulary) head, and inference-mode teacher tensors.
TEST(FusedLinearKl, MatchesFloat64AutogradThroughTheHeads) {
  for (CpuIsa isa : supported_isas()) {  // every kernel variant this CPU runs
    SCOPED_TRACE(testing::Message() << "kernel ISA " << isa_name(isa));
    ScopedKernelIsa use(isa);
    at::manual_seed(23);
    const int64_t B = 2, T = 9, V = 301, Dt = 24, Ds = 16;
    at::Tensor ht, wt;
    {
      c10::InferenceMode inference;  // as the trainer's teacher forward
      ht = at::randn({B, T, Dt});
      wt = at::randn({V, Dt}) * 0.5;
    }
    const at::Tensor mask = at::rand({B, T}) > 0.3;
    for (FusedKlKernel kernel : {FusedKlKernel::automatic, FusedKlKernel::aten}) {
      for (double tau : {1.0, 1.7}) {
        for (int64_t rows : {0, 1, 5, 18}) {
          for (bool masked : {false, true}) {
            at::Tensor hs = at::randn({B, T, Ds}).requires_grad_(true);
            at::Tensor ws = (at::randn({V, Ds}) * 0.5).requires_grad_(true);
            const at::Tensor keep = masked ? mask : at::Tensor();
            // The head is also used outside the loss (as a tied embedding is): both gradients add.
            at::Tensor loss = fused_linear_kl_loss(ht, wt, hs, ws, keep, tau, rows, kernel) +
                              ws.sum() * 0.01;
            loss.backward();

            at::Tensor hs64 = hs.detach().to(at::kDouble).requires_grad_(true);
            at::Tensor ws64 = ws.detach().to(at::kDouble).requires_grad_(true);
            at::Tensor t64 = at::matmul(ht.to(at::kDouble), wt.to(at::kDouble).t());
            at::Tensor s64 = at::matmul(hs64, ws64.t());
            at::Tensor ref = kl_float64(t64, s64, masked ? mask : at::ones({B, T}, at::kBool), tau) +
                             ws64.sum() * 0.01;
            ref.backward();
            const std::string where = fmt::format("kernel {} tau {} rows {} masked {}",
                                                  int(kernel), tau, rows, masked);
            EXPECT_LT(rel(loss.item<double>(), ref.item<double>()), 1e-5) << where;
            EXPECT_LT((hs.grad().to(at::kDouble) - hs64.grad()).abs().max().item<double>(),
                      1e-5 * hs64.grad().abs().max().item<double>() + 1e-9) << where;
            EXPECT_LT((ws.grad().to(at::kDouble) - ws64.grad()).abs().max().item<double>(),
                      1e-5 * ws64.grad().abs().max().item<double>() + 1e-9) << where;
            if (masked) {  // masked positions: no gradient into their hidden states
              at::Tensor dropped = hs.grad().index({mask.logical_not()});
              EXPECT_EQ(dropped.abs().max().item<double>(), 0.0) << where;
            }
          }
        }
      }
    }
  }
}

TEST(FusedLinearKl, ANarrowedHeadGetsItsGradientInTheFullHeadAndBadShapesAreRefused) {
  at::manual_seed(29);
  const int64_t B = 1, T = 4, V = 50, D = 8;
  at::Tensor ht = at::randn({B, T, D}), wt = at::randn({V + 7, D});  // teacher: 7 extra ids
  at::Tensor hs = at::randn({B, T, D}).requires_grad_(true);
  at::Tensor ws = at::randn({V, D}).requires_grad_(true);
  fused_linear_kl_loss(ht, wt.narrow(0, 0, V), hs, ws, {}, 1.0).backward();
  at::Tensor ws64 = ws.detach().to(at::kDouble).requires_grad_(true);
  kl_float64(at::matmul(ht.to(at::kDouble), wt.narrow(0, 0, V).to(at::kDouble).t()),
             at::matmul(hs.detach().to(at::kDouble), ws64.t()), at::ones({B, T}, at::kBool), 1.0)
      .backward();
  EXPECT_LT((ws.grad().to(at::kDouble) - ws64.grad()).abs().max().item<double>(), 1e-5);

  auto expect_config_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config_error([&] { fused_linear_kl_loss(ht, wt, hs, ws, {}, 1.0); }, "heads must be [V, D]");
  expect_config_error([&] { fused_linear_kl_loss(ht, wt.narrow(0, 0, V), hs.reshape({T, D}), ws, {}, 1.0); },
                      "hidden states must be [B, T, D]");
  expect_config_error([&] { fused_linear_kl_loss(ht, wt.narrow(0, 0, V), hs, ws, {}, 0.0); },
                      "temperature must be > 0");
  expect_config_error([&] { fused_linear_kl_loss(ht.to(at::kDouble), wt.narrow(0, 0, V), hs, ws, {}, 1.0); },
                      "fp32");
}

}  // namespace ac
