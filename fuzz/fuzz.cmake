# libFuzzer targets (fuzz/fuzz_*.cpp) with AddressSanitizer + UndefinedBehaviorSanitizer.
# Included by CMakeLists.txt when AC_FUZZ=ON, instead of the rest of the project: the fuzz build
# compiles only the torch-free parsers it needs, so it takes a few minutes.
# Configure (scripts/fuzz.sh does this):
#   cmake -S . -B build-fuzz -G Ninja -DAC_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "AC_FUZZ needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++ (Debian packages clang, libclang-rt-dev)")
endif()
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(AC_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(AC_UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

# The parsers of every file autocompress reads, and what they call; nothing that needs torch.
include(${CMAKE_SOURCE_DIR}/cmake/torch_free_sources.cmake)
set(AC_FUZZ_PARSER_SOURCES ${AC_TORCH_FREE_SOURCES})
# -O1 -g: fast enough, readable stacks. -fno-sanitize-recover: a UBSan report aborts the run, so
# libFuzzer records it as a crash with its input.
set(AC_FUZZ_COMPILE_FLAGS -O1 -g -fno-omit-frame-pointer
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined)

add_library(ac_fuzz_parsers STATIC ${AC_FUZZ_PARSER_SOURCES})
target_include_directories(ac_fuzz_parsers PUBLIC src)
target_link_libraries(ac_fuzz_parsers PUBLIC nlohmann_json::nlohmann_json fmt::fmt
                      PkgConfig::AC_PCRE2 PkgConfig::AC_UTF8PROC)
target_compile_options(ac_fuzz_parsers PUBLIC ${AC_FUZZ_COMPILE_FLAGS} -Wall -Wno-unused-parameter
                       -Wno-sign-compare)
target_compile_definitions(ac_fuzz_parsers PUBLIC AC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

file(GLOB AC_FUZZ_TARGETS CONFIGURE_DEPENDS fuzz/fuzz_*.cpp)
foreach(src ${AC_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE ac_fuzz_parsers)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
endforeach()
