// report.html: rendered from a fixture run folder (report.json, arch.json, arch.autocompress.json,
// distill_log.csv written here with the fields compress writes), checked as text (self-contained,
// one <svg> per plot, the right number of marks, every number's provenance), then loaded in a
// real headless browser (Debian's chromium): every plot must be laid out with a non-empty box
// and its marks. The same for the report of a real (tiny) compress run of stories15M on the CPU
// scenario. Screenshots go to <build>/test-artifacts/report-*.png. Without chromium these tests
// fail under CI (scripts/setup.sh installs it) and are skipped elsewhere.
#include <fstream>
#include <regex>

#include "common/error.h"
#include "common/json_io.h"
#include "pipeline/report.h"
#include "pipeline/report_html.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

// Teacher 4 layers, D 64, H 4 / G 2, F 128; result: layer 1 without attention, layer 2 with
// F 64, layer 3 with 2/1 heads. Costs as a cpu-local run writes them.
RunReport fixture_report() {
  auto cost = [](double ttft, double tpot, double mem, const char* source) {
    json j = {{"ttft_ms", ttft}, {"tpot_ms", tpot}, {"throughput_tokens_per_s", 1000.0 / tpot},
              {"peak_memory_bytes", mem}, {"weight_bytes", mem * 0.8}};
    if (source) j["source"] = source;
    return j;
  };
  json eval = {{"perplexity", 5.1}, {"tokens", 4096}};
  json eval_c = {{"perplexity", 5.9}, {"kl_to_teacher", 0.21}, {"top1_agreement", 0.8}, {"tokens", 4096}};
  const json compressed_hf = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                               {"vocab_size", 512}, {"hidden_size", 64}, {"intermediate_size", 128},
                               {"num_hidden_layers", 4}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"head_dim", 16}};
  const json row = {{"method", "minitron"}, {"config", "D=64 L=4 [...]"}, {"parameters", 220000},
                    {"search_tokens", 2048}, {"search_seconds", 1.5}, {"model", "model"},
                    {"predicted", cost(30, 8.2, 5.2e7, "profile")},
                    {"measured", cost(31, 12.9, 5.3e7, nullptr)}, {"limits_predicted", ""},
                    {"limits_measured", ""}, {"measured_verdict", nullptr},
                    {"eval_after_prune", eval_c}, {"eval", eval_c},
                    {"distill", {{"tokens", 4096}}}, {"tasks", nullptr},
                    {"fit_attempts", json::array()}};
  const json j = {
      {"scenario", {{"name", "cpu-local"}, {"device", "cpu"}, {"engine", "native"},
                    {"workload", {{"prompt_tokens", 128}, {"output_tokens", 128}, {"batch_size", 1}}},
                    {"limits", {{"tpot_ms", 13.2}}},
                    {"limits_for_search", {{"tpot_ms", 8.45}}},
                    {"limits_as_written", {{"tpot_ms", {{"fraction_of_teacher", 0.6}}}}}}},
      {"device", {{"cpu_model", "Test CPU"}, {"cores", 2}, {"threads", 2}, {"torch", "1.13.1"}}},
      {"compute", {{"device", "cpu"}, {"precision", "fp32"}, {"gpu", ""},
                   {"distill_tokens_per_s", 1170.3}, {"distill_flops_per_token", 1.3e6},
                   {"distill_mfu", nullptr}, {"peak_memory_bytes", 9.1e8}}},
      {"date", "2026-11-29"},
      {"teacher", {{"config", "D=64 L=4 [H4/G2 F128]"}, {"parameters", 300000},
                   {"predicted", cost(40, 14.1, 6.3e7, "profile")}, {"measured", cost(41, 22.0, 6.3e7, nullptr)},
                   {"eval", eval}}},
      {"compressed", {{"config", "D=64 L=4 [...]"}, {"parameters", 220000},
                      {"predicted", cost(30, 8.2, 5.2e7, "profile")}, {"measured", cost(31, 12.9, 5.3e7, nullptr)},
                      {"hf_config", compressed_hf},
                      {"limits_predicted", ""}, {"limits_measured", ""}, {"measured_verdict", nullptr},
                      {"eval_after_prune", eval_c}, {"eval", eval_c}}},
      {"search", {{"method", "minitron"}, {"candidates", 6}, {"search_tokens", 2048},
                  {"search_seconds", 1.5}, {"search_tokens_all_attempts", 2048},
                  {"search_seconds_all_attempts", 1.5}, {"safety_margin", 0.05}}},
      {"comparison", json::array({row})},
      {"distill", {{"tokens", 4096}, {"steps", 8}, {"skipped_steps", 0}, {"wall_s", 3.5},
                   {"first_loss", 0.9}, {"last_loss", 0.3}}},
      {"data", {{"source", {{"source", "teacher samples"}}}, {"calibration_tokens", 1024}, {"train_tokens", 8192}, {"heldout_tokens", 4096},
                {"heldout_documents_removed_for_overlap", 0}}},
      {"export", {{"path", "model"}, {"reload_max_abs_diff", 0.0}, {"gguf", nullptr},
                  {"engine_check", nullptr}}},
      {"fit", {{"max_attempts", 3}, {"margin", 0.02}, {"attempts", json::array()}}},
      {"not_measured", ""},
      {"tasks", nullptr},
      {"llama_cpp", nullptr},
      {"stages", json::array({{{"stage", "profile"}, {"seconds", 12.5}, {"resumed", false}},
                              {{"stage", "search"}, {"seconds", 3.0}, {"resumed", false}}})},
      {"total_seconds", 15.5},
  };
  return RunReport::from_json(j, "fixture report.json");
}

