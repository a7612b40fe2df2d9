#include "common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>

#include "common/runtime.h"

namespace ac {

namespace {
ProgressCallback g_progress_callback;  // the innermost ProgressCallbackScope's, or empty
}  // namespace

ProgressCallbackScope::ProgressCallbackScope(ProgressCallback callback)
    : previous_(std::move(g_progress_callback)) {
  g_progress_callback = std::move(callback);
}

ProgressCallbackScope::~ProgressCallbackScope() { g_progress_callback = std::move(previous_); }

void report_progress(const ProgressEvent& event) {
  if (g_progress_callback) g_progress_callback(event);
}

static std::string fmt_eta(double s) {
  if (s < 0 || s > 1e7) return "?";
  int t = int(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}

Progress::Progress(std::string stage, int64_t total, std::string unit)
    : stage_(std::move(stage)), unit_(std::move(unit)), total_(std::max<int64_t>(total, 1)),
      t0_(now_s()), tty_(::isatty(2) && !std::getenv("CI")) {}

void Progress::update(int64_t done, const std::string& extra) {
  report_progress({stage_, done, total_, unit_, extra});
  if (std::getenv("AC_QUIET")) return;
  const double now = now_s(), t = now - t0_, rate = done / std::max(t, 1e-9);
  double pct = 100.0 * double(done) / double(total_);
  // The ETA follows the rate since the first update: the first units carry the stage's set-up
  // and warm-up (a profile's first shape once read "ETA 1h12m" for a stage of 90 s). Until a
  // second update there is no such rate.
  if (first_update_s_ < 0) first_update_s_ = now, first_update_done_ = done;
  const double since_s = now - first_update_s_;
  const int64_t since_done = done - first_update_done_;
  const std::string eta = done >= total_ ? fmt_eta(0)
                          : since_done > 0 && since_s > 0
                              ? fmt_eta(double(total_ - done) * since_s / double(since_done))
                              : std::string("--");
  std::string line = fmt::format("[{}] {:5.1f}% {}/{} {} | {:.1f} {}/s | ETA {}{}{}", stage_,
                                 pct, done, total_, unit_, rate, unit_, eta,
                                 extra.empty() ? "" : " | ", extra);
  if (tty_) {
    if (now_s() - last_draw_ < 0.2 && done < total_) return;
    last_draw_ = now_s();
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  } else {
    int decile = int(pct / 10);
    if (decile == last_decile_ && !force_line_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  shown_done_ = done;
  shown_extra_ = extra;
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  // The last update may already have shown the end (update(total) then finish(), as most
  // stages do): a plain log would print the 100% line twice.
  if (shown_done_ != total_ || (!extra.empty() && extra != shown_extra_)) {
    force_line_ = true;  // the end is shown even when its decile was (e.g. 99% then 100%+)
    update(total_, extra);
  } else {
    report_progress({stage_, total_, total_, unit_, extra});
  }
  if (tty_ && !std::getenv("AC_QUIET")) std::fprintf(stderr, "\n");
}

}  // namespace ac
