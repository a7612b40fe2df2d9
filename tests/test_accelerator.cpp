// The GPU path where no GPU is (common/accelerator.h): the CPU is the default device and costs
// nothing to synchronize; a CUDA device, a GPU scenario, a GPU profile and a GPU profile run
// each fail with one clear error in a build without CUDA; GPU names match their device specs;
// a GPU profile's identity survives save -> load; the model's device-placed tensors (KV cache,
// RoPE tables, causal mask, weights) land on the device asked for.
#include <gtest/gtest.h>

#include "common/accelerator.h"
#include "common/error.h"
#include "hardware/device.h"
#include "hardware/measure.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "hardware/validate.h"
#include "test_util.h"

namespace ac {
namespace {

DeviceSpec gpu_spec(const std::string& name, const std::string& display) {
  DeviceSpec d;
  d.name = name;
  d.kind = "cuda";
  d.display_name = display;
  return d;
}

TEST(Accelerator, DriverNamesMatchTheirDeviceSpecs) {
  const DeviceSpec h200 = gpu_spec("h200", "NVIDIA H200 SXM 141GB");
  const DeviceSpec a100 = gpu_spec("a100-sxm", "NVIDIA A100 SXM4 80GB");
  const DeviceSpec rtx = gpu_spec("rtx-4090", "NVIDIA GeForce RTX 4090 (24 GB GDDR6X)");
  EXPECT_TRUE(gpu_name_matches(h200, "NVIDIA H200"));
  EXPECT_TRUE(gpu_name_matches(h200, "nvidia h200 nvl"));
  EXPECT_FALSE(gpu_name_matches(h200, "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(gpu_name_matches(a100, "NVIDIA A100-SXM4-80GB"));  // words split at dashes
  EXPECT_TRUE(gpu_name_matches(rtx, "NVIDIA GeForce RTX 4090"));
  EXPECT_FALSE(gpu_name_matches(rtx, "NVIDIA GeForce RTX 4080"));
  EXPECT_FALSE(gpu_name_matches(h200, "NVIDIA"));  // no model word
  EXPECT_FALSE(gpu_name_matches(h200, ""));
  DeviceSpec cpu = h200;
  cpu.kind = "cpu";
  EXPECT_FALSE(gpu_name_matches(cpu, "NVIDIA H200"));
  // Every GPU spec shipped in devices/ is matched by its own driver-style name.
  for (const char* n : {"h200", "h100-sxm", "a100-sxm", "b200", "l40s", "rtx-4090", "rtx-5070",
                        "rtx-5080"}) {
    const DeviceSpec d = load_device(n);
    const std::string model = d.display_name.substr(0, d.display_name.find(" ("));
    EXPECT_TRUE(gpu_name_matches(d, model)) << n << ": " << model;
  }
}

TEST(Accelerator, TheCpuIsTheDefaultAndCudaIsRefusedWithoutIt) {
  EXPECT_EQ(compute_device("cpu", "cpu"), c10::Device(c10::kCPU));
  EXPECT_NO_THROW(device_synchronize(c10::kCPU));
  EXPECT_EQ(device_allocated_bytes_now(c10::kCPU), 0);
  test::expect_error<ConfigError>([] { compute_device("tpu", "x"); }, {"device 'x'", "'tpu'"});
  if (cuda_compiled()) GTEST_SKIP() << "a CUDA build: the refusals below are for CPU builds";
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_EQ(cuda_device_name(0), "");
  test::expect_error<ConfigError>([] { compute_device("cuda", "h200"); },
                                  {"device 'h200'", "this build has no CUDA",
                                   "scripts/build_cuda.sh"});
  test::expect_error<ConfigError>([] { device_synchronize(c10::Device(c10::kCUDA, 0)); },
                                  {"build without CUDA"});
  // A GPU scenario of the native engine: not measurable here, with the reason.
  const Scenario s = find_scenario("h200-native");
  EXPECT_EQ(s.device_spec.kind, "cuda");
  const std::string why = not_measurable_reason(s);
  EXPECT_NE(why.find("device h200 is a GPU and this build has no CUDA"), std::string::npos) << why;
  test::expect_error<ConfigError>([&] { measurement_device(s); },
                                  {"scenario 'h200-native'", "no CUDA"});
  // profile --device cuda in a CPU build: refused before anything is measured.
  ProfileOptions o;
  o.gpu = s.device_spec;
  o.progress = false;
  test::expect_error<ConfigError>([&] { run_profile({stories15m_shape()}, s.workload, o); },
                                  {"device 'h200'", "this build has no CUDA"});
}

TEST(Accelerator, AGpuProfileKeepsItsIdentityAndIsRefusedOnTheCpu) {
  Profile p;
  p.identity.device = "h200";
  p.identity.gpu_model = "NVIDIA H200";
  p.identity.cuda = "CUDA runtime 12.4, driver 12.8";
  p.tables["add"].dim_names = {"M", "D"};
  p.tables["add"].entries.push_back({{1, 8}, 0.01, 0.011, 0.05, 7});
  const test::TempDir dir;
  const fs::path f = dir.path / "p.json";
  save_profile(f, p);
  const Profile back = load_profile(f);
  EXPECT_EQ(back.identity.device, "h200");
  EXPECT_EQ(back.identity.gpu_model, "NVIDIA H200");
  EXPECT_EQ(back.identity.cuda, "CUDA runtime 12.4, driver 12.8");
  EXPECT_EQ(profile_device(Profile{}), c10::Device(c10::kCPU));  // a CPU profile
  if (cuda_compiled()) GTEST_SKIP() << "a CUDA build";
  test::expect_error<ConfigError>([&] { profile_device(back); }, {"this build has no CUDA"});
  test::expect_error<ConfigError>([&] { check_profile_is_this_machine(back); },
                                  {"this build has no CUDA"});
}

TEST(Accelerator, ModelTensorsLandOnTheDeviceAsked) {
  // Only the CPU is here; the point is that every builder takes the device and keeps values.
  const ModelConfig c = stories15m_shape();
  const c10::Device cpu(c10::kCPU);
  const KVCache kv = KVCache::allocate(c, 2, 5, cpu);
  ASSERT_EQ(kv.k.size(), size_t(c.num_layers()));
  EXPECT_EQ(kv.k[0].device(), cpu);
  EXPECT_EQ(kv.k[0].sizes(), (std::vector<int64_t>{2, 6, 5, 48}));
  const auto [cos, sin] = rope_tables(c, 48, 3, 4, cpu);
  const auto [cos0, sin0] = rope_tables(c, 48, 3, 4);
  EXPECT_TRUE(at::equal(cos, cos0));
  EXPECT_TRUE(at::equal(sin, sin0));
  EXPECT_TRUE(at::equal(causal_allowed(2, 3, cpu), causal_allowed(2, 3)));
  ModelConfig small = ModelConfig::uniform(40, 16, 2, LayerConfig{2, 1, 8, 24});
  small.tie_word_embeddings = true;
  const ModelWeights w = random_weights(small, 3);
  const ModelWeights on = to_device(small, w, cpu);
  EXPECT_TRUE(on.lm_head.is_same(on.embed_tokens));  // tying kept
  EXPECT_TRUE(at::equal(on.layers[1].down_proj, w.layers[1].down_proj));
}

}  // namespace
}  // namespace ac
