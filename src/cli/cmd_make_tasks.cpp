// `autocompress make-tasks`: in-domain benchmark tasks (cloze, story ending, character) from
// held-out stories, for `eval --tasks` (eval/make_tasks.h, docs/eval.md).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/flag_checks.h"
#include "cli/data_options.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "data/data_source.h"
#include "data/text_corpus.h"
#include "eval/make_tasks.h"
#include "model/config.h"
#include "io/checkpoint.h"
#include "io/text_tokenizer.h"

namespace ac::cli {
namespace {

struct MakeTasksArgs {
  std::string model, out;
  DataArgs data;
  MakeTasksOptions opt;
};

void run(const MakeTasksArgs& a) {
  check_not_overwriting_inputs({a.model, a.data.path}, a.out, "make-tasks");
  check_output_flag("make-tasks", "--out", a.out, OutputKind::kFolder);
  const fs::path config_path = fs::path(a.model) / "config.json";
  ModelConfig config = config_from_hf_json(read_json_file(config_path), config_path.string());
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(a.model, config.vocab_size);
  LoadedData data =
      load_data(a.data.spec(DataSplit::kHeldout), a.model, config.vocab_size, "make-tasks");
  if (data.vocab_size != 0 && data.vocab_size != config.vocab_size)
    throw ConfigError(msg("make-tasks", "{} was written for vocab_size {}, the model {} has {}",
                          a.data.path, data.vocab_size, a.model, config.vocab_size));
  std::vector<std::string> stories = decode_documents(data.ids, *tok);
  StoryTasks tasks;
  try {
    tasks = make_story_tasks(stories, a.opt);
  } catch (const ConfigError& e) {
    // Too few stories from one plain-text file: it was read as one story, not several.
    if (stories.size() > 1 || !is_plain_text_input(a.data.path)) throw;
    throw ConfigError(fmt::format("{}; --data {}: {}", e.what(), a.data.path,
                                  several_documents_hint(a.data.text_field)));
  }
  nlohmann::json meta = {{"generator", "autocompress make-tasks"},
                         {"source", fs::path(a.data.path).filename().string()},
                         {"data_source", data.source},
                         {"seed", a.opt.seed},
                         {"stories", tasks.stories},
                         {"skipped_stories", tasks.skipped_stories}};
  std::string summary;
  for (const Task* t : {&tasks.cloze, &tasks.story_ending, &tasks.character}) {
    const fs::path path = fs::path(a.out) / (t->name + ".jsonl");
    if (t->items.empty())
      summary += fmt::format("{}: not written, the stories give no item\n", path.string());
    else if (t->format == TaskFormat::kMultipleChoice)
      summary += fmt::format("{}: {} items ({} choices)\n", path.string(), t->items.size(),
                             a.opt.num_choices);
    else
      summary += fmt::format("{}: {} items\n", path.string(), t->items.size());
  }
  write_story_tasks(a.out, std::move(tasks), meta);
  std::fputs(summary.c_str(), stdout);
}

RegisterCommand reg(82, [](CLI::App& app) {
  auto* s = app.add_subcommand("make-tasks", "Cloze, story-ending and character tasks (JSONL) "
                                             "from held-out documents");
  auto a = std::make_shared<MakeTasksArgs>();
  s->add_option("--model", a->model, "Checkpoint folder (config.json, tokenizer.json or "
                                     "tokenizer.bin)")->required();
  add_data_options(s, a->data, "Held-out documents the tasks are built from",
                   DataSplit::kHeldout)->required();
  s->add_option("--out", a->out, "Output folder: cloze.jsonl, story_ending.jsonl, "
                                 "character.jsonl (absent when no story names a character)")
      ->required();
  s->add_option("--seed", a->opt.seed, "Seed of the item choice and the distractors")->required();
  s->add_option("--cloze-items", a->opt.cloze_items, "At most this many cloze items")
      ->capture_default_str();
  s->add_option("--ending-items", a->opt.ending_items, "At most this many story-ending items")
      ->capture_default_str();
  s->add_option("--character-items", a->opt.character_items,
                "At most this many character items")->capture_default_str();
  s->add_option("--choices", a->opt.num_choices, "Choices per story-ending and character item")
      ->capture_default_str();
  s->add_option("--min-context-words", a->opt.min_context_words,
                "Cloze: words of context before the target")->capture_default_str();
  s->callback([a] { run(*a); });
});

}  // namespace
}  // namespace ac::cli
