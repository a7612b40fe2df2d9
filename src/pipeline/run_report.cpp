#include "pipeline/run_report.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ac {

using json = nlohmann::json;

namespace {

// The JSON kinds a field may hold.
enum class Kind {
  kString, kInt, kNumber, kBool, kObject, kArray, kObjectOrNull, kStringOrNull, kNumberOrNull, kAny
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kString: return "a string";
    case Kind::kInt: return "an integer";
    case Kind::kNumber: return "a number";
    case Kind::kBool: return "true or false";
    case Kind::kObject: return "an object";
    case Kind::kArray: return "an array";
    case Kind::kObjectOrNull: return "an object or null";
    case Kind::kStringOrNull: return "a string or null";
    case Kind::kNumberOrNull: return "a number or null";
    case Kind::kAny: return "a value";
  }
  return "?";
}

bool is_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::kString: return v.is_string();
    case Kind::kInt: return v.is_number_integer();
    case Kind::kNumber: return v.is_number();
    case Kind::kBool: return v.is_boolean();
    case Kind::kObject: return v.is_object();
    case Kind::kArray: return v.is_array();
    case Kind::kObjectOrNull: return v.is_object() || v.is_null();
    case Kind::kStringOrNull: return v.is_string() || v.is_null();
    case Kind::kNumberOrNull: return v.is_number() || v.is_null();
    case Kind::kAny: return true;
  }
  return false;
}

// Reads the fields of one object of report.json; every error names the file and the field's path.
class Fields {
 public:
  Fields(const json& j, std::string file, std::string path)
      : j_(j), file_(std::move(file)), path_(std::move(path)) {
    if (!j_.is_object())
      throw FormatError(msg("report", "{}: {}: expected an object, found {}", file_,
                            path_.empty() ? "the top level" : path_, j_.dump().substr(0, 60)));
  }
  const json& get(const char* key, Kind k) const {
    const std::string where = path_.empty() ? key : path_ + "." + key;
    if (!j_.contains(key))
      throw FormatError(msg("report", "{}: {}: missing (expected {})", file_, where, kind_name(k)));
    const json& v = j_.at(key);
    if (!is_kind(v, k))
      throw FormatError(msg("report", "{}: {}: expected {}, found {}", file_, where, kind_name(k),
                            v.dump().substr(0, 60)));
    return v;
  }
  std::string str(const char* key) const { return get(key, Kind::kString).get<std::string>(); }
  int64_t i64(const char* key) const { return get(key, Kind::kInt).get<int64_t>(); }
  double num(const char* key) const { return get(key, Kind::kNumber).get<double>(); }
  bool flag(const char* key) const { return get(key, Kind::kBool).get<bool>(); }
  Fields sub(const char* key) const {
    return Fields(get(key, Kind::kObject), file_, path_.empty() ? key : path_ + "." + key);
  }

 private:
  const json& j_;
  std::string file_, path_;
};

json row_to_json(const ComparisonRow& r) {
  return {{"method", r.method}, {"config", r.config}, {"parameters", r.parameters},
          {"search_tokens", r.search_tokens}, {"search_seconds", r.search_seconds},
          {"model", r.model}, {"predicted", r.predicted}, {"measured", r.measured},
          {"limits_predicted", r.limits_predicted}, {"limits_measured", r.limits_measured},
          {"measured_verdict", r.measured_verdict}, {"eval_after_prune", r.eval_after_prune},
          {"eval", r.eval}, {"distill", r.distill}, {"tasks", r.tasks},
          {"fit_attempts", r.fit_attempts}};
}

