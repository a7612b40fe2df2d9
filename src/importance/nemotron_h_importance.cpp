#include "importance/nemotron_h_importance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <map>

#include "common/error.h"
#include "importance/importance_file.h"
#include "io/safetensors.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

// Running fp32 sums of one layer (the scores before the division by counts).
struct LayerSums {
  at::Tensor mamba;       // [nh * P] sum of |g|
  at::Tensor heads;       // [H] sum of per-head L2 norms
  at::Tensor ffn;         // [F]
  at::Tensor slots;       // [E] token-slots routed to each expert
  at::Tensor norms;       // [E] sum of ||weighted output||_2
  at::Tensor expert_act;  // [E, Fe]
  at::Tensor shared;      // [Fs]
  int64_t all_slots = 0;
};

struct Sums : NemotronHObserver {
  std::vector<LayerSums> layers;
  at::Tensor influence;  // [L]
  std::vector<int64_t> attention_heads;  // H of each layer (0 elsewhere)

  static at::Tensor abs_sum(const at::Tensor& t) {  // [..., C] -> [C]
    return t.to(at::kFloat).abs().reshape({-1, t.size(-1)}).sum(0).cpu();
  }
  void on_block(int64_t l, const at::Tensor& in, const at::Tensor& out) override {
    const at::Tensor cos = at::cosine_similarity(in, out, -1, 1e-8);  // [B, T]
    influence[l] += (1.0 - cos).sum().to(at::kFloat).cpu();
  }
  void on_mamba(int64_t l, const at::Tensor& g) override { layers[size_t(l)].mamba += abs_sum(g); }
  void on_attention(int64_t l, const at::Tensor& a) override {
    const int64_t H = attention_heads[size_t(l)];
    const at::Tensor per_head = a.reshape({a.size(0) * a.size(1), H, -1});  // [N, H, Hd]
    layers[size_t(l)].heads += at::norm(per_head, 2, {-1}).sum(0).cpu();
  }
  void on_mlp(int64_t l, const at::Tensor& act) override { layers[size_t(l)].ffn += abs_sum(act); }
  void on_routing(int64_t l, const Routing& r) override {
    layers[size_t(l)].all_slots += r.experts.numel();
  }
  void on_expert(int64_t l, int64_t e, const at::Tensor& act, const at::Tensor& out) override {
    LayerSums& s = layers[size_t(l)];
    s.slots[e] += double(act.size(0));
    s.norms[e] += at::norm(out.to(at::kFloat), 2, {-1}).sum().cpu();
    s.expert_act[e] += abs_sum(act);
  }
  void on_shared_expert(int64_t l, const at::Tensor& act) override {
    layers[size_t(l)].shared += abs_sum(act);
  }
};

at::Tensor check_batch(const at::Tensor& b, size_t i) {
  if (!b.defined() || b.dim() != 2 || b.numel() == 0 || at::isFloatingType(b.scalar_type()))
    throw ConfigError(fmt::format("[nemotron_h_importance] batch {}: expected non-empty integer "
                                  "tokens [B, T], found {} {}", i,
                                  b.defined() ? c10::toString(b.scalar_type()) : "none",
                                  b.defined() ? b.sizes().vec() : std::vector<int64_t>{}));
  return b.to(at::kLong);
}

LayerSums zero_sums(const LayerConfig& l) {
  const auto z = [](std::vector<int64_t> shape) { return at::zeros(shape, at::kFloat); };
  LayerSums s;
  if (l.has_mamba()) s.mamba = z({l.mamba->d_inner()});
  if (l.has_attention()) s.heads = z({l.num_attention_heads});
  if (l.has_ffn()) s.ffn = z({l.intermediate_size});
  if (l.has_moe()) {
    const MoeConfig& m = *l.moe;
    s.slots = z({m.num_experts});
    s.norms = z({m.num_experts});
    s.expert_act = z({m.num_experts, m.moe_intermediate_size});
    if (m.shared_expert_intermediate_size > 0) s.shared = z({m.shared_expert_intermediate_size});
  }
  return s;
}

