// The caching tables' miss check of a step (CacheProbeParams, lookup_types.h): one thread per id finds its
// feature and table and probes the table read-only; misses are counted per table in shared memory (one global
// atomic per table and block), the feature bounds are copied next to the counts. Replaces one masked lookup of
// the whole batch per caching table (T launches, a (T, n) mask) by one launch over the batch. With `stage` set
// (op cache_stage) a hit also stamps its cache slot with the step's stamp (the staging's guard), reading the stamp
// first: a hot slot is written by the first threads that hit it only.
#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/probe_meta.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kProbeBlock = 256;
constexpr int kProbeSmemTables = 64;  // tables counted in shared memory; more count with global atomics

__global__ void __launch_bounds__(kProbeBlock) cache_probe_kernel(CacheProbeParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;  // a prefetch staged the batch (info stays zero)
  __shared__ unsigned long long miss[kProbeSmemTables];
  const bool smem = p.num_tables <= kProbeSmemTables;
  for (int t = threadIdx.x; t < kProbeSmemTables; t += kProbeBlock) miss[t] = 0;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kProbeBlock + threadIdx.x;
  if (i <= p.num_features)  // the feature bounds (F + 1 of them when the batch has bags)
    p.info[p.num_tables + i] = p.batch > 0 ? p.offsets[i * p.batch] : 0;
  __syncthreads();
  if (i < p.n) {
    const int t = __ldg(p.feature_table + feature_of_pos(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i));
    bool hit = true;
    if (__ldg(p.table_mask + t)) {
      const uint64_t key = __ldg(p.ids + i);
      const int64_t slot = table::is_reserved_key(key) ? -1 : probe_meta_slot(p.meta[t], key);
      hit = slot >= 0;
      if (hit && p.stage != nullptr) {  // the guard of this step's rows (stage_common.h)
        // Read before write: stamps only increase, so a slot already at >= cur needs no store. With power-law ids
        // thousands of threads hit the same hot slots; only those that still see an older stamp (the first few,
        // before the first atomic lands in L2) issue the atomic, the rest read it and go on (no same-address
        // atomic serialization). A stale read can only show a smaller stamp: then the atomic runs, as before.
        // Lanes of a warp on one slot (a hot id repeated in the batch) elect their lowest lane: one read (and at
        // most one atomic) per slot and warp.
        unsigned long long* st = reinterpret_cast<unsigned long long*>(p.stage[t].stamps) + slot;
        const unsigned peers = __match_any_sync(__activemask(), reinterpret_cast<unsigned long long>(st));
        const unsigned lane = threadIdx.x & 31u;
        if ((peers & ((1u << lane) - 1u)) == 0u && static_cast<int64_t>(__ldcg(st)) < p.cur)
          atomicMax(st, static_cast<unsigned long long>(p.cur));
      }
      if (!hit) {
        if (smem) atomicAdd(&miss[t], 1ull);
        else atomicAdd(reinterpret_cast<unsigned long long*>(p.info + t), 1ull);
      }
    }
    p.found[i] = hit;
  }
  if (!smem) return;
  __syncthreads();
  for (int t = threadIdx.x; t < p.num_tables; t += kProbeBlock)
    if (miss[t]) atomicAdd(reinterpret_cast<unsigned long long*>(p.info + t), miss[t]);
}

}  // namespace detail

void launch_cache_probe(const CacheProbeParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t items = p.n > p.num_features + 1 ? p.n : p.num_features + 1;
  detail::cache_probe_kernel<<<blocks_for(items, detail::kProbeBlock), detail::kProbeBlock, 0, st>>>(p);
  check_launch("cache probe");
}

}  // namespace lookup
}  // namespace dynamicemb
