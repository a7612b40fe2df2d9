#include "hardware/profile.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "common/accelerator.h"
#include "common/error.h"
#include "common/gemm.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/cost_model.h"
#include "hardware/granularity.h"
#include "hardware/measure.h"
#include "hardware/native_ops.h"
#include "hardware/timer.h"

namespace ac {

// ---------------------------------------------------------------------------------------------
// Shapes of interest.

std::vector<int64_t> width_ladder(const std::vector<ModelConfig>& shapes, int64_t min_width) {
  std::set<int64_t> w;
  int64_t max_w = min_width;
  for (const auto& c : shapes) {
    w.insert(c.hidden_size);
    for (const auto& l : c.layers) {
      if (l.has_attention()) {
        w.insert(l.num_attention_heads * l.head_dim);
        w.insert(l.num_key_value_heads * l.head_dim);
      }
      if (l.has_ffn()) w.insert(l.intermediate_size);
    }
  }
  for (int64_t v : w) max_w = std::max(max_w, v);
  for (int64_t base : {16, 24})
    for (int64_t v = base; v <= max_w; v *= 2)
      if (v >= min_width) w.insert(v);
  return {w.begin(), w.end()};
}

std::vector<int64_t> reduction_ladder(const std::vector<int64_t>& widths) {
  std::set<int64_t> k(widths.begin(), widths.end());
  for (int64_t w : widths)
    if (w >= 512 && w % 256 == 0) k.insert({w - 8, w + 8});
  return {k.begin(), k.end()};
}

// (H, G) pairs to time attention at: every prune of each layer's heads when H <= 8, else
// powers of two and the model's own values; G runs over divisors of H among {1, G's, H}.
static std::set<std::tuple<int64_t, int64_t, int64_t>> attention_shapes(
    const std::vector<ModelConfig>& shapes) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> out;  // (Hd, G, H)
  for (const auto& c : shapes)
    for (const auto& l : c.layers) {
      if (!l.has_attention()) continue;
      std::set<int64_t> hs{l.num_attention_heads}, gs{1, l.num_key_value_heads};
      for (int64_t h = 1; h <= l.num_attention_heads; h = (l.num_attention_heads <= 8 ? h + 1 : h * 2))
        hs.insert(h);
      for (int64_t h : hs) {
        std::set<int64_t> g_here = gs;
        g_here.insert(h);
        if (l.num_attention_heads <= 8)
          for (int64_t g = 1; g <= h; ++g) g_here.insert(g);
        for (int64_t g : g_here)
          if (g <= h && h % g == 0) out.insert({l.head_dim, g, h});
      }
    }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Timing.

// Where the tables are measured: the device and how many calls one timed sample holds.
struct Target {
  c10::Device device = c10::kCPU;
  int calls_per_sample = 1;  // 1 on the CPU; ProfileOptions::gpu_calls_per_sample on a GPU
  at::TensorOptions f32() const { return at::TensorOptions().dtype(at::kFloat).device(device); }
  at::TensorOptions i64() const { return at::TensorOptions().dtype(at::kLong).device(device); }
};

// Latency samples of f: `warmup` untimed samples, then timed samples until min_repeats and
// min_time_ms (or max_repeats). A sample is `calls_per_sample` calls f(i) (i counts calls: weight
// copies rotate with it) between two device synchronizations (no-ops on the CPU), divided by the
// count.
template <typename F>
static std::vector<double> time_samples(F&& f, const ProfileOptions& opt, const Target& at = {}) {
  const int k = std::max(1, at.calls_per_sample);
  int call = 0;
  auto sample = [&] {
    device_synchronize(at.device);
    const double s = timer_ms();
    for (int j = 0; j < k; ++j) f(call++);
    device_synchronize(at.device);
    return (timer_ms() - s) / double(k);
  };
  for (int i = 0; i < opt.warmup; ++i) sample();
  std::vector<double> t;
  double total = 0;
  while (int(t.size()) < opt.min_repeats ||
         (total < opt.min_time_ms && int(t.size()) < opt.max_repeats)) {
    const double ms = sample();
    t.push_back(ms);
    total += ms * double(k);
  }
  return t;
}

OpTiming pass_timing(std::vector<int64_t> dims, const std::vector<std::vector<double>>& passes,
                     int left_out) {
  const bool leave = left_out >= 0 && size_t(left_out) < passes.size() && passes.size() >= 2;
  if (passes.empty() || std::any_of(passes.begin(), passes.end(), [](const auto& p) { return p.empty(); }))
    throw InternalError("pass_timing: a pass without samples");
  std::vector<double> all;
  double worst_pass_min = 0;
  int used = 0;
  for (size_t k = 0; k < passes.size(); ++k) {
    if (leave && k == size_t(left_out)) continue;
    const auto& p = passes[k];
    ++used;
    all.insert(all.end(), p.begin(), p.end());
    worst_pass_min = std::max(worst_pass_min, *std::min_element(p.begin(), p.end()));
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all[size_t(std::lround(q * double(all.size() - 1)))]; };
  OpTiming r;
  r.dims = std::move(dims);
  r.ms = all.front();
  r.median_ms = pct(0.5);
  r.spread = r.median_ms > 0 ? (pct(0.9) - pct(0.1)) / r.median_ms : 0;
  r.repeats = int(all.size());
  r.passes = used;
  r.pass_spread = r.ms > 0 ? worst_pass_min / r.ms - 1 : 0;
  return r;
}

// The samples of every table entry, gathered pass after pass (ProfileOptions::passes): each
// pass times every shape once, so that a slow minute of a shared machine touches one pass of
// every shape, not every sample of the few shapes timed while it lasted.
class Recorder {
 public:
  void add(const std::string& table, const std::vector<int64_t>& dims, std::vector<double> samples) {
    auto& t = samples_[table];
    auto it = t.find(dims);
    if (it == t.end()) {
      order_[table].push_back(dims);
      it = t.emplace(dims, std::vector<std::vector<double>>{}).first;
    }
    it->second.push_back(std::move(samples));
  }
  // Writes every table's entries (in the order first timed) into `p`: from the samples of
  // every pass, or of every pass but `left_out` (>= 0; an entry timed in that pass alone keeps
  // it).
  void write(Profile& p, int left_out = -1) const {
    for (const auto& [name, dims_list] : order_) {
      OpTable& t = p.tables[name];
      t.entries.clear();
      for (const auto& d : dims_list) {
        t.entries.push_back(pass_timing(d, samples_.at(name).at(d), left_out));
      }
    }
  }

