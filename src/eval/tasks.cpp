#include "eval/tasks.h"

#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "common/runtime.h"
#include "io/hf_unicode.h"
#include "io/text_tokenizer.h"

namespace ac {

using json = nlohmann::json;

const char* task_format_name(TaskFormat f) {
  return f == TaskFormat::kMultipleChoice ? "multiple_choice" : "loglikelihood";
}

namespace {

const char* const kWhere = "tasks";

// "[tasks] FILE:LINE: ..." for the line being parsed.
struct LineRef {
  const std::string& file;
  int64_t line;
  template <typename... Args>
  FormatError error(fmt::format_string<Args...> f, Args&&... args) const {
    return FormatError(msg(kWhere, "{}:{}: {}", file, line,
                           fmt::format(f, std::forward<Args>(args)...)));
  }
};

void check_keys(const json& j, const std::set<std::string>& allowed, const LineRef& at) {
  for (const auto& [key, value] : j.items())
    if (!allowed.count(key))
      throw at.error("unknown key '{}' (allowed: {})", key, fmt::join(allowed, ", "));
}

std::string get_string(const json& j, const char* key, const LineRef& at, bool non_empty) {
  if (!j.contains(key)) throw at.error("missing key '{}'", key);
  if (!j[key].is_string()) throw at.error("'{}' must be a string, found {}", key, j[key].dump());
  std::string s = j[key].get<std::string>();
  if (non_empty && s.empty()) throw at.error("'{}' is empty", key);
  return s;
}

TaskFormat parse_format(const json& v, const LineRef& at) {
  if (v.is_string() && v == "multiple_choice") return TaskFormat::kMultipleChoice;
  if (v.is_string() && v == "loglikelihood") return TaskFormat::kLoglikelihood;
  throw at.error("'format' is {}, expected \"multiple_choice\" or \"loglikelihood\"", v.dump());
}

void parse_header(const json& h, const LineRef& at, Task& t) {
  if (!h.is_object())
    throw at.error("line 1 must be the header object {{\"format\": ...}}, found {}",
                   h.dump().substr(0, 80));
  check_keys(h, {"format", "name", "description", "target_delimiter", "meta"}, at);
  if (!h.contains("format"))
    throw at.error("the header has no 'format' (\"multiple_choice\" or \"loglikelihood\")");
  t.format = parse_format(h["format"], at);
  if (h.contains("name")) t.name = get_string(h, "name", at, true);
  if (h.contains("description")) t.description = get_string(h, "description", at, false);
  if (h.contains("target_delimiter"))
    t.target_delimiter = get_string(h, "target_delimiter", at, false);
  if (h.contains("meta")) t.meta = h["meta"];
}

TaskItem parse_item(const json& j, const LineRef& at, const Task& t) {
  if (!j.is_object()) throw at.error("an item must be a JSON object, found {}", j.dump().substr(0, 80));
  const bool mc = t.format == TaskFormat::kMultipleChoice;
  if (mc)
    check_keys(j, {"context", "choices", "gold", "id", "format"}, at);
  else
    check_keys(j, {"context", "target", "id", "format"}, at);
  if (j.contains("format") && parse_format(j["format"], at) != t.format)
    throw at.error("'format' is {} but the header says \"{}\"", j["format"].dump(),
                   task_format_name(t.format));
  TaskItem it;
  it.line = at.line;
  it.context = get_string(j, "context", at, true);
  if (j.contains("id")) it.id = j["id"];
  if (!mc) {
    it.choices = {get_string(j, "target", at, true)};
    return it;
  }
  if (!j.contains("choices")) throw at.error("missing key 'choices'");
  const json& c = j["choices"];
  if (!c.is_array() || c.size() < 2)
    throw at.error("'choices' must be an array of at least 2 strings, found {}", c.dump().substr(0, 80));
  for (size_t k = 0; k < c.size(); ++k) {
    if (!c[k].is_string() || c[k].get<std::string>().empty())
      throw at.error("choice {} must be a non-empty string, found {}", k, c[k].dump());
    it.choices.push_back(c[k].get<std::string>());
  }
  if (!j.contains("gold")) throw at.error("missing key 'gold'");
  if (!j["gold"].is_number_integer())
    throw at.error("'gold' must be an integer index into 'choices', found {}", j["gold"].dump());
  it.gold = j["gold"].get<int64_t>();
  if (it.gold < 0 || it.gold >= int64_t(it.choices.size()))
    throw at.error("'gold' is {}, outside [0, {}) of the {} choices", it.gold, it.choices.size(),
                   it.choices.size());
  return it;
}

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

Task read_task_file(const fs::path& path) {
  const std::string text = read_file(path), file = path.string();
  Task t;
  t.file = file;
  t.name = path.stem().string();
  size_t pos = 0;
  bool have_header = false;
  for (int64_t line = 1; pos < text.size(); ++line) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string s = text.substr(pos, nl - pos);
    pos = nl + 1;
    const LineRef at{file, line};
    if (blank(s)) {
      if (line == 1) throw at.error("line 1 is blank; it must be the header {{\"format\": ...}}");
      continue;
    }
    json j;
    try {
      j = json::parse(s);
    } catch (const json::exception& e) {
      throw at.error("invalid JSON: {}", e.what());
    }
    if (!have_header) {
      parse_header(j, at, t);
      have_header = true;
    } else {
      t.items.push_back(parse_item(j, at, t));
    }
  }
  if (!have_header) throw FormatError(msg(kWhere, "{}: empty file (expected a header line, then items)", file));
  if (t.items.empty()) throw FormatError(msg(kWhere, "{}: a header but no items", file));
  return t;
}

void write_task_file(const fs::path& path, const Task& task) {
  json header = {{"format", task_format_name(task.format)}, {"name", task.name}};
  if (!task.description.empty()) header["description"] = task.description;
  header["target_delimiter"] = task.target_delimiter;
  if (!task.meta.is_null()) header["meta"] = task.meta;
  std::string out;
  try {
    out = header.dump() + "\n";
    for (const TaskItem& it : task.items) {
      json j = json::object();
      if (!it.id.is_null()) j["id"] = it.id;
      j["context"] = it.context;
      if (task.format == TaskFormat::kMultipleChoice) {
        j["choices"] = it.choices;
        j["gold"] = it.gold;
      } else {
        j["target"] = it.choices.at(0);
      }
      out += j.dump() + "\n";
    }
  } catch (const json::exception& e) {
    throw ConfigError(msg(kWhere, "{}: cannot write task '{}': {}", path.string(), task.name, e.what()));
  }
  write_file_atomic(path, out);
}

size_t python_rstrip_length(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    const uint32_t cp = hf::next_code_point(s, i);
    if (!hf::is_white_space(cp) && !(cp >= 0x1C && cp <= 0x1F)) break;
    end = start;
  }
  return end;
}

