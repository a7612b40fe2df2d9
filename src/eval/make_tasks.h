// In-domain benchmark tasks for story models, built from held-out story text (`make-tasks`).
//
//   cloze         (loglikelihood, LAMBADA-style; Paperno et al., 2016): the context is a story
//                 up to the last word of one of its sentences, the target is that word. A word
//                 qualifies when it is ASCII letters only (2 or more), follows a space, and at
//                 least `min_context_words` words precede it.
//   story_ending  (multiple_choice, in the spirit of the Story Cloze Test; Mostafazadeh et al.,
//                 2016): the context is a story's first i >= 1 sentences, the choices are its
//                 true sentence i and num_choices - 1 sentences from other stories (never a
//                 story's first sentence; of similar length when possible: within 0.5x-2x
//                 bytes), the true one at a seeded random position.
//   character     (multiple_choice; a named character's consistency): the context is a story up
//                 to a later mention of one of its characters' names, the choices are that name
//                 and num_choices - 1 names of characters of other stories that are not a word
//                 of this story (ignoring case), the true one at a seeded random position.
//                 Names (character_names): a word is a maximal run of ASCII letters with no
//                 digit or non-ASCII byte beside it; a name of a story is a word of 2 or more
//                 letters, upper-case then lower-case ("Lily", not "TV" or "McDo"), not in the
//                 stop list (I; the titles Mr, Mrs, Ms, Dr, which precede a name; the days of
//                 the week; Christmas, Easter, Halloween), that occurs at least once in the
//                 story mid-sentence: not directly after a quote mark, not at the start of a
//                 line, and not after the start of the text, '.', '!', '?' or ':' (skipping
//                 white space and quote marks). So "The", "One" or a quoted "Look" are no names
//                 unless they also occur mid-sentence. A mention of a name qualifies when it
//                 follows a space, lies in a sentence and the name occurs as a word before it;
//                 each sentence gives at most one item (a seeded one of its mentions), and a
//                 story with fewer than num_choices - 1 distractor candidates gives none. When
//                 the stories give no character item the task is absent (no items, no file);
//                 cloze and story_ending have no such leniency.
// Sentences end at '.', '!' or '?' (runs of them, then closing quotes) followed by the end of
// the text, or by white space and then an upper-case letter or a quote; so '"Hi!" said Tom.'
// is one sentence. Text after the last end is dropped (stories cut at the sampling length).
// Candidates of every story are pooled and a seeded choice of at most max_items is kept, in
// story order. Everything is a function of (stories, options): the same seed gives the same
// files on every platform (splitmix64, data/dataset.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/tasks.h"

namespace ac {

class TextTokenizer;

/// A sentence of a text: bytes [begin, end).
struct SentenceSpan {
  size_t begin = 0, end = 0;
};

/// The sentences of `text` by the rule above.
std::vector<SentenceSpan> split_sentences(const std::string& text);

/// The character names of a story `text` by the rule above, sorted (byte order), each once.
std::vector<std::string> character_names(const std::string& text);

/// True if `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s);

struct MakeTasksOptions {
  uint64_t seed = 0;
  int64_t cloze_items = 200;      // at most this many cloze items
  int64_t ending_items = 200;     // at most this many story-ending items
  int64_t character_items = 200;  // at most this many character items
  int64_t num_choices = 4;        // choices per story-ending and character item (>= 2)
  int64_t min_context_words = 4;  // cloze: words before the target
};

struct StoryTasks {
  Task cloze;                // loglikelihood, name "cloze"
  Task story_ending;         // multiple_choice, name "story_ending"
  Task character;            // multiple_choice, name "character"; no items when absent
  int64_t stories = 0;       // stories used
  int64_t skipped_stories = 0;  // not valid UTF-8, or empty
};

/// Builds the three tasks from story texts. Items carry ids "s<story>-<sentence>" (story: index
/// among the stories used). Throws ConfigError on invalid options, or when the stories give no
/// cloze or no story-ending item (too few stories or sentences); no character item is no error
/// (`character` is then empty).
StoryTasks make_story_tasks(const std::vector<std::string>& stories, const MakeTasksOptions& opt);

/// The text of each document of a token stream [N] (TextTokenizer::decode without special
/// tokens; empty documents dropped). A document starts at a BOS and ends after an EOS
/// (data/token_file.h framing: BOS-separated llama2.c streams, [BOS] text [EOS] from the user's
/// text, EOS-terminated for tokenizers without BOS). Throws ConfigError on an id outside the
/// tokenizer's vocabulary.
std::vector<std::string> decode_documents(const std::vector<int32_t>& ids,
                                          const TextTokenizer& tokenizer);

/// Writes DIR/cloze.jsonl, DIR/story_ending.jsonl and DIR/character.jsonl, each atomically
/// (DIR is created), with `meta` in every header. A task without items is not written and a
/// file of that name left by an earlier run is removed, so DIR holds this call's tasks only.
/// Returns the paths written, in that order.
std::vector<fs::path> write_story_tasks(const fs::path& dir, StoryTasks tasks,
                                        const nlohmann::json& meta);

}  // namespace ac