 private:
  std::map<std::string, std::map<std::vector<int64_t>, std::vector<std::vector<double>>>> samples_;
  std::map<std::string, std::vector<std::vector<int64_t>>> order_;
};

// A pool of small random values that weight copies are carved from, so each call of a GEMM
// reads weights another call did not just pull into the core's caches (the cold pool), or
// weights that stay in the last-level cache between calls (the warm pool, smaller than it).
struct WeightPool {
  at::Tensor pool;  // [numel] fp32
  mutable std::map<std::pair<int64_t, int64_t>, at::Tensor> single;  // weights larger than the pool
  WeightPool(int64_t bytes, const Target& at) { pool = at::rand({bytes / 4}, at.f32()) * 0.02 - 0.01; }
  // Copy `i` of an [N, K] weight (copies cycle through the pool); a weight larger than the pool
  // is one copy, made once and reused.
  at::Tensor weight(int64_t N, int64_t K, int64_t i) const {
    int64_t n = N * K, copies = std::max<int64_t>(1, pool.numel() / n);
    if (n > pool.numel()) {
      auto it = single.find({N, K});
      if (it == single.end()) it = single.emplace(std::pair{N, K}, at::rand({N, K}, pool.options()) * 0.02).first;
      return it->second;
    }
    return pool.narrow(0, scattered(i, copies) * n, n).view({N, K});
  }
  // The i-th copy of `copies` in a scattered order: consecutive calls read copies far apart in
  // memory, as consecutive ops of the forward read weights allocated apart. Read in address
  // order, the hardware prefetcher streamed each next copy ahead of its call: the 768 x 288
  // decode GEMV timed 10.4 us against 16.8 us scattered, and a step's GEMMs summed 29% under
  // the forward's at D = 288 (docs/benchmarks.md, "The cost model at every width").
  static int64_t scattered(int64_t i, int64_t copies) {
    if (copies <= 2) return i % copies;
    int64_t stride = std::max<int64_t>(2, int64_t(double(copies) * 0.618));
    while (std::gcd(stride, copies) != 1) ++stride;
    return (i % copies) * stride % copies;
  }
  int64_t bytes() const { return pool.numel() * 4; }
};

struct Grids {
  std::vector<int64_t> ms;       // B (decode) and B*T (prefill)
  std::vector<int64_t> widths;   // width ladder (N, and the widths of the small ops)
  std::vector<int64_t> k_widths;  // GEMM K: reduction_ladder(widths)
  std::set<std::pair<int64_t, int64_t>> heads_vocab;  // (V, D) for lm_head
  std::set<std::tuple<int64_t, int64_t, int64_t>> attn;  // (Hd, G, H)
  std::vector<int64_t> contexts;  // decode context lengths
  Target at;                      // the device measured
};

// Counts measured shapes on the progress bar (if any).
struct Ticker {
  Progress* bar = nullptr;
  int64_t done = 0;
  void tick() {
    if (bar) bar->update(++done);
  }
};

// One pass over the GEMM shapes: `table` ("gemm" or "lm_head", with the suffix "_warm" when
// `pool` is the warm pool) at every (M, N, K) of the grid.
static void profile_gemm(Recorder& rec, const Grids& g, const WeightPool& pool,
                         const std::string& suffix, const ProfileOptions& opt, Ticker& bar) {
  for (int64_t M : g.ms)
    for (int64_t N : g.widths)
      for (int64_t K : g.k_widths) {
        at::Tensor x = at::rand({M, K}, g.at.f32());
        rec.add("gemm" + suffix, {M, N, K},
                time_samples([&](int i) { ac::linear(x, pool.weight(N, K, i)); }, opt, g.at));
        bar.tick();
      }
  int64_t M = g.ms.front();
  for (auto [V, D] : g.heads_vocab)
    for (int64_t K : g.k_widths) {
      if (K > D) continue;
      at::Tensor x = at::rand({M, K}, g.at.f32());
      rec.add("lm_head" + suffix, {M, V, K},
              time_samples([&](int i) { ac::linear(x, pool.weight(V, K, i)); }, opt, g.at));
      bar.tick();
    }
}

static void profile_attention(Recorder& rec, const Grids& g, int64_t B, int64_t T,
                              const ProfileOptions& opt, Ticker& bar) {
  const int64_t cap = g.contexts.back();
  for (auto [Hd, G, H] : g.attn) {
    const at::TensorOptions f32 = g.at.f32();
    at::Tensor ck = at::zeros({B, G, cap, Hd}, f32), cv = at::zeros({B, G, cap, Hd}, f32);
    auto run = [&](int64_t pos0, int64_t n) {
      at::Tensor q = at::rand({B, n, H * Hd}, f32), k = at::rand({B, n, G * Hd}, f32),
                 v = at::rand({B, n, G * Hd}, f32);
      at::Tensor cos = at::rand({n, Hd}, f32), sin = at::rand({n, Hd}, f32);
      // No mask, as in the forward: the prefill (pos0 = 0) runs the fused causal kernel and a
      // decode step (n = 1) sees every cached key.
      return time_samples(
          [&](int) {
            native_ops::attention(q, k, v, ck, cv, pos0, H, G, Hd, cos, sin, /*allowed=*/{});
          },
          opt, g.at);
    };
    rec.add("attention_prefill", {B, Hd, G, H, T}, run(0, T));
    bar.tick();
    for (int64_t C : g.contexts) {
      rec.add("attention_decode", {B, Hd, G, H, C}, run(C - 1, 1));
      bar.tick();
    }
  }
}

static void profile_small_ops(Recorder& rec, const Grids& g, double eps, const ProfileOptions& opt,
                              Ticker& bar) {
  int64_t max_d = 0;
  for (auto [V, D] : g.heads_vocab) max_d = std::max(max_d, D);
  const at::TensorOptions f32 = g.at.f32();
  at::Tensor table = at::rand({32000, max_d}, f32);
  for (int64_t M : g.ms)
    for (int64_t W : g.widths) {
      at::Tensor x = at::rand({M, W}, f32), y = at::rand({M, W}, f32), w = at::rand({W}, f32);
      at::Tensor ids = at::randint(0, 32000, {M}, g.at.i64());
      at::Tensor emb = table.narrow(1, 0, std::min(W, max_d));
      auto put = [&](const char* name, std::vector<double> samples) {
        rec.add(name, {M, W}, std::move(samples));
        bar.tick();
      };
      put("rmsnorm", time_samples([&](int) { native_ops::rmsnorm(x, w, eps); }, opt, g.at));
      put("silu_mul", time_samples([&](int) { native_ops::silu_mul(x, y); }, opt, g.at));
      put("add", time_samples([&](int) { at::add(x, y); }, opt, g.at));
      if (W <= max_d)
        put("embedding", time_samples([&](int) { at::embedding(emb, ids); }, opt, g.at));
    }
}

// GEMMs at widths a + 2^k around anchors a (multiples of 128 up to the widest width - 128),
// the width as N (K = hidden) and as K (N = hidden), for hardware/granularity.h.
static void profile_width_scan(Recorder& rec, const Grids& g, int64_t hidden,
                               const WeightPool& pool, const ProfileOptions& opt) {
  std::vector<int64_t> anchors;
  const int64_t widest = g.widths.empty() ? 0 : g.widths.back();
  for (int64_t a = 128; a + 128 <= widest && anchors.size() < 3; a *= 2) anchors.push_back(a);
  for (int64_t M : g.ms)
    for (int64_t A : anchors)
      for (int64_t w : granularity_scan_widths(A))
        for (int64_t O : {0, 1}) {
          const int64_t N = O == 0 ? w : hidden, K = O == 0 ? hidden : w;
          at::Tensor x = at::rand({M, K}, g.at.f32());
          rec.add("gemm_width_scan", {M, N, K, A, O},
                  time_samples([&](int i) { ac::linear(x, pool.weight(N, K, i)); }, opt, g.at));
        }
}

// GEMVs (M rows) over 1 MiB weights cycling through the first `bytes` of `pool` ([numel] fp32):
// the samples of one sweep over all of them each, in ms per MiB.
constexpr int64_t kSweepN = 256, kSweepK = 1024, kSweepChunk = kSweepN * kSweepK * 4;  // 1 MiB
static std::vector<double> sweep_samples(const at::Tensor& pool, int64_t bytes, int64_t M,
                                         const ProfileOptions& opt, const Target& at) {
  const int64_t n = std::clamp<int64_t>(bytes / kSweepChunk, 1, pool.numel() * 4 / kSweepChunk);
  at::Tensor x = at::rand({M, kSweepK}, at.f32());
  ProfileOptions o = opt;
  o.warmup = std::max(1, opt.warmup);
  std::vector<double> t = time_samples(
      [&](int) {
        for (int64_t i = 0; i < n; ++i)
          ac::linear(x, pool.narrow(0, i * kSweepN * kSweepK, kSweepN * kSweepK).view({kSweepN, kSweepK}));
      },
      o, at);
  for (double& v : t) v /= double(n);
  return t;
}

// The working-set curve behind Profile::residency: sweeps over the first W bytes of the cold
// pool. Small W stays in the last-level cache between sweeps, large W streams from memory, as
// the weights of a small or a large model do between two decode steps.
static void profile_working_set(Recorder& rec, const Grids& g, const WeightPool& cold,
                                const std::vector<int64_t>& sizes, const ProfileOptions& opt) {
  const int64_t B = g.ms.front();
  for (int64_t W : sizes) {
    const int64_t n = std::clamp<int64_t>(W / kSweepChunk, 1, cold.bytes() / kSweepChunk);
    rec.add("working_set", {B, n * kSweepChunk}, sweep_samples(cold.pool, W, B, opt, g.at));
  }
}

// One tiny op: the floor of every ATen call (dispatch, allocation, threading decisions).
static double measure_dispatch(const ProfileOptions& opt, const Target& at) {
  at::Tensor a = at::rand({8}, at.f32()), b = at::rand({8}, at.f32());
  auto t = time_samples([&](int) { at::add(a, b); }, opt, at);
  return *std::min_element(t.begin(), t.end());
}

// Read + write bandwidth of a copy far larger than the caches.
static double measure_bandwidth(const ProfileOptions& opt, const Target& at) {
  const int64_t n = (512ll << 20) / 4;
  at::Tensor src = at::ones({n}, at.f32()), dst = at::empty({n}, at.f32());
  ProfileOptions o = opt;
  o.min_repeats = 5;
  o.min_time_ms = 0;
  auto t = time_samples([&](int) { dst.copy_(src); }, o, at);
  return 2.0 * 4.0 * double(n) / (*std::min_element(t.begin(), t.end()) * 1e-3);
}

// Head dim of the first attention layer (0 when no layer has attention).
static int64_t first_head_dim(const ModelConfig& c) {
  for (const auto& l : c.layers)
    if (l.has_attention()) return l.head_dim;
  return 0;
}

// The forward's once-per-call work beside the layers (see the "step" table in profile.h).
static void profile_step(Recorder& rec, const std::vector<ModelConfig>& shapes, const Workload& w,
                         const ProfileOptions& opt, const Target& at) {
  std::set<std::pair<int64_t, int64_t>> done;
  for (const auto& c : shapes) {
    const int64_t Hd = first_head_dim(c), V = c.vocab_size, B = w.batch_size;
    if (!done.insert({Hd, V}).second) continue;
    for (int64_t T : {w.prompt_tokens, int64_t(1)}) {
      at::Tensor tokens = at::randint(0, V, {B, T}, at.i64()), logits = at::rand({B, 1, V}, at.f32());
      const int64_t pos0 = T == 1 ? w.prompt_tokens : 0;
      rec.add("step", {B, T, Hd, V},
              time_samples(
                  [&](int) {
                    (void)tokens.min().item<int64_t>();
                    (void)tokens.max().item<int64_t>();
                    if (Hd > 0) rope_tables(c, Hd, pos0, T, at.device);
                    // No causal mask: the forward's prefill starts at position 0 and runs the
                    // fused causal kernel, which needs none (model/llama.cpp).
                    logits.argmax(-1);
                  },
                  opt, at));
    }
  }
}

// The dims of every table run_profile writes (profile.h).
static void set_table_dim_names(Profile& p) {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"gemm", {"M", "N", "K"}},
      {"gemm_warm", {"M", "N", "K"}},
      {"lm_head", {"M", "N", "K"}},
      {"lm_head_warm", {"M", "N", "K"}},
      {"attention_prefill", {"B", "Hd", "G", "H", "T"}},
      {"attention_decode", {"B", "Hd", "G", "H", "C"}},
      {"rmsnorm", {"M", "D"}},
      {"silu_mul", {"M", "F"}},
      {"add", {"M", "D"}},
      {"embedding", {"M", "D"}},
      {"step", {"B", "T", "Hd", "V"}},
      {"gemm_width_scan", {"M", "N", "K", "A", "O"}},
      {"working_set", {"M", "W"}}};
  for (auto& [name, t] : p.tables) {
    auto it = names.find(name);
    AC_CHECK(it != names.end(), "table '{}' has no dim names", name);
    t.dim_names = it->second;
  }
}

