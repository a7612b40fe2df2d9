// The device-generic path (common/accelerator.h): what a CUDA device runs, checked on the CPU.
// --device and --precision parse or fail with one error; with the generic path forced
// (ScopedGenericKernels: every CPU-only kernel steps aside for the ATen ops a GPU has) a
// forward, a distillation, the importance and an evaluation agree with the fast CPU path; the
// mixed-precision path (bf16 autocast, fp32 master weights) trains through the same code on
// the CPU; the memory plan of model/stage_memory.h matches hand arithmetic, refuses with its
// numbers, and bounds the measured peak of a distillation on the generic path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "common/accelerator.h"
#include "common/cpu_allocator.h"
#include "common/error.h"
#include "common/fs.h"
#include "data/dataset.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "importance/importance.h"
#include "model/llama.h"
#include "model/stage_memory.h"
#include "test_util.h"

namespace ac {
namespace {

ModelConfig small_config() {
  return ModelConfig::uniform(/*vocab=*/256, /*hidden=*/64, /*num_layers=*/2,
                              LayerConfig{/*H=*/4, /*G=*/2, /*Hd=*/16, /*F=*/128});
}

LlamaModel teacher_model() {
  LlamaModel t{small_config(), {}};
  t.weights = random_weights(t.config, 21, /*std=*/0.2);
  return t;
}

// The teacher with noise: a student whose KL to the teacher distillation lowers.
LlamaModel student_model(const LlamaModel& teacher) {
  LlamaModel s{teacher.config, clone(teacher.config, teacher.weights)};
  at::NoGradGuard g;
  at::manual_seed(5);
  for (auto& p : s.weights.parameters()) p.add_(at::randn_like(p) * 0.05);
  return s;
}

DistillOptions distill_options(int64_t steps) {
  DistillOptions o;
  o.batch_size = 4;
  o.seq_len = 32;
  o.token_budget = steps * 4 * 32;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 1;
  o.show_progress = false;
  o.checkpoint_every = 0;
  return o;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(DevicePath, DeviceAndPrecisionFlagsParseOrFailWithOneError) {
  EXPECT_EQ(parse_device("cpu"), c10::Device(c10::kCPU));
  EXPECT_EQ(device_name(c10::Device(c10::kCPU)), "cpu");
  EXPECT_EQ(device_name(c10::Device(c10::kCUDA, 1)), "cuda:1");
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cpu:0", ""})
    test::expect_error<ConfigError>([&] { parse_device(bad); },
                                    {"--device", "expected cpu, cuda or cuda:N"});
  test::expect_error<ConfigError>([] { parse_device("tpu", "--teacher-device"); },
                                  {"--teacher-device", "'tpu'"});
  if (!cuda_compiled()) {
    for (const char* gpu : {"cuda", "cuda:0", "cuda:3"})
      test::expect_error<ConfigError>([&] { parse_device(gpu); },
                                      {"--device", "this build has no CUDA",
                                       "scripts/build_cuda.sh"});
  }
  EXPECT_EQ(parse_precision("auto", c10::kCPU), Precision::fp32);
  EXPECT_EQ(parse_precision("auto", c10::Device(c10::kCUDA, 0)), Precision::bf16);
  EXPECT_EQ(parse_precision("bf16", c10::kCPU), Precision::bf16);
  EXPECT_EQ(parse_precision("fp32", c10::Device(c10::kCUDA, 0)), Precision::fp32);
  test::expect_error<ConfigError>([] { parse_precision("fp16", c10::kCPU); },
                                  {"--precision", "'fp16'", "auto, fp32 or bf16"});
}

// Every stage that runs a model takes --device; a CPU build refuses a GPU with one error that
// names the flag, before it reads anything or writes its output.
TEST(DevicePath, EveryStageTakesDeviceAndACpuBuildRefusesAGpu) {
  if (cuda_compiled()) GTEST_SKIP() << "a CUDA build: the refusal is for CPU builds";
  const fs::path dir = fs::temp_directory_path() / fmt::format("ac_device_cli_{}", ::getpid());
  fs::create_directories(dir);
  const std::string m = (dir / "model").string(), out = (dir / "out").string();
  const std::vector<std::pair<std::string, std::string>> stages = {
      {"importance", "--model " + m + " --data d.tokens --out " + out},
      {"search", "--model " + m + " --importance i --scenario cpu-local --data d --out " + out},
      {"prune", "--model " + m + " --importance i --arch a.json --out " + out},
      {"distill", "--teacher " + m + " --student s --data d --tokens 100 --out " + out},
      {"eval", "--model " + m + " --data d --out " + out},
      {"generate", "--model " + m},
      {"sample", "--model " + m + " --count 1 --seed 1 --out " + out},
      {"compress", "--model " + m + " --scenario cpu-local --out " + out}};
  const fs::path log = dir / "log.txt";
  for (const auto& [stage, args] : stages) {
    for (const char* device : {"cuda", "cuda:1", "gpu"}) {
      const int rc = std::system(fmt::format("{} {} {} --device {} > {} 2>&1", test::cli_bin(),
                                             stage, args, device, log.string()).c_str());
      const std::string text = read_file(log);
      EXPECT_NE(rc, 0) << stage << " --device " << device;
      const bool gpu = std::string(device) != "gpu";
      EXPECT_NE(text.find(gpu ? "this build has no CUDA" : "expected cpu, cuda or cuda:N"),
                std::string::npos) << stage << " --device " << device << ": " << text;
      EXPECT_NE(text.find("--device"), std::string::npos) << stage << ": " << text;
      EXPECT_FALSE(fs::exists(out)) << stage;
    }
  }
  fs::remove_all(dir);
}

TEST(DevicePath, TheGenericSwitchTurnsEveryFastKernelAside) {
  // The switch is turned here from its default; AC_KERNELS=generic (the whole tier on the generic
  // path) holds it on.
  if (generic_kernels_forced()) GTEST_SKIP() << "AC_KERNELS=generic holds the generic path on";
  const at::Tensor x = at::randn({4, 8}), d = at::randn({4, 8}, at::kDouble);
  EXPECT_TRUE(cpu_fast_path({&x}));
  EXPECT_FALSE(cpu_fast_path({&x, &d}));  // not fp32
  {
    ScopedGenericKernels generic;
    EXPECT_TRUE(generic_kernels_forced());
    EXPECT_FALSE(cpu_fast_path({&x}));
  }
  EXPECT_FALSE(generic_kernels_forced());
  EXPECT_TRUE(cpu_fast_path({&x}));
}

TEST(DevicePath, AForwardOnTheGenericPathMatchesTheFastOne) {
  const LlamaModel t = teacher_model();
  const at::Tensor tokens = test::random_tokens(3, 40, 256, 7);
  at::NoGradGuard no_grad;
  const at::Tensor fast = t.forward(tokens);
  at::Tensor generic;
  {
    ScopedGenericKernels g;
    generic = t.forward(tokens);
  }
  ASSERT_EQ(fast.sizes(), generic.sizes());
  EXPECT_LT(max_abs_diff(fast, generic), 2e-4);
  // A masked forward (the search's supernet).
  Masks m;
  m.hidden = (at::arange(64) % 3 != 0).to(at::kFloat);
  const at::Tensor fast_masked = [&] {
    ForwardOptions fo;
    fo.masks = &m;
    return t.forward(tokens, fo);
  }();
  ScopedGenericKernels g;
  ForwardOptions fo;
  fo.masks = &m;
  EXPECT_LT(max_abs_diff(fast_masked, t.forward(tokens, fo)), 2e-4);
}

TEST(DevicePath, GreedyGenerationIsTheSameOnBothPaths) {
  const LlamaModel t = teacher_model();
  GenerateOptions go;
  go.max_new_tokens = 16;
  go.stop_at_eos = false;
  const std::vector<int64_t> prompt{1, 17, 42};
  const std::vector<int64_t> fast = generate(t, prompt, go);
  ScopedGenericKernels g;
  EXPECT_EQ(generate(t, prompt, go), fast);
}

TEST(DevicePath, ADistillationOnTheGenericPathMatchesTheFastOne) {
  const LlamaModel t = teacher_model();
  const TokenDataset train = test::random_text(4096, 256, 3);
  auto run = [&](bool generic) {
    LlamaModel s = student_model(t);
    std::optional<ScopedGenericKernels> g;
    if (generic) g.emplace();
    DistillResult r = distill(t, s, train, distill_options(4));
    return std::make_pair(r, s);
  };
  const auto [fast, fast_student] = run(false);
  const auto [generic, generic_student] = run(true);
  ASSERT_EQ(fast.loss_curve.size(), 4u);
  ASSERT_EQ(generic.loss_curve.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(generic.loss_curve[i], fast.loss_curve[i], 1e-4 * (1 + fast.loss_curve[i])) << i;
  EXPECT_LT(fast.loss_curve.back(), fast.loss_curve.front());  // it trains
  // AdamW moves every weight by about the learning rate a step whatever its gradient's size, so
  // a gradient near zero whose sign the two summation orders disagree on moves that weight in
  // opposite directions: an element may differ by up to 2 lr a step. What must hold is that the
  // paths agree on where training went: their distance is a small part of the distance moved.
  const LlamaModel start = student_model(t);
  const std::vector<at::Tensor> s0 = start.weights.parameters();
  const std::vector<at::Tensor> a = fast_student.weights.parameters();
  const std::vector<at::Tensor> b = generic_student.weights.parameters();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), s0.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double moved = (a[i] - s0[i]).norm().item<double>();
    ASSERT_GT(moved, 0) << i;
    EXPECT_LT((a[i] - b[i]).norm().item<double>(), 0.02 * moved) << i;
  }
}

TEST(DevicePath, ImportanceAndEvaluationOnTheGenericPathMatchTheFastOnes) {
  const LlamaModel t = teacher_model();
  const LlamaModel s = student_model(t);
  const TokenDataset d = test::random_text(2048, 256, 9);
  const std::vector<at::Tensor> batches = d.sequential_batches(4, 32, 3);
  ImportanceOptions io;
  io.show_progress = false;
  io.layer_drop_loss = true;
  EvalOptions eo;
  eo.seq_len = 32;
  eo.batch_size = 4;
  eo.show_progress = false;
  const Importance fast = compute_importance(t, batches, io);
  const EvalResult fast_eval = evaluate(s, &t, d, eo);
  ScopedGenericKernels g;
  const Importance generic = compute_importance(t, batches, io);
  const EvalResult generic_eval = evaluate(s, &t, d, eo);
  EXPECT_TRUE(generic.hidden.device().is_cpu());
  EXPECT_LT(max_abs_diff(fast.hidden, generic.hidden), 1e-4 * (1 + fast.hidden.abs().max().item<double>()));
  for (size_t l = 0; l < fast.layers.size(); ++l) {
    EXPECT_LT(max_abs_diff(fast.layers[l].heads, generic.layers[l].heads), 1e-4) << l;
    EXPECT_LT(max_abs_diff(fast.layers[l].ffn, generic.layers[l].ffn), 1e-4) << l;
  }
  EXPECT_LT(max_abs_diff(fast.block_influence, generic.block_influence), 1e-5);
  EXPECT_LT(max_abs_diff(fast.layer_drop_loss, generic.layer_drop_loss), 1e-4);
  EXPECT_NEAR(generic_eval.mean_nll, fast_eval.mean_nll, 1e-5);
  EXPECT_NEAR(generic_eval.kl_to_teacher, fast_eval.kl_to_teacher, 1e-5);
  EXPECT_EQ(generic_eval.tokens, fast_eval.tokens);
}

// Importance streamed one block at a time (what a GPU smaller than the model runs) gives the
// scores of the whole forward, up to float summation order.
TEST(DevicePath, ImportanceStreamedBlockByBlockEqualsTheWholeForward) {
  LlamaModel t = teacher_model();
  t.config.layers[1].num_key_value_heads = 4;  // blocks of different shapes
  t.config.layers[1].intermediate_size = 96;
  t.weights = random_weights(t.config, 22, 0.2);
  const std::vector<at::Tensor> batches =
      test::random_text(2048, 256, 4).sequential_batches(4, 32, 3);
  for (Aggregation agg : {Aggregation::kMean, Aggregation::kBatchL2}) {
    ImportanceOptions io;
    io.show_progress = false;
    io.aggregation = agg;
    const Importance whole = compute_importance(t, batches, io);
    io.stream_layers = true;
    const Importance streamed = compute_importance(t, batches, io);
    EXPECT_EQ(streamed.num_tokens, whole.num_tokens);
    EXPECT_EQ(streamed.num_sequences, whole.num_sequences);
    EXPECT_LT(max_abs_diff(streamed.hidden, whole.hidden), 1e-5 * (1 + whole.hidden.abs().max().item<double>()));
    for (size_t l = 0; l < whole.layers.size(); ++l) {
      EXPECT_LT(max_abs_diff(streamed.layers[l].heads, whole.layers[l].heads), 1e-5) << l;
      EXPECT_LT(max_abs_diff(streamed.layers[l].kv_groups, whole.layers[l].kv_groups), 1e-5) << l;
      EXPECT_LT(max_abs_diff(streamed.layers[l].ffn, whole.layers[l].ffn), 1e-5) << l;
    }
    EXPECT_LT(max_abs_diff(streamed.block_influence, whole.block_influence), 1e-6);
  }
  ImportanceOptions drop;
  drop.stream_layers = drop.layer_drop_loss = true;
  test::expect_error<ConfigError>([&] { compute_importance(t, batches, drop); },
                                  {"[importance]", "layer_drop_loss", "block by block"});
}

TEST(DevicePath, Bf16AutocastTrainsThroughTheSameCodeWithFp32MasterWeights) {
  const LlamaModel t = teacher_model();
  const TokenDataset train = test::random_text(4096, 256, 3);
  LlamaModel fp32 = student_model(t), bf16 = student_model(t);
  DistillOptions o = distill_options(6);
  const DistillResult ref = distill(t, fp32, train, o);
  o.precision = Precision::bf16;
  ScopedGenericKernels g;  // what a GPU runs: the ATen ops, under autocast
  const DistillResult mixed = distill(t, bf16, train, o);
  ASSERT_EQ(mixed.loss_curve.size(), 6u);
  // bf16 has an 8-bit mantissa: the losses agree to a few percent, and the run still trains.
  for (size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(mixed.loss_curve[i], ref.loss_curve[i], 0.05 * ref.loss_curve[i] + 1e-3) << i;
  EXPECT_LT(mixed.loss_curve.back(), mixed.loss_curve.front());
  EXPECT_NE(mixed.loss_curve.front(), ref.loss_curve.front());  // bf16 did run
  for (const at::Tensor& p : bf16.weights.parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);  // master weights stay fp32
    EXPECT_FALSE(p.requires_grad());
  }
  // Matrix products in bf16 inside the scope, fp32 again after it (it restores what it found);
  // an fp32 scope changes nothing.
  const at::Tensor a = at::randn({4, 4});
  {
    AutocastScope on(c10::kCPU, Precision::bf16);
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
  {
    AutocastScope off(c10::kCPU, Precision::fp32);
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
  }
}

TEST(StageMemory, ThePlanIsTheHandArithmetic) {
  // V 256, D 64, 2 layers of H 4, G 2, Hd 16, F 128, untied.
  const ModelConfig c = small_config();
  const int64_t N = c.num_parameters();
  // embed + head 2 x 256 x 64 = 32768, final norm 64; per layer: norms 2 x 64, q 64x64, k and v
  // 2 x 64x32, o 64x64, FFN 3 x 64x128 = 128 + 4096 + 4096 + 4096 + 24576 = 36992.
  ASSERT_EQ(N, 32768 + 64 + 2 * 36992);
  // A forward of 2 x 8 tokens without gradients: weights 4 N; the largest layer's working set
  // per token (7 D + 3 H Hd + 3 G Hd + 4 F + 2 H T) = 448 + 192 + 96 + 512 + 64 = 1312 floats;
  // logits 3 V floats per token.
  const MemoryPlan f = forward_memory(c, 2, 8, /*with_grad=*/false, Precision::fp32);
  ASSERT_EQ(f.parts.size(), 3u);
  EXPECT_EQ(f.parts[0].second, 4 * N);
  EXPECT_EQ(f.parts[1].second, 16 * 1312 * 4);
  EXPECT_EQ(f.parts[2].second, 16 * 3 * 256 * 4);
  // With gradients: every layer's activations (2 x 1312 per token), 6 V of logits.
  const MemoryPlan g = forward_memory(c, 2, 8, /*with_grad=*/true, Precision::fp32);
  EXPECT_EQ(g.parts[1].second, 16 * 2 * 1312 * 4);
  EXPECT_EQ(g.parts[2].second, 16 * 6 * 256 * 4);
  // bf16: + 2 bytes per matrix parameter (all but the 5 norms of 64), activations 2 bytes.
  const MemoryPlan h = forward_memory(c, 2, 8, /*with_grad=*/true, Precision::bf16);
  EXPECT_EQ(h.parts[0].second, 4 * N + 2 * (N - 5 * 64));
  EXPECT_EQ(h.parts[1].second, 16 * 2 * 1312 * 2);
  // Distillation: 4 N + 4 N of weights, 4 N of gradients, 8 N of AdamW state.
  const MemoryPlan d = distill_memory(c, c, 2, 8, Precision::fp32);
  EXPECT_EQ(d.parts[0].second + d.parts[1].second + d.parts[2].second + d.parts[3].second, 20 * N);
  EXPECT_EQ(d.total(), 20 * N + 16 * 2 * 1312 * 4 + 16 * 1312 * 4 + 16 * 6 * 256 * 4);
}

TEST(StageMemory, APlanThatDoesNotFitIsRefusedWithItsNumbers) {
  MemoryPlan p;
  p.parts = {{"teacher weights", int64_t(60) << 30}, {"logits", int64_t(20) << 30}};
  const c10::Device gpu(c10::kCUDA, 0);
  EXPECT_NO_THROW(check_fits(p, gpu, int64_t(100) << 30, "distill"));  // 80 of 90 usable
  EXPECT_NO_THROW(check_fits(p, gpu, 0, "distill"));                   // unknown: no check
  test::expect_error<ConfigError>([&] { check_fits(p, gpu, int64_t(80) << 30, "distill"); },
                                  {"[distill]", "does not fit cuda:0", "80.00 GiB",
                                   "teacher weights 60.00 GiB", "logits 20.00 GiB",
                                   "80.00 GiB are free", "--batch-size"});
  // On the CPU nothing is refused (the models are in memory already).
  EXPECT_NO_THROW(check_fits_device(p, c10::kCPU, "distill"));
}

TEST(StageMemory, ThePlanBoundsTheMeasuredPeakOfADistillation) {
  install_counting_allocator();
  const LlamaModel t = teacher_model();
  const TokenDataset train = test::random_text(8192, 256, 3);
  LlamaModel s = student_model(t);
  DistillOptions o = distill_options(2);
  o.batch_size = 8;
  o.seq_len = 64;
  o.token_budget = 2 * 8 * 64;
  ScopedGenericKernels g;  // the path whose memory the plan describes
  reset_counted_peak();
  distill(t, s, train, o);
  const int64_t peak = counted_bytes_peak();
  const int64_t planned = distill_memory(t.config, s.config, 8, 64, Precision::fp32).total();
  EXPECT_LE(peak, planned) << "measured " << peak << " planned " << planned;
  EXPECT_GE(peak * 3, planned) << "measured " << peak << " planned " << planned;
}

}  // namespace
}  // namespace ac
