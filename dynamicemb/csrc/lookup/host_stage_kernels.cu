// A training step's host rows of hybrid tables, moved through HBM in host-address order (HostStageParams,
// lookup_types.h).
//
//   keys     one thread per unique: its row address; a host row (a host slot of a table with host rows) gets
//            the sort key = its UVA address, every other unique key kNone and its final address (meta_row, 0 without
//            a row) in uaddr at once;
//   sort     cub radix sort of (address, unique) pairs over the address bits (kNone sorts last);
//   copy in  kLanes lanes per sorted host row: host row -> scratch row e (e = its sorted position), lane 0 writes
//            uaddr[u] = the scratch row; then every id's rowp from its unique's uaddr;
//   copy out (the backward, after its kernels) the same rows back, scratch -> host, in the same order.
// Neighbouring lanes groups of a warp touch neighbouring host addresses: PCIe reads/writes of whole 256-byte
// ranges instead of scattered rows (the table ops do the same since branch hyb9: csrc/table/hybrid_rows.cu).
#include <cub/device/device_radix_sort.cuh>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr uint64_t kNone = ~uint64_t(0);
constexpr int kStageLanes = 16;   // lanes per row: 16 x 16 bytes cover 256 bytes of a row per access
constexpr int kStageBlock = 256;
constexpr int kAddrBits = 48;     // UVA addresses of x86-64 / aarch64 user space (only the order depends on it)

void cuda_ok(const char* what, cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: ") + what + ": " + cudaGetErrorString(e));
}

// The scratch: [sort keys in | keys out | values in | values out | uaddr | rowp | cub temp | rows].
struct StageLayout {
  int64_t keys_in, keys_out, vals_in, vals_out, uaddr, rowp, temp, temp_bytes, rows, total;
};

StageLayout stage_layout(int64_t n, int64_t pitch) {
  StageLayout l{};
  size_t tb = 0;
  cuda_ok("host stage sort size",
          cub::DeviceRadixSort::SortPairs(nullptr, tb, static_cast<const uint64_t*>(nullptr),
                                          static_cast<uint64_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                          static_cast<int32_t*>(nullptr), static_cast<int>(n), 0, kAddrBits));
  int64_t off = 0;
  l.keys_in = off; off += up256(n * 8);
  l.keys_out = off; off += up256(n * 8);
  l.vals_in = off; off += up256(n * 4);
  l.vals_out = off; off += up256(n * 4);
  l.uaddr = off; off += up256(n * 8);
  l.rowp = off; off += up256(n * 8);
  l.temp_bytes = static_cast<int64_t>(tb);
  l.temp = off; off += up256(tb > 0 ? static_cast<int64_t>(tb) : 1);
  l.rows = off; off += n * pitch;
  l.total = off;
  return l;
}

__device__ __forceinline__ int64_t copy_bytes(const HostStageParams& p, const TableMeta& m) {
  return (p.whole_row ? m.row_stride : m.dim) * p.value_bytes;
}

__global__ void __launch_bounds__(kStageBlock) stage_keys_kernel(HostStageParams p, uint64_t* keys, int32_t* vals) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x;
  if (u >= p.n) return;
  uint64_t key = kNone, addr = 0;
  if (u < *p.count) {
    const int64_t r = p.urow[u];
    if (r >= 0) {
      const TableMeta& m = p.meta[p.utables[u]];
      const uint64_t a = reinterpret_cast<uint64_t>(
          table::table_row<uint8_t>(reinterpret_cast<void*>(m.values), reinterpret_cast<void*>(m.values_host),
                                    m.hbm_slots, m.bucket_capacity, m.host_run, r, m.row_stride * p.value_bytes));
      if (m.values_host != 0 && table::is_host_slot(m.hbm_slots, m.bucket_capacity, r)) key = a;
      else addr = a;
    }
  }
  keys[u] = key;
  vals[u] = static_cast<int32_t>(u);
  p.uaddr[u] = addr;
}

// One row (kStageLanes lanes) of `bytes` bytes, W-sized words (the row's alignment).
template <typename W>
__device__ __forceinline__ void copy_row(char* dst, const char* src, int64_t bytes, int lane, bool from_host) {
  const int64_t nw = bytes / static_cast<int64_t>(sizeof(W));
  W* d = reinterpret_cast<W*>(dst);
  const W* s = reinterpret_cast<const W*>(src);
#pragma unroll 4
  for (int64_t j = lane; j < nw; j += kStageLanes) d[j] = from_host ? __ldcg(s + j) : s[j];
}