static Grids make_grids(const std::vector<ModelConfig>& shapes, const Workload& w,
                        const ProfileOptions& opt) {
  Grids g;
  g.ms = {w.batch_size, w.batch_size * w.prompt_tokens};
  g.widths = width_ladder(shapes, opt.min_width);
  g.k_widths = reduction_ladder(g.widths);
  for (const auto& c : shapes) g.heads_vocab.insert({c.vocab_size, c.hidden_size});
  g.attn = attention_shapes(shapes);
  g.contexts = {w.prompt_tokens + 1, w.prompt_tokens + (w.output_tokens + 1) / 2,
                w.context_tokens()};
  g.contexts.erase(std::unique(g.contexts.begin(), g.contexts.end()), g.contexts.end());
  return g;
}

static int64_t weight_bytes_fp32(const ModelConfig& c) { return 4 * c.num_parameters(); }

// Working-set sizes of the curve: fractions of the last-level cache from 1/8 to 3x, the warm
// pool and the cold pool (the ends Profile::residency interpolates between), in whole MiB.
static std::vector<int64_t> working_set_sizes(int64_t llc, int64_t warm, int64_t cold) {
  std::set<int64_t> s{warm, cold};
  for (double f : {0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 2.0, 3.0})
    if (f * double(llc) < double(cold)) s.insert(std::max<int64_t>(1, int64_t(f * double(llc)) >> 20) << 20);
  return {s.begin(), s.end()};
}

