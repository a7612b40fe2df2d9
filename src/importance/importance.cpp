#include "importance/importance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/gemm.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "io/safetensors.h"
#include "model/finite.h"
#include "model/stage_memory.h"

namespace ac {

namespace {

const char* kFormat = "autocompress.importance.v1";
const char* kStateFormat = "autocompress.importance_state.v1";

const char* aggregation_name(Aggregation a) {
  return a == Aggregation::kMean ? "mean" : "batch_l2";
}

// Running fp32 sums of every score plus the counts needed to normalise them. The state file is
// this struct; kv_groups are derived from heads at the end.
struct Sums {
  Importance raw;  // sums (mean) or sums of squared per-sequence means (batch_l2)
  int64_t batches_done = 0;
  int64_t pred_tokens = 0;  // next-token targets seen (for layer_drop_loss)
};

Sums zero_sums(const ModelConfig& c, const ImportanceOptions& opt) {
  Sums s;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  s.raw.hidden = at::zeros({c.hidden_size}, f32);
  for (const auto& l : c.layers) {
    LayerImportance li;
    if (l.has_attention()) li.heads = at::zeros({l.num_attention_heads}, f32);
    if (l.has_ffn()) li.ffn = at::zeros({l.intermediate_size}, f32);
    s.raw.layers.push_back(li);
  }
  s.raw.block_influence = at::zeros({c.num_layers()}, f32);
  if (opt.layer_drop_loss) s.raw.layer_drop_loss = at::zeros({c.num_layers()}, f32);
  s.raw.aggregation = aggregation_name(opt.aggregation);
  return s;
}

// Accumulates the per-token scores the forward pass reports (file header of importance.h).
struct Observer : ForwardObserver {
  Sums& sums;
  Aggregation agg;
  Observer(Sums& s, Aggregation a) : sums(s), agg(a) {}

