// The model families the forward computes, as config.json names them in model_type: the one
// list that loading (model/config.cpp, model/weights.cpp) refuses other families by and names in
// its errors.
#pragma once
#include <string>
#include <vector>

namespace ac {

/// The dense families the forward computes: llama, mistral, qwen2, qwen3 and nemotron-nas
/// (DeciLM). config_from_hf_json refuses any other model_type but the hybrid and MoE ones that
/// `cost` and `plan` take (qwen3_moe, mixtral, nemotron_h, nemotron_h_puzzle).
const std::vector<std::string>& dense_model_types();

}  // namespace ac
