#include "search/candidates.h"

#include <algorithm>

#include "prune/depth.h"

namespace ac {

nlohmann::json Candidate::to_json() const {
  return {{"config", config_to_hf_json(config)},
          {"target", target.layers.empty() ? nlohmann::json() : config_to_hf_json(target)},
          {"describe", describe(config)},
          {"parameters", config.num_parameters()},
          {"cost", cost.to_json()},
          {"feasible", violation.empty()},
          {"violation", violation},
          {"loss_after_prune", loss_after_prune},
          {"loss_after_bld", loss_after_bld},
          {"loss_after_retrain", loss_after_retrain},
          {"chosen", chosen}};
}

nlohmann::json SearchResult::to_json() const {
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : candidates) cands.push_back(c.to_json());
  return {{"method", method},         {"best", best.to_json()}, {"search_tokens", search_tokens},
          {"seconds", seconds},       {"candidates", cands}};
}

std::string candidate_key(const Candidate& c) { return describe(c.target); }

Candidate costed_candidate(const ModelConfig& target, const CostFn& cost, const Limits& limits) {
  Candidate k;
  k.target = target;
  k.config = drop_removed_blocks(k.target);
  k.cost = cost(k.config);
  k.violation = check_limits(k.cost, limits);
  return k;
}

double total_violation(const std::vector<LimitSlack>& slack) {
  double v = 0;
  for (const auto& k : slack) v += std::max(0.0, -k.slack);
  return v;
}

std::vector<at::Tensor> teacher_logprobs(const LlamaModel& teacher,
                                         const std::vector<at::Tensor>& batches, int64_t* tokens) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& b : batches) {
    out.push_back(at::log_softmax(teacher.forward(b), -1));
    if (tokens) *tokens += b.numel();
  }
  return out;
}

double mean_kl(const std::vector<at::Tensor>& reference, const LlamaModel& student,
               const std::vector<at::Tensor>& batches) {
  at::NoGradGuard no_grad;
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    at::Tensor s = at::log_softmax(student.forward(batches[i]), -1);
    const at::Tensor& t = reference[i];
    sum += (t.exp() * (t - s)).sum().item<double>();
    n += batches[i].numel();
  }
  return sum / double(std::max<int64_t>(n, 1));
}

}  // namespace ac
