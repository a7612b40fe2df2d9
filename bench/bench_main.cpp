// autocompress_bench: throughput of our training step and importance pass, on random weights of
// the shapes bench/torch_eager.py uses, so that bench/run.sh can print the ratio to PyTorch
// eager measured in the same run. Prints one JSON line:
//   {"which": ..., "tokens_per_s": median, "step_s": [...], "gflops_per_s": ..., "flops_per_step": ...}
//
// FLOPs are the matmul FLOPs of the forward pass (2 m n k each: q, k, v, o, gate, up, down,
// QK^T and AV over the full T x T scores, lm_head), x3 for the student's forward + backward
// (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1: C ~ 6 N per
// token for training, 2 N for a forward pass).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <immintrin.h>
#ifdef AC_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/runtime.h"
#include "data/dataset.h"
#include "common/cpu_allocator.h"
#include "common/gemm.h"
#include "common/simd.h"
#include "distill/distill.h"
#include "distill/fused_kl.h"
#include "distill/loss.h"
#include "hardware/measure.h"
#include "importance/importance.h"
#include "model/llama.h"

namespace ac {
int width_probe(int argc, char** argv);        // bench/width_probe.cpp
int profile_agreement(int argc, char** argv);  // bench/width_probe.cpp
namespace {

/// Forward matmul FLOPs of `c` on a [B, T] batch.
double forward_flops(const ModelConfig& c, int64_t B, int64_t T) {
  double per_token = 2.0 * double(c.hidden_size) * double(c.vocab_size);  // lm_head
  for (const LayerConfig& l : c.layers) {
    double D = double(c.hidden_size);
    if (l.has_attention()) {
      double q = double(l.num_attention_heads * l.head_dim);
      double kv = double(l.num_key_value_heads * l.head_dim);
      per_token += 2 * D * (q + 2 * kv) + 2 * q * D + 2 * 2 * double(T) * q;
    }
    if (!l.ffn_no_op) per_token += 3 * 2 * D * double(l.intermediate_size);
  }
  return per_token * double(B * T);
}

/// Measured fp32 peak of one core: 12 independent chains of fused multiply-adds on 512-bit
/// (AVX-512F) or 256-bit (AVX2 + FMA) registers, 2 FLOP per lane each, for `iters` rounds.
/// 12 chains cover the FMA latency (4 cycles) times two FMA ports, so the loop is bound by
/// issue throughput: the instruction peak, not a BLAS's (the method of the Empirical Roofline
/// Toolkit, Lo et al. 2014). The chains are named variables, not an array, so that they stay in
/// registers (an array was kept on the stack: a load and a store per FMA, half the peak).
/// Returns a value derived from the chains (so the compiler keeps them); the caller times it.
#define AC_FMA_CHAINS(T, SET1, FMADD, LANE0)                                              \
  const T b = SET1(1.0000001f), c = SET1(1e-7f);                                         \
  T a0 = SET1(0.f), a1 = SET1(1.f), a2 = SET1(2.f), a3 = SET1(3.f), a4 = SET1(4.f),      \
    a5 = SET1(5.f), a6 = SET1(6.f), a7 = SET1(7.f), a8 = SET1(8.f), a9 = SET1(9.f),      \
    a10 = SET1(10.f), a11 = SET1(11.f);                                                  \
  for (int64_t it = 0; it < iters; ++it) {                                               \
    a0 = FMADD(a0, b, c); a1 = FMADD(a1, b, c); a2 = FMADD(a2, b, c);                    \
    a3 = FMADD(a3, b, c); a4 = FMADD(a4, b, c); a5 = FMADD(a5, b, c);                    \
    a6 = FMADD(a6, b, c); a7 = FMADD(a7, b, c); a8 = FMADD(a8, b, c);                    \
    a9 = FMADD(a9, b, c); a10 = FMADD(a10, b, c); a11 = FMADD(a11, b, c);                \
  }                                                                                      \
  return LANE0(a0) + LANE0(a1) + LANE0(a2) + LANE0(a3) + LANE0(a4) + LANE0(a5) +         \
         LANE0(a6) + LANE0(a7) + LANE0(a8) + LANE0(a9) + LANE0(a10) + LANE0(a11);

__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iters) {
#define AC_LANE0_512(x) _mm512_cvtss_f32(x)
  AC_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, AC_LANE0_512)
#undef AC_LANE0_512
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iters) {
#define AC_LANE0_256(x) _mm_cvtss_f32(_mm256_castps256_ps128(x))
  AC_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, AC_LANE0_256)
