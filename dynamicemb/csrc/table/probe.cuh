// The scored hash table's bucket probe, written once for the device: key-word accesses (claim, lock, publish),
// digest matching, a key's home bucket, the read-only and the concurrent probe, the free-slot claim in probe
// order, the hit lock and the bucket scan under the eviction lock. Used by the table's kernels
// (table_kernels.cuh) and, for its primitives (key words, digests, home), by the lookup's multi-table insert
// (dynamicemb/csrc/lookup/insert_kernels.cu, which walks buckets with 8-lane tiles in its own passes). The
// concurrency protocol these implement is described at the top of table_kernels.cuh.
#pragma once

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {
namespace cg = cooperative_groups;

// 4 lanes per key (measured on H200, dim 32, 1M keys: against 8 lanes, export_batch 4.6 -> 7.2 billion/s, the
// other ops within +-5%).
constexpr int kTile = 4;
constexpr int kMaxBucket = 256;  // bucket_capacity in [16, 256]
constexpr int kMaxRounds = kMaxBucket / (16 * kTile);  // digest chunk rounds per lane
using Tile = cg::thread_block_tile<kTile, cg::thread_block>;

// ---------------------------------------------------------------- key words and digests
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
// Publishes a key right after a release operation of the same thread (the bucket lock's release store): a
// strong relaxed store, ordered after the writes before that release by the release's fence.
__device__ __forceinline__ void publish_key_after_release(void* keys, int64_t slot, uint64_t key) {
  unsigned long long* p = reinterpret_cast<unsigned long long*>(keys) + slot;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(key) : "memory");
}
// Claims a free slot (EMPTY -> LOCKED). Relaxed: nothing of the slot is read after the claim, and the claimer's
// writes are ordered before the key by the release store that publishes it.
__device__ __forceinline__ uint64_t claim_free(void* keys, int64_t slot) {
  return atomicCAS(reinterpret_cast<unsigned long long*>(keys) + slot, kEmptyKey, kLockedKey);
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

// 16-bit mask of bytes of `c` equal to `d`, by a zero-byte test (`__vcmpeq4` is emulated on sm_90: about twice the
// instructions): x = word ^ digest; ~(((x & 0x7f7f7f7f) + 0x7f7f7f7f) | x | 0x7f7f7f7f) has 0x80 in each zero byte of
// x and nothing else (no carry crosses a byte); one multiply by 0x00204081 moves bits 7 / 15 / 23 / 31 to bits 28-31
// (the shifted copies land on distinct bits, so nothing carries into them).
__device__ __forceinline__ uint32_t match16(uint4 c, uint32_t d4) {
  const uint32_t w[4] = {c.x, c.y, c.z, c.w};
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t x = w[j] ^ d4;
    const uint32_t z = ~(((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x | 0x7f7f7f7fu);
    m |= ((z * 0x00204081u) >> 28) << (4 * j);
  }
  return m;
}

__device__ __forceinline__ uint4 load_digests(const uint8_t* digests, int64_t base, int chunk, bool coherent) {
  const uint4* p = reinterpret_cast<const uint4*>(digests + base) + chunk;
  return coherent ? __ldcg(p) : __ldg(p);
}

// The lane's digest chunks of rounds g and g + 1 of a bucket (the lane's chunks are round * kTile + lane),
// loaded before either is used so that both loads are in flight together (one memory latency per pair instead
// of one per round); chunks past the bucket read as zero with `valid` clear.
struct ChunkPair {
  uint4 d[2];
  bool valid[2];
};
__device__ __forceinline__ ChunkPair load_chunk_pair(const Tile& tile, const uint8_t* digests, int64_t base,
                                                     int chunks, int g, bool coherent) {
  ChunkPair r;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int c = (g + e) * kTile + static_cast<int>(tile.thread_rank());
    r.valid[e] = c < chunks;
    r.d[e] = make_uint4(0, 0, 0, 0);
    if (r.valid[e]) r.d[e] = load_digests(digests, base, c, coherent);
  }
  return r;
}

// ---------------------------------------------------------------- probe, claim, evict scan
// Where a key lives: its bucket, the bucket's first slot, the probe start inside it and its digest. Ref: anything
// with num_buckets and bucket_capacity (TableRef; the lookup's TableMeta).
struct KeyHome {
  int64_t base;    // first slot of the bucket
  int start;       // probe start inside the bucket
  uint32_t d4;     // digest replicated into 4 bytes
  int64_t bucket;  // bucket index (its eviction lock)
};
template <typename Ref>
__device__ __forceinline__ KeyHome home_of(const Ref& t, uint64_t key) {
  const uint64_t h = accel_hash_key(key);
  KeyHome r;
  r.bucket = static_cast<int64_t>(bucket_of_hash(h, static_cast<uint64_t>(t.num_buckets)));
  r.base = r.bucket * t.bucket_capacity;
  r.start = start_of_hash(h, static_cast<int>(t.bucket_capacity));
  r.d4 = 0x01010101u * digest_of_hash(h);
  return r;
}

// Read-only probe (no concurrent writers): slot of `key` or -1.
__device__ __forceinline__ int64_t probe_readonly(const Tile& tile, const TableRef& t, uint64_t key,
                                                  const KeyHome& h) {
  const int chunks = t.bucket_capacity / 16;
#pragma unroll
  for (int g = 0; g < kMaxRounds; g += 2) {
    if (g * kTile >= chunks) break;
    const ChunkPair cp = load_chunk_pair(tile, t.digests, h.base, chunks, g, false);
    int64_t found = -1;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      uint32_t m = cp.valid[e] ? match16(cp.d[e], h.d4) : 0u;
      const int c = (g + e) * kTile + static_cast<int>(tile.thread_rank());
      while (m) {
        const int i = __ffs(m) - 1;
        m &= m - 1;
        const int64_t slot = h.base + c * 16 + i;
        if (static_cast<uint64_t>(reinterpret_cast<const int64_t*>(t.keys)[slot]) == key) found = slot;
      }
    }
    const uint32_t b = tile.ballot(found >= 0);
    if (b) return tile.shfl(found, __ffs(b) - 1);
  }
  return -1;
}

