// Scored hash table: CUDA kernels and launchers (instantiated per key x value x policy family by the
// generated units from table_instance.cu.tpl).
//
// One tile of kTile = 4 threads serves one key. A bucket's digests are read as 16-byte chunks (two chunks per
// lane for 128-slot buckets), compared with the key's digest, and only matching slots' keys are read.
//
// An upsert is two kernels (after begin_op_kernel):
//   1. the first pass (upsert_main_kernel): every key is probed. Hits are served there (find_or_insert /
//      assign_scores touch the score lock-free; row writers lock the slot, see below). A missing key that may be
//      inserted claims a free slot of its bucket in probe order and is inserted right there (no bucket lock: a
//      single CAS on the key word). Left to the second pass, through a pending list of (key, index) pairs (one
//      global atomic per block; the count lives in the pending scratch, pending_count(p)): keys whose bucket has
//      no free slot (eviction), keys a duplicate of this batch inserted first, and row writers whose slot a
//      duplicate holds locked (LRU row writers yield instead, see below). Nothing is evicted in this pass.
//   2. the insert pass (upsert_insert_kernel): one tile per pending key runs the general concurrent algorithm
//      (upsert_one), eviction under the bucket lock included. Below full load almost no key gets here.
//   Every hit of a batch is thus served before any insert of the same batch evicts: a key touched by the batch
//   (LRU: score = this op's clock) is never evicted by the batch's own inserts under LRU.
//
// Concurrency inside one kernel:
//   - a free slot is claimed with atomicCAS(EMPTY -> LOCKED) in the key's probe order (a rotation starting at
//     hash & (B - 1)); the claimer writes row, score and digest, then publishes the key with a release store.
//     Two inserters of one key walk the same order, so the second meets the first's slot (LOCKED -> wait -> the
//     key) and turns into a hit: duplicates share one slot.
//   - a hit that writes the row locks its slot (atomicCAS(key -> LOCKED), acquire) while it writes the row and
//     score, then restores the key (release), so rows are never torn and an eviction never overwrites a row
//     someone is reading. The row copiers' first pass (assign, insert_or_assign) takes that lock inside the probe
//     (the CAS right after the relaxed load that read the key; never on a slot read LOCKED; probe_concurrent<true>),
//     and a tile that took it, or met it held by a duplicate, never waits on another slot. Under LRU a tile that
//     read its key's slot LOCKED and waited until it saw the key yields too (a duplicate held it meanwhile): only
//     tiles whose first read saw the key take the lock, so a hot key's waiters add no holds to its slot.
//   - eviction (bucket has no free slot) takes the bucket's lock (acquire CAS; released by a release store),
//     rescans the bucket's digests and scores (scan_bucket), and replaces the slot of least (score, digest, key)
//     (evicts_before; no slot position, so every layout evicts the same key) if the new score is strictly
//     higher. The victim is locked by one exchange (key -> LOCKED) in the same round trip as the reads of the
//     key words whose digest is the key's (a duplicate may have inserted the key: then the victim is put back);
//     LOCKED slots (hits, whose holders never wait) are waited out and the bucket rescanned. A full bucket never
//     gains free slots inside an insert kernel, so the lock serializes all remaining changes of that bucket. A
//     key the first pass found missing from a full bucket comes to the insert pass flagged (kPendingFullBucket)
//     and goes straight to this path.
//   Holders of a slot lock never wait on anything, so there are no wait cycles.
//
// Why this shape (first-pass claims, digest chunks loaded together, rows unrolled twice, per-family occupancy, a
// capped insert-pass grid, a constant-initializer instance at 6 blocks/SM): each was measured against the one before
// it, with the variants that lost; see docs/archive/dynamicemb_lookup_log.md ("Table kernels"); the insert pass's
// warp groups and eviction round trips: docs/dynamicemb_storage_notes.md ("The insert pass at load 1.0").
#pragma once

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "common/device_info.h"
#include "common/pdl.cuh"
#include "dynamicemb/csrc/table/probe.cuh"
#include "dynamicemb/csrc/table/table_types.h"
#include "dynamicemb/csrc/table/value_types.cuh"

namespace dynamicemb {
namespace table {

constexpr int kBlock = 256;

template <int K> struct KeyT;
template <> struct KeyT<kKeyInt64> { using T = int64_t; };
template <> struct KeyT<kKeyUInt64> { using T = uint64_t; };

inline void check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb table: ") + what + ": " + cudaGetErrorString(e));
}

// Unrolling of the row copies (16-byte accesses; loads of one iteration are in flight together): 2 keeps lookup
// at 32 registers (8 blocks/SM; measured on H200, dim 32: find 151 -> 131 us per 1M keys against the compiler's
// default unrolling at 40 registers).
constexpr int kCopyUnroll = 2;
// Row helpers: the tile's lanes stride over the row; 16-byte accesses when the row allows.
template <typename T>
__device__ __forceinline__ bool row_vec16(const void* a, const void* b, int64_t dim) {
  return ((dim * sizeof(T)) % 16 == 0) && ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0);
}
// kCompact: no unrolling (the insert pass: unrolled copies cost it ~40 registers, i.e. occupancy; its rows are
// written once per insert). Otherwise the compiler's unrolling keeps several 16-byte loads in flight.
template <typename T, bool kCompact = false>
__device__ __forceinline__ void copy_row(const Tile& tile, T* dst, const T* src, int64_t dim, bool coherent) {
  if (row_vec16<T>(dst, src, dim)) {
    int64_t nv = dim * sizeof(T) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    if (kCompact) {
#pragma unroll 1
      for (int64_t j = tile.thread_rank(); j < nv; j += kTile) d[j] = coherent ? __ldcg(s + j) : s[j];
    } else {
#pragma unroll(kCopyUnroll)
      for (int64_t j = tile.thread_rank(); j < nv; j += kTile) d[j] = coherent ? __ldcg(s + j) : s[j];
    }
  } else {
#pragma unroll 1
    for (int64_t j = tile.thread_rank(); j < dim; j += kTile) dst[j] = src[j];
  }
}
// Starts moving a row into L2 without waiting for it (no registers held): the tile's lanes touch every 32-byte
// sector once.
template <typename T>
__device__ __forceinline__ void prefetch_row_l2(const Tile& tile, const T* row, int64_t dim) {
  const char* b = reinterpret_cast<const char*>(row);
  const int64_t bytes = dim * static_cast<int64_t>(sizeof(T));
  for (int64_t off = static_cast<int64_t>(tile.thread_rank()) * 32; off < bytes; off += kTile * 32)
    asm volatile("prefetch.global.L2 [%0];" : : "l"(b + off));
}
template <int V>
__device__ __forceinline__ void fill_row(const Tile& tile, typename Val<V>::T* dst, int64_t dim, float v) {
  for (int64_t j = tile.thread_rank(); j < dim; j += kTile) dst[j] = Val<V>::from_f(v);
}
// The initial row of `key` into `dst` and `dst2` (either may be null). Constant rows are written inline; the
// random kinds go through an out-of-line helper, so that their math does not hold registers across the insert
// path (Initializer by value: no address of a kernel parameter is taken).
template <int V>
__device__ __noinline__ void init_row_drawn(int lane, typename Val<V>::T* dst, typename Val<V>::T* dst2,
                                            int64_t dim, Initializer in, uint64_t clock, uint64_t key) {
  for (int64_t j = lane; j < dim; j += kTile) {
    const typename Val<V>::T v = Val<V>::from_f(init_value(in, clock, key, j));
    if (dst) dst[j] = v;
    if (dst2) dst2[j] = v;
  }
}
template <int V>
__device__ __forceinline__ void init_row(const Tile& tile, typename Val<V>::T* dst, typename Val<V>::T* dst2,
                                         int64_t dim, const Initializer& in, uint64_t clock, uint64_t key) {
  if (in.kind == kInitConstant && in.init_cols < 0) {
    using T = typename Val<V>::T;
    const T v = Val<V>::from_f(in.value);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(dst2);
    if ((dim * sizeof(T)) % 16 == 0 && addr % 16 == 0) {
      // 16-byte stores of the constant (for fp32 a quarter of the element loop's stores)
      uint4 w;
      T* wp = reinterpret_cast<T*>(&w);
#pragma unroll
      for (int e = 0; e < static_cast<int>(16 / sizeof(T)); ++e) wp[e] = v;
      const int64_t nv = dim * static_cast<int64_t>(sizeof(T)) / 16;
#pragma unroll 1
      for (int64_t j = tile.thread_rank(); j < nv; j += kTile) {
        if (dst) reinterpret_cast<uint4*>(dst)[j] = w;
        if (dst2) reinterpret_cast<uint4*>(dst2)[j] = w;
      }
      return;
    }
#pragma unroll 1
    for (int64_t j = tile.thread_rank(); j < dim; j += kTile) {
      if (dst) dst[j] = v;
      if (dst2) dst2[j] = v;
    }
  } else {
    init_row_drawn<V>(static_cast<int>(tile.thread_rank()), dst, dst2, dim, in, clock, key);
  }
}
template <int V>
__device__ __forceinline__ void accum_row(const Tile& tile, typename Val<V>::T* dst,
                                          const typename Val<V>::T* src, int64_t dim) {
  for (int64_t j = tile.thread_rank(); j < dim; j += kTile)
    dst[j] = Val<V>::from_f(Val<V>::to_f(__ldcg(dst + j)) + Val<V>::to_f(src[j]));
}
template <typename T>
__device__ __forceinline__ T* row_ptr(void* values, int64_t slot, int64_t dim) {
  return reinterpret_cast<T*>(values) + slot * dim;
}
// Row `slot` of the table itself (hybrid tables: HBM or host rows, see table_row). kAllHbm: the caller knows the
// table has no host rows.
template <typename T, bool kAllHbm = false>
__device__ __forceinline__ T* row_ptr(const TableRef& t, int64_t slot) {
  return kAllHbm ? reinterpret_cast<T*>(t.values) + slot * t.dim : ref_row<T>(t, slot);
}

