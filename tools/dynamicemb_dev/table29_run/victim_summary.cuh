// Lab (evict_bench only; included by the lab tree that summary_tree.py makes): a per-bucket victim summary for the
// load-1.0 eviction path, "read a few words instead of the bucket's score array".
//
// Summary of a full 128-slot bucket (16 bytes; 32 for the 16-entry form): the bucket-local slots of its 8 least
// ranks (rank = score << 8 | digest, scores below 2^56 - 1) and `bound`, the least rank of the other slots, when it
// was built. While no score decreases and no slot outside the 8 gets a key of lower rank (LRU: hits raise a score to
// the op's clock, inserts write the clock), every slot outside the 8 keeps a rank >= bound, so when the least
// *current* rank of the 8 is below bound it is the bucket's least rank: the same victim as the full scan. Otherwise
// (used up, a score >= 2^56, a bucket that was not full) the full scan runs as before.
//
// Variants (summary_tree.py): the oracle (vsum_build before each timed op, untimed), the steady state with the
// evictor's requests and a refresh kernel after the insert pass or beside the next op's first pass, and the 16-entry
// form with a request bitmap. Measured: docs/dynamicemb_storage_notes.md, "One evicting insert counted, its floor,
// and a per-bucket victim summary".
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
// The K least ranks of a bucket (ties by slot) and the least rank of the rest, by one warp: words[] gets the K slot
// bytes in rank order; false for a bucket that is not full (when check_keys), holds a score >= 2^56 - 1, or is not
// 128 slots.
template <int K>
__device__ __forceinline__ bool vsum_select(const TableRef& t, int64_t bucket, int lane, bool check_keys,
                                            uint32_t (&words)[K / 4], uint64_t& bound) {
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
#pragma unroll
  for (int q = 0; q < K / 4; ++q) words[q] = 0;
  bound = ~0ull;
  if (!ok) return false;
  if (__all_sync(0xffffffffu, mx < (1ull << 24) - 1)) {
    // Scores below 2^24 - 1 (LRU clocks): 32-bit ranks, one warp min (redux) per round.
    uint32_t r32[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) r32[j] = (static_cast<uint32_t>(sc[j]) << 8) | ((dg >> (8 * j)) & 0xffu);
#pragma unroll
    for (int r = 0; r <= K; ++r) {
      const uint32_t ml = min(min(r32[0], r32[1]), min(r32[2], r32[3]));
      const int jl = ml == r32[0] ? 0 : ml == r32[1] ? 1 : ml == r32[2] ? 2 : 3;
      const uint32_t m = __reduce_min_sync(0xffffffffu, ml);
      if (r == K) { bound = m; break; }
      const int wl = __ffs(__ballot_sync(0xffffffffu, ml == m)) - 1;
      const int slot = 4 * wl + __shfl_sync(0xffffffffu, jl, wl);
      if (lane == wl) {
#pragma unroll
        for (int j = 0; j < 4; ++j) r32[j] = j == jl ? ~0u : r32[j];
      }
      words[r / 4] |= static_cast<uint32_t>(slot) << (8 * (r % 4));
    }
  } else {
    uint64_t rk[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) rk[j] = (sc[j] << 8) | ((dg >> (8 * j)) & 0xffu);
#pragma unroll
    for (int r = 0; r <= K; ++r) {
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
      if (r == K) { bound = mb; break; }
#pragma unroll
      for (int j = 0; j < 4; ++j) rk[j] = ms == lane * 4 + j ? ~0ull : rk[j];
      words[r / 4] |= static_cast<uint32_t>(ms) << (8 * (r % 4));
    }
  }
  return true;
}
__device__ __forceinline__ void vsum_build_warp(const TableRef& t, uint4* out, int64_t bucket, int lane,
                                                bool check_keys) {
  uint32_t w[2];
  uint64_t bound;
  const bool ok = vsum_select<8>(t, bucket, lane, check_keys, w, bound);
  if (lane == 0)
    out[bucket] = ok ? make_uint4(w[0], w[1], static_cast<uint32_t>(bound), static_cast<uint32_t>(bound >> 32))
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
// ---- 16-entry summaries (S = 5; labs 8 / 9): 32 bytes per bucket, [2b] the 16 slot bytes (x = y = ~0: none),
// [2b + 1] (bound lo, bound hi, 0, 0); a summary then serves ~14 evictions instead of ~6. The evictor's requests go
// to a bitmap (one RED, nothing waits for it) instead of the summary, and the refresh takes a warp per bitmap word
// (32 buckets, ~2 flagged per op), prefetching its flagged buckets' lines into L2 before it selects.
__constant__ uint4* g_vs16;
__constant__ uint32_t* g_vflag;  // (num_buckets / 32) refresh requests

__device__ __forceinline__ bool vs16_scan(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4,
                                          const uint4& e, uint64_t bound, BucketScan& r, int& remaining) {
  if (e.x == kVsumNone && e.y == kVsumNone) return false;
  const int l = static_cast<int>(tile.thread_rank());
  const uint32_t w = l == 0 ? e.x : l == 1 ? e.y : l == 2 ? e.z : e.w;
  const int i0 = static_cast<int>(w & 0xffu), i1 = static_cast<int>((w >> 8) & 0xffu);
  const int i2 = static_cast<int>((w >> 16) & 0xffu), i3 = static_cast<int>(w >> 24);
  const uint4 c0 = load_digests(t.digests, base, l, true);
  const uint4 c1 = load_digests(t.digests, base, l + kTile, true);
  const unsigned long long* sp = reinterpret_cast<const unsigned long long*>(t.scores) + base;
  const uint64_t s0 = __ldcg(sp + i0), s1 = __ldcg(sp + i1), s2 = __ldcg(sp + i2), s3 = __ldcg(sp + i3);
  const uint32_t g0 = __ldcg(t.digests + base + i0), g1 = __ldcg(t.digests + base + i1);
  const uint32_t g2 = __ldcg(t.digests + base + i2), g3 = __ldcg(t.digests + base + i3);
  r.look = static_cast<uint64_t>(match16(c0, d4)) | (static_cast<uint64_t>(match16(c1, d4)) << 16);
  r.big = static_cast<uint32_t>(s0 >> 32) | static_cast<uint32_t>(s1 >> 32) | static_cast<uint32_t>(s2 >> 32) |
          static_cast<uint32_t>(s3 >> 32);
  const uint64_t r0 = (s0 << 8) | g0, r1 = (s1 << 8) | g1, r2 = (s2 << 8) | g2, r3 = (s3 << 8) | g3;
  r.min = cand_min(cand_min(EvictCand{r0, i0, false}, EvictCand{r1, i1, false}),
                   cand_min(EvictCand{r2, i2, false}, EvictCand{r3, i3, false}));
  int c = (r0 < bound ? 1 : 0) + (r1 < bound ? 1 : 0) + (r2 < bound ? 1 : 0) + (r3 < bound ? 1 : 0);
  c += tile.shfl_xor(c, 1);
  c += tile.shfl_xor(c, 2);
  remaining = c;
  bool big = (r.big >> 24) != 0;
  const EvictCand m = tile_min_rank(tile, r.min, big);
  return !big && m.rank < bound;
}
__device__ __forceinline__ void vs16_prefetch_entries(const Tile& tile, const TableRef& t, int64_t base,
                                                      const uint4& e) {
  if (e.x == kVsumNone && e.y == kVsumNone) return;
  const int l = static_cast<int>(tile.thread_rank());
  const uint32_t w = l == 0 ? e.x : l == 1 ? e.y : l == 2 ? e.z : e.w;
#pragma unroll
  for (int q = 0; q < 4; ++q) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.scores + base + ((w >> (8 * q)) & 0xffu)));
}
__device__ __forceinline__ void vs16_build_warp(const TableRef& t, int64_t bucket, int lane, bool check_keys) {
  uint32_t w[4];
  uint64_t bound;
  const bool ok = vsum_select<16>(t, bucket, lane, check_keys, w, bound);
  if (lane == 0) {
    g_vs16[2 * bucket] = ok ? make_uint4(w[0], w[1], w[2], w[3]) : make_uint4(kVsumNone, kVsumNone, 0u, 0u);
    g_vs16[2 * bucket + 1] = make_uint4(static_cast<uint32_t>(bound), static_cast<uint32_t>(bound >> 32), 0u, 0u);
  }
}
__global__ void vs16_refresh(TableRef t) {
  const int64_t wid = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (wid >= (t.num_buckets + 31) / 32) return;
  uint32_t m = __ldcg(g_vflag + wid);
  if (m == 0) return;
  if (lane == 0) g_vflag[wid] = 0u;
  const int64_t b0 = wid * 32;
  const uint4 e = b0 + lane < t.num_buckets ? __ldcg(g_vs16 + 2 * (b0 + lane)) : make_uint4(0u, 0u, 0u, 0u);
  const unsigned none = __ballot_sync(0xffffffffu, e.x == kVsumNone && e.y == kVsumNone);
  for (uint32_t mm = m; mm; mm &= mm - 1) {  // every flagged bucket's score and digest lines into L2 first
    const int64_t base = (b0 + __ffs(mm) - 1) * t.bucket_capacity;
    if (lane < 8) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.scores + base + 16 * lane));
    else if (lane == 8) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.digests + base));
  }
  while (m) {
    const int j = __ffs(m) - 1;
    m &= m - 1;
    vs16_build_warp(t, b0 + j, lane, (none >> j) & 1u);
  }
}

