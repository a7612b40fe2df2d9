// `autocompress_bench widths`: where the cost model's decode step (TPOT) goes wrong, width by
// width. For each hidden size D on the search's grid (multiples of --step from --min-width to
// the base's), the base's layers at width D are:
//   measured   the real decode step of the native engine (measure_native, interleaved rounds
//              over every width, p10 of the steps);
//   in forward the same decode step written out op for op (hardware/in_forward.h
//              measure_in_forward, as a calibrated profile times it: the positions of a
//              request, interleaved rounds), each op timed alone inside the step, p10 per
//              class: gemm (projections), attention, elementwise (norms, SwiGLU, residual adds,
//              embedding), lm_head, and what no op's timer saw (rest);
//   tables     the profile's table sums of the same classes (calibration.h correction_features),
//              and its prediction with the fitted correction;
//   self       the measurement against itself: the width's even rounds over its odd ones - 1,
//              percent (validate.h measurement_repeatability of that width alone), how far
//              this machine repeats the same step within the same minutes.
// Prints one JSON line per width and a table. The rows are docs/benchmarks.md's per-width table.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "common/gemm.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/in_forward.h"
#include "hardware/cost_model.h"
#include "hardware/measure.h"
#include "hardware/timer.h"
#include "hardware/validate.h"
#include "model/llama.h"