// Candidate free slots of a bucket (digest == empty digest): round r's 16-bit mask in half r % 2 of word r / 2
// (packed: fewer registers live across the first pass's claims).
struct FreeMasks {
  uint32_t w[kMaxRounds / 2];
  __device__ __forceinline__ uint32_t get(int r) const { return (w[r / 2] >> (16 * (r & 1))) & 0xffffu; }
};

// What the lock-taking probe's CAS settled (probe_concurrent<true>): nothing (the caller locks the returned slot,
// as after a plain probe), the tile holds the slot LOCKED, or the CAS met the key's slot LOCKED (a duplicate of this
// batch holds it: the outcome of the caller's own CAS seeing LOCKED).
enum HitLock : int { kHitLockNone = 0, kHitLockOwned = 1, kHitLockHeld = 2 };

// Concurrent probe (upsert kernels): slot holding `key` (seen after LOCKED cleared, acquired) or -1, and each
// lane's masks of candidate free slots (digest == empty digest), one 16-bit mask per round. All digest chunks are
// loaded before any key is read (independent loads in flight together).
// kLockHit (row writers whose every hit locks its slot: the first pass of assign / insert_or_assign): a digest
// match's key word is read relaxed as in the plain probe, and a slot read holding `key` is locked at once by the
// acquire CAS (key -> LOCKED) instead of an acquire load and then the caller's CAS: one round trip fewer per hit. A
// slot read LOCKED is never CASed, so a hot key's duplicates do not hammer its lock word (they back off as in the
// plain probe). *lock: what the CAS settled (HitLock). Holders never wait: a tile that took its key's slot, or met
// it held by a duplicate, returns at once (the key is in one slot only); one whose CAS settled nothing waits out the
// slots it read LOCKED (no second load of the others). A key whose digest is the empty digest matches every free
// slot: loads only. may_insert false (the caller never claims a free slot for a missing key): the candidate free
// slot's key word (below) is not read. yield_waited (kLockHit): a key found only after waiting its slot out (read
// LOCKED, then the key: a duplicate of this batch held it meanwhile) reports kHitLockHeld, as a CAS that met it held.
// take_lock false (kLockHit; a caller that is its key's only writer in this pass): a slot read holding the key is
// returned as kHitLockOwned without the CAS (nothing else locks a present key's slot then).
// R: digest chunk rounds per lane compiled in (kMaxRounds; 2 where the caller knows the bucket has <= 128 slots).
template <bool kLockHit = false, int R = kMaxRounds>
__device__ __forceinline__ int64_t probe_concurrent(const Tile& tile, const TableRef& t, uint64_t key,
                                                    const KeyHome& h, FreeMasks& free_mask, bool may_insert = true,
                                                    int* lock = nullptr, bool yield_waited = false,
                                                    bool take_lock = true) {
  const int chunks = t.bucket_capacity / 16;
  const uint32_t e4 = 0x01010101u * empty_digest();
  const bool lock_hit = kLockHit && h.d4 != e4;
  const bool relaxed_first = h.d4 == e4;
  uint32_t match[R];
#pragma unroll
  for (int g = 0; g < R; g += 2) {
    free_mask.w[g / 2] = 0;
    match[g] = match[g + 1] = 0;
    if (g * kTile >= chunks) continue;
    const ChunkPair cp = load_chunk_pair(tile, t.digests, h.base, chunks, g, true);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (!cp.valid[e]) continue;
      free_mask.w[g / 2] |= match16(cp.d[e], e4) << (16 * e);
      match[g + e] = match16(cp.d[e], h.d4);
    }
  }
  // The lane's candidate free slot, when it has exactly one (at a full bucket: a slot of a key whose digest is the
  // empty digest, ~1 per 2 buckets): its key word is read now, in the round trip of the key loads below, and the
  // slot dropped from the candidates if it holds another key (an occupied slot never becomes free during an
  // upsert), so that a miss at a full bucket defers without a CAS per such slot. EMPTY, LOCKED (a claim in
  // progress, maybe a duplicate's) and the key itself stay candidates: the claim's CAS settles them as before.
  int cand_bit = -1;  // 16 r + i of the lane's one candidate
  uint64_t cand_key = kEmptyKey;
  if (may_insert && __popc(free_mask.w[0]) + (R > 2 ? __popc(free_mask.w[1]) : 0) == 1) {
    const uint32_t w0 = free_mask.w[0];
    const int wb = w0 ? __ffs(w0) - 1 : 32 + __ffs(free_mask.w[R > 2 ? 1 : 0]) - 1;
    cand_bit = wb;
    const int c = (wb >> 4) * kTile + static_cast<int>(tile.thread_rank());
    cand_key = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + h.base + c * 16 + (wb & 15));
  }
  const auto drop_taken_candidate = [&] {
    if (cand_bit >= 0 && cand_key != kEmptyKey && cand_key != kLockedKey && cand_key != key)
      free_mask.w[cand_bit >> 5] &= ~(1u << (cand_bit & 31));
  };
  int64_t found = -1;
  if (lock_hit) {
    int64_t held = -1;
    bool unsettled = false;  // a LOCKED slot of unknown key (or a CAS that met another key): the loads decide
#pragma unroll
    for (int r = 0; r < R; ++r) {
      uint32_t m = match[r];
      uint32_t wait = 0;  // the matches left to the loads below: read LOCKED (or a CAS that met another key)
      const int c = r * kTile + static_cast<int>(tile.thread_rank());
      while (m) {
        const int i = __ffs(m) - 1;
        m &= m - 1;
        const int64_t slot = h.base + c * 16 + i;
        const uint64_t k = __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + slot);
        bool left = k == kLockedKey;
        if (k == key) {
          // Keys do not leave slots in the first pass: the CAS sees the key (locked now) or LOCKED (a duplicate
          // locked it since the load).
          const uint64_t old = take_lock ? cas_key(t.keys, slot, key, kLockedKey) : key;
          if (old == key) found = slot;
          else if (old == kLockedKey) held = slot;
          else left = true;
        }
        if (left) wait |= 1u << i;
      }
      // A slot read holding another key keeps it (first pass): only these can still turn out to be the key's.
      match[r] = wait;
      unsettled |= wait != 0;
    }
    const uint32_t b = tile.ballot(found >= 0);
    if (b) {
      *lock = kHitLockOwned;
      return tile.shfl(found, __ffs(b) - 1);
    }
    const uint32_t bh = tile.ballot(held >= 0);
    if (bh) {
      *lock = kHitLockHeld;
      return tile.shfl(held, __ffs(bh) - 1);
    }
    *lock = kHitLockNone;
    if (!tile.any(unsettled)) {
      drop_taken_candidate();
      return -1;
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t m = match[r];
    const int c = r * kTile + static_cast<int>(tile.thread_rank());
    while (m) {
      const int i = __ffs(m) - 1;
      m &= m - 1;
      const int64_t slot = h.base + c * 16 + i;
      // One acquire load per match (a hit's row is read after it: one round trip, not a relaxed compare and then
      // an acquire load); only a LOCKED slot needs the wait. A key whose digest equals the empty digest matches
      // every free slot: relaxed loads (they pipeline; acquire loads do not), then the acquire wait for our key.
      // (After the lock-taking loop above, the matches left were read LOCKED: straight to the wait.)
      const uint64_t k = lock_hit ? kLockedKey
                         : relaxed_first ? __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + slot)
                                         : ld_key(t.keys, slot);
      if ((k == key && !relaxed_first) || ((k == key || k == kLockedKey) && wait_unlocked(t.keys, slot) == key))
        found = slot;
    }
  }
  const uint32_t b = tile.ballot(found >= 0);
  if (b) {
    if (lock_hit && yield_waited) *lock = kHitLockHeld;
    return tile.shfl(found, __ffs(b) - 1);
  }
  drop_taken_candidate();
  return -1;
}

