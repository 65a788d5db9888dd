// Scored hash table: CUDA kernels and launchers (instantiated per key x value x policy family by the
// generated units from table_instance.cu.tpl).
//
// One tile of kTile = 8 threads serves one key. A bucket's digests are read as 16-byte chunks (one chunk per
// lane for 128-slot buckets), compared with the key's digest, and only matching slots' keys are read.
//
// Concurrency inside one batch (insert kernels):
//   - a free slot is claimed with atomicCAS(EMPTY -> LOCKED) in the key's probe order (a rotation starting at
//     hash & (B - 1)); the claimer writes row, score and digest, fences, then publishes the key. Two inserters
//     of one key walk the same order, so the second meets the first's slot (LOCKED -> wait -> the key) and
//     turns into a hit: duplicates share one slot.
//   - a hit locks its slot (atomicCAS(key -> LOCKED)) while it reads/writes the row and score, then restores
//     the key, so rows are never torn and an eviction never overwrites a row someone is reading.
//   - eviction (bucket has no free slot) takes the bucket's lock, rescans the keys (waiting out LOCKED slots,
//     whose holders never wait), and replaces the minimum-score slot (ties: lowest slot) if the new score is
//     strictly higher; a full bucket never gains free slots inside an insert kernel, so the lock serializes all
//     remaining changes of that bucket.
//   Holders of a slot lock never wait on anything, so there are no wait cycles.
#pragma once

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {
namespace cg = cooperative_groups;

constexpr int kTile = 8;
constexpr int kBlock = 256;
constexpr int kMaxBucket = 256;  // bucket_capacity in [16, 256]
constexpr int kMaxRounds = kMaxBucket / (16 * kTile);  // digest chunk rounds per lane
using Tile = cg::thread_block_tile<kTile, cg::thread_block>;

template <int K> struct KeyT;
template <> struct KeyT<kKeyInt64> { using T = int64_t; };
template <> struct KeyT<kKeyUInt64> { using T = uint64_t; };

template <int V> struct ValT;
template <> struct ValT<kValueFp16> {
  using T = __half;
  static __device__ __forceinline__ float to_f(T v) { return __half2float(v); }
  static __device__ __forceinline__ T from_f(float v) { return __float2half_rn(v); }
};
template <> struct ValT<kValueBf16> {
  using T = __nv_bfloat16;
  static __device__ __forceinline__ float to_f(T v) { return __bfloat162float(v); }
  static __device__ __forceinline__ T from_f(float v) { return __float2bfloat16_rn(v); }
};
template <> struct ValT<kValueFp32> {
  using T = float;
  static __device__ __forceinline__ float to_f(T v) { return v; }
  static __device__ __forceinline__ T from_f(float v) { return v; }
};

inline void check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb table: ") + what + ": " + cudaGetErrorString(e));
}