  // per_token: [B, T, K] non-negative scores -> acc [K] (in place).
  void add(at::Tensor& acc, const at::Tensor& per_token) {
    AC_CHECK(acc.defined() && per_token.size(-1) == acc.size(0), "score width {} vs {}",
             per_token.size(-1), acc.defined() ? acc.size(0) : -1);
    at::Tensor s = per_token.to(at::kFloat);
    if (agg == Aggregation::kMean)
      acc.add_(s.sum(at::IntArrayRef{0, 1}));
    else
      acc.add_(s.mean(1).square().sum(0));
  }
  void on_embedding(const at::Tensor& x) override { add(sums.raw.hidden, x.abs()); }
  void on_norm(int64_t, int, const at::Tensor& x) override { add(sums.raw.hidden, x.abs()); }
  void on_attn_heads(int64_t layer, const at::Tensor& x) override {
    add(sums.raw.layers[size_t(layer)].heads, at::norm(x, 2, {-1}));  // [B, T, H]
  }
  void on_ffn_act(int64_t layer, const at::Tensor& x) override {
    add(sums.raw.layers[size_t(layer)].ffn, x.abs());
  }
  void on_block(int64_t layer, const at::Tensor& in, const at::Tensor& out) override {
    at::Tensor cos = at::cosine_similarity(in, out, -1, 1e-8);  // [B, T]
    sums.raw.block_influence[layer] += (1.0 - cos).sum().to(at::kFloat);
  }
};

// Rows of logits computed at once by lm_loss: at most kLossChunkBytes of fp32 logits, so the
// loss never holds the [B, T, V] logits (65 MiB for stories15M at B=8, T=256) and their
// log-softmax at the same time; peak memory stays that of the layers.
constexpr int64_t kLossChunkBytes = int64_t(8) << 20;

// Mean next-token cross-entropy (nats/token) of the model on tokens [B, T], T >= 2: the final
// hidden states once, then the output head and the cross-entropy over chunks of positions.
double lm_loss(const LlamaModel& m, const at::Tensor& tokens, const Masks* masks) {
  ForwardOptions fo;
  fo.masks = masks;
  const int64_t T = tokens.size(1) - 1;
  at::Tensor h = m.hidden_states(tokens.narrow(1, 0, T), fo);  // [B, T-1, D]
  h = h.reshape({-1, h.size(-1)});                             // [N, D]
  at::Tensor targets = tokens.narrow(1, 1, T).reshape({-1});   // [N]
  const int64_t V = m.weights.lm_head.size(0), N = h.size(0);
  const int64_t rows = std::max<int64_t>(1, kLossChunkBytes / (V * int64_t(sizeof(float))));
  double sum = 0;
  for (int64_t r = 0; r < N; r += rows) {
    const int64_t n = std::min(rows, N - r);
    at::Tensor logits = ac::linear(h.narrow(0, r, n), m.weights.lm_head);  // [n, V]
    sum += at::cross_entropy_loss(logits, targets.narrow(0, r, n), {}, at::Reduction::Sum)
               .item<double>();
  }
  return sum / double(N);
}

// Adds (loss without block l - full loss) * targets for every l.
void add_layer_drop(const LlamaModel& m, const at::Tensor& tokens, Sums& s) {
  if (tokens.size(1) < 2) return;
  const int64_t L = m.config.num_layers(), n = tokens.size(0) * (tokens.size(1) - 1);
  const double base = lm_loss(m, tokens, nullptr);
  for (int64_t l = 0; l < L; ++l) {
    Masks drop;
    drop.layers.resize(size_t(L));
    drop.layers[size_t(l)].attn_gate = at::zeros({}, tokens.options().dtype(at::kFloat));
    drop.layers[size_t(l)].ffn_gate = at::zeros({}, tokens.options().dtype(at::kFloat));
    s.raw.layer_drop_loss[l] += float((lm_loss(m, tokens, &drop) - base) * double(n));
  }
  s.pred_tokens += n;
}

at::Tensor check_batch(const at::Tensor& b, size_t i) {
  if (!b.defined() || b.dim() != 2 || b.numel() == 0 || at::isFloatingType(b.scalar_type()))
    throw ConfigError(msg("importance", "batch {}: expected non-empty integer tokens [B, T], "
                          "found {} {}", i, b.defined() ? c10::toString(b.scalar_type()) : "none",
                          b.defined() ? b.sizes().vec() : std::vector<int64_t>{}));
  return b.to(at::kLong);
}

void save_state(const fs::path& path, const Sums& s) {
  TensorMap t = importance_to_tensor_map(s.raw);
  save_safetensors(path, t,
                   {{"format", kStateFormat},
                    {"aggregation", s.raw.aggregation},
                    {"batches_done", std::to_string(s.batches_done)},
                    {"num_tokens", std::to_string(s.raw.num_tokens)},
                    {"num_sequences", std::to_string(s.raw.num_sequences)},
                    {"pred_tokens", std::to_string(s.pred_tokens)}});
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const char* key,
                 const fs::path& path) {
  auto it = meta.find(key);
  try {
    if (it != meta.end()) return std::stoll(it->second);
  } catch (const std::exception&) {
  }
  throw FormatError(msg("importance", "{}: metadata '{}' missing or not an integer",
                        path.string(), key));
}

// Loads a state file written by save_state and checks it belongs to this run.
Sums load_state(const fs::path& path, const ModelConfig& c, const ImportanceOptions& opt,
                size_t num_batches) {
  SafetensorsFile f(path);
  auto meta = f.metadata();
  if (meta["format"] != kStateFormat)
    throw FormatError(msg("importance", "{}: not an importance state file (format '{}')",
                          path.string(), meta["format"]));
  Sums s;
  s.raw = load_importance(path);
  s.batches_done = meta_int(meta, "batches_done", path);
  s.pred_tokens = meta_int(meta, "pred_tokens", path);
  if (s.raw.aggregation != aggregation_name(opt.aggregation) ||
      s.raw.layer_drop_loss.defined() != opt.layer_drop_loss)
    throw ConfigError(msg("importance", "{}: state made with aggregation {} and layer_drop_loss "
                          "{}, this run asks for {} and {}: delete it or match the options",
                          path.string(), s.raw.aggregation, s.raw.layer_drop_loss.defined(),
                          aggregation_name(opt.aggregation), opt.layer_drop_loss));
  check_importance_matches(c, s.raw, "importance");
  if (s.batches_done > int64_t(num_batches))
    throw ConfigError(msg("importance", "{}: state covers {} batches but only {} were given",
                          path.string(), s.batches_done, num_batches));
  return s;
}

// Every score tensor of `imp` on `d` (the running sums on the run's device; the result and the
// state file on the CPU).
Importance on_device(Importance imp, const c10::Device& d) {
  auto move = [&](at::Tensor& t) {
    if (t.defined()) t = t.to(d);
  };
  move(imp.hidden);
  for (LayerImportance& l : imp.layers) {
    move(l.heads);
    move(l.kv_groups);
    move(l.ffn);
  }
  move(imp.block_influence);
  move(imp.layer_drop_loss);
  return imp;
}

// Sums -> normalised scores (see the file header of importance.h).
Importance finalize(const Sums& s, const ModelConfig& c, Aggregation agg) {
  Importance out = s.raw;
  const double n = double(std::max<int64_t>(agg == Aggregation::kMean ? s.raw.num_tokens
                                                                      : s.raw.num_sequences, 1));
  auto norm = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    return agg == Aggregation::kMean ? t / n : (t / n).sqrt();
  };
  out.hidden = norm(s.raw.hidden);
  for (size_t i = 0; i < out.layers.size(); ++i) {
    LayerImportance& l = out.layers[i];
    l.heads = norm(s.raw.layers[i].heads);
    l.ffn = norm(s.raw.layers[i].ffn);
    if (l.heads.defined()) {
      const int64_t G = c.layers[i].num_key_value_heads;
      l.kv_groups = l.heads.view({G, -1}).sum(1);  // query head h belongs to group h / (H/G)
    }
  }
  out.block_influence = s.raw.block_influence / double(std::max<int64_t>(s.raw.num_tokens, 1));
  if (s.raw.layer_drop_loss.defined())
    out.layer_drop_loss = s.raw.layer_drop_loss / double(std::max<int64_t>(s.pred_tokens, 1));
  return out;
}

// One block's weights on `d`.
LayerWeights layer_on(const LayerWeights& w, const c10::Device& d) {
  LayerWeights o = w;
  for (at::Tensor* t : {&o.input_layernorm, &o.q_proj, &o.k_proj, &o.v_proj, &o.q_bias,
                        &o.k_bias, &o.v_bias, &o.o_proj, &o.q_norm, &o.k_norm,
                        &o.post_attention_layernorm,
                        &o.gate_proj, &o.up_proj, &o.down_proj})
    if (t->defined()) *t = t->to(d);
  return o;
}

// ImportanceOptions::stream_layers: layer-major. The observer sees the tensors the whole forward
// shows it (the embedding, each block's norms, heads, FFN activations and residuals, the final
// norm), batch by batch within each block.
Importance compute_importance_streamed(const LlamaModel& model,
                                       const std::vector<at::Tensor>& batches,
                                       const ImportanceOptions& opt) {
  if (opt.layer_drop_loss)
    throw ConfigError(msg("importance", "layer_drop_loss needs the whole model on {} (a forward "
                          "without each block) and cannot stream it block by block",
                          device_name(opt.device)));
  at::NoGradGuard no_grad;
  const ModelConfig& c = model.config;
  Sums s = zero_sums(c, opt);
  s.raw = on_device(std::move(s.raw), opt.device);
  Observer obs(s, opt.aggregation);
  std::vector<at::Tensor> tokens, xs;  // per batch: [B, T] ids, [B, T, D] residual stream
  {
    const at::Tensor embed = model.weights.embed_tokens.to(opt.device);
    for (size_t i = 0; i < batches.size(); ++i) {
      tokens.push_back(check_batch(batches[i], i).to(opt.device));
      xs.push_back(at::embedding(embed, tokens.back()));
      obs.on_embedding(xs.back());
    }
  }
  Progress progress("importance", c.num_layers(), "blocks");
  ForwardOptions fo;
  fo.observer = &obs;
  fo.final_norm = false;
  for (int64_t l = 0; l < c.num_layers(); ++l) {
    ModelConfig one = c;
    one.layers = {c.layers[size_t(l)]};
    const LlamaModel block{one, {at::Tensor(), {layer_on(model.weights.layers[size_t(l)],
                                                         opt.device)}, at::Tensor(), at::Tensor()}};
    fo.first_layer = l;
    for (size_t b = 0; b < xs.size(); ++b) {
      fo.inputs_embeds = &xs[b];
      xs[b] = block.hidden_states(tokens[b], fo);
    }
    release_free_memory();
    if (opt.show_progress) progress.update(l + 1);
  }
  // The final norm: a model of no blocks.
  ModelConfig none = c;
  none.layers.clear();
  const LlamaModel head{none, {at::Tensor(), {}, model.weights.norm.to(opt.device), at::Tensor()}};
  fo.first_layer = c.num_layers();
  fo.final_norm = true;
  for (size_t b = 0; b < xs.size(); ++b) {
    fo.inputs_embeds = &xs[b];
    head.hidden_states(tokens[b], fo);
    s.raw.num_tokens += tokens[b].numel();
    s.raw.num_sequences += tokens[b].size(0);
  }
  s.batches_done = int64_t(batches.size());
  if (opt.show_progress) progress.finish();
  return on_device(finalize(s, c, opt.aggregation), c10::kCPU);
}

}  // namespace