// Next free-slot candidate in claim order, removing it from the masks; -1 if none. Claim order: the probe order
// (rotated distance from start); a hybrid table's HBM slots (each bucket's first hbm_slots, table_types.h
// table_row) before its host slots, each part in probe order, so that host rows hold only a full HBM part's
// overflow. All-HBM tables (hbm_slots == B) have one part. Slot-major host rows (host_run != 0) are claimed
// lowest slot first (host_first_fit): a bucket's host rows then sit in the first runs of the layout.
// R as probe_concurrent's; kAllHbm: the caller knows the table is all-HBM (hbm_slots == B, no host rows), so the
// claim order is the probe order alone.
template <int R = kMaxRounds, bool kAllHbm = false>
__device__ __forceinline__ int64_t next_free_candidate(const Tile& tile, const TableRef& t, const KeyHome& h,
                                                       FreeMasks& free_mask) {
  const int B = t.bucket_capacity;
  const int hs = static_cast<int>(t.hbm_slots);
  const bool ff = !kAllHbm && host_first_fit(t.values_host != nullptr, t.host_run);
  const int start_chunk = h.start >> 4;
  const uint32_t from_start = 0xffffu << (h.start & 15);
  int best = 2 * B;  // rotated distance (first fit: the slot), + B for a host slot
  int best_r = 0, best_i = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint32_t m = free_mask.get(r);
    if (m == 0) continue;
    const int c = r * kTile + static_cast<int>(tile.thread_rank());
    if (kAllHbm) {
      const uint32_t after = c == start_chunk ? (m & from_start) : 0u;
      const int i = __ffs(after ? after : m) - 1;
      const int dist = (c * 16 + i - h.start) & (B - 1);
      if (dist < best) { best = dist; best_r = r; best_i = i; }
      continue;
    }
    // the chunk's HBM slots (bits below hs - 16 c): the free ones first
    const int lo = hs - c * 16;
    const uint32_t hbm = lo >= 16 ? 0xffffu : (lo <= 0 ? 0u : (1u << lo) - 1u);
    const uint32_t part = (m & hbm) ? (m & hbm) : m;
    const bool host = (m & hbm) == 0;
    // A chunk's slots are in probe order from its lowest bit, except in the start's chunk, where the slots at or
    // after the start come first (one ffs per chunk instead of a loop over its free slots).
    const uint32_t after = c == start_chunk && !(ff && host) ? (part & from_start) : 0u;
    const int i = __ffs(after ? after : part) - 1;
    const int dist = host ? B + (ff ? c * 16 + i : (c * 16 + i - h.start) & (B - 1))
                          : (c * 16 + i - h.start) & (B - 1);
    if (dist < best) { best = dist; best_r = r; best_i = i; }
  }
  int key = (best << 8) | static_cast<int>(tile.thread_rank());
  int win = cg::reduce(tile, key, cg::less<int>());
  if ((win >> 8) >= 2 * B) return -1;
  if ((win & 0xff) == static_cast<int>(tile.thread_rank())) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r == best_r) free_mask.w[r / 2] &= ~(1u << (best_i + 16 * (r & 1)));
  }
  return h.base + (kAllHbm ? ((win >> 8) + h.start) & (B - 1) : claim_position(win >> 8, h.start, B, ff));
}

