// Scenario, device and engine JSON (hardware/scenario.h, device.h, engine.h); each input goes
// to all three parsers. A scenario names its device and engine; names are resolved in the
// repository's devices/ and engines/. A name that is a path would be read as a device file, so
// path-like names are replaced by "cpu" / "native" here: those files are fuzzed directly by
// device_from_json / engine_from_json on the same input.
#include "common/json_io.h"
#include "fuzz_util.h"
#include "hardware/scenario.h"

namespace {

void unpath(ac::json& j, const char* key, const char* fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return;
  const std::string s = j[key].get<std::string>();
  // The test of find_data_file (hardware/data_dir.h) for "a path, not a name".
  if (s.find('/') != std::string::npos || ac::fs::path(s).extension() == ".json")
    j[key] = fallback;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "fuzz-scenario.json";
  ac::json j;
  try {
    j = ac::parse_json_text(ac::fuzz::as_text(data, size), file);
  } catch (const ac::Error&) {
    return 0;
  }
  ac::fuzz::expect_ok_or_error([&] { (void)ac::device_from_json(j, file); }, file);
  ac::fuzz::expect_ok_or_error([&] { (void)ac::engine_from_json(j, file); }, file);
  unpath(j, "device", "cpu");
  unpath(j, "engine", "native");
  ac::fuzz::expect_ok_or_error([&] {
    const ac::Scenario s = ac::scenario_from_json(j, file, AC_SOURCE_DIR);
    AC_FUZZ_ASSERT(s.workload.prompt_tokens > 0 && s.workload.batch_size > 0);
    (void)s.limits.to_json().dump();
  }, file, AC_SOURCE_DIR);  // an unknown device or engine names the file looked for
  return 0;
}
