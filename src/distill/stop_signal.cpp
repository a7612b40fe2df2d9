#include "distill/stop_signal.h"

namespace ac {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  if (g_stop_signal) {  // second signal: default action (terminate) right away
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_stop_signal = sig;
}

}  // namespace

StopSignalScope::StopSignalScope() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignalScope::~StopSignalScope() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignalScope::pending() { return g_stop_signal; }

}  // namespace ac