// Claims the first free slot of `key`'s bucket in probe order (EMPTY -> LOCKED) from the probe's free masks.
// Returns the claimed slot; -1 when the bucket has no free slot left; or, when a duplicate of this batch got
// there first, the slot holding `key` with `dup` set. Two inserters of one key walk the same order, so the
// second meets the first's slot (LOCKED -> wait -> the key); slots never become free during an upsert.
__device__ __forceinline__ int64_t claim_in_probe_order(const Tile& tile, const TableRef& t, const KeyHome& h,
                                                        FreeMasks& free_mask, uint64_t key,
                                                        bool& dup) {
  dup = false;
  while (true) {
    const int64_t cand = next_free_candidate(tile, t, h, free_mask);
    if (cand < 0) return -1;
    uint64_t seen = 0;
    if (tile.thread_rank() == 0) {
      seen = claim_free(t.keys, cand);
      if (seen == kLockedKey) seen = wait_unlocked(t.keys, cand);
    }
    seen = tile.shfl(seen, 0);
    if (seen == kEmptyKey) return cand;
    if (seen == key) {
      dup = true;
      return cand;
    }
  }
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

// The bucket's eviction lock. Acquire CAS to take it, release store to free it: the critical section's writes
// (made visible to the tile's lead by a tile.sync) reach the next holder through the release/acquire pair. (This
// replaced atomicCAS / atomicExch with a __threadfence each: fence.sc compiles to MEMBAR.SC.GPU, the acquire CAS
// to the atomic plus an L1 invalidate and the release store to MEMBAR.ALL.GPU plus the store.)
__device__ __forceinline__ bool try_lock_bucket(int32_t* lock) {
  int32_t old;
  asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], 0, 1;" : "=r"(old) : "l"(lock) : "memory");
  return old == 0;
}
__device__ __forceinline__ void unlock_bucket(int32_t* lock) {
  asm volatile("st.release.gpu.global.b32 [%0], 0;" : : "l"(lock) : "memory");
}

