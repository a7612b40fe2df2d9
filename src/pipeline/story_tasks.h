// The `tasks` stage of `compress`: in-domain benchmark tasks (eval/make_tasks.h) built from the
// held-out stories, scored on the teacher and on the compressed model (eval/tasks.h), so that
// report.md compares them on accuracy, not only perplexity.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fs.h"
#include "model/llama.h"

namespace ac {

struct StoryTasksStageOptions {
  fs::path teacher_dir;  // its tokenizer (.json or .bin) decodes the stories, encodes the tasks
  uint64_t seed = 0;     // make-tasks seed
  int64_t max_items = 200;  // per task; 0 = skip the stage
  fs::path out_dir;      // writes out_dir/cloze.jsonl, story_ending.jsonl, character.jsonl
  std::string files_prefix = "tasks";  // how report.json names out_dir
  bool score_teacher = true;  // false: "teacher" is left out (a comparison row: the same
                              // items as the main result's, whose teacher scores are there)
};

/// Builds the tasks from `heldout` [N] (documents framed by BOS / EOS, eval/make_tasks.h
/// decode_documents), writes them, and scores both models: cloze, story_ending and, when the
/// stories give any item, character; max_items caps each. Returns report.json's "tasks":
/// {"files", "seed", "max_items", "teacher": [TaskResult...] (when opt.score_teacher),
/// "compressed": [...], "wall_s"}, or
/// {"skipped": reason} when max_items is 0, the teacher has no tokenizer or the documents give
/// no cloze or no story-ending item. Throws as evaluate_task does.
nlohmann::json run_story_tasks_stage(const LlamaModel& teacher, const LlamaModel& student,
                                     const std::vector<int32_t>& heldout,
                                     const StoryTasksStageOptions& opt);

/// report.md's section for report.json "tasks": one row per task and metric, teacher and
/// compressed (value ± stderr), n and the baseline; a line when the stage was skipped.
std::string render_story_tasks_md(const nlohmann::json& tasks);

}  // namespace ac
