#include "common/accelerator.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

#include "common/error.h"

#ifdef AC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace ac {

#ifdef AC_WITH_CUDA
bool cuda_compiled() { return true; }

int cuda_device_count() { return int(c10::cuda::device_count()); }

std::string cuda_device_name(int index) {
  if (index < 0 || index >= cuda_device_count()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  return prop.name;
}

static int64_t cuda_free_bytes(int index) {
  size_t free = 0, total = 0;
  if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return int64_t(free);
}

std::string cuda_versions() {
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return fmt::format("CUDA runtime {}.{}, driver {}.{}", CUDART_VERSION / 1000,
                     CUDART_VERSION % 1000 / 10, driver / 1000, driver % 1000 / 10);
}

// Stats of the caching allocator: index 0 of each StatArray is the aggregate over pools
// (StatType::AGGREGATE in every libtorch since 1.x). The type is deduced: it moved from
// c10::cuda::CUDACachingAllocator to c10::CachingDeviceAllocator in PyTorch 2.x.
static auto stats_of(const c10::Device& d) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(d.has_index() ? d.index() : 0);
}
#else
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }
std::string cuda_versions() { return ""; }
static int64_t cuda_free_bytes(int) { return 0; }
#endif

static void check_cuda_compiled(const char* where) {
  if (!cuda_compiled())
    throw ConfigError(msg(where, "a CUDA device in a build without CUDA: build against a "
                                 "CUDA-enabled libtorch (scripts/build_cuda.sh)"));
}

c10::Device compute_device(const std::string& kind, const std::string& device) {
  if (kind == "cpu") return c10::Device(c10::kCPU);
  if (kind != "cuda")
    throw ConfigError(msg("device", "device '{}' has kind '{}': expected 'cpu' or 'cuda'", device,
                          kind));
  if (!cuda_compiled())
    throw ConfigError(msg("device", "device '{}' is a CUDA GPU, but this build has no CUDA: "
                                    "build against a CUDA-enabled libtorch "
                                    "(scripts/build_cuda.sh)", device));
  if (cuda_device_count() < 1)
    throw ConfigError(msg("device", "device '{}' is a CUDA GPU, but no CUDA device is visible "
                                    "to this process (CUDA_VISIBLE_DEVICES, driver)", device));
  return c10::Device(c10::kCUDA, 0);
}

void device_synchronize(const c10::Device& d) {
  if (d.is_cpu()) return;
  check_cuda_compiled("device_synchronize");
#ifdef AC_WITH_CUDA
  c10::cuda::device_synchronize();
#endif
}

void reset_device_peak(const c10::Device& d) {
  if (d.is_cpu()) return;
  check_cuda_compiled("reset_device_peak");
#ifdef AC_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(d.has_index() ? d.index() : 0);
#endif
}

// The caching allocator's "allocated_bytes" of GPU `d`: its current or its peak value.
static int64_t allocated_bytes(const c10::Device& d, bool peak, const char* where) {
  if (d.is_cpu()) return 0;
  check_cuda_compiled(where);
#ifdef AC_WITH_CUDA
  const auto s = stats_of(d).allocated_bytes[0];  // a copy: stats_of returns a temporary
  return peak ? s.peak : s.current;
#else
  return 0;
#endif
}

int64_t device_allocated_bytes_now(const c10::Device& d) {
  return allocated_bytes(d, /*peak=*/false, "device_allocated_bytes_now");
}

int64_t device_allocated_bytes_peak(const c10::Device& d) {
  return allocated_bytes(d, /*peak=*/true, "device_allocated_bytes_peak");
}

// ---------------------------------------------------------------------------------------------
// --device, --precision, autocast, the fast path's guard

