// The Nemotron-H hybrid decoder (model_type "nemotron_h", NemotronHForCausalLM; and
// "nemotron_h_puzzle", whose layers differ in size): one part a layer, as
// hybrid_override_pattern / layers_block_type says (model/nemotron_h_config.h): a Mamba-2 mixer
// 'M' (model/mamba2_mixer.h), attention without RoPE '*', a relu² MLP '-' or an MoE 'E', each
// after an RMSNorm and added to the residual stream. Forward in fp32 and step-by-step decode
// with NemotronHCache (a KV cache for the attention layers, conv and SSM states for the Mamba
// layers). NemotronHForwardOptions adds the pruning's 0/1 masks (NemotronHMasks,
// prune/nemotron_h_prune.h) and an observer of the intermediates the importance scores
// (NemotronHObserver, importance/nemotron_h_importance.h); without them the forward is the plain
// one, operation for operation.
//
// Letters (model/config.h, model/mamba2_config.h, model/moe_config.h): B batch, T tokens,
// N = B*T token rows, D hidden, V vocab, H / G query / KV heads, Hd head_dim, F the MLP's width,
// E routed experts, k experts per token, Fe an expert's width, Fs the shared expert's width,
// Lt moe_latent_size, Din = Lt or D.
//
// Reference, transformers 5.25 (the goldens' pinned version, tests/golden/hf_golden_nemotron_h.py)
// models/nemotron_h/modeling_nemotron_h.py:
//   NemotronHBlock: residual + mixer(NemotronHRMSNorm(x)); the residual stays in the model's
//     dtype (residual_in_fp32 is not read by the modeling file), all fp32 here;
//   NemotronHRMSNorm: x * rsqrt(mean(x^2) + layer_norm_epsilon) * weight, fp32;
//   NemotronHAttention: q/k/v/o_proj without biases (attention_bias is not read), no positional
//     encoding at all, GQA, softmax(q k^T / sqrt(Hd)) causal;
//   NemotronHMLP: down_proj(relu(up_proj(x))^2) (mlp_hidden_act relu2, mlp_bias false);
//   NemotronHMoE / NemotronHTopkRouter / NemotronHExperts: see route_sigmoid and
//     nemotron_h_moe below;
//   NemotronHModel: embeddings, the blocks, norm_f; NemotronHForCausalLM: lm_head (untied by
//     default, tie_word_embeddings).
//
// Checkpoint tensors ("backbone." as save_pretrained writes them, or "model." as transformers 5
// holds them in memory, conversion_mapping.py "nemotron_h"); per layer i, under
// <root>.layers.i.:
//   norm.weight [D]
//   M  mixer.in_proj.weight [d_inner + conv_dim + nh, D] (+ .bias: use_bias),
//      mixer.conv1d.weight [conv_dim, 1, Kc] (+ .bias: use_conv_bias), mixer.dt_bias,
//      mixer.A_log, mixer.D [nh], mixer.norm.weight [d_inner], mixer.out_proj.weight
//      [D, d_inner] (+ .bias: use_bias)
//   *  mixer.{q,k,v,o}_proj.weight [H*Hd, D], [G*Hd, D], [G*Hd, D], [D, H*Hd]
//   -  mixer.up_proj.weight [F, D], mixer.down_proj.weight [D, F]
//   E  mixer.gate.weight [E, D], mixer.gate.e_score_correction_bias [E],
//      mixer.experts.e.{up_proj [Fe, Din], down_proj [Din, Fe]}.weight, or fused
//      mixer.experts.up_proj [E, Fe, Din] and mixer.experts.down_proj [E, Din, Fe],
//      mixer.fc1_latent_proj.weight [Lt, D] and mixer.fc2_latent_proj.weight [D, Lt]
//      (moe_latent_size), mixer.shared_experts.{up_proj [Fs, D], down_proj [D, Fs]}.weight
//   <root>.embeddings.weight [V, D], <root>.norm_f.weight [D], lm_head.weight [V, D].
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/config.h"
#include "model/llama.h"
#include "model/mamba2_mixer.h"
#include "model/moe_model.h"
#include "model/weights.h"

