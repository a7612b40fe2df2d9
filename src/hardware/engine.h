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
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hardware/device.h"
#include "model/config.h"

namespace ac {

/// The structures an engine's loader builds (engines/*.json "structure", every rule with the
/// loader file and function it is read from, in `sources`). The search space, the measured fit,
/// `plan` and `compress` propose only what these allow; `export --engine` refuses the rest, and
/// export/engine_loaders.h checks the exported files the same way the loaders read them.
///
/// Per-layer rules (query heads, head_dim, FFN width, removed parts) bind a heterogeneous model
/// only: a homogeneous one (every layer alike) is a plain LlamaForCausalLM / llama GGUF, which
/// every engine loads with per-model values. The divisibility rules bind every model.
///
///   { "per_layer_query_heads": {"value": false, "source": "vllm/.../nemotron_nas.py ..."},
///     "query_heads_divisible_by_kv_heads": {"value": true, "source": "..."},
///     "per_layer_head_dim": {"value": false, "source": "..."},
///     "head_dim_explicit": {"value": true, "source": "..."},
///     "attention_removed": {...}, "ffn_removed": {...}, "block_removed": {...},
///     "ffn_width_multiple": {"value": 256, "source": "..."},
///     "tensor_parallel_divides": {"value": ["num_attention_heads", "num_key_value_heads",
///                                           "intermediate_size"], "source": "..."},
///     "source": "the loader's entry point" }
struct EngineStructure {
  bool per_layer_query_heads = true;  // false: every attention layer has one num_attention_heads
                                      // (DeciLM: global num_attention_heads, per-layer KV heads
                                      // only through n_heads_in_group)
  bool query_heads_divisible_by_kv_heads = true;  // H % G == 0 (DeciLM: integer n_heads_in_group)
  bool per_layer_head_dim = true;  // false: one head_dim for every attention layer
  bool head_dim_explicit = true;   // false: the loader derives Hd = hidden_size / num_attention_heads
                                   // (Python floor division) and ignores config.json's head_dim
  bool attention_removed = true;   // a layer without attention (DeciLM attention.no_op)
  bool ffn_removed = true;         // a layer without FFN (DeciLM ffn.no_op)
  bool block_removed = true;       // a layer without either (export drops such layers anyway)
  int64_t ffn_width_multiple = 1;  // FFN widths the loader expresses are multiples of this
                                   // (DeciLM: find_multiple(int(2*ffn_mult*hidden/3), 256))
  // Fields the workload's tensor_parallel must divide (loaders shard them over the GPUs):
  // "num_attention_heads" (H % tp == 0), "num_key_value_heads" (G % tp == 0 when G >= tp, else
  // tp % G == 0: the KV heads are replicated), "intermediate_size" (F % tp == 0).
  std::set<std::string> tensor_parallel_divides;
  // Hybrid and MoE models (Nemotron-H / nemotron_h_puzzle, Qwen3-MoE, Mixtral;
  // hardware/hybrid_structure.h): what may differ between layers of one kind.
  bool per_layer_mamba = true;              // false: every Mamba-2 layer has one shape (heads,
                                            // head_dim, state, groups, conv): the loader sizes
                                            // the Mamba state from the global config
  bool per_layer_num_experts = true;        // false: every MoE layer has one num_experts
  bool per_layer_expert_width = true;       // false: one moe_intermediate_size
  bool per_layer_experts_per_token = true;  // false: one num_experts_per_tok
  std::string source;                          // the loader's entry point
  std::map<std::string, std::string> sources;  // rule name -> loader file and function

  bool operator==(const EngineStructure& o) const {
    return per_layer_query_heads == o.per_layer_query_heads &&
           query_heads_divisible_by_kv_heads == o.query_heads_divisible_by_kv_heads &&
           per_layer_head_dim == o.per_layer_head_dim &&
           head_dim_explicit == o.head_dim_explicit &&
           attention_removed == o.attention_removed && ffn_removed == o.ffn_removed &&
           block_removed == o.block_removed && ffn_width_multiple == o.ffn_width_multiple &&
           tensor_parallel_divides == o.tensor_parallel_divides &&
           per_layer_mamba == o.per_layer_mamba &&
           per_layer_num_experts == o.per_layer_num_experts &&
           per_layer_expert_width == o.per_layer_expert_width &&
           per_layer_experts_per_token == o.per_layer_experts_per_token;
  }
  /// The rules that bind a model whose workload splits it over `tensor_parallel` GPUs: whether
  /// a head count or width `n` of `field` can be sharded (see tensor_parallel_divides).
  bool shards(const std::string& field, int64_t n, int64_t tensor_parallel) const;
};

/// What DeciLM's config.json (block_configs) can express, whichever engine reads it: one
/// num_attention_heads and one head_dim for the model (written explicitly), KV heads per layer
/// through an integer n_heads_in_group, FFN widths through ffn_mult (multiples of 256), parts
/// removed through no_op. engines/vllm.json and engines/tensorrt-llm.json state these and more
/// (a test checks that they are at least as strict); the HF export checks these
/// (export/checks.h check_decilm_loadable).
EngineStructure decilm_format_structure();

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

/// Why `engine` cannot load `c` split over `tensor_parallel` GPUs: one line per broken rule,
/// naming the layer, the field and the rule (e.g. "layer 1: num_attention_heads 3, but vllm
/// builds every attention layer with one count (layer 0 has 4)"); empty when it loads. Layers
/// with neither attention nor FFN (removed blocks, dropped before export) are skipped; when the
/// rest are all alike, `c` loads as a plain model of its parent's class and only the
/// tensor-parallel rules apply. Never throws.
std::vector<std::string> structure_violations(const ModelConfig& c, const EngineSpec& engine,
                                              int64_t tensor_parallel = 1);

/// Throws ConfigError("[where] ...") listing structure_violations when there are any, with the
/// sources of the engine's rules.
void check_engine_loads(const ModelConfig& c, const EngineSpec& engine, const std::string& where,
                        int64_t tensor_parallel = 1);

}  // namespace ac
