// The host-row copies of a hybrid table's ops in host-slot order (HostOps, table_types.h).
//
// The table kernels resolve each key's slot and leave the rows of host slots to this step: one entry per key
// ((code << 32) | key index, code = host slot << 1 | read). A stable radix sort on the code's bits orders the
// entries by host slot, a slot's writes before its reads; then ONE kernel copies every row (writes: caller rows ->
// host rows; reads: host rows -> caller rows), kLanes lanes per row, neighbouring rows of a warp at neighbouring
// host addresses.
// Why sorted: UVA accesses of pinned host memory in random row order ran at 30-31 M rows/s (256-byte rows, H200,
// any thread shape), the same rows sorted by address at 151-169 M rows/s (16 lanes per row best for reads).
// Why one pass: a sorted pass over 16 GB of host rows costs ~5 ms whether it touches 0.3M or 0.5M
// rows (H200: find 0.3 host rows per key 5.46 ms, all hits 0.5 per key 5.65 ms; a fit of the numbers: the
// time follows the host regions touched, ~40 M distinct 64 KB regions/s, not the bytes), so find_or_insert's
// former write pass then read pass paid it twice (10.2 ms at HKV's hit rate 0.6).
// Several writes of one slot (duplicate keys of a batch that each held the slot in turn): only the last in key
// order is copied, so a row is never written by two lane groups at once (no torn rows). A read of a slot this op
// writes (a duplicate of a new find_or_insert key) copies that last writer's caller row, the value the write
// leaves in the slot, instead of racing the write.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {
namespace {

constexpr int kLanes = 16;  // lanes per row: 16 x 16 bytes cover a 256-byte row in one access each
constexpr int kRowsBlock = 256;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb hybrid rows: ") + what + ": " + cudaGetErrorString(e));
}

__device__ __forceinline__ uint32_t code_of(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// Index of the first entry in [0, hi) whose code is >= c (the entries are sorted by code).
__device__ int64_t first_at_least(const uint64_t* sorted, int64_t hi, uint32_t c) {
  int64_t lo = 0;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (code_of(sorted[mid]) < c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

template <typename W>
__global__ void __launch_bounds__(kRowsBlock) host_rows_kernel(HostRowsParams p, const uint64_t* sorted) {
  const int64_t e = (static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x) / kLanes;
  if (e >= p.n) return;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const uint64_t v = sorted[e];
  const uint32_t code = code_of(v);
  if ((code >> 1) >> p.bits) return;  // 'none'
  const bool read = code & 1u;
  if (read ? p.dst == nullptr : p.src == nullptr) return;
  // A later write of the same slot (a duplicate key further on in the batch) wins.
  if (!read && e + 1 < p.n && code_of(sorted[e + 1]) == code) return;
  const int64_t i = static_cast<uint32_t>(v);
  const int64_t hs = code >> 1;
  const int64_t nw = p.row_bytes / static_cast<int64_t>(sizeof(W));
  W* host = reinterpret_cast<W*>(static_cast<char*>(p.host) + hs * p.row_bytes);
  const auto src_row = [&](int64_t k) {
    return reinterpret_cast<const W*>(static_cast<const char*>(p.src) + k * p.row_bytes);
  };
  if (!read) {
    const W* src = src_row(i);
#pragma unroll 4
    for (int64_t j = lane; j < nw; j += kLanes) host[j] = src[j];
    return;
  }
  W* dst = reinterpret_cast<W*>(static_cast<char*>(p.dst) + i * p.row_bytes);
  // The slot's last write, if any: the entry just before the slot's first read (code - 1). The common case (no
  // duplicate reader) looks at e - 1 only; a duplicate reader finds the slot's first read by a binary search.
  int64_t w = -1;
  if (p.src != nullptr && e > 0) {
    const uint32_t prev = code_of(sorted[e - 1]);
    const int64_t f = prev == code ? first_at_least(sorted, e - 1, code) : e;
    if (f > 0 && code_of(sorted[f - 1]) == code - 1u) w = static_cast<uint32_t>(sorted[f - 1]);
  }
  if (w >= 0) {
    const W* src = src_row(w);
#pragma unroll 4
    for (int64_t j = lane; j < nw; j += kLanes) dst[j] = src[j];
  } else {
#pragma unroll 4
    for (int64_t j = lane; j < nw; j += kLanes) dst[j] = __ldcg(host + j);
  }
}

template <typename W>
void launch_rows(const HostRowsParams& p, const uint64_t* sorted, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((p.n * kLanes + kRowsBlock - 1) / kRowsBlock);
  host_rows_kernel<W><<<grid, kRowsBlock, 0, s>>>(p, sorted);
  check(cudaGetLastError(), "copy kernel");
}

size_t sort_bytes(int64_t n, int bits) {
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const uint64_t*>(nullptr),
                                       static_cast<uint64_t*>(nullptr), static_cast<int>(n), 32, 32 + bits + 2),
        "sort size");
  return bytes;
}

}  // namespace

// Layout of the scratch: the sorted entries, then cub's temporary storage (256-byte aligned).
size_t host_rows_scratch_bytes(int64_t n, int bits) {
  return static_cast<size_t>(up256(n * 8)) + sort_bytes(n, bits);
}

void launch_host_rows(const HostRowsParams& p, void* stream) {
  if (p.n == 0) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  uint64_t* sorted = static_cast<uint64_t*>(p.scratch);
  size_t bytes = sort_bytes(p.n, p.bits);
  // The code's bits only (the key index below them keeps its order: the sort is stable).
  check(cub::DeviceRadixSort::SortKeys(static_cast<char*>(p.scratch) + up256(p.n * 8), bytes, p.ops, sorted,
                                       static_cast<int>(p.n), 32, 32 + p.bits + 2, s),
        "sort");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p.host) | reinterpret_cast<uintptr_t>(p.src) |
                      reinterpret_cast<uintptr_t>(p.dst) | static_cast<uintptr_t>(p.row_bytes);
  if (a % 16 == 0) launch_rows<uint4>(p, sorted, s);
  else if (a % 4 == 0) launch_rows<uint32_t>(p, sorted, s);
  else launch_rows<uint16_t>(p, sorted, s);
}

}  // namespace table
}  // namespace dynamicemb