// Starts moving a bucket's digest and score lines (1.1 KB for 128 slots) into L2 without waiting for them (no
// registers held): issued before the bucket lock's CAS, so that the scan under the lock reads from L2 instead of
// DRAM (one DRAM round trip of the eviction path's chain overlaps the lock's). A hint only: the scan's loads
// after the lock's acquire read the coherent values (L2 is the point of coherence).
__device__ __forceinline__ void prefetch_bucket_l2(const Tile& tile, const TableRef& t, int64_t base) {
  const char* sc = reinterpret_cast<const char*>(t.scores + base);
  const int64_t score_bytes = static_cast<int64_t>(t.bucket_capacity) * 8;
  for (int64_t off = static_cast<int64_t>(tile.thread_rank()) * 128; off < score_bytes; off += kTile * 128)
    asm volatile("prefetch.global.L2 [%0];" : : "l"(sc + off));
  const char* dg = reinterpret_cast<const char*>(t.digests + base);
  for (int64_t off = static_cast<int64_t>(tile.thread_rank()) * 128; off < t.bucket_capacity; off += kTile * 128)
    asm volatile("prefetch.global.L2 [%0];" : : "l"(dg + off));
}

// ---------------------------------------------------------------- eviction scan under the bucket lock
// The victim is the slot of minimum (score, digest, key) (table_types.h evicts_before): no slot position takes part,
// so an all-HBM and a hybrid table (whose keys sit in other slots) evict the same key. The scan reads the bucket's
// digests and scores only (1.1 KB for 128 slots); the key words of slots whose digest is the key's are read after
// it, in the round trip that claims the victim (evict_insert), and, rarely, where two slots tie in (score, digest)
// (victim_exact).
//
// Rank of a slot without its key: score << 8 | digest, in the eviction order while scores are below 2^56 (LRU
// clocks, LFU counts, epochs below 2^24); a bucket holding a larger score is decided by victim_exact. Two
// instructions: the high word is a funnel shift of the score, the low word a byte permute that puts the digest
// under the score's low 24 bits.
__device__ __forceinline__ uint64_t evict_rank(uint32_t sc_lo, uint32_t sc_hi, uint32_t dword, int byte) {
  const uint32_t lo = __byte_perm(dword, sc_lo, 0x6540u | static_cast<uint32_t>(byte));
  const uint32_t hi = __funnelshift_l(sc_lo, sc_hi, 8);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
// The least rank of a set of slots: its bucket-local slot (-1: none) and whether another slot of the set has the
// same rank (then only the key words can decide: victim_exact).
struct EvictCand {
  uint64_t rank;
  int idx;
  bool tie;
};
__device__ __forceinline__ EvictCand cand_min(const EvictCand& a, const EvictCand& b) {
  const bool lt = b.rank < a.rank;
  const bool eq = b.rank == a.rank;
  return EvictCand{lt ? b.rank : a.rank, lt ? b.idx : a.idx, lt ? b.tie : (a.tie || eq)};
}
__device__ __forceinline__ uint32_t digest_word(const uint4& d, int j) {
  return j < 4 ? d.x : (j < 8 ? d.y : (j < 12 ? d.z : d.w));
}

// One 16-slot chunk's digests (16 bytes) and scores (8 x 16 bytes), all nine loads issued before any is used
// (coherent: L2, where the eviction path prefetched the bucket). Slot j's score: words (x, y) of ss[j / 2] for even
// j, (z, w) for odd j.
struct ChunkScores {
  uint4 d;
  uint4 ss[8];
};
__device__ __forceinline__ ChunkScores load_chunk_scores(const TableRef& t, int64_t base, int c) {
  ChunkScores r;
  r.d = load_digests(t.digests, base, c, true);
  const uint4* sp = reinterpret_cast<const uint4*>(t.scores + base + c * 16);
#pragma unroll
  for (int b = 0; b < 8; ++b) r.ss[b] = __ldcg(sp + b);
  return r;
}

// The least rank of 16 slots from their digest words (slot j's digest: byte j & 3 of dw[j >> 2]) and score pairs
// (slot j's score: words (x, y) of ss[j / 2] for even j, (z, w) for odd j); idx is j. ORs the scores' high words
// into `big`.
__device__ __forceinline__ EvictCand min_rank16(const uint32_t (&dw)[4], const uint4 (&ss)[8], uint32_t& big) {
  uint32_t hi_or = 0, lo_or = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    hi_or |= ss[b].y | ss[b].w;
    lo_or |= ss[b].x | ss[b].z;
  }
  big |= hi_or;
  EvictCand e[8];
  if ((hi_or | (lo_or >> 24)) == 0) {
    // Every score of the 16 is below 2^24 (LRU clocks, small LFU counts): the rank score << 8 | digest fits
    // 32 bits, so the least rank is a tree of 32-bit mins and its slot and tie come from one equality mask
    // (about half the instructions of the 64-bit tree below, which tracks index and tie at every node).
    uint32_t rk[16];
#pragma unroll
    for (int j = 0; j < 16; ++j)
      rk[j] = __byte_perm(dw[j >> 2], (j & 1) ? ss[j / 2].z : ss[j / 2].x, 0x6540u | static_cast<uint32_t>(j & 3));
    uint32_t m[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) m[b] = min(rk[2 * b], rk[2 * b + 1]);
#pragma unroll
    for (int w = 4; w >= 1; w /= 2)
#pragma unroll
      for (int b = 0; b < w; ++b) m[b] = min(m[b], m[b + w]);
    uint32_t eq = 0;
#pragma unroll
    for (int j = 0; j < 16; ++j) eq |= (rk[j] == m[0] ? 1u : 0u) << j;
    return EvictCand{m[0], __ffs(eq) - 1, (eq & (eq - 1)) != 0};
  }
#pragma unroll
  for (int b = 0; b < 8; ++b) {  // slots 2b (x, y) and 2b + 1 (z, w)
    const uint32_t d = dw[b >> 1];
    const uint64_t r0 = evict_rank(ss[b].x, ss[b].y, d, (2 * b) & 3);
    const uint64_t r1 = evict_rank(ss[b].z, ss[b].w, d, (2 * b + 1) & 3);
    const bool lt = r1 < r0;
    e[b] = EvictCand{lt ? r1 : r0, 2 * b + (lt ? 1 : 0), r1 == r0};
  }
#pragma unroll
  for (int w = 4; w >= 1; w /= 2)
#pragma unroll
    for (int b = 0; b < w; ++b) e[b] = cand_min(e[b], e[b + w]);
  return e[0];
}

