// Profile tables: lookup (multilinear interpolation) and the profile JSON file, apart from the
// measurement (profile.cpp) so that the reader builds without torch (fuzz/fuzz_profile.cpp).
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "common/json_io.h"
#include "hardware/profile.h"

namespace ac {

constexpr double kMaxProfileLatencyMs = 1e12;  // ~30 years: any larger value is corrupt

// ---------------------------------------------------------------------------------------------
// Lookup: multilinear interpolation over whatever grid was measured.

static double interp(const std::vector<const OpTiming*>& rows, const std::vector<double>& q,
                     size_t d) {
  if (d == q.size()) {
    double s = 0;
    for (const auto* r : rows) s += r->ms;
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

const EngineCalibration* Profile::engine_calibration(const Scenario& s) const {
  if (s.engine == "native" || s.device != identity.device || identity.device != "cpu")
    return nullptr;
  const int threads = s.workload.threads > 0 ? int(s.workload.threads) : identity.cores;
  for (const auto& e : engines)
    if (e.matches(s.engine, threads, s.workload.weight_dtype, s.workload.kv_cache_dtype)) return &e;
  return nullptr;
}

void Profile::set_engine_calibration(const EngineCalibration& c) {
  for (auto& e : engines)
    if (e.matches(c.engine, c.threads, c.weight_dtype, c.kv_cache_dtype)) {
      e = c;
      return;
    }
  engines.push_back(c);
}

std::vector<std::pair<double, double>> Profile::residency_curve(int64_t M) const {
  auto it = tables.find("working_set");
  if (it == tables.end() || it->second.entries.empty() || warm_pool_bytes <= 0 ||
      cold_pool_bytes <= warm_pool_bytes)
    return {};
  const OpTable& t = it->second;
  const double m = double(M);
  const double cold = t.lookup({m, double(cold_pool_bytes)}, "working_set");
  const double warm = t.lookup({m, double(warm_pool_bytes)}, "working_set");
  if (!(cold > warm)) return {};  // no cache effect measured
  std::vector<std::pair<double, double>> curve;
  for (const OpTiming& e : t.entries) {
    const double w = double(e.dims[1]);
    if (w < double(warm_pool_bytes) || w > double(cold_pool_bytes)) continue;
    if (!curve.empty() && curve.back().first == w) continue;
    curve.push_back({w, std::clamp((cold - t.lookup({m, w}, "working_set")) / (cold - warm), 0.0, 1.0)});
  }
  std::sort(curve.begin(), curve.end());
  return curve;
}

double Profile::residency(double working_set_bytes, int64_t M) const {
  return residency_at(residency_curve(M), working_set_bytes);
}

double residency_at(const std::vector<std::pair<double, double>>& curve, double w) {
  if (curve.empty()) return 0;
  if (w <= curve.front().first) return curve.front().second;
  if (w >= curve.back().first) return curve.back().second;
  for (size_t k = 1; k < curve.size(); ++k)
    if (w <= curve[k].first) {
      const auto [x0, h0] = curve[k - 1];
      const auto [x1, h1] = curve[k];
      return h0 + (w - x0) / (x1 - x0) * (h1 - h0);
    }
  return curve.back().second;
}

std::vector<std::string> Profile::extrapolated_dimensions(const ModelConfig& c) const {
  std::vector<std::string> out;
  // The [lo, hi] of the named dimensions over a table's entries; hi = 0 when there is none.
  auto range = [&](const std::string& table_name, std::initializer_list<const char*> dims,
                   int64_t& lo, int64_t& hi) {
    lo = std::numeric_limits<int64_t>::max(), hi = 0;
    const auto it = tables.find(table_name);
    if (it == tables.end()) return;
    const OpTable& t = it->second;
    for (const char* dim : dims) {
      const auto d = std::find(t.dim_names.begin(), t.dim_names.end(), std::string(dim));
      if (d == t.dim_names.end()) continue;
      const size_t k = size_t(d - t.dim_names.begin());
      for (const OpTiming& e : t.entries)
        if (k < e.dims.size()) lo = std::min(lo, e.dims[k]), hi = std::max(hi, e.dims[k]);
    }
  };
  auto check = [&](const std::string& what, int64_t v, const std::string& table_name,
                   std::initializer_list<const char*> dims, const std::string& timed) {
    int64_t lo, hi;
    range(table_name, dims, lo, hi);
    if (hi == 0 || v <= 0) return;
    if (double(v) > 1.1 * double(hi) || double(v) < 0.9 * double(lo))
      out.push_back(fmt::format("{} {}: the profile timed {} {}..{}", what, v, timed, lo, hi));
  };
  int64_t F = 0, H = 0, Hd = 0;
  for (const LayerConfig& l : c.layers) {
    F = std::max(F, l.intermediate_size);
    if (l.has_attention()) H = std::max(H, l.num_attention_heads), Hd = std::max(Hd, l.head_dim);
  }
  check("hidden size", c.hidden_size, "gemm", {"N", "K"}, "GEMM widths");
  check("FFN width", F, "gemm", {"N", "K"}, "GEMM widths");
  check("vocabulary", c.vocab_size, "lm_head", {"N"}, "heads of");
  check("head_dim", Hd, "attention_decode", {"Hd"}, "head_dim");
  check("query heads", H, "attention_decode", {"H"}, "query heads");
  return out;
}

WidthRepeatability Profile::repeatability_at(int64_t hidden_size) const {
  WidthRepeatability best{hidden_size, 0, 0};
  int64_t dist = -1;
  for (const auto& r : width_repeatability) {
    const int64_t d = std::abs(r.hidden_size - hidden_size);
    if (dist < 0 || d < dist) dist = d, best = r;
  }
  return best;
}

const OpTable& Profile::table(const std::string& name) const {
  auto it = tables.find(name);
  if (it == tables.end())
    throw ConfigError(msg("profile", "the profile has no '{}' table: re-run `autocompress "
                                     "profile` with this version", name));
  return it->second;
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
      rows.push_back({{"dims", e.dims}, {"ms", e.ms}, {"median_ms", e.median_ms}, {"spread", e.spread},
                      {"repeats", e.repeats}, {"passes", e.passes},
                      {"pass_spread", e.pass_spread}});
    t[name] = {{"dims", table.dim_names}, {"entries", rows}};
  }
  const auto& id = identity;
  json engines_json = json::array();
  for (const auto& e : engines) engines_json.push_back(e.to_json());
  json rep = json::array();
  for (const auto& r : width_repeatability)
    rep.push_back({{"hidden_size", r.hidden_size}, {"ttft_spread", r.ttft_spread},
                   {"tpot_spread", r.tpot_spread}});
  json levels = json::array();
  for (const auto& [g, eff] : granularity_levels)
    levels.push_back({{"granularity", g}, {"mean_efficiency", eff}});
  return {{"format", "autocompress-profile"},
          {"version", 1},
          {"device", id.device},
          {"identity", {{"cpu_model", id.cpu_model}, {"cores", id.cores}, {"threads", id.threads},
                        {"isa", id.isa}, {"torch_version", id.torch_version}, {"date", id.date},
                        {"timer", id.timer}, {"blas", id.blas},
                        {"latency_statistic", id.latency_statistic},
                        {"gpu_model", id.gpu_model}, {"cuda", id.cuda}}},
          {"workload", workload_json(workload)},
          {"dispatch_overhead_ms", dispatch_overhead_ms},
          {"memory_bandwidth_bytes_per_s", memory_bandwidth_bytes_per_s},
          {"gemm_peak_flops", gemm_peak_flops},
          {"calibration", {{"prefill_step_ms", calibration.prefill_step_ms},
                           {"decode_step_ms", calibration.decode_step_ms},
                           {"models", calibration.models}}},
          {"correction", correction.to_json()},
          {"in_forward", [&] {
             json a = json::array();
             for (const auto& r : in_forward) a.push_back(r.to_json());
             return a;
           }()},
          {"engines", engines_json},
          {"last_level_cache_bytes", last_level_cache_bytes},
          {"warm_pool_bytes", warm_pool_bytes},
          {"cold_pool_bytes", cold_pool_bytes},
          {"passes", passes},
          {"width_repeatability", rep},
          {"decode_gemm_capped", decode_gemm_capped},
          {"width_granularity", width_granularity},
          {"granularity_levels", levels},
          {"elapsed_s", elapsed_s},
          {"machine_load", machine_load.to_json()},
          {"tables", t}};
}

template <typename T>
static std::vector<T> array_field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
    throw FormatError(msg("load_profile", "{}: missing array '{}'", where, key));
  std::vector<T> out;
  for (const json& v : j.at(key)) {
    if (!json_holds<T>(v))
      throw FormatError(msg("load_profile", "{}.{}: wrong element type or range in {}", where, key,
                            j.at(key).dump().substr(0, 200)));
    out.push_back(v.get<T>());
  }
  return out;
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
    for (int64_t d : e.dims)  // exact as doubles (lookup interpolates in double)
      if (d < 0 || d > (int64_t(1) << 53))
        throw FormatError(msg("load_profile", "{}.dims: expected values in 0..2^53, found {}", w,
                              d));
    e.median_ms = json_get<double>(rows[i], "median_ms", w);
    e.ms = rows[i].contains("ms") ? json_get<double>(rows[i], "ms", w) : e.median_ms;  // older
    // Bounded so that interpolation and extrapolation stay finite (never Inf - Inf = NaN).
    for (const auto& [key, v] : {std::pair{"median_ms", e.median_ms}, std::pair{"ms", e.ms}})
      if (!(v >= 0 && v <= kMaxProfileLatencyMs))
        throw FormatError(msg("load_profile", "{}.{}: expected 0..{} ms, found {}", w, key,
                              kMaxProfileLatencyMs, v));
    e.spread = json_get_or<double>(rows[i], "spread", 0.0, w);
    e.repeats = json_get_or<int>(rows[i], "repeats", 0, w);
    e.passes = json_get_or<int>(rows[i], "passes", 1, w);
    e.pass_spread = json_get_or<double>(rows[i], "pass_spread", 0.0, w);
    if (e.passes < 1 || !(e.pass_spread >= 0 && e.pass_spread <= 1e6))
      throw FormatError(msg("load_profile", "{}: expected passes >= 1 and pass_spread in "
                                            "0..1e6, found {} and {}", w, e.passes, e.pass_spread));
    t.entries.push_back(std::move(e));
  }
  return t;
}

