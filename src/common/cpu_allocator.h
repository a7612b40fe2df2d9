#pragma once
// The process's CPU allocator: wraps c10's default CPU allocator (installed once, at priority
// 100, by the first call of any function here) and
//   - counts live and peak bytes of the tensors allocated through it (the measured peak memory
//     of hardware/measure.h), and
//   - while a LargeBlockCache is alive, keeps freed blocks of at least kLargeBlockBytes and
//     hands them back to the next allocation of the same size, as PyTorch's CUDA caching
//     allocator does on the GPU (c10/cuda/CUDACachingAllocator.cpp). A training step allocates
//     the same [B*T, V] logits, their gradient and the same activations every step, and both
//     allocators we run under hand such blocks back to the kernel when they are freed: jemalloc
//     (linked into the CLI and the bench) serves blocks above its oversize_threshold (8 MiB by
//     default) from an arena that purges them at once, glibc (the tests) unmaps blocks above
//     its mmap threshold (at most 32 MiB). The next step then takes a page fault and a
//     zero-fill for every 4 KiB page it touches again.
// Cached blocks are not counted as live. Tensors allocated before the first call are not
// counted (their frees are not either).

#include <cstddef>
#include <cstdint>

namespace ac {

/// Blocks at least this large (bytes) are cached while a LargeBlockCache is alive.
constexpr size_t kLargeBlockBytes = size_t(4) << 20;

/// Installs the allocator (once per process; later calls do nothing).
void install_counting_allocator();
/// Live bytes of tensors allocated through the allocator.
int64_t counted_bytes_now();
/// Peak live bytes since the last reset_counted_peak().
int64_t counted_bytes_peak();
void reset_counted_peak();

/// While at least one guard is alive, freed blocks of >= kLargeBlockBytes are kept, up to
/// `max_cached_bytes` in all (the most recent guard's value), and reused for an allocation of
/// exactly their size. The last guard to go frees every cached block. Installs the allocator.
/// Not for code that allocates ever-new sizes (it would only hold memory): a training loop,
/// whose step repeats the same shapes. AC_BLOCK_CACHE=off in the environment makes every guard
/// do nothing (for A/B timing).
class LargeBlockCache {
 public:
  explicit LargeBlockCache(int64_t max_cached_bytes = int64_t(4) << 30);
  ~LargeBlockCache();
  LargeBlockCache(const LargeBlockCache&) = delete;
  LargeBlockCache& operator=(const LargeBlockCache&) = delete;

  /// Allocations served from the cache / by the wrapped allocator (>= kLargeBlockBytes only)
  /// since the process started, and the bytes the cache holds now.
  static int64_t hits();
  static int64_t misses();
  static int64_t cached_bytes();

 private:
  bool active_;
};

}  // namespace ac
