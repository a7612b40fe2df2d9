#include "pipeline/report.h"

#include <fmt/format.h>

#include "common/fs.h"
#include "common/markdown.h"
#include "pipeline/story_tasks.h"

namespace ac {

namespace {
using json = nlohmann::json;

double num(const json& j, const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

}  // namespace

std::string limits_verdict_text(const json& v) {
  if (!v.is_string()) return "not measured";
  const std::string s = v.get<std::string>();
  if (s.empty()) return "met";
  size_t clauses = 1, uncertain = 0;
  for (size_t i = s.find("; "); i != std::string::npos; i = s.find("; ", i + 2)) ++clauses;
  for (size_t i = s.find("not yet certain"); i != std::string::npos;
       i = s.find("not yet certain", i + 1))
    ++uncertain;
  return (uncertain == clauses ? "NOT YET CERTAIN — " : "BROKEN — ") + s;
}

namespace {

std::string verdict(const json& v) { return limits_verdict_text(v); }

// The measured verdict of each limit with its 95% interval (PairedVerdict::to_json).
std::string render_measured_verdict_md(const json& v) {
  if (!v.is_object() || !v.contains("limits") || v["limits"].empty()) return "";
  std::string md = fmt::format(
      "Measured limits, judged on {} paired rounds (teacher and compressed model measured in "
      "the same round, the order alternating): the ratio is the median over the rounds of the "
      "compressed model's figure over its limit in that round (for the throughput minimum, the "
      "limit over the figure), and the 95% interval comes from resampling the rounds "
      "(bootstrap). The limit and measured columns are the figures pooled over all rounds. A "
      "limit holds when the whole interval is at or below 1; an "
      "interval that straddles 1 is not yet certain and counts as not met.\n\n"
      "| limit | as written | limit | measured | ratio | 95% CI | verdict |\n"
      "|---|---|---|---|---|---|---|\n",
      v.value("rounds", 0));
  for (const json& l : v["limits"]) {
    const std::string name = l.value("name", std::string("?"));
    const bool bytes = name == "peak_memory_bytes";
    auto val = [&](double x) { return bytes ? mib(x) : fmt::format("{:.3f}", x); };
    const json& ci = l["ratio_ci95"];
    const std::string interval =
        ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()
            ? fmt::format("{:.3f}–{:.3f}", ci[0].get<double>(), ci[1].get<double>())
            : std::string("—");
    const std::string written =
        l["fraction_of_teacher"].is_number()
            ? fmt::format("{} x teacher", l["fraction_of_teacher"].get<double>())
            : std::string("absolute");
    md += fmt::format("| {} | {} | {} | {} | {:.3f} | {} | {} |\n", name, written,
                      val(num(l, "limit")), val(num(l, "value")), num(l, "ratio"), interval,
                      l.value("status", std::string("?")));
  }
  return md + "\n";
}

std::string pct_err(double predicted, double measured) {
  return measured == 0 ? "—" : fmt::format("{:+.1f}%", 100.0 * (predicted - measured) / measured);
}

std::string limit_cell(const json& limits, const char* key, bool bytes) {
  if (!limits.contains(key) || limits[key].is_null()) return "—";
  double v = limits[key].get<double>();
  return bytes ? mib(v) : fmt::format("{:.3f}", v);
}

// "tpot_ms <= 3.98, peak_memory_bytes <= 48.0 MiB" from an absolute limits object.
std::string limits_text(const json& limits) {
  std::string out;
  for (auto it = limits.begin(); it != limits.end(); ++it) {
    if (!it.value().is_number()) continue;
    const bool bytes = it.key() == "peak_memory_bytes", minimum = it.key() == "min_throughput_tokens_per_s";
    out += fmt::format("{}{} {} {}", out.empty() ? "" : ", ", it.key(), minimum ? ">=" : "<=",
                       bytes ? mib(it.value().get<double>()) : fmt::format("{:.3f}", it.value().get<double>()));
  }
  return out.empty() ? "—" : out;
}

// The values of `e` (a cost estimate) for the keys that `limits` constrains.
std::string limited_values(const json& e, const json& limits) {
  std::string out;
  for (auto it = limits.begin(); it != limits.end(); ++it) {
    const std::string key = it.key() == "min_throughput_tokens_per_s" ? "throughput_tokens_per_s" : it.key();
    const double v = num(e, key.c_str());
    out += fmt::format("{}{}", out.empty() ? "" : ", ",
                       key == "peak_memory_bytes" ? mib(v) : fmt::format("{:.3f}", v));
  }
  return out.empty() ? "—" : out;
}

// Fit to the measurement (pipeline/measured_fit.h): each search, its candidate measured beside
// the teacher before distillation, and the limits tightened after a measured miss.
std::string render_fit_md(const RunReport::Fit& fit) {
  const json& attempts = fit.attempts;
  if (attempts.empty()) return "";
  std::string md = "## Fit to the measurement (before distillation)\n\n";
  md += fmt::format("The searched architecture is measured beside the teacher, in the same "
                    "interleaved rounds, before it is distilled. While a measured limit breaks, "
                    "the limit the search holds the cost model to is tightened by the measured "
                    "overshoot plus {:.0f}%, and the search runs again (at most {} searches).\n\n",
                    100 * fit.margin, fit.max_attempts);
  md += "| attempt | search held predictions to | architecture | predicted | teacher measured | "
        "measured | measured limit | verdict |\n|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < attempts.size(); ++i) {
    const json& a = attempts[i];
    if (a.contains("search_error")) {
      md += fmt::format("| {} | {} | — | — | — | — | — | search found nothing: {} |\n", i + 1,
                        limits_text(a["search_limits"]), a["search_error"].get<std::string>());
      continue;
    }
    const json& lim = a["limits"];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", i + 1,
                      limits_text(a["search_limits"]), markdown_cell(a["config"].get<std::string>()),
                      limited_values(a["predicted"], lim), limited_values(a["teacher_measured"], lim),
                      limited_values(a["measured"], lim), limits_text(lim), verdict(a["broken"]));
  }
  return md + "\n";
}

// llama.cpp (node-llama-cpp) on the GGUF exports: measured TPOT beside the llama.cpp prediction.
std::string render_llamacpp_md(const json& l) {
  std::string md = "\n## In llama.cpp (the real engine, GGUF export)\n\n";
  if (!l.value("ran", false))
    return md + fmt::format("Not measured: {}.\n", l.value("reason", std::string("unknown")));
  // A prediction stands in a column only when the profile holds llama.cpp's own calibration:
  // the native engine's tables time other kernels (44-49% off llama.cpp on machine B).
  const bool calibrated = l.value(
      "prediction_calibrated",  // reports written before the field: said in "prediction"
      l.value("prediction", std::string()).find("not calibrated") == std::string::npos);
  md += fmt::format("llama.cpp {} on this CPU, {} threads, {} weights, batch 1, {} prompt tokens, "
                    "the two models in interleaved runs. TPOT is the 10th percentile of the decode "
                    "steps (the time between consecutive tokens) pooled over the runs, the "
                    "statistic of the native engine's measurement; the median step is beside it. ",
                    l["llama_cpp_release"].dump(), l.value("threads", 0),
                    l.value("weight_dtype", std::string("fp32")), l.value("prompt_tokens", int64_t(0)));
  if (calibrated)
    md += fmt::format("The prediction is the cost model's for engine `llama.cpp`: {}.\n\n",
                      l.value("prediction", std::string("this device's profile")));
  else
    md += "The measurement stands alone: this profile holds no calibration for llama.cpp (the "
          "scenario's engine is another), and the native engine's tables do not time llama.cpp's "
          "kernels. `autocompress calibrate --engine llama.cpp --scenario S --tokenizer DIR` adds "
          "one to the profile.\n\n";
  auto ms = [](const json& m, const char* key) {
    return m.contains(key) ? fmt::format("{:.3f}", m[key].get<double>()) : std::string("—");
  };
  md += calibrated ? "| model | TPOT measured in llama.cpp (ms) | median step (ms) | TPOT predicted "
                     "for llama.cpp (ms) | prediction error | tokens decoded |\n"
                     "|---|---|---|---|---|---|\n"
                   : "| model | TPOT measured in llama.cpp (ms) | median step (ms) | tokens decoded "
                     "|\n|---|---|---|---|\n";
  for (const char* name : {"teacher", "compressed"}) {
    if (!l.contains(name)) continue;
    const json& m = l[name];
    const bool has = m.contains("tpot_ms_measured");
    const std::string prediction =
        calibrated ? fmt::format(" {:.3f} | {} |", m["tpot_ms_predicted"].get<double>(),
                                 has ? fmt::format("{:+.1f}%", 100 * m["prediction_error"].get<double>())
                                     : "—")
                   : "";
    md += fmt::format("| {} | {} | {} |{} {} |\n", name, ms(m, "tpot_ms_measured"),
                      ms(m, "tpot_ms_median"), prediction, m.value("generated_tokens", int64_t(0)));
  }
  // TTFT and memory beside their predictions (memory: the buffers llama.cpp reports).
  if (l.contains("teacher") && l["teacher"].contains("ttft_ms_measured")) {
    md += calibrated ? "\n| model | TTFT measured (ms) | TTFT predicted (ms) | llama.cpp's buffers "
                       "(MiB) | memory predicted (MiB) |\n|---|---|---|---|---|\n"
                     : "\n| model | TTFT measured (ms) | llama.cpp's buffers (MiB) |\n|---|---|---|\n";
    for (const char* name : {"teacher", "compressed"}) {
      if (!l.contains(name) || !l[name].contains("buffers")) continue;
      const json& m = l[name];
      const double mib = double(1 << 20);
      const double buffers = m["buffers"]["total_bytes"].get<double>() / mib;
      md += calibrated
                ? fmt::format("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", name,
                              m["ttft_ms_measured"].get<double>(), m["ttft_ms_predicted"].get<double>(),
                              buffers, m["peak_memory_bytes_predicted"].get<double>() / mib)
                : fmt::format("| {} | {:.2f} | {:.2f} |\n", name,
                              m["ttft_ms_measured"].get<double>(), buffers);
    }
  }
  if (l.contains("teacher_calibration_factor") && l["compressed"].contains("tpot_ms_predicted_teacher_calibrated"))
    md += fmt::format("\nCalibrated on the teacher: llama.cpp ran the teacher {:.2f}x the cost "
                      "model's prediction; the compressed model's prediction times that factor is "
                      "{:.3f} ms against {:.3f} measured ({:+.1f}%).\n",
                      l["teacher_calibration_factor"].get<double>(),
                      l["compressed"]["tpot_ms_predicted_teacher_calibrated"].get<double>(),
                      l["compressed"]["tpot_ms_measured"].get<double>(),
                      100 * l["compressed"]["teacher_calibrated_error"].get<double>());
  return md;
}

// Where the stages computed and the distillation's speed (measured: tokens / wall seconds).
std::string render_compute_md(const RunReport::Compute& c) {
  std::string md = fmt::format("Computed on {}{} in {}", c.device,
                               c.gpu.empty() ? "" : " (" + c.gpu + ")", c.precision);
  if (c.distill_tokens_per_s.is_number())
    md += fmt::format(": distillation {:.0f} tokens/s ({:.3g} FLOP per token",
                      c.distill_tokens_per_s.get<double>(),
                      c.distill_flops_per_token.is_number()
                          ? c.distill_flops_per_token.get<double>() : 0.0);
  if (c.distill_mfu.is_number())
    md += fmt::format(", MFU {:.1f}% of the GPU's dense peak", 100 * c.distill_mfu.get<double>());
  if (c.distill_tokens_per_s.is_number()) md += ")";
  if (c.peak_memory_bytes.is_number())
    md += fmt::format("; peak memory {:.2f} GiB ({})",
                      c.peak_memory_bytes.get<double>() / double(int64_t(1) << 30),
                      c.gpu.empty() ? "process peak RSS" : "GPU caching allocator, distillation");
  return md + ".\n\n";
}

// Methods side by side (compress --method both): same distillation budget, same held-out data.
std::string render_comparison_md(const std::vector<ComparisonRow>& rows,
                                 const std::string& not_measured) {
  std::string md = "## Search methods side by side\n\nEach architecture pruned from the teacher, "
                   "distilled with the same token budget on the same data, evaluated on the same "
                   "held-out stories and ";
  md += not_measured.empty() ? "measured on this device.\n\n| | "
                             : "costed by the cost model only (" + not_measured + ").\n\n| | ";
  std::string sep = "|---|";
  for (const auto& r : rows) {
    md += fmt::format("{} | ", r.method);
    sep += "---|";
  }
  md += "\n" + sep + "\n";
  auto line = [&](const std::string& name, auto cell) {
    md += "| " + name + " | ";
    for (const auto& r : rows) md += cell(r) + " | ";
    md += "\n";
  };
  using Row = ComparisonRow;
  line("structure", [](const Row& r) { return markdown_cell(r.config); });
  line("parameters", [](const Row& r) { return std::to_string(r.parameters); });
  line("search tokens", [](const Row& r) { return std::to_string(r.search_tokens); });
  line("search seconds", [](const Row& r) { return fmt::format("{:.1f}", r.search_seconds); });
  line("KL after pruning", [](const Row& r) { return fmt::format("{:.4f}", num(r.eval_after_prune, "kl_to_teacher")); });
  line("KL after distillation", [](const Row& r) { return fmt::format("{:.4f}", num(r.eval, "kl_to_teacher")); });
  line("perplexity after distillation", [](const Row& r) { return fmt::format("{:.3f}", num(r.eval, "perplexity")); });
  line("top-1 agreement", [](const Row& r) { return fmt::format("{:.1f}%", 100 * num(r.eval, "top1_agreement")); });
  for (const char* k : {"ttft_ms", "tpot_ms"})
    line(fmt::format("{} predicted / measured", k), [&](const Row& r) {
      return fmt::format("{:.3f} / {}", num(r.predicted, k),
                         r.measured.is_object() ? fmt::format("{:.3f}", num(r.measured, k)) : "—");
    });
  line("peak memory predicted / measured", [](const Row& r) {
    return mib(num(r.predicted, "peak_memory_bytes")) + " / " +
           (r.measured.is_object() ? mib(num(r.measured, "peak_memory_bytes")) : "—");
  });
  line("limits (model / measured)", [](const Row& r) {
    auto ok = [](const json& v) {
      return !v.is_string() ? "not measured" : v.get<std::string>().empty() ? "met" : "BROKEN";
    };
    return fmt::format("{} / {}", ok(json(r.limits_predicted)), ok(r.limits_measured));
  });
  line("distillation tokens", [](const Row& r) { return std::to_string(r.distill.value("tokens", int64_t(0))); });
  return md + "\n";
}

}  // namespace

