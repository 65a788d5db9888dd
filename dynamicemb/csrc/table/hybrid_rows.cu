// The host-row copies of a hybrid table's ops in host-slot order (HostOps, table_types.h).
//
// The table kernels resolve each key's slot and leave the rows of host slots to this step: one entry per key
// ((code << 32) | key index). A stable radix sort on the code's bits groups the writes before the reads and orders
// each group by host slot; then one kernel writes the rows (caller rows -> host rows) and one reads them (host
// rows -> caller rows), kLanes lanes per row, neighbouring rows of a warp at neighbouring host addresses.
// Why: UVA accesses of pinned host memory in random row order ran at 30-31 M rows/s (256-byte rows, H200, any
// thread shape), the same rows sorted by address at 151-169 M rows/s (16 lanes per row best for reads).
// Several writes of one slot (duplicate keys of a batch that each held the slot in turn): only the last in key
// order is copied, so a row is never written by two lanes groups at once (no torn rows).
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

int64_t up256(int64_t b) { return (b + 255) / 256 * 256; }

// kWrite: entries whose code has neither the read bit nor the 'none' bit; otherwise the read entries.
template <typename W, bool kWrite>
__global__ void __launch_bounds__(kRowsBlock) host_rows_kernel(HostRowsParams p, const uint64_t* sorted) {
  const int64_t e = (static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x) / kLanes;
  if (e >= p.n) return;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const uint64_t v = sorted[e];
  const uint32_t code = static_cast<uint32_t>(v >> 32);
  if ((code >> p.bits) != (kWrite ? 0u : 1u)) return;
  // A later write of the same slot (a duplicate key further on in the batch) wins.
  if (kWrite && e + 1 < p.n && static_cast<uint32_t>(sorted[e + 1] >> 32) == code) return;
  const int64_t i = static_cast<uint32_t>(v);
  const int64_t hs = code & ((1u << p.bits) - 1u);
  const int64_t nw = p.row_bytes / static_cast<int64_t>(sizeof(W));
  W* host = reinterpret_cast<W*>(static_cast<char*>(p.host) + hs * p.row_bytes);
  if (kWrite) {
    const W* src = reinterpret_cast<const W*>(static_cast<const char*>(p.src) + i * p.row_bytes);
#pragma unroll 4
    for (int64_t j = lane; j < nw; j += kLanes) host[j] = src[j];
  } else {
    W* dst = reinterpret_cast<W*>(static_cast<char*>(p.dst) + i * p.row_bytes);
#pragma unroll 4
    for (int64_t j = lane; j < nw; j += kLanes) dst[j] = __ldcg(host + j);
  }
}

template <typename W>
void launch_rows(const HostRowsParams& p, const uint64_t* sorted, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((p.n * kLanes + kRowsBlock - 1) / kRowsBlock);
  if (p.src) host_rows_kernel<W, true><<<grid, kRowsBlock, 0, s>>>(p, sorted);
  check(cudaGetLastError(), "write kernel");
  if (p.dst) host_rows_kernel<W, false><<<grid, kRowsBlock, 0, s>>>(p, sorted);
  check(cudaGetLastError(), "read kernel");
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
