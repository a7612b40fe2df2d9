#include "export/nemotron_h_export.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/json_io.h"
#include "io/companion_files.h"
#include "io/safetensors.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

void put(TensorMap& t, const std::string& name, const at::Tensor& w) {
  if (w.defined()) t[name] = w.to(at::kFloat).contiguous();
}

void put_mamba(TensorMap& t, const std::string& p, const Mamba2Weights& w) {
  put(t, p + "in_proj.weight", w.in_proj);
  put(t, p + "in_proj.bias", w.in_proj_bias);
  put(t, p + "conv1d.weight", w.conv1d);
  put(t, p + "conv1d.bias", w.conv1d_bias);
  put(t, p + "dt_bias", w.dt_bias);
  put(t, p + "A_log", w.A_log);
  put(t, p + "D", w.D);
  put(t, p + "norm.weight", w.norm);
  put(t, p + "out_proj.weight", w.out_proj);
  put(t, p + "out_proj.bias", w.out_proj_bias);
}

void put_moe(TensorMap& t, const std::string& p, const NemotronHMoeWeights& w) {
  put(t, p + "gate.weight", w.router);
  put(t, p + "gate.e_score_correction_bias", w.correction_bias);
  for (int64_t e = 0; e < w.up_proj.size(0); ++e) {
    put(t, fmt::format("{}experts.{}.up_proj.weight", p, e), w.up_proj[e]);
    put(t, fmt::format("{}experts.{}.down_proj.weight", p, e), w.down_proj[e]);
  }
  put(t, p + "fc1_latent_proj.weight", w.fc1_latent_proj);
  put(t, p + "fc2_latent_proj.weight", w.fc2_latent_proj);
  put(t, p + "shared_experts.up_proj.weight", w.shared_up);
  put(t, p + "shared_experts.down_proj.weight", w.shared_down);
}

}  // namespace

TensorMap nemotron_h_to_tensor_map(const NemotronHModel& m) {
  const ModelConfig& c = m.config;
  TensorMap t;
  put(t, "backbone.embeddings.weight", m.embeddings);
  int64_t j = 0;  // the kept layers' new index
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (!l.is_present()) continue;
    const NemotronHLayerWeights& w = m.layers[i];
    const std::string p = fmt::format("backbone.layers.{}.", j++);
    put(t, p + "norm.weight", w.norm);
    const std::string x = p + "mixer.";
    if (l.has_mamba()) {
      put_mamba(t, x, w.mamba);
    } else if (l.has_attention()) {
      put(t, x + "q_proj.weight", w.q_proj);
      put(t, x + "k_proj.weight", w.k_proj);
      put(t, x + "v_proj.weight", w.v_proj);
      put(t, x + "o_proj.weight", w.o_proj);
    } else if (l.has_ffn()) {
      put(t, x + "up_proj.weight", w.up_proj);
      put(t, x + "down_proj.weight", w.down_proj);
    } else {
      put_moe(t, x, w.moe);
    }
  }
  put(t, "backbone.norm_f.weight", m.norm_f);
  if (!c.tie_word_embeddings) put(t, "lm_head.weight", m.lm_head);
  return t;
}

void write_nemotron_h_files(const fs::path& dir, const NemotronHModel& m,
                            const fs::path& tokenizer_from) {
  ModelConfig c = m.config;
  c.validate("save_nemotron_h_checkpoint");
  c.torch_dtype = "float32";  // the weights written are fp32
  const nlohmann::json config = nemotron_h_config_to_hf_json(c);
  const TensorMap tensors = nemotron_h_to_tensor_map(m);
  write_json_file(dir / "config.json", config);
  save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  if (!tokenizer_from.empty())
    copy_companion_files(tokenizer_from, dir, "save_nemotron_h_checkpoint");
}

void save_nemotron_h_checkpoint(const fs::path& dir, const NemotronHModel& m,
                                const fs::path& tokenizer_from) {
  StagingDir staging(dir);
  write_nemotron_h_files(staging.path(), m, tokenizer_from);
  staging.commit();
}

}  // namespace ac