struct BucketScan {
  EvictCand min;  // the lane's least rank over its slots
  uint32_t big;   // OR of the high words of the lane's scores: a score >= 2^56 when big >> 24 != 0
  uint64_t look;  // the lane's slots whose digest is the key's: bit 16 i + j = slot j of the lane's chunk i
};
// Lane l takes the 16-slot chunks l, l + kTile, ...: one 16-byte digest load and eight 16-byte score loads per chunk
// (load_chunk_scores), then the chunk's least rank (min_rank16), merged into the lane's. No key
// word is read here: the caller reads those of `look` together with its claim of the victim.
// Why digests and scores suffice under the lock: the bucket has no free slot (a key comes here only after its
// probe found none, and slots never become free during an upsert), and only the lock holder changes which key a
// slot holds; a slot LOCKED by a hit (a row writer; its holder never waits) keeps its key and digest, and its score
// may change: the claim re-checks the victim's score (a stale score costs a rescan, never a wrong eviction).
__device__ __forceinline__ BucketScan scan_bucket(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4) {
  const int chunks = t.bucket_capacity / 16;
  BucketScan r{EvictCand{~0ull, -1, false}, 0u, 0ull};
  // One chunk at a time (all of a lane's loads at once would cost the insert pass its occupancy); the caller
  // prefetched the whole bucket into L2 before taking the lock (prefetch_bucket_l2).
  int i = 0;
#pragma unroll 1
  for (int c = static_cast<int>(tile.thread_rank()); c < chunks; c += kTile, ++i) {
    const ChunkScores cs = load_chunk_scores(t, base, c);
    r.look |= static_cast<uint64_t>(match16(cs.d, d4)) << (16 * i);
    const uint32_t dw[4] = {cs.d.x, cs.d.y, cs.d.z, cs.d.w};
    EvictCand e = min_rank16(dw, cs.ss, r.big);
    e.idx += c * 16;  // chunk-local -> bucket-local slot
    r.min = cand_min(r.min, e);
  }
  return r;
}