#undef AC_LANE0_256
}
#undef AC_FMA_CHAINS

/// The fp32 FMA peak of `threads` cores running at once (one chain loop per thread), GFLOP/s,
/// best of `rounds`; `isa` receives "avx512" or "avx2": the kernels' ISA (kernel_isa(), so
/// AC_CPU_ISA=avx2 measures the AVX2 peak that an AVX2 machine's kernels can reach).
double measured_fp32_peak(int threads, int rounds, std::string& isa) {
  const bool wide = kernel_isa() == CpuIsa::avx512;
  isa = wide ? "avx512" : "avx2";
  const int64_t iters = 50'000'000;
  // Wall time of all threads together (a thread that ran while another waited for a core
  // must not count twice).
  const double flops = double(threads) * 2.0 * (wide ? 16 : 8) * 12 * double(iters);
  double best = 0;
  float sink = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<float> out(size_t(threads), 0.0f);
    const double t0 = now_s();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { out[size_t(t)] = wide ? fma_chains_avx512(iters) : fma_chains_avx2(iters); });
    for (auto& t : pool) t.join();
    best = std::max(best, flops / (now_s() - t0) / 1e9);
    for (float f : out) sink += f;
  }
  if (sink == 1.2345f) std::cerr << "";
  return best;
}

double median(const std::vector<double>& v) { return sample_median(v); }

/// The GEMMs of the training step's linear layers, M = `tokens`, for hidden sizes `dims` (with
/// their FFN widths `ffns`) and the vocabulary head: forward y = x w^T, dx = dy w and
/// dw = dy^T x, each through oneDNN's sgemm and OpenBLAS (common/gemm.h), alternating, `rounds`
/// times. Returns GFLOP/s of the median round per shape, backend and product.
nlohmann::json gemm_shapes_json(int64_t tokens, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& ffns, int64_t vocab, int rounds) {
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (N, K) of w [N, K]
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t D = dims[i], F = ffns[i];
    for (auto nk : {std::pair{vocab, D}, {3 * D, D}, {D, D}, {F, D}, {D, F}}) shapes.push_back(nk);
  }
  nlohmann::json rows = nlohmann::json::array();
  const int64_t M = tokens;
  for (auto [N, K] : shapes) {
    at::Tensor x = at::randn({M, K}), w = at::randn({N, K}), dy = at::randn({M, N});
    at::Tensor y = at::empty({M, N}), dx = at::empty({M, K}), dw = at::empty({N, K});
    const double gflop = 2.0 * double(M) * double(N) * double(K) / 1e9;
    nlohmann::json row = {{"M", M}, {"N", N}, {"K", K}};
    for (const char* product : {"forward", "dx", "dw"}) {
      std::vector<double> t[2];
      for (int r = 0; r < rounds; ++r)
        for (int b = 0; b < 2; ++b) {
          const GemmBackend be = b == 0 ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
          const double t0 = now_s();
          if (product[0] == 'f') gemm_out(y, x, w.t(), 0.0f, be);
          else if (product[1] == 'x') gemm_out(dx, dy, w, 0.0f, be);
          else gemm_out(dw, dy.t(), x, 0.0f, be);
          if (r > 0) t[b].push_back(now_s() - t0);  // round 0 warms up
        }
      row[product] = {{"onednn_gflops_per_s", gflop / sample_median(t[0])},
                      {"openblas_gflops_per_s", gflop / sample_median(t[1])}};
    }
    rows.push_back(row);
  }
  return {{"which", "gemm"}, {"threads", at::get_num_threads()}, {"gemm", gemm_description()},
          {"rounds", rounds - 1}, {"shapes", rows}};
}

