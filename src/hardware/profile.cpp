#include "hardware/profile.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/measure.h"
#include "hardware/native_ops.h"
#include "hardware/timer.h"

namespace ac {

// ---------------------------------------------------------------------------------------------
// Lookup: multilinear interpolation over whatever grid was measured.

static double interp(const std::vector<const OpTiming*>& rows, const std::vector<double>& q,
                     size_t d) {
  if (d == q.size()) {
    double s = 0;
    for (const auto* r : rows) s += r->median_ms;
    return s / double(rows.size());
  }
  std::vector<double> vals;
  for (const auto* r : rows) vals.push_back(double(r->dims[d]));
  std::sort(vals.begin(), vals.end());
  vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
  auto subset = [&](double v) {
    std::vector<const OpTiming*> s;
    for (const auto* r : rows)
      if (double(r->dims[d]) == v) s.push_back(r);
    return s;
  };
  if (vals.size() == 1) return interp(rows, q, d + 1);
  auto it = std::lower_bound(vals.begin(), vals.end(), q[d]);
  if (it != vals.end() && *it == q[d]) return interp(subset(*it), q, d + 1);
  size_t hi = std::clamp<size_t>(size_t(it - vals.begin()), 1, vals.size() - 1);
  double x0 = vals[hi - 1], x1 = vals[hi];
  double f0 = interp(subset(x0), q, d + 1), f1 = interp(subset(x1), q, d + 1);
  double f = f0 + (q[d] - x0) / (x1 - x0) * (f1 - f0);
  return std::max(f, 0.0);
}

double OpTable::lookup(const std::vector<double>& query, const std::string& name) const {
  if (entries.empty())
    throw ConfigError(msg("profile", "table '{}' has no entries: re-run `autocompress profile`",
                          name));
  if (query.size() != dim_names.size())
    throw ConfigError(msg("profile", "table '{}': query has {} dims, the table has {}", name,
                          query.size(), dim_names.size()));
  std::vector<const OpTiming*> rows;
  for (const auto& e : entries) rows.push_back(&e);
  return interp(rows, query, 0);
}

const OpTable& Profile::table(const std::string& name) const {
  auto it = tables.find(name);
  if (it == tables.end())
    throw ConfigError(msg("profile", "the profile has no '{}' table: re-run `autocompress "
                                     "profile` with this version", name));
  return it->second;
}

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

template <typename F>
static OpTiming time_op(F&& f, const ProfileOptions& opt) {
  for (int i = 0; i < opt.warmup; ++i) f(i);
  std::vector<double> t;
  double total = 0;
  for (int i = 0; int(t.size()) < opt.min_repeats ||
                  (total < opt.min_time_ms && int(t.size()) < opt.max_repeats);
       ++i) {
    double s = timer_ms();
    f(opt.warmup + i);
    double ms = timer_ms() - s;
    t.push_back(ms);
    total += ms;
  }
  std::sort(t.begin(), t.end());
  auto pct = [&](double p) { return t[size_t(std::lround(p * double(t.size() - 1)))]; };
  OpTiming r;
  r.median_ms = pct(0.5);
  r.spread = r.median_ms > 0 ? (pct(0.9) - pct(0.1)) / r.median_ms : 0;
  r.repeats = int(t.size());
  return r;
}

// A pool of small random values that weight copies are carved from, so each call of a GEMM
// reads weights another call did not just pull into the core's caches.
struct WeightPool {
  at::Tensor pool;  // [numel] fp32
  explicit WeightPool(int64_t bytes) { pool = at::rand({bytes / 4}) * 0.02 - 0.01; }
  // Copy `i` of an [N, K] weight (copies cycle through the pool).
  at::Tensor weight(int64_t N, int64_t K, int64_t i) const {
    int64_t n = N * K, copies = std::max<int64_t>(1, pool.numel() / n);
    if (n > pool.numel()) return at::rand({N, K}) * 0.02;
    return pool.narrow(0, (i % copies) * n, n).view({N, K});
  }
};

struct Grids {
  std::vector<int64_t> ms;       // B (decode) and B*T (prefill)
  std::vector<int64_t> widths;   // width ladder
  std::set<std::pair<int64_t, int64_t>> heads_vocab;  // (V, D) for lm_head
  std::set<std::tuple<int64_t, int64_t, int64_t>> attn;  // (Hd, G, H)
  std::vector<int64_t> contexts;  // decode context lengths
};

// Counts measured shapes on the progress bar (if any).
struct Ticker {
  Progress* bar = nullptr;
  int64_t done = 0;
  void tick() {
    if (bar) bar->update(++done);
  }
};

static void profile_gemm(Profile& p, const Grids& g, const WeightPool& pool,
                         const ProfileOptions& opt, Ticker& bar) {
  OpTable& t = p.tables["gemm"];
  t.dim_names = {"M", "N", "K"};
  for (int64_t M : g.ms)
    for (int64_t N : g.widths)
      for (int64_t K : g.widths) {
        at::Tensor x = at::rand({M, K});
        OpTiming r = time_op([&](int i) { at::linear(x, pool.weight(N, K, i)); }, opt);
        r.dims = {M, N, K};
        t.entries.push_back(r);
        p.gemm_peak_flops = std::max(p.gemm_peak_flops, 2.0 * M * N * K / (r.median_ms * 1e-3));
        bar.tick();
      }
  OpTable& h = p.tables["lm_head"];
  h.dim_names = {"M", "N", "K"};
  int64_t M = g.ms.front();
  for (auto [V, D] : g.heads_vocab)
    for (int64_t K : g.widths) {
      if (K > D) continue;
      at::Tensor x = at::rand({M, K});
      OpTiming r = time_op([&](int i) { at::linear(x, pool.weight(V, K, i)); }, opt);
      r.dims = {M, V, K};
      h.entries.push_back(r);
      bar.tick();
    }
}

static void profile_attention(Profile& p, const Grids& g, int64_t B, int64_t T,
                              const ProfileOptions& opt, Ticker& bar) {
  OpTable& pre = p.tables["attention_prefill"];
  OpTable& dec = p.tables["attention_decode"];
  pre.dim_names = {"B", "Hd", "G", "H", "T"};
  dec.dim_names = {"B", "Hd", "G", "H", "C"};
  const int64_t cap = g.contexts.back();
  for (auto [Hd, G, H] : g.attn) {
    at::Tensor ck = at::zeros({B, G, cap, Hd}), cv = at::zeros({B, G, cap, Hd});
    auto run = [&](int64_t pos0, int64_t n) {
      at::Tensor q = at::rand({B, n, H * Hd}), k = at::rand({B, n, G * Hd}),
                 v = at::rand({B, n, G * Hd});
      at::Tensor cos = at::rand({n, Hd}), sin = at::rand({n, Hd});
      at::Tensor allowed = n > 1 ? native_ops::causal_allowed(pos0, n) : at::Tensor();
      return time_op(
          [&](int) { native_ops::attention(q, k, v, ck, cv, pos0, H, G, Hd, cos, sin, allowed); },
          opt);
    };
    OpTiming r = run(0, T);
    r.dims = {B, Hd, G, H, T};
    pre.entries.push_back(r);
    bar.tick();
    for (int64_t C : g.contexts) {
      OpTiming d = run(C - 1, 1);
      d.dims = {B, Hd, G, H, C};
      dec.entries.push_back(d);
      bar.tick();
    }
  }
}

static void profile_small_ops(Profile& p, const Grids& g, double eps, const ProfileOptions& opt,
                              Ticker& bar) {
  for (const char* name : {"rmsnorm", "silu_mul", "add", "embedding"})
    p.tables[name].dim_names = {"M", name == std::string("silu_mul") ? "F" : "D"};
  int64_t max_d = 0;
  for (auto [V, D] : g.heads_vocab) max_d = std::max(max_d, D);
  at::Tensor table = at::rand({32000, max_d});
  for (int64_t M : g.ms)
    for (int64_t W : g.widths) {
      at::Tensor x = at::rand({M, W}), y = at::rand({M, W}), w = at::rand({W});
      at::Tensor ids = at::randint(0, 32000, {M}, at::kLong);
      at::Tensor emb = table.narrow(1, 0, std::min(W, max_d));
      auto put = [&](const char* name, OpTiming r) {
        r.dims = {M, W};
        p.tables[name].entries.push_back(r);
        bar.tick();
      };
      put("rmsnorm", time_op([&](int) { native_ops::rmsnorm(x, w, eps); }, opt));
      put("silu_mul", time_op([&](int) { native_ops::silu_mul(x, y); }, opt));
      put("add", time_op([&](int) { at::add(x, y); }, opt));
      if (W <= max_d) put("embedding", time_op([&](int) { at::embedding(emb, ids); }, opt));
    }
}

// One tiny op: the floor of every ATen call (dispatch, allocation, threading decisions).
static double measure_dispatch(const ProfileOptions& opt) {
  at::Tensor a = at::rand({8}), b = at::rand({8});
  return time_op([&](int) { at::add(a, b); }, opt).median_ms;
}

// Read + write bandwidth of a copy far larger than the caches.
static double measure_bandwidth(const ProfileOptions& opt) {
  const int64_t n = (512ll << 20) / 4;
  at::Tensor src = at::ones({n}), dst = at::empty({n});
  ProfileOptions o = opt;
  o.min_repeats = 5;
  o.min_time_ms = 0;
  double ms = time_op([&](int) { dst.copy_(src); }, o).median_ms;
  return 2.0 * 4.0 * double(n) / (ms * 1e-3);
}

// Head dim of the first attention layer (0 when no layer has attention).
static int64_t first_head_dim(const ModelConfig& c) {
  for (const auto& l : c.layers)
    if (l.has_attention()) return l.head_dim;
  return 0;
}

// The forward's once-per-call work beside the layers (see the "step" table in profile.h).
static void profile_step(Profile& p, const std::vector<ModelConfig>& shapes, const Workload& w,
                         const ProfileOptions& opt) {
  OpTable& t = p.tables["step"];
  t.dim_names = {"B", "T", "Hd", "V"};
  std::set<std::pair<int64_t, int64_t>> done;
  for (const auto& c : shapes) {
    const int64_t Hd = first_head_dim(c), V = c.vocab_size, B = w.batch_size;
    if (!done.insert({Hd, V}).second) continue;
    for (int64_t T : {w.prompt_tokens, int64_t(1)}) {
      at::Tensor tokens = at::randint(0, V, {B, T}, at::kLong), logits = at::rand({B, 1, V});
      const int64_t pos0 = T == 1 ? w.prompt_tokens : 0;
      OpTiming r = time_op(
          [&](int) {
            (void)tokens.min().item<int64_t>();
            (void)tokens.max().item<int64_t>();
            if (Hd > 0) rope_tables(c, Hd, pos0, T);
            if (T > 1) native_ops::causal_allowed(pos0, T);
            logits.argmax(-1);
          },
          opt);
      r.dims = {B, T, Hd, V};
      t.entries.push_back(r);
    }
  }
}

static Grids make_grids(const std::vector<ModelConfig>& shapes, const Workload& w,
                        const ProfileOptions& opt) {
  Grids g;
  g.ms = {w.batch_size, w.batch_size * w.prompt_tokens};
  g.widths = width_ladder(shapes, opt.min_width);
  for (const auto& c : shapes) g.heads_vocab.insert({c.vocab_size, c.hidden_size});
  g.attn = attention_shapes(shapes);
  g.contexts = {w.prompt_tokens + 1, w.prompt_tokens + (w.output_tokens + 1) / 2,
                w.context_tokens()};
  g.contexts.erase(std::unique(g.contexts.begin(), g.contexts.end()), g.contexts.end());
  return g;
}

static int64_t weight_bytes_fp32(const ModelConfig& c) { return 4 * c.num_parameters(); }

Profile run_profile(const std::vector<ModelConfig>& shapes, const Workload& workload,
                    const ProfileOptions& opt) {
  if (shapes.empty()) throw ConfigError(msg("run_profile", "no model shapes given"));
  for (const auto& c : shapes) c.validate("run_profile");
  double t0 = now_s();
  Profile p;
  DeviceSpec cpu = detect_cpu();
  p.identity = {"cpu", cpu.display_name, cpu.cores, init_torch_threads(), cpu.isa, TORCH_VERSION,
                today_utc(), timer_kind()};
  p.workload = workload;
  Grids g = make_grids(shapes, workload, opt);
  int64_t rotation = opt.rotation_bytes;
  if (rotation <= 0) {
    for (const auto& c : shapes) rotation = std::max(rotation, weight_bytes_fp32(c));
    rotation = std::clamp<int64_t>(rotation, 32ll << 20, 512ll << 20);
  }
  WeightPool pool(rotation);
  size_t nw = g.widths.size();
  int64_t total = int64_t(g.ms.size() * nw * nw + g.heads_vocab.size() * nw +
                          g.attn.size() * (1 + g.contexts.size()) + g.ms.size() * nw * 4);
  Progress progress("profile", total, "shapes");
  Ticker bar{opt.progress ? &progress : nullptr};
  p.dispatch_overhead_ms = measure_dispatch(opt);
  p.memory_bandwidth_bytes_per_s = measure_bandwidth(opt);
  profile_gemm(p, g, pool, opt, bar);
  profile_attention(p, g, workload.batch_size, workload.prompt_tokens, opt, bar);
  profile_small_ops(p, g, shapes.front().rms_norm_eps, opt, bar);
  if (opt.progress) progress.finish();
  profile_step(p, shapes, workload, opt);
  if (opt.calibrate) p.calibration = calibrate_native(p, shapes, workload);
  p.elapsed_s = now_s() - t0;
  return p;
}

void apply_profile(DeviceSpec& device, const Profile& profile) {
  device.bandwidth_bytes_per_s = SpecValue{profile.memory_bandwidth_bytes_per_s, "profile", false};
  device.peak_flops["fp32"] = SpecValue{profile.gemm_peak_flops, "profile", false};
  device.gemm_efficiency = SpecValue{1.0, "profile (peak is the best measured GEMM)", false};
  device.bandwidth_efficiency = SpecValue{1.0, "profile (measured copy bandwidth)", false};
}

// ---------------------------------------------------------------------------------------------
// JSON.

static json workload_json(const Workload& w) {
  return {{"prompt_tokens", w.prompt_tokens}, {"output_tokens", w.output_tokens},
          {"batch_size", w.batch_size},       {"weight_dtype", w.weight_dtype},
          {"kv_cache_dtype", w.kv_cache_dtype}, {"tensor_parallel", w.tensor_parallel}};
}

json Profile::to_json() const {
  json t = json::object();
  for (const auto& [name, table] : tables) {
    json rows = json::array();
    for (const auto& e : table.entries)
      rows.push_back({{"dims", e.dims}, {"median_ms", e.median_ms}, {"spread", e.spread},
                      {"repeats", e.repeats}});
    t[name] = {{"dims", table.dim_names}, {"entries", rows}};
  }
  const auto& id = identity;
  return {{"format", "autocompress-profile"},
          {"version", 1},
          {"device", id.device},
          {"identity", {{"cpu_model", id.cpu_model}, {"cores", id.cores}, {"threads", id.threads},
                        {"isa", id.isa}, {"torch_version", id.torch_version}, {"date", id.date},
                        {"timer", id.timer}}},
          {"workload", workload_json(workload)},
          {"dispatch_overhead_ms", dispatch_overhead_ms},
          {"memory_bandwidth_bytes_per_s", memory_bandwidth_bytes_per_s},
          {"gemm_peak_flops", gemm_peak_flops},
          {"calibration", {{"prefill_step_ms", calibration.prefill_step_ms},
                           {"decode_step_ms", calibration.decode_step_ms},
                           {"models", calibration.models}}},
          {"elapsed_s", elapsed_s},
          {"tables", t}};
}

template <typename T>
static std::vector<T> array_field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
    throw FormatError(msg("load_profile", "{}: missing array '{}'", where, key));
  try {
    return j.at(key).get<std::vector<T>>();
  } catch (const json::exception&) {
    throw FormatError(msg("load_profile", "{}.{}: wrong element type in {}", where, key,
                          j.at(key).dump()));
  }
}

