// A device: what the hardware can do (docs/design.md, "Scenarios: device, engine, workload,
// limits").
//
// devices/<name>.json holds the spec of a GPU (memory, bandwidth, dense peak FLOP/s per dtype),
// every number with its "source" and "estimated": true where it is not from a datasheet.
// devices/cpu.json is a template: cores, model name and ISA flags are detected at run time
// from /proc/cpuinfo; bandwidth and GEMM peak of a CPU come from its profile (profile.h).
//
// File layout (numbers are SI: bytes, bytes/s, FLOP/s):
//   { "name": "h100-sxm", "kind": "cuda", "display_name": "...",
//     "memory_bytes":          {"value": 85899345920, "source": "..."},
//     "bandwidth_bytes_per_s": {"value": 3.35e12, "source": "..."},
//     "peak_flops": {"fp32": {"value": 6.7e13, "source": "..."},
//                    "bf16": {...}, "fp8": {"value": null, "source": "not supported"}},
//     "efficiency": {"gemm": {"value": 0.7, ...}, "bandwidth": {...}},
//     "kernel_launch_us": {"value": 4.0, ...}, "graph_kernel_us": {"value": 1.0, ...},
//     "width_granularity": {"value": 64, "source": "...", "estimated": true} }
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json_io.h"

namespace ac {

/// One number of a spec with where it came from.
struct SpecValue {
  double value = 0;
  std::string source;
  bool estimated = false;
};

/// Device spec. For kind "cpu", memory/bandwidth/peak are filled from the machine and the
/// profile (detect_cpu + apply_profile), not from the file.
struct DeviceSpec {
  std::string name;          // file stem: "cpu", "h100-sxm", ...
  std::string kind;          // "cpu" or "cuda"
  std::string display_name;  // "NVIDIA H100 SXM5 80GB", or the CPU model name
  std::optional<SpecValue> memory_bytes;           // bytes
  std::optional<SpecValue> bandwidth_bytes_per_s;  // bytes/s
  std::map<std::string, SpecValue> peak_flops;     // dtype ("fp32", "bf16", "fp8") -> FLOP/s, dense
  SpecValue gemm_efficiency{0.7, "default", true};       // fraction of peak reached by big GEMMs
  SpecValue bandwidth_efficiency{0.8, "default", true};  // fraction of peak bandwidth reached
  SpecValue kernel_launch_us{0.0, "default", true};      // per-kernel overhead (us)
  SpecValue graph_kernel_us{0.0, "default", true};       // per kernel inside a CUDA graph (us)
  // Width step (channels) at which the device runs GEMMs efficiently, for devices without a
  // profile; a profile derives its own (hardware/granularity.h), which takes precedence.
  SpecValue width_granularity{32, "default", true};
  // CPU identity (kind "cpu", detected at run time).
  int cores = 0;
  std::vector<std::string> isa;  // subset of /proc/cpuinfo flags that matter for GEMMs
  int64_t last_level_cache_bytes = 0;  // the largest data or unified cache one core sees
                                       // (/sys/devices/system/cpu/cpu0/cache); 0: unknown

  /// Peak FLOP/s for a weight dtype ("fp32", "bf16", "fp16", "fp8", "int8", "int4"): fp16
  /// maps to bf16, int8/int4 to fp8. Throws ConfigError naming the device and dtype when the
  /// spec has no (or a null) peak for it.
  double peak_flops_for(const std::string& dtype) const;
};

/// Reads devices/<name>.json (or a path). For kind "cpu" fills cores, model name and ISA from
/// this machine. Throws FormatError naming the file and field on a bad file, ConfigError on
/// an unknown device (listing the known ones).
DeviceSpec load_device(const std::string& name_or_path, const fs::path& data_root = {});

/// Parses a device spec from JSON; `file` is used in error messages.
DeviceSpec device_from_json(const nlohmann::json& j, const std::string& file);

/// This machine's CPU: model name, online cores, ISA flags of interest (avx2, avx512f,
/// avx512_bf16, amx_bf16, fma, ...) read from /proc/cpuinfo, the last-level cache's size from
/// sysfs (last_level_cache_bytes).
DeviceSpec detect_cpu();

/// The size in bytes of a sysfs cache "size" value ("32768K", "2M", "512"); 0 when it is not
/// one (the caller then treats the cache as unknown).
int64_t parse_cache_size(const std::string& text);

/// The largest data or unified cache listed under `dir` (a cpuN/cache folder of sysfs: its
/// index*/type and index*/size files), in bytes; 0 when there is none or it cannot be read.
int64_t last_level_cache_bytes(const fs::path& dir = "/sys/devices/system/cpu/cpu0/cache");

/// Whether the GPU the driver names `driver_name` ("NVIDIA H200", "NVIDIA A100-SXM4-80GB",
/// "NVIDIA GeForce RTX 4090") is the one `spec` describes: its model token (the first word with
/// a digit, "h200", "a100", "4090"; case-insensitive, words split at spaces and dashes) is a
/// word of the spec's display_name or name. False for a CPU spec or a name without such a word.
bool gpu_name_matches(const DeviceSpec& spec, const std::string& driver_name);

/// Bytes per element of a storage dtype: fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5.
/// Throws ConfigError naming `where` on an unknown dtype.
double dtype_bytes(const std::string& dtype, const char* where = "dtype_bytes");

}  // namespace ac