// The initial row of a key claimed by the first pass of find_or_insert, written to its slot and to the caller's
// output row (`pp`: the parameters in shared memory). Inline: an out-of-line call's ABI spills registers at the
// first pass's occupancy, and the normal draw uses cospif, whose range reduction needs no local memory.
// kConstOnly: the caller knows the initializer is a constant for every column (no drawing code compiled in).
// to_slot false (a hybrid table's host row): only the output row; launch_host_rows copies it to the slot.
template <int V, bool kConstOnly, bool kAllHbm = false>
__device__ __forceinline__ void init_new_row(const UpsertParams* pp, int64_t slot, int64_t i, uint64_t key,
                                          uint64_t clock, bool to_slot) {
  using T = typename Val<V>::T;
  const UpsertParams& p = *pp;
  const int64_t dim = p.t.dim;
  T* dst = to_slot ? row_ptr<T, kAllHbm>(p.t, slot) : nullptr;
  T* dst2 = p.values_out ? row_ptr<T>(p.values_out, i, dim) : nullptr;
  const int lane = static_cast<int>(threadIdx.x) & (kTile - 1);
  const Initializer& in = p.init;
  if (kConstOnly || (in.kind == kInitConstant && in.init_cols < 0)) {
    const T v = Val<V>::from_f(in.value);
    // Element stores (16-byte stores of the constant measured 5-11 % slower on find_or_insert's first pass: session
    // 38, docs/dynamicemb_storage_notes.md).
    for (int64_t j = lane; j < dim; j += kTile) {
      if (dst) dst[j] = v;
      if (dst2) dst2[j] = v;
    }
    return;
  }
  if constexpr (!kConstOnly) {
    for (int64_t j = lane; j < dim; j += kTile) {
      const T v = Val<V>::from_f(init_value(in, clock, key, j));
      if (dst) dst[j] = v;
      if (dst2) dst2[j] = v;
    }
  }
}

// The pending count of an upsert: a word of the pending scratch past its 2n entries, in its own 64-byte span
// (see kPendingExtra), so its atomics do not contend with the reads of the op clock in the counters line.
__host__ __device__ __forceinline__ unsigned long long* pending_count(const UpsertParams& p) {
  return reinterpret_cast<unsigned long long*>(p.pending + 2 * p.n + kPendingExtra / 2);
}


// The insert pass's group counter (upsert_insert_kernel): the word kInsertGroupWord past the pending count, in the
// same reserved span of the pending scratch (kPendingExtra).
constexpr int kInsertGroupWord = 4;
__device__ __forceinline__ unsigned long long* insert_group_counter(const UpsertParams& p) {
  return pending_count(p) + kInsertGroupWord;
}

// The first-writer set (the pending scratch's tail, dedup_set_words(n) words): word j holds key ^ kEmptyKey of a
// key registered by this batch, 0 when free (kEmptyKey is reserved, so no key maps to 0). Linear probing from a
// multiplicative hash of the key; an occurrence writes at most kTile words (its decisive round's), so a set of
// >= 4n words always has a free word left (dedup_settle ends). The set is used (and zeroed first) only when the
// batch repeats keys: begin_op_kernel samples the batch and leaves its choice in dedup_choice (uniform batches keep
// the lock path and pay no zeroing).
__host__ __device__ __forceinline__ unsigned long long* dedup_set(const UpsertParams& p) {
  return reinterpret_cast<unsigned long long*>(p.pending + 2 * p.n + kPendingExtra);
}
__host__ __device__ __forceinline__ uint64_t dedup_mask(const UpsertParams& p) {
  return static_cast<uint64_t>(p.pending_words - 2 * p.n - kPendingExtra - kDedupTail - 1);
}
__host__ __device__ __forceinline__ unsigned long long* dedup_choice(const UpsertParams& p) {
  return dedup_set(p) + dedup_mask(p) + 1 + kDedupTail / 2;
}
__device__ __forceinline__ uint64_t dedup_home(uint64_t key, uint64_t mask) {
  const uint64_t x = key * 0x9e3779b97f4a7c15ull;
  return (x ^ (x >> 29)) & mask;
}
// The registration's first CAS (issued early; its result is consumed by dedup_settle after the probe).
__device__ __forceinline__ unsigned long long dedup_start(const UpsertParams& p, uint64_t key) {
  return atomicCAS(dedup_set(p) + dedup_home(key, dedup_mask(p)), 0ull,
                   static_cast<unsigned long long>(key ^ kEmptyKey));
}
// True when another occurrence of `key` registered first; `seen` is the lead's dedup_start result. After a
// collision at the home word the tile's lanes CAS the next kTile words together (one round trip instead of a chain
// of dependent CASes; a block waits for its slowest key): the first word in order that held 0 (now x) or x decides.
// Several words may end up holding x; every occurrence decides at the first of them in probe order, which exactly
// one occurrence wrote (words holding another key never change), so there is one writer per key.
__device__ __forceinline__ bool dedup_settle(const Tile& tile, const UpsertParams& p, uint64_t key,
                                             unsigned long long seen) {
  const unsigned long long x = key ^ kEmptyKey;
  seen = tile.shfl(seen, 0);
  if (seen == 0 || seen == x) return seen == x;
  const uint64_t mask = dedup_mask(p);
  uint64_t j = dedup_home(key, mask);
  while (true) {
    const uint64_t w = (j + 1 + tile.thread_rank()) & mask;
    const unsigned long long v = atomicCAS(dedup_set(p) + w, 0ull, x);
    const unsigned decided = tile.ballot(v == 0 || v == x);
    if (decided) return tile.shfl(v, __ffs(decided) - 1) == x;
    j += kTile;
  }
}

// Programmatic dependent launch (UpsertParams::pdl, on by default; sm_90+; common/pdl.cuh): the op's kernels after
// begin_op start their blocks while the kernel before them drains, and wait (griddep_wait) before they read what an
// earlier kernel of the op wrote; without the launch attribute the wait returns at once. The batch's inputs (keys,
// rows) are the caller's, complete before begin_op started, so a first pass may load its key before its wait.
// k<<<grid, block, 0, s>>>(args...), as a programmatic dependent of the stream's previous kernel when pdl on sm_90+.
template <typename... Q, typename... A>
void launch_upsert_kernel(bool pdl, void (*k)(Q...), unsigned grid, unsigned block, cudaStream_t s, A&&... args) {
  if (!pdl || accel::current_device_cc_major(/*fallback=*/0) < 9) {
    k<<<grid, block, 0, s>>>(static_cast<A&&>(args)...);
    return;
  }
  (void)accel::launch_pdl(k, dim3(grid), dim3(block), 0, s, true, static_cast<A&&>(args)...);  // check_launch after
}

// Flag in a pending entry's index word: the first pass found the key missing and its bucket full.
constexpr long long kPendingFullBucket = 1ll << 62;

// Result of one key's upsert.
struct Outcome {
  int64_t slot;  // slot now holding the key, -1 if refused / not inserted
  int stat;      // StatIndex, or -1 (a no-op: assign of a missing key etc.)
  bool hit;
};

// One key of the insert pass (or of a rehash).
struct KeyArgs {
  int64_t i;          // batch index (row of values_in / values_out)
  uint64_t key;
  uint64_t score_in;  // the caller's score, when score_given (Customized policy, LFU increments, rehash)
  uint64_t clock;     // the op clock
  bool score_given;
  bool accum_flag;
};

// Fills a freshly claimed (or evicted) slot and publishes it. find_or_insert computes the initial row once and
// writes it to the slot and to the caller's output.
// kPublish false: the caller publishes the key itself after the tile's sync (the eviction path: after releasing
// the bucket lock, whose release store orders the slot's writes before the key's).
template <int V, bool kPublish = true>
__device__ __forceinline__ void fill_new(const Tile& tile, const UpsertParams& p, const KeyArgs& a,
                                         const typename Val<V>::T* row_in, uint8_t digest, int64_t slot,
                                         uint64_t score) {
  using T = typename Val<V>::T;
  const TableRef& t = p.t;
  T* row = row_ptr<T>(t, slot);
  if (p.mode == kFindOrInsert)
    init_row<V>(tile, row, p.values_out ? row_ptr<T>(p.values_out, a.i, t.dim) : nullptr, t.dim, p.init, a.clock,
                a.key);
  else
    copy_row<T, true>(tile, row, row_in, t.dim, false);
  if (tile.thread_rank() == 0) {
    t.scores[slot] = score;
    t.digests[slot] = digest;
  }
  if (kPublish) {
    tile.sync();
    if (tile.thread_rank() == 0) publish_key(t.keys, slot, a.key);
  }
}

// A hit inside the insert pass: a key a duplicate of this batch inserted (or held locked in the hit pass).
// Returns false if the key left the slot (evicted under us): the caller probes again.
//   LRU (except accumulation) takes no lock for reads: every score this op writes is the same value (the op's
//   clock), so score stores need no lock; a reader copies the row and re-checks the key (an evictor locks the key
//   before touching the row); a writer that finds the slot locked by a concurrent writer or evictor of the same
//   key yields (as if its write came first and was overwritten). Other policies lock the slot.
template <int V, int P>
__device__ __forceinline__ bool serve_hit(const Tile& tile, const UpsertParams& p, const KeyArgs& a,
                                          const typename Val<V>::T* row_in, int64_t slot, Outcome& out) {
  using T = typename Val<V>::T;
  const TableRef& t = p.t;
  const int64_t dim = t.dim;
  const int mode = p.mode;
  const bool lead = tile.thread_rank() == 0;
  T* row = row_ptr<T>(t, slot);
  if (P == kPolicyLru && mode != kAccumOrAssign) {
    const uint64_t sc = (mode == kAssignScores && a.score_given)
                            ? a.score_in
                            : policy_score(P, p.use_epoch, p.epoch, a.clock, a.score_given, a.score_in, true, 0);
    if (mode == kFindOrInsert || mode == kAssignScores) {
      while (true) {
        if (mode == kFindOrInsert && p.values_out)
          copy_row<T, true>(tile, row_ptr<T>(p.values_out, a.i, dim), row, dim, true);
        tile.sync();
        uint64_t k = 0;
        bool waited = false;
        if (lead) {
          k = ld_key(t.keys, slot);
          if (k == kLockedKey) { waited = true; k = wait_unlocked(t.keys, slot); }
        }
        k = tile.shfl(k, 0);
        waited = tile.shfl(waited, 0);
        if (k != a.key) return false;
        if (!waited) break;
      }
      if (lead) t.scores[slot] = sc;
      out = Outcome{slot, kStatAssigned, true};
      return true;
    }
    uint64_t old = 0;
    if (lead) old = cas_key(t.keys, slot, a.key, kLockedKey);
    old = tile.shfl(old, 0);
    if (old == a.key) {
      copy_row<T, true>(tile, row, row_in, dim, false);
      if (lead) t.scores[slot] = sc;
      tile.sync();
      if (lead) publish_key(t.keys, slot, a.key);
    } else if (old != kLockedKey) {
      return false;
    }
    out = Outcome{slot, kStatAssigned, true};
    return true;
  }
  if (!lock_hit(tile, t, slot, a.key)) return false;
  int stat = kStatAssigned;
  if (mode == kFindOrInsert) {
    if (p.values_out) copy_row<T, true>(tile, row_ptr<T>(p.values_out, a.i, dim), row, dim, true);
  } else if (mode == kInsertOrAssign || mode == kInsertAndEvict || mode == kAssign) {
    copy_row<T, true>(tile, row, row_in, dim, false);
  } else if (mode == kAccumOrAssign) {
    if (a.accum_flag) accum_row<V>(tile, row, row_in, dim);
    else stat = -1;
  }
  if (lead && stat >= 0) {
    const uint64_t old = __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + slot);
    t.scores[slot] = (mode == kAssignScores && a.score_given)
                         ? a.score_in
                         : policy_score(P, p.use_epoch, p.epoch, a.clock, a.score_given, a.score_in, true, old);
  }
  tile.sync();
  if (lead) publish_key(t.keys, slot, a.key);
  out = Outcome{slot, stat, true};
  return true;
}

