// Per-table id dedup of one step, without a sort: bags of the ids, exact (table, id) set insert that hands out
// compact unique indices, then the inverse map (and the set is cleaned for the next step).
#include "dynamicemb/csrc/lookup/lookup_common.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kDedupBlock = 256;
constexpr uint64_t kSetEmpty = table::kEmptyKey;
constexpr uint64_t kSetLocked = table::kLockedKey;

__device__ __forceinline__ uint64_t ld_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ int64_t clamp_off(int64_t v, int64_t n) { return v < 0 ? 0 : (v > n ? n : v); }

// One warp per 32 bags: bag[i] for every id of them (lanes stride over each bag's ids). Ids before the first
// offset belong to bag 0 and ids after the last to the last bag (as a search in offsets would say).
__global__ void __launch_bounds__(kDedupBlock) bag_kernel(DedupParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t b0 = ((static_cast<int64_t>(blockIdx.x) * kDedupBlock + threadIdx.x) >> 5) * 32;
  if (b0 >= p.num_bags) return;
  const int nb = static_cast<int>(p.num_bags - b0 < 32 ? p.num_bags - b0 : 32);
  int64_t lo = 0, hi = 0;
  if (lane < nb) {
    lo = clamp_off(p.offsets[b0 + lane], p.n);
    hi = clamp_off(p.offsets[b0 + lane + 1], p.n);
  }
  for (int j = 0; j < nb; ++j) {
    const int64_t l = __shfl_sync(0xffffffffu, lo, j), h = __shfl_sync(0xffffffffu, hi, j);
    for (int64_t i = l + lane; i < h; i += 32) p.bag[i] = static_cast<int32_t>(b0 + j);
  }
  if (b0 == 0) {
    const int64_t first = clamp_off(p.offsets[0], p.n);
    for (int64_t i = lane; i < first; i += 32) p.bag[i] = 0;
  }
  if (b0 + nb == p.num_bags) {
    const int64_t last = clamp_off(p.offsets[p.num_bags], p.n);
    for (int64_t i = last + lane; i < p.n; i += 32) p.bag[i] = static_cast<int32_t>(p.num_bags - 1);
  }
}

// One thread per id: the set slot of (table, id). A free slot is claimed EMPTY -> LOCKED, the table written,
// then the id published (release); readers that meet LOCKED wait for the publish (a claimer never waits on
// anything, so this cannot deadlock). After the probe, the claimers of a warp take consecutive unique indices
// with one atomic and record their unique (key, table, slot); the inverse pass reads them.
__global__ void __launch_bounds__(kDedupBlock) set_insert_kernel(DedupParams p) {
  const uint64_t mask = static_cast<uint64_t>(p.set_capacity) - 1;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kDedupBlock + threadIdx.x;
  bool claimed = false;
  uint64_t key = 0, s = 0;
  int32_t t = 0;
  if (i < p.n) {
    int64_t f = p.bag[i] / p.batch;
    f = f < 0 ? 0 : (f >= p.num_features ? p.num_features - 1 : f);
    t = __ldg(p.feature_table + f);
    key = __ldg(reinterpret_cast<const unsigned long long*>(p.ids) + i);
    if (table::is_reserved_key(key)) {
      s = static_cast<uint64_t>(p.set_capacity);
    } else {
      s = table::mix64(key ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(t + 1))) & mask;
      while (true) {
        uint64_t k = ld_acquire(p.set_keys + s);
        if (k == kSetEmpty) {
          k = atomicCAS(reinterpret_cast<unsigned long long*>(p.set_keys + s), kSetEmpty, kSetLocked);
          if (k == kSetEmpty) {
            p.set_tables[s] = t;
            st_release(p.set_keys + s, key);
            claimed = true;
            break;
          }
        }
        while (k == kSetLocked) k = ld_acquire(p.set_keys + s);
        if (k == key && *reinterpret_cast<volatile const int32_t*>(p.set_tables + s) == t) break;
        s = (s + 1) & mask;
      }
    }
    p.slot[i] = static_cast<uint32_t>(s);
  }
  const unsigned who = __ballot_sync(0xffffffffu, claimed);
  if (who == 0) return;
  const int lane = threadIdx.x & 31;
  int32_t base = 0;
  if (lane == __ffs(who) - 1) base = atomicAdd(p.count, __popc(who));
  base = __shfl_sync(0xffffffffu, base, __ffs(who) - 1);
  if (claimed) {
    const int32_t u = base + __popc(who & ((1u << lane) - 1u));
    p.set_uidx[s] = u;
    p.ukeys[u] = key;
    p.utables[u] = t;
    p.uslot[u] = static_cast<int32_t>(s);
  }
}

// inverse[i] = unique of id i (-1: reserved id); thread u < count also cleans its unique's set slot (nothing
// reads set_keys in this pass).
__global__ void __launch_bounds__(kDedupBlock) inverse_kernel(DedupParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kDedupBlock + threadIdx.x;
  if (i >= p.n) return;
  const uint32_t s = p.slot[i];
  p.inverse[i] = s < static_cast<uint64_t>(p.set_capacity) ? p.set_uidx[s] : -1;
  if (i < *p.count) p.set_keys[p.uslot[i]] = kSetEmpty;
}

}  // namespace detail

void launch_dedup(const DedupParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(p.count, 0, sizeof(int32_t), st);
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: dedup: ") + cudaGetErrorString(e));
  if (p.n == 0) return;
  const int64_t bag_warps = (p.num_bags + 31) / 32;
  detail::bag_kernel<<<blocks_for(bag_warps, detail::kDedupBlock / 32), detail::kDedupBlock, 0, st>>>(p);
  check_launch("dedup bags");
  const unsigned grid = blocks_for(p.n, detail::kDedupBlock);
  detail::set_insert_kernel<<<grid, detail::kDedupBlock, 0, st>>>(p);
  check_launch("dedup insert");
  detail::inverse_kernel<<<grid, detail::kDedupBlock, 0, st>>>(p);
  check_launch("dedup inverse");
}

}  // namespace lookup
}  // namespace dynamicemb
