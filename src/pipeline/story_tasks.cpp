#include "pipeline/story_tasks.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/runtime.h"
#include "eval/make_tasks.h"
#include "eval/tasks.h"
#include "io/text_tokenizer.h"

namespace ac {

nlohmann::json run_story_tasks_stage(const LlamaModel& teacher, const LlamaModel& student,
                                     const std::vector<int32_t>& heldout,
                                     const StoryTasksStageOptions& opt) {
  using json = nlohmann::json;
  if (opt.max_items <= 0) return {{"skipped", "task items set to 0"}};
  if (!fs::exists(opt.teacher_dir / "tokenizer.json") && !fs::exists(opt.teacher_dir / "tokenizer.bin"))
    return {{"skipped", "the teacher folder has no tokenizer.json or tokenizer.bin"}};
  const double t0 = now_s();
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(opt.teacher_dir, teacher.config.vocab_size);
  MakeTasksOptions mo;
  mo.seed = opt.seed;
  mo.cloze_items = mo.ending_items = mo.character_items = opt.max_items;
  StoryTasks st;
  try {
    st = make_story_tasks(decode_documents(heldout, *tok), mo);
  } catch (const ConfigError& e) {  // too few held-out stories: the run still has its report
    return {{"skipped", e.what()}};
  }
  std::vector<Task> tasks = {st.cloze, st.story_ending};
  if (!st.character.items.empty()) tasks.push_back(st.character);  // absent when no story names one
  json meta = {{"generator", "autocompress compress"}, {"source", "data/heldout.tokens"},
               {"seed", opt.seed}, {"stories", st.stories},
               {"skipped_stories", st.skipped_stories}};
  json j = {{"files", json::array()}, {"seed", opt.seed}, {"max_items", opt.max_items},
            {"compressed", json::array()}};
  if (opt.score_teacher) j["teacher"] = json::array();
  for (const fs::path& p : write_story_tasks(opt.out_dir, std::move(st), meta))
    j["files"].push_back((fs::path(opt.files_prefix) / p.filename()).string());
  for (Task& t : tasks) {
    t.file = (fs::path(opt.files_prefix) / (t.name + ".jsonl")).string();
    if (opt.score_teacher) j["teacher"].push_back(evaluate_task(teacher, *tok, t).to_json());
    j["compressed"].push_back(evaluate_task(student, *tok, t).to_json());
    log_info(fmt::format("[compress] task {}: {} items, acc {}compressed {:.3f}", t.name,
                         t.items.size(),
                         opt.score_teacher
                             ? fmt::format("teacher {:.3f}, ",
                                           j["teacher"].back()["metrics"]["acc"]["value"].get<double>())
                             : std::string(),
                         j["compressed"].back()["metrics"]["acc"]["value"].get<double>()));
  }
  j["wall_s"] = now_s() - t0;
  return j;
}

namespace {

std::string value_cell(const nlohmann::json& m) {
  if (m["value"].is_null()) return "—";
  std::string s = fmt::format("{:.4f}", m["value"].get<double>());
  if (!m["stderr"].is_null()) s += fmt::format(" ± {:.4f}", m["stderr"].get<double>());
  return s;
}

}  // namespace

std::string render_story_tasks_md(const nlohmann::json& tasks) {
  std::string md = "\n## In-domain tasks (built from the held-out stories)\n\n";
  if (tasks.contains("skipped"))
    return md + fmt::format("Skipped: {}.\n", tasks["skipped"].get<std::string>());
  md += "acc of cloze: the greedy continuation is exactly the sentence's last word; story_ending: "
        "the true next sentence has the highest log-likelihood (acc_norm: per byte); character: "
        "at a later mention of one of the story's characters, the true name has the highest "
        "log-likelihood, against names of characters of other stories. ± is the standard "
        "error.\n\n";
  md += "| task | metric | n | teacher | compressed | baseline |\n|---|---|---|---|---|---|\n";
  const auto& t = tasks["teacher"];
  const auto& c = tasks["compressed"];
  for (size_t i = 0; i < t.size(); ++i)
    for (const auto& [name, m] : t[i]["metrics"].items()) {
      const bool acc = name.rfind("acc", 0) == 0;
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", t[i]["task"].get<std::string>(), name,
                        t[i]["n"].get<int64_t>(), value_cell(m), value_cell(c[i]["metrics"][name]),
                        acc ? fmt::format("{:.4f} ({})", t[i]["baseline"]["value"].get<double>(),
                                          t[i]["baseline"]["kind"].get<std::string>())
                            : "");
    }
  md += fmt::format("\nTask files: {}.\n", fmt::join(tasks["files"].get<std::vector<std::string>>(), ", "));
  return md;
}

}  // namespace ac
