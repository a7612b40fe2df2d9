#include "io/hf_bpe.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "io/hf_components.h"
#include "io/hf_unicode.h"

namespace ac::hf {

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

// ---- VocabIndex ----

void VocabIndex::grow() {
  const size_t n = std::max<size_t>(64, slots_.size() * 2);
  slots_.assign(n, -1);
  for (size_t k = 0; k < keys_.size(); ++k) {
    size_t s = hash_bytes(keys_[k]) & (n - 1);
    while (slots_[s] >= 0) s = (s + 1) & (n - 1);
    slots_[s] = int32_t(k);
  }
}

void VocabIndex::insert(std::string_view token, int32_t id) {
  if ((keys_.size() + 1) * 2 > slots_.size()) grow();
  const size_t mask = slots_.size() - 1;
  size_t s = hash_bytes(token) & mask;
  for (; slots_[s] >= 0; s = (s + 1) & mask)
    if (keys_[size_t(slots_[s])] == token) {
      ids_[size_t(slots_[s])] = id;
      return;
    }
  slots_[s] = int32_t(keys_.size());
  keys_.emplace_back(token);
  ids_.push_back(id);
}

int32_t VocabIndex::find(std::string_view token) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t s = hash_bytes(token) & mask; slots_[s] >= 0; s = (s + 1) & mask)
    if (keys_[size_t(slots_[s])] == token) return ids_[size_t(slots_[s])];
  return -1;
}

// ---- MergeIndex ----

namespace {
inline size_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  return size_t(k ^ (k >> 33));
}
}  // namespace

void MergeIndex::grow() {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  const size_t n = std::max<size_t>(64, old_keys.size() * 2);
  keys_.assign(n, ~0ull);
  values_.assign(n, Merge{0, 0});
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == ~0ull) continue;
    size_t s = mix(old_keys[i]) & (n - 1);
    while (keys_[s] != ~0ull) s = (s + 1) & (n - 1);
    keys_[s] = old_keys[i];
    values_[s] = old_values[i];
  }
}

void MergeIndex::insert(int32_t left, int32_t right, Merge m) {
  if ((count_ + 1) * 2 > keys_.size()) grow();
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  size_t s = mix(k) & mask;
  while (keys_[s] != ~0ull && keys_[s] != k) s = (s + 1) & mask;
  if (keys_[s] == ~0ull) ++count_;
  keys_[s] = k;
  values_[s] = m;  // a repeated pair keeps its last rank, as the tokenizers library's HashMap
}

const MergeIndex::Merge* MergeIndex::find(int32_t left, int32_t right) const {
  if (keys_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t s = mix(k) & mask; keys_[s] != ~0ull; s = (s + 1) & mask)
    if (keys_[s] == k) return &values_[s];
  return nullptr;
}

// ---- WordCache ----

bool WordCache::get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  if (slots_.empty()) return false;
  const size_t mask = slots_.size() - 1;
  for (size_t s = hash & mask; slots_[s] >= 0; s = (s + 1) & mask) {
    const Entry& e = entries_[size_t(slots_[s])];
    if (e.hash == hash && std::string_view(keys_.data() + e.key_off, e.key_len) == word) {
      out.insert(out.end(), ids_.begin() + e.ids_off, ids_.begin() + e.ids_off + e.ids_len);
      return true;
    }
  }
  return false;
}

void WordCache::put(std::string_view word, uint64_t hash, const int32_t* ids, size_t n) {
  if (word.size() >= kMaxWordBytes) return;
  if (entries_.size() >= kCacheWords || slots_.empty()) {  // full: start over (bounded memory)
    entries_.clear();
    keys_.clear();
    ids_.clear();
    slots_.assign(kCacheWords * 2, -1);
  }
  const size_t mask = slots_.size() - 1;
  size_t s = hash & mask;
  while (slots_[s] >= 0) s = (s + 1) & mask;
  slots_[s] = int32_t(entries_.size());
  entries_.push_back({hash, uint32_t(keys_.size()), uint32_t(word.size()), uint32_t(ids_.size()),
                      uint32_t(n)});
  keys_.append(word);
  ids_.insert(ids_.end(), ids, ids + n);
}

// ---- BpeModel ----

namespace {

/// Splits one merge of "model.merges": ["a", "b"] or the legacy "a b" (exactly one space).
std::pair<std::string, std::string> merge_parts(const json& m, size_t i, const std::string& file) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
      return {s.substr(0, sp), s.substr(sp + 1)};
  }
  throw FormatError(msg("hf_tokenizer", "{}: model.merges[{}] is {}, expected \"a b\" or "
                        "[\"a\", \"b\"]", file, i, m.dump()));
}

void check_supported(const json& model, const std::string& file) {
  auto present = [&](const char* k) { return model.contains(k) && !model[k].is_null(); };
  if (present("dropout") && !(model["dropout"].is_number() && model["dropout"].get<double>() == 0))
    throw FormatError(msg("hf_tokenizer", "{}: model.dropout = {} is not supported (BPE dropout "
                          "samples a random tokenization; only null or 0)", file,
                          model["dropout"].dump()));
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (present(k) && !(model[k].is_string() && model[k].get<std::string>().empty()))
      throw FormatError(msg("hf_tokenizer", "{}: model.{} = {} is not supported (only null or "
                            "\"\")", file, k, model[k].dump()));
}

}  // namespace

