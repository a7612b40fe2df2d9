// What the CPU's vector units can do, which of them the hand-written kernels use, and the vector
// math they share (model/kernels.cpp, model/causal_attention.cpp, distill/fused_kl.cpp).
//
// Each hand-written kernel has a plain scalar reference (the truth its tests compare to) and,
// where the CPU has them, AVX2 + FMA (8 lanes: AMD Zen 2/3, Intel Haswell and later) and
// AVX-512F (16 lanes) variants compiled with __attribute__((target(...))), so that one binary
// built without -march runs on all of them. Every kernel reads kernel_isa() when it is called
// and runs the variant it names.
#pragma once
#include <immintrin.h>

#include <string>
#include <vector>

// glibc's libmvec (x86_64 vector function ABI, "Vector ABI for x86": _ZGVeN16v_ = AVX-512,
// 16 lanes, _ZGVdN8v_ = AVX2, 8 lanes; both not masked): expf over the lanes, accurate to
// 4 ulp, inf / NaN as expf. Arguments outside its fast range (about [-87, 88]) send the whole
// vector through scalar expf, 5x slower: callers clamp first. Linked through -lmvec
// (CMakeLists.txt).
extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512 x);
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256 x);

namespace ac {

/// The instruction sets a hand-written kernel has a variant for, narrowest first (the order is
/// used: a CPU that has one has every one before it).
///   scalar  plain C++ (what the compiler makes of it without -march: SSE2 at best)
///   avx2    AVX2 + FMA (both are required)
///   avx512  AVX-512F
enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2 };

/// "scalar", "avx2" or "avx512": the spelling AC_CPU_ISA takes.
const char* isa_name(CpuIsa isa);

/// The widest CpuIsa this CPU runs (CPUID through __builtin_cpu_supports), read once.
CpuIsa cpu_isa();

/// The kernels' ISA for an AC_CPU_ISA value `value` (nullptr or "" = unset) on a CPU whose
/// widest is `cpu`: unset gives `cpu`, "scalar" / "avx2" / "avx512" give that ISA. Throws
/// ConfigError naming AC_CPU_ISA on any other value (listing the choices) and on an ISA the CPU
/// lacks (saying what it has). Takes the string so that tests need no setenv.
CpuIsa parse_kernel_isa(const char* value, CpuIsa cpu);

/// The ISA the hand-written kernels run now: the widest the CPU has, lowered by the
/// environment variable AC_CPU_ISA=avx2 | scalar (| avx512, the widest on an AVX-512 CPU), or
/// by a ScopedKernelIsa. AC_CPU_ISA is read on the first call (ensure_fast_blas_kernels,
/// common/runtime.h, makes that call first thing in main); later calls are one atomic load, so
/// kernels call this each time they run. Throws ConfigError as parse_kernel_isa.
///
/// AC_CPU_ISA=avx2 (or scalar) on an AVX-512 machine runs what an AVX2 machine (AMD EPYC Zen 3)
/// runs: it also caps the libraries' kernels at AVX2 when ensure_fast_blas_kernels() runs
/// before any of them (as the CLI, the benchmark and the test binary do): oneDNN through
/// ONEDNN_MAX_CPU_ISA=AVX2, PyTorch's own CPU kernels through ATEN_CPU_CAPABILITY=avx2 (each
/// only when unset), and OpenBLAS through OPENBLAS_CORETYPE=Haswell (replacing an AVX-512
/// core named there). "scalar" concerns only the hand-written kernels: the libraries get AVX2.
CpuIsa kernel_isa();

/// Whether AC_CPU_ISA is set (to a value that is not the CPU's widest, or to it: both count).
bool kernel_isa_forced();

/// Runs the hand-written kernels at `isa` for its lifetime (tests, benchmarks), then restores
/// the previous ISA. Not for concurrent use from several threads. Throws ConfigError for an ISA
/// this CPU lacks.
class ScopedKernelIsa {
 public:
  explicit ScopedKernelIsa(CpuIsa isa);
  ~ScopedKernelIsa();
  ScopedKernelIsa(const ScopedKernelIsa&) = delete;
  ScopedKernelIsa& operator=(const ScopedKernelIsa&) = delete;

 private:
  CpuIsa saved_;
};

/// The ISAs this CPU runs, narrowest first: {scalar, avx2, avx512} cut at cpu_isa().
std::vector<CpuIsa> supported_isas();

/// One line for logs and benchmarks: "avx2 (AC_CPU_ISA; the CPU has avx512)" or "avx512".
std::string kernel_isa_description();

}  // namespace ac

// AVX2 helpers shared by the kernels' AVX2 variants; inline into functions compiled with
// target("avx2,fma").
namespace ac::avx2 {

#define AC_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

/// Lanes [0, min(left, 8)) set (all bits), the rest 0: the mask of _mm256_maskload_ps.
AC_AVX2_INLINE __m256i lanes_below(int64_t left) {
  const int n = left >= 8 ? 8 : int(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The lanes of p that k selects, `fill` elsewhere (lanes outside k are not read).
AC_AVX2_INLINE __m256 load_or(const float* p, __m256i k, __m256 fill) {
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}

/// Largest lane (the first operand's when a comparison is with a NaN, as _mm256_max_ps).
AC_AVX2_INLINE float reduce_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

/// Sum of the 8 lanes.
AC_AVX2_INLINE float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Sum of the 4 lanes.
AC_AVX2_INLINE double reduce_add(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/// lo += v[0, 4), hi += v[4, 8), in double: sums over a vocabulary lose ~1e-5 in float.
AC_AVX2_INLINE void add_pd(__m256d& lo, __m256d& hi, __m256 v) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

#undef AC_AVX2_INLINE

}  // namespace ac::avx2
