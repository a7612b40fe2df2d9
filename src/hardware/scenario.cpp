#include "hardware/scenario.h"

#include <set>

#include "common/error.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"

namespace ac {

static void reject_unknown_fields(const json& j, const std::set<std::string>& known,
                                  const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (known.count(it.key())) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw FormatError(msg("load_scenario", "{}: unknown field '{}', expected one of {}", where,
                          it.key(), list));
  }
}

static int64_t positive_int(const json& j, const char* key, int64_t fallback,
                            const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw FormatError(msg("load_scenario", "{}.{}: expected a positive integer, found {}", where,
                          key, v.dump()));
  return v.get<int64_t>();
}

static Workload workload_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_scenario", "{}: expected an object, found {}", where, j.dump()));
  reject_unknown_fields(j, {"prompt_tokens", "output_tokens", "batch_size", "weight_dtype",
                            "kv_cache_dtype", "tensor_parallel"}, where);
  Workload w;
  w.prompt_tokens = positive_int(j, "prompt_tokens", w.prompt_tokens, where);
  w.output_tokens = positive_int(j, "output_tokens", w.output_tokens, where);
  w.batch_size = positive_int(j, "batch_size", w.batch_size, where);
  w.tensor_parallel = positive_int(j, "tensor_parallel", w.tensor_parallel, where);
  w.weight_dtype = json_get_or<std::string>(j, "weight_dtype", w.weight_dtype, where);
  w.kv_cache_dtype = json_get_or<std::string>(j, "kv_cache_dtype", w.weight_dtype, where);
  dtype_bytes(w.weight_dtype, "load_scenario");
  dtype_bytes(w.kv_cache_dtype, "load_scenario");
  return w;
}

// A limit: a positive number, or {"fraction_of_teacher": positive number}.
static void one_limit(const json& j, const char* key, std::optional<double>& abs,
                      std::optional<double>& frac, const std::string& where) {
  if (!j.contains(key)) return;
  const json& v = j.at(key);
  auto bad = [&] {
    throw FormatError(msg("load_scenario", "{}.{}: expected a positive number or "
                                           "{{\"fraction_of_teacher\": positive number}}, found {}",
                          where, key, v.dump()));
  };
  if (v.is_number()) {
    if (v.get<double>() <= 0) bad();
    abs = v.get<double>();
  } else if (v.is_object() && v.size() == 1 && v.contains("fraction_of_teacher") &&
             v.at("fraction_of_teacher").is_number()) {
    if (v.at("fraction_of_teacher").get<double>() <= 0) bad();
    frac = v.at("fraction_of_teacher").get<double>();
  } else {
    bad();
  }
}

Limits limits_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_scenario", "{}: expected an object, found {}", where, j.dump()));
  reject_unknown_fields(j, {"ttft_ms", "tpot_ms", "peak_memory_bytes",
                            "min_throughput_tokens_per_s"}, where);
  Limits l;
  std::optional<double> mem;
  one_limit(j, "ttft_ms", l.ttft_ms, l.ttft_fraction, where);
  one_limit(j, "tpot_ms", l.tpot_ms, l.tpot_fraction, where);
  one_limit(j, "min_throughput_tokens_per_s", l.min_throughput_tokens_per_s,
            l.throughput_fraction, where);
  one_limit(j, "peak_memory_bytes", mem, l.memory_fraction, where);
  if (mem) l.peak_memory_bytes = int64_t(*mem);
  return l;
}

json Limits::to_json() const {
  json j = json::object();
  auto put = [&](const char* key, std::optional<double> abs, std::optional<double> frac) {
    if (abs) j[key] = *abs;
    if (frac) j[key] = {{"fraction_of_teacher", *frac}};
  };
  put("ttft_ms", ttft_ms, ttft_fraction);
  put("tpot_ms", tpot_ms, tpot_fraction);
  put("min_throughput_tokens_per_s", min_throughput_tokens_per_s, throughput_fraction);
  if (peak_memory_bytes) j["peak_memory_bytes"] = *peak_memory_bytes;
  if (memory_fraction) j["peak_memory_bytes"] = {{"fraction_of_teacher", *memory_fraction}};
  return j;
}

Limits Limits::resolve(const CostEstimate& teacher) const {
  Limits r = *this;
  if (ttft_fraction) r.ttft_ms = *ttft_fraction * teacher.ttft_ms;
  if (tpot_fraction) r.tpot_ms = *tpot_fraction * teacher.tpot_ms;
  if (throughput_fraction)
    r.min_throughput_tokens_per_s = *throughput_fraction * teacher.throughput_tokens_per_s;
  if (memory_fraction)
    r.peak_memory_bytes = int64_t(*memory_fraction * double(teacher.peak_memory_bytes));
  r.ttft_fraction = r.tpot_fraction = r.throughput_fraction = r.memory_fraction = std::nullopt;
  return r;
}

Scenario scenario_from_json(const json& j, const std::string& file, const fs::path& data_root) {
  if (!j.is_object())
    throw FormatError(msg("load_scenario", "{}: expected a JSON object, found {}", file,
                          j.dump().substr(0, 80)));
  reject_unknown_fields(j, {"name", "device", "engine", "workload", "limits", "notes"}, file);
  Scenario s;
  s.name = json_get<std::string>(j, "name", file);
  s.device = json_get<std::string>(j, "device", file);
  s.engine = json_get<std::string>(j, "engine", file);
  s.notes = json_get_or<std::string>(j, "notes", "", file);
  s.workload = workload_from_json(j.value("workload", json::object()), file + ": workload");
  s.limits = limits_from_json(j.value("limits", json::object()), file + ": limits");
  s.device_spec = load_device(s.device, data_root);
  s.engine_spec = load_engine(s.engine, data_root);
  if (s.device_spec.kind == "cpu" && s.workload.tensor_parallel != 1)
    throw ConfigError(msg("load_scenario", "{}: workload.tensor_parallel: expected 1 on a CPU, "
                                           "found {}", file, s.workload.tensor_parallel));
  return s;
}

Scenario load_scenario(const fs::path& path, const fs::path& data_root) {
  return scenario_from_json(read_json_file(path), path.string(), data_root);
}

Scenario find_scenario(const std::string& name_or_path, const fs::path& data_root) {
  fs::path root = data_root;
  bool is_path = name_or_path.find('/') != std::string::npos ||
                 fs::path(name_or_path).extension() == ".json";
  if (root.empty() && !is_path) root = data_dir();
  return load_scenario(find_data_file("scenarios", name_or_path, root), root);
}

}  // namespace ac
