// The one torch-dependent runtime setting, apart from runtime.cpp so that the torch-free parts
// (logging, cores, dates) build into the fuzz targets without torch.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>

#include "common/runtime.h"

namespace ac {

int init_torch_threads() {
  int n = cpu_cores();
  if (const char* env = std::getenv("AC_NUM_THREADS")) n = std::max(1, std::atoi(env));
  if (at::get_num_threads() != n) at::set_num_threads(n);
  return n;
}

}  // namespace ac
