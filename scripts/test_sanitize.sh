#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/
# (RelWithDebInfo at -O1: readable stacks, tests fast enough). Any ASan or UBSan report aborts
# the test that hit it (-fno-sanitize-recover, CMakeLists.txt AC_SANITIZE), so ctest fails.
# LeakSanitizer runs too; libtorch and the BLAS/OpenMP runtimes are not instrumented and keep
# caches until exit, so their own allocations are suppressed by library name in
# scripts/lsan.supp (never a frame of our code). Usage: scripts/test_sanitize.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_node.sh
scripts/fetch_stories15m.sh >/dev/null
cmake -S . -B build-asan -G Ninja -DAC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build build-asan -j"$(nproc)" --target autocompress autocompress_tests
mkdir -p build-asan/test-artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j1 --timeout 1800 "$@"
