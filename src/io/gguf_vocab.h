// The vocabulary a GGUF carries (tokenizer.ggml.*), built from either tokenizer file of a
// checkpoint folder so that llama.cpp, reading the GGUF alone, tokenizes as that file does.
//
//   tokenizer.json, byte-level BPE (Llama 3, Qwen2, Qwen3): tokenizer.ggml.model "gpt2", as
//     convert_hf_to_gguf.py TextModel._set_vocab_gpt2 writes it: tokens in the byte-to-unicode
//     form of tokenizer.json (added tokens as their raw content), token_type, no scores, merges
//     "a b" in rank order (gguf-py SpecialVocab), and tokenizer.ggml.pre naming the
//     pre-tokenizer regex llama.cpp must run (llama-vocab.cpp llm_tokenizer_bpe):
//       "llama-bpe"  Llama 3's Split regex, with ignore_merges (LLAMA_VOCAB_PRE_TYPE_LLAMA3);
//       "qwen2"      Qwen2 / Qwen3's regex, without (LLAMA_VOCAB_PRE_TYPE_QWEN2).
//     Any other pre-tokenizer is refused: llama.cpp would split the text differently.
//   tokenizer.json, SentencePiece-style BPE (Llama 2, Mistral): "llama", pre "default", as
//     TextModel._set_vocab_llama_hf (gguf-py LlamaHfVocab) writes it, but with scores that make
//     llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm_session: repeatedly merge the
//     adjacent pair whose concatenation is the highest-scoring token, leftmost on ties) apply
//     the BPE merges in rank order: the token the merge of rank r makes scores -r (its lowest
//     such r), every other token -(number of merges). LlamaHfVocab writes -1000 for every
//     token, which merges leftmost-first instead of by rank.
//   tokenizer.bin (llama2.c): "llama", pre "default", its own scores (vocab_from_tokenizer).
//
// Ids beyond the tokenizer's up to the model's vocab_size, and ids no token has, become
// "[PAD{id}]" of type UNUSED, as convert_hf_to_gguf.py get_vocab_base pads them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/fs.h"

namespace ac {

class Tokenizer;
class HfTokenizer;

/// Token types (llama.h enum llama_token_type / gguf-py TokenType).
enum class GgufTokenType : int64_t {
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
};

/// The vocabulary as GGUF holds it (tokenizer.ggml.*; gguf-py constants.py Keys.Tokenizer).
struct GgufVocab {
  std::string model = "llama";      // tokenizer.ggml.model: "llama" (SentencePiece) | "gpt2"
  std::string pre = "default";      // tokenizer.ggml.pre: "default" | "llama-bpe" | "qwen2"
  std::vector<std::string> tokens;  // [V] llama: U+2581 for spaces, "<0xNN>" for bytes;
                                    //     gpt2: the byte-to-unicode form ("Ġ" for a space)
  std::vector<float> scores;        // [V] llama; empty for gpt2 (the key is not written)
  std::vector<int64_t> types;       // [V] GgufTokenType values
  std::vector<std::string> merges;  // gpt2: "left right" in rank order; empty for llama
  // Special ids; -1: the tokenizer names none and the key is not written.
  int64_t bos_id = 1, eos_id = 2, unk_id = 0, pad_id = -1;
  bool add_bos = true, add_eos = false;
  std::string chat_template;  // tokenizer.chat_template; "" = not written
};

/// From our llama2.c tokenizer: ids unk/bos/eos become "<unk>", "<s>", "</s>" (UNKNOWN,
/// CONTROL), ids 3..258 "<0xNN>" (BYTE, hex upper case as llama.cpp looks them up), every
/// other piece has ' ' replaced by U+2581 (NORMAL). Model "llama", pre "default".
GgufVocab vocab_from_tokenizer(const Tokenizer& tok);

/// From a tokenizer.json (see the top of this file) for a model of `vocab_size` ids (V,
/// config.json vocab_size). Throws FormatError when the tokenizer has ids >= vocab_size;
/// ConfigError naming the file when llama.cpp cannot reproduce its tokenization: a byte-level
/// pre-tokenizer other than Split(regex of "llama-bpe" or "qwen2", Isolated) + ByteLevel
/// (add_prefix_space false, use_regex false), ignore_merges other than that pre-tokenizer's, a
/// normalizer other than none (or NFC for "qwen2"); a SentencePiece-style BPE without
/// byte_fallback or other than Prepend + Replace normalizers or a Metaspace pre-tokenizer; or
/// two ids with the same text (llama.cpp maps text to id).
GgufVocab vocab_from_hf_tokenizer(const HfTokenizer& tok, int64_t vocab_size);

/// The vocabulary of a checkpoint folder, read as load_tokenizer (io/text_tokenizer.h) picks the
/// file: `dir`/tokenizer.json (with tokenizer_config.json) via vocab_from_hf_tokenizer, else
/// `dir`/tokenizer.bin via vocab_from_tokenizer. Throws ConfigError naming the folder when it
/// has neither, and the errors of those readers.
GgufVocab vocab_from_checkpoint(const fs::path& dir, int64_t vocab_size);

}  // namespace ac