// ---------------------------------------------------------------- small device helpers
// Key-word accesses. Publishing a key is a release store (row, score and digest written before it are visible
// to whoever acquires the key); reading a key to use the slot's row is an acquire load; claims and locks are
// acquire CASes. These are cheaper than full fences (fence.sc) around relaxed accesses.
__device__ __forceinline__ uint64_t ld_key(const void* keys, int64_t slot) {
  uint64_t v;
  const unsigned long long* p = reinterpret_cast<const unsigned long long*>(keys) + slot;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t cas_key(void* keys, int64_t slot, uint64_t cmp, uint64_t val) {
  uint64_t old;
  unsigned long long* p = reinterpret_cast<unsigned long long*>(keys) + slot;
  asm volatile("atom.acquire.gpu.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(cmp), "l"(val) : "memory");
  return old;
}
__device__ __forceinline__ void publish_key(void* keys, int64_t slot, uint64_t key) {
  unsigned long long* p = reinterpret_cast<unsigned long long*>(keys) + slot;
  asm volatile("st.release.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(key) : "memory");
}
// Wait until a slot is not LOCKED; returns the key seen (acquired).
__device__ __forceinline__ uint64_t wait_unlocked(const void* keys, int64_t slot) {
  uint64_t k = ld_key(keys, slot);
  while (k == kLockedKey) {
    __nanosleep(32);
    k = ld_key(keys, slot);
  }
  return k;
}

// 16-bit mask of bytes of `c` equal to `d`.
__device__ __forceinline__ uint32_t match16(uint4 c, uint32_t d4) {
  uint32_t w[4] = {c.x, c.y, c.z, c.w};
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t e = __vcmpeq4(w[j], d4);  // 0xff per equal byte
    m |= (((e >> 7) & 1u) | ((e >> 14) & 2u) | ((e >> 21) & 4u) | ((e >> 28) & 8u)) << (4 * j);
  }
  return m;
}

__device__ __forceinline__ uint4 load_digests(const uint8_t* digests, int64_t base, int chunk, bool coherent) {
  const uint4* p = reinterpret_cast<const uint4*>(digests + base) + chunk;
  return coherent ? __ldcg(p) : __ldg(p);
}

// Row helpers: the tile's lanes stride over the row; 16-byte accesses when the row allows.
template <typename T>
__device__ __forceinline__ bool row_vec16(const void* a, const void* b, int64_t dim) {
  return ((dim * sizeof(T)) % 16 == 0) && ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0);
}
template <typename T>
__device__ __forceinline__ void copy_row(const Tile& tile, T* dst, const T* src, int64_t dim, bool coherent) {
  if (row_vec16<T>(dst, src, dim)) {
    int64_t nv = dim * sizeof(T) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t j = tile.thread_rank(); j < nv; j += kTile) d[j] = coherent ? __ldcg(s + j) : s[j];
  } else {
    for (int64_t j = tile.thread_rank(); j < dim; j += kTile) dst[j] = src[j];
  }
}
template <int V>
__device__ __forceinline__ void fill_row(const Tile& tile, typename ValT<V>::T* dst, int64_t dim, float v) {
  for (int64_t j = tile.thread_rank(); j < dim; j += kTile) dst[j] = ValT<V>::from_f(v);
}
template <int V>
__device__ __forceinline__ void init_row(const Tile& tile, typename ValT<V>::T* dst, int64_t dim,
                                         const Initializer& in, uint64_t clock, uint64_t key) {
  for (int64_t j = tile.thread_rank(); j < dim; j += kTile) dst[j] = ValT<V>::from_f(init_value(in, clock, key, j));
}
template <int V>
__device__ __forceinline__ void accum_row(const Tile& tile, typename ValT<V>::T* dst,
                                          const typename ValT<V>::T* src, int64_t dim) {
  for (int64_t j = tile.thread_rank(); j < dim; j += kTile)
    dst[j] = ValT<V>::from_f(ValT<V>::to_f(__ldcg(dst + j)) + ValT<V>::to_f(src[j]));
}
template <typename T>
__device__ __forceinline__ T* row_ptr(void* values, int64_t slot, int64_t dim) {
  return reinterpret_cast<T*>(values) + slot * dim;
}

struct KeyHome {
  int64_t base;  // first slot of the bucket
  int start;     // probe start inside the bucket
  uint32_t d4;   // digest replicated into 4 bytes
};
__device__ __forceinline__ KeyHome home_of(const TableRef& t, uint64_t key) {
  uint64_t h = accel_hash_key(key);
  KeyHome r;
  r.base = static_cast<int64_t>(bucket_of_hash(h, static_cast<uint64_t>(t.num_buckets))) * t.bucket_capacity;
  r.start = start_of_hash(h, t.bucket_capacity);
  r.d4 = 0x01010101u * digest_of_hash(h);
  return r;
}