// Probe of a bucket that other tiles may be changing: slot holding `key` (acquired) or -1.
__device__ __forceinline__ int64_t probe_bucket(const Tile& tile, const TableRef& t, uint64_t key, int64_t base,
                                                uint32_t d4) {
  const int chunks = t.bucket_capacity / 16;
  int64_t found = -1;
  for (int c = static_cast<int>(tile.thread_rank()); c < chunks; c += kTile) {
    uint32_t m = match16(load_digests(t.digests, base, c, true), d4);
    while (m) {
      const int j = __ffs(m) - 1;
      m &= m - 1;
      const int64_t slot = base + c * 16 + j;
      const uint64_t k = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + slot);
      if ((k == key || k == kLockedKey) && wait_unlocked(t.keys, slot) == key) found = slot;
    }
  }
  const uint32_t b = tile.ballot(found >= 0);
  return b ? tile.shfl(found, __ffs(b) - 1) : -1;
}

// Eviction path of one key whose bucket had no free slot: the bucket stays full for the rest of the kernel.
// Out of line (rarely taken below full load; its registers would otherwise be held across the common path);
// `pp` points at a copy of the parameters in shared or local memory, never at the kernel parameter itself.
// kWideScan: the scan under the lock reads contiguous score lines (scan_bucket_wide; the default schedule
// kScheduleDynamicWide) instead of scan_bucket.
template <int K, int V, int P, bool kWideScan = false>
__device__ __noinline__ Outcome evict_insert(const UpsertParams* pp, KeyArgs a, const typename Val<V>::T* row_in,
                                             int64_t bucket, uint8_t digest, uint64_t new_score) {
  using T = typename Val<V>::T;
  using KT = typename KeyT<K>::T;
  const UpsertParams& p = *pp;
  const TableRef& t = p.t;
  const int64_t dim = t.dim;
  const Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const bool lead = tile.thread_rank() == 0;
  const int64_t base = bucket * t.bucket_capacity;
  int32_t* lock = t.locks + bucket;
  Outcome out{-1, kStatRefused, false};
  if (row_in != nullptr) prefetch_row_l2(tile, row_in, dim);  // read after the claim: an L2 hit by then
  prefetch_bucket_l2(tile, t, base);  // the scan's digests and scores move into L2 while the lock is taken
  int64_t filled = -1;  // the slot this tile filled under the lock, published after the unlock
  while (true) {
    bool got = false;
    if (lead) got = try_lock_bucket(lock);
    if (tile.shfl(got, 0)) break;
    // The bucket is busy. Its holder may be inserting this very key (a hot key missing from a full bucket brings
    // all its duplicates here; measured on H200, Zipf keys at load factor 1: they serialized on this lock): look
    // for the key while waiting, and serve it as a hit without the lock.
    const int64_t s = probe_bucket(tile, t, a.key, base, 0x01010101u * digest);
    if (s >= 0 && serve_hit<V, P>(tile, p, a, row_in, s, out)) return out;
    __nanosleep(64);
  }
  tile.sync();  // the lead's acquire orders the tile's scan after the previous holder's writes
  const uint32_t d4 = 0x01010101u * digest;
  while (true) {
    const BucketScan sc = kWideScan ? scan_bucket_wide(tile, t, base, d4) : scan_bucket(tile, t, base, d4);
    // The victim: the least (score, digest, key) (probe.cuh, "eviction scan"). The tile's least rank settles it
    // unless two slots share it (or a score >= 2^56 makes ranks inexact): then victim_exact reads key words.
    bool big = (sc.big >> 24) != 0;
    const EvictCand m = tile_min_rank(tile, sc.min, big);
    uint64_t victim_score = m.rank >> 8;
    const bool refuse = !big && !(new_score > victim_score);  // (before any key word is read for a tie)
    const bool exact = big || m.tie;
    // One round trip: the key words of the slots whose digest is the key's (a duplicate of this batch may have
    // inserted the key) and, when the rank settled the victim, the victim's lock (lock_victim; its key word comes
    // back from the exchange, so its look bit is dropped).
    const bool spec = !refuse && !exact && m.idx >= 0;
    int64_t victim = base + m.idx;
    uint64_t look = sc.look & ~(spec ? look_bit(tile, m.idx) : 0ull);
    int64_t found = -1;
    bool held = false;  // a slot of the key's digest read LOCKED (a hit holds it: maybe the key's)
    uint64_t k0 = 0;
    int j0 = -1;
    if (look) {
      j0 = __ffsll(static_cast<long long>(look)) - 1;
      look &= look - 1;
      k0 = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + base + look_slot(tile, j0));
    }
    uint64_t old = kLockedKey;
    if (spec && lead) old = lock_victim(t.keys, victim);
    if (j0 >= 0) {
      if (k0 == a.key) found = base + look_slot(tile, j0);
      held = k0 == kLockedKey;
    }
    while (look) {  // a second slot of the key's digest in this lane (rare)
      const int j = __ffsll(static_cast<long long>(look)) - 1;
      look &= look - 1;
      const uint64_t k = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + base + look_slot(tile, j));
      if (k == a.key) found = base + look_slot(tile, j);
      held = held || k == kLockedKey;
    }
    const uint32_t bf = tile.ballot(found >= 0);
    const bool any_held = tile.any(held);
    old = tile.shfl(old, 0);
    if (spec && (bf || any_held || old == a.key)) {
      // The key may be present: put the victim back (its word unchanged, or LOCKED left to its holder).
      if (lead && old != kLockedKey) publish_key(t.keys, victim, old);
      if (old == a.key) found = lead ? victim : found;
    }
    const uint32_t bf2 = tile.ballot(found >= 0);
    if (bf2) {
      if (serve_hit<V, P>(tile, p, a, row_in, tile.shfl(found, __ffs(bf2) - 1), out)) break;
      continue;  // evicted under us: rescan
    }
    if (any_held) {
      // Wait the LOCKED slots of the key's digest out, then rescan (their holders never wait).
      uint64_t w = sc.look;
      while (w) {
        const int j = __ffsll(static_cast<long long>(w)) - 1;
        w &= w - 1;
        wait_unlocked(t.keys, base + look_slot(tile, j));
      }
      continue;
    }
    if (refuse) break;
    if (m.idx < 0) break;  // no occupied slot (cannot happen in a full bucket): refused
    if (exact) {
      victim = victim_exact(tile, t, base, victim_score);
      if (!(new_score > victim_score)) break;  // refused
      if (lead) old = lock_victim(t.keys, victim);
      old = tile.shfl(old, 0);
    }
    // The victim's lock: LOCKED means a hit holds the slot (wait it out, rescan); EMPTY (a free slot, which a full
    // bucket does not have) is taken as one; a key is evicted if its score is still the scanned one (a hit may
    // have changed it since the scan: then it is put back and the bucket rescanned).
    if (old == kLockedKey) {
      if (lead) wait_unlocked(t.keys, victim);
      tile.sync();
      continue;
    }
    const bool is_free = old == kEmptyKey;
    bool claimed = true;
    // A hit may have changed the victim's score since the scan: re-read it. Not under LRU outside
    // accum_or_assign: every score such an op writes is its one value (the clock), the victim's is below it, the
    // first pass's hits completed before this kernel and it defers no present key, so this pass hits only keys
    // this op inserted (their score is the op's): a score below it changes only under the bucket lock held here.
    const bool recheck = P != kPolicyLru || p.mode == kAccumOrAssign;
    if (!is_free && lead && recheck) {
      claimed = __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + victim) == victim_score;
      if (!claimed) publish_key(t.keys, victim, old);
    }
    if (!tile.shfl(claimed, 0)) continue;
    if (is_free) {
      fill_new<V, false>(tile, p, a, row_in, digest, victim, new_score);
      filled = victim;
      out = Outcome{victim, kStatInserted, false};
      break;
    }
    const uint64_t victim_key = old;
    if (p.mode == kInsertAndEvict) {
      // One atomic per group of converged tiles for the output positions (the count is one contended word).
      unsigned long long pos = 0;
      if (lead) {
        const cg::coalesced_group g = cg::coalesced_threads();
        unsigned long long b0 = 0;
        if (g.thread_rank() == 0)
          b0 = atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + kStatEvicted,
                         static_cast<unsigned long long>(g.size()));
        pos = g.shfl(b0, 0) + g.thread_rank();
      }
      pos = tile.shfl(pos, 0);
      if (lead) {
        if (p.evicted_keys) reinterpret_cast<KT*>(p.evicted_keys)[pos] = static_cast<KT>(victim_key);
        if (p.evicted_scores) p.evicted_scores[pos] = victim_score;
      }
      if (p.evicted_values)
        copy_row<T, true>(tile, row_ptr<T>(p.evicted_values, pos, dim), row_ptr<T>(t, victim), dim, true);
      tile.sync();
    }
    fill_new<V, false>(tile, p, a, row_in, digest, victim, new_score);
    filled = victim;
    out = Outcome{victim, kStatEvicted, false};
    break;
  }
  tile.sync();
  if (lead) {
    // One release for both: the lock's release store orders the tile's writes (row, score, digest, the evicted
    // copy) before it and before the key's store that follows it (a strong store after the release fence). The
    // next holder may see the slot LOCKED for a moment: its scan and claim wait LOCKED slots out.
    unlock_bucket(lock);
    if (filled >= 0) publish_key_after_release(t.keys, filled, a.key);
  }
  return out;
}

