// Where the tests find the source tree and the build tree. Defined in tests/test_paths.cpp, the
// only file compiled with those paths (AC_SOURCE_DIR, AC_BINARY_DIR): every other test file's
// compile command is then the same in any clone, so ccache serves it to a clone in another folder.
#pragma once
#include <filesystem>

namespace ac::test {

/// The repository root (CMake's CMAKE_SOURCE_DIR).
std::filesystem::path source_dir();
/// The build folder holding the autocompress binary (CMake's CMAKE_BINARY_DIR).
std::filesystem::path binary_dir();

}  // namespace ac::test