static OpTable table_from_json(const json& j, const std::string& where) {
  OpTable t;
  t.dim_names = array_field<std::string>(j, "dims", where);
  const json& rows = j.contains("entries") ? j.at("entries") : json();
  if (!rows.is_array())
    throw FormatError(msg("load_profile", "{}: missing array 'entries'", where));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string w = fmt::format("{}.entries[{}]", where, i);
    OpTiming e;
    e.dims = array_field<int64_t>(rows[i], "dims", w);
    if (e.dims.size() != t.dim_names.size())
      throw FormatError(msg("load_profile", "{}.dims: expected {} values ({}), found {}", w,
                            t.dim_names.size(), fmt::join(t.dim_names, ", "), e.dims.size()));
    e.median_ms = json_get<double>(rows[i], "median_ms", w);
    if (!(e.median_ms >= 0))
      throw FormatError(msg("load_profile", "{}.median_ms: expected >= 0, found {}", w,
                            e.median_ms));
    e.spread = json_get_or<double>(rows[i], "spread", 0.0, w);
    e.repeats = json_get_or<int>(rows[i], "repeats", 0, w);
    t.entries.push_back(std::move(e));
  }
  return t;
}

Profile Profile::from_json(const json& j, const std::string& file) {
  if (json_get_or<std::string>(j, "format", "", file) != "autocompress-profile")
    throw FormatError(msg("load_profile", "{}: field 'format': expected \"autocompress-profile\", "
                                          "found {}", file, j.value("format", json()).dump()));
  Profile p;
  p.identity.device = json_get<std::string>(j, "device", file);
  const json& id = j.value("identity", json::object());
  std::string fid = file + ": identity";
  p.identity.cpu_model = json_get_or<std::string>(id, "cpu_model", "", fid);
  p.identity.cores = json_get_or<int>(id, "cores", 0, fid);
  p.identity.threads = json_get_or<int>(id, "threads", 0, fid);
  p.identity.isa = id.value("isa", std::vector<std::string>{});
  p.identity.torch_version = json_get_or<std::string>(id, "torch_version", "", fid);
  p.identity.date = json_get_or<std::string>(id, "date", "", fid);
  p.identity.timer = json_get_or<std::string>(id, "timer", "wall", fid);
  const json& w = j.value("workload", json::object());
  std::string fw = file + ": workload";
  p.workload.prompt_tokens = json_get_or<int64_t>(w, "prompt_tokens", 0, fw);
  p.workload.output_tokens = json_get_or<int64_t>(w, "output_tokens", 0, fw);
  p.workload.batch_size = json_get_or<int64_t>(w, "batch_size", 1, fw);
  p.workload.weight_dtype = json_get_or<std::string>(w, "weight_dtype", "fp32", fw);
  p.workload.kv_cache_dtype = json_get_or<std::string>(w, "kv_cache_dtype", "fp32", fw);
  p.dispatch_overhead_ms = json_get_or<double>(j, "dispatch_overhead_ms", 0.0, file);
  p.memory_bandwidth_bytes_per_s = json_get_or<double>(j, "memory_bandwidth_bytes_per_s", 0.0, file);
  p.gemm_peak_flops = json_get_or<double>(j, "gemm_peak_flops", 0.0, file);
  const json& c = j.value("calibration", json::object());
  std::string fc = file + ": calibration";
  p.calibration.prefill_step_ms = json_get_or<double>(c, "prefill_step_ms", 0.0, fc);
  p.calibration.decode_step_ms = json_get_or<double>(c, "decode_step_ms", 0.0, fc);
  p.calibration.models = json_get_or<int>(c, "models", 0, fc);
  p.elapsed_s = json_get_or<double>(j, "elapsed_s", 0.0, file);
  const json& t = j.value("tables", json::object());
  for (auto it = t.begin(); it != t.end(); ++it)
    p.tables[it.key()] = table_from_json(it.value(), file + ": tables." + it.key());
  return p;
}

Profile load_profile(const fs::path& path) {
  return Profile::from_json(read_json_file(path), path.string());
}

void save_profile(const fs::path& path, const Profile& profile) {
  write_json_file(path, profile.to_json());
}

}  // namespace ac