// The digests of the slots whose scores lane l holds in scan_bucket_wide, from the lanes' own chunks: lane l holds d,
// the 16 digests of its chunk (the group's slots 16 l ... 16 l + 15); returns w[s] = the digests of the group's slots
// 16 s + 2 l, 16 s + 2 l + 1, 16 s + 8 + 2 l, 16 s + 8 + 2 l + 1 (bytes 0-3), those of its score loads 2 s and 2 s + 1.
// Round r sends lane q = l ^ r the half-words it needs (words q / 2 and 2 + q / 2, half q & 1: one byte permute),
// three shuffles in all; r[k] arrives from lane l ^ k, so w[s] = r[s ^ l] (two levels of selects).
__device__ __forceinline__ void digest_transpose(const Tile& tile, const uint4& d, uint32_t (&w)[4]) {
  const int l = static_cast<int>(tile.thread_rank());
  const bool l1 = (l & 2) != 0, l0 = (l & 1) != 0;
  const uint32_t a0 = l1 ? d.y : d.x, a1 = l1 ? d.x : d.y;  // word q / 2 for r < 2 / r >= 2
  const uint32_t b0 = l1 ? d.w : d.z, b1 = l1 ? d.z : d.w;  // word 2 + q / 2
  const uint32_t h0 = l0 ? 0x7632u : 0x5410u, h1 = l0 ? 0x5410u : 0x7632u;  // half q & 1 for even / odd r
  uint32_t r[4];
  r[0] = __byte_perm(a0, b0, h0);
  r[1] = tile.shfl_xor(__byte_perm(a0, b0, h1), 1);
  r[2] = tile.shfl_xor(__byte_perm(a1, b1, h0), 2);
  r[3] = tile.shfl_xor(__byte_perm(a1, b1, h1), 3);
  const uint32_t t0 = l0 ? r[1] : r[0], t1 = l0 ? r[0] : r[1], t2 = l0 ? r[3] : r[2], t3 = l0 ? r[2] : r[3];
  w[0] = l1 ? t2 : t0;
  w[1] = l1 ? t3 : t1;
  w[2] = l1 ? t0 : t2;
  w[3] = l1 ? t1 : t3;
}

// scan_bucket with the tile's score loads contiguous: a group of 4 chunks (64 slots, 512 bytes of scores) is read by
// 8 loads of 64 contiguous bytes per tile (load b: lane l takes slots 8 b + 2 l and 8 b + 2 l + 1 of the group), so
// each 32-byte sector is requested once and each load touches one line (scan_bucket's lanes read 4 lines per load,
// each sector by two loads). The lane's digest load (its own chunk, as in scan_bucket: the same `look`) is turned
// into the digests of its score slots by digest_transpose. Buckets whose chunks are not a multiple of kTile take
// scan_bucket. Same result as scan_bucket (the least rank over the bucket, its tie and big, the same look).
__device__ __forceinline__ BucketScan scan_bucket_wide(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4) {
  const int chunks = t.bucket_capacity / 16;
  if (chunks % kTile != 0) return scan_bucket(tile, t, base, d4);
  const int l = static_cast<int>(tile.thread_rank());
  BucketScan r{EvictCand{~0ull, -1, false}, 0u, 0ull};
#pragma unroll 1
  for (int i = 0; i * kTile < chunks; ++i) {
    const uint4 d = load_digests(t.digests, base, i * kTile + l, true);
    const uint4* sp = reinterpret_cast<const uint4*>(t.scores + base + 16 * kTile * i) + l;
    uint4 ss[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) ss[b] = __ldcg(sp + kTile * b);
    r.look |= static_cast<uint64_t>(match16(d, d4)) << (16 * i);
    uint32_t dw[4];
    digest_transpose(tile, d, dw);
    EvictCand e = min_rank16(dw, ss, r.big);
    e.idx = 16 * kTile * i + 8 * (e.idx >> 1) + 2 * l + (e.idx & 1);  // j -> bucket-local slot
    r.min = cand_min(r.min, e);
  }
  return r;
}
// Bucket-local slot of bit `bit` of a lane's `look` mask (BucketScan).
__device__ __forceinline__ int look_slot(const Tile& tile, int bit) {
  return ((bit >> 4) * kTile + static_cast<int>(tile.thread_rank())) * 16 + (bit & 15);
}
// The `look` bit of bucket-local slot `idx`, in the lane that owns it (0 in the others).
__device__ __forceinline__ uint64_t look_bit(const Tile& tile, int idx) {
  const int c = idx >> 4;
  return (c % kTile) == static_cast<int>(tile.thread_rank()) ? 1ull << (16 * (c / kTile) + (idx & 15)) : 0ull;
}

