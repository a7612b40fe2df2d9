#include "importance/moe_importance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <map>

#include "common/error.h"
#include "importance/importance_file.h"
#include "io/safetensors.h"

namespace ac {

namespace {

const char* kFormat = "autocompress.moe_importance.v1";
const char* const kParts[] = {"routing_share", "output_norm", "experts", "expert_ffn"};

// Running fp32 sums of one sparse layer.
struct LayerSums {
  at::Tensor slots;     // [E] token-slots routed to each expert
  at::Tensor norms;     // [E] sum of ||weighted output||_2 over those slots
  at::Tensor act;       // [E, Fe] sum of |activation| over the rows routed to each expert
  int64_t all_slots = 0;
};

struct Sums : MoeObserver {
  std::vector<LayerSums> layers;

  void on_routing(int64_t layer, const Routing& r) override {
    layers[size_t(layer)].all_slots += r.experts.numel();
  }
  void on_expert(int64_t layer, int64_t e, const at::Tensor& act, const at::Tensor& out) override {
    LayerSums& s = layers[size_t(layer)];
    s.slots[e] += double(act.size(0));
    s.norms[e] += at::norm(out.to(at::kFloat), 2, {-1}).sum().cpu();
    s.act[e] += act.to(at::kFloat).abs().sum(0).cpu();
  }
};

at::Tensor check_batch(const at::Tensor& b, size_t i) {
  if (!b.defined() || b.dim() != 2 || b.numel() == 0 || at::isFloatingType(b.scalar_type()))
    throw ConfigError(fmt::format("[moe_importance] batch {}: expected non-empty integer tokens "
                                  "[B, T], found {} {}", i,
                                  b.defined() ? c10::toString(b.scalar_type()) : "none",
                                  b.defined() ? b.sizes().vec() : std::vector<int64_t>{}));
  return b.to(at::kLong);
}

MoeLayerImportance finish(const LayerSums& s) {
  MoeLayerImportance li;
  const double all = double(std::max<int64_t>(s.all_slots, 1));
  const at::Tensor count = s.slots.clamp_min(1.0);  // a never-routed expert's sums are 0
  li.routing_share = s.slots / all;
  li.output_norm = s.norms / count;
  li.experts = s.norms / all;
  li.expert_ffn = s.act / count.unsqueeze(1);
  return li;
}

}  // namespace

MoeImportance compute_moe_importance(const MoeModel& m, const std::vector<at::Tensor>& batches) {
  if (batches.empty()) throw ConfigError("[moe_importance] no calibration batches");
  at::NoGradGuard no_grad;
  const ModelConfig& c = m.config;
  Sums sums;
  sums.layers.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& moe = *c.layers[i].moe;
    sums.layers[i].slots = at::zeros({moe.num_experts}, at::kFloat);
    sums.layers[i].norms = at::zeros({moe.num_experts}, at::kFloat);
    sums.layers[i].act = at::zeros({moe.num_experts, moe.moe_intermediate_size}, at::kFloat);
  }
  MoeImportance imp;
  MoeForwardOptions opt;
  opt.observer = &sums;
  for (size_t i = 0; i < batches.size(); ++i) {
    const at::Tensor tokens = check_batch(batches[i], i);
    m.forward(tokens, opt);
    imp.num_tokens += tokens.numel();
  }
  imp.layers.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].has_moe()) imp.layers[i] = finish(sums.layers[i]);
  return imp;
}

void save_moe_importance(const fs::path& path, const MoeImportance& imp) {
  TensorMap t;
  for (size_t i = 0; i < imp.layers.size(); ++i) {
    const MoeLayerImportance& li = imp.layers[i];
    if (!li.experts.defined()) continue;
    const at::Tensor* parts[] = {&li.routing_share, &li.output_norm, &li.experts, &li.expert_ffn};
    for (size_t j = 0; j < 4; ++j)
      t[fmt::format("layers.{}.{}", i, kParts[j])] = parts[j]->to(at::kFloat).contiguous();
  }
  save_safetensors(path, t,
                   importance_file_metadata(kFormat, int64_t(imp.layers.size()), imp.num_tokens));
}