// The upsert of one key by one tile (insert pass and rehash): probe, serve a hit, else claim a free slot in
// probe order, else evict. `row_in`: the caller's row (or null). `p_cold`: the same parameters as `p`, in shared
// or local memory, for the out-of-line eviction path. `full_bucket`: the first pass found the key missing and its
// bucket without a free slot; a bucket gains no free slot during an upsert, so the key goes straight to the
// eviction path, whose scan under the lock (and its probe while waiting for the lock) finds the key if a
// duplicate inserted it meanwhile. Tile-uniform control flow throughout.
template <int K, int V, int P, bool kWideScan = false>
__device__ __forceinline__ Outcome upsert_one(const Tile& tile, const UpsertParams& p, const UpsertParams* p_cold,
                                              const KeyArgs& a, const typename Val<V>::T* row_in,
                                              bool full_bucket = false) {
  const TableRef& t = p.t;
  const KeyHome h = home_of(t, a.key);
  const int mode = p.mode;
  const bool lead = tile.thread_rank() == 0;
  FreeMasks free_mask;
  const bool may_insert = mode == kFindOrInsert || mode == kInsertOrAssign || mode == kInsertAndEvict ||
                          (mode == kAccumOrAssign && !a.accum_flag);
  if (full_bucket && may_insert)
    return evict_insert<K, V, P, kWideScan>(
        p_cold, a, row_in, h.bucket, static_cast<uint8_t>(h.d4),
        policy_score(P, p.use_epoch, p.epoch, a.clock, a.score_given, a.score_in, false, 0));

  while (true) {  // restarts when a key we saw gets evicted under us
    const int64_t slot = probe_concurrent(tile, t, a.key, h, free_mask);
    if (slot >= 0) {
      if (mode == kAccumOrAssign && !a.accum_flag) return Outcome{slot, -1, true};  // present: nothing to do
      Outcome o;
      if (serve_hit<V, P>(tile, p, a, row_in, slot, o)) return o;
      continue;
    }
    if (!may_insert) return Outcome{-1, -1, false};
    const uint64_t new_score =
        policy_score(P, p.use_epoch, p.epoch, a.clock, a.score_given, a.score_in, false, 0);

    // Claim a free slot in probe order.
    bool dup = false;
    const int64_t cand = claim_in_probe_order(tile, t, h, free_mask, a.key, dup);
    if (cand >= 0 && !dup) {
      fill_new<V>(tile, p, a, row_in, static_cast<uint8_t>(h.d4), cand, new_score);
      return Outcome{cand, kStatInserted, false};
    }
    if (dup) {  // a duplicate of this batch got here first
      Outcome o;
      if (serve_hit<V, P>(tile, p, a, row_in, cand, o)) return o;
      continue;
    }
    return evict_insert<K, V, P, kWideScan>(p_cold, a, row_in, h.bucket, static_cast<uint8_t>(h.d4), new_score);
  }
}

// Score touch of a hit without a slot lock (hit pass of find_or_insert / assign_scores; the lead lane). LRU and
// caller scores are plain stores (every concurrent writer of a slot stores a value some order of the batch
// allows); LFU increments atomically (saturating; the epoch form keeps the low 32 bits saturating).
template <int P>
__device__ __forceinline__ void touch_score(const UpsertParams& p, int64_t slot, uint64_t clock, bool given,
                                            uint64_t score_in) {
  unsigned long long* sp = reinterpret_cast<unsigned long long*>(p.t.scores) + slot;
  if (p.mode == kAssignScores && given) {
    *sp = score_in;
  } else if (P == kPolicyLfu) {
    const unsigned long long inc = given ? score_in : 1ull;
    if (!p.use_epoch) {
      // Once any adder wraps, it stores the saturated value; adders in between are absorbed by that store.
      const unsigned long long prev = atomicAdd(sp, inc);
      if (prev + inc < prev) atomicExch(sp, ~0ull);
    } else {
      unsigned long long old = __ldcg(sp);
      while (true) {
        const unsigned long long nw = policy_score(P, true, p.epoch, clock, given, score_in, true, old);
        const unsigned long long seen = atomicCAS(sp, old, nw);
        if (seen == old) break;
        old = seen;
      }
    }
  } else if (P == kPolicyLru || given) {  // Customized without a caller score keeps the score
    *sp = policy_score(P, p.use_epoch, p.epoch, clock, given, score_in, true, 0);
  }
}

// Adds a block's stats to the op's (and inserts to the table size). All threads of the block call it.
// Block stats are 32-bit shared counters (a block serves at most kBlock / kTile keys): 32-bit shared atomics are
// native, 64-bit ones are a CAS loop.
__device__ __forceinline__ void flush_stats(const UpsertParams& p, unsigned* s_stats) {
  __syncthreads();
  if (threadIdx.x < kNumStats && s_stats[threadIdx.x]) {
    const unsigned long long v = s_stats[threadIdx.x];
    atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + threadIdx.x, v);
    if (threadIdx.x == kStatInserted)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.t.counters) + kCounterSize, v);
  }
}

// Pass 1 of an upsert: serves the hits and inserts into free slots; queues the rest (see the top of this file).
// The first pass is instantiated per family of modes, so that each instance gets the occupancy its own
// registers allow without spills: find_or_insert (the initializer's math), the row copiers (insert_or_assign,
// insert_and_evict, assign) and the rest (accum_or_assign, assign_scores).
// find_or_insert has two: kFamilyInitConst when the initializer is one constant for every column (the default;
// no drawing code, which needs the registers of 5 blocks/SM), kFamilyInit otherwise.
// kFamilyCopyDedup: the row copiers under LRU with the first-writer set (dedup_set; private option), an instance
// of its own so that the default copiers' registers do not change.
enum MainFamily : int { kFamilyInit = 0, kFamilyCopy = 1, kFamilyOther = 2, kFamilyInitConst = 3,
                        kFamilyCopyDedup = 4 };