__device__ __forceinline__ void copy_any(char* dst, const char* src, int64_t bytes, int lane, bool from_host) {
  const uint64_t a = reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) |
                     static_cast<uint64_t>(bytes);
  if (a % 16 == 0) copy_row<uint4>(dst, src, bytes, lane, from_host);
  else if (a % 4 == 0) copy_row<uint32_t>(dst, src, bytes, lane, from_host);
  else copy_row<uint16_t>(dst, src, bytes, lane, from_host);
}

// kIn: host rows -> scratch rows (and uaddr); else scratch rows -> host rows (whole rows).
template <bool kIn>
__global__ void __launch_bounds__(kStageBlock) stage_rows_kernel(HostStageParams p, const uint64_t* keys,
                                                                 const int32_t* vals, char* rows) {
  const int64_t e = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / kStageLanes;
  if (e >= p.n) return;
  const uint64_t host = keys[e];
  if (host == kNone) return;
  const int lane = static_cast<int>(threadIdx.x % kStageLanes);
  const int32_t u = vals[e];
  const TableMeta& m = p.meta[p.utables[u]];
  const int64_t bytes = copy_bytes(p, m);
  if (bytes > p.pitch) __trap();  // the op's pitch covers every table's row (the module computes it)
  char* scratch = rows + e * p.pitch;
  char* h = reinterpret_cast<char*>(host);
  if (kIn) {
    copy_any(scratch, h, bytes, lane, true);
    if (lane == 0) p.uaddr[u] = reinterpret_cast<uint64_t>(scratch);
  } else {
    copy_any(h, scratch, bytes, lane, false);
  }
}

__global__ void __launch_bounds__(kStageBlock) stage_rowp_kernel(HostStageParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x;
  if (i >= p.n_ids) return;
  const int32_t u = p.inverse[i];
  p.rowp[i] = u >= 0 ? p.uaddr[u] : 0;
}

}  // namespace detail

size_t host_stage_bytes(int64_t n, int64_t pitch) {
  return n > 0 ? static_cast<size_t>(detail::stage_layout(n, pitch).total) : 0;
}

void bind_host_stage(HostStageParams& p, void* scratch) {
  const detail::StageLayout l = detail::stage_layout(p.n, p.pitch);
  char* b = static_cast<char*>(scratch);
  p.scratch = scratch;
  p.uaddr = reinterpret_cast<uint64_t*>(b + l.uaddr);
  p.rowp = reinterpret_cast<uint64_t*>(b + l.rowp);
}

void launch_host_stage_in(const HostStageParams& p, void* stream) {
  if (p.n == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const detail::StageLayout l = detail::stage_layout(p.n, p.pitch);
  char* b = static_cast<char*>(p.scratch);
  auto* keys_in = reinterpret_cast<uint64_t*>(b + l.keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(b + l.keys_out);
  auto* vals_in = reinterpret_cast<int32_t*>(b + l.vals_in);
  auto* vals_out = reinterpret_cast<int32_t*>(b + l.vals_out);
  detail::stage_keys_kernel<<<blocks_for(p.n, detail::kStageBlock), detail::kStageBlock, 0, st>>>(p, keys_in,
                                                                                                  vals_in);
  check_launch("host stage keys");
  size_t tb = static_cast<size_t>(l.temp_bytes);
  detail::cuda_ok("host stage sort", cub::DeviceRadixSort::SortPairs(b + l.temp, tb, keys_in, keys_out, vals_in, vals_out,
                                                             static_cast<int>(p.n), 0, detail::kAddrBits, st));
  detail::stage_rows_kernel<true><<<blocks_for(p.n * detail::kStageLanes, detail::kStageBlock), detail::kStageBlock,
                                    0, st>>>(p, keys_out, vals_out, b + l.rows);
  check_launch("host stage rows in");
  if (p.rowp != nullptr && p.n_ids > 0) {
    detail::stage_rowp_kernel<<<blocks_for(p.n_ids, detail::kStageBlock), detail::kStageBlock, 0, st>>>(p);
    check_launch("host stage row addresses");
  }
}

void launch_host_stage_out(const HostStageParams& p, void* stream) {
  if (p.n == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const detail::StageLayout l = detail::stage_layout(p.n, p.pitch);
  char* b = static_cast<char*>(p.scratch);
  detail::stage_rows_kernel<false><<<blocks_for(p.n * detail::kStageLanes, detail::kStageBlock),
                                     detail::kStageBlock, 0, st>>>(
      p, reinterpret_cast<const uint64_t*>(b + l.keys_out), reinterpret_cast<const int32_t*>(b + l.vals_out),
      b + l.rows);
  check_launch("host stage rows out");
}

}  // namespace lookup
}  // namespace dynamicemb
