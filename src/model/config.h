// ModelConfig: the heterogeneous architecture every stage works on (docs/design.md, "The
// architecture space").
//
// Letters used in shape comments across the project:
//   B batch, T tokens, D hidden_size, H query heads, G KV heads (GQA groups), Hd head_dim,
//   F FFN width (intermediate_size), V vocab_size, L layers.
//
// A homogeneous Llama model is the special case where every LayerConfig is equal. Nothing
// derives head_dim from hidden_size / heads: every layer carries its own.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/mamba2_config.h"
#include "model/moe_config.h"

namespace ac {

/// Ceilings every ModelConfig is validated against (docs/formats.md "Limits"): far above any
/// released model (Llama 3.1 405B: D 16384, F 53248, V 128256, H 128, Hd 128, L 126), and low
/// enough that shapes and parameter counts (< 2^62) cannot overflow int64.
inline constexpr int64_t kMaxHiddenSize = int64_t(1) << 20;        // D
inline constexpr int64_t kMaxIntermediateSize = int64_t(1) << 22;  // F
inline constexpr int64_t kMaxVocabSize = int64_t(1) << 24;         // V
inline constexpr int64_t kMaxLayers = 100000;                      // L
inline constexpr int64_t kMaxHeadDim = int64_t(1) << 16;           // Hd
inline constexpr int64_t kMaxAttentionWidth = int64_t(1) << 20;    // H*Hd and G*Hd
inline constexpr int64_t kMaxPositionEmbeddings = int64_t(1) << 24;

/// One decoder block: a mixer (attention, or a Mamba-2 mixer) and a channel part (a dense FFN,
/// or an MoE), either of which may be absent. A Llama block has attention and a dense FFN; a
/// Qwen3-MoE or Mixtral block attention and an MoE; a Nemotron-H layer exactly one of the four
/// (hybrid_override_pattern "*", "M", "-", "E"). A removed attention has attention_no_op = true
/// and H = G = 0; a removed FFN has ffn_no_op = true and F = 0. A removed block has both and
/// neither mamba nor moe. A Mamba-2 layer has attention_no_op (no attention, no KV cache) and
/// `mamba`; an MoE layer has ffn_no_op (no dense FFN) and `moe`.
struct LayerConfig {
  int64_t num_attention_heads = 0;  // H
  int64_t num_key_value_heads = 0;  // G; H % G == 0 unless attention is a no-op
  int64_t head_dim = 0;             // Hd
  int64_t intermediate_size = 0;    // F
  bool attention_no_op = false;
  bool ffn_no_op = false;
  std::optional<Mamba2Config> mamba;  // the mixer is a Mamba-2 mixer (model/mamba2_config.h)
  std::optional<MoeConfig> moe;       // the channel part is an MoE (model/moe_config.h)

  bool has_attention() const { return !attention_no_op && num_attention_heads > 0; }
  bool has_ffn() const { return !ffn_no_op && intermediate_size > 0; }
  bool has_mamba() const { return mamba.has_value(); }
  bool has_moe() const { return moe.has_value(); }
  /// Whether the layer computes anything (a removed block does not).
  bool is_present() const { return has_attention() || has_ffn() || has_mamba() || has_moe(); }
  bool operator==(const LayerConfig& o) const;
  bool operator!=(const LayerConfig& o) const { return !(*this == o); }
};

/// RoPE scaling as in HF config.json "rope_scaling", or transformers 5's "rope_parameters" when
/// its rope_type is not "default" (types "llama3" and "linear" implemented, every other refused
/// by config_from_hf_json; the object is kept verbatim in `raw` so that export carries it over).
struct RopeScaling {
  std::string rope_type;  // "llama3", "linear", ...
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  nlohmann::json raw;  // the object exactly as read
};

/// The spelling config.json used for the fields transformers 5 renamed, kept so that a config
/// is written back as it was read (an export adds and drops no field behind the parent's back):
/// transformers 4 writes "torch_dtype", "rope_theta" and "rope_scaling"; transformers 5 writes
/// "dtype" and one "rope_parameters" object holding rope_theta, rope_type and the scaling.
struct HfSpelling {
  bool dtype = false;            // "dtype" rather than "torch_dtype"
  bool rope_parameters = false;  // "rope_parameters" rather than "rope_theta" + "rope_scaling"
};

/// The global part of the model plus one LayerConfig per layer.
struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";  // HF "architectures"[0]
  std::string model_type = "llama";               // "llama", "mistral", "qwen2", "nemotron-nas"
  int64_t vocab_size = 0;                         // V
  int64_t hidden_size = 0;                        // D
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  /// The dense FFN: SwiGLU (gate, up, down: 3 D x F matrices) when true; relu² (up, down: 2),
  /// Nemotron-H's mlp_hidden_act "relu2", when false.
  bool mlp_gated = true;
  /// RoPE on the queries and keys; false for Nemotron-H, whose attention has no position
  /// embedding (NoPE: llama.cpp llama_model_rope_type gives LLAMA_ROPE_TYPE_NONE for
  /// LLM_ARCH_NEMOTRON_H / NEMOTRON_H_MOE; Megatron --position-embedding-type none).
  bool rope = true;
  /// RMSNorm over head_dim on every query and key head, before RoPE (Qwen3's q_norm / k_norm).
  /// config.json: implied by model_type qwen3; written as "qk_norm": true (our extension) when
  /// the model_type written is another (a heterogeneous model as nemotron-nas).
  bool qk_norm = false;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  std::string torch_dtype = "float32";
  /// The positions each query attends over when the model's attention slides (Mistral's
  /// sliding_window; Qwen2 / Qwen3's with use_sliding_window and a "sliding_attention" layer, as
  /// transformers builds the mask), nullopt when it sees every earlier position. Derived on read
  /// from fields that stay in `extra`; the forward refuses a sequence longer than it.
  std::optional<int64_t> sliding_window;
  HfSpelling hf_spelling;
  std::vector<LayerConfig> layers;  // L entries
  /// Every config.json field we do not model, carried over verbatim on export.
  nlohmann::json extra = nlohmann::json::object();

