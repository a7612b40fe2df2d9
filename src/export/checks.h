// Checks run at export time (docs/formats.md, "Checks at export time"), before anything is
// written:
//   - every config value agrees with the tensor shapes (and survives config.json re-parsing);
//   - every special token is exactly one id, with the id config.json gives;
//   - nothing the parent had is silently dropped: every config.json field is listed as
//     carried, changed (with the reason) or added; a changed or dropped field without a known
//     reason is an error;
//   - a heterogeneous model is loadable as DeciLM (vLLM, TensorRT-LLM): one global head count
//     and FFN widths that DeciLM's ffn_mult rule gives back exactly.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "export/gguf_model.h"
#include "model/llama.h"

namespace ac {

/// One config.json field of the parent and what export did with it.
struct FieldChange {
  std::string field;
  std::string status;  // "carried" | "changed" | "added" | "dropped"
  nlohmann::json before, after;  // null when absent
  std::string reason;            // empty for "carried"
};

/// Compares the parent's config.json with the exported one, field by field (top level;
/// null and absent are the same). Throws ConfigError listing every field that was changed or
/// dropped without a reason from the table in checks.cpp (`dtype_changed`: the export --dtype
/// differs from the parent's torch_dtype, a reason for torch_dtype).
std::vector<FieldChange> compare_config_fields(const nlohmann::json& parent,
                                               const nlohmann::json& exported);

/// Throws ConfigError listing every layer DeciLM cannot express (hardware/engine.h
/// structure_violations with decilm_format_structure: the one place these rules are written):
/// a query-head count other than the global num_attention_heads (DeciLM varies only the KV heads
/// through n_heads_in_group), a head_dim other than the global one, or an FFN width F with no
/// ffn_mult such that find_multiple(int(2*ffn_mult*D/3), 256) == F (F must be a multiple of
/// 256; the message gives the nearest widths that do). Also refuses q/k norms (Qwen3), which
/// DeciLM does not have.
void check_decilm_loadable(const ModelConfig& c);

/// Parses `config_json` back (config_from_hf_json) and checks that it gives the same layers,
/// sizes, rope and special ids as `c`, then checks every tensor's shape against it
/// (from_tensor_map). Throws FormatError naming the field or tensor.
void check_config_agrees_with_tensors(const ModelConfig& c, const nlohmann::json& config_json,
                                      const TensorMap& tensors, const std::string& file);

/// Tensor name -> shape, as a safetensors header lists them.
using TensorShapes = std::map<std::string, std::vector<int64_t>>;

/// The tensors an HF export of the checkpoint folder `source_dir` must write: every tensor of
/// its safetensors files (name -> shape, read from the headers), less the two the loader takes
/// without a role, which a notes entry names: RoPE's `*.rotary_emb.inv_freq` buffers (derived
/// from config.json) and a tied lm_head.weight (the embedding itself) unless `head_written`;
/// with `head_written` and `tied`, lm_head.weight of the embedding's shape is expected.
TensorShapes expected_tensor_set(const fs::path& source_dir, bool tied, bool head_written,
                                 std::vector<std::string>& notes);

/// Compares the tensors of the safetensors `file` (names and shapes, from its header) with
/// `expected`. Throws InternalError naming `file` and every tensor missing, extra or of another
/// shape: an export must carry every tensor it read, and nothing else.
void check_tensor_set(const TensorShapes& expected, const fs::path& file);

/// Checks the special tokens of a checkpoint folder against config.json, for each tokenizer file
/// present: tokenizer.bin (its GGUF form, vocab_from_tokenizer): bos/eos ids equal config.json's
/// and <unk>/<s>/</s> are one token each; tokenizer.json (io/hf_tokenizer.h): ids below
/// vocab_size, its BOS / EOS (tokenizer_config.json) at config.json's bos_token_id / one of its
/// eos_token_id. Each text of special_tokens_map.json is one token with that id.
/// Returns the notes for the report (what was checked). Throws ConfigError on a mismatch.
std::vector<std::string> check_special_tokens(const ModelConfig& c, const fs::path& dir);

}  // namespace ac
