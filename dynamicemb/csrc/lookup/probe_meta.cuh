// Single-thread, read-only helpers over a step's tables (TableMeta) shared by the probing sequence forward
// (pool_kernels.cu, eval without a dedup) and the caching tables' miss check (probe_kernels.cu): the feature of an
// id's position and the slot of a key in its table.
#pragma once

#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/table/probe.cuh"

namespace dynamicemb {
namespace lookup {

// Feature of position i: the largest f in [0, num_features) with bound(f) <= i (bound(0) = 0, bound(f) =
// offsets[f * batch] clamped to [0, n], unbounded past the bags): the dedup's function (dedup_kernels.cu
// features_of), so every kernel reads the same table for an id.
__device__ __forceinline__ int feature_of_pos(const int64_t* offsets, int64_t n, int64_t num_bags, int64_t batch,
                                              int num_features, int64_t i) {
  int f = 0, hi = num_features - 1;
  while (f < hi) {
    const int mid = (f + hi + 1) >> 1;
    const int64_t b = static_cast<int64_t>(mid) * batch;
    const bool ge = b < num_bags && clamp_off(__ldg(offsets + b), n) <= i;
    f = ge ? mid : f;
    hi = ge ? hi : mid - 1;
  }
  return f;
}

// Slot of `key` in table m, or -1 (no concurrent writer: a read-only probe by one thread, 4 digest chunks in
// flight, then their key compares). Reserved keys are never stored: the caller skips them.
__device__ __forceinline__ int64_t probe_meta_slot(const TableMeta& m, uint64_t key) {
  const table::KeyHome h = table::home_of(m, key);
  const uint64_t* keys = reinterpret_cast<const uint64_t*>(m.keys);
  const uint4* dg = reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(m.digests) + h.base);
  const int chunks = static_cast<int>(m.bucket_capacity / 16);
  for (int c0 = 0; c0 < chunks; c0 += 4) {
    uint32_t mk[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) mk[e] = c0 + e < chunks ? table::match16(dg[c0 + e], h.d4) : 0u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      while (mk[e]) {
        const int j = __ffs(mk[e]) - 1;
        mk[e] &= mk[e] - 1;
        const int64_t s = h.base + 16 * (c0 + e) + j;
        if (keys[s] == key) return s;
      }
    }
  }
  return -1;
}

}  // namespace lookup
}  // namespace dynamicemb
