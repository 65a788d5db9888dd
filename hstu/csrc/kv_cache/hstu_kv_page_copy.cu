// Page copies of KVCacheManager's offload / reload (declarations and contract in hstu_kv_cache.h): one block per
// (entry, layer) copies a whole page with 16-byte loads and stores; blocks of entries past the live count exit.
#include <cstdint>

#include "hstu/csrc/kv_cache/hstu_kv_cache.h"

namespace hstu {
namespace kvcache {
namespace detail {

constexpr int kCopyThreads = 256;

__global__ void __launch_bounds__(kCopyThreads) page_copy_kernel(PageCopyParams p) {
  const int64_t e = blockIdx.x, l = blockIdx.y;
  if (e >= *p.count) return;
  const int64_t sp = p.src_pages[e], dp = p.dst_pages[e];
  if (sp < 0 || sp >= p.src_layer_pages || dp < 0 || dp >= p.dst_layer_pages) return;
  const uint4* s = reinterpret_cast<const uint4*>(p.src + (l * p.src_layer_pages + sp) * p.page_bytes);
  uint4* d = reinterpret_cast<uint4*>(p.dst + (l * p.dst_layer_pages + dp) * p.page_bytes);
  const int64_t n = p.page_bytes / 16;
  // 4 independent 16-byte loads in flight per thread (host memory behind PCIe / C2C has a long latency)
  int64_t i = threadIdx.x;
  for (; i + 3 * kCopyThreads < n; i += 4 * kCopyThreads) {
    const uint4 a = s[i], b = s[i + kCopyThreads], c = s[i + 2 * kCopyThreads], f = s[i + 3 * kCopyThreads];
    d[i] = a;
    d[i + kCopyThreads] = b;
    d[i + 2 * kCopyThreads] = c;
    d[i + 3 * kCopyThreads] = f;
  }
  for (; i < n; i += kCopyThreads) d[i] = s[i];
}

}  // namespace detail

cudaError_t launch_page_copy(const PageCopyParams& p, cudaStream_t stream) {
  if (p.entries <= 0 || p.layers <= 0) return cudaSuccess;
  if (p.entries > 0x7fffffff || p.layers > 65535 || p.page_bytes % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.src) % 16 != 0 || reinterpret_cast<uintptr_t>(p.dst) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  detail::page_copy_kernel<<<dim3(static_cast<unsigned>(p.entries), static_cast<unsigned>(p.layers)),
                              detail::kCopyThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcache
}  // namespace hstu
