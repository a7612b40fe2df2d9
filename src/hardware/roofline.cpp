#include "hardware/roofline.h"

#include <algorithm>

#include "common/error.h"

namespace ac {

Phase prefill_phase(const Workload& w) {
  return {true, w.batch_size, w.batch_size * w.prompt_tokens, w.prompt_tokens};
}
Phase decode_phase(const Workload& w) {
  return {false, w.batch_size, w.batch_size, w.prompt_tokens + (w.output_tokens + 1) / 2};
}

Roofline::Roofline(const Scenario& s, const Profile* p) : s_(&s) {
  const Workload& w = s.workload;
  tp_ = double(w.tensor_parallel);
  wbytes_ = dtype_bytes(w.weight_dtype, "predict");
  kvbytes_ = dtype_bytes(w.kv_cache_dtype, "predict");
  abytes_ = w.weight_dtype == "fp32" ? 4.0 : 2.0;
  DeviceSpec d = s.device_spec;
  if (p) apply_profile(d, *p);
  if (!d.bandwidth_bytes_per_s)
    throw ConfigError(msg("predict", "device '{}' has no memory bandwidth: a CPU needs its "
                                     "profile (`autocompress profile`, then --profile)",
                          d.name));
  bw_ = d.bandwidth_bytes_per_s->value * d.bandwidth_efficiency.value;
  flops_ = d.peak_flops_for(w.weight_dtype) * d.gemm_efficiency.value;
  launch_ms_ = d.kernel_launch_us.value * 1e-3;
  graph_launch_ms_ = d.graph_kernel_us.value * 1e-3;
}

double Roofline::launch_ms(const Phase& ph) const {
  return (!ph.prefill && s_->engine_spec.cuda_graphs) ? graph_launch_ms_ : launch_ms_;
}

double Roofline::op_ms(const Phase& ph, double flops, double bytes, double kernels) const {
  return kernels * launch_ms(ph) + std::max(flops / flops_ * 1e3, bytes / bw_ * 1e3);
}

double Roofline::gemm_ms(const Phase& ph, double rows, double N, double K) const {
  const double n = N / tp_;
  const double fl = 2.0 * rows * n * K;
  const double by = n * K * wbytes_ + (rows * K + rows * n) * abytes_;
  return op_ms(ph, fl, by);
}

double Roofline::elementwise_ms(const Phase& ph, double values, int reads) const {
  return op_ms(ph, 0.0, values * abytes_ * (reads + 1));
}

void require_roofline(const char* kind, const Scenario& s, const Profile* p) {
  if (p && (s.engine == "native" || p->engine_calibration(s)))
    throw ConfigError(msg("predict", "scenario '{}' is costed from the profile's op tables "
                                     "(engine {}), which hold no {} op: cost hybrid models on a "
                                     "GPU scenario's roofline (no --profile)",
                          s.name, s.engine, kind));
}

}  // namespace ac