ComparisonRow row_from_json(const Fields& f) {
  ComparisonRow r;
  r.method = f.str("method");
  r.config = f.str("config");
  r.parameters = f.i64("parameters");
  r.search_tokens = f.i64("search_tokens");
  r.search_seconds = f.num("search_seconds");
  r.model = f.str("model");
  r.predicted = f.get("predicted", Kind::kObject);
  r.measured = f.get("measured", Kind::kObjectOrNull);
  r.limits_predicted = f.str("limits_predicted");
  r.limits_measured = f.get("limits_measured", Kind::kStringOrNull);
  r.measured_verdict = f.get("measured_verdict", Kind::kObjectOrNull);
  r.eval_after_prune = f.get("eval_after_prune", Kind::kObject);
  r.eval = f.get("eval", Kind::kObject);
  r.distill = f.get("distill", Kind::kObject);
  r.tasks = f.get("tasks", Kind::kObjectOrNull);
  r.fit_attempts = f.get("fit_attempts", Kind::kArray);
  return r;
}

}  // namespace

json RunReport::to_json() const {
  json rows = json::array();
  for (const ComparisonRow& r : comparison) rows.push_back(row_to_json(r));
  json stage_rows = json::array();
  for (const Stage& s : stages)
    stage_rows.push_back({{"stage", s.stage}, {"seconds", s.seconds}, {"resumed", s.resumed}});
  return {
      {"scenario", {{"name", scenario.name}, {"device", scenario.device},
                    {"engine", scenario.engine},
                    {"workload", {{"prompt_tokens", scenario.prompt_tokens},
                                  {"output_tokens", scenario.output_tokens},
                                  {"batch_size", scenario.batch_size}}},
                    {"limits", scenario.limits},
                    {"limits_for_search", scenario.limits_for_search},
                    {"limits_as_written", scenario.limits_as_written}}},
      {"device", {{"cpu_model", device.cpu_model}, {"cores", device.cores},
                  {"threads", device.threads}, {"torch", device.torch}}},
      {"compute", {{"device", compute.device}, {"precision", compute.precision},
                   {"gpu", compute.gpu}, {"distill_tokens_per_s", compute.distill_tokens_per_s},
                   {"distill_flops_per_token", compute.distill_flops_per_token},
                   {"distill_mfu", compute.distill_mfu},
                   {"peak_memory_bytes", compute.peak_memory_bytes}}},
      {"date", date},
      {"teacher", {{"config", teacher.config}, {"parameters", teacher.parameters},
                   {"predicted", teacher.predicted}, {"measured", teacher.measured},
                   {"eval", teacher.eval}}},
      {"compressed", {{"config", compressed.config}, {"hf_config", compressed.hf_config},
                      {"parameters", compressed.parameters},
                      {"predicted", compressed.predicted}, {"measured", compressed.measured},
                      {"limits_predicted", compressed.limits_predicted},
                      {"limits_measured", compressed.limits_measured},
                      {"measured_verdict", compressed.measured_verdict},
                      {"eval_after_prune", compressed.eval_after_prune},
                      {"eval", compressed.eval}}},
      {"search", {{"method", search.method}, {"candidates", search.candidates},
                  {"search_tokens", search.search_tokens},
                  {"search_seconds", search.search_seconds},
                  {"search_tokens_all_attempts", search.search_tokens_all_attempts},
                  {"search_seconds_all_attempts", search.search_seconds_all_attempts},
                  {"safety_margin", search.safety_margin}}},
      {"comparison", rows},
      {"distill", {{"tokens", distill.tokens}, {"steps", distill.steps},
                   {"skipped_steps", distill.skipped_steps}, {"wall_s", distill.wall_s},
                   {"first_loss", distill.first_loss}, {"last_loss", distill.last_loss}}},
      {"data", {{"source", data.source}, {"calibration_tokens", data.calibration_tokens},
                {"train_tokens", data.train_tokens}, {"heldout_tokens", data.heldout_tokens},
                {"heldout_documents_removed_for_overlap",
                 data.heldout_documents_removed_for_overlap}}},
      {"export", {{"path", exported.path}, {"reload_max_abs_diff", exported.reload_max_abs_diff},
                  {"gguf", exported.gguf}, {"engine_check", exported.engine_check}}},
      {"fit", {{"max_attempts", fit.max_attempts}, {"margin", fit.margin},
               {"attempts", fit.attempts}}},
      {"not_measured", not_measured},
      {"tasks", tasks},
      {"llama_cpp", llama_cpp},
      {"stages", stage_rows},
      {"total_seconds", total_seconds}};
}

