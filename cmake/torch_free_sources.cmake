# The sources that need neither torch nor anything that includes it: the parsers of every file
# autocompress reads and what they call. The fuzz build (fuzz/fuzz.cmake) compiles exactly these
# without torch; the main build compiles them without the torch precompiled header, which would
# only add its load time (seconds per file) to each.
set(AC_TORCH_FREE_SOURCES
  src/common/fs.cpp src/common/json_io.cpp src/common/runtime.cpp src/common/simd.cpp
  src/io/safetensors_header.cpp src/io/llama2c_header.cpp src/io/tokenizer.cpp
  src/io/gguf_format.cpp src/io/gguf_quant.cpp src/io/gguf_vocab.cpp
  src/data/token_file.cpp
  src/model/config.cpp src/model/mamba2_config.cpp src/model/moe_config.cpp
  src/model/moe_family_config.cpp src/model/nemotron_h_config.cpp src/prune/arch.cpp
  src/hardware/scenario.cpp src/hardware/device.cpp src/hardware/engine.cpp
  src/hardware/data_dir.cpp src/hardware/profile_json.cpp src/hardware/correction.cpp
  src/hardware/granularity.cpp src/hardware/engine_calibration.cpp src/hardware/hybrid_structure.cpp
  src/hardware/llamacpp_buffers.cpp src/hardware/machine_load.cpp
  src/io/hf_tokenizer.cpp src/io/hf_bpe.cpp src/io/hf_components.cpp src/io/hf_regex.cpp
  src/io/hf_unicode.cpp src/io/text_tokenizer.cpp src/data/text_corpus.cpp
  src/data/data_source.cpp)
