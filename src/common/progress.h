// Progress of a long stage: percent, rate, ETA. A live bar on a terminal, plain lines otherwise;
// and, for a caller that shows it its own way (the Python package's `progress=` callback), the
// same updates as events through a ProgressCallbackScope.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace ac {

/// One report of progress: `done` of `total` `unit` in `stage`. Progress bars send one per
/// update (e.g. {"distill", 4096, 131072, "tok", "step 2/64 loss 3.1 lr 1e-3"}); a compress run
/// sends one per pipeline stage complete ({"compress", stages complete, 0, "stages", "search"}:
/// total 0 = not known in advance).
struct ProgressEvent {
  std::string stage;
  int64_t done = 0;
  int64_t total = 0;
  std::string unit;
  std::string message;
};

using ProgressCallback = std::function<void(const ProgressEvent&)>;

/// While it lives, every progress event of this process is also passed to `callback`, on the
/// thread that made it (progress bars print as before). The callback may throw to stop the
/// work: the exception leaves the stage as any error does (a compress run stays resumable once
/// a stage is complete). Scopes nest; the previous callback is restored at the end. Not
/// copyable.
class ProgressCallbackScope {
 public:
  explicit ProgressCallbackScope(ProgressCallback callback);
  ~ProgressCallbackScope();
  ProgressCallbackScope(const ProgressCallbackScope&) = delete;
  ProgressCallbackScope& operator=(const ProgressCallbackScope&) = delete;

 private:
  ProgressCallback previous_;
};

/// Passes `event` to the callback of the innermost ProgressCallbackScope, if any.
void report_progress(const ProgressEvent& event);

/// Shows progress of `total` units (tokens, steps, ...). On a TTY redraws one line; in logs/CI
/// prints a plain line at every 10% and at the end. `extra` is appended (e.g. "loss 2.31").
class Progress {
 public:
  Progress(std::string stage, int64_t total, std::string unit);
  /// Shows `done` of the total (a line at most every 10% in a log, 5 redraws/s on a terminal).
  void update(int64_t done, const std::string& extra = "");
  /// Shows the end once: nothing more when the last update already showed `done == total`
  /// with the same `extra` (an empty `extra` keeps the shown one). Later calls do nothing.
  void finish(const std::string& extra = "");

 private:
  std::string stage_, unit_;
  int64_t total_;
  double t0_, last_draw_ = 0;
  double first_update_s_ = -1;     // when the first update came (the ETA's rate starts there)
  int64_t first_update_done_ = 0;  // and its `done`
  int last_decile_ = -1;
  int64_t shown_done_ = -1;  // what the last line shown held
  std::string shown_extra_;
  bool tty_, finished_ = false, force_line_ = false;
};

}  // namespace ac