TABLE_HD int main_family(int mode) {
  return mode == kFindOrInsert ? kFamilyInit
         : (mode == kInsertOrAssign || mode == kInsertAndEvict || mode == kAssign) ? kFamilyCopy
                                                                                   : kFamilyOther;
}
// Warps per SM: 48 for the copiers and constant-initializer find_or_insert (40 registers), 40 for the others (48
// registers). Measured on H200, dim 32, 1M keys at load factor 0.5, blocks of 256: 4 -> 5 blocks/SM took
// find_or_insert's first pass 537 -> 468 us, 5 -> 6 (with spills) insert_or_assign's 521 -> 485 us, 5 -> 6
// (spill-free) find_or_insert's 437.6 -> 391.0 us.
// Block size (kMainBlock): find_or_insert's blocks are 128 threads (32 keys). The deferred keys are queued at a
// block barrier, so a block lives as long as its slowest key: 32 keys instead of 64 halve that tail, for twice the
// queue atomics (H200, load factor 1.0, with the warp meet below: find_or_insert's first pass 330 -> 291 us). The
// row copiers measured no better with 128 (327 against 322 us) and keep 256; so do the others (not measured).
template <int F>
constexpr int kMainBlock = F == kFamilyInit || F == kFamilyInitConst ? 128 : kBlock;
// Q: the first pass compiled for a kind of table. Q & 4: buckets of <= 128 slots (2 digest rounds per lane instead of
// kMaxRounds); Q & 8: all-HBM rows (no host-row code; the claim order is the probe order alone); Q & 2: the deferred
// keys staged in shared memory and queued by the block's last warp out (one global atomic per block, no block
// barrier: a block's warps leave as they finish). kQPlain = all three: the instance of the default table
// (launch_upsert_first picks it where the table allows), against the general one (Q = 0): ~27-32 % less code, no
// spills (the general instance of the constant initializer spills 28 bytes, the copiers' 56). Measured on an H200
// (dim 32, 1M keys, docs/dynamicemb_storage_notes.md, "The first pass compiled for the default table"): Q = 12 took
// the ops 7-13 % under the general instance's time, the staged queue a further 1-4 % (8 % on Zipf copiers); the
// queue per warp (one global atomic per warp) lost 12-19 % at load 1.0 and was removed. Lab variants (evict_bench
// only: compiled in with -DDYNAMICEMB_TABLE_FIRST_LAB=1, chosen by mode's bits 12-15 from kUpsertModeLabShift): the
// parts of kQPlain.
constexpr int kQPlain = 2 | 4 | 8;
#ifndef DYNAMICEMB_TABLE_FIRST_LAB
#define DYNAMICEMB_TABLE_FIRST_LAB 0
#endif
template <int F, int Q>
constexpr int kMainBlockQ = kMainBlock<F>;
template <int K, int V, int P, int F, int Q = 0>
__global__ void __launch_bounds__(kMainBlockQ<F, Q>,
                                  (F == kFamilyCopy || F == kFamilyCopyDedup || F == kFamilyInitConst ? 48 : 40) * 32 /
                                      kMainBlockQ<F, Q>)
    upsert_main_kernel(UpsertParams p) {
  constexpr bool kCopier = F == kFamilyCopy || F == kFamilyCopyDedup;
  constexpr int kMB = kMainBlockQ<F, Q>;
  constexpr int kRounds = (Q & 4) ? 2 : kMaxRounds;
  constexpr bool kAllHbm = (Q & 8) != 0;
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  __shared__ unsigned s_stats[kNumStats];
  __shared__ unsigned s_queued;
  __shared__ unsigned long long s_queue_base;
  __shared__ unsigned s_done;  // Q & 2: warps of the block done
  __shared__ unsigned long long s_clock;
  __shared__ int s_dedup;       // kFamilyCopyDedup: begin_op chose the first-writer set for this batch
  __shared__ UpsertParams s_p;  // for the out-of-line initializer
  if (threadIdx.x == 32) s_p = p;
  if (threadIdx.x < kNumStats) s_stats[threadIdx.x] = 0;
  // The key's load is issued before the barrier (and before the wait for begin_op under pdl), so that its round
  // trip overlaps the clock's (the block's warps would otherwise start their probes one round trip after the block
  // starts).
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kMB + threadIdx.x) / kTile;
  const uint64_t key = i < p.n ? static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]) : 0;
  accel::griddep_wait();
  accel::griddep_launch_dependents();
  if (threadIdx.x == 0) {
    s_queued = 0;
    s_done = 0;
    // The op clock was written by begin_op_kernel: read-only here. One read per block (not per warp): the
    // counters line is also the target of the size counter's atomics.
    s_clock = static_cast<unsigned long long>(__ldg(p.t.counters + kCounterClock));
    if (F == kFamilyCopyDedup) s_dedup = static_cast<int>(__ldg(dedup_choice(p)));
  }
  __syncthreads();
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const bool lead = tile.thread_rank() == 0;
  // The warp's lanes that probe (find_or_insert: the __syncwarp after the probe, below).
  constexpr bool kMeet = F == kFamilyInit || F == kFamilyInitConst;
  const unsigned probe_lanes = kMeet ? __ballot_sync(0xffffffffu, i < p.n && !is_reserved_key(key)) : 0u;
  bool defer = false;
  bool full = false;  // deferred: a missing key whose bucket has no free slot left
  // The key's work; the first-writer set's family has two copies of it (one per choice of begin_op), so that the
  // slot-lock copy keeps kFamilyCopy's registers.
  const auto serve = [&](auto set_chosen) {
    constexpr bool kSetChosen = decltype(set_chosen)::value;
    if (i < p.n) {
      const TableRef& t = p.t;
      const int64_t dim = t.dim;
      // The mode as one of the family's own (a compile-time set, so the other families' paths are not compiled
      // in; insert_and_evict is insert_or_assign here: evictions happen in the insert pass).
      const int mode = F == kFamilyInit || F == kFamilyInitConst ? static_cast<int>(kFindOrInsert)
                       : kCopier ? (p.mode == kAssign ? static_cast<int>(kAssign) : static_cast<int>(kInsertOrAssign))
                                 : (p.mode == kAccumOrAssign ? static_cast<int>(kAccumOrAssign)
                                                             : static_cast<int>(kAssignScores));
      // The op clock and the caller's score are read where used (fewer registers live across the probe).
      const auto clock = [&] { return static_cast<uint64_t>(s_clock); };
      int64_t slot = -1;
      int stat = -1;
      bool hit = false;
      // Hybrid tables (p.host.ops set; never for kFamilyOther): a host row this pass would copy is left to
      // launch_host_rows, which copies the rows in host-slot order before the insert pass (host_rw: 0 a write of
      // the key's row, 1 a read into values_out, -1 none).
      const auto deferred = [&](int64_t s) {
        return !kAllHbm && F != kFamilyOther && p.host.ops != nullptr && ref_host_slot(t, s);
      };
      int host_rw = -1;
      if (is_reserved_key(key)) {
        stat = kStatIllegal;
      } else {
        const bool given = p.scores_in != nullptr;
        const auto score_in = [&] { return given ? p.scores_in[i] : uint64_t(0); };
        const bool flag = p.accum_flags != nullptr && p.accum_flags[i];
        const KeyHome h = home_of(t, key);
        // LRU row copiers with the first-writer set (all-HBM tables): the first occurrence of each key to register
        // is its only writer in this pass, so its hit takes no slot lock and its insert claims the free slot with the
        // key itself (no LOCKED state, no release store: no other occurrence reads or writes the slot in this pass;
        // the next kernel sees every write); the others yield (hits) or go to the insert pass (missing keys). The
        // registration's CAS is issued here and settled after the probe.
        constexpr bool dedup = kSetChosen && P == kPolicyLru;
        unsigned long long dedup_seen = 0;
        if (dedup && lead) dedup_seen = dedup_start(p, key);
        // The row copiers' input row starts moving into L2 now (no registers held): the probe and the claim or
        // lock CAS overlap its DRAM latency, and the copy after them reads L2. (assign's misses waste it.)
        if (kCopier && p.values_in)
          prefetch_row_l2(tile, reinterpret_cast<const T*>(p.values_in) + i * dim, dim);
        FreeMasks free_mask;
        // The row copiers lock a hit inside the probe (every hit of theirs writes its row): `lock` below.
        int lock = kHitLockNone;
        // The candidate free slot's key word is read by the probe only for a key that may be inserted (assign and
        // assign_scores never insert; accum_or_assign inserts only keys without the flag).
        const bool may_insert = kCopier             ? p.mode != kAssign
                                : F == kFamilyOther ? (mode == kAccumOrAssign && !flag)
                                                    : true;
        // LRU: a hit found only after waiting its slot out yields, as one whose lock CAS met the slot held (its write
        // taken as overwritten by the duplicate that held it); the other policies take the lock after the wait.
        slot = kCopier
                   ? probe_concurrent<true, kRounds>(tile, t, key, h, free_mask, may_insert, &lock,
                                                     P == kPolicyLru && !dedup, !dedup)
                   : probe_concurrent<false, kRounds>(tile, t, key, h, free_mask, may_insert);
        bool dup = false;  // dedup: another occurrence of the key is its writer in this pass
        if (dedup) dup = dedup_settle(tile, p, key, dedup_seen);
        // find_or_insert: the warp's tiles meet after the probe (the probe's per-lane loops over digest matches leave
        // them apart), so that the hits' row copies and score touches run once per warp instead of once per
        // straggling group of tiles (H200, load factor 1.0: first pass -8 %). Safe where the probe takes no lock (no
        // tile of the warp holds one yet: claims come after this point); a row copier's probe locks its hit's slot,
        // which another tile of the warp may be waiting for inside its own probe (a duplicate key), so the copiers
        // cannot meet here. (accum_or_assign / assign_scores could; not measured.)
        if (kMeet) __syncwarp(probe_lanes);
        hit = slot >= 0;
        const bool reads_only = mode == kFindOrInsert || mode == kAssignScores;
        const bool skip = mode == kAccumOrAssign && (hit ? !flag : flag);  // present & no flag / missing & flag
        const bool locking = hit && !reads_only && !skip && !dedup;         // row writer of a present key
        const bool inserting = !hit && !skip && mode != kAssign && mode != kAssignScores && !dup;
        if (hit && mode == kFindOrInsert && p.values_out && !deferred(slot))
          prefetch_row_l2(tile, row_ptr<T, kAllHbm>(t, slot), dim);
        // One CAS per tile, the same instruction for both kinds: a row writer locks its hit's slot (key ->
        // LOCKED), an insert claims the first free slot in probe order (EMPTY -> LOCKED), retrying along the probe
        // order when another key took the slot. `owner`: the tile now holds `slot` LOCKED.
        bool owner = dedup && hit && !dup;  // the key's only writer in this pass: no lock
        if (dedup && hit && dup) stat = kStatAssigned;  // yields, as a row writer that met the slot locked
        // A missing key another occurrence registered: that one inserts it (or leaves it to the insert pass).
        if (dedup && !hit && dup && mode != kAssign) defer = true;
        if (locking || inserting) {
          int64_t target = locking ? slot : next_free_candidate<kRounds, kAllHbm>(tile, t, h, free_mask);
          while (target >= 0) {
            uint64_t seen = 0;
            if (locking && lock != kHitLockNone) {
              seen = lock == kHitLockOwned ? key : kLockedKey;  // the probe's CAS on this slot
            } else {
              if (lead) {
                if (dedup) {
                  // The key's only writer claims with the key itself: nobody in this pass reads the slot's row, score
                  // or digest after seeing the key (no other occurrence writes it), so nothing is published later.
                  seen = atomicCAS(reinterpret_cast<unsigned long long*>(t.keys) + target, kEmptyKey, key);
                } else {
                  seen = cas_key(t.keys, target, locking ? key : kEmptyKey, kLockedKey);
                  if (inserting && seen == kLockedKey) seen = wait_unlocked(t.keys, target);
                }
              }
              seen = tile.shfl(seen, 0);
            }
            if (locking) {
              owner = seen == key;
              // A duplicate of this batch holds the slot. LRU row writers yield, as if this write came first and
              // was overwritten (every writer stores the same score; the insert pass's LRU hit path does the
              // same); other policies leave the key to the insert pass.
              if (!owner && P == kPolicyLru && mode != kAccumOrAssign && seen == kLockedKey) stat = kStatAssigned;
              break;
            }
            if (seen == kEmptyKey) {
              owner = true;
              slot = target;
              break;
            }
            if (seen == key) break;  // a duplicate of this batch inserted it: the insert pass serves this one
            target = next_free_candidate<kRounds, kAllHbm>(tile, t, h, free_mask);
          }
          // Not owned: a full bucket (eviction), a duplicate's insert, or a slot a duplicate holds locked.
          defer = !owner && stat < 0;
          full = inserting && target < 0;  // (the insert pass goes straight to the eviction path)
        }
        if (owner) {
          // Score and digest first: fewer values stay live across the out-of-line initializer call.
          if (lead) {
            const uint64_t prev = hit ? __ldcg(reinterpret_cast<const unsigned long long*>(t.scores) + slot) : 0;
            t.scores[slot] = policy_score(P, p.use_epoch, p.epoch, clock(), given, score_in(), hit, prev);
            if (!hit) t.digests[slot] = static_cast<uint8_t>(h.d4);
          }
          T* row = row_ptr<T, kAllHbm>(t, slot);
          const T* row_in = p.values_in ? reinterpret_cast<const T*>(p.values_in) + i * dim : nullptr;
          if (deferred(slot)) host_rw = 0;
          if (mode == kFindOrInsert)
            init_new_row<V, F == kFamilyInitConst, kAllHbm>(&s_p, slot, i, key, clock(), host_rw < 0);
          else if (hit && mode == kAccumOrAssign)
            accum_row<V>(tile, row, row_in, dim);
          else if (host_rw < 0)
            copy_row(tile, row, row_in, dim, false);
          if (!dedup) {  // (dedup: the key word holds the key already)
            tile.sync();
            if (lead) publish_key(t.keys, slot, key);
          }
          stat = hit ? kStatAssigned : kStatInserted;
        } else if (hit && reads_only) {
          // Nobody writes the rows of present keys in these modes' first pass: copy without a lock (the row was
          // prefetched into L2 before the inserts' claims above).
          if (deferred(slot)) host_rw = 1;
          else if (mode == kFindOrInsert && p.values_out)
            copy_row(tile, row_ptr<T>(p.values_out, i, dim), row_ptr<T, kAllHbm>(t, slot), dim, false);
          if (lead) touch_score<P>(p, slot, clock(), given, score_in());
          stat = kStatAssigned;
        }
      }
      if (!defer) {
        if (mode == kFindOrInsert && slot < 0 && p.values_out) {  // illegal key: the initial row
          if (F == kFamilyInitConst)
            fill_row<V>(tile, row_ptr<T>(p.values_out, i, dim), dim, p.init.value);
          else
            init_row<V>(tile, row_ptr<T>(p.values_out, i, dim), nullptr, dim, p.init, clock(), key);
        }
        if (lead) {
          if (p.slots_out) p.slots_out[i] = slot;
          if (p.found_out) p.found_out[i] = hit;
          if (stat >= 0) atomicAdd(&s_stats[stat], 1u);
        }
      }
      if (!kAllHbm && F != kFamilyOther && lead && p.host.ops)
        p.host.ops[i] = host_rw >= 0 ? host_op(p.host.bits, host_rw == 1, ref_host_row(t, slot), i)
                                     : host_op_none(p.host.bits, i);
    }
  };
  if constexpr (F == kFamilyCopyDedup) {
    if (s_dedup) serve(std::true_type{});
    else serve(std::false_type{});
  } else {
    serve(std::false_type{});
  }
  // Queue the deferred keys: offsets inside the block from shared-memory atomics (one per warp), then ONE global
  // atomic per block. (One global atomic per warp on the shared count serialized at its L2 slice: measured on
  // H200, 1M keys: the hit pass took 630 us instead of ~230 us.)
  const bool want = defer && lead;
  const unsigned ballot = __ballot_sync(0xffffffffu, want);
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int leader = ballot ? __ffs(ballot) - 1 : 0;
  if constexpr ((Q & 2) != 0) {
    // Staged per block, no barrier: each warp writes its entries into the block's staging area in shared memory at
    // offsets from the shared count (as below) and leaves; the block's last warp out takes the block's offset by one
    // global atomic (as below), copies the staged entries and flushes the stats (the block fences order every warp's
    // staging and stat adds before its done count, and the count before the last warp's reads).
    __shared__ longlong2 s_stage[kMB / kTile];
    unsigned warp_off = 0;
    if (ballot && lane == leader) warp_off = atomicAdd(&s_queued, static_cast<unsigned>(__popc(ballot)));
    warp_off = __shfl_sync(0xffffffffu, warp_off, leader);
    if (want) {
      const uint64_t k = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
      s_stage[warp_off + __popc(ballot & ((1u << lane) - 1u))] =
          make_longlong2(static_cast<long long>(k), static_cast<long long>(i | (full ? kPendingFullBucket : 0)));
    }
    __syncwarp();
    __threadfence_block();
    unsigned done = 0;
    if (lane == 0) done = atomicAdd(&s_done, 1u);
    done = __shfl_sync(0xffffffffu, done, 0);
    if (done == kMB / 32 - 1) {
      __threadfence_block();
      const unsigned nq = *const_cast<volatile unsigned*>(&s_queued);
      unsigned long long base = 0;
      if (lane == 0 && nq) base = atomicAdd(pending_count(p), static_cast<unsigned long long>(nq));
      base = __shfl_sync(0xffffffffu, base, 0);
      const volatile longlong2* st = s_stage;
      for (unsigned j = lane; j < nq; j += 32) {
        const long long kx = st[j].x, ky = st[j].y;
        reinterpret_cast<longlong2*>(p.pending)[base + j] = make_longlong2(kx, ky);
      }
      if (lane < kNumStats) {
        const unsigned long long v = atomicAdd(&s_stats[lane], 0u);
        if (v) {
          atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + lane, v);
          if (lane == kStatInserted) atomicAdd(reinterpret_cast<unsigned long long*>(p.t.counters) + kCounterSize, v);
        }
      }
    }
    return;
  }
  unsigned warp_off = 0;
  if (ballot && lane == leader) warp_off = atomicAdd(&s_queued, static_cast<unsigned>(__popc(ballot)));
  warp_off = __shfl_sync(0xffffffffu, warp_off, leader);
  __syncthreads();
  if (threadIdx.x == 0 && s_queued)
    s_queue_base = atomicAdd(pending_count(p), static_cast<unsigned long long>(s_queued));
  __syncthreads();
  if (want) {
    // The key again (a cache hit): holding it in registers through the kernel costs the probe spills.
    const uint64_t k = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
    reinterpret_cast<longlong2*>(p.pending)[s_queue_base + warp_off + __popc(ballot & ((1u << lane) - 1u))] =
        make_longlong2(static_cast<long long>(k), static_cast<long long>(i | (full ? kPendingFullBucket : 0)));
  }
  flush_stats(p, s_stats);
}

