#include "hardware/engine_calibration.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/json_io.h"

namespace ac {

using json = nlohmann::json;

std::array<double, EngineMemoryModel::kTerms> EngineMemoryModel::features(const ModelConfig& c,
                                                                           int64_t n_ctx) const {
  const double u = double(std::min(ubatch_tokens, n_ctx));
  double F = 0, Q = 0, H = 0;
  for (const auto& l : c.layers) {
    if (l.has_ffn()) F = std::max(F, double(l.intermediate_size));
    if (l.has_attention()) {
      Q = std::max(Q, double(l.num_attention_heads * l.head_dim));
      H = std::max(H, double(l.num_attention_heads));
    }
  }
  return {u * 4 * double(c.hidden_size), u * 4 * F, u * 4 * Q, u * 4 * H * double(n_ctx), 1.0};
}

double EngineMemoryModel::activation_bytes(const ModelConfig& c, int64_t n_ctx,
                                           int64_t sequences) const {
  const double u = double(std::min(ubatch_tokens, n_ctx)), V = double(c.vocab_size);
  const auto x = features(c, n_ctx);
  double workspace = 0;
  for (int k = 0; k < kTerms; ++k) workspace += coefficients[size_t(k)] * x[size_t(k)];
  return 4.0 * V * double(sequences) + u * 4.0 * V + workspace;
}

void EngineMemoryModel::fit(const std::vector<ModelConfig>& models, int64_t n_ctx,
                            const std::vector<double>& compute_bytes) {
  if (models.empty() || models.size() != compute_bytes.size())
    throw ConfigError(msg("calibrate", "memory fit: {} models, {} compute buffers", models.size(),
                          compute_bytes.size()));
  // Normal equations with a small ridge (features that do not vary, e.g. one hidden size for
  // every model, get a zero coefficient rather than a singular system).
  constexpr int n = kTerms;
  double A[n][n + 1] = {};
  for (size_t i = 0; i < models.size(); ++i) {
    const double u = double(std::min(ubatch_tokens, n_ctx));
    const double y = compute_bytes[i] - u * 4.0 * double(models[i].vocab_size);
    const auto x = features(models[i], n_ctx);
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) A[r][k] += x[size_t(r)] * x[size_t(k)];
      A[r][n] += x[size_t(r)] * y;
    }
  }
  for (int r = 0; r < n; ++r) A[r][r] += 1e-9 * (A[r][r] + 1.0);
  for (int c = 0; c < n; ++c) {  // Gauss-Jordan with partial pivoting
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(A[r][c]) > std::fabs(A[p][c])) p = r;
    for (int k = 0; k <= n; ++k) std::swap(A[c][k], A[p][k]);
    for (int r = 0; r < n; ++r) {
      if (r == c || A[c][c] == 0) continue;
      const double f = A[r][c] / A[c][c];
      for (int k = c; k <= n; ++k) A[r][k] -= f * A[c][k];
    }
  }
  for (int k = 0; k < n; ++k) coefficients[size_t(k)] = A[k][k] != 0 ? A[k][n] / A[k][k] : 0.0;
}

json EngineCalibration::to_json() const {
  return {{"engine", engine},
          {"release", release},
          {"threads", threads},
          {"weight_dtype", weight_dtype},
          {"kv_cache_dtype", kv_cache_dtype},
          {"prompt_tokens", prompt_tokens},
          {"output_tokens", output_tokens},
          {"correction", correction.to_json()},
          {"memory", {{"model", "output + compute = V*4*sequences + u*V*4 + u*4*(a*D + b*F + "
                                "c*Q + d*H*n_ctx) + fixed_bytes, u = min(ubatch_tokens, n_ctx) "
                                "(hardware/engine_calibration.h)"},
                      {"ubatch_tokens", memory.ubatch_tokens},
                      {"coefficients", memory.coefficients},
                      {"fit_mape_percent", memory.mape_percent}}},
          {"weights_repacked_into", weights_repacked_into},
          {"elapsed_s", elapsed_s}};
}

EngineCalibration EngineCalibration::from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_profile", "{}: expected an object, found {}", where, j.type_name()));
  EngineCalibration c;
  c.engine = json_get<std::string>(j, "engine", where);
  c.release = json_get_or<std::string>(j, "release", "", where);
  c.threads = json_get<int>(j, "threads", where);
  if (c.threads < 1)
    throw FormatError(msg("load_profile", "{}.threads: expected a positive integer, found {}",
                          where, c.threads));
  c.weight_dtype = json_get<std::string>(j, "weight_dtype", where);
  c.kv_cache_dtype = json_get<std::string>(j, "kv_cache_dtype", where);
  c.prompt_tokens = json_get_or<int64_t>(j, "prompt_tokens", 0, where);
  c.output_tokens = json_get_or<int64_t>(j, "output_tokens", 0, where);
  c.weights_repacked_into = json_get_or<std::string>(j, "weights_repacked_into", "", where);
  if (!j.contains("correction"))
    throw FormatError(msg("load_profile", "{}: missing field 'correction'", where));
  c.correction = LatencyCorrection::from_json(j.at("correction"), where + ".correction");
  if (!c.correction.fitted)
    throw FormatError(msg("load_profile", "{}.correction: expected a fitted correction", where));
  if (!j.contains("memory") || !j.at("memory").is_object())
    throw FormatError(msg("load_profile", "{}: missing object 'memory'", where));
  const json& m = j.at("memory");
  const std::string mw = where + ".memory";
  c.memory.ubatch_tokens = json_get<int64_t>(m, "ubatch_tokens", mw);
  c.memory.mape_percent = json_get_or<double>(m, "fit_mape_percent", 0.0, mw);
  if (!m.contains("coefficients") || !m.at("coefficients").is_array() ||
      m.at("coefficients").size() != size_t(EngineMemoryModel::kTerms))
    throw FormatError(msg("load_profile", "{}.coefficients: expected an array of {} numbers, "
                          "found {}", mw, EngineMemoryModel::kTerms,
                          m.value("coefficients", json()).dump().substr(0, 200)));
  for (int k = 0; k < EngineMemoryModel::kTerms; ++k) {
    const json& v = m.at("coefficients")[size_t(k)];
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw FormatError(msg("load_profile", "{}.coefficients[{}]: expected a finite number, "
                            "found {}", mw, k, v.dump()));
    c.memory.coefficients[size_t(k)] = v.get<double>();
  }
  if (c.memory.ubatch_tokens < 1)
    throw FormatError(msg("load_profile", "{}.ubatch_tokens: expected >= 1, found {}", mw,
                          c.memory.ubatch_tokens));
  c.elapsed_s = json_get_or<double>(j, "elapsed_s", 0.0, where);
  return c;
}

}  // namespace ac