NemotronHLayerImportance finish(const LayerConfig& l, const LayerSums& s, double tokens) {
  NemotronHLayerImportance li;
  if (l.has_mamba()) {
    const Mamba2Config& m = *l.mamba;
    li.mamba_channels = (s.mamba / tokens).view({m.mamba_num_heads, m.mamba_head_dim});
    li.mamba_heads = li.mamba_channels.norm(2, {1});
    li.mamba_head_dim = li.mamba_channels.norm(2, {0});
  }
  if (l.has_attention()) {
    li.heads = s.heads / tokens;
    const int64_t G = l.num_key_value_heads;
    li.kv_groups = li.heads.view({G, l.num_attention_heads / G}).sum(1);
  }
  if (l.has_ffn()) li.ffn = s.ffn / tokens;
  if (l.has_moe()) {
    const double all = double(std::max<int64_t>(s.all_slots, 1));
    const at::Tensor count = s.slots.clamp_min(1.0);  // a never-routed expert's sums are 0
    li.moe.routing_share = s.slots / all;
    li.moe.output_norm = s.norms / count;
    li.moe.experts = s.norms / all;
    li.moe.expert_ffn = s.expert_act / count.unsqueeze(1);
    if (s.shared.defined()) li.shared_ffn = s.shared / tokens;
  }
  return li;
}

}  // namespace

NemotronHImportance compute_nemotron_h_importance(const NemotronHModel& m,
                                                  const std::vector<at::Tensor>& batches) {
  if (batches.empty()) throw ConfigError("[nemotron_h_importance] no calibration batches");
  at::NoGradGuard no_grad;
  const ModelConfig& c = m.config;
  Sums sums;
  sums.influence = at::zeros({c.num_layers()}, at::kFloat);
  for (const LayerConfig& l : c.layers) {
    sums.layers.push_back(zero_sums(l));
    sums.attention_heads.push_back(l.has_attention() ? l.num_attention_heads : 0);
  }
  NemotronHForwardOptions opt;
  opt.observer = &sums;
  NemotronHImportance imp;
  for (size_t i = 0; i < batches.size(); ++i) {
    const at::Tensor tokens = check_batch(batches[i], i);
    m.forward(tokens, opt);
    imp.num_tokens += tokens.numel();
  }
  const double tokens = double(std::max<int64_t>(imp.num_tokens, 1));
  for (size_t i = 0; i < c.layers.size(); ++i)
    imp.layers.push_back(finish(c.layers[i], sums.layers[i], tokens));
  imp.block_influence = sums.influence / tokens;
  return imp;
}

namespace {

const char* kFormat = "autocompress.nemotron_h_importance.v1";

// Each score's name in the file, its place in a layer and its rank.
struct Part {
  const char* name;
  at::Tensor NemotronHLayerImportance::*member;
  at::Tensor MoeLayerImportance::*moe_member;
  int64_t rank;
};
const Part kParts[] = {
    {"mamba_channels", &NemotronHLayerImportance::mamba_channels, nullptr, 2},
    {"mamba_heads", &NemotronHLayerImportance::mamba_heads, nullptr, 1},
    {"mamba_head_dim", &NemotronHLayerImportance::mamba_head_dim, nullptr, 1},
    {"heads", &NemotronHLayerImportance::heads, nullptr, 1},
    {"kv_groups", &NemotronHLayerImportance::kv_groups, nullptr, 1},
    {"ffn", &NemotronHLayerImportance::ffn, nullptr, 1},
    {"shared_ffn", &NemotronHLayerImportance::shared_ffn, nullptr, 1},
    {"routing_share", nullptr, &MoeLayerImportance::routing_share, 1},
    {"output_norm", nullptr, &MoeLayerImportance::output_norm, 1},
    {"experts", nullptr, &MoeLayerImportance::experts, 1},
    {"expert_ffn", nullptr, &MoeLayerImportance::expert_ffn, 2}};

at::Tensor& slot(NemotronHLayerImportance& li, const Part& p) {
  return p.member ? li.*p.member : li.moe.*p.moe_member;
}


}  // namespace

void save_nemotron_h_importance(const fs::path& path, const NemotronHImportance& imp) {
  TensorMap t;
  t["block_influence"] = imp.block_influence.to(at::kFloat).contiguous();
  for (size_t i = 0; i < imp.layers.size(); ++i) {
    NemotronHLayerImportance li = imp.layers[i];
    for (const Part& p : kParts)
      if (slot(li, p).defined())
        t[fmt::format("layers.{}.{}", i, p.name)] = slot(li, p).to(at::kFloat).contiguous();
  }
  save_safetensors(path, t,
                   importance_file_metadata(kFormat, int64_t(imp.layers.size()), imp.num_tokens));
}