namespace ac {

/// NemotronHTopkRouter's options, from config.json (NemotronHConfig defaults in brackets).
struct SigmoidRouterOptions {
  int64_t top_k = 2;                   // num_experts_per_tok
  int64_t n_group = 1;                 // n_group [1]: experts in groups, ...
  int64_t topk_group = 1;              // topk_group [1]: ... of which the best are kept
  bool norm_topk_prob = true;          // norm_topk_prob [true]
  double routed_scaling_factor = 1.0;  // routed_scaling_factor [1.0]
};

/// NemotronHTopkRouter (DeepSeek-V3's router): scores = sigmoid(router_logits [N, E]) in fp32;
/// the experts are chosen by scores + e_score_correction_bias [E] (with n_group > 1, only among
/// the topk_group groups of E / n_group experts whose two best biased scores sum highest), but
/// weighted by the unbiased scores, divided by their sum + 1e-20 when norm_topk_prob, times
/// routed_scaling_factor. Returns experts [N, k] int64 in descending order of biased score and
/// weights [N, k] fp32. `allowed` [E] fp32 0/1 (optional, the pruning's expert mask): an expert
/// whose entry is 0 is never chosen (its biased score is -inf), so the choice and the weights
/// are those of the router sliced to the allowed rows; with n_group > 1 the groups would change,
/// so the pruning refuses expert masks there. Throws ConfigError("[route_sigmoid] ...") on
/// shapes other than [N, E] and [E], or options outside 1 <= k <= topk_group * E / n_group,
/// E % n_group == 0, E / n_group >= 2 (transformers takes each group's top 2),
/// 1 <= topk_group <= n_group.
Routing route_sigmoid(const at::Tensor& router_logits, const at::Tensor& correction_bias,
                      const SigmoidRouterOptions& o, const at::Tensor& allowed = {});

/// One "E" layer's tensors, fp32 (undefined: absent).
struct NemotronHMoeWeights {
  at::Tensor router;           // [E, D]
  at::Tensor correction_bias;  // [E]
  at::Tensor up_proj;          // [E, Fe, Din]
  at::Tensor down_proj;        // [E, Din, Fe]
  at::Tensor fc1_latent_proj;  // [Lt, D]  (moe_latent_size only)
  at::Tensor fc2_latent_proj;  // [D, Lt]
  at::Tensor shared_up;        // [Fs, D]  (a shared expert only)
  at::Tensor shared_down;      // [D, Fs]
};

/// 0/1 masks (fp32) on one layer of the full model: the pruning of prune/nemotron_h_prune.h
/// applied without slicing, so that the masked forward equals the pruned model's. Undefined
/// tensors mask nothing.
struct NemotronHLayerMasks {
  bool removed = false;       // the whole block skipped (the identity)
  at::Tensor mamba_channels;  // 'M' [nh, P]: Mamba2Hooks::channels
  at::Tensor heads;           // '*' [H]: each query head's output before o_proj
  at::Tensor ffn;             // '-' [F]: the relu² activation (the input of down_proj)
  at::Tensor experts;         // 'E' [E]: route_sigmoid's `allowed`
  at::Tensor expert_ffn;      // 'E' [E, Fe]: each expert's relu² activation
  at::Tensor shared_ffn;      // 'E' [Fs]: the shared expert's relu² activation
  int64_t num_experts_per_tok = 0;  // 'E': k of the masked forward; 0 = the config's
  /// [] fp32: the block's output times this before the residual add (the differentiable
  /// search's soft removal, search/nemotron_h_differentiable.h; 0 = removed); undefined: 1.
  at::Tensor gate;
};

/// Masks of every layer (L entries, or none).
struct NemotronHMasks {
  std::vector<NemotronHLayerMasks> layers;
};

/// Callbacks on the forward's intermediates (importance/nemotron_h_importance.h); tensors are
/// fp32 and valid during the call only. The defaults do nothing.
struct NemotronHObserver {
  virtual ~NemotronHObserver() = default;
  /// The residual stream before and after block `layer` (a present one), [B, T, D] each.
  virtual void on_block(int64_t, const at::Tensor& /*input*/, const at::Tensor& /*output*/) {}
  /// 'M': the input of out_proj, [B, T, d_inner] (Mamba2Hooks::on_out_proj_input).
  virtual void on_mamba(int64_t, const at::Tensor&) {}
  /// '*': the attention output before o_proj, [B, T, H*Hd] (head h at [h*Hd, (h+1)*Hd)).
  virtual void on_attention(int64_t, const at::Tensor&) {}
  /// '-': the relu² activation, [B, T, F].
  virtual void on_mlp(int64_t, const at::Tensor&) {}
  /// 'E': the routing of the layer's N rows.
  virtual void on_routing(int64_t, const Routing&) {}
  /// 'E': expert e on its n rows: its relu² activation [n, Fe] and its output times its routing
  /// weight [n, Din] (before fc2_latent_proj).
  virtual void on_expert(int64_t, int64_t /*e*/, const at::Tensor& /*act*/,
                         const at::Tensor& /*out*/) {}
  /// 'E': the shared expert's relu² activation, [N, Fs].
  virtual void on_shared_expert(int64_t, const at::Tensor&) {}
};

/// NemotronHMoE on the normed hidden states h [N, D] fp32: the router on h; the routed experts
/// (relu², not gated: down(relu(up(x))^2) times the expert's weight, summed) on
/// fc1_latent_proj(h) and their sum through fc2_latent_proj when latent; plus the shared expert
/// on h. Returns [N, D]. Each expert hit runs once on its rows (NemotronHExperts.forward).
/// `masks` and `observer` (optional) as NemotronHForwardOptions; `layer` names the layer to the
/// observer.
at::Tensor nemotron_h_moe(const at::Tensor& h, const NemotronHMoeWeights& w,
                          const SigmoidRouterOptions& o, const NemotronHLayerMasks* masks = nullptr,
                          NemotronHObserver* observer = nullptr, int64_t layer = -1);

/// One layer's tensors, fp32; only its kind's are defined.
struct NemotronHLayerWeights {
  at::Tensor norm;                        // [D]
  at::Tensor q_proj, k_proj, v_proj;      // '*': [H*Hd, D], [G*Hd, D], [G*Hd, D]
  at::Tensor o_proj;                      // '*': [D, H*Hd]
  at::Tensor up_proj, down_proj;          // '-': [F, D], [D, F]
  Mamba2Weights mamba;                    // 'M'
  NemotronHMoeWeights moe;                // 'E'
};

/// What decode carries between forwards: the attention layers' keys and values (KVCache of
/// model/llama.h, empty tensors for the other layers) and each Mamba layer's state (empty for
/// the others). kv.length is the number of positions seen.
struct NemotronHCache {
  KVCache kv;
  std::vector<Mamba2State> mamba;  // L entries
  /// Zeros for batch B and up to `capacity` positions (the attention layers' bound; the Mamba
  /// states do not grow), fp32, on `device`.
  static NemotronHCache allocate(const ModelConfig& c, int64_t batch, int64_t capacity,
                                 const c10::Device& device = c10::kCPU);
};

/// Options of NemotronHModel::forward beyond the tokens. Defaults: the plain forward.
struct NemotronHForwardOptions {
  NemotronHCache* cache = nullptr;
  /// The pruning's masks (L entries; prune/nemotron_h_prune.h nemotron_h_masks_for_plan).
  const NemotronHMasks* masks = nullptr;
  NemotronHObserver* observer = nullptr;
  bool last_logits_only = false;
};

/// A Nemotron-H decoder: config + weights. Cheap to copy (tensors share storage).
struct NemotronHModel {
  ModelConfig config;
  at::Tensor embeddings;  // [V, D]
  std::vector<NemotronHLayerWeights> layers;
  at::Tensor norm_f;      // [D]
  at::Tensor lm_head;     // [V, D]; the embedding's storage when tie_word_embeddings
  SigmoidRouterOptions router;  // the MoE layers' routing (top_k per layer from the config)

