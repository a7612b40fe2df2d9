#include "eval/make_tasks.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_set>

#include "common/error.h"
#include "data/dataset.h"
#include "io/text_tokenizer.h"

namespace ac {

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_end(char c) { return c == '.' || c == '!' || c == '?'; }
bool is_quote(char c) { return c == '"' || c == '\''; }
bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

size_t skip_space(const std::string& t, size_t i) {
  while (i < t.size() && is_space(t[i])) ++i;
  return i;
}

// splitmix64 as a stream: the same numbers on every platform.
struct Rng {
  uint64_t state;
  uint64_t next() { return state = mix_seed(state); }
  size_t below(size_t n) { return size_t(next() % uint64_t(n)); }
};

int64_t count_words(const std::string& s) {
  int64_t n = 0;
  for (size_t i = skip_space(s, 0); i < s.size(); i = skip_space(s, i)) {
    ++n;
    while (i < s.size() && !is_space(s[i])) ++i;
  }
  return n;
}

std::string rtrim(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

struct Story {
  std::string text;
  std::vector<SentenceSpan> sentences;
  std::string sentence(size_t i) const {
    return text.substr(sentences[i].begin, sentences[i].end - sentences[i].begin);
  }
};

// The cloze item of sentence i of a story, if its last word qualifies.
bool cloze_item(const Story& s, size_t i, int64_t min_words, TaskItem& item) {
  const SentenceSpan& sp = s.sentences[i];
  size_t end = sp.end;  // the word ends before the closing punctuation
  while (end > sp.begin && (is_end(s.text[end - 1]) || is_quote(s.text[end - 1]))) --end;
  if (end == sp.end) return false;
  size_t begin = end;
  while (begin > sp.begin && is_letter(s.text[begin - 1])) --begin;
  if (end - begin < 2 || begin == 0 || s.text[begin - 1] != ' ') return false;
  std::string context = s.text.substr(0, begin - 1);
  if (count_words(context) < min_words) return false;
  item.context = rtrim(context);
  item.choices = {s.text.substr(begin, end - begin)};
  item.gold = 0;
  return true;
}

// Up to max_items of `count` candidates, a seeded choice, in candidate order.
std::vector<int64_t> choose(int64_t count, int64_t max_items, uint64_t seed) {
  std::vector<int64_t> p = seeded_permutation(count, seed);
  p.resize(size_t(std::min(count, max_items)));
  std::sort(p.begin(), p.end());
  return p;
}

std::string item_id(size_t story, size_t sentence) {
  return fmt::format("s{}-{}", story, sentence);
}

Task make_cloze(const std::vector<Story>& stories, const MakeTasksOptions& opt) {
  std::vector<TaskItem> candidates;
  for (size_t s = 0; s < stories.size(); ++s)
    for (size_t i = 0; i < stories[s].sentences.size(); ++i) {
      TaskItem it;
      if (!cloze_item(stories[s], i, opt.min_context_words, it)) continue;
      it.id = item_id(s, i);
      candidates.push_back(std::move(it));
    }
  Task t;
  t.name = "cloze";
  t.format = TaskFormat::kLoglikelihood;
  t.description = "Last word of a sentence of a held-out story, given the story up to it "
                  "(LAMBADA-style; acc = greedy continuation equals the word)";
  for (int64_t k : choose(int64_t(candidates.size()), opt.cloze_items, mix_seed(opt.seed ^ 0xC107E)))
    t.items.push_back(candidates[size_t(k)]);
  return t;
}

Task make_ending(const std::vector<Story>& stories, const MakeTasksOptions& opt) {
  // Candidate sentences: every sentence after the first that fits on one line.
  std::vector<std::pair<size_t, size_t>> pool;
  for (size_t s = 0; s < stories.size(); ++s)
    for (size_t i = 1; i < stories[s].sentences.size(); ++i)
      if (stories[s].sentence(i).find('\n') == std::string::npos) pool.emplace_back(s, i);
  Task t;
  t.name = "story_ending";
  t.format = TaskFormat::kMultipleChoice;
  t.description = fmt::format("The next sentence of a held-out story: the true one vs {} from "
                              "other stories", opt.num_choices - 1);
  const uint64_t seed = mix_seed(opt.seed ^ 0xE4D1);
  for (int64_t k : choose(int64_t(pool.size()), opt.ending_items, seed)) {
    const auto [s, i] = pool[size_t(k)];
    const std::string truth = stories[s].sentence(i);
    Rng rng{mix_seed(seed ^ mix_seed(uint64_t(k)))};
    std::vector<std::string> picks;
    for (int attempt = 0; attempt < 2000 && int64_t(picks.size()) < opt.num_choices - 1; ++attempt) {
      const auto [s2, i2] = pool[rng.below(pool.size())];
      if (s2 == s) continue;
      std::string other = stories[s2].sentence(i2);
      if (other == truth || std::find(picks.begin(), picks.end(), other) != picks.end()) continue;
      const double ratio = double(other.size()) / double(truth.size());
      if (attempt < 1000 && (ratio < 0.5 || ratio > 2.0)) continue;  // similar length first
      picks.push_back(std::move(other));
    }
    if (int64_t(picks.size()) < opt.num_choices - 1) continue;
    TaskItem it;
    it.id = item_id(s, i);
    it.context = rtrim(stories[s].text.substr(0, stories[s].sentences[i].begin));
    it.gold = int64_t(rng.below(size_t(opt.num_choices)));
    it.choices = std::move(picks);
    it.choices.insert(it.choices.begin() + it.gold, truth);
    t.items.push_back(std::move(it));
  }
  return t;
}

// ---- character -------------------------------------------------------------------------------

bool is_ascii_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
// A byte that may not touch a word: a digit or part of a non-ASCII character.
bool sticks_to_word(char c) {
  return (c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80;
}

struct WordSpan {
  size_t begin = 0, end = 0;
};

// Maximal runs of ASCII letters with no digit or non-ASCII byte beside them, in text order.
std::vector<WordSpan> ascii_words(const std::string& t) {
  std::vector<WordSpan> out;
  for (size_t i = 0; i < t.size();) {
    if (!is_ascii_letter(t[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < t.size() && is_ascii_letter(t[j])) ++j;
    if (!(i > 0 && sticks_to_word(t[i - 1])) && !(j < t.size() && sticks_to_word(t[j])))
      out.push_back({i, j});
    i = j;
  }
  return out;
}

// Whether the word at `begin` opens a sentence, a quotation, a line or a clause after ':'.
bool starts_sentence(const std::string& t, size_t begin) {
  if (begin > 0 && is_quote(t[begin - 1])) return true;
  size_t k = begin;
  for (; k > 0 && (is_space(t[k - 1]) || is_quote(t[k - 1])); --k)
    if (t[k - 1] == '\n') return true;
  return k == 0 || is_end(t[k - 1]) || t[k - 1] == ':';
}

bool name_shaped(const std::string& w) {
  static const std::set<std::string> kNotNames = {
      "I",        "Mr",     "Mrs",      "Ms",     "Dr",        "Monday", "Tuesday",  "Wednesday",
      "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Easter", "Halloween"};
  if (w.size() < 2 || !std::isupper(static_cast<unsigned char>(w[0]))) return false;
  for (size_t i = 1; i < w.size(); ++i)
    if (!std::islower(static_cast<unsigned char>(w[i]))) return false;
  return kNotNames.count(w) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A (story, sentence) with its qualifying mentions (byte offsets of a name).
struct MentionSentence {
  size_t story = 0, sentence = 0;
  std::vector<size_t> mentions;
};

// The sentences of story s with qualifying mentions of its `names` (see make_tasks.h).
void collect_mentions(const Story& st, size_t s, const std::vector<std::string>& names,
                      std::vector<MentionSentence>& out) {
  const std::set<std::string> is_name(names.begin(), names.end());
  std::set<std::string> seen;
  size_t i = 0;  // the sentence at or after the current word
  for (const WordSpan& w : ascii_words(st.text)) {
    const std::string word = st.text.substr(w.begin, w.end - w.begin);
    while (i < st.sentences.size() && st.sentences[i].end <= w.begin) ++i;
    const bool in_sentence = i < st.sentences.size() && st.sentences[i].begin <= w.begin;
    if (in_sentence && is_name.count(word) && seen.count(word) && st.text[w.begin - 1] == ' ') {
      if (out.empty() || out.back().story != s || out.back().sentence != i)
        out.push_back({s, i, {}});
      out.back().mentions.push_back(w.begin);
    }
    seen.insert(word);
  }
}

Task make_character(const std::vector<Story>& stories, const MakeTasksOptions& opt) {
  const size_t want = size_t(opt.num_choices - 1);
  std::vector<std::vector<std::string>> names(stories.size());
  std::set<std::string> pool_set;
  for (size_t s = 0; s < stories.size(); ++s) {
    names[s] = character_names(stories[s].text);
    pool_set.insert(names[s].begin(), names[s].end());
  }
  const std::vector<std::string> pool(pool_set.begin(), pool_set.end());  // sorted
  // Per story, the pool names that are no word of it (ignoring case): its distractors.
  std::vector<std::vector<size_t>> others(stories.size());
  std::vector<MentionSentence> candidates;
  for (size_t s = 0; s < stories.size(); ++s) {
    std::unordered_set<std::string> words;
    for (const WordSpan& w : ascii_words(stories[s].text))
      words.insert(lower(stories[s].text.substr(w.begin, w.end - w.begin)));
    for (size_t n = 0; n < pool.size(); ++n)
      if (!words.count(lower(pool[n]))) others[s].push_back(n);
    if (others[s].size() >= want) collect_mentions(stories[s], s, names[s], candidates);
  }
  Task t;
  t.name = "character";
  t.format = TaskFormat::kMultipleChoice;
  t.description = fmt::format("The name of a character at a later mention in a held-out story: "
                              "the true one vs {} names from other stories", want);
  const uint64_t seed = mix_seed(opt.seed ^ 0xC4A7);
  for (int64_t k : choose(int64_t(candidates.size()), opt.character_items, seed)) {
    const MentionSentence& c = candidates[size_t(k)];
    const Story& st = stories[c.story];
    Rng rng{mix_seed(seed ^ mix_seed(uint64_t(k)))};
    const size_t p = c.mentions[rng.below(c.mentions.size())];
    size_t end = p;
    while (end < st.text.size() && is_ascii_letter(st.text[end])) ++end;
    std::vector<size_t> pick = others[c.story];  // a seeded partial Fisher-Yates shuffle
    for (size_t j = 0; j < want; ++j) std::swap(pick[j], pick[j + rng.below(pick.size() - j)]);
    TaskItem it;
    it.id = item_id(c.story, c.sentence);
    it.context = rtrim(st.text.substr(0, p));
    for (size_t j = 0; j < want; ++j) it.choices.push_back(pool[pick[j]]);
    it.gold = int64_t(rng.below(size_t(opt.num_choices)));
    it.choices.insert(it.choices.begin() + it.gold, st.text.substr(p, end - p));
    t.items.push_back(std::move(it));
  }
  return t;
}

}  // namespace

std::vector<SentenceSpan> split_sentences(const std::string& t) {
  std::vector<SentenceSpan> out;
  const size_t n = t.size();
  size_t begin = skip_space(t, 0);
  for (size_t i = begin; i < n; ++i) {
    if (!is_end(t[i])) continue;
    size_t j = i + 1;
    while (j < n && is_end(t[j])) ++j;
    while (j < n && is_quote(t[j])) ++j;
    bool ends = j == n;
    if (!ends && is_space(t[j])) {
      const size_t k = skip_space(t, j);
      ends = k == n || std::isupper(static_cast<unsigned char>(t[k])) || t[k] == '"';
    }
    if (ends) {
      out.push_back({begin, j});
      begin = skip_space(t, j);
    }
    i = std::max(j, begin) - 1;  // continue after the punctuation (or at the next sentence)
  }
  return out;
}

std::vector<std::string> character_names(const std::string& text) {
  std::set<std::string> out;
  for (const WordSpan& w : ascii_words(text)) {
    std::string word = text.substr(w.begin, w.end - w.begin);
    if (name_shaped(word) && !starts_sentence(text, w.begin)) out.insert(std::move(word));
  }
  return {out.begin(), out.end()};
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

StoryTasks make_story_tasks(const std::vector<std::string>& texts, const MakeTasksOptions& opt) {
  const char* where = "make-tasks";
  if (opt.num_choices < 2 || opt.cloze_items < 1 || opt.ending_items < 1 ||
      opt.character_items < 1 || opt.min_context_words < 1)
    throw ConfigError(msg(where, "need num_choices >= 2 and cloze_items, ending_items, "
                          "character_items, min_context_words >= 1, found {}, {}, {}, {}, {}",
                          opt.num_choices, opt.cloze_items, opt.ending_items,
                          opt.character_items, opt.min_context_words));
  StoryTasks out;
  std::vector<Story> stories;
  for (const std::string& text : texts) {
    if (!valid_utf8(text) || rtrim(text).empty()) {
      ++out.skipped_stories;
      continue;
    }
    stories.push_back({text, split_sentences(text)});
  }
  out.stories = int64_t(stories.size());
  out.cloze = make_cloze(stories, opt);
  out.story_ending = make_ending(stories, opt);
  out.character = make_character(stories, opt);
  if (out.cloze.items.empty() || out.story_ending.items.empty())
    throw ConfigError(msg(where, "{} stories give {} cloze and {} story-ending items; both need "
                          "at least one (more stories, or stories of several sentences)",
                          stories.size(), out.cloze.items.size(), out.story_ending.items.size()));
  return out;
}

std::vector<std::string> decode_documents(const std::vector<int32_t>& ids,
                                          const TextTokenizer& tokenizer) {
  const int64_t bos = tokenizer.bos_id().value_or(-1), eos = tokenizer.eos_id().value_or(-1);
  std::vector<std::string> out;
  std::vector<int64_t> doc;
  auto flush = [&] {
    std::string text = tokenizer.decode(doc, /*skip_special_tokens=*/true);
    if (!text.empty()) out.push_back(std::move(text));
    doc.clear();
  };
  for (const int32_t id : ids) {
    if (id == bos && !doc.empty()) flush();
    doc.push_back(id);
    if (id == eos) flush();
  }
  if (!doc.empty()) flush();
  return out;
}

std::vector<fs::path> write_story_tasks(const fs::path& dir, StoryTasks tasks,
                                        const nlohmann::json& meta) {
  fs::create_directories(dir);
  std::vector<fs::path> paths;
  for (Task* t : {&tasks.cloze, &tasks.story_ending, &tasks.character}) {
    const fs::path path = dir / (t->name + ".jsonl");
    if (t->items.empty()) {
      fs::remove(path);
      continue;
    }
    t->meta = meta;
    paths.push_back(path);
    write_task_file(path, *t);
  }
  return paths;
}

}  // namespace ac
