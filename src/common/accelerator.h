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
#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <initializer_list>
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

// ---------------------------------------------------------------------------------------------
// The device a stage computes on (--device), its precision, and the CPU-only kernels' guard.

/// The device of a `--device` value: "cpu", "cuda" (= cuda:0) or "cuda:N". Throws ConfigError
/// naming `flag` and the value: another spelling ("expected cpu, cuda or cuda:N"), a CUDA device
/// in a build without CUDA (naming scripts/build_cuda.sh), no visible GPU, or N outside the
/// visible GPUs.
c10::Device parse_device(const std::string& value, const std::string& flag = "--device");

/// "cpu" or "cuda:N": how logs and reports name a device.
std::string device_name(const c10::Device& d);

/// The arithmetic of a stage's forward and backward passes. fp32 keeps every op in float;
/// bf16 runs matrix products in bfloat16 under autocast (torch.autocast: the weights and the
/// optimizer state stay fp32, softmax, log-softmax and the losses accumulate in fp32) —
/// Micikevicius et al. 2018, "Mixed Precision Training", with bf16 in place of fp16 (no loss
/// scaling: bf16 has fp32's exponent range).
enum class Precision { fp32, bf16 };

/// "fp32" or "bf16".
const char* precision_name(Precision p);

/// What a log says of it: "fp32" or "bf16 autocast (fp32 master weights and loss)".
std::string describe_precision(Precision p);

/// The precision of an "auto" / "fp32" / "bf16" value on `d`: auto is bf16 on a CUDA GPU and
/// fp32 on the CPU (whose bf16 is emulated, slower than fp32). Throws ConfigError naming `flag`
/// on another value.
Precision parse_precision(const std::string& value, const c10::Device& d,
                          const std::string& flag = "--precision");

/// Turns autocast on for `d`'s device type with bf16 while alive when `p` is bf16, and does
/// nothing for fp32 (RAII; restores the previous state and clears autocast's weight-cast cache
/// on exit). bf16 on the CPU is allowed (the tests run the mixed-precision path there).
class AutocastScope {
 public:
  AutocastScope(const c10::Device& d, Precision p);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false, cuda_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

/// Bytes of memory a stage may plan for on `d`: on a GPU the driver's free memory
/// (cudaMemGetInfo), on the CPU the kernel's MemAvailable (/proc/meminfo), 0 when unknown.
int64_t device_free_bytes(const c10::Device& d);

/// Whether the hand-written CPU kernels (the oneDNN GEMM, the AVX RMSNorm / SwiGLU / RoPE, the
/// fused causal attention, the fused KL) may take these tensors: every one fp32 and on the CPU,
/// and the generic path not forced. Otherwise callers run the ATen ops those kernels replace,
/// which every device has (cuBLAS and CUDA kernels on a GPU). Forced by AC_KERNELS=generic
/// (read on each call) or a ScopedGenericKernels, so that the tests run the generic path on the
/// CPU against the fast one.
bool cpu_fast_path(std::initializer_list<const at::Tensor*> ts);

/// Whether the generic path is forced now (AC_KERNELS=generic or a live ScopedGenericKernels).
bool generic_kernels_forced();

/// Forces the generic (device-independent) path while alive (tests).
class ScopedGenericKernels {
 public:
  ScopedGenericKernels();
  ~ScopedGenericKernels();
  ScopedGenericKernels(const ScopedGenericKernels&) = delete;
  ScopedGenericKernels& operator=(const ScopedGenericKernels&) = delete;
};

}  // namespace ac