std::string describe_run_data(const RunReport::Data& data) {
  const json& src = data.source;
  const std::string kind = src.is_object() ? src.value("source", std::string()) : std::string();
  const std::string tokens =
      fmt::format("{} calibration, {} training and {} held-out tokens", data.calibration_tokens,
                  data.train_tokens, data.heldout_tokens);
  if (kind == "text")
    return fmt::format("Data: your text `{}`{}, tokenized with {}: {}; held out: {}. {}.",
                       src.value("path", std::string("?")),
                       fs::path(src.value("path", std::string())).extension() == ".jsonl"
                           ? fmt::format(" (JSONL field `{}`)", src.value("text_field", std::string("text")))
                           : std::string(),
                       src.value("tokenizer", std::string("?")), src.value("corpus", std::string("?")),
                       src.value("heldout_rule", std::string("?")), tokens);
  if (kind == "token files")
    return fmt::format("Data: the token files of `{}` (an earlier run's data/). {}.",
                       src.value("path", std::string("?")), tokens);
  return fmt::format("Data: stories sampled from the teacher (temperature 1, top-p 0.9, fixed "
                     "seeds; held-out documents that also occur in training removed: {}). {}.",
                     data.heldout_documents_removed_for_overlap, tokens);
}

std::string render_report_md(const RunReport& r) {
  const RunReport::Scenario& s = r.scenario;
  const RunReport::Teacher& t = r.teacher;
  const RunReport::Compressed& c = r.compressed;
  const json& lim = s.limits;
  std::string md;
  md += fmt::format("# autocompress report — scenario `{}`\n\n", s.name);
  md += fmt::format("Device: {} ({} cores, {} torch threads, torch {}), engine `{}`. Date {}.\n\n",
                    r.device.cpu_model, r.device.cores, r.device.threads, r.device.torch, s.engine,
                    r.date);
  const std::string& not_measured = r.not_measured;
  if (!not_measured.empty())
    md += fmt::format("**Nothing in this report is measured on the target: {}.** Every cost is the "
                      "cost model's prediction; quality figures are measured as usual.\n\n", not_measured);
  md += fmt::format("Workload: batch {}, {} prompt + {} output tokens. Limits (resolved against the "
                    "teacher's {}): `{}`.\n\n", s.batch_size, s.prompt_tokens, s.output_tokens,
                    not_measured.empty() ? "measurement" : "prediction", lim.dump());
  md += fmt::format("The search met `{}` by the cost model (relative limits resolved against the "
                    "teacher's prediction, so that predictions are compared with predictions).\n\n",
                    s.limits_for_search.dump());
  md += "## Architecture\n\n| | teacher | compressed |\n|---|---|---|\n";
  md += fmt::format("| structure | {} | {} |\n", markdown_cell(t.config), markdown_cell(c.config));
  md += fmt::format("| parameters | {} | {} ({:.1f}%) |\n\n", t.parameters, c.parameters,
                    100.0 * double(c.parameters) / double(t.parameters));

  md += "## Cost: predicted (cost model, source in brackets) beside measured (native engine, this "
        "device)\n\n";
  md += "| metric | limit | teacher predicted | teacher measured | compressed predicted | "
        "compressed measured | prediction error |\n|---|---|---|---|---|---|---|\n";
  auto row = [&](const char* name, const char* key, const char* limit_key, bool bytes) {
    auto fmtv = [&](double v) { return v == 0 ? std::string("—") : bytes ? mib(v) : fmt::format("{:.3f}", v); };
    double tp = num(t.predicted, key), tm = t.measured.is_object() ? num(t.measured, key) : 0;
    double cp = num(c.predicted, key), cm = c.measured.is_object() ? num(c.measured, key) : 0;
    md += fmt::format("| {} | {} | {} [{}] | {} | {} [{}] | {} | {} |\n", name,
                      limit_cell(lim, limit_key, bytes), fmtv(tp),
                      t.predicted.value("source", "?"), fmtv(tm), fmtv(cp),
                      c.predicted.value("source", "?"), fmtv(cm), pct_err(cp, cm));
  };
  row("TTFT (ms)", "ttft_ms", "ttft_ms", false);
  row("TPOT (ms)", "tpot_ms", "tpot_ms", false);
  // The medians are measured only: the cost model predicts the uncontended (p10) latency.
  auto median_row = [&](const char* name, const char* key) {
    auto cell = [&](const json& e) {
      return e.is_object() && e.contains(key) ? fmt::format("{:.3f}", num(e, key)) : std::string("—");
    };
    md += fmt::format("| {} | — | — | {} | — | {} | — |\n", name, cell(t.measured), cell(c.measured));
  };
  median_row("TTFT, median of the samples (ms)", "ttft_median_ms");
  median_row("TPOT, median of the samples (ms)", "tpot_median_ms");
  row("throughput (tokens/s)", "throughput_tokens_per_s", "min_throughput_tokens_per_s", false);
  median_row("throughput, median request (tokens/s)", "throughput_median_tokens_per_s");
  row("peak memory", "peak_memory_bytes", "peak_memory_bytes", true);
  md += "\nMeasured TTFT and TPOT are the 10th percentile of their samples: the latency of this "
        "device when nothing else runs, which is what the cost model predicts and what the limits "
        "are checked against. The medians beside them also carry whatever else ran on the "
        "machine. Throughput is the output tokens over the 10th percentile of the requests' "
        "time (the same uncontended statistic); the median request's is in the row below it.\n";
  if (num(t.predicted, "residency") > 0 || num(c.predicted, "residency") > 0)
    md += fmt::format("\nCache residency (the share of a decode step's weights the cost model reads "
                      "from the last-level cache rather than memory, from the profile's working-set "
                      "curve): teacher {:.0f}%, compressed {:.0f}%.\n",
                      100 * num(t.predicted, "residency"), 100 * num(c.predicted, "residency"));
  md += fmt::format("\nEvery limit, by the cost model: **{}**. Measured: **{}**.\n\n",
                    verdict(json(c.limits_predicted)), verdict(c.limits_measured));
  md += render_measured_verdict_md(c.measured_verdict);
  md += render_fit_md(r.fit);

  md += "## Quality on the held-out data\n\n";
  md += describe_run_data(r.data) + "\n\n";
  md += "| model | perplexity | bits/byte | KL to teacher (nats/token) | top-1 agreement | top-5 overlap | tokens |\n|---|---|---|---|---|---|---|\n";
  auto q = [&](const char* name, const json& e) {
    md += fmt::format("| {} | {:.3f} | {} | {} | {} | {} | {} |\n", name, num(e, "perplexity"),
                      e.contains("bits_per_byte") ? fmt::format("{:.4f}", num(e, "bits_per_byte")) : "—",
                      e.contains("kl_to_teacher") ? fmt::format("{:.4f}", num(e, "kl_to_teacher")) : "0 (is the teacher)",
                      e.contains("top1_agreement") ? fmt::format("{:.1f}%", 100 * num(e, "top1_agreement")) : "100%",
                      e.contains("topk_overlap") ? fmt::format("{:.1f}%", 100 * num(e, "topk_overlap")) : "100%",
                      e.value("tokens", int64_t(0)));
  };
  q("teacher", t.eval);
  q("compressed, after pruning", c.eval_after_prune);
  q("compressed, after distillation", c.eval);
  if (r.tasks.is_object()) md += render_story_tasks_md(r.tasks);
  if (r.llama_cpp.is_object()) md += render_llamacpp_md(r.llama_cpp);

  const RunReport::Search& se = r.search;
  const RunReport::Distill& d = r.distill;
  md += fmt::format("\n## Search and distillation\n\nSearch: `{}`, {} candidates, {} search tokens "
                    "(forward tokens through any model), safety margin {:.0f}%.\n\n",
                    se.method, se.candidates, se.search_tokens, 100 * se.safety_margin);
  if (r.fit.attempts.size() > 1)
    md += fmt::format("With the fit to the measurement: {} searches, {} search tokens and {:.0f} s "
                      "in all.\n\n", r.fit.attempts.size(), se.search_tokens_all_attempts,
                      se.search_seconds_all_attempts);
  md += fmt::format("Distillation: {} tokens in {} steps ({} skipped), {:.0f} s, loss {:.4f} → {:.4f}",
                    d.tokens, d.steps, d.skipped_steps, d.wall_s, d.first_loss, d.last_loss);
  // The blockwise start, run by the final run or by the kept finalist it continues (reports
  // written before it existed have neither field).
  if (!r.comparison.empty()) {
    const json& fd = r.comparison.front().distill;
    const int64_t bld = fd.value("bld_tokens", int64_t(0)) + fd.value("continued_bld_tokens", int64_t(0));
    if (bld > 0)
      md += fmt::format(", after a blockwise local distillation of {} tokens (each changed block "
                        "alone on the teacher's residual stream)", bld);
  }
  md += ".\n\n";
  md += render_compute_md(r.compute);
  if (r.comparison.size() > 1) md += render_comparison_md(r.comparison, r.not_measured);
  md += "## Time per stage\n\n| stage | seconds |\n|---|---|\n";
  for (const RunReport::Stage& st : r.stages)
    md += fmt::format("| {}{} | {:.1f} |\n", st.stage, st.resumed ? " (earlier attempt)" : "",
                      st.seconds);
  md += fmt::format("| **total** (this attempt) | {:.1f} |\n\n", r.total_seconds);
  md += fmt::format("Exported checkpoint: `{}/` (reloads to identical logits: max |diff| = {}).\n",
                    r.exported.path, r.exported.reload_max_abs_diff);
  return md;
}

}  // namespace ac
