#include "data/dataset.h"

#include <fmt/format.h>

#include <unordered_set>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "data/token_file.h"
#include "model/llama.h"

namespace ac {

uint64_t mix_seed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    state = mix_seed(state);
    // Modulo bias is below n / 2^64: irrelevant for window counts.
    int64_t j = int64_t(state % uint64_t(i + 1));
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

TokenDataset::TokenDataset(std::vector<int32_t> ids, int64_t vocab_size, int32_t bos_id)
    : ids_(std::move(ids)), vocab_size_(vocab_size), bos_id_(bos_id) {}

TokenDataset TokenDataset::load(const fs::path& path, int32_t bos_id) {
  TokenFile f = read_token_file(path);
  return TokenDataset(std::move(f.ids), f.vocab_size, bos_id);
}

int64_t TokenDataset::num_windows(int64_t seq_len) const {
  if (seq_len <= 0)
    throw ConfigError(msg("TokenDataset", "seq_len must be positive, found {}", seq_len));
  return num_tokens() / seq_len;
}

static void check_one_window(int64_t windows, int64_t tokens, int64_t seq_len) {
  if (windows < 1)
    throw ConfigError(msg("TokenDataset", "data: {} tokens, fewer than one sequence of seq_len "
                          "{}: sample more data or lower --seq-len", tokens, seq_len));
}

int64_t TokenDataset::window_slot(int64_t global_slot, int64_t n, uint64_t seed) const {
  int64_t epoch = global_slot / n;
  if (epoch != perm_epoch_ || n != perm_windows_ || seed != perm_seed_) {
    perm_ = seeded_permutation(n, mix_seed(seed ^ mix_seed(uint64_t(epoch))));
    perm_epoch_ = epoch;
    perm_windows_ = n;
    perm_seed_ = seed;
  }
  return perm_[size_t(global_slot % n)];
}

at::Tensor TokenDataset::batch(int64_t step, int64_t batch_size, int64_t seq_len,
                               uint64_t seed) const {
  int64_t n = num_windows(seq_len);
  check_one_window(n, num_tokens(), seq_len);
  if (batch_size <= 0 || step < 0)
    throw ConfigError(msg("TokenDataset", "batch_size must be positive and step >= 0, found {} "
                          "and {}", batch_size, step));
  at::Tensor out = at::empty({batch_size, seq_len}, at::kLong);  // [B, T]
  int64_t* dst = out.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size; ++b) {
    int64_t w = window_slot(step * batch_size + b, n, seed);
    const int32_t* src = ids_.data() + w * seq_len;
    for (int64_t t = 0; t < seq_len; ++t) dst[b * seq_len + t] = src[t];
  }
  return out;
}

at::Tensor TokenDataset::windows(int64_t first, int64_t count, int64_t seq_len) const {
  int64_t n = num_windows(seq_len);
  if (first < 0 || count < 0 || first + count > n)
    throw ConfigError(msg("TokenDataset", "windows [{}, {}) outside the {} windows of seq_len {}",
                          first, first + count, n, seq_len));
  at::Tensor out = at::empty({count, seq_len}, at::kLong);  // [count, T]
  int64_t* dst = out.data_ptr<int64_t>();
  const int32_t* src = ids_.data() + first * seq_len;
  for (int64_t i = 0; i < count * seq_len; ++i) dst[i] = src[i];
  return out;
}

std::vector<at::Tensor> TokenDataset::sequential_batches(int64_t batch_size, int64_t seq_len,
                                                         int64_t max_batches) const {
  int64_t n = num_windows(seq_len);
  check_one_window(n, num_tokens(), seq_len);
  std::vector<at::Tensor> out;
  for (int64_t first = 0; first < n; first += batch_size) {
    if (max_batches >= 0 && int64_t(out.size()) >= max_batches) break;
    out.push_back(windows(first, std::min(batch_size, n - first), seq_len));
  }
  return out;
}

void TokenDataset::check_vocab(int64_t vocab_size, const char* where,
                               const std::string& model) const {
  for (size_t i = 0; i < ids_.size(); ++i)
    if (ids_[i] < 0 || ids_[i] >= vocab_size)
      throw ConfigError(msg(where, "data: token id {} at index {} is outside [0, {}) of model "
                            "'{}': was the data made with another tokenizer?", ids_[i], i,
                            vocab_size, model));
}

