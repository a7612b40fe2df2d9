// oneDNN's sgemm behind gemm_out / mm / linear (common/gemm.h) against float64 products and
// float64 autograd: every operand layout sgemm is given without a copy (transposed views,
// narrowed rows with a leading dimension above the width, single rows and columns), a strided
// output, beta = 0 over NaN (never read) and beta = 1, and the gradients of linear.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include <limits>

#include "common/error.h"
#include "common/gemm.h"

namespace ac {
namespace {

// max |x - truth| / max |truth|
double rel_err(const at::Tensor& x, const at::Tensor& truth) {
  const at::Tensor t = truth.to(at::kDouble);
  return (x.to(at::kDouble) - t).abs().max().item<double>() / t.abs().max().item<double>();
}

// Every layout of a [rows, cols] operand: contiguous, a transposed view of a contiguous
// [cols, rows], a narrowed view (leading dimension > cols) and a transposed narrowed view.
std::vector<at::Tensor> layouts(int64_t rows, int64_t cols, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return {at::randn({rows, cols}, g, at::TensorOptions()),
          at::randn({cols, rows}, g, at::TensorOptions()).t(),
          at::randn({rows, cols + 5}, g, at::TensorOptions()).narrow(1, 2, cols),
          at::randn({cols, rows + 3}, g, at::TensorOptions()).narrow(1, 1, rows).t()};
}

TEST(Gemm, EveryOperandLayoutMatchesTheFloat64Product) {
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{37, 29, 53}, {1, 64, 17}, {9, 1, 5},
                                                             {6, 40, 1}}) {
    const auto as = layouts(M, K, 1), bs = layouts(K, N, 2);
    for (size_t i = 0; i < as.size(); ++i)
      for (size_t j = 0; j < bs.size(); ++j) {
        SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K << " N=" << N << " a layout "
                                        << i << " b layout " << j);
        const at::Tensor truth = at::mm(as[i].to(at::kDouble), bs[j].to(at::kDouble));
        // beta = 0 overwrites: NaN already in c must not leak into the product.
        at::Tensor c = at::full({M, N}, std::numeric_limits<float>::quiet_NaN());
        gemm_out(c, as[i], bs[j]);
        EXPECT_LT(rel_err(c, truth), 1e-5);
        // beta = 1 accumulates onto c.
        at::Tensor c0 = at::randn({M, N});
        at::Tensor acc = c0.clone();
        gemm_out(acc, as[i], bs[j], 1.0f);
        EXPECT_LT(rel_err(acc, truth + c0.to(at::kDouble)), 1e-5);
        // The same through OpenBLAS.
        at::Tensor ob = at::empty({M, N});
        gemm_out(ob, as[i], bs[j], 0.0f, GemmBackend::OpenBlas);
        EXPECT_LT(rel_err(ob, truth), 1e-5);
      }
  }
}

// The raw-buffer product of a build without oneDNN (sgemm_aten) and oneDNN's (sgemm), both
// against float64: 'N' and 'T' operands with leading dimensions above their widths, alpha,
// beta = 0 over NaN (never read), beta = 1, and a C row stride above N.
TEST(Gemm, RawSgemmWithoutOneDnnMatchesTheFloat64Product) {
  const int64_t M = 7, N = 5, K = 9, pad = 3;
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << ta << " trans_b " << tb);
      // Stored row-major with a leading dimension `pad` above the row length.
      const int64_t ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M;
      const int64_t br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
      const at::Tensor A = at::randn({ar, ac + pad}), B = at::randn({br, bc + pad});
      const at::Tensor a = A.narrow(1, 0, ac), b = B.narrow(1, 0, bc);
      const at::Tensor opa = (ta == 'N' ? a : a.t()).to(at::kDouble);
      const at::Tensor opb = (tb == 'N' ? b : b.t()).to(at::kDouble);
      const at::Tensor truth = 0.5 * at::mm(opa, opb);
      const at::Tensor c0 = at::randn({M, N + pad});
      for (auto fn : {&sgemm_aten, &sgemm}) {
        at::Tensor c = at::full({M, N + pad}, std::numeric_limits<float>::quiet_NaN());
        fn(ta, tb, M, N, K, 0.5f, A.data_ptr<float>(), ac + pad, B.data_ptr<float>(), bc + pad,
           0.0f, c.data_ptr<float>(), N + pad);
        EXPECT_LT(rel_err(c.narrow(1, 0, N), truth), 1e-5);
        EXPECT_TRUE(c.narrow(1, N, pad).isnan().all().item<bool>());  // the padding untouched
        at::Tensor acc = c0.clone();
        fn(ta, tb, M, N, K, 0.5f, A.data_ptr<float>(), ac + pad, B.data_ptr<float>(), bc + pad,
           1.0f, acc.data_ptr<float>(), N + pad);
        EXPECT_LT(rel_err(acc.narrow(1, 0, N), truth + c0.narrow(1, 0, N).to(at::kDouble)), 1e-5);
      }
    }
}

