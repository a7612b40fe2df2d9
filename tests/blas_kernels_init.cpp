// Before gtest's main: the test binary runs with the BLAS kernels the CLI uses
// (common/runtime.h, ensure_fast_blas_kernels; it may re-execute the binary once).
#include "common/runtime.h"

namespace {
const bool kBlasKernelsChosen = (ac::ensure_fast_blas_kernels(), true);
}  // namespace
