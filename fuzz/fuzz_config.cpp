// config.json (Llama / Mistral / Qwen2 / DeciLM block_configs) and arch.json, which wraps one
// (model/config.h, prune/arch.h). An accepted config must write back and read back equal.
#include "common/json_io.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "prune/arch.h"

namespace {

// `as_arch`: `c` came from arch.json, and goes back through arch.json's writer (a Nemotron-H
// target's removed layers are listed beside its config.json there).
void check_config(const ac::ModelConfig& c, const char* file, bool as_arch) {
  AC_FUZZ_ASSERT(c.num_parameters() > 0);
  (void)ac::describe(c);
  const ac::json out = as_arch ? ac::arch_to_json(c) : ac::config_to_hf_json(c);
  ac::ModelConfig back;
  try {
    back = as_arch ? ac::arch_from_json(out, file) : ac::config_from_hf_json(out, file);
  } catch (const ac::Error& e) {  // what we write must read back
    std::fprintf(stderr, "written config does not read back: %s\n%s\n", e.what(),
                 out.dump().c_str());
    std::abort();
  }
  AC_FUZZ_ASSERT(back.layers == c.layers);
  AC_FUZZ_ASSERT(back.hidden_size == c.hidden_size && back.vocab_size == c.vocab_size);
  (void)out.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "config.json";
  ac::json j;
  try {
    j = ac::parse_json_text(ac::fuzz::as_text(data, size), file);
  } catch (const ac::Error& e) {
    return 0;
  }
  ac::fuzz::expect_ok_or_error(
      [&] { check_config(ac::config_from_hf_json(j, file), file, /*as_arch=*/false); }, file);
  ac::fuzz::expect_ok_or_error(
      [&] { check_config(ac::arch_from_json(j, file), file, /*as_arch=*/true); }, file);
  return 0;
}
