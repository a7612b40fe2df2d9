// report.html of a compress run: one self-contained page (inline CSS and SVG, no script, no
// external file) with
//   - the architecture per layer: query heads, KV heads and FFN width of the result beside the
//     original's (arch.json "layers" with their "parent"; else the configs in report.json
//     teacher.hf_config / arch.json "config" / compressed.hf_config);
//   - TTFT, TPOT and peak memory, predicted beside measured, for teacher and result, with the
//     limits;
//   - quality vs cost of every candidate the searches considered, its Pareto front, the Minitron
//     baseline marked (any object of arch.json / arch.<method>.json holding a "candidates"
//     array, e.g. "search");
//   - the search trajectory when an arch file has one ("trajectory": an array of objects whose
//     numeric fields are plotted against "step" or their index);
//   - the distillation loss per step (distill_log.csv).
// Every number says where it comes from: measured (on this device), predicted from profile (the
// cost model's tables of this device) or predicted from specs (the roofline of the datasheet).
// What is absent from the run folder is said so on the page instead of plotted.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fs.h"
#include "pipeline/run_report.h"

namespace ac {

/// The page. `report`: the run's report (pipeline/run_report.h); `archs`: arch.json first (its
/// "layers", "hidden_size", "trajectory", "search"; search/outcome.h), then the arch.<method>.json
/// of the other methods, possibly none; `distill_csv`: the text of distill_log.csv (header
/// "step,tokens,loss,...") or "". Missing arch fields are tolerated (their section says what
/// is missing); never throws on content.
std::string render_report_html(const RunReport& report,
                               const std::vector<nlohmann::json>& archs,
                               const std::string& distill_csv);

/// The page of `report` with the arch.json, arch.*.json and distill_log.csv found in `run_dir`,
/// if any (a notebook's view of a run: the Python package's RunReport._repr_html_). Throws
/// FormatError on an arch file that is not JSON.
std::string report_html_of(const fs::path& run_dir, const RunReport& report);

/// Writes `run_dir`/report.html (atomically): report_html_of(run_dir, report).
void write_report_html(const fs::path& run_dir, const RunReport& report);

/// Re-renders report.md and report.html of a finished run folder from its report.json (and
/// arch.json, distill_log.csv when present). Throws FormatError naming the file (and the field)
/// when report.json is missing, not JSON, or not a complete report (RunReport::from_json).
void rerender_reports(const fs::path& run_dir);

}  // namespace ac