// assign under LRU (all-HBM rows): one kernel in place of the row copiers' two passes. Under LRU the copiers' first
// pass never defers an assign (a hit whose slot a duplicate holds yields, as if its write came first and was
// overwritten; a missing key is skipped), so no insert pass follows. The kernel keeps only what a hit
// needs: the digest chunks, the key words of the digest matches, the slot lock by a CAS right after the relaxed load
// that read the key (probe_concurrent<true>'s protocol: a slot read LOCKED is never CASed; a tile that took its
// key's slot, or met it held, returns at once; one that took nothing waits out the slots it read LOCKED and yields
// if one of them turns out to hold its key), the row and score written under the lock, the key published by a
// release store. Against the copiers' instance: 32 registers (64 warps per SM instead of 48), blocks of 32 keys, no
// block barrier or shared load before the probe (the op clock is read by each tile's lead beside its probe), and
// the input row prefetched into L2 only once a digest matched (a miss without a match, ~60 % of the misses at load
// 1.0, does not read it). Measured (and the what-ifs none of which was faster): docs/dynamicemb.md, "assign at 2x
// HierarchicalKV".
constexpr int kAssignBlock = 128;
constexpr int kAssignMinBlocks = 64 * 32 / kAssignBlock;  // 64 warps per SM (32 registers)
template <int K, int V>
__global__ void __launch_bounds__(kAssignBlock, kAssignMinBlocks) assign_lru_kernel(UpsertParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  __shared__ unsigned s_count[2];  // the block's assigned and illegal keys
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kAssignBlock + threadIdx.x) / kTile;
  // The caller's keys and rows are complete before begin_op: loaded before the wait (see the first pass).
  const uint64_t key = i < p.n ? static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]) : 0;
  if (threadIdx.x < 2) s_count[threadIdx.x] = 0;
  accel::griddep_wait();
  accel::griddep_launch_dependents();
  const Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const bool lead = tile.thread_rank() == 0;
  const TableRef& t = p.t;
  int stat = -1;
  int64_t slot = -1;
  if (i < p.n && is_reserved_key(key)) stat = kStatIllegal;
  if (i < p.n && stat < 0) {
    const KeyHome h = home_of(t, key);
    const T* row_in = reinterpret_cast<const T*>(p.values_in) + i * t.dim;
    // written by begin_op: read after the wait, its round trip beside the probe's
    const uint64_t clock = lead ? __ldcg(reinterpret_cast<const unsigned long long*>(t.counters) + kCounterClock) : 0;
    const int chunks = t.bucket_capacity / 16;
    uint32_t match[kMaxRounds];
#pragma unroll
    for (int g = 0; g < kMaxRounds; g += 2) {
      match[g] = match[g + 1] = 0;
      if (g * kTile >= chunks) continue;
      const ChunkPair cp = load_chunk_pair(tile, t.digests, h.base, chunks, g, false);  // no writer of digests here
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (cp.valid[e]) match[g + e] = match16(cp.d[e], h.d4);
    }
    uint32_t any = 0;
#pragma unroll
    for (int r = 0; r < kMaxRounds; ++r) any |= match[r];
    if (tile.any(any != 0)) prefetch_row_l2(tile, row_in, t.dim);
    // Key words of the matches (a key whose digest is the empty digest also matches the free slots: EMPTY is skipped).
    // found / held: bucket-local slots (fewer registers than slots).
    int found = -1, held = -1;
#pragma unroll
    for (int r = 0; r < kMaxRounds; ++r) {
      uint32_t m = match[r];
      uint32_t wait = 0;
      const int c = r * kTile + static_cast<int>(tile.thread_rank());
      while (m) {
        const int j = __ffs(m) - 1;
        m &= m - 1;
        const uint64_t k = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + h.base + c * 16 + j);
        if (k == key) {
          // Keys do not move in this kernel: the CAS sees the key (locked now) or LOCKED (a duplicate holds it).
          const uint64_t old = cas_key(t.keys, h.base + c * 16 + j, key, kLockedKey);
          if (old == key) found = c * 16 + j;
          else held = c * 16 + j;
        } else if (k == kLockedKey) {
          wait |= 1u << j;
        }
      }
      match[r] = wait;
    }
    const uint32_t bf = tile.ballot(found >= 0);
    if (bf) {
      slot = h.base + tile.shfl(found, __ffs(bf) - 1);
      copy_row(tile, row_ptr<T>(t, slot), row_in, t.dim, false);
      if (lead) t.scores[slot] = policy_score(kPolicyLru, p.use_epoch, p.epoch, clock, false, 0, true, 0);
      tile.sync();
      if (lead) publish_key(t.keys, slot, key);
      stat = kStatAssigned;
    } else {
      if (!tile.any(held >= 0)) {
        // Slots of the key's digest read LOCKED (a duplicate holds the key's slot, or another key's hit a slot of
        // the same digest; holders never wait): wait them out; one seen holding the key was held by a duplicate.
#pragma unroll
        for (int r = 0; r < kMaxRounds; ++r) {
          uint32_t m = match[r];
          const int c = r * kTile + static_cast<int>(tile.thread_rank());
          while (m) {
            const int j = __ffs(m) - 1;
            m &= m - 1;
            if (wait_unlocked(t.keys, h.base + c * 16 + j) == key) held = c * 16 + j;
          }
        }
      }
      const uint32_t bh = tile.ballot(held >= 0);
      if (bh) {  // yields: as if its write came first and was overwritten by the duplicate's
        slot = h.base + tile.shfl(held, __ffs(bh) - 1);
        stat = kStatAssigned;
      }
    }
  }
  if (i < p.n && lead) {
    if (p.slots_out) p.slots_out[i] = slot;
    if (p.found_out) p.found_out[i] = slot >= 0;
  }
  __syncthreads();  // (s_count zeroed)
  if (lead && stat >= 0) atomicAdd(&s_count[stat == kStatAssigned ? 0 : 1], 1u);
  __syncthreads();
  if (threadIdx.x < 2 && s_count[threadIdx.x])
    atomicAdd(reinterpret_cast<unsigned long long*>(p.stats) + (threadIdx.x ? kStatIllegal : kStatAssigned),
              static_cast<unsigned long long>(s_count[threadIdx.x]));
}