int64_t code_points(std::string_view s) {
  int64_t n = 0;
  for (const char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

std::vector<LoglikelihoodRequest> task_requests(const Task& task, const TextTokenizer& tokenizer) {
  std::vector<LoglikelihoodRequest> out;
  for (const TaskItem& it : task.items) {
    // HFLM._encode_pair: trailing white space of the context (str.rstrip) moves to the
    // continuation; the context is encoded on its own and the continuation is what the whole
    // text adds after as many tokens.
    const std::string context = it.context.substr(0, python_rstrip_length(it.context));
    const std::string moved = it.context.substr(context.size());
    const std::vector<int64_t> ctx = tokenizer.encode(context, /*add_special_tokens=*/true);
    for (const std::string& choice : it.choices) {
      std::vector<int64_t> whole =
          tokenizer.encode(context + moved + task.target_delimiter + choice,
                           /*add_special_tokens=*/true);
      if (whole.size() <= ctx.size())
        throw FormatError(msg(kWhere, "{}:{}: the choice '{}' adds no token after the context",
                              task.file, it.line, choice));
      LoglikelihoodRequest r;
      r.context = ctx;
      r.continuation.assign(whole.begin() + int64_t(ctx.size()), whole.end());
      out.push_back(std::move(r));
    }
  }
  return out;
}

double mean_stderr(const std::vector<double>& x) {
  const size_t n = x.size();
  if (n < 2) return std::nan("");
  double mean = 0, ss = 0;
  for (double v : x) mean += v;
  mean /= double(n);
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
}

namespace {

MetricValue mean_metric(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return {x.empty() ? 0.0 : s / double(x.size()), mean_stderr(x)};
}

// numpy.argmax: the first of equal maxima.
size_t argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

TaskResult score_task(const Task& task, const std::vector<LoglikelihoodResult>& results) {
  size_t expected = 0;
  for (const TaskItem& it : task.items) expected += it.choices.size();
  if (results.size() != expected)
    throw ConfigError(msg(kWhere, "task '{}': {} results for {} requests", task.name,
                          results.size(), expected));
  TaskResult r;
  r.name = task.name;
  r.format = task.format;
  r.file = task.file;
  r.n = int64_t(task.items.size());
  r.requests = int64_t(results.size());
  for (const auto& x : results) r.continuation_tokens += x.tokens;
  std::vector<double> acc, acc_norm, ll;
  size_t k = 0;
  double chance = 0;
  std::map<std::string, int64_t> targets;
  for (const TaskItem& it : task.items) {
    TaskItemScore score;
    if (task.format == TaskFormat::kLoglikelihood) {
      score.loglikelihoods = {results[k].loglikelihood};
      score.is_greedy = {results[k].is_greedy};
      score.acc = results[k].is_greedy ? 1.0 : 0.0;
      acc.push_back(score.acc);
      ll.push_back(results[k].loglikelihood);
      ++targets[it.choices[0]];
      ++k;
      r.items.push_back(std::move(score));
      continue;
    }
    std::vector<double> normed;
    for (const std::string& c : it.choices) {
      score.loglikelihoods.push_back(results[k].loglikelihood);
      score.is_greedy.push_back(results[k].is_greedy);
      // lm-eval's acc_norm divides by len(c) of a Python str: code points, not bytes.
      normed.push_back(results[k].loglikelihood / double(code_points(c)));
      ++k;
    }
    score.acc = int64_t(argmax(score.loglikelihoods)) == it.gold ? 1.0 : 0.0;
    score.acc_norm = int64_t(argmax(normed)) == it.gold ? 1.0 : 0.0;
    acc.push_back(score.acc);
    acc_norm.push_back(score.acc_norm);
    chance += 1.0 / double(it.choices.size());
    r.items.push_back(std::move(score));
  }
  r.metrics.emplace_back("acc", mean_metric(acc));
  if (task.format == TaskFormat::kMultipleChoice) {
    r.metrics.emplace_back("acc_norm", mean_metric(acc_norm));
    r.baseline = chance / double(r.n);
    r.baseline_kind = "chance";
  } else {
    MetricValue m = mean_metric(ll);
    r.metrics.emplace_back("loglikelihood", m);
    r.metrics.emplace_back("perplexity", MetricValue{std::exp(-m.value), std::nan("")});
    int64_t most = 0;
    for (const auto& [t, count] : targets) most = std::max(most, count);
    r.baseline = double(most) / double(r.n);
    r.baseline_kind = "most frequent target";
  }
  return r;
}

TaskResult evaluate_task(const LlamaModel& model, const TextTokenizer& tokenizer, const Task& task,
                         const LoglikelihoodOptions& opt) {
  const double t0 = now_s();
  // A model's embedding may have more rows than its tokenizer has ids (Qwen2 pads to a multiple
  // of 128), never fewer.
  if (tokenizer.vocab_size() > model.config.vocab_size)
    throw ConfigError(msg(kWhere, "task '{}': the tokenizer has {} tokens, more than the model's "
                          "vocab_size {}",
                          task.name, tokenizer.vocab_size(), model.config.vocab_size));
  const std::vector<LoglikelihoodRequest> requests = task_requests(task, tokenizer);
  TaskResult r = score_task(task, loglikelihoods(model, requests, opt));
  size_t k = 0;
  for (TaskItemScore& item : r.items) {
    item.context_tokens = requests[k].context;  // the same for every choice of an item
    for (size_t c = 0; c < item.loglikelihoods.size(); ++c)
      item.continuation_tokens.push_back(requests[k++].continuation);
  }
  r.wall_s = now_s() - t0;
  return r;
}

json task_sample_json(const Task& task, const TaskResult& result, size_t k) {
  if (result.items.size() != task.items.size() || k >= task.items.size())
    throw ConfigError(msg(kWhere, "task '{}': item {} of {} scored items for {} items", task.name,
                          k, result.items.size(), task.items.size()));
  const TaskItem& it = task.items[k];
  const TaskItemScore& s = result.items[k];
  const bool mc = task.format == TaskFormat::kMultipleChoice;
  json j = {{"task", task.name}, {"doc_id", k}, {"line", it.line}, {"id", it.id}};
  if (mc) j["gold"] = it.gold;
  j["choices"] = it.choices;
  j["context_tokens"] = s.context_tokens;
  j["continuation_tokens"] = s.continuation_tokens;
  j["loglikelihoods"] = s.loglikelihoods;
  j["is_greedy"] = s.is_greedy;
  j["acc"] = s.acc;
  if (mc) j["acc_norm"] = s.acc_norm;
  return j;
}

const MetricValue& TaskResult::metric(const std::string& name) const {
  for (const auto& [k, v] : metrics)
    if (k == name) return v;
  throw ConfigError(msg(kWhere, "task '{}' has no metric '{}'", this->name, name));
}

json TaskResult::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json m = json::object();
  for (const auto& [k, v] : metrics) m[k] = {{"value", num(v.value)}, {"stderr", num(v.std_error)}};
  return {{"task", name},
          {"format", task_format_name(format)},
          {"file", file},
          {"n", n},
          {"metrics", m},
          {"baseline", {{"value", baseline}, {"kind", baseline_kind}}},
          {"requests", requests},
          {"continuation_tokens", continuation_tokens},
          {"wall_s", wall_s}};
}

}  // namespace ac