Importance compute_importance(const LlamaModel& model, const std::vector<at::Tensor>& batches,
                              const ImportanceOptions& opt) {
  if (batches.empty()) throw ConfigError("[importance] no calibration batches given");
  require_finite(model, "the model", "importance", opt.allow_nonfinite);
  at::NoGradGuard no_grad;
  const MemoryPlan whole = forward_memory(model.config, batches[0].size(0),
                                          batches[0].dim() == 2 ? batches[0].size(1) : 1,
                                          /*with_grad=*/false, Precision::fp32);
  if (opt.stream_layers || !fits_device(whole, opt.device)) {
    if (!opt.stream_layers)
      log_info(fmt::format("[importance] the whole model's pass does not fit {} ({}): streaming "
                           "it one block at a time", device_name(opt.device), whole.describe()));
    return compute_importance_streamed(model, batches, opt);
  }
  const LlamaModel m{model.config, to_device(model.config, model.weights, opt.device)};
  const ModelConfig& c = m.config;
  const bool stateful = !opt.state_path.empty();
  Sums s = stateful && opt.resume && fs::exists(opt.state_path)
               ? load_state(opt.state_path, c, opt, batches.size())
               : zero_sums(c, opt);
  s.raw = on_device(std::move(s.raw), opt.device);
  if (s.batches_done > 0)
    log_info(fmt::format("[importance] resuming from {}: {} of {} batches done",
                         opt.state_path.string(), s.batches_done, batches.size()));
  int64_t total = 0, done = 0;
  for (size_t i = 0; i < batches.size(); ++i)
    (int64_t(i) < s.batches_done ? done : total) += batches[i].numel();
  total += done;
  Progress progress("importance", total, "tokens");
  Observer obs(s, opt.aggregation);
  for (size_t i = size_t(s.batches_done); i < batches.size(); ++i) {
    at::Tensor tokens = check_batch(batches[i], i).to(opt.device);
    ForwardOptions fo;
    fo.observer = &obs;
    m.hidden_states(tokens, fo);
    if (opt.layer_drop_loss) add_layer_drop(m, tokens, s);
    release_free_memory();  // peak memory: one batch's working set, not a growing cache
    s.raw.num_tokens += tokens.numel();
    s.raw.num_sequences += tokens.size(0);
    s.batches_done = int64_t(i) + 1;
    done += tokens.numel();
    if (opt.show_progress && done < total) progress.update(done);  // finish() draws 100%
    if (stateful && opt.save_every > 0 && s.batches_done % opt.save_every == 0)
      save_state(opt.state_path, s);
  }
  if (stateful) save_state(opt.state_path, s);
  if (opt.show_progress) progress.finish();
  return on_device(finalize(s, c, opt.aggregation), c10::kCPU);
}