TEST(Gemm, StridedOutputAndMmAndBadShapes) {
  const at::Tensor a = at::randn({8, 12}), b = at::randn({12, 10});
  const at::Tensor truth = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  // c a column slice of a wider tensor (row stride 16 > 10: sgemm writes it in place) and a
  // transposed view (no unit stride along the row: through a temporary); the rest untouched.
  at::Tensor wide = at::zeros({8, 16});
  at::Tensor slice = wide.narrow(1, 3, 10);
  gemm_out(slice, a, b);
  EXPECT_LT(rel_err(slice, truth), 1e-5);
  EXPECT_EQ(wide.narrow(1, 0, 3).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(wide.narrow(1, 13, 3).abs().sum().item<float>(), 0.0f);
  at::Tensor ct = at::ones({10, 8});
  at::Tensor ctv = ct.t();
  gemm_out(ctv, a, b, 2.0f);
  EXPECT_LT(rel_err(ctv, truth + 2.0), 1e-5);

  EXPECT_LT(rel_err(ac::mm(a, b), truth), 1e-5);
  EXPECT_TRUE(ac::mm(a, b).is_contiguous());
  at::Tensor bad = at::empty({8, 9});
  EXPECT_THROW(gemm_out(bad, a, b), ConfigError);
  EXPECT_THROW(ac::mm(a, a), ConfigError);
  EXPECT_THROW(ac::mm(a.view({-1}), b), ConfigError);
  // Other dtypes run ATen: the result is still the product.
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  at::Tensor cd = at::empty({8, 10}, at::kDouble);
  gemm_out(cd, ad, bd);
  EXPECT_LT(rel_err(cd, truth), 1e-12);
}

TEST(Gemm, LinearValueAndGradientsMatchFloat64Autograd) {
  at::Generator g = at::detail::createCPUGenerator(3);
  const at::Tensor x0 = at::randn({3, 7, 24}, g, at::TensorOptions());
  const at::Tensor w0 = at::randn({19, 24}, g, at::TensorOptions());
  const at::Tensor b0 = at::randn({19}, g, at::TensorOptions());
  const at::Tensor dy = at::randn({3, 7, 19}, g, at::TensorOptions());
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    at::Tensor xd = x0.to(at::kDouble).requires_grad_(), wd = w0.to(at::kDouble).requires_grad_(),
               bd = b0.to(at::kDouble).requires_grad_();
    at::Tensor yd = at::linear(xd, wd, with_bias ? bd : at::Tensor());
    (yd * dy.to(at::kDouble)).sum().backward();

    at::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(),
               b = b0.clone().requires_grad_();
    at::Tensor y = ac::linear(x, w, with_bias ? b : at::Tensor());
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 7, 19}));
    EXPECT_LT(rel_err(y, yd.detach()), 1e-5);
    (y * dy).sum().backward();
    EXPECT_LT(rel_err(x.grad(), xd.grad()), 1e-5);
    EXPECT_LT(rel_err(w.grad(), wd.grad()), 1e-5);
    if (with_bias) {
      EXPECT_LT(rel_err(b.grad(), bd.grad()), 1e-5);
    }
  }
  // Only what needs a gradient gets one: a frozen weight (the search's masks train, not the
  // weights) and a frozen input.
  at::Tensor x = x0.clone().requires_grad_(), w = w0.clone();
  (ac::linear(x, w) * dy).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  at::Tensor x2 = x0.clone(), w2 = w0.clone().requires_grad_();
  (ac::linear(x2, w2) * dy).sum().backward();
  EXPECT_FALSE(x2.grad().defined());
  EXPECT_LT(rel_err(w2.grad(), at::matmul(dy.reshape({-1, 19}).t().to(at::kDouble),
                                          x0.reshape({-1, 24}).to(at::kDouble))),
            1e-5);
  // With a frozen weight, x is not kept for a dw nobody needs (as at::linear): changing x in
  // place after the forward is then no error, and dx = dy w does not depend on it.
  at::Tensor base = x0.clone().requires_grad_();
  at::Tensor xi = base * 1.0f;  // not a leaf: may be changed in place
  at::Tensor yi = ac::linear(xi, w0);
  xi.mul_(2.0f);
  (yi * dy).sum().backward();
  EXPECT_LT(rel_err(base.grad().reshape({-1, 24}),
                    at::matmul(dy.reshape({-1, 19}).to(at::kDouble), w0.to(at::kDouble))),
            1e-5);
  // A tied weight used twice (embedding and head) sums both gradients.
  at::Tensor wt = w0.clone().requires_grad_();
  (ac::linear(x0, wt) * dy).sum().add((ac::linear(x0, wt) * dy).sum()).backward();
  EXPECT_LT(rel_err(wt.grad(), 2 * at::matmul(dy.reshape({-1, 19}).t().to(at::kDouble),
                                              x0.reshape({-1, 24}).to(at::kDouble))),
            1e-5);
  // Under inference mode, no autograd: the value only.
  {
    c10::InferenceMode guard;
    EXPECT_LT(rel_err(ac::linear(x0, w0), at::linear(x0.to(at::kDouble), w0.to(at::kDouble))), 1e-5);
  }
}

