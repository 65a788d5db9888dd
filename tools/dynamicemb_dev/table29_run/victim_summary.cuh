// Lab (evict_bench only; included by the lab tree that summary_tree.sh makes): a per-bucket victim summary for the
// load-1.0 eviction path, the upper bound of the lever "read a few words instead of the bucket's score array".
//
// Summary of a full 128-slot bucket (16 bytes): the bucket-local slots of its 8 least ranks (rank = score << 8 |
// digest, scores below 2^56 - 1) and `bound`, the least rank of the other 120 slots, when it was built. While no
// score decreases and no slot outside the 8 changes its key (LRU inside one upsert: hits raise a score to the op's
// clock, an eviction replaces one of the 8), every slot outside the 8 keeps a rank >= bound, so when the least
// *current* rank of the 8 is below bound it is the bucket's least rank: the same victim as the full scan. Otherwise
// (bound reached, a score >= 2^56, a bucket that was not full) the full scan runs as before.
//
// Here the summaries are built by vsum_build before each timed op (untimed, every bucket): the insert pass's
// bound when every summary is fresh. A product needs them refreshed off the chain (counted in
// docs/dynamicemb_storage_notes.md, "A per-bucket victim summary").
#pragma once

namespace dynamicemb {
namespace table {

__constant__ uint4* g_vsum;  // (num_buckets) summaries: x, y the 8 slot bytes, (z, w) bound; x = y = ~0: none

constexpr uint32_t kVsumNone = 0xffffffffu;
// Steady-state variant (S = 4): bit 31 of w asks vsum_refresh to rebuild the summary (set by an evictor that found it
// nearly used up or could not use it); the rest of the summary stays usable until then.
constexpr uint32_t kVsumStale = 0x80000000u;
constexpr int kVsumRefreshAt = 3;  // entries below the bound at the eviction (the victim included)

// The eviction scan from a summary `vs` (the same 16 bytes in every lane): the lane's two digest chunks (its `look`
// mask, as scan_bucket), the current score and digest of summary entries 2l and 2l + 1, all issued together (one
// round trip; L2 after prefetch_bucket_l2). False when the summary cannot decide (the caller runs scan_bucket).
__device__ __forceinline__ bool vsum_scan(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4,
                                          const uint4& vs, BucketScan& r, int* remaining = nullptr) {
  if (vs.x == kVsumNone && vs.y == kVsumNone) return false;
  const int l = static_cast<int>(tile.thread_rank());
  const uint32_t w = (l < 2 ? vs.x : vs.y) >> (16 * (l & 1));
  const int i0 = static_cast<int>(w & 0xffu), i1 = static_cast<int>((w >> 8) & 0xffu);
  const uint4 c0 = load_digests(t.digests, base, l, true);
  const uint4 c1 = load_digests(t.digests, base, l + kTile, true);
  const unsigned long long* sp = reinterpret_cast<const unsigned long long*>(t.scores) + base;
  const uint64_t s0 = __ldcg(sp + i0), s1 = __ldcg(sp + i1);
  const uint32_t g0 = __ldcg(t.digests + base + i0), g1 = __ldcg(t.digests + base + i1);
  r.look = static_cast<uint64_t>(match16(c0, d4)) | (static_cast<uint64_t>(match16(c1, d4)) << 16);
  r.big = static_cast<uint32_t>(s0 >> 32) | static_cast<uint32_t>(s1 >> 32);
  const uint64_t r0 = (s0 << 8) | g0, r1 = (s1 << 8) | g1;
  const bool lt = r1 < r0;
  r.min = EvictCand{lt ? r1 : r0, lt ? i1 : i0, r1 == r0};
  bool big = (r.big >> 24) != 0;
  const EvictCand m = tile_min_rank(tile, r.min, big);
  const uint64_t bound = (static_cast<uint64_t>(vs.w & ~kVsumStale) << 32) | vs.z;
  if (remaining) {  // entries still below the bound (the victim among them)
    int c = (r0 < bound ? 1 : 0) + (r1 < bound ? 1 : 0);
    c += tile.shfl_xor(c, 1);
    c += tile.shfl_xor(c, 2);
    *remaining = c;
  }
  return !big && m.rank < bound;
}

// S = 3's prefetches: the digest line beside the lock (lane 0), then, once the summary is in, the 8 entries' score
// sectors (issued after the lock's CAS, before its result is waited for).
__device__ __forceinline__ void vsum_prefetch_digests(const Tile& tile, const TableRef& t, int64_t base) {
  if (tile.thread_rank() == 0) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.digests + base));
}
__device__ __forceinline__ void vsum_prefetch_entries(const Tile& tile, const TableRef& t, int64_t base,
                                                      const uint4& vs) {
  if (vs.x == kVsumNone && vs.y == kVsumNone) return;
  const int l = static_cast<int>(tile.thread_rank());
  const uint32_t w = (l < 2 ? vs.x : vs.y) >> (16 * (l & 1));
  asm volatile("prefetch.global.L2 [%0];" : : "l"(t.scores + base + (w & 0xffu)));
  asm volatile("prefetch.global.L2 [%0];" : : "l"(t.scores + base + ((w >> 8) & 0xffu)));
}