// The profile's tables with each pass left out in turn (a jackknife over the passes), to say how
// much one pass moves the profile the search reads: with 2 passes, each pass alone.
static std::vector<WidthRepeatability> width_repeatability(const Profile& p, const Recorder& rec,
                                                           int passes, const ModelConfig& base) {
  // Each pass's op tables, with the working-set curve of all passes: the curve's share of cache
  // hits divides by the difference of two of its points, so one pass's curve alone moved the
  // decode prediction 21-38% apart at reduced widths in a profile of compress (machine B,
  // 2026-12-05), where whole profiles taken minutes apart agreed within 3-4%: noise of one
  // pass's curve, which the fastest call over all passes does not carry.
  // Leave one pass out rather than one pass alone: a profile's entry is the fastest call of
  // every pass, and one pass alone carried whatever slow minute it met. Each pass alone put the
  // predictions of stories15M's shape 3-18% apart (TPOT, machine C, 2026-12-06) where three
  // profiles taken minutes apart agreed within 2-3% as fractions of their teachers and each
  // validated within 9.6% on every architecture; the search left out 13 of 21 reduced widths on
  // it, 0-1 with a pass left out (docs/benchmarks.md, "Errors as fractions of the teacher,
  // repeatability by leaving one pass out, AVX2 forced").
  std::vector<Profile> alone;
  for (int k = 0; k < passes; ++k) {
    Profile one = p;
    rec.write(one, passes >= 3 ? k : 1 - k);  // 2 passes: leaving one out keeps the other
    if (auto it = p.tables.find("working_set"); it != p.tables.end()) one.tables[it->first] = it->second;
    // The same monotone envelope as the profile's own decode tables (run_profile).
    if (p.identity.gpu_model.empty())
      for (const char* t : {"gemm", "gemm_warm", "lm_head", "lm_head_warm"})
        if (auto it = one.tables.find(t); it != one.tables.end())
          cap_decode_gemm_table(it->second, p.workload.batch_size);
    alone.push_back(std::move(one));
  }
  Scenario s;
  s.name = "profile";
  s.device = p.identity.device;
  s.engine = "native";
  s.engine_spec.name = "native";
  s.workload = p.workload;
  s.device_spec.name = p.identity.device;
  s.device_spec.kind = p.identity.gpu_model.empty() ? "cpu" : "cuda";
  std::vector<WidthRepeatability> out;
  // Multiples of 8 from 0.4 D to D (the search's range), at most about 24 of them.
  const int64_t lo = std::max<int64_t>(8, (base.hidden_size * 2 / 5 + 7) / 8 * 8);
  const int64_t step = std::max<int64_t>(8, (base.hidden_size - lo) / 24 / 8 * 8);
  for (int64_t D = base.hidden_size - (base.hidden_size - lo) / step * step; D <= base.hidden_size;
       D += step) {
    ModelConfig c = base;
    c.hidden_size = D;
    std::vector<double> ttft, tpot;
    for (const Profile& one : alone) {
      const CostEstimate e = predict(c, s, &one);
      ttft.push_back(e.ttft_ms), tpot.push_back(e.tpot_ms);
    }
    auto spread = [](const std::vector<double>& v) {
      const auto [lo_it, hi_it] = std::minmax_element(v.begin(), v.end());
      return *lo_it > 0 ? *hi_it / *lo_it - 1 : 0.0;
    };
    out.push_back({D, spread(ttft), spread(tpot)});
  }
  return out;
}

