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
// "structure" says which heterogeneous models the engine's loader can build (below,
// EngineStructure); a homogeneous model loads as its parent's class in every engine.
// prefill_chunk_tokens: the prompt tokens (over the whole batch) one prefill pass processes
// (vLLM max_num_batched_tokens, llama.cpp n_ubatch, TensorRT-LLM max_num_tokens); it bounds the
// activations held at once. 0 (the default): the whole batch's prompt in one pass.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hardware/device.h"
#include "model/config.h"

namespace ac {

/// The per-layer structures an engine's loader builds for a heterogeneous model (engines/*.json
/// "structure", each engine with the loader file and function it is read from). The search
/// space, the measured fit and `compress` propose only what these allow; `export` refuses the
/// rest. A homogeneous model (every layer alike) is a plain LlamaForCausalLM / llama GGUF, which
/// every engine loads whatever these say.
///
///   { "per_layer_query_heads": false, "attention_removed": true, "ffn_removed": true,
///     "ffn_width_multiple": 256, "source": "vllm/model_executor/models/nemotron_nas.py ..." }
struct EngineStructure {
  bool per_layer_query_heads = true;  // false: every attention layer has one num_attention_heads
                                      // (DeciLM: global num_attention_heads, per-layer KV heads
                                      // only through n_heads_in_group)
  bool attention_removed = true;      // a layer without attention (DeciLM attention.no_op)
  bool ffn_removed = true;            // a layer without FFN (DeciLM ffn.no_op)
  int64_t ffn_width_multiple = 1;     // FFN widths the loader expresses are multiples of this
                                      // (DeciLM: find_multiple(int(2*ffn_mult*hidden/3), 256))
  std::string source;                 // the loader file and function the rules are read from

  bool operator==(const EngineStructure& o) const {
    return per_layer_query_heads == o.per_layer_query_heads &&
           attention_removed == o.attention_removed && ffn_removed == o.ffn_removed &&
           ffn_width_multiple == o.ffn_width_multiple;
  }
};

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
  EngineStructure structure;  // what its loader builds (default: anything)
  std::string notes;

  bool fuses(const std::string& op) const { return fused_ops.count(op) > 0; }
};

/// Reads engines/<name>.json (or a path). Throws ConfigError on an unknown engine (listing the
/// known ones), FormatError naming the file and field on a bad file.
EngineSpec load_engine(const std::string& name_or_path, const fs::path& data_root = {});

/// Parses an engine spec; `file` is used in error messages.
EngineSpec engine_from_json(const nlohmann::json& j, const std::string& file);

/// Why `engine` cannot load `c`: one line per broken rule, naming the layer, the field and the
/// rule (e.g. "layer 1: num_attention_heads 3, but vllm builds every attention layer with one
/// count (layer 0 has 4)"); empty when it loads. Layers with neither attention nor FFN (removed
/// blocks, dropped before export) are skipped; when the rest are all alike, `c` loads as a plain
/// model of its parent's class. Never throws.
std::vector<std::string> structure_violations(const ModelConfig& c, const EngineSpec& engine);

/// Throws ConfigError("[where] ...") listing structure_violations when there are any.
void check_engine_loads(const ModelConfig& c, const EngineSpec& engine, const std::string& where);

}  // namespace ac