// Read-only probe (no concurrent writers): slot of `key` or -1.
__device__ __forceinline__ int64_t probe_readonly(const Tile& tile, const TableRef& t, uint64_t key,
                                                  const KeyHome& h) {
  const int chunks = t.bucket_capacity / 16;
  for (int c0 = 0; c0 < chunks; c0 += kTile) {
    int c = c0 + static_cast<int>(tile.thread_rank());
    int64_t found = -1;
    if (c < chunks) {
      uint32_t m = match16(load_digests(t.digests, h.base, c, false), h.d4);
      while (m) {
        int i = __ffs(m) - 1;
        m &= m - 1;
        int64_t slot = h.base + c * 16 + i;
        if (static_cast<uint64_t>(reinterpret_cast<const int64_t*>(t.keys)[slot]) == key) found = slot;
      }
    }
    uint32_t b = tile.ballot(found >= 0);
    if (b) return tile.shfl(found, __ffs(b) - 1);
  }
  return -1;
}

// Concurrent probe (insert kernels): slot holding `key` (seen after LOCKED cleared) or -1, and each lane's
// masks of candidate free slots (digest == empty digest), one 16-bit mask per round.
__device__ __forceinline__ int64_t probe_concurrent(const Tile& tile, const TableRef& t, uint64_t key,
                                                    const KeyHome& h, uint32_t (&free_mask)[kMaxRounds]) {
  const int chunks = t.bucket_capacity / 16;
  const uint32_t e4 = 0x01010101u * empty_digest();
  int64_t found = -1;
#pragma unroll
  for (int r = 0; r < kMaxRounds; ++r) {
    free_mask[r] = 0;
    int c = r * kTile + static_cast<int>(tile.thread_rank());
    if (r * kTile < chunks && c < chunks) {
      uint4 dg = load_digests(t.digests, h.base, c, true);
      free_mask[r] = match16(dg, e4);
      uint32_t m = match16(dg, h.d4);
      while (m) {
        int i = __ffs(m) - 1;
        m &= m - 1;
        int64_t slot = h.base + c * 16 + i;
        if (wait_unlocked(t.keys, slot) == key) found = slot;
      }
    }
  }
  uint32_t b = tile.ballot(found >= 0);
  return b ? tile.shfl(found, __ffs(b) - 1) : -1;
}

// Next free-slot candidate in probe order (rotated distance from start), removing it from the masks; -1 if none.
__device__ __forceinline__ int64_t next_free_candidate(const Tile& tile, const TableRef& t, const KeyHome& h,
                                                       uint32_t (&free_mask)[kMaxRounds]) {
  const int B = t.bucket_capacity;
  int best = B;  // rotated distance
  int best_r = 0, best_i = 0;
#pragma unroll
  for (int r = 0; r < kMaxRounds; ++r) {
    uint32_t m = free_mask[r];
    int c = r * kTile + static_cast<int>(tile.thread_rank());
    while (m) {
      int i = __ffs(m) - 1;
      m &= m - 1;
      int dist = (c * 16 + i - h.start) & (B - 1);
      if (dist < best) { best = dist; best_r = r; best_i = i; }
    }
  }
  int key = (best << 8) | static_cast<int>(tile.thread_rank());
  int win = cg::reduce(tile, key, cg::less<int>());
  if ((win >> 8) >= B) return -1;
  if ((win & 0xff) == static_cast<int>(tile.thread_rank())) {
#pragma unroll
    for (int r = 0; r < kMaxRounds; ++r)
      if (r == best_r) free_mask[r] &= ~(1u << best_i);
  }
  return h.base + (((win >> 8) + h.start) & (B - 1));
}

// Locks a slot seen holding `key` for a hit. Returns false if the key left the slot (evicted): re-probe.
__device__ __forceinline__ bool lock_hit(const Tile& tile, const TableRef& t, int64_t slot, uint64_t key) {
  bool ok = false;
  if (tile.thread_rank() == 0) {
    while (true) {
      uint64_t old = cas_key(t.keys, slot, key, kLockedKey);
      if (old == key) { ok = true; break; }
      if (old != kLockedKey) break;
      if (wait_unlocked(t.keys, slot) != key) break;
    }
  }
  return tile.shfl(ok, 0);
}

struct BlockStats {
  unsigned long long v[kNumStats];
};

// Result of one key's upsert.
struct Outcome {
  int64_t slot;  // slot now holding the key, -1 if refused / not inserted
  int stat;      // StatIndex, or -1 (a no-op: assign of a missing key etc.)
  bool hit;
};