BpeModel BpeModel::from_json(const json& model, const std::string& file, size_t max_ids) {
  const hf::JsonPath at{file, "model"};
  const std::string type = hf::string_field(model, "type", "BPE", at);
  if (type != "BPE")
    throw FormatError(msg("hf_tokenizer", "{}: model.type '{}' is not supported (only BPE)", file,
                          type));
  check_supported(model, file);
  BpeModel m;
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw FormatError(msg("hf_tokenizer", "{}: model.vocab is missing or not an object", file));
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!json_holds<int32_t>(id) || id.get<int32_t>() < 0)
      throw FormatError(msg("hf_tokenizer", "{}: model.vocab['{}'] = {} is not an id", file, token,
                            id.dump()));
    const auto i = size_t(id.get<int32_t>());
    if (i >= max_ids)
      throw FormatError(msg("hf_tokenizer", "{}: model.vocab['{}'] = {}: ids must be below {} "
                            "(the {} entries of model.vocab plus the added tokens)", file, token,
                            i, max_ids, model["vocab"].size()));
    if (i >= m.tokens_.size()) m.tokens_.resize(i + 1);
    m.tokens_[i] = token;
    m.index_.insert(token, int32_t(i));
  }
  const json merges = hf::array_or_empty(model, "merges", at);
  m.merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    auto parts = merge_parts(merges[i], i, file);
    const int32_t a = m.index_.find(parts.first), b = m.index_.find(parts.second),
                  c = m.index_.find(parts.first + parts.second);
    if (a < 0 || b < 0 || c < 0)
      throw FormatError(msg("hf_tokenizer", "{}: model.merges[{}] '{} {}': '{}' is not in "
                            "model.vocab", file, i, parts.first, parts.second,
                            a < 0 ? parts.first : b < 0 ? parts.second : parts.first + parts.second));
    m.merge_index_.insert(a, b, {int32_t(i), c});
    m.merges_.push_back(std::move(parts));
  }
  m.byte_fallback_ = hf::bool_field(model, "byte_fallback", false, at);
  m.fuse_unk_ = hf::bool_field(model, "fuse_unk", false, at);
  m.ignore_merges_ = hf::bool_field(model, "ignore_merges", false, at);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    m.unk_id_ = m.index_.find(model["unk_token"].get<std::string>());
    if (m.unk_id_ < 0)
      throw FormatError(msg("hf_tokenizer", "{}: model.unk_token '{}' is not in model.vocab", file,
                            model["unk_token"].get<std::string>()));
  }
  for (int c = 0; c < 128; ++c) m.ascii_ids_[c] = m.index_.find(std::string(1, char(c)));
  for (int b = 0; b < 256; ++b) m.byte_ids_[b] = m.index_.find(fmt::format("<0x{:02X}>", b));
  return m;
}

void BpeModel::initial_symbols(std::string_view word, Scratch& scratch) const {
  auto& sym = scratch.symbols;
  sym.clear();
  auto push = [&](int32_t id) {
    const int32_t n = int32_t(sym.size());
    sym.push_back({id, n - 1, n + 1, false});
  };
  int32_t pending_unk = -1;  // a run of unknown characters waiting to be emitted as one unk
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    const auto lead = static_cast<unsigned char>(word[i]);
    int32_t id;
    if (lead < 0x80) {
      id = ascii_ids_[lead];
      ++i;
    } else {
      i += utf8_length(lead);
      id = index_.find(word.substr(start, i - start));
    }
    if (id >= 0) {
      if (pending_unk >= 0) push(pending_unk), pending_unk = -1;
      push(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_ids_[uint8_t(word[k])] >= 0;
      if (all) {
        // Rust's merge_word emits the bytes without flushing a pending unk first (it is flushed
        // at the next known character or the end), so the order is kept here as it is there.
        for (size_t k = start; k < i; ++k) push(byte_ids_[uint8_t(word[k])]);
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no unk token: the character is dropped
    if (pending_unk >= 0 && !fuse_unk_) push(pending_unk);
    pending_unk = unk_id_;
  }
  if (pending_unk >= 0) push(pending_unk);
  if (!sym.empty()) sym.back().next = -1;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const {
  initial_symbols(word, scratch);
  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  heap.clear();
  // A min-heap on (rank, pos): std heap functions with the reversed comparison.
  auto later = [](const Scratch::Candidate& x, const Scratch::Candidate& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  auto push = [&](int32_t pos, int32_t left, int32_t right) {
    if (const MergeIndex::Merge* m = merge_index_.find(left, right)) {
      heap.push_back({m->rank, pos, m->new_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (size_t p = 0; p + 1 < sym.size(); ++p) push(int32_t(p), sym[p].id, sym[p + 1].id);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Scratch::Candidate top = heap.back();
    heap.pop_back();
    Scratch::Symbol& cur = sym[size_t(top.pos)];
    if (cur.removed || cur.next < 0) continue;
    Scratch::Symbol& right = sym[size_t(cur.next)];
    const MergeIndex::Merge* m = merge_index_.find(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // an expired candidate
    cur.id = top.new_id;
    right.removed = true;
    cur.next = right.next;
    if (cur.next >= 0) sym[size_t(cur.next)].prev = top.pos;
    if (cur.prev >= 0) push(cur.prev, sym[size_t(cur.prev)].id, cur.id);
    if (cur.next >= 0) push(top.pos, cur.id, sym[size_t(cur.next)].id);
  }
  for (const auto& s : sym)
    if (!s.removed) out.push_back(s.id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out, Scratch& scratch,
                        WordCache& cache) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = index_.find(word);
    if (id >= 0) return out.push_back(id);
  }
  if (word.size() == 1 && ascii_ids_[uint8_t(word[0])] >= 0)
    return out.push_back(ascii_ids_[uint8_t(word[0])]);
  const uint64_t h = hash_bytes(word);
  if (cache.get(word, h, out)) return;
  const size_t first = out.size();
  merge_word(word, out, scratch);
  cache.put(word, h, out.data() + first, out.size() - first);
}

}  // namespace ac::hf
