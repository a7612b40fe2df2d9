// Training and evaluation data: a token stream cut into fixed-length sequences and served in
// [B, T] batches in a seeded, shuffled, resumable order.
//
// Packing: the stream (documents separated by BOS) is cut into consecutive, non-overlapping
// windows of T tokens; the tail shorter than T is dropped. Attention crosses document
// boundaries inside a window, as in llama2.c's TinyStories pretraining; the BOS that opens each
// document tells the model where a new one starts.
//
// Order: the windows are read in epochs; epoch e visits every window once, in a permutation
// drawn from (seed, e). Batch `step` holds the global window slots [step*B, step*B + B), so any
// batch can be recomputed from (seed, step) alone: training resumes exactly without saving an
// RNG.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "common/fs.h"
#include "common/json_io.h"
#include "data/data_source.h"

namespace ac {

struct LlamaModel;

/// A token stream held in memory (int32 ids), served as packed [B, T] int64 batches.
/// Not thread-safe: `batch` caches the permutation of the current epoch.
class TokenDataset {
 public:
  TokenDataset() = default;
  /// ids: [N] token stream; documents separated by `bos_id`. vocab_size 0 = unchecked.
  explicit TokenDataset(std::vector<int32_t> ids, int64_t vocab_size = 0, int32_t bos_id = 1);
  /// Reads a token file (data/token_file.h). Throws FormatError as read_token_file does.
  static TokenDataset load(const fs::path& path, int32_t bos_id = 1);

  int64_t num_tokens() const { return int64_t(ids_.size()); }
  const std::vector<int32_t>& ids() const { return ids_; }
  int64_t vocab_size() const { return vocab_size_; }
  int32_t bos_id() const { return bos_id_; }

  /// Number of packed windows of `seq_len` tokens (the tail is dropped).
  int64_t num_windows(int64_t seq_len) const;

  /// The training batch of step `step`: [B, T] int64 windows in the shuffled order of `seed`.
  /// Deterministic in (seed, step, B, T). Throws ConfigError if there is not one whole window.
  at::Tensor batch(int64_t step, int64_t batch_size, int64_t seq_len, uint64_t seed) const;

  /// Windows [first, first + count) in stream order: [count, T] int64 (evaluation).
  at::Tensor windows(int64_t first, int64_t count, int64_t seq_len) const;

  /// Every window in stream order, grouped into batches of up to B: each [b <= B, T] int64.
  /// `max_batches` < 0 = all.
  std::vector<at::Tensor> sequential_batches(int64_t batch_size, int64_t seq_len,
                                             int64_t max_batches = -1) const;

  /// Throws ConfigError "[where] data: token id X at index i is outside [0, V) of model M" if an
  /// id does not fit a model's vocabulary of `vocab_size`.
  void check_vocab(int64_t vocab_size, const char* where, const std::string& model) const;

 private:
  int64_t window_slot(int64_t global_slot, int64_t num_windows, uint64_t seed) const;

  std::vector<int32_t> ids_;
  int64_t vocab_size_ = 0;
  int32_t bos_id_ = 1;
  // Cache of the current epoch's permutation (see `batch`).
  mutable std::vector<int64_t> perm_;
  mutable int64_t perm_epoch_ = -1, perm_windows_ = -1;
  mutable uint64_t perm_seed_ = 0;
};

/// A seeded permutation of [0, n) (Fisher-Yates over splitmix64; identical on every platform,
/// unlike std::shuffle).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

/// splitmix64: the 64-bit mixer used to derive independent seeds (Steele et al., 2014).
uint64_t mix_seed(uint64_t x);

/// A stage's --data (data/data_source.h load_data: a token file, or the `spec.split` part of the
/// user's text tokenized with `model_dir`'s tokenizer) as a dataset for a model of `vocab_size`
/// ids whose BOS is `bos_id`; logs what was read. `source`, when given, receives
/// LoadedData::source for reports. Throws as load_data does, and ConfigError naming the file when
/// an id does not fit the model's vocabulary.
TokenDataset load_dataset(const DataSpec& spec, const fs::path& model_dir, int64_t vocab_size,
                          int32_t bos_id, const char* where, nlohmann::json* source = nullptr);

/// Teacher-sampled corpus (docs/design.md, "stories15M, the real model on hand": in-domain text is
/// sampled from the teacher with fixed seeds). Samples `num_sequences` sequences of `seq_len` new
/// tokens each from BOS with model/llama.h sample_batch (KV cache, `batch_size` sequences at a
/// time), cuts each at its first EOS or BOS (llama2.c models end a story with BOS), and returns the
/// documents as one stream [N] int32, each document opened by BOS (empty ones dropped).
/// Deterministic in (seed, batch_size): chunk c uses seed mix_seed(seed ^ mix_seed(c)).
/// temperature > 0; top_p in (0, 1]. Throws ConfigError on invalid arguments.
std::vector<int32_t> sample_corpus(const LlamaModel& teacher, int64_t num_sequences,
                                   int64_t seq_len, double temperature, double top_p,
                                   uint64_t seed, int64_t batch_size = 32);

/// Documents of a BOS-separated stream, as [begin, end) offsets (each range starts at its BOS;
/// tokens before the first BOS form a document too).
std::vector<std::pair<int64_t, int64_t>> split_documents(const std::vector<int32_t>& ids,
                                                         int32_t bos_id);

/// How many documents of `heldout` also occur, token for token, in `train` (64-bit FNV-1a
/// hashes of each document; a collision is ~2^-64 per pair). Used to prove that a held-out set
/// sampled with other seeds does not overlap the training set.
struct OverlapReport {
  int64_t heldout_documents = 0;
  int64_t overlapping_documents = 0;
};
OverlapReport document_overlap(const std::vector<int32_t>& train,
                               const std::vector<int32_t>& heldout, int32_t bos_id);

/// `heldout` without the documents that also occur in `train`; `removed` receives the count.
std::vector<int32_t> remove_overlap(const std::vector<int32_t>& heldout,
                                    const std::vector<int32_t>& train, int32_t bos_id,
                                    int64_t* removed = nullptr);

}  // namespace ac
