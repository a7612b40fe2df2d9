// The process's CPU allocator (common/cpu_allocator.h): live/peak counting, and the
// large-block cache of the training loop.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/cpu_allocator.h"

using namespace ac;

TEST(CpuAllocator, ALargeBlockFreedUnderTheGuardIsHandedBackForTheSameSize) {
  install_counting_allocator();
  const int64_t n = int64_t(kLargeBlockBytes / sizeof(float)) + 1024;  // just above the threshold
  const int64_t live0 = counted_bytes_now();
  {
    LargeBlockCache guard(/*max_cached_bytes=*/int64_t(64) << 20);
    const int64_t hits0 = LargeBlockCache::hits();
    void* first = nullptr;
    {
      at::Tensor a = at::empty({n}, at::kFloat);
      first = a.data_ptr();
      EXPECT_EQ(counted_bytes_now() - live0, n * 4);
    }
    EXPECT_EQ(counted_bytes_now(), live0) << "a cached block is not live";
    EXPECT_EQ(LargeBlockCache::cached_bytes(), n * 4);
    at::Tensor b = at::empty({n}, at::kFloat);  // same byte size: the cached block
    EXPECT_EQ(b.data_ptr(), first);
    EXPECT_EQ(LargeBlockCache::hits(), hits0 + 1);
    EXPECT_EQ(LargeBlockCache::cached_bytes(), 0);
    at::Tensor c = at::empty({n + 1}, at::kFloat);  // another size: never the cached one
    EXPECT_NE(c.data_ptr(), b.data_ptr());
    b = at::Tensor();
    c = at::Tensor();
    EXPECT_EQ(LargeBlockCache::cached_bytes(), n * 4 + (n + 1) * 4);
    // Small blocks are never cached.
    { at::Tensor small = at::empty({1024}, at::kFloat); }
    EXPECT_EQ(LargeBlockCache::cached_bytes(), n * 4 + (n + 1) * 4);
  }
  EXPECT_EQ(LargeBlockCache::cached_bytes(), 0) << "the last guard frees every cached block";
  EXPECT_EQ(counted_bytes_now(), live0);
}

TEST(CpuAllocator, TheCacheHoldsAtMostItsLimitAndNothingWithoutAGuard) {
  install_counting_allocator();
  const int64_t n = int64_t(kLargeBlockBytes / sizeof(float));
  { at::Tensor a = at::empty({n}, at::kFloat); }
  EXPECT_EQ(LargeBlockCache::cached_bytes(), 0) << "no guard: freed at once";
  LargeBlockCache guard(/*max_cached_bytes=*/n * 4 * 2);  // room for two blocks
  {
    at::Tensor a = at::empty({n}, at::kFloat), b = at::empty({n}, at::kFloat),
               c = at::empty({n}, at::kFloat);
  }
  EXPECT_EQ(LargeBlockCache::cached_bytes(), n * 4 * 2);
  // Values written before a free do not matter to the next owner: a cached block is handed
  // out like a fresh one (at::empty promises no contents), and zeros() still zeroes it.
  at::Tensor z = at::zeros({n}, at::kFloat);
  EXPECT_EQ(z.abs().max().item<float>(), 0.f);
}
