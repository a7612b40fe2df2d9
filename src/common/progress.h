// Progress of a long stage: percent, rate, ETA. A live bar on a terminal, plain lines otherwise.
#pragma once
#include <cstdint>
#include <string>

namespace ac {

/// Shows progress of `total` units (tokens, steps, ...). On a TTY redraws one line; in logs/CI
/// prints a plain line at every 10% and at the end. `extra` is appended (e.g. "loss 2.31").
class Progress {
 public:
  Progress(std::string stage, int64_t total, std::string unit);
  void update(int64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");

 private:
  std::string stage_, unit_;
  int64_t total_;
  double t0_, last_draw_ = 0;
  int last_decile_ = -1;
  bool tty_, finished_ = false;
};

}  // namespace ac