/// The widest ISA oneDNN's kernels use in this process (after ONEDNN_MAX_CPU_ISA): "avx512",
/// "avx2" or "older", with dnnl_cpu_isa_t's value; "" in a build without oneDNN.
std::string onednn_isa() {
#ifdef AC_WITH_DNNL
  const unsigned isa = unsigned(dnnl_get_effective_cpu_isa());
  // dnnl_types.h: each ISA's value holds the bits of the ones it extends (avx2 0x7, avx512_core 0x27).
  const char* name = (isa & 0x20u) ? "avx512" : (isa & 0x7u) == 0x7u ? "avx2" : "older";
  return fmt::format("{} (dnnl_cpu_isa 0x{:x})", name, isa);
#else
  return "";
#endif
}

/// Which kernels this process runs: the hand-written kernels' ISA (common/simd.h) and whether
/// AC_CPU_ISA chose it, the fused KL's row kernel, the GEMM library with OpenBLAS's core, and
/// the libraries' ISA caps as the environment sets them ("" when unset).
std::optional<GemmChoice> gemm_choice;  // set by the train benchmark

nlohmann::json kernels_json() {
  auto env = [](const char* name) { const char* v = std::getenv(name); return std::string(v ? v : ""); };
  return {{"isa", isa_name(kernel_isa())},
          {"gemm_choice", gemm_choice ? gemm_choice->to_string() : std::string("default")},
          {"isa_forced", kernel_isa_forced()},
          {"cpu_isa", isa_name(cpu_isa())},
          {"fused_kl", fused_kl_kernel_name()},
          {"gemm", gemm_description()},
          {"onednn_isa", onednn_isa()},
          {"ONEDNN_MAX_CPU_ISA", env("ONEDNN_MAX_CPU_ISA")},
          {"ATEN_CPU_CAPABILITY", env("ATEN_CPU_CAPABILITY")},
          {"OPENBLAS_CORETYPE", env("OPENBLAS_CORETYPE")}};
}

