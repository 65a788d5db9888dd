// Page copies of KVCacheManager's offload / reload (declarations and contract in hstu_kv_cache.h): one block per
// (entry, layer) copies a whole page with 16-byte loads and stores; blocks of entries past the live count exit.
#include <cstdint>

#include "common/pdl.cuh"
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

// One warp per entry and layer (rows of H * D elements are a few hundred bytes): 16-byte copies of K and V.
constexpr int kAppendWarps = 8;
__global__ void __launch_bounds__(32 * kAppendWarps) append_kernel(AppendParams p) {
  // Programmatic dependent launch: the wait (first thing: nothing is read before it) holds a launch with
  // programmatic serialization (launch_append's pdl) until the kernel before it completed, and is a no-op in a plain
  // launch; the signal lets a kernel behind this one
  // that was launched with programmatic serialization (the next layer's paged forward under
  // kernel_options(pdl=True)) start its CTAs now, on the SMs this small grid leaves free. It waits for this grid
  // before its first read, and nothing before this grid is incomplete then (the signal follows this grid's wait).
  accel::griddep_wait();
  accel::griddep_launch_dependents();
  const int64_t i = int64_t{blockIdx.x} * kAppendWarps + threadIdx.x / 32, l = blockIdx.y;
  if (i >= p.entries) return;
  const int64_t d = p.dst[i], s = p.src != nullptr ? p.src[i] : i;
  if (d < 0 || d + p.page_size >= p.sink_row || s < 0 || s >= p.src_rows) return;
  const uint4* ks = reinterpret_cast<const uint4*>(p.k + l * p.k_layer_stride + s * p.k_row_stride);
  const uint4* vs = reinterpret_cast<const uint4*>(p.v + l * p.v_layer_stride + s * p.v_row_stride);
  uint8_t* base = p.pool + l * p.layer_rows * p.row_bytes;
  uint4* kd = reinterpret_cast<uint4*>(base + d * p.row_bytes);
  uint4* vd = reinterpret_cast<uint4*>(base + (d + p.page_size) * p.row_bytes);
  for (int64_t c = threadIdx.x % 32; c < p.row_bytes / 16; c += 32) {
    const uint4 a = ks[c], b = vs[c];
    kd[c] = a;
    vd[c] = b;
  }
}

}  // namespace detail

cudaError_t launch_append(const AppendParams& p, cudaStream_t stream, bool pdl) {
  if (p.entries <= 0 || p.layers <= 0) return cudaSuccess;
  if (p.layers > 65535 || p.row_bytes % 16 != 0 || p.sink_row > p.layer_rows ||
      reinterpret_cast<uintptr_t>(p.pool) % 16 != 0 || reinterpret_cast<uintptr_t>(p.k) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.v) % 16 != 0 ||
      ((p.k_layer_stride | p.k_row_stride | p.v_layer_stride | p.v_row_stride) % 16) != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t blocks = (p.entries + detail::kAppendWarps - 1) / detail::kAppendWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.layers));
  return accel::launch_pdl(detail::append_kernel, grid, 32 * detail::kAppendWarps, 0, stream, pdl, p);
}

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
