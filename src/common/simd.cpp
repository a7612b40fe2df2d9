#include "common/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ac {
namespace {

// The kernels' ISA as an int; -1 until the first kernel_isa() has read AC_CPU_ISA. An atomic so
// that the worker threads of a kernel may read it while a test's ScopedKernelIsa has set it.
std::atomic<int> g_kernel_isa{-1};
std::atomic<bool> g_forced{false};

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::scalar: return "scalar";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
  }
  return "?";
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return CpuIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
    return CpuIsa::scalar;
  }();
  return isa;
}

CpuIsa parse_kernel_isa(const char* value, CpuIsa cpu) {
  if (!value || !*value) return cpu;
  CpuIsa want;
  if (std::strcmp(value, "scalar") == 0) want = CpuIsa::scalar;
  else if (std::strcmp(value, "avx2") == 0) want = CpuIsa::avx2;
  else if (std::strcmp(value, "avx512") == 0) want = CpuIsa::avx512;
  else
    throw ConfigError(msg("kernel_isa", "AC_CPU_ISA='{}': expected one of avx512, avx2, scalar "
                          "(or unset: the widest this CPU has, {})", value, isa_name(cpu)));
  if (int(want) > int(cpu))
    throw ConfigError(msg("kernel_isa", "AC_CPU_ISA={} asks for an instruction set this CPU "
                          "lacks: it has {} at most; unset AC_CPU_ISA or ask for one up to {}",
                          value, isa_name(cpu), isa_name(cpu)));
  return want;
}

CpuIsa kernel_isa() {
  int v = g_kernel_isa.load(std::memory_order_relaxed);
  if (v >= 0) return CpuIsa(v);
  const char* env = std::getenv("AC_CPU_ISA");
  const CpuIsa isa = parse_kernel_isa(env, cpu_isa());  // throws before anything is cached
  g_forced.store(env && *env);
  int expected = -1;  // a ScopedKernelIsa that came first wins
  g_kernel_isa.compare_exchange_strong(expected, int(isa));
  return CpuIsa(g_kernel_isa.load());
}

bool kernel_isa_forced() {
  kernel_isa();
  return g_forced.load();
}

ScopedKernelIsa::ScopedKernelIsa(CpuIsa isa) : saved_(kernel_isa()) {
  parse_kernel_isa(isa_name(isa), cpu_isa());  // refuses an ISA the CPU lacks
  g_kernel_isa.store(int(isa));
}

ScopedKernelIsa::~ScopedKernelIsa() { g_kernel_isa.store(int(saved_)); }

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512})
    if (int(isa) <= int(cpu_isa())) out.push_back(isa);
  return out;
}

std::string kernel_isa_description() {
  const CpuIsa isa = kernel_isa();
  std::string out = isa_name(isa);
  if (kernel_isa_forced()) out += std::string(" (AC_CPU_ISA; the CPU has ") + isa_name(cpu_isa()) + ")";
  return out;
}

}  // namespace ac