int run(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "widths") return width_probe(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "agree") return profile_agreement(argc - 1, argv + 1);
  CLI::App app{"autocompress_bench"};
  std::string which;
  int64_t dim = 288, layers = 6, heads = 6, kv_heads = 6, ffn = 768, vocab = 32000;
  int64_t sdim = 192, sheads = 4, skv = 4, sffn = 512, batch = 8, seq = 256, steps = 5,
          warmup = 1;
  app.add_option("which", which, "train | importance | peak | gemm | widths | agree (the last two: bench/width_probe.cpp)")->required();
  app.add_option("--dim", dim);
  app.add_option("--layers", layers);
  app.add_option("--heads", heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--ffn", ffn);
  app.add_option("--vocab", vocab);
  app.add_option("--student-dim", sdim);
  app.add_option("--student-heads", sheads);
  app.add_option("--student-kv-heads", skv);
  app.add_option("--student-ffn", sffn);
  app.add_option("--batch", batch);
  app.add_option("--seq", seq);
  app.add_option("--steps", steps);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);
  init_torch_threads();
  if (which == "gemm") {  // the training step's GEMM shapes, oneDNN against OpenBLAS
    std::cout << gemm_shapes_json(batch * seq, {dim, sdim}, {ffn, sffn}, vocab, 12).dump()
              << std::endl;
    return 0;
  }
  if (which == "peak") {  // no model: the instruction peak of as many cores as torch uses
    std::string isa;
    const double g = measured_fp32_peak(at::get_num_threads(), 3, isa);
    std::cout << nlohmann::json{{"which", which}, {"gflops_per_s", g}, {"isa", isa},
                                {"threads", at::get_num_threads()}, {"blas", blas_description()},
                                {"kernels", kernels_json()}}.dump()
              << std::endl;
    return 0;
  }

  const int64_t hd = dim / heads;
  ModelConfig tc = ModelConfig::uniform(vocab, dim, layers, LayerConfig{heads, kv_heads, hd, ffn});
  tc.tie_word_embeddings = true;
  LlamaModel teacher{tc, random_weights(tc, 1, 0.02)};
  const int64_t n = warmup + steps;
  at::Generator g = at::detail::createCPUGenerator(7);
  std::vector<at::Tensor> batches;
  for (int64_t i = 0; i < n; ++i) batches.push_back(at::randint(0, vocab, {batch, seq}, g, at::kLong));

  std::vector<double> step_s;
  double flops = 0;
  int64_t train_peak_bytes = -1;  // train: peak bytes the steps allocated (weights excluded)
  nlohmann::json breakdown = nlohmann::json::object();
  if (which == "importance") {
    // One batch per compute_importance call, so each call is one timed step.
    ImportanceOptions o;
    o.show_progress = false;
    for (int64_t i = 0; i < n; ++i) {
      double t0 = now_s();
      compute_importance(teacher, {batches[size_t(i)]}, o);
      if (i >= warmup) step_s.push_back(now_s() - t0);
    }
    flops = forward_flops(tc, batch, seq);
  } else if (which == "train") {
    ModelConfig sc = ModelConfig::uniform(vocab, sdim, layers,
                                          LayerConfig{sheads, skv, sdim / sheads, sffn});
    sc.tie_word_embeddings = true;
    LlamaModel student{sc, random_weights(sc, 2, 0.02)};
    // The GEMM library as a run on this CPU chooses it (`profile`, hardware/profile.cpp): by
    // measurement on the teacher's training-step shapes, unless AC_GEMM names one.
    gemm_choice = choose_gemm_backend(model_gemm_shapes(tc.hidden_size, tc.layers[0].intermediate_size,
                                                                tc.vocab_size, batch * seq));
    std::vector<int32_t> ids;
    for (const auto& b : batches) {
      auto a = b.contiguous().data_ptr<int64_t>();
      for (int64_t i = 0; i < b.numel(); ++i) ids.push_back(int32_t(a[i]));
    }
    TokenDataset data(std::move(ids), vocab);
    DistillOptions o;
    o.batch_size = batch;
    o.seq_len = seq;
    o.token_budget = n * batch * seq;
    o.warmup_steps = 1;
    o.checkpoint_every = 0;
    o.show_progress = false;
    o.on_step = [&](const StepRecord& r) {
      if (r.step >= warmup) step_s.push_back(double(batch * seq) / r.tokens_per_s);
    };
    install_counting_allocator();  // the weights above are not counted: the step's own memory
    const int64_t live_before = counted_bytes_now();
    reset_counted_peak();
    distill(teacher, student, data, o);
    train_peak_bytes = counted_bytes_peak() - live_before;
    flops = forward_flops(tc, batch, seq) + 3 * forward_flops(sc, batch, seq);
    // Where the time goes: the same step's phases timed one by one (medians over the steps).
    std::vector<double> t_teacher, t_student, t_loss, t_backward, t_opt;
    // The trainer's path (distill.cpp): AC_FUSED_HEAD=on / off / auto (fused_kl.h).
    const bool fused_head = use_fused_head(batch * seq, vocab);
    LargeBlockCache block_cache;  // as distill() runs its steps
    auto params = student.weights.parameters();
    student.weights.lm_head = student.weights.embed_tokens;
    for (auto& p : params) p.requires_grad_(true);
    torch::optim::AdamW adam(params, torch::optim::AdamWOptions(1e-4));
    for (int64_t i = 0; i < n; ++i) {
      const at::Tensor& tokens = batches[size_t(i)];
      double t0 = now_s();
      DistillLoss l;
      double t1 = 0, t2 = 0;
      if (fused_head) {  // as the trainer (distill.cpp): the heads inside the loss
        at::Tensor ht;
        {
          c10::InferenceMode no_autograd;
          ht = teacher.hidden_states(tokens);
        }
        t1 = now_s();
        at::Tensor hs = student.hidden_states(tokens);
        t2 = now_s();
        l.loss = fused_linear_kl_loss(ht, teacher.weights.lm_head, hs, student.weights.lm_head,
                                      {}, 1.0);
      } else {
        at::Tensor tl;
        {
          c10::InferenceMode no_autograd;  // as the trainer (distill.cpp)
          tl = teacher.forward(tokens);
        }
        t1 = now_s();
        at::Tensor sl = student.forward(tokens);
        t2 = now_s();
        l = distill_loss(tl, sl, tokens, {}, 1.0, 0.0);
      }
      double t3 = now_s();
      clear_gradients(params);  // as the trainer
      l.loss.backward();
      double t4 = now_s();
      torch::nn::utils::clip_grad_norm_(params, 1.0);
      adam.step();
      double t5 = now_s();
      if (i < warmup) continue;
      t_teacher.push_back(t1 - t0);
      t_student.push_back(t2 - t1);
      t_loss.push_back(t3 - t2);
      t_backward.push_back(t4 - t3);
      t_opt.push_back(t5 - t4);
    }
    const double N = double(batch * seq);
    const double head_fwd = 2 * N * double(vocab) * double(tc.hidden_size + sc.hidden_size);
    const double head_bwd = 2 * 2 * N * double(vocab) * double(sc.hidden_size);  // dX and dW
    const double layers_t = forward_flops(tc, batch, seq) - 2 * N * double(vocab) * double(tc.hidden_size);
    const double layers_s = forward_flops(sc, batch, seq) - 2 * N * double(vocab) * double(sc.hidden_size);
    if (fused_head)  // the heads run inside the loss: layers, then heads + KL + head gradients
      breakdown = {{"path", "fused head"},
                   {"teacher_layers_s", median(t_teacher)}, {"student_layers_s", median(t_student)},
                   {"heads_kl_and_head_backward_s", median(t_loss)},
                   {"layers_backward_s", median(t_backward)}, {"clip_and_adamw_s", median(t_opt)},
                   {"teacher_layers_gflops_per_s", layers_t / median(t_teacher) / 1e9},
                   {"student_layers_gflops_per_s", layers_s / median(t_student) / 1e9},
                   {"heads_gflops_per_s", (head_fwd + head_bwd) / median(t_loss) / 1e9},
                   {"layers_backward_gflops_per_s", 2 * layers_s / median(t_backward) / 1e9}};
    else
      breakdown = {{"path", "logits"},
                   {"teacher_forward_s", median(t_teacher)}, {"student_forward_s", median(t_student)},
                   {"kl_loss_s", median(t_loss)}, {"backward_s", median(t_backward)},
                   {"clip_and_adamw_s", median(t_opt)},
                   {"teacher_forward_gflops_per_s", forward_flops(tc, batch, seq) / median(t_teacher) / 1e9},
                   {"student_forward_gflops_per_s", forward_flops(sc, batch, seq) / median(t_student) / 1e9},
                   {"backward_gflops_per_s", 2 * forward_flops(sc, batch, seq) / median(t_backward) / 1e9}};
  } else {
    std::cerr << "which must be train, importance, peak or gemm\n";
    return 2;
  }
  double med = median(step_s);
  nlohmann::json j = {{"which", which},
                      {"tokens_per_s", double(batch * seq) / med},
                      {"step_s", step_s},
                      {"flops_per_step", flops},
                      {"gflops_per_s", flops / med / 1e9},
                      {"threads", at::get_num_threads()},
                      {"breakdown", breakdown},
                      {"kernels", kernels_json()}};
  if (train_peak_bytes >= 0) j["train_peak_bytes"] = train_peak_bytes;
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace ac

int main(int argc, char** argv) {
  ac::ensure_fast_blas_kernels();
  try {
    return ac::run(argc, argv);
  } catch (const ac::Error& e) {  // e.g. a bad AC_CPU_ISA or AC_GEMM: one line, not a crash
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
