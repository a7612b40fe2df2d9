// What the CPU's vector units can do, and the vector math the hand-written kernels share
// (model/kernels.cpp, model/causal_attention.cpp, distill/fused_kl.cpp).
#pragma once
#include <immintrin.h>

// glibc's libmvec (x86_64 vector function ABI, "Vector ABI for x86": _ZGVeN16v_ = AVX-512,
// 16 lanes, not masked): expf over 16 floats, accurate to 4 ulp, inf / NaN as expf. Arguments
// outside its fast range (about [-87, 88]) send the whole vector through scalar expf, 5x slower:
// callers clamp first.
extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512 x);

namespace ac {

/// Whether this CPU runs AVX-512F (the hand-written kernels' fast path), read once per process.
inline bool cpu_has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return bool(__builtin_cpu_supports("avx512f"));
  }();
  return yes;
}

}  // namespace ac
