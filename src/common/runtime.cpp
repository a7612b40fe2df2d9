#include "common/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <vector>

#include "common/error.h"
#include "common/simd.h"

namespace ac {

bool release_free_memory() {
  // int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  static const Mallctl mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (!mallctl) return false;
  // 4096 = MALLCTL_ARENAS_ALL (jemalloc.h): every arena at once.
  return mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0;
}

namespace {
using CharFn = char* (*)();
CharFn openblas_fn(const char* name) { return reinterpret_cast<CharFn>(::dlsym(RTLD_DEFAULT, name)); }

// OpenBLAS's kernel set ("Prescott", "Cooperlake", ...); nullopt when the BLAS is not OpenBLAS.
std::optional<std::string> openblas_core() {
  static const CharFn corename = openblas_fn("openblas_get_corename");
  if (!corename) return std::nullopt;
  const char* name = corename();
  return std::string(name ? name : "?");
}

// The OpenBLAS core this CPU should use, or "" if none of the fast ones applies.
std::string best_openblas_core() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    std::FILE* f = std::fopen("/proc/cpuinfo", "r");
    bool bf16 = false;
    if (f) {
      char line[8192];
      while (!bf16 && std::fgets(line, sizeof line, f))
        bf16 = std::strncmp(line, "flags", 5) == 0 && std::strstr(line, " avx512_bf16");
      std::fclose(f);
    }
    return bf16 ? "Cooperlake" : "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

// AC_CPU_ISA below AVX-512 (common/simd.h): the libraries' kernels are capped at AVX2 too, so
// that a run here executes what an AVX2 machine executes. Each library reads its variable once,
// at its first use: this runs before any. Returns whether the cap applies.
bool cap_libraries_at_avx2() {
  bool forced = false;
  CpuIsa isa = cpu_isa();
  try {
    isa = kernel_isa();
    forced = kernel_isa_forced();
  } catch (const ConfigError&) {
    return false;  // a bad AC_CPU_ISA: the first kernel that runs reports it
  }
  if (!forced || isa == CpuIsa::avx512) return false;
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX2", /*overwrite=*/0);
  ::setenv("ATEN_CPU_CAPABILITY", "avx2", /*overwrite=*/0);
  return true;
}

bool is_avx512_core(const char* name) {
  for (const char* wide : {"skylakex", "cooperlake", "sapphirerapids"})
    if (strcasecmp(name, wide) == 0) return true;
  return false;
}

// Re-executes this program with OPENBLAS_CORETYPE=core (returns only if the exec failed).
void reexec_with_openblas_core(const std::string& core) {
  // The arguments as the kernel holds them: NUL-separated in /proc/self/cmdline.
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (!f) return;
  std::string all;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) all.append(buf, n);
  std::fclose(f);
  std::vector<char*> args;
  for (size_t i = 0; i < all.size(); i += std::strlen(&all[i]) + 1) args.push_back(&all[i]);
  if (args.empty()) return;
  args.push_back(nullptr);
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before ? before : "";
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::execv("/proc/self/exe", args.data());
  // exec failed: carry on with OpenBLAS's choice
  if (before) ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else ::unsetenv("OPENBLAS_CORETYPE");
}
}  // namespace

void ensure_fast_blas_kernels() {
  const bool capped = cap_libraries_at_avx2();
  if (const char* keep = std::getenv("AC_KEEP_BLAS_CORE"); keep && keep[0] == '1') return;
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  // A core named by the caller stands, unless it is an AVX-512 one and AC_CPU_ISA caps at AVX2.
  if (asked && !(capped && is_avx512_core(asked))) return;
  const std::optional<std::string> core = openblas_core();
  if (!core) return;  // not OpenBLAS
  std::string want;
  if (capped) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    if (strcasecmp(core->c_str(), "haswell") == 0 || strcasecmp(core->c_str(), "zen") == 0) return;
    want = "Haswell";
  } else {
    for (const char* fast : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
      if (strcasecmp(core->c_str(), fast) == 0) return;
    want = best_openblas_core();
  }
  if (want.empty()) return;
  reexec_with_openblas_core(want);
}

std::string blas_description() {
  static const CharFn config = openblas_fn("openblas_get_config");
  const std::optional<std::string> core = openblas_core();
  if (!config || !core) return "";
  std::string out = config() ? config() : "";
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + " core " + *core;
}

int cpu_cores() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

static bool quiet() {
  const char* q = std::getenv("AC_QUIET");
  return q && q[0] == '1';
}

void log_info(const std::string& line) {
  if (!quiet()) std::fprintf(stderr, "%s\n", line.c_str());
}

void log_warn(const std::string& line) { std::fprintf(stderr, "warning: %s\n", line.c_str()); }

std::string today_utc() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

}  // namespace ac
