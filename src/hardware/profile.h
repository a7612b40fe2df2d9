// Profile: measured latency tables of the operators a transformer layer is made of, on one
// device, for one workload (docs/design.md, "Profiling the device").
//
// Each table is a list of entries (dims -> median latency, spread). The dims of each table:
//   gemm              (M, N, K)          at::linear(x [M, K], w [N, K]) -> [M, N]; M = B for
//                                        decode, B*T for prefill; N over the width ladder, K
//                                        over the reduction ladder (width_ladder,
//                                        reduction_ladder below)
//   lm_head           (M, N=V, K=D)      the output head on the last position: M = B
//   attention_prefill (B, Hd, G, H, T)   everything between the q/k/v projections and o_proj
//                                        of the native forward (RoPE, KV-cache write, GQA,
//                                        scores, causal mask, softmax, weighted sum, reshape)
//   attention_decode  (B, Hd, G, H, C)   the same for one new token at context length C
//   rmsnorm           (M, D)             one RMSNorm of [M, D]
//   silu_mul          (M, F)             silu(gate) * up of [M, F]
//   add               (M, D)             the residual add
//   embedding         (M, D)             token-embedding lookup of M tokens from [V, D]
//   step              (B, T, Hd, V)      what the forward does once per call beside the layers:
//                                        token-id check, RoPE tables [T, Hd], causal mask
//                                        (T > 1), and the argmax of the logits [B, 1, V];
//                                        T = prompt tokens (prefill) or 1 (decode)
// Latencies are wall-clock milliseconds (on a GPU: read after device_synchronize, over
// ProfileOptions::gpu_calls_per_sample calls queued back to back): the fastest and the median
// of `repeats` timed samples after `warmup` untimed ones (OpTiming); spread = (p90 - p10) /
// median. Weights rotate over copies whose total exceeds the caches
// a single copy would sit in (ProfileOptions::rotation_bytes), as in a real forward pass
// where every layer streams different weights.
//
//   gemm_width_scan   (M, N, K, A, O)    at::linear at widths a + 2^k around anchors A (O = 0:
//                                        the width is N, 1: it is K); the width granularity
//                                        (hardware/granularity.h) is derived from it
//   gemm_warm, lm_head_warm (M, N, K)    as gemm and lm_head, with the weights rotating over a
//                                        pool a quarter of the last-level cache (warm_pool_bytes):
//                                        what a GEMM costs when its weights stay in that cache
//   working_set       (M, W)             ms per MiB of GEMV weights (M = B) cycling through W
//                                        bytes: the curve from cache-resident to streamed weights
//                                        (Profile::residency)
// Every shape is timed in `passes` passes over all of them; an entry holds the fastest call of
// all passes and how far the slowest pass's fastest call was above it (pass_spread).
//
// Correction (`correction`, ProfileOptions::calibrate): a residual model per phase (factors
// per op class, a constant per layer part and per step) fitted by least squares on real native
// forwards (model/llama.h) of calibration architectures (hardware/correction.h,
// hardware/calibration.h). It needs a quiet machine: the fit is only as good as the
// measurements. `calibration` (one constant per step) is the older form, still read.
//
// In-forward ratios (`in_forward`, with the correction on a CPU): per hidden size of the
// base, what each op class of one decode step costs inside a real step over its table sum
// (hardware/in_forward.h). The decode tables are scaled by them (interpolated in the hidden
// size) before the correction, which is then fitted within [0.8, 1.25] around them.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hardware/correction.h"
#include "hardware/device.h"
#include "hardware/engine_calibration.h"
#include "hardware/machine_load.h"
#include "hardware/scenario.h"
#include "model/config.h"

namespace ac {

/// One timed shape.
struct OpTiming {
  std::vector<int64_t> dims;  // in the table's dim order
  double ms = 0;         // the latency lookups use: min over the timed calls (the uncontended
                         // latency, as Measurement::ttft_ms / tpot_ms; hardware/measure.h)
  double median_ms = 0;  // median over the same calls, for inspection
  double spread = 0;  // (p90 - p10) / median
  int repeats = 0;       // timed calls, all passes together
  int passes = 1;        // passes the calls were spread over (ProfileOptions::passes)
  double pass_spread = 0;  // the slowest pass's fastest call / ms - 1: what one pass alone
                           // could have been off by (0 with one pass)
};

/// Timings of one op over a grid of shapes.
struct OpTable {
  std::vector<std::string> dim_names;
  std::vector<OpTiming> entries;