// Pass 2 of an upsert: one tile per pending key. Only the device knows the pending count: the grid is capped at
// the blocks that fit at once (2 per SM: the loop needs 98-128 registers without spills; at 3 blocks/SM, 80
// registers, it spills), each warp looping over groups of 8 pending keys (blocks past the count exit at once).
// The warp's tiles meet at a __syncwarp after each group, so that their next keys' loads, lock CASes and scans
// issue together (tiles left to drift apart serialize their round trips); no block barrier inside the loop (a
// warp never waits for the block's slowest key). Stats gather in shared memory and are flushed once at the end.
// L: the group schedule. kScheduleDynamic takes every group after a warp's first from the counter. kScheduleStatic
// hands out the first ~3/4 of the groups statically in whole rounds (warp w: w, w + W, ...) and the rest by the
// counter (the tail that balances the warps): the counter's atomic is aggregated by the compiler (a SHFL of its
// result right after the ATOMG), so a warp waits for that contended atomic at the start of every dynamic group.
// Measured (H200, load 1.0, 1M keys): static insert pass -5 % for find_or_insert and insert_or_assign, +4 % for
// insert_and_evict on a topped-up table, but -8 to -10 % on Zipf keys drawn from every stored key: the default is
// dynamic (insert_schedule; docs/dynamicemb_storage_notes.md "Keys in flight"). kScheduleDynamicWide: dynamic, the
// eviction's scan by scan_bucket_wide (the default; the other two scan by scan_bucket).
enum InsertSchedule : int { kScheduleDynamic = 0, kScheduleStatic = 1, kScheduleDynamicWide = 2 };
template <int K, int V, int P, int L>
__global__ void __launch_bounds__(kBlock, 2) upsert_insert_kernel(UpsertParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  constexpr int kWarpKeys = 32 / kTile;
  // Written by earlier kernels, read-only here; one read per block (see the hit pass).
  __shared__ long long s_count;
  __shared__ unsigned long long s_clock;
  accel::griddep_wait();
  if (threadIdx.x == 0) {
    s_count = static_cast<long long>(__ldg(reinterpret_cast<const unsigned long long*>(pending_count(p))));
    s_clock = static_cast<unsigned long long>(__ldg(p.t.counters + kCounterClock));
  }
  __syncthreads();
  const int64_t count = s_count;
  if (static_cast<int64_t>(blockIdx.x) * (kBlock / kTile) >= count) return;  // the whole block has no key
  __shared__ unsigned s_stats[kNumStats];
  __shared__ UpsertParams s_p;  // for the out-of-line eviction path
  if (threadIdx.x == 0) s_p = p;
  if (threadIdx.x < kNumStats) s_stats[threadIdx.x] = 0;
  __syncthreads();
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const uint64_t clock = static_cast<uint64_t>(s_clock);
  // Group g: keys g * kWarpKeys + (tile in warp). A warp starts with its own global index as its group; a dynamic
  // group's next one comes from a counter (insert_group_counter), an atomic issued at the group's start (the warp
  // waits for it there: see L above): warps whose keys were quick take more groups, so the pass ends with its last
  // keys instead of its slowest warp's share (measured against a fully static schedule: insert_and_evict's insert
  // pass -11 %).
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * (kBlock / 32);
  unsigned long long* next_group = insert_group_counter(p);
  int64_t g = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / 32;
  // Groups below static_end are handed out statically (kScheduleStatic: ~3/4 of them, whole rounds of nwarps;
  // kScheduleDynamic: the first round), the rest by the counter. Kept in shared memory and re-read where needed, so
  // that the loop holds no more registers across the eviction call than the dynamic schedule.
  __shared__ long long s_static_end;
  if (L == kScheduleStatic) {
    if (threadIdx.x == 0) {
      const int64_t groups = (count + kWarpKeys - 1) / kWarpKeys;
      const int64_t rounds = (3 * groups) / (4 * nwarps);
      s_static_end = nwarps * (rounds > 1 ? rounds : 1);
    }
    __syncthreads();
  }
  auto static_end = [&]() -> int64_t {
    return L != kScheduleStatic ? nwarps : *const_cast<volatile long long*>(&s_static_end);
  };
#pragma unroll 1
  while (g * kWarpKeys < count) {
    unsigned long long nx = 0;
    const bool next_static = L == kScheduleStatic && g + nwarps < static_end();
    if (!next_static && (threadIdx.x & 31) == 0) nx = atomicAdd(next_group, 1ull);
    const int64_t j = g * kWarpKeys + (threadIdx.x & 31) / kTile;
    if (j < count) {
      KeyArgs a;
      const longlong2 e = reinterpret_cast<const longlong2*>(p.pending)[j];  // (key, index): one load, not two
      a.key = static_cast<uint64_t>(e.x);
      a.i = e.y & ~kPendingFullBucket;
      a.score_given = p.scores_in != nullptr;
      a.score_in = a.score_given ? p.scores_in[a.i] : 0;
      a.clock = clock;
      a.accum_flag = p.accum_flags != nullptr && p.accum_flags[a.i];
      const T* row_in = p.values_in ? reinterpret_cast<const T*>(p.values_in) + a.i * p.t.dim : nullptr;
      const Outcome o = upsert_one<K, V, P, L == kScheduleDynamicWide>(tile, p, &s_p, a, row_in,
                                                                       (e.y & kPendingFullBucket) != 0);
      if (p.mode == kFindOrInsert && o.slot < 0 && p.values_out)  // refused: the initial row
        init_row<V>(tile, row_ptr<T>(p.values_out, a.i, p.t.dim), nullptr, p.t.dim, p.init, clock, a.key);
      if (tile.thread_rank() == 0) {
        if (p.slots_out) p.slots_out[a.i] = o.slot;
        if (p.found_out) p.found_out[a.i] = o.hit;
        if (o.stat >= 0 && !(o.stat == kStatEvicted && p.mode == kInsertAndEvict))
          atomicAdd(&s_stats[o.stat], 1u);
      }
    }
    __syncwarp();
    const int64_t se = static_end();
    g = (L == kScheduleStatic && g + nwarps < se) ? g + nwarps
                                                  : se + static_cast<int64_t>(__shfl_sync(0xffffffffu, nx, 0));
  }
  flush_stats(p, s_stats);
}

template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock) lookup_kernel(LookupParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
  Tile tile = cg::tiled_partition<kTile>(cg::this_thread_block());
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x) / kTile;
  if (i >= p.n) return;
  const uint64_t key = static_cast<uint64_t>(reinterpret_cast<const KT*>(p.keys)[i]);
  int64_t slot = -1;
  if (!is_reserved_key(key)) slot = probe_readonly(tile, p.t, key, home_of(p.t, key));
  if (p.values_out && slot < 0 && p.fill_missing)
    fill_row<V>(tile, row_ptr<T>(p.values_out, i, p.t.dim), p.t.dim, p.missing_value);
  const bool deferred = p.host.ops != nullptr && ref_host_slot(p.t, slot);  // hybrid: launch_host_rows reads it
  if (p.values_out && slot >= 0 && !deferred)
    copy_row(tile, row_ptr<T>(p.values_out, i, p.t.dim), row_ptr<T>(p.t, slot), p.t.dim, false);
  if (tile.thread_rank() == 0) {
    if (p.host.ops)
      p.host.ops[i] =
          deferred ? host_op(p.host.bits, true, ref_host_row(p.t, slot), i) : host_op_none(p.host.bits, i);
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
__global__ void __launch_bounds__(kBlock, 4) export_kernel(ExportParams p) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
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
    copy_row(tile, row_ptr<T>(p.values_out, pos, p.t.dim), row_ptr<T>(p.t, slot), p.t.dim, false);
}

// Rehash: one tile per source bucket re-inserts its occupied slots in slot order with their scores and rows.
// When the bucket count is multiplied by an integer, each destination bucket is fed by exactly one source
// bucket, so the result is deterministic (and equal to the CPU twin's).
template <int K, int V, int P>
__global__ void __launch_bounds__(kBlock, 2) rehash_kernel(RehashParams rp) {
  using KT = typename KeyT<K>::T;
  using T = typename Val<V>::T;
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
      const KeyArgs a{0, k, rp.src.scores[slot], 0, true, false};
      const Outcome o = upsert_one<K, V, kPolicyCustomized>(tile, p, &p, a, row_ptr<T>(rp.src, slot));
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

#ifndef DYNAMICEMB_TABLE_PHASE_HOOK
// Called with the stream after each kernel launch of an upsert; benchmarks/table_kernel_timing.cu defines it to
// record CUDA events (per-kernel times). Empty otherwise.
#define DYNAMICEMB_TABLE_PHASE_HOOK(stream) \
  do {                                      \
  } while (0)
#endif

namespace detail {
// The LRU row copiers' choice of the first-writer set (dedup_set): the batch is sampled at kDedupSamples positions
// (one pseudo-random position per stratum of n / kDedupSamples, or every key of a smaller batch), and the set is
// used when at least 1 / kDedupRepeatShare of the samples repeat an earlier sample's key. Hot keys show up as
// repeats (a 1M-key batch with 60 % Zipf(1.05) draws: 15-22 of 256); a batch of distinct keys, or one whose repeats
// are rare, keeps the slot-lock path (the set is zeroed by dedup_clear_kernel only when it is used).
constexpr int kDedupSamples = 256;
constexpr unsigned kDedupRepeatShare = 64;
constexpr int kBeginBlock = 256;

// Advances the op clock and zeroes the op's stats, pending count and the insert pass's group counter; runs before
// every upsert (stream-ordered). With `keys` (the LRU row copiers of all-HBM tables; one block of kBeginBlock): the
// block samples the batch and writes the choice of the first-writer set (*choice).
// A named namespace (not an anonymous one: kernel names must not depend on the source path, BUILD_CONTRACT.md),
// and a template like every kernel here, so each generated unit owns its instance (no ODR clash at link time).
template <int K, int V, int P>
__global__ void __launch_bounds__(kBeginBlock)
    begin_op_kernel(int64_t* counters, int64_t* stats, unsigned long long* pending_count, const void* keys,
                    int64_t n, unsigned long long* choice) {
  using KT = typename KeyT<K>::T;
  accel::griddep_launch_dependents();
  if (threadIdx.x == 0) {
    counters[kCounterClock] += 1;
    if (pending_count) {
      pending_count[0] = 0;
      pending_count[kInsertGroupWord] = 0;  // insert_group_counter
    }
  }
  if (threadIdx.x < kNumStats) stats[threadIdx.x] = 0;
  if (keys == nullptr) return;
  constexpr int kPerThread = kDedupSamples / kBeginBlock;
  constexpr uint64_t kSeenMask = 2 * kDedupSamples - 1;
  __shared__ unsigned long long s_seen[2 * kDedupSamples];
  __shared__ unsigned s_repeats;
  const int64_t samples = n < kDedupSamples ? n : kDedupSamples;
  const uint64_t stride = static_cast<uint64_t>(n / samples);
  uint64_t k[kPerThread];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {  // the loads first: all in flight together
    const uint64_t j = threadIdx.x + r * kBeginBlock;
    const uint64_t x = j * 0x9e3779b97f4a7c15ull;
    k[r] = j < static_cast<uint64_t>(samples)
               ? static_cast<uint64_t>(reinterpret_cast<const KT*>(keys)[j * stride + (x ^ (x >> 31)) % stride])
               : kEmptyKey;
  }
  for (int j = threadIdx.x; j < 2 * kDedupSamples; j += kBeginBlock) s_seen[j] = 0;
  if (threadIdx.x == 0) s_repeats = 0;
  __syncthreads();
  unsigned repeats = 0;
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    if (is_reserved_key(k[r])) continue;
    const unsigned long long x = k[r] ^ kEmptyKey;
    for (uint64_t h = dedup_home(k[r], kSeenMask);; h = (h + 1) & kSeenMask) {
      const unsigned long long v = atomicCAS(&s_seen[h], 0ull, x);
      if (v == 0 || v == x) {
        repeats += v == x;
        break;
      }
    }
  }
  if (repeats) atomicAdd(&s_repeats, repeats);
  __syncthreads();
  if (threadIdx.x == 0) *choice = s_repeats > 0 && s_repeats * kDedupRepeatShare >= static_cast<unsigned>(samples);
}
// Zeroes the first-writer set when begin_op chose it (every block reads the choice; none writes otherwise).
template <int K, int V, int P>
__global__ void __launch_bounds__(kBeginBlock)
    dedup_clear_kernel(const unsigned long long* choice, unsigned long long* set, int64_t set_words) {
  __shared__ int s_use;  // one load of the choice per block (not one per warp on one word)
  accel::griddep_launch_dependents();
  accel::griddep_wait();
  if (threadIdx.x == 0) s_use = __ldg(choice) != 0;
  __syncthreads();
  if (!s_use) return;
  ulonglong2* w = reinterpret_cast<ulonglong2*>(set);  // (16-byte aligned: 2n + kPendingExtra words in)
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kBeginBlock + threadIdx.x; j < set_words / 2;
       j += static_cast<int64_t>(gridDim.x) * kBeginBlock)
    w[j] = make_ulonglong2(0ull, 0ull);
}
}  // namespace detail

