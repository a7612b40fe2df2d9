#include "common/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace ac {

bool release_free_memory() {
  // int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  static const Mallctl mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (!mallctl) return false;
  // 4096 = MALLCTL_ARENAS_ALL (jemalloc.h): every arena at once.
  return mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0;
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