// The search's default safety margin (CompressSearchOptions::safety_margin): widths whose passes
// moved more than twice it are left out of the search, and the profile says so when it is taken.
constexpr double kDefaultSafetyMarginForWarning = 0.05;

int cap_decode_gemm_table(OpTable& table, int64_t rows) {
  std::vector<OpTiming*> at;
  for (OpTiming& e : table.entries)
    if (e.dims.size() == 3 && e.dims[0] == rows) at.push_back(&e);
  std::vector<double> envelope(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    envelope[i] = at[i]->ms;
    for (const OpTiming* o : at)
      if (o->dims[1] >= at[i]->dims[1] && o->dims[2] >= at[i]->dims[2])
        envelope[i] = std::min(envelope[i], o->ms);
  }
  int lowered = 0;
  for (size_t i = 0; i < at.size(); ++i)
    if (envelope[i] < at[i]->ms) at[i]->ms = envelope[i], ++lowered;
  return lowered;
}

std::string repeatability_warning(const Profile& p, double max_spread) {
  std::vector<std::string> noisy;
  for (const WidthRepeatability& r : p.width_repeatability)
    if (std::max(r.tpot_spread, r.ttft_spread) > max_spread)
      noisy.push_back(fmt::format("{} ({:.1f}%)", r.hidden_size,
                                  100 * std::max(r.tpot_spread, r.ttft_spread)));
  if (noisy.empty()) return "";
  return fmt::format("[profile] with each of its {} passes left out in turn, the profile predicted "
                     "these hidden sizes more than {:.0f}% apart: {}. A search with the default "
                     "safety margin leaves them out; profile again with nothing else running on "
                     "this machine", p.passes, 100 * max_spread, fmt::join(noisy, ", "));
}

