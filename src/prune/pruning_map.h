// pruning_map.json: which parts of the teacher a pruned student kept, so that distillation can
// compare the student's hidden states with the teacher's (distill/hidden_loss.h).
//
// Written by `prune` next to the pruned checkpoint (same StagingDir, so atomically with it),
// read by `distill --hidden-loss-weight`; `compress` passes the same struct in memory.
//
// Layout (JSON object, docs/formats.md style):
//   {"format": "autocompress.pruning_map", "version": 1,
//    "teacher_hidden_size": D, "teacher_num_layers": L,
//    "hidden_channels": [c_0, ..., c_{D'-1}],   student channel j = teacher channel c_j
//    "layers": [l_0, ..., l_{L'-1}]}            student layer i = teacher layer l_i
// hidden_channels: the kept hidden channels (PrunePlan::hidden: distinct, ascending, in [0, D));
// layers: the kept teacher layer indices, strictly increasing, in [0, L) (identity unless depth
// pruning dropped whole blocks: prune/depth.h).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "common/fs.h"
#include "model/config.h"

namespace ac {

struct PrunePlan;

/// Student -> teacher correspondence of a pruned model.
struct PruningMap {
  int64_t teacher_hidden_size = 0;  // D
  int64_t teacher_num_layers = 0;   // L
  at::Tensor hidden_channels;       // [D'] int64: student channel j is teacher channel [j]
  std::vector<int64_t> layers;      // [L'] student layer i is teacher layer layers[i]
};

/// File name of the map inside a pruned checkpoint folder.
inline constexpr const char* kPruningMapFile = "pruning_map.json";

/// The map of `plan` applied to `parent`; with `blocks_dropped` (prune/depth.h
/// drop_removed_blocks was applied after apply_plan) the layers whose attention and FFN are both
/// removed in plan.config are left out of `layers`, otherwise layers = [0, L).
PruningMap pruning_map_from_plan(const ModelConfig& parent, const PrunePlan& plan,
                                 bool blocks_dropped);

/// The identity map of a model onto itself (every channel, every layer).
PruningMap identity_pruning_map(const ModelConfig& c);

/// Throws ConfigError, naming `source` (a file, or "the pruning map"), if the map does not fit a
/// teacher / student pair: teacher_hidden_size / teacher_num_layers differ from the teacher's,
/// the channel count differs from the student's hidden_size, the layer count from the student's
/// num_layers, an index is out of range, channels repeat, or layers do not strictly increase.
void check_pruning_map(const PruningMap& map, const ModelConfig& teacher,
                       const ModelConfig& student, const std::string& source);

/// Writes the map as JSON atomically (common/json_io.h).
void write_pruning_map(const fs::path& path, const PruningMap& map);

/// Reads a map. Throws FormatError naming the file when it is missing ("pruning_map.json is
/// written by `autocompress prune`"), not JSON, or lacks / mistypes a field.
PruningMap read_pruning_map(const fs::path& path);

}  // namespace ac