  /// tokens [B, T] int64 -> logits [B, T, V] fp32, or [B, 1, V] with last_logits_only. With
  /// `cache` the tokens continue it (positions from cache->kv.length) and it is updated. Throws
  /// ConfigError on a token id outside [0, V), more positions than the cache holds, or a cache
  /// of another batch size or depth.
  at::Tensor forward(const at::Tensor& tokens, NemotronHCache* cache = nullptr,
                     bool last_logits_only = false) const;
  /// The same with masks and an observer (NemotronHForwardOptions). Also throws ConfigError
  /// when `masks` has another layer count than the model.
  at::Tensor forward(const at::Tensor& tokens, const NemotronHForwardOptions& options) const;
};

/// Builds the model from tensors named as in the header (any float dtype, converted to fp32),
/// checking every shape against `c`; `file` names the weights in errors. Throws ConfigError
/// naming the config.json field when the config asks for what this forward does not compute
/// (a model_type other than nemotron_h / nemotron_h_puzzle, mamba_hidden_act other than silu,
/// mlp_bias, a time_step_limit other than [0, inf], routing options out of range), and
/// FormatError naming the file and tensor on a missing tensor, a shape other than the config's,
/// or a tensor the model has no place for.
NemotronHModel nemotron_h_model_from_tensor_map(const ModelConfig& c, const TensorMap& m,
                                                const std::string& file);

/// Greedy or sampled generation through NemotronHCache (generate of model/llama.h: prompt ids
/// with BOS, the new tokens returned). Throws ConfigError on an empty prompt, or as forward does.
std::vector<int64_t> generate(const NemotronHModel& m, const std::vector<int64_t>& prompt,
                              const GenerateOptions& opt);

/// The folder loader is load_nemotron_h_checkpoint (io/nemotron_h_checkpoint.h).

}  // namespace ac