// One warp per bucket: the 8 least ranks (ties by slot) and the least of the rest; none for a bucket that is not
// full, holds a score >= 2^56 - 1, or is not 128 slots.
__device__ __forceinline__ void vsum_build_warp(const TableRef& t, uint4* out, int64_t bucket, int lane,
                                                bool check_keys) {
  bool ok = t.bucket_capacity == 128;
  const int64_t base = bucket * t.bucket_capacity;
  // Lane l: slots 4l .. 4l + 3 (two 16-byte score loads, one digest word; the key words only when asked: a summary
  // flagged by an evictor belongs to a full bucket, and a full bucket stays full).
  const ulonglong2* sp = reinterpret_cast<const ulonglong2*>(t.scores + base) + 2 * lane;
  const ulonglong2 s01 = __ldcg(sp), s23 = __ldcg(sp + 1);
  const uint32_t dg = __ldcg(reinterpret_cast<const unsigned int*>(t.digests + base) + lane);
  if (check_keys) {
    const ulonglong2* kp = reinterpret_cast<const ulonglong2*>(reinterpret_cast<const uint64_t*>(t.keys) + base) +
                           2 * lane;
    const ulonglong2 k01 = __ldcg(kp), k23 = __ldcg(kp + 1);
    ok = ok && !is_reserved_key(k01.x) && !is_reserved_key(k01.y) && !is_reserved_key(k23.x) &&
         !is_reserved_key(k23.y);
  }
  const uint64_t sc[4] = {s01.x, s01.y, s23.x, s23.y};
  const uint64_t mx = max(max(sc[0], sc[1]), max(sc[2], sc[3]));
  ok = __all_sync(0xffffffffu, ok && mx < (1ull << 56) - 1);
  uint32_t lo = 0, hi = 0;
  uint64_t bound = ~0ull;
  if (ok && __all_sync(0xffffffffu, mx < (1ull << 24) - 1)) {
    // Scores below 2^24 - 1 (LRU clocks): 32-bit ranks, one warp min (redux) per round.
    uint32_t r32[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) r32[j] = (static_cast<uint32_t>(sc[j]) << 8) | ((dg >> (8 * j)) & 0xffu);
#pragma unroll 1
    for (int r = 0; r < 9; ++r) {
      const uint32_t m01 = min(r32[0], r32[1]), m23 = min(r32[2], r32[3]);
      const uint32_t ml = min(m01, m23);
      const int jl = ml == r32[0] ? 0 : ml == r32[1] ? 1 : ml == r32[2] ? 2 : 3;
      const uint32_t m = __reduce_min_sync(0xffffffffu, ml);
      const int wl = __ffs(__ballot_sync(0xffffffffu, ml == m)) - 1;
      const int slot = 4 * wl + __shfl_sync(0xffffffffu, jl, wl);
      if (r == 8) { bound = m; break; }
      if (lane == wl) {
#pragma unroll
        for (int j = 0; j < 4; ++j) r32[j] = j == jl ? ~0u : r32[j];
      }
      if (r < 4) lo |= static_cast<uint32_t>(slot) << (8 * r);
      else hi |= static_cast<uint32_t>(slot) << (8 * (r - 4));
    }
  } else if (ok) {
    uint64_t rk[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) rk[j] = (sc[j] << 8) | ((dg >> (8 * j)) & 0xffu);
#pragma unroll 1
    for (int r = 0; r < 9; ++r) {
      uint64_t mb = ~0ull;
      int ms = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (rk[j] < mb) { mb = rk[j]; ms = lane * 4 + j; }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const uint64_t ob = __shfl_xor_sync(0xffffffffu, mb, o);
        const int os = __shfl_xor_sync(0xffffffffu, ms, o);
        if (ob < mb || (ob == mb && os < ms)) { mb = ob; ms = os; }
      }
      if (r == 8) { bound = mb; break; }
#pragma unroll
      for (int j = 0; j < 4; ++j) rk[j] = ms == lane * 4 + j ? ~0ull : rk[j];
      if (r < 4) lo |= static_cast<uint32_t>(ms) << (8 * r);
      else hi |= static_cast<uint32_t>(ms) << (8 * (r - 4));
    }
  }
  if (lane == 0)
    out[bucket] = ok ? make_uint4(lo, hi, static_cast<uint32_t>(bound), static_cast<uint32_t>(bound >> 32))
                     : make_uint4(kVsumNone, kVsumNone, 0u, 0u);
}
__global__ void vsum_build(TableRef t, uint4* out) {
  const int64_t bucket = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (bucket < t.num_buckets) vsum_build_warp(t, out, bucket, threadIdx.x & 31, true);
}
// After the insert pass (S = 4): a thread per bucket reads its summary's stale bit; the warp rebuilds each flagged
// bucket of its 32 together (the key words read only for a bucket that had no summary).
__global__ void vsum_refresh(TableRef t) {
  const int64_t b0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) & ~int64_t(31);
  const int lane = threadIdx.x & 31;
  const int64_t b = b0 + lane;
  const uint4 v = b < t.num_buckets ? __ldcg(g_vsum + b) : make_uint4(0u, 0u, 0u, 0u);
  unsigned m = __ballot_sync(0xffffffffu, (v.w & kVsumStale) != 0);
  const unsigned none = __ballot_sync(0xffffffffu, v.x == kVsumNone && v.y == kVsumNone);
  while (m) {
    const int j = __ffs(m) - 1;
    m &= m - 1;
    vsum_build_warp(t, g_vsum, b0 + j, lane, (none >> j) & 1u);
  }
}
// Lab 7: the refresh of the flags the previous op left, on a second stream beside begin_op and the first pass (which
// only raise scores: a rank read low stays a valid entry or bound), joined before the insert pass (the only writer
// of keys).
inline void vsum_refresh_beside(const TableRef& t, cudaStream_t s, bool join) {
  static cudaStream_t s2 = nullptr;
  static cudaEvent_t e1, e2;
  if (s2 == nullptr) {
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&e1, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
  }
  if (join) {
    cudaStreamWaitEvent(s, e2, 0);
    return;
  }
  cudaEventRecord(e1, s);
  cudaStreamWaitEvent(s2, e1, 0);
  vsum_refresh<<<static_cast<unsigned>((t.num_buckets + 255) / 256), 256, 0, s2>>>(t);
  cudaEventRecord(e2, s2);
}
// The evictor's request (S = 4; the lead lane, under the bucket lock).
__device__ __forceinline__ void vsum_mark_stale(int64_t bucket, const uint4& vs) {
  reinterpret_cast<uint32_t*>(g_vsum + bucket)[3] = vs.w | kVsumStale;
}

