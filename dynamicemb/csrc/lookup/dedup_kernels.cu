// Per-table id dedup of one step, without a sort: bags of the ids, exact (table, id) set insert that hands out
// compact unique indices (lock-free: one CAS per new id), then the inverse map (and the set is cleaned for the
// next step).
#include "dynamicemb/csrc/lookup/lookup_common.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kDedupBlock = 256;
constexpr uint64_t kSetEmpty = table::kEmptyKey;
constexpr uint32_t kClaimedBit = 0x80000000u;  // in slot[i]: id i claimed its slot (and wrote its inverse)

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

// One thread per id: the set slot of (table, id). A slot is 16 bytes {key, table, uidx}; between steps every
// slot is {EMPTY, -1, *}. A free slot is claimed with one 64-bit CAS of its key (EMPTY -> id), then the claimer
// stores the table; a prober that meets its id with table -1 waits for that store (the claimer never waits on
// anything, so this cannot deadlock) and goes on probing if the table differs. No fences: each word is written
// once per step with its final value. After the probe, the block's claimers take consecutive unique indices with
// one global atomic per block (unique indices follow the id order block by block, which the segmented backward
// uses for locality) and record their unique (key, table, slot); the inverse pass reads them.
__device__ __forceinline__ void ld_slot(const SetSlot* s, uint64_t& key, int32_t& table) {
  uint64_t k, w;
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(k), "=l"(w) : "l"(s) : "memory");
  key = k;
  table = static_cast<int32_t>(static_cast<uint32_t>(w));
}
__device__ __forceinline__ int32_t ld_table(const SetSlot* s) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(&s->table) : "memory");
  return v;
}

__device__ __forceinline__ void st_table(SetSlot* s, int32_t v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" : : "l"(&s->table), "r"(v) : "memory");
}

__global__ void __launch_bounds__(kDedupBlock) set_insert_kernel(DedupParams p) {
  __shared__ int32_t block_count, block_base;
  if (threadIdx.x == 0) block_count = 0;
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
        uint64_t k;
        int32_t kt;
        ld_slot(p.set + s, k, kt);
        if (k == kSetEmpty) {
          k = atomicCAS(reinterpret_cast<unsigned long long*>(&p.set[s].key), kSetEmpty, key);
          if (k == kSetEmpty) {
            st_table(p.set + s, t);
            claimed = true;
            break;
          }
          kt = -1;
        }
        if (k == key) {
          while (kt == -1) kt = ld_table(p.set + s);
          if (kt == t) break;
        }
        s = (s + 1) & mask;
      }
    }
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const unsigned who = __ballot_sync(0xffffffffu, claimed);
  int32_t warp_off = 0;
  if (who != 0 && lane == __ffs(who) - 1) warp_off = atomicAdd(&block_count, __popc(who));
  __syncthreads();
  if (threadIdx.x == 0 && block_count > 0) block_base = atomicAdd(p.count, block_count);
  __syncthreads();
  if (i < p.n) p.slot[i] = static_cast<uint32_t>(s) | (claimed ? kClaimedBit : 0u);
  if (who == 0) return;
  warp_off = __shfl_sync(0xffffffffu, warp_off, __ffs(who) - 1);
  if (claimed) {  // a claimer knows its unique: the inverse pass reads the set only for the other ids
    const int32_t u = block_base + warp_off + __popc(who & ((1u << lane) - 1u));
    p.set[s].uidx = u;
    p.inverse[i] = u;
    p.ukeys[u] = key;
    p.utables[u] = t;
    p.uslot[u] = static_cast<int32_t>(s);
  }
}

// inverse[i] = unique of id i (-1: reserved id) for the ids that did not claim their slot; thread u < count
// also cleans its unique's set slot back to {EMPTY, -1} (its uidx stays u: this pass reads only uidx).
__global__ void __launch_bounds__(kDedupBlock) inverse_kernel(DedupParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kDedupBlock + threadIdx.x;
  if (i >= p.n) return;
  const uint32_t s = p.slot[i];
  if ((s & kClaimedBit) == 0) p.inverse[i] = s < static_cast<uint64_t>(p.set_capacity) ? p.set[s].uidx : -1;
  if (i < *p.count) {
    SetSlot e;
    e.key = kSetEmpty;
    e.table = -1;
    e.uidx = static_cast<int32_t>(i);
    p.set[p.uslot[i]] = e;
  }
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