NemotronHImportance load_nemotron_h_importance(const fs::path& path) {
  SafetensorsFile f(path);
  const std::string file = path.string();
  const ImportanceFileHeader h = read_importance_file_header(f, kFormat, "load_nemotron_h_importance",
                                                              "a Nemotron-H importance file");
  NemotronHImportance imp;
  imp.layers.resize(size_t(h.num_layers));
  imp.num_tokens = h.num_tokens;
  for (const std::string& name : f.names()) {
    if (name == "block_influence") {
      imp.block_influence = f.get(name).to(at::kFloat).clone();
      continue;
    }
    int64_t i = -1;
    char part[32] = {0};
    const Part* p = nullptr;
    if (std::sscanf(name.c_str(), "layers.%ld.%31s", &i, part) == 2 && i >= 0 &&
        i < imp.num_layers() && name == fmt::format("layers.{}.{}", i, part))
      for (const Part& q : kParts)
        if (std::string(q.name) == part) p = &q;
    if (!p)
      throw FormatError(fmt::format("[load_nemotron_h_importance] {}: unexpected tensor '{}' "
                                    "(the file has {} layers)", file, name, imp.num_layers()));
    const at::Tensor t = f.get(name);
    if (t.dim() != p->rank || !at::isFloatingType(t.scalar_type()))
      throw FormatError(fmt::format("[load_nemotron_h_importance] {}: tensor '{}' must be a "
                                    "{}-D float tensor, found {} {}", file, name, p->rank,
                                    c10::toString(t.scalar_type()), t.sizes().vec()));
    slot(imp.layers[size_t(i)], *p) = t.to(at::kFloat).clone();
  }
  if (!imp.block_influence.defined() || imp.block_influence.dim() != 1 ||
      imp.block_influence.size(0) != imp.num_layers())
    throw FormatError(fmt::format("[load_nemotron_h_importance] {}: tensor 'block_influence' "
                                  "must have shape [{}] (num_layers)", file, imp.num_layers()));
  return imp;
}

namespace {

std::vector<int64_t> shape_of(const at::Tensor& t) {
  return t.defined() ? t.sizes().vec() : std::vector<int64_t>{};
}

}  // namespace

void check_nemotron_h_importance_matches(const ModelConfig& c, const NemotronHImportance& imp,
                                         const char* where, const std::string& file,
                                         const std::string& model) {
  auto expect_shape = [&](const std::string& name, const at::Tensor& t, std::vector<int64_t> want,
                          const char* fields) {
    if (!t.defined())
      throw ConfigError(msg(where, "{}: missing tensor '{}' (shape {} expected from {} {}): "
                            "computed for another model?", file, name, want, model, fields));
    if (shape_of(t) != want)
      throw ConfigError(msg(where, "{}: tensor '{}' has shape {}, expected {} ({} {}): computed "
                            "for another model?", file, name, shape_of(t), want, model, fields));
  };
  auto expect = [&](size_t i, const char* name, const at::Tensor& t, std::vector<int64_t> want,
                    const char* fields) {
    expect_shape(fmt::format("layers.{}.{}", i, name), t, std::move(want), fields);
  };
  if (imp.num_layers() != c.num_layers())
    throw ConfigError(msg(where, "{} has {} layers, expected {} ({} num_hidden_layers, the "
                          "layer pattern's length): computed for another model?", file,
                          imp.num_layers(), c.num_layers(), model));
  expect_shape("block_influence", imp.block_influence, {c.num_layers()}, "num_hidden_layers");
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    const NemotronHLayerImportance& li = imp.layers[i];
    if (l.has_mamba()) {
      const Mamba2Config& m = *l.mamba;
      expect(i, "mamba_channels", li.mamba_channels, {m.mamba_num_heads, m.mamba_head_dim},
             "mamba_num_heads, mamba_head_dim");
      expect(i, "mamba_heads", li.mamba_heads, {m.mamba_num_heads}, "mamba_num_heads");
      expect(i, "mamba_head_dim", li.mamba_head_dim, {m.mamba_head_dim}, "mamba_head_dim");
    }
    if (l.has_attention()) {
      expect(i, "heads", li.heads, {l.num_attention_heads}, "num_attention_heads");
      expect(i, "kv_groups", li.kv_groups, {l.num_key_value_heads}, "num_key_value_heads");
    }
    if (l.has_ffn()) expect(i, "ffn", li.ffn, {l.intermediate_size}, "intermediate_size");
    if (l.has_moe()) {
      const MoeConfig& m = *l.moe;
      expect(i, "experts", li.moe.experts, {m.num_experts}, "n_routed_experts");
      expect(i, "expert_ffn", li.moe.expert_ffn, {m.num_experts, m.moe_intermediate_size},
             "n_routed_experts, moe_intermediate_size");
      if (m.shared_expert_intermediate_size > 0)
        expect(i, "shared_ffn", li.shared_ffn, {m.shared_expert_intermediate_size},
               "moe_shared_expert_intermediate_size");
    }
  }
}

