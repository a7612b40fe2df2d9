#include "hardware/scenario.h"

#include <algorithm>
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

// Workload sizes are bounded so that token and byte counts derived from them cannot overflow.
static int64_t positive_int(const json& j, const char* key, int64_t fallback, int64_t max,
                            const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!json_holds<int64_t>(v) || v.get<int64_t>() <= 0)
    throw FormatError(msg("load_scenario", "{}.{}: expected a positive integer, found {}", where,
                          key, v.dump().substr(0, 200)));
  if (v.get<int64_t>() > max)
    throw FormatError(msg("load_scenario", "{}.{}: {} is above the limit {}", where, key,
                          v.get<int64_t>(), max));
  return v.get<int64_t>();
}

static Workload workload_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_scenario", "{}: expected an object, found {}", where, j.dump()));
  reject_unknown_fields(j, {"prompt_tokens", "output_tokens", "batch_size", "weight_dtype",
                            "kv_cache_dtype", "tensor_parallel", "threads"}, where);
  Workload w;
  w.prompt_tokens = positive_int(j, "prompt_tokens", w.prompt_tokens, kMaxWorkloadTokens, where);
  w.output_tokens = positive_int(j, "output_tokens", w.output_tokens, kMaxWorkloadTokens, where);
  w.batch_size = positive_int(j, "batch_size", w.batch_size, kMaxWorkloadBatch, where);
  w.tensor_parallel =
      positive_int(j, "tensor_parallel", w.tensor_parallel, kMaxTensorParallel, where);
  w.threads = positive_int(j, "threads", w.threads, 4096, where);
  w.weight_dtype = json_get_or<std::string>(j, "weight_dtype", w.weight_dtype, where);
  w.kv_cache_dtype = json_get_or<std::string>(j, "kv_cache_dtype", w.weight_dtype, where);
  for (const auto& [field, dtype] : {std::pair<const char*, const std::string&>{
                                         "weight_dtype", w.weight_dtype},
                                     {"kv_cache_dtype", w.kv_cache_dtype}}) {
    try {
      dtype_bytes(dtype, "load_scenario");
    } catch (const ConfigError&) {
      throw ConfigError(msg("load_scenario", "{}.{}: unknown dtype '{}', expected fp32, bf16, "
                            "fp16, fp8, int8, int4, q8_0 or q4_0", where, field, dtype));
    }
  }
  return w;
}

int64_t weight_row_multiple(const std::string& weight_dtype) {
  return weight_dtype == "q8_0" || weight_dtype == "q4_0" ? 32 : 1;
}

// A limit: a positive number, or {"fraction_of_teacher": positive number}.
static void one_limit(const json& j, const char* key, std::optional<double>& abs,
                      std::optional<double>& frac, const std::string& where) {
  if (!j.contains(key)) return;
  const json& v = j.at(key);
  auto bad = [&] {
    throw FormatError(msg("load_scenario", "{}.{}: expected a positive number or "
                                           "{{\"fraction_of_teacher\": positive number}}, "
                                           "below 2^62, found {}",
                          where, key, v.dump()));
  };
  // Below 2^62 so that a byte limit converts to int64 exactly; JSON has no NaN or Inf.
  if (v.is_number()) {
    if (!(v.get<double>() > 0 && v.get<double>() < 0x1p62)) bad();
    abs = v.get<double>();
  } else if (v.is_object() && v.size() == 1 && v.contains("fraction_of_teacher") &&
             v.at("fraction_of_teacher").is_number()) {
    if (!(v.at("fraction_of_teacher").get<double>() > 0 &&
          v.at("fraction_of_teacher").get<double>() < 0x1p62))
      bad();
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

// "sources": {"workload.batch_size": "why", ...}; every key names a field present in the file.
static std::map<std::string, std::string> sources_from_json(const json& src, const json& file_json,
                                                            const std::string& file) {
  if (!src.is_object())
    throw FormatError(msg("load_scenario", "{}: sources: expected an object of field -> text, "
                                           "found {}", file, src.dump().substr(0, 80)));
  std::map<std::string, std::string> out;
  for (auto it = src.begin(); it != src.end(); ++it) {
    const std::string& key = it.key();
    size_t dot = key.find('.');
    std::string head = key.substr(0, dot), field = dot == std::string::npos ? "" : key.substr(dot + 1);
    bool present = dot == std::string::npos
                       ? (head == "device" || head == "engine")
                       : ((head == "workload" || head == "limits") && file_json.contains(head) &&
                          file_json.at(head).is_object() && file_json.at(head).contains(field));
    if (!present)
      throw FormatError(msg("load_scenario", "{}: sources.{}: names no field of this file, "
                                             "expected \"device\", \"engine\", "
                                             "\"workload.<field>\" or \"limits.<field>\" of a "
                                             "field that is set", file, key));
    if (!it.value().is_string() || it.value().get<std::string>().empty())
      throw FormatError(msg("load_scenario", "{}: sources.{}: expected a non-empty text, found {}",
                            file, key, it.value().dump()));
    out[key] = it.value().get<std::string>();
  }
  return out;
}

Scenario scenario_from_json(const json& j, const std::string& file, const fs::path& data_root) {
  if (!j.is_object())
    throw FormatError(msg("load_scenario", "{}: expected a JSON object, found {}", file,
                          j.dump().substr(0, 80)));
  reject_unknown_fields(j, {"name", "device", "engine", "workload", "limits", "notes", "sources"},
                        file);
  Scenario s;
  s.name = json_get<std::string>(j, "name", file);
  s.device = json_get<std::string>(j, "device", file);
  s.engine = json_get<std::string>(j, "engine", file);
  s.notes = json_get_or<std::string>(j, "notes", "", file);
  s.workload = workload_from_json(j.value("workload", json::object()), file + ": workload");
  s.limits = limits_from_json(j.value("limits", json::object()), file + ": limits");
  if (j.contains("sources")) s.sources = sources_from_json(j.at("sources"), j, file);
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
