// A serving engine: how it runs a model (docs/design.md, "Scenarios: device, engine, workload,
// limits").
//
// engines/<name>.json says which ops the engine fuses into one kernel, how the KV cache is
// laid out (block size: the cache is allocated in blocks of that many tokens), the fraction
// of device memory the engine keeps for itself, whether decode runs as CUDA graphs, and the
// host overhead of one generation step. Every number carries a "source".
//
//   { "name": "vllm", "per_step_overhead_ms": {"value": 1.5, "source": "...", "estimated": true},
//     "fused_ops": ["qkv_proj", "gate_up_proj", "silu_mul", "add_rmsnorm", "rope"],
//     "kv_cache": {"layout": "paged", "block_size_tokens": 16, "dtype": "bf16"},
//     "memory_reserved_fraction": {"value": 0.1, "source": "..."},
//     "reserve_bytes": {"value": 0, "source": "..."},
//     "prefill_chunk_tokens": {"value": 8192, "source": "..."},
//     "cuda_graphs": true, "notes": "..." }
// prefill_chunk_tokens: the prompt tokens (over the whole batch) one prefill pass processes
// (vLLM max_num_batched_tokens, llama.cpp n_ubatch, TensorRT-LLM max_num_tokens); it bounds the
// activations held at once. 0 (the default): the whole batch's prompt in one pass.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include "hardware/device.h"

namespace ac {

struct EngineSpec {
  std::string name;
  SpecValue per_step_overhead_ms{0, "default", true};  // host time per decode / prefill step
  std::set<std::string> fused_ops;  // "qkv_proj", "gate_up_proj", "silu_mul", "add_rmsnorm", "rope", "attention"
  std::string kv_layout = "contiguous";  // "contiguous" (per layer [B, G, T_max, Hd]) or "paged"
  int64_t kv_block_size_tokens = 1;      // the cache grows in blocks of this many tokens
  SpecValue memory_reserved_fraction{0, "default", true};  // of device memory, kept by the engine
  SpecValue reserve_bytes{0, "default", true};             // fixed workspace (bytes)
  SpecValue prefill_chunk_tokens{0, "default", true};      // tokens per prefill pass; 0 = all
  bool cuda_graphs = false;
  std::string notes;

  bool fuses(const std::string& op) const { return fused_ops.count(op) > 0; }
};

/// Reads engines/<name>.json (or a path). Throws ConfigError on an unknown engine (listing the
/// known ones), FormatError naming the file and field on a bad file.
EngineSpec load_engine(const std::string& name_or_path, const fs::path& data_root = {});

/// Parses an engine spec; `file` is used in error messages.
EngineSpec engine_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace ac
