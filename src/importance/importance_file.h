// The metadata the per-kind importance files share (importance/moe_importance.h,
// importance/nemotron_h_importance.h): a safetensors file whose __metadata__ holds "format" (the
// kind's format name), "num_layers" and "num_tokens" (decimal counts), beside its score tensors.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "io/safetensors.h"

namespace ac {

/// The counts an importance file's metadata holds.
struct ImportanceFileHeader {
  int64_t num_layers = 0;  // layers of the model the scores are of
  int64_t num_tokens = 0;  // calibration tokens the scores were accumulated over
};

/// The __metadata__ to save beside the scores: {"format": format, "num_layers", "num_tokens"}.
std::map<std::string, std::string> importance_file_metadata(const std::string& format,
                                                            int64_t num_layers,
                                                            int64_t num_tokens);

/// Checks `f`'s "format" against `format` and reads its counts. Throws FormatError naming `where`
/// (the reader, e.g. "load_moe_importance") and the file: "format 'X', expected 'Y': not `what`?"
/// (e.g. what = "an MoE importance file"), or "metadata 'num_layers' must be a count, found
/// 'V'" (missing, not a number, or negative).
ImportanceFileHeader read_importance_file_header(const SafetensorsFile& f,
                                                 const std::string& format, const char* where,
                                                 const char* what);

}  // namespace ac