  /// Latency (ms) at `query` (same order as dim_names): the entry itself when measured, else
  /// multilinear interpolation: along each dim in order, the two nearest measured values that
  /// bracket the query (linear extrapolation outside the range, one value: that value).
  /// Throws ConfigError naming `name` when the table is empty.
  double lookup(const std::vector<double>& query, const std::string& name = "table") const;
};

/// Who measured: device identity (so a profile is never applied to another device).
struct ProfileIdentity {
  std::string device = "cpu";  // devices/<device>.json
  std::string cpu_model;       // /proc/cpuinfo "model name"
  int cores = 0;
  int threads = 0;             // torch intra-op threads used
  std::vector<std::string> isa;
  std::string torch_version;
  std::string date;  // YYYY-MM-DD (UTC)
  std::string timer = "wall";  // clock of the latencies (hardware/timer.h): "wall" or "cpu"
  std::string blas;            // gemm_description() (common/gemm.h); "" in older profiles
  std::string latency_statistic = "min";  // what OpTiming::ms holds: "min" over the timed
                                          // calls; "median" in profiles written before
                                          // 2026-12-01 (validate refuses those)
  std::string gpu_model;  // a GPU profile: the driver's name of the GPU ("NVIDIA H200"); "" on
                          // the CPU (cpu_model, cores and threads are then the host's)
  std::string cuda;       // a GPU profile: cuda_versions() (common/accelerator.h)
};

/// Residual time per step outside the tables, from real forwards (ms; may be negative).
struct Calibration {
  double prefill_step_ms = 0, decode_step_ms = 0;
  int models = 0;  // models measured (0: not calibrated)
};

/// How repeatable a profile's decode and prefill predictions are at one hidden size: the base
/// shape (the first profiled) at that width, predicted from the profile's tables with each pass
/// left out in turn (each pass alone with 2 passes; no correction, no in-forward ratios), as
/// (largest / smallest - 1) over them: how much one pass moves the profile. A profile holds one per multiple
/// of 8 from 0.4 D to D (every few of them for a wide base: about 24 in all).
struct WidthRepeatability {
  int64_t hidden_size = 0;
  double ttft_spread = 0, tpot_spread = 0;
};

struct Profile {
  ProfileIdentity identity;
  Workload workload;  // the workload the shapes were chosen for
  std::map<std::string, OpTable> tables;
  double dispatch_overhead_ms = 0;         // one tiny ATen op
  double memory_bandwidth_bytes_per_s = 0;  // large copy (read + write bytes / time)
  double gemm_peak_flops = 0;               // best FLOP/s over the measured GEMMs
  Calibration calibration;       // older profiles: constant residual per step (else zeros)
  LatencyCorrection correction;  // fitted residual model (identity when not fitted)
  std::vector<InForwardRatio> in_forward;  // the decode tables' in-forward ratios per hidden
                                           // size, ascending (hardware/in_forward.h; with
                                           // --calibrate on a CPU; empty: none, factor 1)
  std::vector<EngineCalibration> engines;  // other engines measured here (llama.cpp), each
                                           // for one thread count and weight type
  int64_t last_level_cache_bytes = 0;  // the CPU's (DeviceSpec); 0: no residency tables
  int64_t warm_pool_bytes = 0;  // weights the *_warm tables rotate over (in that cache)
  int64_t cold_pool_bytes = 0;  // weights the other GEMM tables rotate over (beyond it)
  int passes = 1;               // passes over every shape (ProfileOptions::passes)
  std::vector<WidthRepeatability> width_repeatability;  // with >= 2 passes, per hidden size
  int decode_gemm_capped = 0;  // decode GEMM entries lowered to their monotone envelope
                               // (cap_decode_gemm_table)
  int64_t width_granularity = 0;  // derived from gemm_width_scan (0: not derived)
  std::vector<std::pair<int64_t, double>> granularity_levels;  // (granularity, mean efficiency)
  double elapsed_s = 0;
  MachineLoad machine_load;  // what else ran on the machine while it was profiled
                             // (hardware/machine_load.h; not measured in older profiles)

