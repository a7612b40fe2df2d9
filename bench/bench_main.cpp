// autocompress_bench: throughput of our training step and importance pass, on random weights of
// the shapes bench/torch_eager.py uses, so that bench/run.sh can print the ratio to PyTorch
// eager measured in the same run. Prints one JSON line:
//   {"which": ..., "tokens_per_s": median, "step_s": [...], "gflops_per_s": ..., "flops_per_step": ...}
//
// FLOPs are the matmul FLOPs of the forward pass (2 m n k each: q, k, v, o, gate, up, down,
// QK^T and AV over the full T x T scores, lm_head), x3 for the student's forward + backward
// (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1: C ~ 6 N per
// token for training, 2 N for a forward pass).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>

#include "common/runtime.h"
#include "data/dataset.h"
#include "distill/distill.h"
#include "distill/loss.h"
#include "importance/importance.h"
#include "model/llama.h"

namespace ac {
namespace {

/// Forward matmul FLOPs of `c` on a [B, T] batch.
double forward_flops(const ModelConfig& c, int64_t B, int64_t T) {
  double per_token = 2.0 * double(c.hidden_size) * double(c.vocab_size);  // lm_head
  for (const LayerConfig& l : c.layers) {
    double D = double(c.hidden_size);
    if (l.has_attention()) {
      double q = double(l.num_attention_heads * l.head_dim);
      double kv = double(l.num_key_value_heads * l.head_dim);
      per_token += 2 * D * (q + 2 * kv) + 2 * q * D + 2 * 2 * double(T) * q;
    }
    if (!l.ffn_no_op) per_token += 3 * 2 * D * double(l.intermediate_size);
  }
  return per_token * double(B * T);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  CLI::App app{"autocompress_bench"};
  std::string which;
  int64_t dim = 288, layers = 6, heads = 6, kv_heads = 6, ffn = 768, vocab = 32000;
  int64_t sdim = 192, sheads = 4, skv = 4, sffn = 512, batch = 8, seq = 256, steps = 5,
          warmup = 1;
  app.add_option("which", which, "train | importance")->required();
  app.add_option("--dim", dim);
  app.add_option("--layers", layers);
  app.add_option("--heads", heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--ffn", ffn);
  app.add_option("--vocab", vocab);
  app.add_option("--student-dim", sdim);
  app.add_option("--student-heads", sheads);
  app.add_option("--student-kv-heads", skv);
  app.add_option("--student-ffn", sffn);
  app.add_option("--batch", batch);
  app.add_option("--seq", seq);
  app.add_option("--steps", steps);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);
  init_torch_threads();

  const int64_t hd = dim / heads;
  ModelConfig tc = ModelConfig::uniform(vocab, dim, layers, LayerConfig{heads, kv_heads, hd, ffn});
  tc.tie_word_embeddings = true;
  LlamaModel teacher{tc, random_weights(tc, 1, 0.02)};
  const int64_t n = warmup + steps;
  at::Generator g = at::detail::createCPUGenerator(7);
  std::vector<at::Tensor> batches;
  for (int64_t i = 0; i < n; ++i) batches.push_back(at::randint(0, vocab, {batch, seq}, g, at::kLong));

  std::vector<double> step_s;
  double flops = 0;
  nlohmann::json breakdown = nlohmann::json::object();
  if (which == "importance") {
    // One batch per compute_importance call, so each call is one timed step.
    ImportanceOptions o;
    o.show_progress = false;
    for (int64_t i = 0; i < n; ++i) {
      double t0 = now_s();
      compute_importance(teacher, {batches[size_t(i)]}, o);
      if (i >= warmup) step_s.push_back(now_s() - t0);
    }
    flops = forward_flops(tc, batch, seq);
  } else if (which == "train") {
    ModelConfig sc = ModelConfig::uniform(vocab, sdim, layers,
                                          LayerConfig{sheads, skv, sdim / sheads, sffn});
    sc.tie_word_embeddings = true;
    LlamaModel student{sc, random_weights(sc, 2, 0.02)};
    std::vector<int32_t> ids;
    for (const auto& b : batches) {
      auto a = b.contiguous().data_ptr<int64_t>();
      for (int64_t i = 0; i < b.numel(); ++i) ids.push_back(int32_t(a[i]));
    }
    TokenDataset data(std::move(ids), vocab);
    DistillOptions o;
    o.batch_size = batch;
    o.seq_len = seq;
    o.token_budget = n * batch * seq;
    o.warmup_steps = 1;
    o.checkpoint_every = 0;
    o.show_progress = false;
    o.on_step = [&](const StepRecord& r) {
      if (r.step >= warmup) step_s.push_back(double(batch * seq) / r.tokens_per_s);
    };
    distill(teacher, student, data, o);
    flops = forward_flops(tc, batch, seq) + 3 * forward_flops(sc, batch, seq);
    // Where the time goes: the same step's phases timed one by one (medians over the steps).
    std::vector<double> t_teacher, t_student, t_loss, t_backward, t_opt;
    auto params = student.weights.parameters();
    student.weights.lm_head = student.weights.embed_tokens;
    for (auto& p : params) p.requires_grad_(true);
    torch::optim::AdamW adam(params, torch::optim::AdamWOptions(1e-4));
    for (int64_t i = 0; i < n; ++i) {
      const at::Tensor& tokens = batches[size_t(i)];
      double t0 = now_s();
      at::Tensor tl;
      {
        c10::InferenceMode no_autograd;  // as the trainer (distill.cpp)
        tl = teacher.forward(tokens);
      }
      double t1 = now_s();
      at::Tensor sl = student.forward(tokens);
      double t2 = now_s();
      DistillLoss l = distill_loss(tl, sl, tokens, {}, 1.0, 0.0);
      double t3 = now_s();
      adam.zero_grad();
      l.loss.backward();
      double t4 = now_s();
      torch::nn::utils::clip_grad_norm_(params, 1.0);
      adam.step();
      double t5 = now_s();
      if (i < warmup) continue;
      t_teacher.push_back(t1 - t0);
      t_student.push_back(t2 - t1);
      t_loss.push_back(t3 - t2);
      t_backward.push_back(t4 - t3);
      t_opt.push_back(t5 - t4);
    }
    breakdown = {{"teacher_forward_s", median(t_teacher)}, {"student_forward_s", median(t_student)},
                 {"kl_loss_s", median(t_loss)}, {"backward_s", median(t_backward)},
                 {"clip_and_adamw_s", median(t_opt)},
                 {"teacher_forward_gflops_per_s", forward_flops(tc, batch, seq) / median(t_teacher) / 1e9},
                 {"student_forward_gflops_per_s", forward_flops(sc, batch, seq) / median(t_student) / 1e9},
                 {"backward_gflops_per_s", 2 * forward_flops(sc, batch, seq) / median(t_backward) / 1e9}};
  } else {
    std::cerr << "which must be train or importance\n";
    return 2;
  }
  double med = median(step_s);
  nlohmann::json j = {{"which", which},
                      {"tokens_per_s", double(batch * seq) / med},
                      {"step_s", step_s},
                      {"flops_per_step", flops},
                      {"gflops_per_s", flops / med / 1e9},
                      {"threads", at::get_num_threads()},
                      {"breakdown", breakdown}};
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace ac

int main(int argc, char** argv) { return ac::run(argc, argv); }