namespace {

// The share of `scores` (1-D, >= 0) that its `keep` largest entries hold; each entry alike when
// they sum to 0.
double kept_share(const at::Tensor& scores, int64_t keep) {
  const int64_t n = scores.numel();
  if (n == 0 || keep >= n) return 1.0;
  if (keep <= 0) return 0.0;
  const at::Tensor s = scores.to(at::kDouble).clamp_min(0);
  const double total = s.sum().item<double>();
  if (total <= 0) return double(keep) / double(n);
  return std::get<0>(s.topk(keep)).sum().item<double>() / total;
}

double kept_of_layer(const NemotronHLayerImportance& li, const LayerConfig& p,
                     const LayerConfig& l) {
  if (!l.is_present()) return 0.0;
  if (l == p) return 1.0;  // nothing of this layer changed (its scores may be unset)
  if (p.has_mamba()) {
    const Mamba2Config& pm = *p.mamba;
    const Mamba2Config& m = *l.mamba;
    double kept = 1.0;
    if (m.mamba_num_heads < pm.mamba_num_heads) {
      const int64_t per = pm.mamba_num_heads / pm.n_groups, keep = m.mamba_num_heads / pm.n_groups;
      const at::Tensor groups = li.mamba_heads.to(at::kDouble).clamp_min(0).view({pm.n_groups, per});
      double total = groups.sum().item<double>(), held = 0;
      for (int64_t g = 0; g < pm.n_groups; ++g)
        held += total > 0 ? std::get<0>(groups[g].topk(keep)).sum().item<double>() : 0;
      kept *= total > 0 ? held / total : double(m.mamba_num_heads) / double(pm.mamba_num_heads);
    }
    if (m.mamba_head_dim < pm.mamba_head_dim)
      kept *= kept_share(li.mamba_head_dim, m.mamba_head_dim);
    return kept;
  }
  if (p.has_attention()) return kept_share(li.heads, l.num_attention_heads);
  if (p.has_ffn()) return kept_share(li.ffn, l.intermediate_size);
  if (p.has_moe()) {
    const MoeConfig& pe = *p.moe;
    const MoeConfig& e = *l.moe;
    const at::Tensor s = li.moe.experts.to(at::kDouble).clamp_min(0);
    const double total = s.sum().item<double>();
    const at::Tensor order = std::get<1>(s.topk(e.num_experts));
    double held = 0;
    for (int64_t j = 0; j < e.num_experts; ++j) {
      const int64_t x = order[j].item<int64_t>();
      const double w = total > 0 ? s[x].item<double>() : 1.0;
      held += w * kept_share(li.moe.expert_ffn[x], e.moe_intermediate_size);
    }
    double kept = held / (total > 0 ? total : double(pe.num_experts));
    if (e.num_experts_per_tok < pe.num_experts_per_tok)
      kept *= double(e.num_experts_per_tok) / double(pe.num_experts_per_tok);
    if (li.shared_ffn.defined() && e.shared_expert_intermediate_size < pe.shared_expert_intermediate_size)
      kept *= kept_share(li.shared_ffn, e.shared_expert_intermediate_size);
    return kept;
  }
  return 1.0;
}

}  // namespace

double nemotron_h_importance_loss(const NemotronHImportance& imp, const ModelConfig& parent,
                                  const ModelConfig& c) {
  const int64_t L = parent.num_layers();
  if (c.num_layers() != L || imp.num_layers() != L)
    throw ConfigError(fmt::format("[importance] the importance has {} layers, the parent {}, the "
                                  "architecture {}: expected one count", imp.num_layers(), L,
                                  c.num_layers()));
  std::vector<double> w(size_t(L), 0.0);
  double total = 0;
  int64_t present = 0;
  for (int64_t i = 0; i < L; ++i)
    if (parent.layers[size_t(i)].is_present()) {
      w[size_t(i)] = std::max(0.0, imp.block_influence[i].item<double>());
      total += w[size_t(i)];
      ++present;
    }
  double lost = 0;
  for (int64_t i = 0; i < L; ++i) {
    const LayerConfig& p = parent.layers[size_t(i)];
    if (!p.is_present()) continue;
    const LayerConfig& l = c.layers[size_t(i)];
    if (l.is_present() && nemotron_h_layer_char(l, i) != nemotron_h_layer_char(p, i))
      throw ConfigError(fmt::format("[importance] layer {}: kind '{}' against the parent's '{}'",
                                    i, nemotron_h_layer_char(l, i), nemotron_h_layer_char(p, i)));
    const double weight = total > 0 ? w[size_t(i)] / total : 1.0 / double(present);
    lost += weight * (1.0 - kept_of_layer(imp.layers[size_t(i)], p, l));
  }
  return lost;
}

}  // namespace ac