  int64_t num_layers() const { return int64_t(layers.size()); }
  bool is_homogeneous() const;
  /// Whether any layer is a Mamba-2 mixer or an MoE, or the dense FFN is relu²: a model of
  /// the kinds with their own forward, pruning and export (model/moe_model.h,
  /// model/nemotron_h_model.h), which the Llama-family stages refuse (require_dense).
  bool is_hybrid() const;
  /// Parameters one token uses: num_parameters() with each MoE layer's k experts instead of E.
  int64_t num_active_parameters() const;
  /// Parameter count of the weights this config implies (tied head counted once).
  int64_t num_parameters() const;
  /// Throws ConfigError naming `where` and the layer/field if the config is inconsistent
  /// (H % G != 0, non-positive sizes, a size above the ceilings above, bos/eos ids outside
  /// [0, V), non-finite rope_theta / rms_norm_eps, ...).
  void validate(const std::string& where) const;
  /// A homogeneous config: every layer gets `layer`.
  static ModelConfig uniform(int64_t vocab, int64_t hidden, int64_t num_layers,
                             const LayerConfig& layer);
};

/// Throws ConfigError("[where] ...") when `c` is hybrid (ModelConfig::is_hybrid): the
/// Llama-family stages (their forward, importance, pruning, search) take dense decoders only;
/// `cost` and `plan` take every kind; `importance`, `prune`, `distill`, `eval` and `generate`
/// dispatch a Nemotron-H or Qwen3-MoE / Mixtral checkpoint to its own path, `export` and
/// `compress` a Nemotron-H one (io/nemotron_h_checkpoint.h is_nemotron_h_checkpoint,
/// io/checkpoint.h is_moe_family_checkpoint).
void require_dense(const ModelConfig& c, const std::string& where);

/// Parses a Hugging Face config.json (Llama, Mistral, Qwen2, Qwen3, and DeciLM / nemotron-nas
/// with "block_configs"; the hybrid and MoE families through their own readers: Nemotron-H and
/// nemotron_h_puzzle in model/nemotron_h_config.h, Qwen3-MoE and Mixtral in
/// model/moe_family_config.h), as transformers 4 or 5 writes it (HfSpelling). `file` is used in error
/// messages. RoPE follows transformers 5's precedence (configuration_utils / modeling_rope_utils
/// convert_rope_params_to_dict): a non-empty "rope_scaling" wins over "rope_parameters", and
/// rope_theta inside the object wins over a top-level "rope_theta".
/// Throws FormatError naming the file and field on missing or inconsistent fields, and on what
/// the forward does not compute: a model_type outside dense_model_types() and the hybrid / MoE
/// families, a rope_type other than default / linear / llama3, RoPE over part of head_dim
/// (partial_rotary_factor), RoPE per layer type, a hidden_act other than silu, mlp_bias true,
/// and DeciLM blocks with a window_length, attention sinks or a field DeciLM does not define.
/// Fields that do not change the computation (transformers_version, pad_token_id, a custom
/// field, ...) are kept in `extra` and written back unchanged.
ModelConfig config_from_hf_json(const nlohmann::json& j, const std::string& file);

/// Writes config.json. Homogeneous configs use the parent's class (Llama/Mistral/Qwen2);
/// heterogeneous ones are written as DeciLMForCausalLM / "nemotron-nas" with block_configs.
/// head_dim is always explicit.
nlohmann::json config_to_hf_json(const ModelConfig& c);

/// DeciLM's FFN width rule, as every DeciLM loader applies it (transformers DeciLM
/// `_ffn_mult_to_intermediate_size`, vLLM nemotron_nas, llama.cpp convert_hf_to_gguf.py
/// DeciModel): F = find_multiple(int(2 * ffn_mult * hidden / 3), 256), evaluated in double
/// left to right as Python does.
int64_t decilm_ffn_width(double ffn_mult, int64_t hidden);

/// An ffn_mult that gives back exactly `intermediate_size` through decilm_ffn_width, or nullopt
/// when none exists (F not a multiple of 256). Prefers the shortest decimal.
std::optional<double> decilm_ffn_mult_for(int64_t intermediate_size, int64_t hidden);

/// A short human description, e.g. "D=288 L=6 [H6/G6 F768] x6" or per-layer when heterogeneous.
std::string describe(const ModelConfig& c);

}  // namespace ac
