#include "common/runtime.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace ac {

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
