#include "hardware/timer.h"

#include <time.h>

#include <cstdlib>

namespace ac {

const std::string& timer_kind() {
  static const std::string kind = [] {
    const char* t = std::getenv("AC_TIMER");
    return std::string(t && std::string(t) == "cpu" ? "cpu" : "wall");
  }();
  return kind;
}

double timer_ms() {
  timespec ts;
  clock_gettime(timer_kind() == "cpu" ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

}  // namespace ac