c10::Device parse_device(const std::string& value, const std::string& flag) {
  if (value == "cpu") return c10::Device(c10::kCPU);
  static const std::regex cuda_re("cuda(:([0-9]{1,3}))?");
  std::smatch m;
  if (!std::regex_match(value, m, cuda_re))
    throw ConfigError(msg("device", "{} '{}': expected cpu, cuda or cuda:N", flag, value));
  const int index = m[2].matched ? std::stoi(m[2].str()) : 0;
  if (!cuda_compiled())
    throw ConfigError(msg("device", "{} '{}' is a CUDA GPU, but this build has no CUDA: build "
                                    "against a CUDA-enabled libtorch (scripts/build_cuda.sh), or "
                                    "{} cpu", flag, value, flag));
  const int n = cuda_device_count();
  if (index >= n)
    throw ConfigError(msg("device", "{} '{}': {} CUDA device(s) visible to this process (0 to "
                                    "{}; CUDA_VISIBLE_DEVICES, driver)", flag, value, n, n - 1));
  return c10::Device(c10::kCUDA, c10::DeviceIndex(index));
}

std::string device_name(const c10::Device& d) {
  return d.is_cpu() ? "cpu" : fmt::format("cuda:{}", d.has_index() ? int(d.index()) : 0);
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::string describe_precision(Precision p) {
  return p == Precision::bf16 ? "bf16 autocast (fp32 master weights and loss)" : "fp32";
}

Precision parse_precision(const std::string& value, const c10::Device& d,
                          const std::string& flag) {
  if (value == "auto") return d.is_cuda() ? Precision::bf16 : Precision::fp32;
  if (value == "fp32") return Precision::fp32;
  if (value == "bf16") return Precision::bf16;
  throw ConfigError(msg("precision", "{} '{}': expected auto, fp32 or bf16", flag, value));
}

// The autocast switches moved in PyTorch 2.4 from one function per device type
// (set_enabled = CUDA, set_cpu_enabled) to functions taking the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
static bool autocast_enabled(bool cuda) {
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
}
static void set_autocast(bool cuda, bool on) {
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on);
}
static at::ScalarType autocast_dtype(bool cuda) {
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
}
static void set_autocast_dtype(bool cuda, at::ScalarType t) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, t);
}
#else
static bool autocast_enabled(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
static void set_autocast(bool cuda, bool on) {
  cuda ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on);
}
static at::ScalarType autocast_dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
static void set_autocast_dtype(bool cuda, at::ScalarType t) {
  cuda ? at::autocast::set_autocast_gpu_dtype(t) : at::autocast::set_autocast_cpu_dtype(t);
}
#endif

AutocastScope::AutocastScope(const c10::Device& d, Precision p) {
  if (p != Precision::bf16) return;
  if (!d.is_cpu()) check_cuda_compiled("AutocastScope");
  active_ = true;
  cuda_ = d.is_cuda();
  was_enabled_ = autocast_enabled(cuda_);
  was_dtype_ = autocast_dtype(cuda_);
  set_autocast_dtype(cuda_, at::kBFloat16);
  set_autocast(cuda_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cache of bf16 copies of the weights lives for the outermost scope (torch.autocast).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_);
  set_autocast_dtype(cuda_, was_dtype_);
}

static int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

int64_t device_free_bytes(const c10::Device& d) {
  if (d.is_cpu()) return mem_available_bytes();
  check_cuda_compiled("device_free_bytes");
  return cuda_free_bytes(d.has_index() ? d.index() : 0);
}

static std::atomic<int> g_generic_scopes{0};

bool generic_kernels_forced() {
  if (g_generic_scopes.load(std::memory_order_relaxed) > 0) return true;
  const char* e = std::getenv("AC_KERNELS");  // read per call: a test may switch it
  return e && std::strcmp(e, "generic") == 0;
}

bool cpu_fast_path(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (t->scalar_type() != at::kFloat || !t->device().is_cpu()) return false;
  return !generic_kernels_forced();
}

ScopedGenericKernels::ScopedGenericKernels() { g_generic_scopes.fetch_add(1); }
ScopedGenericKernels::~ScopedGenericKernels() { g_generic_scopes.fetch_sub(1); }

}  // namespace ac
