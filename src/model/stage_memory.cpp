#include "model/stage_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "common/runtime.h"

namespace ac {

namespace {

constexpr double kGiB = double(int64_t(1) << 30);
constexpr double kUsable = 0.9;  // of the free memory (check_fits)

// Parameters in the projection matrices (what autocast copies to bf16): all but the norms and
// biases.
int64_t matrix_parameters(const ModelConfig& c) {
  int64_t n = c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
  for (const LayerConfig& l : c.layers) {
    const int64_t q = l.num_attention_heads * l.head_dim, kv = l.num_key_value_heads * l.head_dim;
    if (l.has_attention()) n += 2 * c.hidden_size * q + 2 * c.hidden_size * kv;
    if (l.has_ffn()) n += 3 * c.hidden_size * l.intermediate_size;
  }
  return n;
}

// Elements per token one layer keeps for backward (the file header), T = seq_len.
int64_t layer_elements(const ModelConfig& c, const LayerConfig& l, int64_t T) {
  int64_t n = 0;
  if (l.has_attention()) {
    const int64_t q = l.num_attention_heads * l.head_dim, kv = l.num_key_value_heads * l.head_dim;
    n += 4 * c.hidden_size + 3 * q + 3 * kv + 2 * l.num_attention_heads * T;
  }
  if (l.has_ffn()) n += 3 * c.hidden_size + 4 * l.intermediate_size;
  return n;
}

int64_t weight_bytes(const ModelConfig& c, Precision p) {
  return 4 * c.num_parameters() + (p == Precision::bf16 ? 2 * matrix_parameters(c) : 0);
}

// Saved activations of every layer (with_grad) or the largest layer's working set.
int64_t activation_bytes(const ModelConfig& c, int64_t tokens, int64_t T, bool with_grad,
                         Precision p) {
  const int64_t e = p == Precision::bf16 ? 2 : 4;
  int64_t all = 0, largest = 0;
  for (const LayerConfig& l : c.layers) {
    const int64_t n = layer_elements(c, l, T);
    all += n;
    largest = std::max(largest, n);
  }
  return tokens * (with_grad ? all : largest) * e;
}

}  // namespace

double forward_flops_per_token(const ModelConfig& c, int64_t T) {
  double f = 2.0 * double(c.vocab_size * c.hidden_size);  // the output head
  for (const LayerConfig& l : c.layers) {
    const int64_t q = l.num_attention_heads * l.head_dim, kv = l.num_key_value_heads * l.head_dim;
    if (l.has_attention())
      f += 2.0 * double(2 * c.hidden_size * q + 2 * c.hidden_size * kv) + 4.0 * double(T * q);
    if (l.has_ffn()) f += 2.0 * double(3 * c.hidden_size * l.intermediate_size);
  }
  return f;
}

double distill_flops_per_token(const ModelConfig& teacher, const ModelConfig& student, int64_t T) {
  return 3.0 * forward_flops_per_token(student, T) + forward_flops_per_token(teacher, T);
}

int64_t MemoryPlan::total() const {
  int64_t t = 0;
  for (const auto& [_, b] : parts) t += b;
  return t;
}

std::string MemoryPlan::describe() const {
  std::string s;
  for (const auto& [name, b] : parts)
    s += fmt::format("{}{} {:.2f} GiB", s.empty() ? "" : ", ", name, double(b) / kGiB);
  return s + fmt::format(" = {:.2f} GiB", double(total()) / kGiB);
}

MemoryPlan distill_memory(const ModelConfig& teacher, const ModelConfig& student, int64_t batch,
                          int64_t seq_len, Precision precision) {
  const int64_t tokens = batch * seq_len, Ns = student.num_parameters();
  const int64_t V = std::max(teacher.vocab_size, student.vocab_size);
  MemoryPlan p;
  p.parts = {{"teacher weights", weight_bytes(teacher, precision)},
             {"student weights", weight_bytes(student, precision)},
             {"student gradients", 4 * Ns},
             {"AdamW state", 8 * Ns},
             {"student activations",
              activation_bytes(student, tokens, seq_len, /*with_grad=*/true, precision)},
             {"teacher working set",
              activation_bytes(teacher, tokens, seq_len, /*with_grad=*/false, precision)},
             {"logits", tokens * 6 * V * 4}};
  return p;
}

MemoryPlan forward_memory(const ModelConfig& model, int64_t batch, int64_t seq_len,
                          bool with_grad, Precision precision) {
  const int64_t tokens = batch * seq_len;
  MemoryPlan p;
  p.parts = {{"weights", weight_bytes(model, precision)},
             {with_grad ? "saved activations" : "working set",
              activation_bytes(model, tokens, seq_len, with_grad, precision)},
             {"logits", tokens * (with_grad ? 6 : 3) * model.vocab_size * 4}};
  return p;
}

void check_fits(const MemoryPlan& plan, const c10::Device& device, int64_t free_bytes,
                const std::string& who) {
  if (free_bytes <= 0 || double(plan.total()) <= kUsable * double(free_bytes)) return;
  throw ConfigError(msg(who.c_str(), "does not fit {}: it needs {} ({}), and {:.2f} GiB are free ({:.0f}% "
                             "of it usable); lower --batch-size or --seq-len, or use a larger "
                             "device", device_name(device), fmt::format("{:.2f} GiB",
                             double(plan.total()) / kGiB), plan.describe(),
                        double(free_bytes) / kGiB, kUsable * 100));
}

bool fits_device(const MemoryPlan& plan, const c10::Device& device) {
  if (!device.is_cuda()) return true;
  const int64_t free = device_free_bytes(device);
  return free <= 0 || double(plan.total()) <= kUsable * double(free);
}

void check_fits_device(const MemoryPlan& plan, const c10::Device& device, const std::string& who) {
  if (!device.is_cuda()) return;
  const int64_t free = device_free_bytes(device);
  log_info(fmt::format("[{}] memory on {}: {} of {:.2f} GiB free", who, device_name(device),
                       plan.describe(), double(free) / kGiB));
  check_fits(plan, device, free, who);
}

}  // namespace ac
