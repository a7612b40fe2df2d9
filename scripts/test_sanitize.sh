#!/usr/bin/env bash
# The tests where memory bugs live, under AddressSanitizer + UndefinedBehaviorSanitizer, in
# build-asan/ (RelWithDebInfo at -O1 with line tables, -g1: readable stacks with file and line,
# a third of the compile time of full debug information; AC_SANITIZE_DEBUG=-g for variables).
#
#   scripts/test_sanitize.sh                 every test not labelled e2e, client, slow or judge:
#                                            the parsers, formats, kernels, search, distillation
#                                            and export (unit and model tiers, tests/labels.cmake);
#                                            the end-to-end runs and the judge only repeat that code
#   scripts/test_sanitize.sh CTEST_ARGS...   ctest with those arguments instead (e.g. `-R Gguf`,
#                                            or `-LE none` for every test)
#
# Any ASan or UBSan report aborts the test that hit it (-fno-sanitize-recover, CMakeLists.txt
# AC_SANITIZE), so ctest fails. LeakSanitizer runs too; libtorch and the BLAS/OpenMP runtimes are
# not instrumented and keep caches until exit, so their own allocations are suppressed by library
# name in scripts/lsan.supp (never a frame of our code). AC_SETUP_DONE=1 skips the install steps.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/phases.sh
if [ -z "${AC_SETUP_DONE:-}" ]; then
  phase setup scripts/setup_tests.sh
fi
configure_and_build() {
  cmake -S . -B build-asan -G Ninja -DAC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 ${AC_SANITIZE_DEBUG:--g1}" >/dev/null
  cmake --build build-asan -j"$(nproc)" --target autocompress autocompress_tests
}
phase "build (ASan + UBSan)" configure_and_build
mkdir -p build-asan/test-artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
args=("$@")
((${#args[@]})) || args=(-LE 'e2e|client|slow|judge')
phase "tests (ASan + UBSan)" ctest --test-dir build-asan --output-on-failure -j1 --timeout 1800 "${args[@]}"