// The upsert of one key by one tile. `row_in`: the caller's row (or null); `score_given`: use `score_in`
// (Customized policy, rehash). Tile-uniform control flow throughout.
template <int K, int V, int P>
__device__ Outcome upsert_one(const Tile& tile, const UpsertParams& p, int64_t i, uint64_t key,
                              const typename ValT<V>::T* row_in, bool score_given, uint64_t score_in,
                              uint64_t clock, bool accum_flag) {
  using T = typename ValT<V>::T;
  const TableRef& t = p.t;
  const int64_t dim = t.dim;
  const KeyHome h = home_of(t, key);
  const int mode = p.mode;
  const bool lead = tile.thread_rank() == 0;
  uint32_t free_mask[kMaxRounds];

  // The hit path, with the slot locked by this tile.
  auto on_hit = [&](int64_t slot) -> Outcome {
    T* row = row_ptr<T>(t.values, slot, dim);
    int stat = kStatAssigned;
    if (mode == kFindOrInsert) {
      if (p.values_out) copy_row(tile, row_ptr<T>(p.values_out, i, dim), row, dim, true);
    } else if (mode == kInsertOrAssign || mode == kInsertAndEvict || mode == kAssign) {
      copy_row(tile, row, row_in, dim, false);
    } else if (mode == kAccumOrAssign) {
      if (accum_flag) accum_row<V>(tile, row, row_in, dim);
      else stat = -1;
    }
    if (lead && stat >= 0) {
      uint64_t old = __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + slot);
      t.scores[slot] = (mode == kAssignScores && score_given)
                           ? score_in
                           : policy_score(P, p.use_epoch, p.epoch, clock, score_given, score_in, true, old);
    }
    tile.sync();
    if (lead) publish_key(t.keys, slot, key);
    return Outcome{slot, stat, true};
  };
  // Fill a freshly claimed (or evicted) slot and publish it.
  auto fill_new = [&](int64_t slot, uint64_t score) {
    T* row = row_ptr<T>(t.values, slot, dim);
    if (mode == kFindOrInsert) {
      init_row<V>(tile, row, dim, p.init, clock, key);
      tile.sync();
      if (p.values_out) copy_row(tile, row_ptr<T>(p.values_out, i, dim), row, dim, true);
    } else {
      copy_row(tile, row, row_in, dim, false);
    }
    if (lead) {
      t.scores[slot] = score;
      t.digests[slot] = static_cast<uint8_t>(h.d4);
    }
    tile.sync();
    if (lead) publish_key(t.keys, slot, key);
  };

  // LRU fast hit path (no slot lock): every score written by this op is the same value (the op's clock), so
  // score stores need no lock; a reader copies the row and re-checks the key (an evictor locks the key before
  // touching the row); a writer that finds the slot locked by a concurrent writer or evictor of the same key
  // yields (as if its write came first and was overwritten). Accumulation always takes the lock.
  const bool lru_fast = P == kPolicyLru && mode != kAccumOrAssign;
  auto hit_fast = [&](int64_t slot, Outcome& out) -> bool {
    T* row = row_ptr<T>(t.values, slot, dim);
    const uint64_t sc = (mode == kAssignScores && score_given)
                            ? score_in
                            : policy_score(P, p.use_epoch, p.epoch, clock, score_given, score_in, true, 0);
    if (mode == kFindOrInsert || mode == kAssignScores) {
      while (true) {
        if (mode == kFindOrInsert && p.values_out) copy_row(tile, row_ptr<T>(p.values_out, i, dim), row, dim, true);
        tile.sync();
        uint64_t k = 0;
        bool waited = false;
        if (lead) {
          k = ld_key(t.keys, slot);
          if (k == kLockedKey) { waited = true; k = wait_unlocked(t.keys, slot); }
        }
        k = tile.shfl(k, 0);
        waited = tile.shfl(waited, 0);
        if (k != key) return false;
        if (!waited) break;
      }
      if (lead) t.scores[slot] = sc;
      out = Outcome{slot, kStatAssigned, true};
      return true;
    }
    uint64_t old = 0;
    if (lead) old = cas_key(t.keys, slot, key, kLockedKey);
    old = tile.shfl(old, 0);
    if (old == key) {
      copy_row(tile, row, row_in, dim, false);
      if (lead) t.scores[slot] = sc;
      tile.sync();
      if (lead) publish_key(t.keys, slot, key);
    } else if (old != kLockedKey) {
      return false;
    }
    out = Outcome{slot, kStatAssigned, true};
    return true;
  };
  auto do_hit = [&](int64_t slot, Outcome& out) -> bool {
    if (lru_fast) return hit_fast(slot, out);
    if (!lock_hit(tile, t, slot, key)) return false;
    out = on_hit(slot);
    return true;
  };

  const bool may_insert = mode == kFindOrInsert || mode == kInsertOrAssign || mode == kInsertAndEvict ||
                          (mode == kAccumOrAssign && !accum_flag);
  const uint64_t new_score = policy_score(P, p.use_epoch, p.epoch, clock, score_given, score_in, false, 0);

  while (true) {  // restarts when a key we saw gets evicted under us
    int64_t slot = probe_concurrent(tile, t, key, h, free_mask);
    if (slot >= 0) {
      if (mode == kAccumOrAssign && !accum_flag) return Outcome{slot, -1, true};  // present: nothing to do
      Outcome o;
      if (do_hit(slot, o)) return o;
      continue;  // evicted under us: probe again
    }
    if (!may_insert) return Outcome{-1, -1, false};

    // Claim a free slot in probe order.
    bool restart = false;
    while (true) {
      int64_t cand = next_free_candidate(tile, t, h, free_mask);
      if (cand < 0) break;
      uint64_t seen = 0;
      if (lead) {
        seen = cas_key(t.keys, cand, kEmptyKey, kLockedKey);
        if (seen == kLockedKey) seen = wait_unlocked(t.keys, cand);
      }
      seen = tile.shfl(seen, 0);
      if (seen == kEmptyKey) {
        fill_new(cand, new_score);
        return Outcome{cand, kStatInserted, false};
      }
      if (seen == key) {  // a duplicate of this batch got here first
        Outcome o;
        if (do_hit(cand, o)) return o;
        restart = true;
        break;
      }
    }
    if (restart) continue;

    // Eviction path: the bucket is full for the rest of this kernel.
    if (lead) {
      while (atomicCAS(t.locks + h.base / t.bucket_capacity, 0, 1) != 0) __nanosleep(64);
      __threadfence();  // acquire the bucket
    }
    tile.sync();
    Outcome out{-1, kStatRefused, false};
    bool retry = true;
    while (retry) {
      retry = false;
      // Rescan every slot: the key, a free slot, and the minimum score (ties: lowest slot).
      int64_t found = -1, free_slot = -1, min_slot = -1;
      uint64_t min_score = ~0ull;
      for (int s = tile.thread_rank(); s < t.bucket_capacity; s += kTile) {
        int64_t slot = h.base + s;
        uint64_t k = wait_unlocked(t.keys, slot);
        if (k == key) found = slot;
        else if (k == kEmptyKey) { if (free_slot < 0) free_slot = slot; }
        else {
          uint64_t sc = __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + slot);
          if (sc < min_score || (sc == min_score && slot < min_slot)) { min_score = sc; min_slot = slot; }
        }
      }
      uint32_t b = tile.ballot(found >= 0);
      if (b) {
        found = tile.shfl(found, __ffs(b) - 1);
        if (do_hit(found, out)) break;
        retry = true;
        continue;
      }
      b = tile.ballot(free_slot >= 0);
      int64_t victim;
      uint64_t victim_score = 0;
      bool is_free = b != 0;
      if (is_free) {
        victim = tile.shfl(free_slot, __ffs(b) - 1);
      } else {
        // min-reduce (score, slot)
        for (int o = kTile / 2; o > 0; o >>= 1) {
          uint64_t os = tile.shfl_xor(min_score, o);
          int64_t ol = tile.shfl_xor(min_slot, o);
          if (os < min_score || (os == min_score && ol >= 0 && (min_slot < 0 || ol < min_slot))) {
            min_score = os; min_slot = ol;
          }
        }
        victim = min_slot;
        victim_score = min_score;
        if (victim < 0 || !(new_score > victim_score)) break;  // refused
      }
      // Claim the victim; if a hit changed its score since the scan, put it back and rescan.
      bool claimed = false;
      uint64_t victim_key = 0;
      if (lead) {
        if (is_free) {
          claimed = cas_key(t.keys, victim, kEmptyKey, kLockedKey) == kEmptyKey;
        } else {
          uint64_t expect = ld_key(t.keys, victim);
          if (!is_reserved_key(expect) && cas_key(t.keys, victim, expect, kLockedKey) == expect) {
            if (__ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + victim) == victim_score) {
              claimed = true;
              victim_key = expect;
            } else {
              publish_key(t.keys, victim, expect);
            }
          }
        }
      }
      claimed = tile.shfl(claimed, 0);
      if (!claimed) { retry = true; continue; }
      if (is_free) {
        fill_new(victim, new_score);
        out = Outcome{victim, kStatInserted, false};
        break;
      }
      victim_key = tile.shfl(victim_key, 0);
      if (mode == kInsertAndEvict) {
        unsigned long long pos = 0;
        if (lead) pos = atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + kStatEvicted, 1ull);
        pos = tile.shfl(pos, 0);
        using KT = typename KeyT<K>::T;
        if (lead) {
          if (p.evicted_keys) reinterpret_cast<KT*>(p.evicted_keys)[pos] = static_cast<KT>(victim_key);
          if (p.evicted_scores) p.evicted_scores[pos] = __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + victim);
        }
        if (p.evicted_values)
          copy_row(tile, row_ptr<T>(p.evicted_values, pos, dim), row_ptr<T>(t.values, victim, dim), dim, true);
        tile.sync();
      }
      fill_new(victim, new_score);
      out = Outcome{victim, kStatEvicted, false};
    }
    tile.sync();
    if (lead) {
      __threadfence();
      atomicExch(t.locks + h.base / t.bucket_capacity, 0);
    }
    return out;
  }
}

