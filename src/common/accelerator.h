// The compute device the profile and the native engine run on: this CPU, or a CUDA GPU in a
// build against a CUDA-enabled libtorch (docs/gpu.md; docs/design.md, "GPUs from the spec sheet:
// the roofline"), compiled out cleanly where there is none.
//
// CMake defines AC_WITH_CUDA=1 when the libtorch it found was built with CUDA
// (TORCH_CUDA_LIBRARIES is set, e.g. PyTorch 2.x's pip package, located with
// `python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'`). Without it, every function
// here still exists: the CUDA ones report "no CUDA" and a CUDA device is refused with one clear
// error, so callers need no #ifdef.
//
// Timing on a GPU: kernels run asynchronously, so a latency is read after
// device_synchronize(); the peak memory is the caching allocator's peak of allocated bytes
// (c10::cuda::CUDACachingAllocator device stats), the GPU counterpart of the counting CPU
// allocator (common/cpu_allocator.h).
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace ac {

/// True when this binary was built against a CUDA-enabled libtorch (AC_WITH_CUDA).
bool cuda_compiled();

/// CUDA devices visible to this process: 0 in a CPU-only build or without a GPU.
int cuda_device_count();

/// The GPU's name as the driver reports it ("NVIDIA H200"), "" when `index` is not a visible
/// CUDA device or the build has no CUDA.
std::string cuda_device_name(int index = 0);

/// "CUDA runtime 12.4, driver 12.8" (compile-time runtime and the driver's version), "" without
/// CUDA. Recorded in a GPU profile's identity beside the torch version.
std::string cuda_versions();

/// The torch device a device spec of `kind` ("cpu" or "cuda") runs on: kCPU for "cpu"; cuda:0
/// for "cuda" when the build has CUDA and a GPU is visible. Throws ConfigError naming `device`
/// (the devices/<name>.json stem) and why not otherwise ("this build has no CUDA: build against
/// a CUDA-enabled libtorch (scripts/build_cuda.sh)", "no CUDA device is visible"), or on
/// another kind.
c10::Device compute_device(const std::string& kind, const std::string& device);

/// Waits until every kernel queued on `d` has finished: a no-op on the CPU,
/// c10::cuda::device_synchronize() on a GPU. Throws ConfigError on a CUDA device in a build
/// without CUDA.
void device_synchronize(const c10::Device& d);

/// Resets the GPU caching allocator's peak statistics of `d` (no-op on the CPU, whose peak is
/// the counting allocator's: common/cpu_allocator.h).
void reset_device_peak(const c10::Device& d);

/// Bytes of tensor memory the caching allocator of GPU `d` holds allocated now / at its peak
/// since reset_device_peak (stat "allocated_bytes", all pools). 0 on the CPU.
int64_t device_allocated_bytes_now(const c10::Device& d);
int64_t device_allocated_bytes_peak(const c10::Device& d);

}  // namespace ac
