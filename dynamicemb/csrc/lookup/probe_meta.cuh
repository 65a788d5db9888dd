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

// Slot of `key` in table m by its digests, or -1 (no concurrent writer: a read-only probe by one thread, 4 digest
// chunks in flight, then their key compares). Reserved keys are never stored: the caller skips them.
__device__ __forceinline__ int64_t probe_digests(const TableMeta& m, uint64_t key, const table::KeyHome& h) {
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

// The slot group of a key's probe start: the 4 slots (32 bytes of keys, one sector) around it, 4-aligned in the
// bucket. A key is placed at the first free slot from its probe start, so at the loads of a dynamic table (the
// NVIDIA preset: ~13 keys per 128-slot bucket) it is almost always in this group: one key read finds it, without
// the digests. A key sits in one slot of its table, so a key match anywhere is its slot (no digest needed).
constexpr int kGroup = 4;
__device__ __forceinline__ int64_t group_of(const table::KeyHome& h) { return h.base + (h.start & ~(kGroup - 1)); }

// Slot of `key` in table m, or -1 (no concurrent writer): its start group's keys first, then the digest scan.
__device__ __forceinline__ int64_t probe_meta_slot(const TableMeta& m, uint64_t key) {
  const table::KeyHome h = table::home_of(m, key);
  const uint64_t* keys = reinterpret_cast<const uint64_t*>(m.keys) + group_of(h);
  uint64_t k[kGroup];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) k[j] = keys[j];
#pragma unroll
  for (int j = 0; j < kGroup; ++j)
    if (k[j] == key) return group_of(h) + j;
  return probe_digests(m, key, h);
}

// The score a slot takes in this step (the table's policy; `hit`: the key was there with score `old`).
__device__ __forceinline__ uint64_t step_score(const TableMeta& m, uint64_t clock, bool hit, uint64_t old) {
  return table::policy_score(static_cast<int>(m.policy), m.use_epoch != 0, static_cast<uint64_t>(m.epoch), clock,
                             false, 0, hit, old);
}

// The find of K uniques of a step (keys key[r] of tables t[r] where act[r]; no concurrent writer of keys): their
// start groups' keys all loaded before any is compared, the digest scan for a key outside its group. `train`:
// a hit takes its new score (LRU needs no old score: no load). Returns the slots (-1: not stored).
template <int K>
__device__ __forceinline__ void find_slots(const TableMeta* meta, bool train, const bool (&act)[K],
                                           const uint64_t (&key)[K], const int32_t (&t)[K], int64_t (&slot)[K]) {
  uint64_t k[K][kGroup];
  int64_t g[K];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    g[r] = 0;
    if (act[r]) {
      const TableMeta& m = meta[t[r]];
      g[r] = group_of(table::home_of(m, key[r]));
      const uint64_t* keys = reinterpret_cast<const uint64_t*>(m.keys) + g[r];
#pragma unroll
      for (int j = 0; j < kGroup; ++j) k[r][j] = keys[j];
    }
  }
#pragma unroll
  for (int r = 0; r < K; ++r) {
    slot[r] = -1;
    if (!act[r]) continue;
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
      if (k[r][j] == key[r]) slot[r] = g[r] + j;
  }
#pragma unroll
  for (int r = 0; r < K; ++r)
    if (act[r] && slot[r] < 0) {
      const TableMeta& m = meta[t[r]];
      slot[r] = probe_digests(m, key[r], table::home_of(m, key[r]));
    }
  if (!train) return;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    if (slot[r] < 0) continue;
    const TableMeta& m = meta[t[r]];
    uint64_t* scores = reinterpret_cast<uint64_t*>(m.scores);
    const uint64_t clock = static_cast<uint64_t>(*reinterpret_cast<const int64_t*>(m.counters));
    const uint64_t old = m.policy == table::kPolicyLru ? 0 : scores[slot[r]];
    scores[slot[r]] = step_score(m, clock, true, old);
  }
}

}  // namespace lookup
}  // namespace dynamicemb
