// SIGINT / SIGTERM during a training loop (distill(), blockwise_local_distill()): while a
// StopSignalScope lives, the handler only records the signal, and the loop stops at its next step
// boundary (saving what it can); a second signal terminates the process at once, as usual.
#pragma once
#include <csignal>

namespace ac {

/// Installs the handler for SIGINT and SIGTERM, clears the recorded signal, and restores the
/// previous handlers when it goes out of scope. Not copyable.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

  /// The signal received since the scope began (SIGINT, SIGTERM), or 0.
  static int pending();

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace ac