TEST(Gemm, TheBackendIsNamed) {
  const std::string d = gemm_description();
  if (gemm_backend() == GemmBackend::OneDnn) {
    EXPECT_EQ(d.rfind("oneDNN v", 0), 0u) << d;
  } else {
    // Debian's libtorch runs OpenBLAS; a PyPI wheel's at::mm names its own library (MKL).
    EXPECT_TRUE(d.rfind("OpenBLAS through at::mm", 0) == 0 || d.rfind("at::mm over ", 0) == 0) << d;
  }
}

TEST(Gemm, ThePickWeighsBothClassesOfShapesByTheirSpeedUps) {
  auto pick = [](double dnn_small, double blas_small, double dnn_large, double blas_large) {
    GemmChoice c;
    c.onednn_small_ms = dnn_small, c.openblas_small_ms = blas_small;
    c.onednn_large_ms = dnn_large, c.openblas_large_ms = blas_large;
    return pick_gemm_backend(c);
  };
  // Faster on both: that one.
  EXPECT_EQ(pick(1.0, 2.0, 10.0, 20.0), GemmBackend::OneDnn);
  EXPECT_EQ(pick(2.0, 1.0, 20.0, 10.0), GemmBackend::OpenBlas);
  // Split: OpenBLAS 4.76x faster on decode, 1.5x slower on larger shapes: 4.76 / 1.5 = 3.2 > 1.
  EXPECT_EQ(pick(2036.35, 427.66, 152.0, 228.0), GemmBackend::OpenBlas);
  // Split the other way: OpenBLAS 1.1x faster on decode, 2x slower on larger shapes: 0.55 < 1.
  EXPECT_EQ(pick(1.1, 1.0, 10.0, 20.0), GemmBackend::OneDnn);
  // One class untimed (zeros) is a tie: the other decides; nothing timed keeps oneDNN.
  EXPECT_EQ(pick(0, 0, 20.0, 10.0), GemmBackend::OpenBlas);
  EXPECT_EQ(pick(0, 0, 0, 0), GemmBackend::OneDnn);
  // The log line says what each class measured and how they are weighed.
  GemmChoice c;
  c.onednn_small_ms = 2036.35, c.openblas_small_ms = 427.66, c.onednn_large_ms = 152.0,
  c.openblas_large_ms = 228.0, c.backend = GemmBackend::OpenBlas;
  const std::string s = c.to_string();
  EXPECT_NE(s.find("OpenBLAS 4.76x faster"), std::string::npos) << s;
  EXPECT_NE(s.find("oneDNN 1.50x faster"), std::string::npos) << s;
  EXPECT_NE(s.find("product of the two speed-ups"), std::string::npos) << s;
}

TEST(Gemm, TheMeasuredChoiceIsTheFasterAndBecomesTheBackend) {
  if (std::getenv("AC_GEMM")) GTEST_SKIP() << "AC_GEMM names the backend";
#ifndef AC_WITH_DNNL
  GTEST_SKIP() << "a build without oneDNN has one backend, at::mm (scripts/build_cuda.sh --tests)";
#endif
  const GemmBackend before = gemm_backend();
  const GemmChoice c = choose_gemm_backend(model_gemm_shapes(64, 128, 256, 32), 2);
  EXPECT_FALSE(c.forced);
  EXPECT_GT(c.onednn_small_ms, 0);
  EXPECT_GT(c.openblas_large_ms, 0);
  // OpenBLAS only when its two speed-ups multiply to more than 1.
  EXPECT_EQ(c.backend, (c.onednn_small_ms / c.openblas_small_ms) * (c.onednn_large_ms / c.openblas_large_ms) > 1
                           ? GemmBackend::OpenBlas : GemmBackend::OneDnn);
  EXPECT_EQ(gemm_backend(), c.backend);
  EXPECT_NE(c.to_string().find("measured"), std::string::npos) << c.to_string();
  // A profile's description names its backend, and adopting it sets it.
  for (GemmBackend b : {GemmBackend::OpenBlas, GemmBackend::OneDnn}) {
    set_gemm_backend(b);
    EXPECT_EQ(gemm_backend(), b);
    EXPECT_EQ(gemm_backend_of_description(gemm_description()), b) << gemm_description();
  }
  EXPECT_FALSE(gemm_backend_of_description("MKL").has_value());
  set_gemm_backend(before);
  EXPECT_EQ(model_gemm_shapes(288, 768, 32000, 2048).front().M, 256);  // capped
  EXPECT_EQ(model_gemm_shapes(288, 768, 32000, 2048).back().M, 1);   // a decode step
  EXPECT_THROW(choose_gemm_backend({}, 1), ConfigError);
}

}  // namespace
}  // namespace ac