template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock, 4) upsert_kernel(UpsertParams p, uint64_t clock_unused) {
  using KT = typename KeyT<K>::T;
  using T = typename ValT<V>::T;
  __shared__ unsigned long long s_stats[kNumStats];
  if (threadIdx.x < kNumStats) s_stats[threadIdx.x] = 0;
  __syncthreads();
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
  if (i < p.n) {
    const uint64_t clock = static_cast<uint64_t>(__ldcg(p.t.counters + kCounterClock));
    const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
    Outcome o{-1, kStatIllegal, false};
    if (!is_reserved_key(key)) {
      const T* row_in = p.values_in ? reinterpret_cast<const T*>(p.values_in) + i * p.t.dim : nullptr;
      const bool given = p.scores_in != nullptr;
      const uint64_t sc = given ? p.scores_in[i] : 0;
      const bool flag = p.accum_flags ? p.accum_flags[i] : false;
      o = upsert_one<K, V, P>(tile, p, i, key, row_in, given, sc, clock, flag);
    }
    if (p.mode == kFindOrInsert && o.slot < 0 && p.values_out) {  // refused / illegal: the initial row
      init_row<V>(tile, row_ptr<T>(p.values_out, i, p.t.dim), p.t.dim, p.init, clock, key);
    }
    if (tile.thread_rank() == 0) {
      if (p.slots_out) p.slots_out[i] = o.slot;
      if (p.found_out) p.found_out[i] = o.hit;
      if (o.stat >= 0 && !(o.stat == kStatEvicted && p.mode == kInsertAndEvict))
        atomicAdd(&s_stats[o.stat], 1ull);
    }
  }
  __syncthreads();
  if (threadIdx.x < kNumStats && s_stats[threadIdx.x]) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + threadIdx.x, s_stats[threadIdx.x]);
    if (threadIdx.x == kStatInserted)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.t.counters) + kCounterSize, s_stats[threadIdx.x]);
  }
}

