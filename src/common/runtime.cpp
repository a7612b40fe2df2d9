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
}  // namespace

void ensure_fast_blas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  if (const char* keep = std::getenv("AC_KEEP_BLAS_CORE"); keep && keep[0] == '1') return;
  const std::optional<std::string> core = openblas_core();
  if (!core) return;  // not OpenBLAS
  for (const char* fast : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (strcasecmp(core->c_str(), fast) == 0) return;
  const std::string want = best_openblas_core();
  if (want.empty()) return;
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
  ::setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
  ::execv("/proc/self/exe", args.data());
  ::unsetenv("OPENBLAS_CORETYPE");  // exec failed: carry on with OpenBLAS's choice
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