TokenDataset load_dataset(const DataSpec& spec, const fs::path& model_dir, int64_t vocab_size,
                          int32_t bos_id, const char* where, json* source) {
  LoadedData d = load_data(spec, model_dir, vocab_size, where);
  log_info(fmt::format("[{}] data {}", where, d.description));
  if (d.vocab_size > vocab_size)
    throw ConfigError(msg(where, "--data {} was written for vocab_size {}, the model {} has {}",
                          spec.path.string(), d.vocab_size, model_dir.string(), vocab_size));
  TokenDataset out(std::move(d.ids), vocab_size, bos_id);
  out.check_vocab(vocab_size, where, model_dir.string());
  if (source) *source = std::move(d.source);
  return out;
}

std::vector<int32_t> sample_corpus(const LlamaModel& teacher, int64_t num_sequences,
                                   int64_t seq_len, double temperature, double top_p,
                                   uint64_t seed, int64_t batch_size) {
  const char* where = "sample_corpus";
  if (num_sequences <= 0 || seq_len <= 0 || batch_size <= 0)
    throw ConfigError(msg(where, "count, seq_len and batch size must be positive, found {}, {}, "
                          "{}", num_sequences, seq_len, batch_size));
  if (!(temperature > 0) || !(top_p > 0 && top_p <= 1))
    throw ConfigError(msg(where, "temperature must be > 0 and top_p in (0, 1], found {} and {}",
                          temperature, top_p));
  const int32_t bos = int32_t(teacher.config.bos_token_id);
  const int32_t eos = int32_t(teacher.config.eos_token_id);
  std::vector<int32_t> out;
  Progress progress("sample", num_sequences, "seq");
  for (int64_t done = 0, chunk = 0; done < num_sequences; ++chunk) {
    int64_t n = std::min(batch_size, num_sequences - done);
    at::Tensor s = sample_batch(teacher, {bos}, n, seq_len, temperature, top_p,
                                mix_seed(seed ^ mix_seed(uint64_t(chunk))));  // [n, T]
    AC_CHECK(s.dim() == 2 && s.size(0) == n && s.size(1) == seq_len, "sample_batch shape {}",
             fmt::join(s.sizes(), ","));
    s = s.to(at::kLong).contiguous();
    const int64_t* p = s.data_ptr<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      int64_t len = 0;
      while (len < seq_len && p[b * seq_len + len] != eos && p[b * seq_len + len] != bos) ++len;
      if (len == 0) continue;
      out.push_back(bos);
      for (int64_t t = 0; t < len; ++t) out.push_back(int32_t(p[b * seq_len + t]));
    }
    done += n;
    progress.update(done);
  }
  progress.finish();
  return out;
}

std::vector<std::pair<int64_t, int64_t>> split_documents(const std::vector<int32_t>& ids,
                                                         int32_t bos_id) {
  std::vector<std::pair<int64_t, int64_t>> docs;
  int64_t begin = 0, n = int64_t(ids.size());
  for (int64_t i = 1; i <= n; ++i) {
    if (i == n || ids[size_t(i)] == bos_id) {
      docs.emplace_back(begin, i);
      begin = i;
    }
  }
  return docs;
}

static uint64_t fnv1a(const int32_t* p, int64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  for (int64_t i = 0; i < n * 4; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

static std::unordered_set<uint64_t> document_hashes(const std::vector<int32_t>& ids,
                                                    int32_t bos_id) {
  std::unordered_set<uint64_t> set;
  for (auto [b, e] : split_documents(ids, bos_id)) set.insert(fnv1a(ids.data() + b, e - b));
  return set;
}

OverlapReport document_overlap(const std::vector<int32_t>& train,
                               const std::vector<int32_t>& heldout, int32_t bos_id) {
  auto seen = document_hashes(train, bos_id);
  OverlapReport r;
  for (auto [b, e] : split_documents(heldout, bos_id)) {
    ++r.heldout_documents;
    r.overlapping_documents += seen.count(fnv1a(heldout.data() + b, e - b));
  }
  return r;
}

std::vector<int32_t> remove_overlap(const std::vector<int32_t>& heldout,
                                    const std::vector<int32_t>& train, int32_t bos_id,
                                    int64_t* removed) {
  auto seen = document_hashes(train, bos_id);
  std::vector<int32_t> out;
  int64_t dropped = 0;
  for (auto [b, e] : split_documents(heldout, bos_id)) {
    if (seen.count(fnv1a(heldout.data() + b, e - b))) {
      ++dropped;
      continue;
    }
    out.insert(out.end(), heldout.begin() + b, heldout.begin() + e);
  }
  if (removed) *removed = dropped;
  return out;
}

}  // namespace ac