template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock) lookup_kernel(LookupParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename ValT<V>::T;
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
  if (i >= p.n) return;
  const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
  int64_t slot = -1;
  if (!is_reserved_key(key)) slot = probe_readonly(tile, p.t, key, home_of(p.t, key));
  if (p.values_out && slot < 0 && p.fill_missing)
    fill_row<V>(tile, row_ptr<T>(p.values_out, i, p.t.dim), p.t.dim, p.missing_value);
  if (p.values_out && slot >= 0)
    copy_row(tile, row_ptr<T>(p.values_out, i, p.t.dim), row_ptr<T>(p.t.values, slot, p.t.dim), p.t.dim, false);
  if (tile.thread_rank() == 0) {
    if (p.found_out) p.found_out[i] = slot >= 0;
    if (p.slots_out) p.slots_out[i] = slot;
    if (p.scores_out && slot >= 0) p.scores_out[i] = p.t.scores[slot];
  }
}

template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock) erase_kernel(EraseParams p) {
  using KT = typename KeyT<K>::T;
  __shared__ unsigned long long s_erased;
  if (threadIdx.x == 0) s_erased = 0;
  __syncthreads();
  if (p.keys) {  // erase by key
    Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
    const int64_t i = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
    if (i < p.n) {
      const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
      int64_t slot = -1;
      if (!is_reserved_key(key)) slot = probe_readonly(tile, p.t, key, home_of(p.t, key));
      if (slot >= 0 && tile.thread_rank() == 0) {
        p.t.digests[slot] = empty_digest();
        if (cas_key(p.t.keys, slot, key, kEmptyKey) == key) atomicAdd(&s_erased, 1ull);
      }
    }
  } else {  // erase_if: one thread per slot
    for (int64_t slot = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x; slot < p.t.capacity;
         slot += static_cast<int64_t>(gridDim.x) * kBlock) {
      uint64_t k = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.t.keys)[slot]);
      if (!is_reserved_key(k) && p.t.scores[slot] < p.threshold) {
        p.t.digests[slot] = empty_digest();
        reinterpret_cast<KT*>(p.t.keys)[slot] = static_cast<KT>(kEmptyKey);
        atomicAdd(&s_erased, 1ull);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && s_erased) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p.stats), s_erased);
    atomicAdd(reinterpret_cast<unsigned long long*>(p.t.counters) + kCounterSize, 0ull - s_erased);
  }
}

