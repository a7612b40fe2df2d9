#include "export/ffn_padding.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/weights.h"

namespace ac {

namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// [rows, cols] -> [rows + extra, cols] (dim 0) or [rows, cols + extra] (dim 1), the new part zero.
at::Tensor pad_zeros(const at::Tensor& t, int64_t dim, int64_t extra) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[size_t(dim)] = extra;
  return at::cat({t, at::zeros(shape, t.options())}, dim);
}

void require_multiple(int64_t multiple) {
  if (multiple < 1)
    throw ConfigError(fmt::format("[pad_ffn_widths] multiple: expected >= 1, found {}", multiple));
}

}  // namespace

int64_t ffn_padding_parameters(const ModelConfig& c, int64_t multiple) {
  require_multiple(multiple);
  int64_t n = 0;
  for (const auto& l : c.layers)
    if (l.has_ffn()) n += 3 * c.hidden_size * (round_up(l.intermediate_size, multiple) - l.intermediate_size);
  return n;
}

LlamaModel pad_ffn_widths(const LlamaModel& m, int64_t multiple) {
  require_multiple(multiple);
  LlamaModel out{m.config, clone(m.config, m.weights)};
  for (size_t i = 0; i < out.config.layers.size(); ++i) {
    LayerConfig& l = out.config.layers[i];
    if (!l.has_ffn()) continue;
    const int64_t extra = round_up(l.intermediate_size, multiple) - l.intermediate_size;
    if (extra == 0) continue;
    LayerWeights& w = out.weights.layers[i];
    w.gate_proj = pad_zeros(w.gate_proj, 0, extra);  // [F', D]
    w.up_proj = pad_zeros(w.up_proj, 0, extra);      // [F', D]
    w.down_proj = pad_zeros(w.down_proj, 1, extra);  // [D, F']
    l.intermediate_size += extra;
  }
  out.config.validate("pad_ffn_widths");
  return out;
}

}  // namespace ac
