#include "distill/hidden_loss.h"

#include <c10/core/InferenceMode.h>
#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace ac {

ResidualCapture::ResidualCapture(std::vector<int64_t> layers, at::Tensor channels)
    : states(layers.size()), layers_(std::move(layers)), channels_(std::move(channels)) {}

void ResidualCapture::on_block(int64_t layer, const at::Tensor&, const at::Tensor& out) {
  for (size_t k = 0; k < layers_.size(); ++k)
    if (layers_[k] == layer)
      // The map's channels are CPU indices; the states live on the forward's device.
      states[k] = channels_.defined() ? out.index_select(-1, channels_.to(out.device()))
                                      : out;  // [B, T, D']
}

at::Tensor hidden_state_loss(const std::vector<at::Tensor>& student,
                             const std::vector<at::Tensor>& teacher, const at::Tensor& keep,
                             bool normalize) {
  const char* where = "hidden_state_loss";
  if (student.empty() || student.size() != teacher.size())
    throw ConfigError(msg(where, "{} student and {} teacher layers: need the same number, >= 1",
                          student.size(), teacher.size()));
  at::Tensor total;
  for (size_t k = 0; k < student.size(); ++k) {
    const at::Tensor& s = student[k];
    const at::Tensor& t = teacher[k];
    if (!s.defined() || !t.defined() || s.dim() != 3 || s.sizes() != t.sizes())
      throw ConfigError(msg(where, "pair {}: student [{}] and teacher [{}] must both be [B, T, D']",
                            k, s.defined() ? fmt::format("{}", fmt::join(s.sizes(), ", ")) : "",
                            t.defined() ? fmt::format("{}", fmt::join(t.sizes(), ", ")) : ""));
    if (keep.defined() && (keep.size(0) != s.size(0) || keep.size(1) != s.size(1)))
      throw ConfigError(msg(where, "mask [{}] must be [B, T] = [{}, {}]",
                            fmt::join(keep.sizes(), ", "), s.size(0), s.size(1)));
    const double n = keep.defined() ? std::max<double>(1.0, double(keep.sum().item<int64_t>()))
                                    : double(s.size(0) * s.size(1));
    const double width = double(s.size(2));
    at::Tensor diff = s - t;  // [B, T, D']
    // where(), not a product with the mask: a NaN at a masked position stays out of the value
    // and of the gradient.
    if (keep.defined()) diff = at::where(keep.unsqueeze(-1), diff, at::zeros({}, diff.options()));
    at::Tensor mse = diff.pow(2).sum() / (n * width);
    if (normalize) {
      at::Tensor tv = keep.defined() ? at::where(keep.unsqueeze(-1), t, at::zeros({}, t.options()))
                                     : t;
      at::Tensor mu = tv.sum(at::IntArrayRef{0, 1}, /*keepdim=*/true) / n;  // [1, 1, D']
      at::Tensor dev = tv - mu;
      if (keep.defined()) dev = at::where(keep.unsqueeze(-1), dev, at::zeros({}, dev.options()));
      double var = dev.to(at::kDouble).pow(2).sum().item<double>() / (n * width);
      mse = mse / std::max(var, 1e-12);
    }
    total = total.defined() ? total + mse : mse;
  }
  return total / double(student.size());
}

HiddenForward forward_with_hidden_loss(const LlamaModel& teacher, const LlamaModel& student,
                                       const at::Tensor& tokens, const PruningMap& map,
                                       const at::Tensor& keep, bool normalize) {
  HiddenForward out;
  ResidualCapture teacher_states(map.layers, map.hidden_channels);
  {
    c10::InferenceMode no_autograd;
    ForwardOptions fo;
    fo.observer = &teacher_states;
    out.teacher_logits = teacher.forward(tokens, fo);  // [B, T, V]
  }
  std::vector<int64_t> all(size_t(student.config.num_layers()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  ResidualCapture student_states(all, at::Tensor());
  ForwardOptions fo;
  fo.observer = &student_states;
  out.student_logits = student.forward(tokens, fo);  // [B, T, V]
  out.loss = hidden_state_loss(student_states.states, teacher_states.states,
                               keep.defined() ? keep.to(at::kBool) : at::Tensor(), normalize);
  return out;
}

}  // namespace ac
