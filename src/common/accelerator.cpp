#include "common/accelerator.h"

#include <fmt/format.h>

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

}  // namespace ac