// evict_bench's hook before a timed op: builds every bucket's summary for the oracle variants (mode lab 4, 5; the
// build's time printed once), or restores the warmed summaries (lab 6).
static uint4* g_vsum_buf = nullptr;   // the device summaries (g_vsum)
static uint4* g_vsum_snap = nullptr;  // lab 6: the summaries after the warm-up ops, restored before each op
inline void lab_alloc(const TableRef& t) {
  if (g_vsum_buf != nullptr) return;
  if (cudaMalloc(&g_vsum_buf, t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  if (cudaMemcpyToSymbol(g_vsum, &g_vsum_buf, sizeof(g_vsum_buf)) != cudaSuccess) std::abort();
}
// Before lab 6's warm-up: every summary flagged stale (none yet), so the first refresh builds them all.
inline void lab_warm_begin(const TableRef& t, cudaStream_t s) {
  lab_alloc(t);
  std::vector<uint4> h(t.num_buckets, make_uint4(kVsumNone, kVsumNone, 0u, kVsumStale));
  if (cudaMemcpy(g_vsum_buf, h.data(), t.num_buckets * sizeof(uint4), cudaMemcpyHostToDevice) != cudaSuccess)
    std::abort();
}
inline void lab_warm_end(const TableRef& t, cudaStream_t s) {
  if (g_vsum_snap == nullptr && cudaMalloc(&g_vsum_snap, t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  cudaMemcpyAsync(g_vsum_snap, g_vsum_buf, t.num_buckets * sizeof(uint4), cudaMemcpyDeviceToDevice, s);
  std::vector<uint4> h(t.num_buckets);
  cudaMemcpyAsync(h.data(), g_vsum_buf, t.num_buckets * sizeof(uint4), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  long long none = 0, stale = 0;
  for (const uint4& v : h) {
    none += v.x == kVsumNone && v.y == kVsumNone;
    stale += (v.w & kVsumStale) != 0;
  }
  std::printf("summaries after the warm-up: %lld buckets, %lld without one, %lld flagged stale\n",
              static_cast<long long>(t.num_buckets), none, stale);
}
inline void lab_prepare(int lab, const TableRef& t, cudaStream_t s) {
  static bool timed = false;
  if (lab == 6 || lab == 7) {
    cudaMemcpyAsync(g_vsum_buf, g_vsum_snap, t.num_buckets * sizeof(uint4), cudaMemcpyDeviceToDevice, s);
    return;
  }
  if (lab != 4 && lab != 5) return;
  lab_alloc(t);
  uint4* buf = g_vsum_buf;
  const unsigned grid = static_cast<unsigned>((t.num_buckets * 32 + 255) / 256);
  cudaEvent_t e0, e1;
  if (!timed) { cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventRecord(e0, s); }
  vsum_build<<<grid, 256, 0, s>>>(t, buf);
  if (!timed) {
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, e0, e1);
    std::printf("vsum_build: %.1f us for %lld buckets\n", ms * 1e3f, static_cast<long long>(t.num_buckets));
    timed = true;
  }
}

}  // namespace table
}  // namespace dynamicemb