// Export: one tile per slot of [offset, offset + n); occupied (and score >= threshold) slots are compacted.
template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock) export_kernel(ExportParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename ValT<V>::T;
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
  if (j >= p.n) return;
  const int64_t slot = p.offset + j;
  const uint64_t k = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.t.keys)[slot]);
  const uint64_t sc = p.t.scores[slot];
  if (is_reserved_key(k) || (p.use_threshold && sc < p.threshold)) return;
  unsigned long long pos = 0;
  if (tile.thread_rank() == 0) pos = atomicAdd(reinterpret_cast<unsigned long long*>(p.count), 1ull);
  pos = tile.shfl(pos, 0);
  if (tile.thread_rank() == 0) {
    reinterpret_cast<KT*>(p.keys_out)[pos] = static_cast<KT>(k);
    if (p.scores_out) p.scores_out[pos] = sc;
    if (p.slots_out) p.slots_out[pos] = slot;
  }
  if (p.values_out)
    copy_row(tile, row_ptr<T>(p.values_out, pos, p.t.dim), row_ptr<T>(p.t.values, slot, p.t.dim), p.t.dim, false);
}

// Rehash: one tile per source bucket re-inserts its occupied slots in slot order with their scores and rows.
// When the bucket count is multiplied by an integer, each destination bucket is fed by exactly one source
// bucket, so the result is deterministic (and equal to the CPU twin's).
template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock) rehash_kernel(RehashParams rp) {
  using KT = typename KeyT<K>::T;
  using T = typename ValT<V>::T;
  __shared__ unsigned long long s_stats[kNumStats];
  if (threadIdx.x < kNumStats) s_stats[threadIdx.x] = 0;
  __syncthreads();
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const int64_t bucket = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
  if (bucket < rp.src.num_buckets) {
    UpsertParams p{};
    p.t = rp.dst;
    p.mode = kInsertOrAssign;
    p.stats = rp.stats;
    for (int64_t slot = bucket * rp.src.bucket_capacity; slot < (bucket + 1) * rp.src.bucket_capacity; ++slot) {
      const uint64_t k = static_cast<uint64_t>(reinterpret_cast<const KT*>(rp.src.keys)[slot]);
      if (is_reserved_key(k)) continue;
      Outcome o = upsert_one<K, V, kPolicyCustomized>(tile, p, 0, k, row_ptr<T>(rp.src.values, slot, rp.src.dim),
                                                       true, rp.src.scores[slot], 0, false);
      if (tile.thread_rank() == 0 && o.stat >= 0) atomicAdd(&s_stats[o.stat], 1ull);
    }
  }
  __syncthreads();
  if (threadIdx.x < kNumStats && s_stats[threadIdx.x]) {
    atomicAdd(reinterpret_cast<unsigned long long*>(rp.stats) + threadIdx.x, s_stats[threadIdx.x]);
    if (threadIdx.x == kStatInserted)
      atomicAdd(reinterpret_cast<unsigned long long*>(rp.dst.counters) + kCounterSize, s_stats[threadIdx.x]);
  }
}

