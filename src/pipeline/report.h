// report.md of a compress run: teacher vs compressed, every cost both predicted (by the cost
// model, and from what: profile or roofline) and measured on this device.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/run_report.h"

namespace ac {

/// One sentence on the data of a run, from report.json "data" (its "source": teacher samples,
/// an earlier run's token files, or the user's text with the tokenizer and the held-out rule),
/// e.g. "Data: your text `moby.txt` (JSONL field `text`), tokenized with tokenizer.json
/// (byte-level BPE): 40 documents ...; held out: every 20th document." Plain text.
std::string describe_run_data(const RunReport::Data& data);

/// A limits verdict of report.json ("limits_predicted" / "limits_measured"): "met" for "",
/// "not measured" for null, "NOT YET CERTAIN — ..." when every clause is a limit whose 95%
/// interval straddles it (PairedVerdict::failures), else "BROKEN — ...". Plain text.
std::string limits_verdict_text(const nlohmann::json& verdict);

/// Renders report.json (pipeline/run_report.h) as Markdown.
std::string render_report_md(const RunReport& report);

}  // namespace ac
