#include "pipeline/report.h"

#include <fmt/format.h>

namespace ac {

namespace {
using json = nlohmann::json;

double num(const json& j, const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

std::string pct_err(double predicted, double measured) {
  return measured == 0 ? "—" : fmt::format("{:+.1f}%", 100.0 * (predicted - measured) / measured);
}

std::string limit_cell(const json& limits, const char* key, bool bytes) {
  if (!limits.contains(key) || limits[key].is_null()) return "—";
  double v = limits[key].get<double>();
  return bytes ? mib(v) : fmt::format("{:.3f}", v);
}

}  // namespace

std::string render_report_md(const json& r) {
  const json& s = r["scenario"];
  const json& t = r["teacher"];
  const json& c = r["compressed"];
  const json& lim = s["limits"];
  std::string md;
  md += fmt::format("# autocompress report — scenario `{}`\n\n", s["name"].get<std::string>());
  md += fmt::format("Device: {} ({} cores, {} torch threads, torch {}), engine `{}`. Date {}.\n\n",
                    r["device"]["cpu_model"].get<std::string>(), r["device"]["cores"].get<int>(),
                    r["device"]["threads"].get<int>(), r["device"]["torch"].get<std::string>(),
                    s["engine"].get<std::string>(), r["date"].get<std::string>());
  md += fmt::format("Workload: batch {}, {} prompt + {} output tokens. Limits (resolved against the "
                    "teacher's measurement): `{}`.\n\n",
                    s["workload"]["batch_size"].get<int64_t>(), s["workload"]["prompt_tokens"].get<int64_t>(),
                    s["workload"]["output_tokens"].get<int64_t>(), lim.dump());
  if (s.contains("limits_for_search"))
    md += fmt::format("The search met `{}` by the cost model (relative limits resolved against the "
                      "teacher's prediction, so that predictions are compared with predictions).\n\n",
                      s["limits_for_search"].dump());
  md += "## Architecture\n\n| | teacher | compressed |\n|---|---|---|\n";
  md += fmt::format("| structure | {} | {} |\n", t["config"].get<std::string>(), c["config"].get<std::string>());
  md += fmt::format("| parameters | {} | {} ({:.1f}%) |\n\n", t["parameters"].get<int64_t>(),
                    c["parameters"].get<int64_t>(),
                    100.0 * c["parameters"].get<double>() / t["parameters"].get<double>());

  md += "## Cost: predicted (cost model, source in brackets) beside measured (native engine, this "
        "device)\n\n";
  md += "| metric | limit | teacher predicted | teacher measured | compressed predicted | "
        "compressed measured | prediction error |\n|---|---|---|---|---|---|---|\n";
  auto row = [&](const char* name, const char* key, const char* limit_key, bool bytes) {
    auto fmtv = [&](double v) { return bytes ? mib(v) : fmt::format("{:.3f}", v); };
    double tp = num(t["predicted"], key), tm = num(t["measured"], key);
    double cp = num(c["predicted"], key), cm = num(c["measured"], key);
    md += fmt::format("| {} | {} | {} [{}] | {} | {} [{}] | {} | {} |\n", name,
                      limit_cell(lim, limit_key, bytes), fmtv(tp),
                      t["predicted"].value("source", "?"), fmtv(tm), fmtv(cp),
                      c["predicted"].value("source", "?"), fmtv(cm), pct_err(cp, cm));
  };
  row("TTFT (ms)", "ttft_ms", "ttft_ms", false);
  row("TPOT (ms)", "tpot_ms", "tpot_ms", false);
  row("throughput (tokens/s)", "throughput_tokens_per_s", "min_throughput_tokens_per_s", false);
  row("peak memory", "peak_memory_bytes", "peak_memory_bytes", true);
  std::string lp = c["limits_predicted"].get<std::string>(), lm = c["limits_measured"].get<std::string>();
  md += fmt::format("\nEvery limit, by the cost model: **{}**. Measured: **{}**.\n\n",
                    lp.empty() ? "met" : "BROKEN — " + lp, lm.empty() ? "met" : "BROKEN — " + lm);

  md += "## Quality on held-out teacher-sampled stories\n\n";
  md += "| model | perplexity | KL to teacher (nats/token) | top-1 agreement | tokens |\n|---|---|---|---|---|\n";
  auto q = [&](const char* name, const json& e) {
    md += fmt::format("| {} | {:.3f} | {} | {} | {} |\n", name, num(e, "perplexity"),
                      e.contains("kl_to_teacher") ? fmt::format("{:.4f}", num(e, "kl_to_teacher")) : "0 (is the teacher)",
                      e.contains("top1_agreement") ? fmt::format("{:.1f}%", 100 * num(e, "top1_agreement")) : "100%",
                      e.value("tokens", int64_t(0)));
  };
  q("teacher", t["eval"]);
  q("compressed, after pruning", c["eval_after_prune"]);
  q("compressed, after distillation", c["eval"]);

  const json& se = r["search"];
  const json& d = r["distill"];
  md += fmt::format("\n## Search and distillation\n\nSearch: `{}`, {} candidates, {} search tokens "
                    "(forward tokens through any model), safety margin {:.0f}%.\n\n",
                    se["method"].get<std::string>(), se["candidates"].get<int64_t>(),
                    se["search_tokens"].get<int64_t>(), 100 * se["safety_margin"].get<double>());
  md += fmt::format("Distillation: {} tokens in {} steps ({} skipped), {:.0f} s, loss {:.4f} → {:.4f}.\n\n",
                    d["tokens"].get<int64_t>(), d["steps"].get<int64_t>(), d["skipped_steps"].get<int64_t>(),
                    d["wall_s"].get<double>(), d["first_loss"].get<double>(), d["last_loss"].get<double>());
  md += "## Time per stage\n\n| stage | seconds |\n|---|---|\n";
  for (const auto& st : r["stages"]) md += fmt::format("| {} | {:.1f} |\n", st["stage"].get<std::string>(), st["seconds"].get<double>());
  md += fmt::format("| **total** | {:.1f} |\n\n", r["total_seconds"].get<double>());
  md += fmt::format("Exported checkpoint: `{}/` (reloads to identical logits: max |diff| = {}).\n",
                    r["export"]["path"].get<std::string>(), r["export"]["reload_max_abs_diff"].get<double>());
  return md;
}

}  // namespace ac