Profile Profile::from_json(const json& j, const std::string& file) {
  if (!j.is_object() || json_get_or<std::string>(j, "format", "", file) != "autocompress-profile")
    throw FormatError(msg("load_profile", "{}: field 'format': expected \"autocompress-profile\", "
                                          "found {}", file,
                          j.is_object() ? j.value("format", json()).dump().substr(0, 80)
                                        : std::string(j.type_name())));
  Profile p;
  p.identity.device = json_get<std::string>(j, "device", file);
  const json& id = j.value("identity", json::object());
  std::string fid = file + ": identity";
  p.identity.cpu_model = json_get_or<std::string>(id, "cpu_model", "", fid);
  p.identity.cores = json_get_or<int>(id, "cores", 0, fid);
  p.identity.threads = json_get_or<int>(id, "threads", 0, fid);
  if (id.is_object() && id.contains("isa"))
    p.identity.isa = array_field<std::string>(id, "isa", fid);
  p.identity.torch_version = json_get_or<std::string>(id, "torch_version", "", fid);
  p.identity.date = json_get_or<std::string>(id, "date", "", fid);
  p.identity.timer = json_get_or<std::string>(id, "timer", "wall", fid);
  p.identity.blas = json_get_or<std::string>(id, "blas", "", fid);
  p.identity.gpu_model = json_get_or<std::string>(id, "gpu_model", "", fid);
  p.identity.cuda = json_get_or<std::string>(id, "cuda", "", fid);
  p.identity.latency_statistic = json_get_or<std::string>(id, "latency_statistic", "median", fid);
  if (p.identity.latency_statistic != "min" && p.identity.latency_statistic != "median")
    throw FormatError(msg("load_profile", "{}.latency_statistic: expected \"min\" or "
                                          "\"median\", found \"{}\"", fid,
                          p.identity.latency_statistic));
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
  if (j.contains("correction"))
    p.correction = LatencyCorrection::from_json(j.at("correction"), file + ": correction");
  if (j.contains("engines")) {
    if (!j.at("engines").is_array())
      throw FormatError(msg("load_profile", "{}: engines: expected an array", file));
    for (size_t i = 0; i < j.at("engines").size(); ++i)
      p.engines.push_back(EngineCalibration::from_json(j.at("engines")[i],
                                                       fmt::format("{}: engines[{}]", file, i)));
  }
  p.last_level_cache_bytes = json_get_or<int64_t>(j, "last_level_cache_bytes", 0, file);
  p.warm_pool_bytes = json_get_or<int64_t>(j, "warm_pool_bytes", 0, file);
  p.cold_pool_bytes = json_get_or<int64_t>(j, "cold_pool_bytes", 0, file);
  for (const auto& [key, v] : {std::pair{"last_level_cache_bytes", p.last_level_cache_bytes},
                               std::pair{"warm_pool_bytes", p.warm_pool_bytes},
                               std::pair{"cold_pool_bytes", p.cold_pool_bytes}})
    if (v < 0 || v > (int64_t(1) << 50))
      throw FormatError(msg("load_profile", "{}: {}: expected 0..2^50 bytes, found {}", file,
                            key, v));
  p.passes = json_get_or<int>(j, "passes", 1, file);
  if (p.passes < 1)
    throw FormatError(msg("load_profile", "{}: passes: expected >= 1, found {}", file, p.passes));
  if (j.contains("width_repeatability")) {
    const json& wr = j.at("width_repeatability");
    if (!wr.is_array())
      throw FormatError(msg("load_profile", "{}: width_repeatability: expected an array", file));
    for (size_t i = 0; i < wr.size(); ++i) {
      std::string w = fmt::format("{}: width_repeatability[{}]", file, i);
      p.width_repeatability.push_back({json_get<int64_t>(wr[i], "hidden_size", w),
                                       json_get<double>(wr[i], "ttft_spread", w),
                                       json_get<double>(wr[i], "tpot_spread", w)});
    }
  }
  if (j.contains("in_forward")) {
    const json& f = j.at("in_forward");
    if (!f.is_array())
      throw FormatError(msg("load_profile", "{}: in_forward: expected an array", file));
    for (size_t i = 0; i < f.size(); ++i) {
      p.in_forward.push_back(
          InForwardRatio::from_json(f[i], fmt::format("{}: in_forward[{}]", file, i)));
      if (i > 0 && p.in_forward[i].hidden_size <= p.in_forward[i - 1].hidden_size)
        throw FormatError(msg("load_profile", "{}: in_forward[{}].hidden_size: expected ascending "
                                              "hidden sizes, found {} after {}", file, i,
                              p.in_forward[i].hidden_size, p.in_forward[i - 1].hidden_size));
    }
  }
  p.decode_gemm_capped = json_get_or<int>(j, "decode_gemm_capped", 0, file);
  p.width_granularity = json_get_or<int64_t>(j, "width_granularity", 0, file);
  if (p.width_granularity < 0 || p.width_granularity > (int64_t(1) << 20))
    throw FormatError(msg("load_profile", "{}: width_granularity: expected 0 (not derived) or a "
                                          "width step in 1..2^20, found {}", file,
                          p.width_granularity));
  if (j.contains("granularity_levels")) {
    const json& lv = j.at("granularity_levels");
    if (!lv.is_array())
      throw FormatError(msg("load_profile", "{}: granularity_levels: expected an array", file));
    for (size_t i = 0; i < lv.size(); ++i) {
      std::string w = fmt::format("{}: granularity_levels[{}]", file, i);
      p.granularity_levels.push_back({json_get<int64_t>(lv[i], "granularity", w),
                                      json_get<double>(lv[i], "mean_efficiency", w)});
    }
  }
  p.elapsed_s = json_get_or<double>(j, "elapsed_s", 0.0, file);
  p.machine_load = MachineLoad::from_json(j.value("machine_load", json()), file + ": machine_load");
  const json& t = j.value("tables", json::object());
  if (!t.is_object())
    throw FormatError(msg("load_profile", "{}: field 'tables': expected an object name -> table, "
                                          "found {}", file, t.type_name()));
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