// evict_bench's hook before a timed op: builds every bucket's summary for the oracle variants (mode lab 4, 5; the
// build's time printed once), or restores the warmed summaries (lab 6).

// Lab 7: the refresh of the flags the previous op left, on a second stream beside begin_op and the first pass (which
// only raise scores: a rank read low stays a valid entry or bound), joined before the insert pass (the only writer
// of keys).
inline void vsum_refresh_beside(const TableRef& t, cudaStream_t s, bool join, bool k16 = false) {
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
  if (k16)
    vs16_refresh<<<static_cast<unsigned>(((t.num_buckets + 31) / 32 * 32 + 255) / 256), 256, 0, s2>>>(t);
  else
    vsum_refresh<<<static_cast<unsigned>((t.num_buckets + 255) / 256), 256, 0, s2>>>(t);
  cudaEventRecord(e2, s2);
}
// The evictor's request (S = 4; the lead lane, under the bucket lock).
__device__ __forceinline__ void vsum_mark_stale(int64_t bucket, const uint4& vs) {
  reinterpret_cast<uint32_t*>(g_vsum + bucket)[3] = vs.w | kVsumStale;
}

static uint4* g_vsum_buf = nullptr;   // the device summaries (g_vsum)
static uint4* g_vsum_snap = nullptr;  // labs 6 / 7: the summaries after the warm-up ops, restored before each op
static uint4* g_vs16_buf = nullptr;   // labs 8 / 9: g_vs16, g_vflag and their snapshots
static uint4* g_vs16_snap = nullptr;
static uint32_t* g_vflag_buf = nullptr;
static uint32_t* g_vflag_snap = nullptr;
inline void lab_alloc(const TableRef& t) {
  if (g_vsum_buf != nullptr) return;
  const int64_t nw = (t.num_buckets + 31) / 32;
  if (cudaMalloc(&g_vsum_buf, t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  if (cudaMemcpyToSymbol(g_vsum, &g_vsum_buf, sizeof(g_vsum_buf)) != cudaSuccess) std::abort();
  if (cudaMalloc(&g_vs16_buf, 2 * t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  if (cudaMalloc(&g_vs16_snap, 2 * t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  if (cudaMalloc(&g_vflag_buf, nw * 4) != cudaSuccess || cudaMalloc(&g_vflag_snap, nw * 4) != cudaSuccess) std::abort();
  if (cudaMemcpyToSymbol(g_vs16, &g_vs16_buf, sizeof(g_vs16_buf)) != cudaSuccess) std::abort();
  if (cudaMemcpyToSymbol(g_vflag, &g_vflag_buf, sizeof(g_vflag_buf)) != cudaSuccess) std::abort();
}
// Before the warm-up: every summary none and flagged (8 entries: the stale bit; 16: the bitmap all ones), so the
// first refresh builds them all.
inline void lab_warm_begin(const TableRef& t, cudaStream_t s) {
  lab_alloc(t);
  std::vector<uint4> h(t.num_buckets, make_uint4(kVsumNone, kVsumNone, 0u, kVsumStale));
  if (cudaMemcpy(g_vsum_buf, h.data(), t.num_buckets * sizeof(uint4), cudaMemcpyHostToDevice) != cudaSuccess)
    std::abort();
  std::vector<uint4> h16(2 * t.num_buckets, make_uint4(kVsumNone, kVsumNone, kVsumNone, kVsumNone));
  if (cudaMemcpy(g_vs16_buf, h16.data(), h16.size() * sizeof(uint4), cudaMemcpyHostToDevice) != cudaSuccess)
    std::abort();
  const int64_t nw = (t.num_buckets + 31) / 32;
  std::vector<uint32_t> f(nw, 0xffffffffu);
  if (t.num_buckets % 32) f[nw - 1] = (1u << (t.num_buckets % 32)) - 1;
  if (cudaMemcpy(g_vflag_buf, f.data(), nw * 4, cudaMemcpyHostToDevice) != cudaSuccess) std::abort();
}
inline void lab_warm_end(const TableRef& t, cudaStream_t s) {
  if (g_vsum_snap == nullptr && cudaMalloc(&g_vsum_snap, t.num_buckets * sizeof(uint4)) != cudaSuccess) std::abort();
  const int64_t nw = (t.num_buckets + 31) / 32;
  cudaMemcpyAsync(g_vs16_snap, g_vs16_buf, 2 * t.num_buckets * sizeof(uint4), cudaMemcpyDeviceToDevice, s);
  cudaMemcpyAsync(g_vflag_snap, g_vflag_buf, nw * 4, cudaMemcpyDeviceToDevice, s);
  {
    std::vector<uint32_t> f(nw);
    cudaMemcpyAsync(f.data(), g_vflag_buf, nw * 4, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    long long flagged = 0;
    for (uint32_t x : f) flagged += __builtin_popcount(x);
    std::printf("16-entry summaries: %lld buckets flagged in the bitmap\n", flagged);
  }
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
  if (lab == 8 || lab == 9) {
    cudaMemcpyAsync(g_vs16_buf, g_vs16_snap, 2 * t.num_buckets * sizeof(uint4), cudaMemcpyDeviceToDevice, s);
    cudaMemcpyAsync(g_vflag_buf, g_vflag_snap, (t.num_buckets + 31) / 32 * 4, cudaMemcpyDeviceToDevice, s);
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
