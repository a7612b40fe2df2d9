// The sparse mixture-of-experts decoders Qwen3-MoE (model_type "qwen3_moe") and Mixtral
// ("mixtral"): Llama-family attention (model/attention.h: GQA, RoPE, Qwen3's q/k norms) and, in
// each sparse layer, a router choosing k of E SwiGLU experts per token in place of the dense
// FFN. Qwen3-MoE's dense layers (mlp_only_layers, decoder_sparse_step) keep a SwiGLU FFN of
// intermediate_size. Forward in fp32 and step-by-step decode with the KV cache of model/llama.h;
// optional masks on the experts and their width (MoeMasks: the pruning's supernet,
// prune/moe_prune.h) and an observer of the routing and the experts (importance,
// importance/moe_importance.h).
//
// Letters (model/config.h, model/moe_config.h): B batch, T tokens, N = B*T token rows, D hidden,
// V vocab, E experts, k experts per token, Fe an expert's width (moe_intermediate_size; Mixtral:
// intermediate_size).
//
// Reference, transformers 5.25 (the goldens' pinned version, tests/golden/hf_golden_moe.py):
//   models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeTopKRouter, Qwen3MoeExperts,
//     Qwen3MoeSparseMoeBlock, Qwen3MoeDecoderLayer;
//   models/mixtral/modeling_mixtral.py MixtralTopKRouter, MixtralExperts, MixtralSparseMoeBlock.
// The router: logits = h W_router^T in the model's dtype, softmax over E in fp32, the top k,
// divided by their sum when normalized (Mixtral always; Qwen3-MoE with norm_topk_prob, default
// false in Qwen3MoeConfig); an expert's output silu(h Wg^T) * (h Wu^T) Wd^T times its weight,
// summed over the token's k experts. No shared expert in either family.
//
// Checkpoint tensors, per sparse layer N (every spelling below is read):
//   Qwen3-MoE  model.layers.N.mlp.gate.weight                            [E, D]
//              model.layers.N.mlp.experts.e.{gate,up}_proj.weight        [Fe, D]
//              model.layers.N.mlp.experts.e.down_proj.weight             [D, Fe]
//   Mixtral    model.layers.N.block_sparse_moe.gate.weight               [E, D]
//              model.layers.N.block_sparse_moe.experts.e.{w1,w3}.weight  [Fe, D] (w1 gate, w3 up)
//              model.layers.N.block_sparse_moe.experts.e.w2.weight       [D, Fe]
//   either, fused as transformers 5 holds them in memory (conversion_mapping.py "qwen2_moe",
//   "mixtral"): model.layers.N.mlp.gate.weight [E, D], model.layers.N.mlp.experts.gate_up_proj
//   [E, 2 Fe, D] (gate rows first), model.layers.N.mlp.experts.down_proj [E, D, Fe].
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/config.h"
#include "model/llama.h"
#include "model/weights.h"

