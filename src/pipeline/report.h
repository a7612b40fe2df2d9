// report.md of a compress run: teacher vs compressed, every cost both predicted (by the cost
// model, and from what: profile or roofline) and measured on this device.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace ac {

/// Renders report.json (pipeline/compress.cpp) as Markdown.
std::string render_report_md(const nlohmann::json& report);

}  // namespace ac
