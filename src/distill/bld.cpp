#include "distill/bld.h"

#include <fmt/format.h>
#include <torch/optim/adamw.h>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "distill/distill.h"
#include "distill/hidden_loss.h"
#include "distill/stop_signal.h"
#include "model/tensor_roles.h"

namespace ac {

namespace {

// Keeps the teacher's residual stream entering every layer, and after the last one, at the
// teacher's full hidden size: in[t] for t in [0, L), in[L] = after layer L - 1.
class StreamCapture : public ForwardObserver {
 public:
  explicit StreamCapture(int64_t num_layers) : in(size_t(num_layers + 1)) {}
  void on_block(int64_t layer, const at::Tensor& x_in, const at::Tensor& x_out) override {
    in[size_t(layer)] = x_in.detach();
    if (layer + 1 == int64_t(in.size()) - 1) in.back() = x_out.detach();
  }
  std::vector<at::Tensor> in;  // [B, T, D] each
};

// Layer i of `m` alone, its weights on `d` (the same tensors when already there).
LlamaModel one_block(const LlamaModel& m, int64_t i, const c10::Device& d) {
  ModelConfig one = m.config;
  one.layers = {m.config.layers.at(size_t(i))};
  LayerWeights on = m.weights.layers.at(size_t(i));
  for (const TensorRole& r : kLayerRoles) {
    at::Tensor& t = on.*r.layer_member;
    if (t.defined()) t = t.to(d);
  }
  return {one, {at::Tensor(), {on}, at::Tensor(), at::Tensor()}};
}

std::vector<at::Tensor> block_parameters(const LayerWeights& w) {
  std::vector<at::Tensor> out;
  for (const TensorRole& r : kLayerRoles)
    if (const at::Tensor& t = w.*r.layer_member; t.defined()) out.push_back(t);
  return out;
}

}  // namespace

BldOptions bld_options_for(const DistillOptions& d, int64_t tokens) {
  BldOptions b;
  b.token_budget = tokens;
  b.seq_len = d.seq_len;
  b.seed = d.seed;
  b.device = d.device;
  b.show_progress = false;
  return b;
}

std::vector<int64_t> bld_changed_blocks(const ModelConfig& teacher, const ModelConfig& student,
                                        const PruningMap& map) {
  std::vector<int64_t> out;
  const bool narrower = student.hidden_size != teacher.hidden_size;
  for (size_t i = 0; i < map.layers.size(); ++i) {
    const auto [first, end] = bld_span(map, int64_t(i), teacher.num_layers());
    if (narrower || end - first > 1 ||
        student.layers[i] != teacher.layers[size_t(map.layers[i])])
      out.push_back(int64_t(i));
  }
  return out;
}

std::pair<int64_t, int64_t> bld_span(const PruningMap& map, int64_t i, int64_t teacher_layers) {
  const size_t k = size_t(i);
  return {k == 0 ? 0 : map.layers[k],
          k + 1 < map.layers.size() ? map.layers[k + 1] : teacher_layers};
}

BldResult blockwise_local_distill(const LlamaModel& teacher, LlamaModel& student,
                                  const PruningMap& map, const TokenDataset& data,
                                  const BldOptions& opt, BldTeacherCache* cache) {
  const char* where = "bld";
  check_pruning_map(map, teacher.config, student.config, "the pruning map");
  const int64_t per_step = opt.batch_size * opt.seq_len;
  if (opt.batch_size < 1 || opt.seq_len < 1 || opt.token_budget < per_step)
    throw ConfigError(msg(where, "token budget {} is below one step of {} x {} tokens",
                          opt.token_budget, opt.batch_size, opt.seq_len));
  BldResult res;
  const std::vector<int64_t> changed = bld_changed_blocks(teacher.config, student.config, map);
  if (changed.empty()) return res;
  const double t0 = now_s();
  const LlamaModel t_dev{teacher.config, to_device(teacher.config, teacher.weights, opt.device)};

  // The trained blocks, their parameters (leaves on the device), and what each stands in for.
  std::vector<LlamaModel> blocks;
  std::vector<at::Tensor> params;
  for (int64_t i : changed) {
    blocks.push_back(one_block(student, i, opt.device));
    for (at::Tensor& p : block_parameters(blocks.back().weights.layers[0])) {
      p.requires_grad_(true);
      params.push_back(p);
    }
    const auto [first, end] = bld_span(map, i, teacher.config.num_layers());
    res.blocks.push_back({i, first, end, 0.0, 0.0});
  }

  if (cache) {
    if (!cache->teacher) {
      cache->teacher = &teacher;
      cache->seed = opt.seed;
      cache->batch_size = opt.batch_size;
      cache->seq_len = opt.seq_len;
    } else if (cache->teacher != &teacher || cache->seed != opt.seed ||
               cache->batch_size != opt.batch_size || cache->seq_len != opt.seq_len) {
      throw InternalError(msg(where, "a teacher-state cache of seed {}, batches {} x {} used with "
                              "seed {}, batches {} x {} or another teacher", cache->seed,
                              cache->batch_size, cache->seq_len, opt.seed, opt.batch_size,
                              opt.seq_len));
    }
  }
  const at::Tensor channels = map.hidden_channels.to(opt.device);
  // Teacher states of one batch (`key`: its step, -1 the evaluation batch), at full width:
  // from the cache, or the teacher's forward (kept when the cache has room).
  auto full_states = [&](const at::Tensor& tokens, int64_t key) -> std::vector<at::Tensor> {
    if (cache) {
      auto it = cache->states.find(key);
      if (it != cache->states.end()) return it->second;
    }
    StreamCapture cap(teacher.config.num_layers());
    {
      at::NoGradGuard no_grad;  // not InferenceMode: the inputs are saved by the blocks' backward
      ForwardOptions fo;
      fo.observer = &cap;
      fo.final_norm = false;
      t_dev.hidden_states(tokens, fo);
    }
    if (key >= 0) res.teacher_tokens += tokens.numel();
    if (cache) {
      int64_t b = 0;
      for (const at::Tensor& x : cap.in) b += x.numel() * int64_t(x.element_size());
      if (cache->bytes + b <= cache->max_bytes) {
        cache->bytes += b;
        cache->states.emplace(key, cap.in);
      }
    }
    return cap.in;
  };
  // Inputs and targets of every trained block: the student's hidden channels of the states.
  auto teacher_states = [&](const at::Tensor& tokens, int64_t key) {
    std::vector<at::Tensor> xs = full_states(tokens, key);
    for (at::Tensor& x : xs) x = x.index_select(-1, channels).contiguous();
    return xs;
  };
  // Sum over the trained blocks of L_hid, and each block's value.
  auto block_losses = [&](const at::Tensor& tokens, int64_t key, std::vector<double>* each) {
    const std::vector<at::Tensor> xs = teacher_states(tokens, key);
    at::Tensor total;
    for (size_t b = 0; b < blocks.size(); ++b) {
      ForwardOptions fo;
      fo.final_norm = false;
      fo.inputs_embeds = &xs[size_t(res.blocks[b].teacher_first)];
      fo.first_layer = res.blocks[b].student_layer;
      at::Tensor y = blocks[b].hidden_states(tokens, fo);  // [B, T, D']
      at::Tensor l = hidden_state_loss({y}, {xs[size_t(res.blocks[b].teacher_end)]}, at::Tensor(),
                                       /*normalize=*/true);
      if (each) each->push_back(l.item<double>());
      total = total.defined() ? total + l : l;
    }
    return total;
  };

  const at::Tensor eval_tokens = data.batch(0, opt.batch_size, opt.seq_len, opt.seed + 1)
                                     .to(opt.device);  // [B, T]
  auto evaluate = [&](bool before) {
    at::NoGradGuard no_grad;
    std::vector<double> each;
    block_losses(eval_tokens, /*key=*/-1, &each);
    for (size_t b = 0; b < each.size(); ++b)
      (before ? res.blocks[b].loss_before : res.blocks[b].loss_after) = each[b];
  };
  evaluate(/*before=*/true);

  DistillOptions sched;  // lr_at's schedule
  sched.lr = opt.lr;
  sched.min_lr = opt.min_lr;
  sched.warmup_steps = opt.warmup_steps;
  torch::optim::AdamW optim(params, torch::optim::AdamWOptions(opt.lr)
                                        .betas({0.9, 0.95})
                                        .weight_decay(0.0));
  const int64_t steps = opt.token_budget / per_step;
  Progress progress("bld", steps, "steps");
  StopSignalScope signals;  // SIGINT / SIGTERM: stop at the next step, keeping nothing of it
  for (int64_t s = 0; s < steps; ++s) {
    if (const int sig = StopSignalScope::pending())
      throw Interrupted(msg(where, "interrupted by a signal during distillation (its blockwise "
                            "start, at step {} of {}); the blockwise distillation is redone when "
                            "the run continues", s, steps), sig);
    const double lr = lr_at(s, steps, sched);
    for (auto& g : optim.param_groups())
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    clear_gradients(params);
    at::Tensor tokens = data.batch(s, opt.batch_size, opt.seq_len, opt.seed).to(opt.device);
    at::Tensor loss = block_losses(tokens, s, nullptr);
    if (!std::isfinite(loss.item<double>()))
      throw Error(msg(where, "non-finite block loss at step {} of {}", s, steps));
    loss.backward();
    optim.step();
    if (opt.show_progress) progress.update(s + 1, fmt::format("loss {:.4f}", loss.item<double>()));
  }
  if (opt.show_progress) progress.finish();
  for (at::Tensor& p : params) p.requires_grad_(false);
  evaluate(/*before=*/false);
  // Back into the student (a no-op copy when the blocks trained in the student's own storage).
  for (size_t b = 0; b < blocks.size(); ++b) {
    LayerWeights& dst = student.weights.layers[size_t(res.blocks[b].student_layer)];
    const LayerWeights& src = blocks[b].weights.layers[0];
    for (const TensorRole& r : kLayerRoles) {
      at::Tensor& d = dst.*r.layer_member;
      if (d.defined() && !d.is_same(src.*r.layer_member)) {
        at::NoGradGuard no_grad;
        d.copy_(src.*r.layer_member);
      }
    }
  }
  res.steps = steps;
  res.tokens = steps * per_step;
  res.wall_s = now_s() - t0;
  return res;
}

}  // namespace ac
