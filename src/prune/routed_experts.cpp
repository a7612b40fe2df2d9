#include "prune/routed_experts.h"

#include <vector>

#include "importance/importance.h"

namespace ac {

MoeLayerPlan keep_routed_experts(const at::Tensor& expert_scores,
                                 const at::Tensor& expert_ffn_scores, int64_t num_experts,
                                 int64_t moe_intermediate_size) {
  MoeLayerPlan lp;
  lp.experts = top_k_indices(expert_scores, num_experts);
  std::vector<at::Tensor> rows;
  const auto* e = lp.experts.data_ptr<int64_t>();
  for (int64_t j = 0; j < lp.experts.numel(); ++j)
    rows.push_back(top_k_indices(expert_ffn_scores[e[j]], moe_intermediate_size));
  lp.expert_ffn = at::stack(rows);  // [E', Fe']
  return lp;
}

at::Tensor take_experts(const at::Tensor& t, const MoeLayerPlan& lp, int64_t dim) {
  std::vector<at::Tensor> out;
  const auto* e = lp.experts.data_ptr<int64_t>();
  for (int64_t j = 0; j < lp.experts.numel(); ++j)
    out.push_back(t[e[j]].index_select(dim - 1, lp.expert_ffn[j].to(t.device())));
  return at::stack(out).contiguous();
}

void routed_expert_masks(const MoeLayerPlan& lp, int64_t E, int64_t Fe, at::Tensor& experts,
                         at::Tensor& expert_ffn) {
  experts = at::zeros({E}, at::kFloat).index_fill_(0, lp.experts, 1.0);
  expert_ffn = at::zeros({E, Fe}, at::kFloat);
  const auto* e = lp.experts.data_ptr<int64_t>();
  for (int64_t j = 0; j < lp.experts.numel(); ++j)
    expert_ffn[e[j]].index_fill_(0, lp.expert_ffn[j], 1.0);
}

}  // namespace ac