// ---------------------------------------------------------------------------------------------
// Files

TensorMap importance_to_tensor_map(const Importance& imp) {
  TensorMap t;
  auto put = [&](const std::string& name, const at::Tensor& x) {
    if (x.defined()) t[name] = x.to(at::kFloat).contiguous();
  };
  put("hidden", imp.hidden);
  for (size_t i = 0; i < imp.layers.size(); ++i) {
    put(fmt::format("layers.{}.heads", i), imp.layers[i].heads);
    put(fmt::format("layers.{}.kv_groups", i), imp.layers[i].kv_groups);
    put(fmt::format("layers.{}.ffn", i), imp.layers[i].ffn);
  }
  put("block_influence", imp.block_influence);
  put("layer_drop_loss", imp.layer_drop_loss);
  return t;
}

void save_importance(const fs::path& path, const Importance& imp) {
  save_safetensors(path, importance_to_tensor_map(imp),
                   {{"format", kFormat},
                    {"aggregation", imp.aggregation},
                    {"num_tokens", std::to_string(imp.num_tokens)},
                    {"num_sequences", std::to_string(imp.num_sequences)}});
}

Importance load_importance(const fs::path& path) {
  SafetensorsFile f(path);
  const std::string file = path.string();
  auto get = [&](const std::string& name) {
    at::Tensor t = f.get(name);
    if (t.dim() != 1 || !at::isFloatingType(t.scalar_type()))
      throw FormatError(msg("load_importance", "{}: tensor '{}' must be a 1-D float vector, "
                            "found {} {}", file, name, c10::toString(t.scalar_type()), t.sizes().vec()));
    return t.to(at::kFloat).clone();
  };
  for (const char* name : {"hidden", "block_influence"})
    if (!f.contains(name))
      throw FormatError(msg("load_importance", "{}: missing tensor '{}': not an importance file?",
                            file, name));
  Importance imp;
  imp.hidden = get("hidden");
  imp.block_influence = get("block_influence");
  const int64_t L = imp.block_influence.size(0);
  imp.layers.resize(size_t(L));
  for (const std::string& name : f.names()) {
    if (name == "hidden" || name == "block_influence") continue;
    if (name == "layer_drop_loss") {
      imp.layer_drop_loss = get(name);
      continue;
    }
    int64_t i = -1;
    char what[16] = {0};
    if (std::sscanf(name.c_str(), "layers.%ld.%15s", &i, what) != 2 || i < 0 || i >= L)
      throw FormatError(msg("load_importance", "{}: unexpected tensor '{}' (the file has {} "
                            "layers by block_influence)", file, name, L));
    std::string w = what;
    LayerImportance& li = imp.layers[size_t(i)];
    at::Tensor* slot = w == "heads" ? &li.heads : w == "kv_groups" ? &li.kv_groups
                     : w == "ffn"   ? &li.ffn   : nullptr;
    if (!slot || name != fmt::format("layers.{}.{}", i, w))
      throw FormatError(msg("load_importance", "{}: unexpected tensor '{}'", file, name));
    *slot = get(name);
  }
  auto meta = f.metadata();
  imp.aggregation = meta.count("aggregation") ? meta["aggregation"] : "mean";
  if (meta.count("num_tokens")) imp.num_tokens = meta_int(meta, "num_tokens", path);
  if (meta.count("num_sequences")) imp.num_sequences = meta_int(meta, "num_sequences", path);
  return imp;
}