namespace ac {

int width_probe(int argc, char** argv) {
  CLI::App app{"autocompress_bench widths"};
  std::string profile_path, base_path;
  int64_t min_width = 0, step = 8;
  int rounds = 5, steps = 0;
  app.add_option("--profile", profile_path, "profile.json of this machine")->required();
  app.add_option("--base", base_path, "architecture (default: stories15M's shape)");
  app.add_option("--min-width", min_width, "smallest hidden size (default: 0.4 x the base's)");
  app.add_option("--step", step, "hidden-size step");
  app.add_option("--rounds", rounds, "interleaved rounds over every width");
  app.add_option("--steps", steps, "op-by-op decode steps per width and round (0: the workload's output tokens)");
  CLI11_PARSE(app, argc, argv);
  init_torch_threads();
  Profile profile = load_profile(profile_path);
  use_profile_gemm_backend(profile);
  check_profile_is_this_machine(profile);
  const ModelConfig base = base_path.empty() ? stories15m_shape() : read_architecture(base_path);
  if (min_width <= 0) min_width = (base.hidden_size * 2 / 5 + step - 1) / step * step;
  const Workload wl = profile.workload;
  const Scenario scen = calibration_scenario(wl, "cpu");

  // The op-by-op step (below) at the same widths, as a calibrated profile measures it.
  InForwardOptions io;
  io.rounds = rounds;
  io.steps = steps;
  io.weight_seed = 1000;
  std::vector<ModelConfig> archs;
  for (int64_t D = min_width; D <= base.hidden_size; D += step) {
    ModelConfig c = base;
    c.hidden_size = D;
    archs.push_back(c);
    io.hidden_sizes.push_back(D);
  }
  // The real decode step, interleaved over the widths.
  std::vector<Measurement> measured =
      measure_interleaved(archs, wl, rounds, /*weight_seed=*/1000, /*progress=*/true);
  const std::vector<InForwardRatio> split = measure_in_forward(profile, base, wl, io);
  Profile bare = profile;
  bare.in_forward.clear();

  fmt::print("{:>4} | {:>8} {:>6} {:>8} | {:>8} {:>8} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6}\n",
             "D", "measured", "self%", "in fwd", "tables", "pred", "gemm", "table", "attn", "table",
             "elem", "table", "head", "table", "rest");
  for (size_t i = 0; i < archs.size(); ++i) {
    const PhaseFeatures dec = correction_features(bare, archs[i], wl).second;  // the tables as timed
    const CostEstimate e = predict(archs[i], scen, &profile);
    const InForwardRatio& f = split[i];
    const double table_sum = dec.x[0] + dec.x[1] + dec.x[2] + dec.x[3] + dec.offset;
    const double self = measurement_repeatability({measured[i]}).drift_tpot;
    nlohmann::json j = {{"hidden_size", archs[i].hidden_size},
                        {"measured_tpot_ms", measured[i].tpot_ms},
                        {"measured_self_percent", self},
                        {"in_forward", f.to_json()},
                        {"tables_ms", {{"total", table_sum}, {"step", dec.offset}}},
                        {"predicted_tpot_ms", e.tpot_ms}};
    std::cerr << j.dump() << "\n";
    fmt::print("{:>4} | {:>8.3f} {:>+6.1f} {:>8.3f} | {:>8.3f} {:>8.3f} | {:>6.3f} {:>6.3f} | {:>6.3f} {:>6.3f} | "
               "{:>6.3f} {:>6.3f} | {:>6.3f} {:>6.3f} | {:>6.3f}\n",
               archs[i].hidden_size, measured[i].tpot_ms, self, f.total_ms, table_sum, e.tpot_ms,
               f.in_forward_ms[0], f.table_ms[0], f.in_forward_ms[1], f.table_ms[1],
               f.in_forward_ms[2], f.table_ms[2], f.in_forward_ms[3], f.table_ms[3], f.rest_ms);
  }
  return 0;
}

// `autocompress_bench agree --profile A --profile B ...`: how far apart profiles of the same
// machine predict the base and `--count` random prunes of it (validate's draw, --seed): per
// profile pair, the largest relative TPOT and TTFT difference over the architectures.
int profile_agreement(int argc, char** argv) {
  CLI::App app{"autocompress_bench agree"};
  std::vector<std::string> paths;
  int count = 20;
  uint64_t seed = 7;
  app.add_option("--profile", paths, "profiles of this machine")->required();
  app.add_option("--count", count, "random prunes of stories15M's shape");
  app.add_option("--seed", seed, "their seed");
  CLI11_PARSE(app, argc, argv);
  std::vector<Profile> ps;
  for (const auto& p : paths) ps.push_back(load_profile(p));
  std::vector<ModelConfig> archs{stories15m_shape()};
  for (auto& a : random_architectures(stories15m_shape(), count, seed)) archs.push_back(a);
  const Scenario scen = calibration_scenario(ps.front().workload, "cpu");
  std::vector<std::vector<CostEstimate>> e(ps.size());
  for (size_t i = 0; i < ps.size(); ++i)
    for (const auto& a : archs) e[i].push_back(predict(a, scen, &ps[i]));
  nlohmann::json pairs = nlohmann::json::array();
  for (size_t i = 0; i < ps.size(); ++i)
    for (size_t j = i + 1; j < ps.size(); ++j) {
      double tpot = 0, ttft = 0, teacher_tpot = 0, teacher_ttft = 0, rel_tpot = 0, rel_ttft = 0;
      std::string worst_tpot, worst_ttft;
      for (size_t k = 0; k < archs.size(); ++k) {
        const double dp = std::fabs(e[i][k].tpot_ms / e[j][k].tpot_ms - 1) * 100;
        const double dt = std::fabs(e[i][k].ttft_ms / e[j][k].ttft_ms - 1) * 100;
        if (dt > ttft) worst_ttft = describe(archs[k]);
        if (dp > tpot) worst_tpot = describe(archs[k]);
        tpot = std::max(tpot, dp), ttft = std::max(ttft, dt);
        if (k == 0) teacher_tpot = dp, teacher_ttft = dt;
        // As the search reads them: a fraction of the teacher's prediction by the same profile.
        const double rp = (e[i][k].tpot_ms / e[i][0].tpot_ms) / (e[j][k].tpot_ms / e[j][0].tpot_ms);
        const double rt = (e[i][k].ttft_ms / e[i][0].ttft_ms) / (e[j][k].ttft_ms / e[j][0].ttft_ms);
        rel_tpot = std::max(rel_tpot, std::fabs(rp - 1) * 100);
        rel_ttft = std::max(rel_ttft, std::fabs(rt - 1) * 100);
      }
      pairs.push_back({{"a", paths[i]}, {"b", paths[j]}, {"max_tpot_diff_percent", tpot},
                       {"max_ttft_diff_percent", ttft}, {"teacher_tpot_diff_percent", teacher_tpot},
                       {"teacher_ttft_diff_percent", teacher_ttft},
                       {"max_relative_tpot_diff_percent", rel_tpot},
                       {"max_relative_ttft_diff_percent", rel_ttft},
                       {"worst_tpot_architecture", worst_tpot}, {"worst_ttft_architecture", worst_ttft}});
    }
  nlohmann::json rows = nlohmann::json::array();  // every profile's predictions, per architecture
  for (size_t k = 0; k < archs.size(); ++k) {
    nlohmann::json tpot = nlohmann::json::array(), ttft = nlohmann::json::array();
    for (size_t i = 0; i < ps.size(); ++i) tpot.push_back(e[i][k].tpot_ms), ttft.push_back(e[i][k].ttft_ms);
    rows.push_back({{"architecture", describe(archs[k])}, {"tpot_ms", tpot}, {"ttft_ms", ttft}});
  }
  std::cout << nlohmann::json{{"architectures", archs.size()}, {"pairs", pairs}, {"rows", rows}}.dump()
            << std::endl;
  return 0;
}

}  // namespace ac
