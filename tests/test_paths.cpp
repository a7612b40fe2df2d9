// The two paths of tests/test_paths.h, from the compile definitions CMakeLists.txt gives this
// file alone.
#include "test_paths.h"

namespace ac::test {

std::filesystem::path source_dir() { return AC_SOURCE_DIR; }
std::filesystem::path binary_dir() {
#ifdef AC_BINARY_DIR
  return AC_BINARY_DIR;
#else
  return std::filesystem::path(AC_SOURCE_DIR) / "build";  // the torch-free standalone builds
#endif
}

}  // namespace ac::test