// The tile's least rank (every lane gets the same rank, tie and big; idx agrees unless tie): shuffles of the rank
// and of one word packing (idx + 1, tie, big).
__device__ __forceinline__ EvictCand tile_min_rank(const Tile& tile, EvictCand m, bool& big) {
#pragma unroll
  for (int o = kTile / 2; o > 0; o >>= 1) {
    const uint32_t pack = static_cast<uint32_t>(m.idx + 1) | (m.tie ? 0x200u : 0u) | (big ? 0x400u : 0u);
    const uint64_t orank = tile.shfl_xor(m.rank, o);
    const uint32_t op = tile.shfl_xor(pack, o);
    m = cand_min(m, EvictCand{orank, static_cast<int>(op & 0x1ffu) - 1, (op & 0x200u) != 0});
    big = big || (op & 0x400u) != 0;
  }
  return m;
}

// The victim by evicts_before itself (a tie of the tile's least rank, or a score >= 2^56 in the bucket): every slot
// of the lane compared by (score, digest), key words read for slots that tie with the lane's best and for each
// lane's best, then the lanes reduced by (score, digest, key). Only after the key words of the key's digest showed
// the key absent: every slot holds another key (LOCKED slots are waited out). Returns the slot and its score.
__device__ __forceinline__ int64_t victim_exact(const Tile& tile, const TableRef& t, int64_t base,
                                                uint64_t& victim_score) {
  const int chunks = t.bucket_capacity / 16;
  int64_t best = -1;
  uint64_t bs = 0, bk = 0;
  uint32_t bd = 0;
  bool bk_read = false;
#pragma unroll 1
  for (int c = static_cast<int>(tile.thread_rank()); c < chunks; c += kTile) {
    const int64_t s0 = base + c * 16;
    const ChunkScores cs = load_chunk_scores(t, base, c);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint64_t sc = (j & 1) ? (static_cast<uint64_t>(cs.ss[j / 2].w) << 32 | cs.ss[j / 2].z)
                                  : (static_cast<uint64_t>(cs.ss[j / 2].y) << 32 | cs.ss[j / 2].x);
      const uint32_t dg = (digest_word(cs.d, j) >> (8 * (j & 3))) & 0xffu;
      if (best < 0 || sc < bs || (sc == bs && dg < bd)) {
        best = s0 + j;
        bs = sc;
        bd = dg;
        bk_read = false;
      } else if (sc == bs && dg == bd) {
        if (!bk_read) bk = wait_unlocked(t.keys, best);
        bk_read = true;
        const uint64_t k = wait_unlocked(t.keys, s0 + j);
        if (k < bk) {
          best = s0 + j;
          bk = k;
        }
      }
    }
  }
  if (best >= 0 && !bk_read) bk = wait_unlocked(t.keys, best);
#pragma unroll
  for (int o = kTile / 2; o > 0; o >>= 1) {
    const int64_t ob = tile.shfl_xor(best, o);
    const uint64_t os = tile.shfl_xor(bs, o), ok = tile.shfl_xor(bk, o);
    const uint32_t od = tile.shfl_xor(bd, o);
    if (ob >= 0 && (best < 0 || evicts_before(os, static_cast<uint8_t>(od), ok, bs, static_cast<uint8_t>(bd), bk))) {
      best = ob;
      bs = os;
      bd = od;
      bk = ok;
    }
  }
  victim_score = bs;
  return best;
}

// Locks an occupied slot for eviction: key -> LOCKED by one exchange (acquire), returning the word replaced. No
// prior load of the key is needed: a slot found LOCKED (a hit's lock) is left LOCKED (the exchange wrote the value
// it held), a key is now held by the caller, who puts it back (publish_key) if it does not evict it.
__device__ __forceinline__ uint64_t lock_victim(void* keys, int64_t slot) {
  uint64_t old;
  unsigned long long* p = reinterpret_cast<unsigned long long*>(keys) + slot;
  asm volatile("atom.acquire.gpu.global.exch.b64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(kLockedKey) : "memory");
  return old;
}

}  // namespace table
}  // namespace dynamicemb