RunReport RunReport::from_json(const json& j, const std::string& file) {
  RunReport r;
  const Fields top(j, file, "");
  const Fields s = top.sub("scenario"), w = s.sub("workload");
  r.scenario = {s.str("name"), s.str("device"), s.str("engine"), w.i64("prompt_tokens"),
                w.i64("output_tokens"), w.i64("batch_size"), s.get("limits", Kind::kObject),
                s.get("limits_for_search", Kind::kObject),
                s.get("limits_as_written", Kind::kObject)};
  const Fields d = top.sub("device");
  r.device = {d.str("cpu_model"), int(d.i64("cores")), int(d.i64("threads")), d.str("torch")};
  const Fields co = top.sub("compute");
  r.compute = {co.str("device"), co.str("precision"), co.str("gpu"),
               co.get("distill_tokens_per_s", Kind::kNumberOrNull),
               co.get("distill_flops_per_token", Kind::kNumberOrNull),
               co.get("distill_mfu", Kind::kNumberOrNull),
               co.get("peak_memory_bytes", Kind::kNumberOrNull)};
  r.date = top.str("date");
  const Fields t = top.sub("teacher");
  r.teacher = {t.str("config"), t.i64("parameters"), t.get("predicted", Kind::kObject),
               t.get("measured", Kind::kObjectOrNull), t.get("eval", Kind::kObject)};
  const Fields c = top.sub("compressed");
  r.compressed = {c.str("config"), c.get("hf_config", Kind::kObject), c.i64("parameters"),
                  c.get("predicted", Kind::kObject), c.get("measured", Kind::kObjectOrNull),
                  c.str("limits_predicted"), c.get("limits_measured", Kind::kStringOrNull),
                  c.get("measured_verdict", Kind::kObjectOrNull),
                  c.get("eval_after_prune", Kind::kObject), c.get("eval", Kind::kObject)};
  const Fields se = top.sub("search");
  r.search = {se.str("method"), se.i64("candidates"), se.i64("search_tokens"),
              se.i64("search_tokens_all_attempts"), se.num("search_seconds"),
              se.num("search_seconds_all_attempts"), se.num("safety_margin")};
  const json& rows = top.get("comparison", Kind::kArray);
  for (size_t i = 0; i < rows.size(); ++i)
    r.comparison.push_back(row_from_json(Fields(rows[i], file, fmt::format("comparison[{}]", i))));
  if (r.comparison.empty())
    throw FormatError(msg("report", "{}: comparison: expected at least the main result's row", file));
  const Fields di = top.sub("distill");
  r.distill = {di.i64("tokens"), di.i64("steps"), di.i64("skipped_steps"), di.num("wall_s"),
               di.num("first_loss"), di.num("last_loss")};
  const Fields da = top.sub("data");
  r.data = {da.get("source", Kind::kObject), da.i64("calibration_tokens"), da.i64("train_tokens"),
            da.i64("heldout_tokens"), da.i64("heldout_documents_removed_for_overlap")};
  const Fields e = top.sub("export");
  r.exported = {e.str("path"), e.num("reload_max_abs_diff"), e.get("gguf", Kind::kObjectOrNull),
                e.get("engine_check", Kind::kObjectOrNull)};
  const Fields fi = top.sub("fit");
  r.fit = {int(fi.i64("max_attempts")), fi.num("margin"), fi.get("attempts", Kind::kArray)};
  r.not_measured = top.str("not_measured");
  r.tasks = top.get("tasks", Kind::kObjectOrNull);
  r.llama_cpp = top.get("llama_cpp", Kind::kObjectOrNull);
  const json& st = top.get("stages", Kind::kArray);
  for (size_t i = 0; i < st.size(); ++i) {
    const Fields f(st[i], file, fmt::format("stages[{}]", i));
    r.stages.push_back({f.str("stage"), f.num("seconds"), f.flag("resumed")});
  }
  r.total_seconds = top.num("total_seconds");
  return r;
}

}  // namespace ac