namespace {

// The tensor `name` as one of layer `li`'s four parts; FormatError on anything else.
void take_part(const SafetensorsFile& f, const std::string& name, const std::string& file,
               MoeLayerImportance& li, const std::string& part) {
  at::Tensor* slot = part == "routing_share" ? &li.routing_share
                     : part == "output_norm" ? &li.output_norm
                     : part == "experts"     ? &li.experts
                     : part == "expert_ffn"  ? &li.expert_ffn
                                             : nullptr;
  if (!slot) throw FormatError(fmt::format("[load_moe_importance] {}: unexpected tensor '{}'",
                                           file, name));
  at::Tensor t = f.get(name);
  const int64_t rank = part == "expert_ffn" ? 2 : 1;
  if (t.dim() != rank || !at::isFloatingType(t.scalar_type()))
    throw FormatError(fmt::format("[load_moe_importance] {}: tensor '{}' must be a {}-D float "
                                  "tensor, found {} {}", file, name, rank,
                                  c10::toString(t.scalar_type()), t.sizes().vec()));
  *slot = t.to(at::kFloat).clone();
}

void check_layer(const MoeLayerImportance& li, size_t i, const std::string& file) {
  const at::Tensor* parts[] = {&li.routing_share, &li.output_norm, &li.experts, &li.expert_ffn};
  for (size_t j = 0; j < 4; ++j)
    if (!parts[j]->defined())
      throw FormatError(fmt::format("[load_moe_importance] {}: layer {} lacks tensor "
                                    "'layers.{}.{}'", file, i, i, kParts[j]));
  const int64_t E = li.experts.size(0);
  for (size_t j = 0; j < 4; ++j)
    if (parts[j]->size(0) != E)
      throw FormatError(fmt::format("[load_moe_importance] {}: tensor 'layers.{}.{}' has shape "
                                    "{}, expected {} experts as 'layers.{}.experts'", file, i,
                                    kParts[j], parts[j]->sizes().vec(), E, i));
}

}  // namespace

MoeImportance load_moe_importance(const fs::path& path) {
  SafetensorsFile f(path);
  const std::string file = path.string();
  const ImportanceFileHeader h = read_importance_file_header(f, kFormat, "load_moe_importance",
                                                              "an MoE importance file");
  MoeImportance imp;
  imp.layers.resize(size_t(h.num_layers));
  imp.num_tokens = h.num_tokens;
  for (const std::string& name : f.names()) {
    int64_t i = -1;
    char part[16] = {0};
    if (std::sscanf(name.c_str(), "layers.%ld.%15s", &i, part) != 2 || i < 0 ||
        i >= imp.num_layers() || name != fmt::format("layers.{}.{}", i, part))
      throw FormatError(fmt::format("[load_moe_importance] {}: unexpected tensor '{}' (the file "
                                    "has {} layers)", file, name, imp.num_layers()));
    take_part(f, name, file, imp.layers[size_t(i)], part);
  }
  for (size_t i = 0; i < imp.layers.size(); ++i) {
    const MoeLayerImportance& li = imp.layers[i];
    if (li.routing_share.defined() || li.output_norm.defined() || li.experts.defined() ||
        li.expert_ffn.defined())
      check_layer(li, i, file);
  }
  return imp;
}

void check_moe_importance_matches(const ModelConfig& c, const MoeImportance& imp,
                                  const char* where, const std::string& file,
                                  const std::string& model) {
  auto bad = [&](const std::string& what) {
    throw ConfigError(fmt::format("[{}] {}: {}: computed for another model?", where, file, what));
  };
  if (imp.num_layers() != c.num_layers())
    bad(fmt::format("{} layers, expected {} ({} num_hidden_layers)", imp.num_layers(),
                    c.num_layers(), model));
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& moe = *c.layers[i].moe;
    const MoeLayerImportance& li = imp.layers[i];
    const std::vector<int64_t> experts{moe.num_experts};
    const std::vector<int64_t> ffn{moe.num_experts, moe.moe_intermediate_size};
    if (!li.experts.defined() || li.experts.sizes().vec() != experts)
      bad(fmt::format("layers.{}.experts has shape {}, expected {} ({} num_experts)", i,
                      li.experts.defined() ? li.experts.sizes().vec() : std::vector<int64_t>{},
                      experts, model));
    const std::vector<int64_t> found =
        li.expert_ffn.defined() ? li.expert_ffn.sizes().vec() : std::vector<int64_t>{};
    if (found != ffn)
      bad(fmt::format("layers.{}.expert_ffn has shape {}, expected {} ({} "
                      "num_experts, moe_intermediate_size)", i, found, ffn, model));
  }
}

}  // namespace ac
