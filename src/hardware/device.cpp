#include "hardware/device.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/runtime.h"
#include "hardware/data_dir.h"

namespace ac {

double dtype_bytes(const std::string& dtype, const char* where) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp8" || dtype == "int8") return 1;
  if (dtype == "int4") return 0.5;
  // ggml's block formats: 32 values and one fp16 scale per block (io/gguf_quant.h).
  if (dtype == "q8_0") return 34.0 / 32;
  if (dtype == "q4_0") return 18.0 / 32;
  throw ConfigError(msg(where, "unknown dtype '{}', expected fp32, bf16, fp16, fp8, int8, int4, "
                               "q8_0 or q4_0",
                        dtype));
}

double DeviceSpec::peak_flops_for(const std::string& dtype) const {
  std::string key = dtype;
  if (key == "fp16") key = "bf16";
  if (key == "int8" || key == "int4") key = "fp8";
  if (key == "q8_0" || key == "q4_0") key = "bf16";  // ggml dequantizes a block, then multiplies
  auto it = peak_flops.find(key);
  if (it == peak_flops.end() || it->second.value <= 0)
    throw ConfigError(msg("peak_flops", "device '{}' has no dense peak FLOP/s for {} ({}){}",
                          name, dtype, key,
                          kind == "cpu" ? ": a CPU's peak comes from its profile, run "
                                          "`autocompress profile` and pass --profile"
                                        : ": the device does not support it"));
  return it->second.value;
}

// Reads {"value": x, "source": "...", "estimated": bool}; value null -> nullopt.
static std::optional<SpecValue> spec_value(const json& j, const char* key, const std::string& file,
                                           bool required) {
  if (!j.contains(key)) {
    if (required) throw FormatError(msg("load_device", "{}: missing field '{}'", file, key));
    return std::nullopt;
  }
  const json& v = j.at(key);
  std::string where = file + ": " + key;
  if (!v.is_object() || !v.contains("value"))
    throw FormatError(msg("load_device", "{}: expected {{\"value\": number, \"source\": text}}, "
                                         "found {}", where, v.dump()));
  if (v.at("value").is_null()) return std::nullopt;
  if (!v.at("value").is_number() || v.at("value").get<double>() < 0)
    throw FormatError(msg("load_device", "{}.value: expected a non-negative number, found {}",
                          where, v.at("value").dump()));
  SpecValue s;
  s.value = v.at("value").get<double>();
  s.source = json_get_or<std::string>(v, "source", "", where);
  s.estimated = json_get_or<bool>(v, "estimated", false, where);
  if (s.source.empty())
    throw FormatError(msg("load_device", "{}: every number needs a 'source'", where));
  return s;
}