json layer_entry(int i, int64_t H, int64_t G, int64_t F) {
  return {{"layer", i}, {"num_attention_heads", H}, {"num_key_value_heads", G}, {"head_dim", 16},
          {"intermediate_size", F}, {"attention_removed", H == 0}, {"ffn_removed", F == 0},
          {"parent", {{"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128}}}};
}

// Six Minitron candidates (4 ranked by KL after pruning, the third chosen), two costed only.
json fixture_arch() {
  json cands = json::array();
  const double tpot[] = {14.1, 10.0, 8.2, 7.5, 9.0, 6.0}, kl[] = {0.0, 0.15, 0.21, 0.4, -1, -1};
  for (int i = 0; i < 6; ++i)
    cands.push_back({{"describe", fmt::format("cand {}", i)}, {"cost", {{"tpot_ms", tpot[i]}, {"source", "profile"}}},
                     {"loss_after_prune", kl[i]}, {"chosen", i == 2}, {"feasible", tpot[i] <= 8.45}});
  return {{"config", {{"hidden_size", 64}}}, {"method", "minitron"}, {"hidden_size", 64},
          {"parent_hidden_size", 64},
          {"layers", {layer_entry(0, 4, 2, 128), layer_entry(1, 0, 0, 128), layer_entry(2, 4, 2, 64),
                      layer_entry(3, 2, 1, 128)}},
          {"predicted", {{"tpot_ms", 8.2}, {"source", "profile"}}},
          {"trajectory", json::array()},
          {"search", {{"method", "minitron"}, {"candidates", cands}}}};
}

json fixture_arch_autocompress() {
  json traj = json::array();
  for (int s = 0; s < 20; ++s)
    traj.push_back({{"step", s}, {"tokens", 256 * (s + 1)}, {"loss", 1.0 / (1 + s)}, {"kl", 0.5 / (1 + s)},
                    {"tpot_ms", 14.0 - 0.3 * s}, {"multipliers", {{"tpot_ms", 0.1 * s}}}, {"frozen", s / 5}});
  json cands = {{{"describe", "argmax"}, {"cost", {{"tpot_ms", 8.0}, {"source", "profile"}}},
                 {"loss_after_prune", 0.18}, {"chosen", true}}};
  return {{"config", {{"hidden_size", 64}}}, {"method", "autocompress"}, {"trajectory", traj},
          {"search", {{"method", "autocompress"}, {"candidates", cands}}}};
}

std::string fixture_csv() {
  std::string csv = "step,tokens,loss,kl,ce,lr,grad_norm,tokens_per_s,skipped\n";
  for (int s = 0; s < 8; ++s)
    csv += fmt::format("{},{},{},{},0,0.001,1.0,900.0,{}\n", s, 512 * (s + 1), 0.9 - 0.08 * s, 0.9 - 0.08 * s, int(s == 3));
  return csv;
}

fs::path write_fixture_run(const fs::path& dir) {
  write_json_file(dir / "report.json", fixture_report().to_json());
  write_json_file(dir / "arch.json", fixture_arch());
  write_json_file(dir / "arch.autocompress.json", fixture_arch_autocompress());
  write_file_atomic(dir / "distill_log.csv", fixture_csv());
  return dir;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// The text of the <svg> element whose data-plot is `plot` ("" when absent).
std::string svg_of(const std::string& html, const std::string& plot) {
  size_t p = html.find("data-plot=\"" + plot + "\"");
  if (p == std::string::npos) return "";
  size_t start = html.rfind("<svg", p), end = html.find("</svg>", p);
  return html.substr(start, end - start);
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

const std::vector<std::string> kPlots = {"layers", "cost", "pareto", "trajectory", "distill"};


}  // namespace

TEST(ReportHtml, RendersEveryPlotSelfContainedWithProvenance) {
  TempDir tmp;
  write_report_html(write_fixture_run(tmp.path), fixture_report());
  const std::string html = read_file(tmp.path / "report.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);  // no script, no external file
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find(" href="), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), kPlots.size());
  for (const auto& p : kPlots) EXPECT_FALSE(svg_of(html, p).empty()) << p;
  // Layers: 3 panels x 4 layers of result bars (+1 legend); x marks the removed attention (2
  // panels) of layer 1.
  const std::string layers = svg_of(html, "layers");
  EXPECT_EQ(count(layers, "class=\"result\""), 3u * 4u + 1u);
  EXPECT_EQ(count(layers, "class=\"orig\""), 3u * 4u + 1u);
  EXPECT_EQ(count(layers, ">×</text>"), 2u);
  // Cost: teacher and result, predicted and measured, for TTFT, TPOT and memory.
  const std::string cost = svg_of(html, "cost");
  EXPECT_EQ(count(cost, "class=\"prov-measured\""), 6u);
  EXPECT_EQ(count(cost, "class=\"prov-profile\""), 6u);
  EXPECT_NE(cost.find("limit 13.2 (for measured)"), std::string::npos);
  EXPECT_NE(cost.find("search limit 8.45 (for predicted)"), std::string::npos);
  // Pareto: 4 + 1 ranked points, 2 costed-only ticks, the Minitron baseline starred.
  const std::string pareto = svg_of(html, "pareto");
  EXPECT_EQ(count(pareto, "class=\"cand\""), 4u);
  EXPECT_EQ(count(pareto, "class=\"cand-other\""), 1u);
  EXPECT_EQ(count(pareto, "class=\"unranked\""), 2u);
  EXPECT_NE(pareto.find("Minitron baseline (chosen)"), std::string::npos);
  EXPECT_NE(pareto.find("predicted from profile"), std::string::npos);
  // Trajectory: loss, kl, tpot_ms, multipliers.tpot_ms (tokens and frozen are counters).
  EXPECT_EQ(count(svg_of(html, "trajectory"), "class=\"series\""), 4u);
  // Distillation: one line, the skipped step marked.
  EXPECT_EQ(count(svg_of(html, "distill"), "class=\"skipped\""), 1u);
  EXPECT_NE(html.find("teacher, predicted from profile"), std::string::npos);
  EXPECT_NE(html.find("result, measured"), std::string::npos);
}

TEST(ReportHtml, SaysWhatIsMissingInsteadOfFailing) {
  RunReport report;
  report.scenario.name = "bare";
  const std::string html = render_report_html(report, {}, "");
  EXPECT_EQ(count(html, "<svg"), 4u);  // layers, cost, pareto, distill; no trajectory
  EXPECT_NE(html.find("no candidates in arch.json"), std::string::npos);
  EXPECT_NE(html.find("no distill_log.csv rows"), std::string::npos);
}

// report.json is written and read through RunReport: a round trip is exact, and a missing or
// mistyped field is refused with its path.
TEST(RunReport, RoundTripsAndNamesAMissingOrWrongField) {
  const RunReport r = fixture_report();
  EXPECT_EQ(RunReport::from_json(r.to_json(), "r").to_json(), r.to_json());
  json missing = r.to_json();
  missing["compressed"].erase("parameters");
  ac::test::expect_error<FormatError>([&] { RunReport::from_json(missing, "run/report.json"); },
                                      {"run/report.json", "compressed.parameters", "missing"});
  json wrong = r.to_json();
  wrong["comparison"][0]["search_tokens"] = "many";
  ac::test::expect_error<FormatError>([&] { RunReport::from_json(wrong, "run/report.json"); },
                                      {"comparison[0].search_tokens", "expected an integer", "many"});
  json no_rows = r.to_json();
  no_rows["comparison"] = json::array();
  ac::test::expect_error<FormatError>([&] { RunReport::from_json(no_rows, "r"); }, {"comparison"});
}

// The llama.cpp section: a prediction stands in a column only when the profile holds llama.cpp's
// own calibration; otherwise the measurement stands alone and the report says how to calibrate.
TEST(RunReport, LlamaCppSectionShowsAnUncalibratedPredictionNowhere) {
  const json model = {{"tpot_ms_measured", 2.5}, {"tpot_ms_median", 2.7}, {"tpot_ms_predicted", 1.31},
                      {"prediction_error", -0.476}, {"generated_tokens", 32},
                      {"ttft_ms_measured", 9.0}, {"ttft_ms_predicted", 4.0},
                      {"peak_memory_bytes_predicted", 3 << 20},
                      {"buffers", {{"total_bytes", 5 << 20}}}};
  json l = {{"ran", true}, {"llama_cpp_release", "b1"}, {"threads", 2}, {"weight_dtype", "q8_0"},
            {"prompt_tokens", 16}, {"teacher", model}, {"compressed", model}};
  RunReport r = fixture_report();
  // An architecture's '|' between layers is escaped inside the table cell.
  r.compressed.config = "D=64 L=2 [H4/G2 F128 | H2/G1 no-ffn]";
  EXPECT_NE(render_report_md(r).find("| structure | "), std::string::npos);
  EXPECT_NE(render_report_md(r).find("[H4/G2 F128 \\| H2/G1 no-ffn] |"), std::string::npos)
      << render_report_md(r);
  // The blockwise start is named whether the final run ran it or continued the finalist that did;
  // a report without the fields (written before them) says nothing of it.
  EXPECT_EQ(render_report_md(r).find("blockwise"), std::string::npos);
  r.comparison.front().distill["continued_bld_tokens"] = 512;
  EXPECT_NE(render_report_md(r).find("after a blockwise local distillation of 512 tokens"),
            std::string::npos) << render_report_md(r);
  r.comparison.front().distill["continued_bld_tokens"] = 0;
  r.comparison.front().distill["bld_tokens"] = 256;
  EXPECT_NE(render_report_md(r).find("blockwise local distillation of 256 tokens"), std::string::npos);
  l["prediction"] = "the native engine's tables, not calibrated for llama.cpp";
  l["prediction_calibrated"] = false;
  r.llama_cpp = l;
  std::string md = render_report_md(r);
  EXPECT_NE(md.find("The measurement stands alone"), std::string::npos) << md;
  EXPECT_NE(md.find("calibrate --engine llama.cpp"), std::string::npos);
  EXPECT_EQ(md.find("predicted for llama.cpp"), std::string::npos) << md;
  EXPECT_EQ(md.find("1.310"), std::string::npos) << md;  // the uncalibrated number, nowhere
  EXPECT_EQ(md.find("-47.6%"), std::string::npos) << md;
  EXPECT_NE(md.find("| teacher | 2.500 | 2.700 | 32 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| teacher | 9.00 | 5.00 |"), std::string::npos) << md;  // buffers in MiB
  l.erase("prediction_calibrated");  // a report written before the field: read from "prediction"
  r.llama_cpp = l;
  EXPECT_EQ(render_report_md(r).find("predicted for llama.cpp"), std::string::npos);
  l["prediction"] = "the profile's llama.cpp calibration";
  l["prediction_calibrated"] = true;
  r.llama_cpp = l;
  md = render_report_md(r);
  EXPECT_NE(md.find("| teacher | 2.500 | 2.700 | 1.310 | -47.6% | 32 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| teacher | 9.00 | 4.00 | 5.00 | 3.00 |"), std::string::npos) << md;
}

TEST(ReportHtml, CliRerendersAFinishedRunFolder) {
  TempDir tmp;
  write_fixture_run(tmp.path);
  const char* env = std::getenv("AC_BIN");
  const fs::path bin = env ? fs::path(env) : ac::test::binary_dir() / "autocompress";
  ac::test::run_or_fail(bin.string() + " report --run " + tmp.path.string() + " > /dev/null");
  EXPECT_NE(read_file(tmp.path / "report.md").find("# autocompress report"), std::string::npos);
  EXPECT_EQ(count(read_file(tmp.path / "report.html"), "<svg"), kPlots.size());
  TempDir empty;
  EXPECT_NE(std::system((bin.string() + " report --run " + empty.path.string() + " 2>/dev/null").c_str()), 0);
  EXPECT_THROW(rerender_reports(empty.path), FormatError);
}

namespace {

// chromium's path, or "" (then: fail under CI, where scripts/setup.sh installed it; else skip).
#define REQUIRE_CHROMIUM(var)                                                                \
  const std::string var = find_chromium();                                                   \
  if (var.empty()) {                                                                         \
    if (std::getenv("CI")) FAIL() << "chromium is not installed (scripts/setup.sh installs it)"; \
    GTEST_SKIP() << "chromium is not installed; scripts/setup.sh installs it (fails under CI)"; \
  }

// Loads `html` in headless chromium: every plot of `plots` must be laid out in a box of real
// size holding its marks (a probe script in a copy of the page records them: the page itself
// has no script). Then screenshots the page into <build>/test-artifacts/<name>.png, with the
// page beside it as <name>.html.
void expect_rendered(const std::string& chromium, const fs::path& html_path,
                     const std::vector<std::string>& plots, const std::string& name) {
  TempDir tmp;
  std::string html = read_file(html_path);
  const std::string probe =
      "<script>for (const s of document.querySelectorAll('svg.plot')) { const r = "
      "s.getBoundingClientRect(); s.setAttribute('data-box', Math.round(r.width) + 'x' + "
      "Math.round(r.height)); s.setAttribute('data-marks', s.querySelectorAll('rect,circle,path,"
      "polyline,line,text').length); }</script>";
  html.insert(html.rfind("</body>"), probe);
  write_file_atomic(tmp.path / "probe.html", html);
  const std::string flags = "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
                            "--no-first-run --user-data-dir=" + (tmp.path / "profile").string();
  ac::test::run_or_fail(fmt::format("timeout 180 {} {} --dump-dom file://{} > {} 2> {}", chromium, flags,
                                    (tmp.path / "probe.html").string(), (tmp.path / "dom.html").string(),
                                    (tmp.path / "chromium.log").string()));
  const std::string dom = read_file(tmp.path / "dom.html");
  EXPECT_EQ(count(dom, "<svg"), plots.size()) << name;
  for (const auto& p : plots) {
    std::smatch m;
    const std::string svg = svg_of(dom, p);
    ASSERT_TRUE(std::regex_search(svg, m, std::regex("data-box=\"(\\d+)x(\\d+)\" data-marks=\"(\\d+)\"")))
        << name << ": plot " << p << " not laid out by chromium:\n" << svg.substr(0, 300);
    EXPECT_GT(std::stoi(m[1]), 300) << name << " " << p;
    EXPECT_GT(std::stoi(m[2]), 100) << name << " " << p;
    EXPECT_GT(std::stoi(m[3]), 10) << name << " " << p;
  }
  // The screenshot, kept with the test run's artifacts.
  const fs::path artifacts = ac::test::binary_dir() / "test-artifacts";
  fs::create_directories(artifacts);
  const fs::path png = artifacts / (name + ".png");
  fs::remove(png);
  ac::test::run_or_fail(fmt::format("timeout 180 {} {} --hide-scrollbars --window-size=1100,3800 "
                                    "--screenshot={} file://{} >> {} 2>&1", chromium, flags, png.string(),
                                    html_path.string(), (tmp.path / "chromium.log").string()));
  fs::copy_file(html_path, artifacts / (name + ".html"), fs::copy_options::overwrite_existing);
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
           (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1100u);  // IHDR width, height
  EXPECT_EQ(be32(20), 3800u);
  // A blank 1100 x 3800 page compresses to a few KB; the plots and text make it far larger.
  EXPECT_GT(bytes.size(), 60000u) << name << ": the screenshot looks blank";
}

}  // namespace

TEST(ReportHtml, EveryPlotOfTheFixtureRunRendersInHeadlessChromium) {
  REQUIRE_CHROMIUM(chromium);
  TempDir tmp;
  write_report_html(write_fixture_run(tmp.path), fixture_report());
  expect_rendered(chromium, tmp.path / "report.html", kPlots, "report-fixture");
}

// The whole pipeline on stories15M with the CPU scenario at the smallest sizes: compress writes
// report.html beside report.md, and chromium lays out every plot.
TEST(ReportHtml, CompressOnTheCpuScenarioWritesAReportChromiumRenders) {
  REQUIRE_CHROMIUM(chromium);
  TempDir tmp;
  const std::string bin = ac::test::cli_bin();
  const fs::path model = ac::test::import_stories15m(tmp.path), run = tmp.path / "run";
  ASSERT_FALSE(testing::Test::HasFailure());
  ac::test::run_or_fail(fmt::format(
      "AC_QUIET=1 {} compress --model {} --scenario cpu-local --out {} --seq-len 32 "
      "--calibration-sequences 8 --train-sequences 8 --heldout-sequences 8 --distill-tokens 512 "
      "--distill-batch-size 2 --task-items 0 {} > {} 2>&1", bin, model.string(), run.string(),
      ac::test::kOneSearch, (tmp.path / "compress.log").string()));
  ASSERT_TRUE(fs::exists(run / "report.md"));
  // The measured verdict on paired rounds, with its interval, in report.json and report.md.
  const nlohmann::json report = nlohmann::json::parse(read_file(run / "report.json"));
  const nlohmann::json& verdict = report["compressed"]["measured_verdict"];
  ASSERT_TRUE(verdict.is_object()) << report["compressed"].dump();
  EXPECT_GE(verdict["rounds"].get<int>(), 5);
  ASSERT_EQ(verdict["limits"].size(), 1u);  // cpu-local: TPOT <= 0.6 x the teacher
  const nlohmann::json& tpot = verdict["limits"][0];
  EXPECT_EQ(tpot["name"], "tpot_ms");
  const double lo = tpot["ratio_ci95"][0].get<double>(), hi = tpot["ratio_ci95"][1].get<double>();
  EXPECT_LE(lo, tpot["ratio"].get<double>());
  EXPECT_GE(hi, tpot["ratio"].get<double>());
  EXPECT_EQ(tpot["status"] == "holds", report["compressed"]["limits_measured"] == "");
  EXPECT_NE(read_file(run / "report.md").find("| tpot_ms | 0.6 x teacher |"), std::string::npos);
  const std::string html = read_file(run / "report.html");
  for (const char* p : {"layers", "cost", "pareto", "distill"}) EXPECT_FALSE(svg_of(html, p).empty()) << p;
  EXPECT_NE(html.find("predicted from profile"), std::string::npos);  // the CPU's costs
  // AutoCompress is the default method: its choice is marked, and its search has a trajectory.
  EXPECT_EQ(report["search"]["method"], "autocompress");
  EXPECT_NE(html.find("autocompress (chosen)"), std::string::npos);
  EXPECT_EQ(html.find("Minitron baseline (chosen)"), std::string::npos);
  std::vector<std::string> plots = {"layers", "cost", "pareto", "distill", "trajectory"};
  expect_rendered(chromium, run / "report.html", plots, "report-compress-cpu-local");
}