Profile run_profile(const std::vector<ModelConfig>& shapes, const Workload& workload,
                    const ProfileOptions& opt) {
  if (shapes.empty()) throw ConfigError(msg("run_profile", "no model shapes given"));
  for (const auto& c : shapes) c.validate("run_profile");
  if (opt.passes < 1)
    throw ConfigError(msg("run_profile", "passes: expected >= 1, found {}", opt.passes));
  double t0 = now_s();
  const CpuTimes load_from = read_cpu_times();
  Profile p;
  DeviceSpec cpu = detect_cpu();
  if (!opt.gpu) {
    // The GEMM library for this CPU, chosen on the training and decode shapes of the largest
    // model profiled; the tables are timed with it.
    const ModelConfig& big = *std::max_element(
        shapes.begin(), shapes.end(),
        [](const ModelConfig& a, const ModelConfig& b) { return a.num_parameters() < b.num_parameters(); });
    int64_t F = 0;
    for (const LayerConfig& l : big.layers) F = std::max(F, l.intermediate_size);
    const GemmChoice gc = choose_gemm_backend(
        model_gemm_shapes(big.hidden_size, std::max<int64_t>(F, 1), big.vocab_size, 256));
    log_info("[profile] GEMM library: " + gc.to_string());
  }
  p.identity = {"cpu", cpu.display_name, cpu.cores, init_torch_threads(), cpu.isa, TORCH_VERSION,
                today_utc(), timer_kind(), gemm_description()};
  p.workload = workload;
  Grids g = make_grids(shapes, workload, opt);
  if (opt.gpu) {
    g.at.device = compute_device(opt.gpu->kind, opt.gpu->name);
    g.at.calls_per_sample = std::max(1, opt.gpu_calls_per_sample);
    const std::string here = cuda_device_name(g.at.device.index());
    if (!gpu_name_matches(*opt.gpu, here))
      throw ConfigError(msg("profile", "device '{}' is a {}, the visible GPU is '{}': name the "
                                       "device this machine has (devices/*.json)",
                            opt.gpu->name, opt.gpu->display_name, here));
    p.identity.device = opt.gpu->name;
    p.identity.gpu_model = here;
    p.identity.cuda = cuda_versions();
    p.identity.blas = "at::linear on CUDA (cuBLAS)";
  }
  int64_t rotation = opt.rotation_bytes;
  if (rotation <= 0) {
    // Twice the weights: even the output head (the largest matrix, 62% of stories15M) then
    // rotates over >= 2 copies, so the whole model's bytes pass between two uses of one copy,
    // as between two steps of the real forward. With one copy it stayed in the cache and its
    // table entry ran ~2x faster than in the forward (TPOT was under-predicted at D = 288).
    for (const auto& c : shapes) rotation = std::max(rotation, 2 * weight_bytes_fp32(c));
    // A GPU's last-level cache is larger (50 MB on an H100 / H200): at least 256 MiB there.
    rotation = std::clamp<int64_t>(rotation, (opt.gpu ? 256ll : 64ll) << 20, 1024ll << 20);
  }
  WeightPool pool(rotation, g.at);
  // The warm pool (a CPU whose last-level cache is known): a quarter of that cache, more than
  // the cores' own caches hold, so its weights come from the last-level cache as a small model's
  // do in the real forward (docs/design.md, "Profiling the device").
  std::optional<WeightPool> warm;
  if (!opt.gpu && opt.residency && cpu.last_level_cache_bytes >= (4ll << 20) &&
      pool.bytes() >= cpu.last_level_cache_bytes) {
    p.last_level_cache_bytes = cpu.last_level_cache_bytes;
    warm.emplace(std::clamp<int64_t>(cpu.last_level_cache_bytes / 4, 1ll << 20, 64ll << 20), g.at);
    p.warm_pool_bytes = warm->bytes();
    p.cold_pool_bytes = pool.bytes();
  }
  const std::vector<int64_t> ws_sizes =
      warm ? working_set_sizes(p.last_level_cache_bytes, p.warm_pool_bytes, p.cold_pool_bytes)
           : std::vector<int64_t>{};
  size_t nw = g.widths.size(), nk = g.k_widths.size();
  const int64_t gemms = int64_t(g.ms.size() * nw * nk + g.heads_vocab.size() * nk);
  int64_t total = int64_t(opt.passes) *
                  (gemms * (warm ? 2 : 1) + int64_t(g.attn.size() * (1 + g.contexts.size())) +
                   int64_t(g.ms.size() * nw * 4));
  Progress progress("profile", total, "shapes");
  Ticker bar{opt.progress ? &progress : nullptr};
  p.dispatch_overhead_ms = measure_dispatch(opt, g.at);
  p.memory_bandwidth_bytes_per_s = measure_bandwidth(opt, g.at);
  Recorder rec;
  for (int pass = 0; pass < opt.passes; ++pass) {
    profile_gemm(rec, g, pool, "", opt, bar);
    if (warm) profile_gemm(rec, g, *warm, "_warm", opt, bar);
    profile_attention(rec, g, workload.batch_size, workload.prompt_tokens, opt, bar);
    profile_small_ops(rec, g, shapes.front().rms_norm_eps, opt, bar);
    profile_step(rec, shapes, workload, opt, g.at);
    if (opt.width_scan) profile_width_scan(rec, g, shapes.front().hidden_size, pool, opt);
    if (warm) profile_working_set(rec, g, pool, ws_sizes, opt);
  }
  if (opt.progress) progress.finish();
  rec.write(p);
  set_table_dim_names(p);
  // The decode GEMMs' monotone envelope, before anything reads the tables (on a CPU: a GPU's
  // kernels are chosen per shape and may well be faster wider).
  if (!opt.gpu)
    for (const char* t : {"gemm", "gemm_warm", "lm_head", "lm_head_warm"})
      if (auto it = p.tables.find(t); it != p.tables.end())
        p.decode_gemm_capped += cap_decode_gemm_table(it->second, workload.batch_size);
  for (const OpTiming& e : p.tables["gemm"].entries)
    p.gemm_peak_flops = std::max(p.gemm_peak_flops,
                                 2.0 * double(e.dims[0] * e.dims[1] * e.dims[2]) / (e.ms * 1e-3));
  if (auto it = p.tables.find("gemm_width_scan"); it != p.tables.end() && !it->second.entries.empty()) {
    p.granularity_levels = granularity_levels(it->second);
    p.width_granularity = derive_width_granularity(it->second);
  } else {
    p.tables.erase("gemm_width_scan");
  }
  p.passes = opt.passes;
  if (opt.passes >= 2) {
    p.width_repeatability = width_repeatability(p, rec, opt.passes, shapes.front());
    // Said now, not first in the search that leaves these widths out.
    const std::string w = repeatability_warning(p, 2 * kDefaultSafetyMarginForWarning);
    if (!w.empty()) log_warn(w);
  }
  if (opt.calibrate) {
    if (opt.in_forward) p.in_forward = in_forward_for(p, shapes.front(), workload, opt.progress);
    p.correction = calibrate_correction(p, shapes, workload, opt);
  }
  p.elapsed_s = now_s() - t0;
  p.machine_load = load_between(load_from, read_cpu_times());
  if (const std::string w = busy_machine_warning(p.machine_load, "the profile", p.identity.cores);
      !w.empty())
    log_warn("[profile] " + w);
  return p;
}

void apply_profile(DeviceSpec& device, const Profile& profile) {
  device.bandwidth_bytes_per_s = SpecValue{profile.memory_bandwidth_bytes_per_s, "profile", false};
  device.peak_flops["fp32"] = SpecValue{profile.gemm_peak_flops, "profile", false};
  device.gemm_efficiency = SpecValue{1.0, "profile (peak is the best measured GEMM)", false};
  device.bandwidth_efficiency = SpecValue{1.0, "profile (measured copy bandwidth)", false};
}

}  // namespace ac

namespace ac {

void use_profile_gemm_backend(const Profile& profile) {
  if (profile.identity.device != "cpu") return;
  if (const auto b = gemm_backend_of_description(profile.identity.blas)) set_gemm_backend(*b);
}

}  // namespace ac