  /// Throws ConfigError naming the table when it is missing.
  const OpTable& table(const std::string& name) const;
  /// The share of a GEMM's weights that stay in the last-level cache between two decode steps
  /// of a model of `working_set_bytes` (weights and KV cache), in [0, 1]: residency_at of
  /// residency_curve(M). A decode GEMM then costs cold - share * (cold - warm) (cost_model.h).
  /// 0 when the profile has no working_set table (a GPU, or a profile from before 2026-12-05).
  double residency(double working_set_bytes, int64_t M) const;
  /// The points (W bytes, share) of the working_set table between the warm and cold pools,
  /// share = (t(cold pool) - t(W)) / (t(cold pool) - t(warm pool)) clamped to [0, 1], t in ms per
  /// MiB streamed at M rows; ascending in W. Empty without the table, or when the cold pool was
  /// not slower than the warm one.
  std::vector<std::pair<double, double>> residency_curve(int64_t M) const;
  /// Where `c` lies outside the shapes this profile timed, one line each, e.g. "hidden size
  /// 3584: the profile timed GEMM widths 32..776" (a GEMM width, vocabulary, head_dim or
  /// query-head count more than 10% beyond the range of its table's entries): the tables are
  /// then extrapolated, and the predictions are not measurements of such a model. Empty when
  /// every dimension is covered, or for a table the profile lacks.
  std::vector<std::string> extrapolated_dimensions(const ModelConfig& c) const;
  /// The width_repeatability entry nearest `hidden_size` (tpot_spread and ttft_spread 0 when
  /// the profile has none).
  WidthRepeatability repeatability_at(int64_t hidden_size) const;
  /// The calibration of the scenario's engine for its threads (0 = every core) and dtypes, or
  /// null (the native engine, another device, or not calibrated).
  const EngineCalibration* engine_calibration(const Scenario& s) const;
  /// Adds `c`, replacing a calibration of the same engine, threads and dtypes.
  void set_engine_calibration(const EngineCalibration& c);
  json to_json() const;
  static Profile from_json(const json& j, const std::string& file);
};

/// What to measure and how.
struct ProfileOptions {
  std::optional<DeviceSpec> gpu;  // profile this GPU (kind "cuda", devices/<name>.json) in a
                                  // build with CUDA; empty: this CPU
  int gpu_calls_per_sample = 8;   // on a GPU, one timed sample = this many calls back to back
                                  // between two synchronizations, divided by the count: the
                                  // forward queues its kernels, so an op costs its throughput
                                  // in the queue, not a synchronized round trip
  int passes = 6;             // passes over every shape; each entry keeps the fastest call of
                              // all of them (docs/design.md, "Profiling the device": why 6, not
                              // 3: profiles minutes apart agree more closely, no less accurate)
  int warmup = 2;             // untimed calls before timing, per pass
  int min_repeats = 7;        // timed calls per pass, at least (as `profile --min-repeats`;
                              // with 4, compress's profiles spread 11-15% between passes at
                              // some reduced widths on machine B)
  int max_repeats = 20;       // at most
  double min_time_ms = 5;     // keep repeating until this much time was measured (up to max)
  bool residency = true;      // on a CPU whose last-level cache is known: the *_warm tables and
                              // the working_set curve (Profile::residency)
  int64_t rotation_bytes = 0;  // weight copies rotated per GEMM; 0 = twice the largest model's
                               // weights (clamped to [64 MiB, 1 GiB])
  int64_t min_width = 32;      // smallest N / K of the width ladder
  bool calibrate = false;      // fit the correction on real forwards (hardware/calibration.h)
  bool in_forward = true;       // with calibrate on a CPU: the decode's in-forward ratios
                                // (hardware/in_forward.h) before the fit
  int calibration_models = 16;  // random calibration prunes of the first shape (plus the shapes):
                                // 12 over the widths, 4 at its own (calibration_architectures)
  uint64_t calibration_seed = 0xCA1B;  // their seed (validate uses other seeds by default)
  int calibration_repeats = 6;  // interleaved measured rounds per calibration architecture
                                // (6 with `passes`: see there)
  bool width_scan = true;       // time gemm_width_scan and derive the width granularity
  bool progress = true;        // progress bar on stderr
};

/// The width ladder of GEMM N / K: every width the models use, plus 16*2^k and 24*2^k from
/// `min_width` up to the largest width (vocab excluded), sorted, unique.
std::vector<int64_t> width_ladder(const std::vector<ModelConfig>& shapes, int64_t min_width);

/// The ladder of GEMM K (the reduction width, the weight's row length): `widths` plus w - 8 and
/// w + 8 around every width w >= 512 that is a multiple of 256, sorted, unique. Rows of such a
/// length sit on cache-aliasing strides: on an AVX-512 CPU (oneDNN sgemm, M = 32) K = 512,
/// 1024, 1536, 2048, 3072 and 4096 ran 30-40% below K + 8 (docs/benchmarks.md, 2026-12-02
/// 08:40 UTC), so a pruned width between two of them must interpolate between their unaliased
/// neighbours, not between the two slow points. The decode GEMMs (M = 1, bound by memory) do
/// not show it; timing them there too costs little.
std::vector<int64_t> reduction_ladder(const std::vector<int64_t>& widths);

/// Piecewise-linear interpolation of a residency curve (Profile::residency_curve) at `w` bytes,
/// constant beyond its ends; 0 for an empty curve.
double residency_at(const std::vector<std::pair<double, double>>& curve, double w);

/// Caps every entry of a GEMM table (dims M, N, K) with M = `rows` at the fastest entry of the
/// same M that is at least as wide in N and in K (the monotone envelope), and returns how many
/// it lowered. A decode GEMM (a matrix-vector product for M = B) reads every weight once: a
/// wider one is not faster, and an entry above a wider neighbour is the loop's artifact, not
/// the kernel's (machine C, 2026-12-06: 33 of 165 decode entries above their envelope by 5-58%,
/// the width-288 ones among them, while inside a real step the same GEMMs cost 0.7-1.0x their
/// neighbours' trend). The prefill's rows (compute-bound, tiled) are left as timed.
int cap_decode_gemm_table(OpTable& table, int64_t rows);

/// One table entry from the samples of a shape timed in several passes (`passes[k]`: pass k's
/// timed calls, ms; none empty): ms the fastest call, median_ms and spread ((p90 - p10) /
/// median) over all calls, pass_spread how far the slowest pass's fastest call lies above ms
/// (what a profile taken in that pass alone would have said more). With `left_out` >= 0 (and
/// >= 2 passes), that pass's samples are left out (the jackknife of width_repeatability); an
/// index beyond the passes leaves none out. Throws InternalError on a pass without samples.
OpTiming pass_timing(std::vector<int64_t> dims, const std::vector<std::vector<double>>& passes,
                     int left_out = -1);

/// The warning a profile deserves when its passes disagree: the hidden sizes of
/// p.width_repeatability whose TTFT or TPOT prediction moved more than `max_spread` (a fraction)
/// with one pass or another left out, with the advice to profile again on a quiet machine; "" when none did. The
/// search leaves such widths out at twice its safety margin (search_space.h max_width_spread).
std::string repeatability_warning(const Profile& p, double max_spread);

/// Measures every table at the shapes of interest (GEMM widths of each model and a ladder
/// between them; attention at each model's heads, KV heads and head_dim and their prunes;
/// contexts of the workload) on this CPU, torch threads = cores, or on the GPU of
/// `opt.gpu` (every tensor on cuda:0, each sample read after device_synchronize). Default
/// options keep a stories15M-shaped profile short (its time: docs/benchmarks.md).
/// Throws ConfigError when `shapes` is empty or the workload is not valid, and when `opt.gpu`
/// is set but the build has no CUDA, no GPU is visible, or the visible GPU is not the one
/// `opt.gpu` describes (gpu_name_matches, hardware/device.h).
Profile run_profile(const std::vector<ModelConfig>& shapes, const Workload& workload,
                    const ProfileOptions& opt = {});

/// Fills a DeviceSpec's bandwidth and fp32 peak from the profile (source "profile").
void apply_profile(DeviceSpec& device, const Profile& profile);

/// Reads / writes a profile JSON file. load_profile throws FormatError naming the file and
/// field on a malformed file.
Profile load_profile(const fs::path& path);

/// Makes the GEMM library a CPU profile's tables were measured with (identity.blas,
/// gemm_backend_of_description) the process's backend, so that what runs is what was timed;
/// run_profile chose it by measurement (choose_gemm_backend). A GPU profile, or a description
/// of no known backend, changes nothing.
void use_profile_gemm_backend(const Profile& profile);
void save_profile(const fs::path& path, const Profile& profile);

}  // namespace ac
