// What llama.cpp's model buffers hold for a GGUF, on CPUs where it repacks the weights.
//
// llama.cpp maps the GGUF and, where a CPU backend offers an "extra" buffer type for the
// weights of matrix products, copies those weights into it in its own layout. On CPUs with AMX
// (node-llama-cpp loads its sapphirerapids CPU variant there) that is the AMX buffer type
// (ggml/src/ggml-cpu/amx/amx.cpp and mmq.cpp of the bundled release, checked against the
// source):
//   taken     a weight of a MUL_MAT (attn_q/k/v/output, ffn_gate/up/down, output; the tied
//             head is token_embd loaded a second time as output) of N rows of K values when
//             N % 32 == 0 (TILE_N * 2) and, by type, K % 32 == 0 (Q4_0, Q4_1, Q8_0: TILE_K),
//             K % 256 == 0 (the K-quants, which our GGUFs never hold) or K % 16 == 0 (F16);
//             never token_embd
//             itself (GET_ROWS), the norms or the biases;
//   size      ggml_backend_amx_get_alloc_size: N x get_row_size(K) for the quantized types,
//             get_row_size = K/32 x sizeof(block) (+ K/32 x 4 bytes of int32 compensation for
//             Q8_0), the tensor's own bytes for F16; each padded to TENSOR_ALIGNMENT (32).
// The other tensors stay in the mapped file, and llama.cpp's "CPU_Mapped model buffer size" is
// the span of the file they occupy, from the first one's offset to the last one's end
// (llama_model_loader::get_mapping_range), which includes any taken tensor that lies between.
// Without a repack the model buffer is that span over every tensor: the GGUF's tensor bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_format.h"

namespace ac {

/// One tensor of a GGUF as llama.cpp places it.
struct GgufTensorExtent {
  GgmlType type = GgmlType::F32;
  int64_t rows = 1;        // N, ggml's ne[1] (1 for a vector)
  int64_t row_length = 1;  // K, ggml's ne[0]
  uint64_t offset = 0;     // in the data section, bytes
  uint64_t bytes = 0;      // ggml_bytes(type, rows x row_length)
  bool matmul_weight = false;  // the weight of a MUL_MAT (see the header)
};

/// llama.cpp's model buffers, bytes.
struct LlamaCppModelBuffers {
  uint64_t repacked = 0;  // the repacked copy (AMX buffer)
  uint64_t mapped = 0;    // the span of the mapped file (CPU_Mapped buffer)
  uint64_t total() const { return repacked + mapped; }
};

/// The GGUF weight type of a scenario's weight dtype: fp32 -> F32, fp16 -> F16, bf16 -> BF16,
/// q8_0, q4_0. Throws ConfigError for another dtype (fp8, int8, int4: not a GGUF type here).
GgmlType gguf_type_for(const std::string& weight_dtype);

/// Whether llama.cpp's AMX buffer type takes a MUL_MAT weight of `type`, N rows of K.
bool amx_takes(GgmlType type, int64_t rows, int64_t row_length);

/// Its bytes in the AMX buffer (padded to 32); 0 when amx_takes is false.
uint64_t amx_bytes(GgmlType type, int64_t rows, int64_t row_length);

/// The model buffers of a GGUF of `tensors` (file order) when llama.cpp repacks into
/// `repacked_into` ("AMX" is modelled; "" is no repack: the mapped span of every tensor),
/// `tied_output` when the head is token_embd (loaded again as a MUL_MAT weight, `tensors`
/// holding it once). Throws ConfigError for another repack kind (e.g. "CPU_REPACK", not
/// modelled) or an empty list.
LlamaCppModelBuffers llamacpp_model_buffers(const std::vector<GgufTensorExtent>& tensors,
                                            bool tied_output, const std::string& repacked_into);

/// The GGUF tensor name of a MUL_MAT weight in llama.cpp's Llama-family graphs.
bool is_matmul_weight_name(const std::string& name);

}  // namespace ac