void check_importance_matches(const ModelConfig& c, const Importance& imp, const char* where,
                              const std::string& file, const std::string& model) {
  auto expect = [&](const at::Tensor& t, const std::string& name, int64_t n, const char* field) {
    if (!t.defined())
      throw ConfigError(msg(where, "{}: missing '{}' ({} entries expected from {} {})", file,
                            name, n, model, field));
    if (t.dim() != 1 || t.size(0) != n)
      throw ConfigError(msg(where, "{}: {} has shape {}, expected [{}] ({} {}): computed for "
                            "another model?", file, name, t.sizes().vec(), n, model, field));
  };
  if (imp.num_layers() != c.num_layers())
    throw ConfigError(msg(where, "{} has {} layers, expected {} ({} num_hidden_layers): computed "
                          "for another model?", file, imp.num_layers(), c.num_layers(), model));
  expect(imp.hidden, "hidden", c.hidden_size, "hidden_size");
  expect(imp.block_influence, "block_influence", c.num_layers(), "num_hidden_layers");
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    const LayerImportance& li = imp.layers[i];
    if (l.has_attention()) {
      expect(li.heads, fmt::format("layers.{}.heads", i), l.num_attention_heads,
             "num_attention_heads");
      if (li.kv_groups.defined())
        expect(li.kv_groups, fmt::format("layers.{}.kv_groups", i), l.num_key_value_heads,
               "num_key_value_heads");
    }
    if (l.has_ffn())
      expect(li.ffn, fmt::format("layers.{}.ffn", i), l.intermediate_size, "intermediate_size");
  }
}

// ---------------------------------------------------------------------------------------------
// Rankings

std::vector<int64_t> ranking(const at::Tensor& scores) {
  at::Tensor s = scores.detach().to(at::kDouble).contiguous().view({-1});
  const double* p = s.data_ptr<double>();
  std::vector<double> v(p, p + s.numel());
  for (double& x : v)
    if (std::isnan(x)) x = -INFINITY;  // NaN ranks last (a strict weak order for the sort)
  std::vector<int64_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return v[size_t(a)] > v[size_t(b)]; });
  return idx;
}

at::Tensor top_k_indices(const at::Tensor& scores, int64_t k) {
  std::vector<int64_t> order = ranking(scores);
  if (k < 0 || k > int64_t(order.size()))
    throw ConfigError(msg("prune", "cannot keep {} of {} channels", k, order.size()));
  order.resize(size_t(k));
  std::sort(order.begin(), order.end());
  return at::tensor(order, at::kLong);
}

}  // namespace ac
