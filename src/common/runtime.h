// Process-wide runtime settings: torch threads, logging, timing.
#pragma once
#include <chrono>
#include <string>

namespace ac {

/// Sets torch's intra-op threads to the core count (libtorch 1.13 defaults to 1), unless
/// AC_NUM_THREADS is set. Returns the count used. Safe to call more than once.
int init_torch_threads();

/// Makes OpenBLAS use the kernels this CPU can run. OpenBLAS 0.3.21 (Debian 12) picks its kernels
/// from the CPUID family/model, and on CPUs it does not know (Sapphire Rapids as a KVM guest,
/// "Intel Xeon Processor") it falls back to "Prescott": SSE3 kernels, 5x slower GEMMs (on such a
/// guest, 2048^3 fp32 at 60 GFLOP/s vs 300 with the AVX-512 kernels; docs/benchmarks.md, "OpenBLAS
/// ran its SSE3 kernels on this CPU"). OpenBLAS reads the choice once, when it is loaded, from
/// OPENBLAS_CORETYPE, so the fix is to re-execute the program with that variable set: when
/// OPENBLAS_CORETYPE is unset, the BLAS is OpenBLAS (found through dlsym, no link dependency), its
/// core is not one with AVX2 kernels and the CPU has AVX2 + FMA or AVX-512, this sets
/// OPENBLAS_CORETYPE to Cooperlake (AVX-512 BF16), SkylakeX (AVX-512 F/BW/DQ/VL) or Haswell (AVX2 +
/// FMA) and execv's /proc/self/exe with the same arguments (read from /proc/self/cmdline). It
/// returns only when nothing needed changing or the exec failed. AC_KEEP_BLAS_CORE=1 keeps
/// OpenBLAS's own choice.
/// With AC_CPU_ISA=avx2 or scalar (common/simd.h, kernel_isa) the libraries are capped at AVX2
/// instead, so that an AVX-512 machine runs what an AVX2 one (AMD EPYC Zen 3) runs: oneDNN
/// through ONEDNN_MAX_CPU_ISA=AVX2 and PyTorch's CPU kernels through ATEN_CPU_CAPABILITY=avx2
/// (each set only when unset), and OpenBLAS through core Haswell (also replacing an AVX-512
/// core that OPENBLAS_CORETYPE names). A bad AC_CPU_ISA is left for the first kernel to report
/// (ConfigError). Call first thing in main (or from a static initializer), before any thread
/// starts and before any GEMM.
void ensure_fast_blas_kernels();

/// The BLAS in use and its kernels, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ... core Cooperlake", or
/// "" when the BLAS is not OpenBLAS. Recorded in profiles: tables measured with other kernels
/// do not describe this process.
std::string blas_description();

/// Number of online CPU cores.
int cpu_cores();

/// Informational line on stderr ("[stage] text"); silenced by AC_QUIET=1.
void log_info(const std::string& line);
void log_warn(const std::string& line);

/// Returns the allocator's freed-but-resident pages to the system: under jemalloc (the CLI's
/// allocator, found at run time through dlsym so the library does not depend on it) every
/// arena's dirty and muzzy pages are purged (mallctl "arena.<MALLCTL_ARENAS_ALL>.purge"); under
/// any other allocator it does nothing. Called between the batches of a streaming stage so that
/// its peak memory is one batch's working set however many batches it runs;
/// a purge costs the page faults of re-touching the next batch's buffers. Returns true if it
/// purged.
bool release_free_memory();

/// Monotonic seconds since an arbitrary origin.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Today's date, UTC, "YYYY-MM-DD".
std::string today_utc();

}  // namespace ac
