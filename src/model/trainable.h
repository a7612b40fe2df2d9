// What distillation, evaluation and generation need from a model kind, one overload per kind:
// the Llama family (model/llama.h), the sparse MoE decoders Qwen3-MoE / Mixtral
// (model/moe_model.h) and Nemotron-H (model/nemotron_h_model.h).
//
// Every kind already has `forward(tokens [B, T] int64) -> logits [B, T, V] fp32` (differentiable
// through its weights) and a `config`; this header adds the rest: its trainable tensors with
// their checkpoint names, a copy on another device, and the tying of its head. The training loop
// (distill/distill.h) and the evaluation (eval/eval.h) are templates over the kind that call only
// these and `forward`, so the Llama path runs exactly the code it ran before (its parameter list
// is ModelWeights::parameters(), in that order).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "model/llama.h"
#include "model/moe_model.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// A tensor with its checkpoint (HF) name, e.g. "model.layers.0.mixer.A_log".
using NamedTensor = std::pair<std::string, at::Tensor>;

/// The trainable tensors of the model, named as in its checkpoint, in a fixed order (the order
/// of the distillation state's parameters): the tied head once (as the embedding); buffers that
/// transformers does not train are left out (Nemotron-H's e_score_correction_bias, a
/// register_buffer in NemotronHTopkRouter). A fused expert tensor [E, ...] is one entry, named as
/// transformers 5 holds it ("model.layers.N.mlp.experts.down_proj"). The tensors share storage
/// with the model's (requires_grad_ on them trains the model).
std::vector<NamedTensor> named_parameters(const LlamaModel& m);
std::vector<NamedTensor> named_parameters(const MoeModel& m);
std::vector<NamedTensor> named_parameters(const NemotronHModel& m);

/// The tensors of named_parameters, in its order. For a LlamaModel: m.weights.parameters().
std::vector<at::Tensor> trainable_parameters(const LlamaModel& m);
std::vector<at::Tensor> trainable_parameters(const MoeModel& m);
std::vector<at::Tensor> trainable_parameters(const NemotronHModel& m);

/// The model with every tensor on `device` (the same tensors where they are there already),
/// tying kept; dtypes unchanged.
LlamaModel model_to_device(const LlamaModel& m, const c10::Device& device);
MoeModel model_to_device(const MoeModel& m, const c10::Device& device);
NemotronHModel model_to_device(const NemotronHModel& m, const c10::Device& device);

/// A copy whose every tensor has its own storage (a student to train from a pruned model that
/// shares the teacher's unsliced tensors), the head tied again where the config ties it.
NemotronHModel clone_model(const NemotronHModel& m);

/// The token embedding [V, D]: its device is the model's, its storage tells two models apart.
inline const at::Tensor& embedding(const LlamaModel& m) { return m.weights.embed_tokens; }
inline const at::Tensor& embedding(const MoeModel& m) { return m.weights.embed_tokens; }
inline const at::Tensor& embedding(const NemotronHModel& m) { return m.embeddings; }

/// With tie_word_embeddings, makes the head the embedding tensor itself, so that training gives
/// both uses one gradient; otherwise nothing.
void tie_head(LlamaModel& m);
void tie_head(MoeModel& m);
void tie_head(NemotronHModel& m);

/// Throws FormatError "[stage] FILE: non-finite weights (tensor 'NAME' has ...): refusing to run
/// stage; pass --allow-nonfinite to run anyway" when a weight holds NaN or Inf and `allow` is
/// false; with `allow`, only warns (model/finite.h's rule, for every kind).
void require_finite(const MoeModel& m, const std::string& file, const char* stage, bool allow);
void require_finite(const NemotronHModel& m, const std::string& file, const char* stage,
                    bool allow);

/// The kind's name in errors: "Llama-family", "MoE (qwen3_moe)", "Nemotron-H".
std::string model_kind_name(const LlamaModel& m);
std::string model_kind_name(const MoeModel& m);
std::string model_kind_name(const NemotronHModel& m);

}  // namespace ac