namespace {
// Advances the op clock and zeroes the op's stats; runs before every upsert kernel (stream-ordered).
__global__ void begin_op_kernel(int64_t* counters, int64_t* stats) {
  if (threadIdx.x == 0) counters[kCounterClock] += 1;
  if (threadIdx.x < kNumStats) stats[threadIdx.x] = 0;
}
}  // namespace

inline unsigned grid_for_tiles(int64_t n) {
  return static_cast<unsigned>((n * kTile + kBlock - 1) / kBlock);
}

template <int K, int V, int P>
void launch_lookup(const LookupParams& p, void* stream) {
  if (p.n == 0) return;
  lookup_kernel<K, V, P><<<grid_for_tiles(p.n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("lookup");
}
template <int K, int V, int P>
void launch_upsert(const UpsertParams& p, void* stream) {
  begin_op_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(p.t.counters, p.stats);
  check_launch("begin_op");
  if (p.n == 0) return;
  upsert_kernel<K, V, P><<<grid_for_tiles(p.n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p, 0);
  check_launch("upsert");
}
template <int K, int V, int P>
void launch_erase(const EraseParams& p, void* stream) {
  unsigned grid = p.keys ? (p.n ? grid_for_tiles(p.n) : 0)
                         : static_cast<unsigned>(std::min<int64_t>((p.t.capacity + kBlock - 1) / kBlock, 65536));
  if (grid == 0) return;
  erase_kernel<K, V, P><<<grid, kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("erase");
}
template <int K, int V, int P>
void launch_export(const ExportParams& p, void* stream) {
  if (p.n == 0) return;
  export_kernel<K, V, P><<<grid_for_tiles(p.n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("export");
}
template <int K, int V, int P>
void launch_rehash(const RehashParams& p, void* stream) {
  if (p.src.capacity == 0) return;
  rehash_kernel<K, V, P><<<grid_for_tiles(p.src.num_buckets), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("rehash");
}

}  // namespace table
}  // namespace dynamicemb

#define DYNAMICEMB_TABLE_INSTANTIATE(K, V, P)                                                            \
  template void dynamicemb::table::launch_lookup<K, V, P>(const dynamicemb::table::LookupParams&, void*); \
  template void dynamicemb::table::launch_upsert<K, V, P>(const dynamicemb::table::UpsertParams&, void*); \
  template void dynamicemb::table::launch_erase<K, V, P>(const dynamicemb::table::EraseParams&, void*);   \
  template void dynamicemb::table::launch_export<K, V, P>(const dynamicemb::table::ExportParams&, void*); \
  template void dynamicemb::table::launch_rehash<K, V, P>(const dynamicemb::table::RehashParams&, void*);