DeviceSpec device_from_json(const json& j, const std::string& file) {
  DeviceSpec d;
  d.name = json_get<std::string>(j, "name", file);
  d.kind = json_get<std::string>(j, "kind", file);
  if (d.kind != "cpu" && d.kind != "cuda")
    throw FormatError(msg("load_device", "{}: field 'kind': expected \"cpu\" or \"cuda\", found "
                                         "\"{}\"", file, d.kind));
  d.display_name = json_get_or<std::string>(j, "display_name", d.name, file);
  bool gpu = d.kind == "cuda";
  d.memory_bytes = spec_value(j, "memory_bytes", file, gpu);
  d.bandwidth_bytes_per_s = spec_value(j, "bandwidth_bytes_per_s", file, gpu);
  if (j.contains("peak_flops")) {
    const json& p = j.at("peak_flops");
    if (!p.is_object())
      throw FormatError(msg("load_device", "{}: field 'peak_flops': expected an object dtype -> "
                                           "{{value, source}}, found {}", file, p.dump()));
    for (auto it = p.begin(); it != p.end(); ++it) {
      try {
        dtype_bytes(it.key(), "load_device");
      } catch (const ConfigError&) {
        throw FormatError(msg("load_device", "{}: peak_flops: unknown dtype '{}', expected fp32, "
                              "bf16, fp16, fp8, int8 or int4", file, it.key()));
      }
      if (auto v = spec_value(p, it.key().c_str(), file + ": peak_flops", true))
        d.peak_flops[it.key()] = *v;
    }
  } else if (gpu) {
    throw FormatError(msg("load_device", "{}: missing field 'peak_flops'", file));
  }
  if (j.contains("efficiency")) {
    const json& e = j.at("efficiency");
    std::string f = file + ": efficiency";
    if (auto v = spec_value(e, "gemm", f, false)) d.gemm_efficiency = *v;
    if (auto v = spec_value(e, "bandwidth", f, false)) d.bandwidth_efficiency = *v;
  }
  if (auto v = spec_value(j, "kernel_launch_us", file, false)) d.kernel_launch_us = *v;
  if (auto v = spec_value(j, "graph_kernel_us", file, false)) d.graph_kernel_us = *v;
  if (auto v = spec_value(j, "width_granularity", file, false)) {
    if (!(v->value >= 1 && v->value <= 4096 && v->value == double(int64_t(v->value))))
      throw FormatError(msg("load_device", "{}: width_granularity: expected an integer width "
                                           "step in 1..4096, found {}", file, v->value));
    d.width_granularity = *v;
  }
  return d;
}

// Lower-case words of `s`, split at anything that is not a letter or a digit.
static std::vector<std::string> name_words(const std::string& s) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      out.back() += char(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!out.back().empty()) {
      out.emplace_back();
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

bool gpu_name_matches(const DeviceSpec& spec, const std::string& driver_name) {
  if (spec.kind != "cuda") return false;
  std::string model;
  for (const auto& w : name_words(driver_name))
    if (std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      model = w;
      break;
    }
  if (model.empty()) return false;
  for (const std::string& s : {spec.display_name, spec.name})
    for (const auto& w : name_words(s))
      if (w == model) return true;
  return false;
}

int64_t parse_cache_size(const std::string& text) {
  size_t i = 0;
  int64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && v < (int64_t(1) << 40))
    v = v * 10 + (text[i++] - '0');
  if (i == 0) return 0;
  std::string unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  if (unit.empty()) return v;
  if (unit == "K" || unit == "KiB") return v << 10;
  if (unit == "M" || unit == "MiB") return v << 20;
  if (unit == "G" || unit == "GiB") return v << 30;
  return 0;
}

int64_t last_level_cache_bytes(const fs::path& dir) {
  int64_t best = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind("index", 0) != 0) continue;
    auto read = [&](const char* f) {
      std::ifstream in(e.path() / f);
      std::string s;
      std::getline(in, s);
      return s;
    };
    if (read("type") == "Instruction") continue;
    best = std::max(best, parse_cache_size(read("size")));
  }
  return best;
}

DeviceSpec detect_cpu() {
  DeviceSpec d;
  d.name = "cpu";
  d.kind = "cpu";
  d.cores = cpu_cores();
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  static const std::set<std::string> wanted = {"sse4_2", "avx", "avx2", "fma", "f16c",
      "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
      "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve"};
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && d.display_name.empty()) d.display_name = value;
    if ((key == "flags" || key == "Features") && d.isa.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;)
        if (wanted.count(w)) d.isa.push_back(w);
    }
  }
  if (d.display_name.empty()) d.display_name = "unknown CPU";
  d.last_level_cache_bytes = last_level_cache_bytes();
  return d;
}

DeviceSpec load_device(const std::string& name_or_path, const fs::path& data_root) {
  fs::path file = find_data_file("devices", name_or_path, data_root);
  DeviceSpec d = device_from_json(read_json_file(file), file.string());
  if (d.kind == "cpu") {
    DeviceSpec here = detect_cpu();
    d.display_name = here.display_name;
    d.cores = here.cores;
    d.isa = here.isa;
  }
  return d;
}

}  // namespace ac
