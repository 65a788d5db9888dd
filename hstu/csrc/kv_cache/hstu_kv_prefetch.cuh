// The L2 prefetch of a step's pages (hstu_kv_cache.h PrefetchParams): device code shared by the prefetch kernel,
// the append kernel's prefetch blocks and begin_step's prefetch CTAs.
#pragma once

#include <cstdint>

#include "hstu/csrc/kv_cache/hstu_kv_cache.h"

namespace hstu {
namespace kvcache {
namespace detail {

// One 16-byte-aligned chunk asked of the L2 (no data returned to the SM).
__device__ __forceinline__ void prefetch_chunk(const uint8_t* ptr, int bytes, int mode) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (mode == 1) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(ptr), "r"(bytes) : "memory");
    return;
  }
#endif
  for (int b = 0; b < bytes; b += 128) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(ptr + b));
}

// The prefetch's work (PrefetchParams) for block `cta` of `ctas` (every thread of the block; the block's threads
// take one chunk each per pass).
__device__ __forceinline__ void prefetch_pages(const PrefetchParams& p, int64_t cta, int64_t ctas) {
  if (p.ready != nullptr) {
    if (threadIdx.x == 0) {
      int r;
      do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(r) : "l"(p.ready) : "memory");
      } while (r < 2);
    }
    __syncthreads();
  }
  const int64_t e0 = min(max(int64_t{__ldcg(p.page_offsets)}, int64_t{0}), p.n_entries);
  const int64_t e1 = min(max(int64_t{__ldcg(p.page_offsets + p.batch)}, e0), p.n_entries);
  const int64_t pages = min(e1 - e0, p.max_pages);
  const int64_t per_page = p.page_bytes / p.chunk_bytes;
  const int64_t work = pages * per_page * p.layers;
  for (int64_t w = cta * blockDim.x + threadIdx.x; w < work; w += ctas * blockDim.x) {
    const int64_t c = w % per_page, i = (w / per_page) % pages, l = w / (per_page * pages);
    const int64_t page = min(max(int64_t{__ldcg(p.page_ids + e0 + i)}, int64_t{0}), p.layer_pages - 1);
    const int64_t layer = min(int64_t{p.first_layer} + l, int64_t{p.pool_layers} - 1);
    prefetch_chunk(p.pool + (layer * p.layer_pages + page) * p.page_bytes + c * p.chunk_bytes, p.chunk_bytes,
                   p.mode);
  }
}

}  // namespace detail
}  // namespace kvcache
}  // namespace hstu
