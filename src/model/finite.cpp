#include "model/finite.h"

#include <fmt/format.h>

#include <cmath>

#include "common/error.h"
#include "common/runtime.h"

namespace ac {

namespace {

/// NaN and Inf counts of one tensor, without allocating a tensor of its size.
NonFiniteTensor count_nonfinite(const std::string& name, const at::Tensor& t) {
  NonFiniteTensor r{name, 0, 0, t.numel()};
  if (!t.is_floating_point() || t.numel() == 0) return r;
  const at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();  // a view when already fp32
  const float* p = c.data_ptr<float>();
  for (int64_t i = 0; i < r.numel; ++i) {
    if (std::isfinite(p[i])) continue;
    if (std::isnan(p[i])) ++r.nan;
    else ++r.inf;
  }
  return r;
}

}  // namespace

std::vector<NonFiniteTensor> find_nonfinite(const LlamaModel& m) {
  std::vector<NonFiniteTensor> out;
  for (const auto& [name, t] : to_tensor_map(m.config, m.weights)) {
    if (!t.defined()) continue;
    NonFiniteTensor r = count_nonfinite(name, t);
    if (r.nan || r.inf) out.push_back(std::move(r));
  }
  return out;
}

std::string describe_nonfinite(const std::vector<NonFiniteTensor>& bad) {
  std::string s;
  for (size_t i = 0; i < bad.size() && i < 8; ++i)
    s += fmt::format("{}tensor '{}' has {} NaN and {} Inf of {} values", i ? "; " : "",
                     bad[i].name, bad[i].nan, bad[i].inf, bad[i].numel);
  if (bad.size() > 8) s += fmt::format("; and {} more tensors", bad.size() - 8);
  return s;
}

void warn_nonfinite(const std::vector<NonFiniteTensor>& bad, const std::string& file) {
  if (bad.empty()) return;
  log_warn(fmt::format("{}: non-finite weights: {}", file, describe_nonfinite(bad)));
}

namespace {

void refuse_nonfinite(const std::vector<NonFiniteTensor>& bad, const std::string& file,
                      const char* stage, bool allow) {
  if (bad.empty()) return;
  if (allow) {
    warn_nonfinite(bad, file + " (--allow-nonfinite: " + stage + " runs anyway)");
    return;
  }
  throw FormatError(msg(stage, "{}: non-finite weights ({}): refusing to run {}; pass "
                        "--allow-nonfinite to run anyway", file, describe_nonfinite(bad), stage));
}

}  // namespace

void require_finite(const LlamaModel& m, const std::string& file, const char* stage, bool allow) {
  refuse_nonfinite(find_nonfinite(m), file, stage, allow);
}

void require_finite(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                    const std::string& file, const char* stage, bool allow) {
  std::vector<NonFiniteTensor> bad;
  for (const auto& [name, t] : tensors) {
    NonFiniteTensor r = count_nonfinite(name, t);
    if (r.nan || r.inf) bad.push_back(std::move(r));
  }
  refuse_nonfinite(bad, file, stage, allow);
}

}  // namespace ac
