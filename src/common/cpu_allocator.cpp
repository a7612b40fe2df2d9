#include "common/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace ac {

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

// The large-block cache: size -> freed blocks of that size (still allocated by the base).
struct BlockCache {
  std::mutex mu;
  std::multimap<size_t, c10::DataPtr> free;
  int64_t cached = 0, limit = 0;
  int guards = 0;
  std::atomic<int64_t> hits{0}, misses{0};
};
BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: frees may run during exit
  return *c;
}

struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
};

// Each live block's record, by its data pointer: the DataPtr's context is the data pointer itself,
// as c10::Allocator::raw_allocate requires (oneDNN's bf16 kernels allocate their scratch through
// it, and assert that the two are equal).
struct LiveBlocks {
  std::mutex mu;
  std::unordered_map<void*, Counted*> by_data;
};
LiveBlocks& live_blocks() {
  static LiveBlocks* l = new LiveBlocks;  // never destroyed: frees may run during exit
  return *l;
}

void free_counted(void* data) {
  Counted* c = nullptr;
  {
    LiveBlocks& l = live_blocks();
    std::lock_guard<std::mutex> lock(l.mu);
    auto it = l.by_data.find(data);
    if (it == l.by_data.end()) return;  // a zero-byte block (null data): nothing recorded
    c = it->second;
    l.by_data.erase(it);
  }
  g_live -= c->bytes;
  if (size_t(c->bytes) >= kLargeBlockBytes) {
    BlockCache& bc = cache();
    std::lock_guard<std::mutex> lock(bc.mu);
    if (bc.guards > 0 && bc.cached + c->bytes <= bc.limit) {
      bc.cached += c->bytes;
      bc.free.emplace(size_t(c->bytes), std::move(c->inner));
    }
  }
  delete c;  // releases `inner` unless the cache took it
}

// c10::Allocator changed in PyTorch 2.3: allocate() is no longer const, and copy_data() is a new
// pure virtual (c10/core/Allocator.h). The GPU build (scripts/build_cuda.sh) uses a 2.x libtorch,
// the CPU build Debian's 1.13.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define AC_ALLOCATE_CONST
#define AC_ALLOCATOR_COPY_DATA 1
#else
#define AC_ALLOCATE_CONST const
#endif

struct CountingAllocator final : c10::Allocator {
  c10::Allocator* base;
  explicit CountingAllocator(c10::Allocator* b) : base(b) {}
  c10::DataPtr allocate(size_t n) AC_ALLOCATE_CONST override {
    c10::DataPtr inner;
    if (n >= kLargeBlockBytes) {
      BlockCache& bc = cache();
      std::lock_guard<std::mutex> lock(bc.mu);
      auto it = bc.free.find(n);
      if (it != bc.free.end()) {
        inner = std::move(it->second);
        bc.free.erase(it);
        bc.cached -= int64_t(n);
        ++bc.hits;
      } else if (bc.guards > 0) {
        ++bc.misses;
      }
    }
    if (!inner) inner = base->allocate(n);
    void* data = inner.get();
    if (!data) return inner;  // n == 0: nothing to count
    {
      LiveBlocks& l = live_blocks();
      std::lock_guard<std::mutex> lock(l.mu);
      l.by_data[data] = new Counted{std::move(inner), int64_t(n)};
    }
    int64_t now = (g_live += int64_t(n)), peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &free_counted, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
#ifdef AC_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif
};

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator alloc(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&alloc, /*priority=*/100);
  });
}
int64_t counted_bytes_now() { return g_live.load(); }
int64_t counted_bytes_peak() { return g_peak.load(); }
void reset_counted_peak() { g_peak.store(g_live.load()); }

// AC_BLOCK_CACHE=off: every guard does nothing (for A/B timing, bench/run.sh).
static bool cache_disabled() {
  static const bool off = [] {
    const char* e = std::getenv("AC_BLOCK_CACHE");
    return e && std::strcmp(e, "off") == 0;
  }();
  return off;
}

LargeBlockCache::LargeBlockCache(int64_t max_cached_bytes) : active_(!cache_disabled()) {
  install_counting_allocator();
  if (!active_) return;
  BlockCache& bc = cache();
  std::lock_guard<std::mutex> lock(bc.mu);
  ++bc.guards;
  bc.limit = max_cached_bytes;
}

LargeBlockCache::~LargeBlockCache() {
  if (!active_) return;
  std::multimap<size_t, c10::DataPtr> release;
  BlockCache& bc = cache();
  {
    std::lock_guard<std::mutex> lock(bc.mu);
    if (--bc.guards > 0) return;
    release.swap(bc.free);
    bc.cached = 0;
  }
  // `release` frees the blocks here, outside the lock.
}

int64_t LargeBlockCache::hits() { return cache().hits.load(); }
int64_t LargeBlockCache::misses() { return cache().misses.load(); }
int64_t LargeBlockCache::cached_bytes() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().cached;
}

}  // namespace ac
