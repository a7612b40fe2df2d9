// The phases the cost model prices and the device roofline that prices an op without a profile
// (docs/design.md, "The cost model"). One owner for both: hardware/cost_model.cpp (attention,
// dense FFN, head) and the hybrid layer kinds (hardware/mamba2_cost.h, hardware/moe_cost.h)
// price their ops through these.
#pragma once
#include <cstdint>

#include "hardware/profile.h"
#include "hardware/scenario.h"

namespace ac {

/// The phase being costed: the prefill (M = B*T rows, attention over T) or one decode step
/// (M = B rows at the median context C = T + ceil(output / 2)).
struct Phase {
  bool prefill;
  int64_t B, M, T_or_C;  // T for the prefill, the median context C for a decode step
};

Phase prefill_phase(const Workload& w);
Phase decode_phase(const Workload& w);

/// A GPU's roofline from its device spec (devices/<name>.json, with a profile's measured
/// bandwidth when one is given): an op costs
///   launches + max(FLOPs / (peak(weight dtype) x gemm_efficiency),
///                  bytes / (bandwidth x bandwidth_efficiency))
/// where a launch costs kernel_launch_us, or graph_kernel_us in a decode step the engine
/// replays as a CUDA graph. Work is per GPU: callers divide what tensor parallelism shards.
/// Throws ConfigError when `s` would be costed from the profile's op tables (the native engine,
/// or an engine measured on this CPU: Profile::engine_calibration), which hold no op of `kind`
/// ("Mamba-2", "MoE"): those layer kinds are costed on a GPU's roofline only.
void require_roofline(const char* kind, const Scenario& s, const Profile* p);

class Roofline {
 public:
  /// Throws ConfigError when the device has no bandwidth (a CPU: its profile is required) and
  /// from dtype_bytes / peak_flops_for on a dtype the device lacks.
  Roofline(const Scenario& s, const Profile* p);

  /// `kernels` launches plus the larger of the op's compute and memory time, in ms.
  double op_ms(const Phase& ph, double flops, double bytes, double kernels = 1) const;
  /// One GEMM of `rows` rows against a weight [N, K] sharded over N by tensor parallelism:
  /// 2 rows N/tp K FLOPs; the weight, the input [rows, K] and the output [rows, N/tp] moved.
  double gemm_ms(const Phase& ph, double rows, double N, double K) const;
  /// An elementwise op over `values` values reading `reads` tensors and writing one.
  double elementwise_ms(const Phase& ph, double values, int reads = 1) const;
  double launch_ms(const Phase& ph) const;

  double tp() const { return tp_; }
  double weight_bytes() const { return wbytes_; }  // bytes per weight (workload weight_dtype)
  double kv_bytes() const { return kvbytes_; }     // bytes per KV-cache value (kv_cache_dtype)
  double act_bytes() const { return abytes_; }     // bytes per activation (fp32, else 16-bit)

 private:
  const Scenario* s_;
  double tp_ = 1, wbytes_ = 2, kvbytes_ = 2, abytes_ = 2;
  double bw_ = 0, flops_ = 0, launch_ms_ = 0, graph_launch_ms_ = 0;
};

}  // namespace ac
