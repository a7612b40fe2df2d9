// Profile JSON written by `autocompress profile` (hardware/profile.h). Every table of an
// accepted profile must answer lookups at its entries and between them.
#include <cmath>

#include "common/json_io.h"
#include "fuzz_util.h"
#include "hardware/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "profile.json";
  ac::json j;
  try {
    j = ac::parse_json_text(ac::fuzz::as_text(data, size), file);
  } catch (const ac::Error&) {
    return 0;
  }
  ac::fuzz::expect_ok_or_error([&] {
    const ac::Profile p = ac::Profile::from_json(j, file);
    for (const auto& [name, table] : p.tables) {
      for (size_t i = 0; i < table.entries.size() && i < 64; ++i) {
        std::vector<double> q(table.entries[i].dims.begin(), table.entries[i].dims.end());
        const double at = table.lookup(q, name);
        AC_FUZZ_ASSERT(!std::isnan(at));
        for (double& x : q) x = x * 1.5 + 1;
        (void)table.lookup(q, name);
      }
    }
    (void)p.to_json().dump();
  }, file);
  return 0;
}