namespace ac {

/// One sparse layer's experts and router, fp32, stacked over the experts.
struct MoeLayerWeights {
  at::Tensor router;     // [E, D]
  at::Tensor gate_proj;  // [E, Fe, D]
  at::Tensor up_proj;    // [E, Fe, D]
  at::Tensor down_proj;  // [E, D, Fe]
};

/// Structural masks of one sparse layer (the MoE counterpart of LayerMasks, model/llama.h).
/// Undefined tensors mean "keep all". With 0/1 values the masked model equals the physically
/// pruned one (prune/moe_prune.h, tests/test_moe_prune.cpp).
struct MoeLayerMasks {
  /// [E] fp32. An expert whose entry is 0 is never routed to: its router logit is set to -inf
  /// before the softmax, so the probabilities are those of the router sliced to the kept rows
  /// (as Model-Optimizer's _DynamicTopKRouter slices its weight by num_moe_experts), and k is
  /// clamped to the experts left. A non-zero entry scales the expert's weighted output.
  at::Tensor experts;
  /// [E, Fe] fp32: multiplies each expert's SwiGLU activation (the input of its down_proj), as
  /// LayerMasks::ffn does for a dense FFN; each expert has its own row.
  at::Tensor expert_ffn;
};

/// Masks of a whole MoE model: L entries (a dense layer's entry is ignored), or empty.
struct MoeMasks {
  std::vector<MoeLayerMasks> layers;
};

/// Which experts serve each token row and with what weight.
struct Routing {
  at::Tensor experts;  // [N, k] int64, in descending order of probability
  at::Tensor weights;  // [N, k] fp32
};

/// Callbacks on the intermediates of the sparse layers (importance, importance/moe_importance.h).
/// Each tensor is only valid during the call.
struct MoeObserver {
  virtual ~MoeObserver() = default;
  /// The routing of the layer's N token rows (after the expert mask).
  virtual void on_routing(int64_t layer, const Routing& r) {}
  /// Expert `expert` on the n rows routed to it: `act` [n, Fe] its SwiGLU activation (masked),
  /// `out` [n, D] its output times its routing weight (what the block adds for those rows).
  virtual void on_expert(int64_t layer, int64_t expert, const at::Tensor& act,
                         const at::Tensor& out) {}
};

/// The top-k router of Qwen3MoeTopKRouter / MixtralTopKRouter: softmax of router_logits [N, E]
/// (any float dtype, computed in fp32), the k largest probabilities and their experts, divided
/// by their sum when `normalize` (Mixtral; Qwen3-MoE's norm_topk_prob). Throws ConfigError
/// unless router_logits is 2-D and 1 <= k <= E.
Routing route_top_k(const at::Tensor& router_logits, int64_t k, bool normalize);

/// The sparse MoE block (Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock) on the normed hidden
/// states h [N, D] fp32: sum over each row's k experts of weight * down(silu(gate(h)) * up(h)).
/// Returns [N, D]. Each expert runs once, on the rows routed to it (as Qwen3MoeExperts.forward).
/// `masks` (nullptr: none) removes experts and expert channels (MoeLayerMasks); `observer`
/// (nullptr: none) sees the routing and every expert's activation, as layer `layer`. Throws
/// ConfigError when the expert mask removes every expert or has the wrong shape.
at::Tensor moe_block(const at::Tensor& h, const MoeLayerWeights& w, int64_t k, bool normalize,
                     const MoeLayerMasks* masks = nullptr, MoeObserver* observer = nullptr,
                     int64_t layer = 0);

/// Options of MoeModel::forward. Defaults: no cache, no masks, logits for every position.
struct MoeForwardOptions {
  KVCache* cache = nullptr;  // appends to the cache; positions continue from cache->length
  const MoeMasks* masks = nullptr;
  MoeObserver* observer = nullptr;
  bool last_logits_only = false;  // return [B, 1, V] (prefill in generation)
};

/// A Qwen3-MoE or Mixtral decoder: config + weights. Cheap to copy (tensors share storage).
struct MoeModel {
  ModelConfig config;
  /// Embedding, head, norms, attention; the dense FFN of Qwen3-MoE's dense layers (gate_proj,
  /// up_proj, down_proj undefined in the sparse ones).
  ModelWeights weights;
  std::vector<MoeLayerWeights> moe;  // L entries; undefined tensors in a dense layer
  /// Whether the top-k weights are renormalized to sum to 1: Mixtral always, Qwen3-MoE as
  /// config.json norm_topk_prob says (transformers' default false).
  bool norm_topk_prob = true;

  /// tokens [B, T] int64 -> logits [B, T, V] fp32, or [B, 1, V] with last_logits_only (the
  /// prefill of generation). With `cache` the positions continue from cache->length and this
  /// forward's keys and values are appended (KVCache::allocate(config, B, capacity)).
  /// Throws ConfigError on a token id outside [0, V), a cache that is too small, or more
  /// positions than the config's sliding_window.
  at::Tensor forward(const at::Tensor& tokens, KVCache* cache = nullptr,
                     bool last_logits_only = false) const;
  /// The same with masks and an observer (MoeForwardOptions). Throws as above, and
  /// ConfigError when opt.masks has neither 0 nor L layer entries.
  at::Tensor forward(const at::Tensor& tokens, const MoeForwardOptions& opt) const;
};

/// Builds the model from HF-named tensors (any float dtype, converted to fp32), checking every
/// shape against `c`. `file` names the weights in errors. Throws FormatError naming the file
/// and tensor on a missing tensor, a shape other than the config's, or a tensor the model has
/// no place for; ConfigError naming the field when the config asks for what this forward does
/// not compute (a model_type other than qwen3_moe and mixtral, attention_bias, an MoE with a
/// shared expert, latent projections, relu² experts, a router bias or sigmoid scores).
MoeModel moe_model_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                   const std::string& file);

/// Greedy or sampled generation through the KV cache (generate of model/llama.h: prompt ids
/// with BOS, the new tokens returned). Throws ConfigError on an empty prompt, or as forward does.
std::vector<int64_t> generate(const MoeModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt);

/// The folder loader is load_moe_checkpoint (io/checkpoint.h).

}  // namespace ac