// The insert pass's grid: at most the blocks that fit at once (2 per SM), so that no block waits for a second
// wave; each loops over groups of pending keys.
inline unsigned insert_grid_cap() { return 2u * static_cast<unsigned>(accel::current_device_sms()); }
// The insert pass's schedule: dynamic (a group counter) with the eviction's wide scan (scan_bucket_wide) for every op.
// The static rounds are 3-4 % faster on a table topped up to load 1.0 but 8-10 % slower on Zipf keys at load 0.965
// drawn from every stored key (insert_and_evict 3 % slower everywhere): docs/dynamicemb_storage_notes.md, "Keys in
// flight". The wide scan cuts the scan's L2 requests by two thirds; the L2's tag lookups bound the pass at load 1.0
// (H200: the insert pass -4 to -8 %): same doc, "What limits the load-1.0 insert pass". `mode` may carry the op's
// private override in its bits from kUpsertModeLabShift (table_types.h): 1 = dynamic with scan_bucket, 2 = static
// (scan_bucket), 3 = dynamic wide (the default); + 8 (evict_bench only) the grid capped at 1 block per SM.
inline InsertSchedule insert_schedule(int mode) {
  const int force = (mode >> kUpsertModeLabShift) & 7;
  if (force == 1) return kScheduleDynamic;
  if (force == 2) return kScheduleStatic;
  return kScheduleDynamicWide;
}
inline unsigned grid_for_tiles(int64_t n) {
  return static_cast<unsigned>((n * kTile + kBlock - 1) / kBlock);
}

template <int K, int V, int P>
void launch_upsert_first(const UpsertParams& p, cudaStream_t s, int p_lab = 0);

// The LRU assign's kernel (assign_lru_kernel) serves the op when its rows are all in HBM (hybrid tables take the
// copiers' passes; a first-writer set, if the scratch has one, is not used: the kernel is faster on Zipf keys than the
// set's first pass). `mode` may carry the op's private override in bits 4-7 from kUpsertModeLabShift (_upsert_lab
// bits 4-7): 1 = the copiers' passes (as before this kernel; A/B timing); other values: the kernel.
template <int P>
inline bool uses_assign_lru_kernel(const UpsertParams& p) {
  const int v = (p.mode >> (kUpsertModeLabShift + 4)) & 15;
  const int mode = p.mode & ((1 << kUpsertModeLabShift) - 1);
  return P == kPolicyLru && mode == kAssign && p.host.ops == nullptr && !p.first_pass_only && !p.insert_pass_only &&
         v != 1;
}
template <int K, int V>
void launch_assign_lru(const UpsertParams& p, cudaStream_t s) {
  detail::begin_op_kernel<K, V, kPolicyLru><<<1, 32, 0, s>>>(p.t.counters, p.stats, p.n > 0 ? pending_count(p) : nullptr,
                                                             nullptr, p.n, nullptr);
  check_launch("begin_op");
  DYNAMICEMB_TABLE_PHASE_HOOK(s);
  if (p.n == 0) return;
  const unsigned grid = static_cast<unsigned>((p.n * kTile + kAssignBlock - 1) / kAssignBlock);
  launch_upsert_kernel(p.pdl, assign_lru_kernel<K, V>, grid, kAssignBlock, s, p);
  check_launch("assign");
  DYNAMICEMB_TABLE_PHASE_HOOK(s);
}

template <int K, int V, int P>
void launch_lookup(const LookupParams& p, void* stream) {
  if (p.n == 0) return;
  lookup_kernel<K, V, P><<<grid_for_tiles(p.n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("lookup");
}
template <int K, int V, int P>
void launch_upsert(const UpsertParams& p_op, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // A private override of the insert pass's schedule (for A/B timing) rides in mode's bits from
  // kUpsertModeLabShift (insert_schedule).
  UpsertParams p = p_op;
  p.mode &= (1 << kUpsertModeLabShift) - 1;
  if (p.n > 0 && p.pending == nullptr)
    throw std::runtime_error("dynamicemb table: upsert needs a pending scratch of 2n + kPendingExtra int64");
  if (uses_assign_lru_kernel<P>(p_op)) {
    launch_assign_lru<K, V>(p, s);
    return;
  }
  if (!p.insert_pass_only) launch_upsert_first<K, V, P>(p, s, p_op.mode);
  if (p.n == 0 || p.first_pass_only) return;
  const unsigned cap = ((p_op.mode >> kUpsertModeLabShift) & 8) ? insert_grid_cap() / 2 : insert_grid_cap();
  const unsigned grid = std::min<unsigned>(grid_for_tiles(p.n), cap);
  const InsertSchedule sched = insert_schedule(p_op.mode);
  if (sched == kScheduleStatic)
    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleStatic>, grid, kBlock, s, p);
  else if (sched == kScheduleDynamicWide)
    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamicWide>, grid, kBlock, s, p);
  else
    launch_upsert_kernel(p.pdl, upsert_insert_kernel<K, V, P, kScheduleDynamic>, grid, kBlock, s, p);
  check_launch("upsert insert pass");
  DYNAMICEMB_TABLE_PHASE_HOOK(s);
}
// begin_op and the first pass of an upsert.
template <int K, int V, int P>
void launch_upsert_first(const UpsertParams& p, cudaStream_t s, int p_lab) {
  const int family = main_family(p.mode);
  // The LRU row copiers with the first-writer set (the op's pending scratch has its tail; all-HBM tables):
  // begin_op samples the batch and chooses the set (detail::kDedupSamples); dedup_clear zeroes it when chosen.
  const bool dedup = P == kPolicyLru && family == kFamilyCopy && p.n > 0 &&
                     p.pending_words > 2 * p.n + kPendingExtra && p.host.ops == nullptr;
  unsigned long long* counts = p.n > 0 ? pending_count(p) : nullptr;
  unsigned long long* set = dedup ? dedup_set(p) : nullptr;
  const int64_t w = dedup ? static_cast<int64_t>(dedup_mask(p)) + 1 : 0;  // the set's words
  unsigned long long* choice = dedup ? dedup_choice(p) : nullptr;
  detail::begin_op_kernel<K, V, P><<<1, dedup ? detail::kBeginBlock : 32, 0, s>>>(
      p.t.counters, p.stats, counts, dedup ? p.keys : nullptr, p.n, choice);
  if (dedup) {
    const int64_t blocks = std::max<int64_t>(1, w / (2 * detail::kBeginBlock * 8));  // >= 8 stores per thread
    launch_upsert_kernel(p.pdl, detail::dedup_clear_kernel<K, V, P>,
                         static_cast<unsigned>(std::min<int64_t>(blocks, insert_grid_cap())), detail::kBeginBlock, s,
                         choice, set, w);
  }
  check_launch("begin_op");
  DYNAMICEMB_TABLE_PHASE_HOOK(s);
  if (p.n == 0) return;
  (void)p_lab;
  constexpr int kInitBlock = kMainBlock<kFamilyInit>;  // (= kMainBlock<kFamilyInitConst>)
  const unsigned grid_init = static_cast<unsigned>((p.n * kTile + kInitBlock - 1) / kInitBlock);
  // The default table (buckets of <= 128 slots, all rows in HBM) takes the first pass compiled for it (kQPlain).
  // All-HBM: no host rows, and a claim order that is the probe order alone (hbm_slots B, or 0: every slot in the
  // same part; a CUDA table given 0 < hbm_slots < B keeps the general instance's split claim order).
  const bool all_hbm = p.host.ops == nullptr && p.t.values_host == nullptr &&
                       (p.t.hbm_slots == 0 || p.t.hbm_slots >= p.t.bucket_capacity);
  const bool plain = p.t.bucket_capacity <= 128 && all_hbm;
#if DYNAMICEMB_TABLE_FIRST_LAB
  // q: the instance's Q (bits 12-15 of the lab value); bit 8 of the lab value: the general instance (Q = 0).
  int q = (p_lab >> (kUpsertModeLabShift + 12)) & 15;
  const bool general = ((p_lab >> (kUpsertModeLabShift + 8)) & 1) != 0;
  if (p.t.bucket_capacity > 128) q &= ~4;
  if (!all_hbm) q &= ~8;
  if ((q != 0 || general) && (family == kFamilyCopy || (family == kFamilyInit && p.init.kind == kInitConstant &&
                                           p.init.init_cols < 0)) && !dedup) {
    const auto go = [&](auto qc) {
      constexpr int Q = decltype(qc)::value;
      if (family == kFamilyCopy) {
        constexpr int b = kMainBlockQ<kFamilyCopy, Q>;
        launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyCopy, Q>,
                             static_cast<unsigned>((p.n * kTile + b - 1) / b), b, s, p);
      } else {
        constexpr int b = kMainBlockQ<kFamilyInitConst, Q>;
        launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyInitConst, Q>,
                             static_cast<unsigned>((p.n * kTile + b - 1) / b), b, s, p);
      }
    };
    // The values compiled in: 2, 4, 8, 6, 10, 12 and 14 (= the product's kQPlain); others (and `general`) run the
    // general instance (Q = 0).
    if (q == 2) go(std::integral_constant<int, 2>{});
    else if (q == 4) go(std::integral_constant<int, 4>{});
    else if (q == 8) go(std::integral_constant<int, 8>{});
    else if (q == 6) go(std::integral_constant<int, 6>{});
    else if (q == 10) go(std::integral_constant<int, 10>{});
    else if (q == 12) go(std::integral_constant<int, 12>{});
    else if (q == 14) go(std::integral_constant<int, 14>{});
    else go(std::integral_constant<int, 0>{});
    check_launch("upsert first pass");
    DYNAMICEMB_TABLE_PHASE_HOOK(s);
    return;
  }
#endif
  if (family == kFamilyInit && p.init.kind == kInitConstant && p.init.init_cols < 0) {
    if (plain)
      launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyInitConst, kQPlain>, grid_init, kInitBlock, s, p);
    else
      launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyInitConst>, grid_init, kInitBlock, s, p);
  } else if (family == kFamilyInit) {
    launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyInit>, grid_init, kInitBlock, s, p);
  } else if (family == kFamilyCopy && dedup) {
    if constexpr (P == kPolicyLru)
      launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyCopyDedup>, grid_for_tiles(p.n), kBlock, s, p);
  } else if (family == kFamilyCopy) {
    if (plain)
      launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyCopy, kQPlain>, grid_for_tiles(p.n), kBlock, s, p);
    else
      launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyCopy>, grid_for_tiles(p.n), kBlock, s, p);
  } else {
    launch_upsert_kernel(p.pdl, upsert_main_kernel<K, V, P, kFamilyOther>, grid_for_tiles(p.n), kBlock, s, p);
  }
  check_launch("upsert first pass");
  DYNAMICEMB_TABLE_PHASE_HOOK(s);
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
