// Lab (evict_bench only; included by the lab tree that tree30.py makes on top of table29's): the victim summary of
// table29 (victim_summary.cuh, 16 bytes per bucket: 8 slot bytes and a bound) kept up by the evicting insert itself,
// with no refresh kernel (issue 35, session 27).
//
// The evictor that cannot use its bucket's summary runs the full scan anyway; scan_bucket_self does that scan and
// leaves a new summary from what it already holds: entry c = the least-rank slot of 16-slot chunk c (the scan's tree
// computes it), bound = the least *second* rank over the 8 chunks (one more 16-wide min per chunk, ~50 instructions).
// Every slot that is not its chunk's least has a rank >= bound, so the entries below bound are the bucket's least
// ranks in order (a birthday count: ~3 of the 8 on random ranks). It is written under the bucket lock only when
// bound < new_score << 8: every key inserted from then on (LRU: the op's clock or a later one) ranks above it, and
// hits only raise ranks, so any summary a reader holds (even one replaced meanwhile) stays exact. The evictor that
// uses the last entry below bound marks the summary none, so the next one prefetches the whole bucket before the lock.
#pragma once

namespace dynamicemb {
namespace table {

// The count build (-DT30_COUNT, a separate binary: one contended atomic per evicting key): evictions that ran the
// self scan, that used the summary, that marked it none (labs 13-17: flagged it for the refresh), self scans that could leave no summary, lab 12's early claims kept; printed (and
// reset) by evict_bench before each op's preparation, i.e. the previous op's (the first line: the warm-up's).
#ifdef T30_COUNT
__device__ unsigned long long g_t30[5];
#define T30_ADD(i) atomicAdd(&g_t30[i], 1ull)
inline void t30_report() {
  unsigned long long h[5];
  cudaMemcpyFromSymbol(h, g_t30, sizeof(h));
  if (h[0] + h[1] + h[2] + h[3] + h[4] == 0) return;
  std::printf("t30 counts: self %llu used %llu marked_none %llu self_none %llu claimed_early %llu\n", h[0], h[1],
              h[2], h[3], h[4]);
  const unsigned long long z[5] = {0, 0, 0, 0, 0};
  cudaMemcpyToSymbol(g_t30, z, sizeof(z));
}
#else
#define T30_ADD(i)
inline void t30_report() {}
#endif

// scan_bucket's result, plus the summary of the bucket as scanned (every lane; x = y = kVsumNone: none).
// E = 1 (lab 10): entry c = chunk c's least slot, bound = the least second rank over the chunks (~3 entries below it
// on random ranks). E = 2 (lab 11): each chunk's two least slots are candidates, bound = the least third rank over
// the chunks; the candidates below it (~6 on random ranks; the E = 1 summary when more than 8) fill the 8 entries in
// lane order, the rest padded with a slot of chunk 0 that is neither of its two least (a rank >= bound).
// Which lab instance does what (S: upsert_insert_kernel's lab template argument): the self scan (labs 10-12), the
// guessed victim claimed in the summary scan's round trip (12, 15), the evictor's flags for a refresh (6, 13-15).
__host__ __device__ constexpr bool s_self(int S) { return S >= 6 && S <= 8; }
__host__ __device__ constexpr bool s_early(int S) { return S == 8 || S == 9; }
__host__ __device__ constexpr bool s_flag(int S) { return S == 4 || S == 9; }

constexpr uint32_t kVsumNext = 0x100u;  // lab 12: w = kVsumNext | the entry the next evictor guesses (0-7)

// The two least of per-lane sorted pairs (a <= b) over the tile: the tile's second least (~0: none).
__device__ __forceinline__ uint64_t tile_second_least(const Tile& tile, uint64_t a, uint64_t b) {
#pragma unroll
  for (int o = 1; o < kTile; o <<= 1) {
    const uint64_t oa = tile.shfl_xor(a, o), ob = tile.shfl_xor(b, o);
    b = min(max(a, oa), min(b, ob));
    a = min(a, oa);
  }
  return b;
}

template <int E, bool NEXT = false>
__device__ __forceinline__ BucketScan scan_bucket_self(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4,
                                                       uint64_t new_score, uint4& summary) {
  const int l = static_cast<int>(tile.thread_rank());
  BucketScan r{EvictCand{~0ull, -1, false}, 0u, 0ull};
  bool small = t.bucket_capacity == 128;
  uint32_t mins = 0, seconds = 0, b2 = ~0u, b3 = ~0u;  // slot bytes (chunk i in byte i), bounds
  uint32_t r1a = ~0u, r2a = ~0u, r1b = ~0u, r2b = ~0u;  // the two least ranks of the lane's chunks (E = 2)
  int pad = 0, nxt = -1;
  if (small) {
#pragma unroll 1  // one chunk's loads at a time (scan_bucket: the insert pass's occupancy)
    for (int i = 0; i < 2; ++i) {
      const int c = l + i * kTile;
      const ChunkScores cs = load_chunk_scores(t, base, c);
      r.look |= static_cast<uint64_t>(match16(cs.d, d4)) << (16 * i);
      uint32_t hi_or = 0, lo_or = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        hi_or |= cs.ss[b].y | cs.ss[b].w;
        lo_or |= cs.ss[b].x | cs.ss[b].z;
      }
      r.big |= hi_or;
      small = small && (hi_or | (lo_or >> 24)) == 0;
      uint32_t rk[16];
#pragma unroll
      for (int j = 0; j < 16; ++j)
        rk[j] = __byte_perm(digest_word(cs.d, j), (j & 1) ? cs.ss[j / 2].z : cs.ss[j / 2].x,
                            0x6540u | static_cast<uint32_t>(j & 3));
      uint32_t m = rk[0];
#pragma unroll
      for (int j = 1; j < 16; ++j) m = min(m, rk[j]);
      uint32_t eq = 0;
#pragma unroll
      for (int j = 0; j < 16; ++j) eq |= (rk[j] == m ? 1u : 0u) << j;
      const int idx = __ffs(eq) - 1;
      uint32_t s2 = ~0u;  // the chunk's second rank (= m on a tie)
#pragma unroll
      for (int j = 0; j < 16; ++j) s2 = min(s2, j == idx ? ~0u : rk[j]);
      b2 = min(b2, s2);
      mins |= static_cast<uint32_t>(c * 16 + idx) << (8 * i);
      r.min = cand_min(r.min, EvictCand{m, c * 16 + idx, (eq & (eq - 1)) != 0});
      if (E == 2) {
        uint32_t eq2 = 0;
#pragma unroll
        for (int j = 0; j < 16; ++j) eq2 |= (rk[j] == s2 && j != idx ? 1u : 0u) << j;
        const int idx2 = __ffs(eq2) - 1;
        uint32_t s3 = ~0u;
#pragma unroll
        for (int j = 0; j < 16; ++j) s3 = min(s3, j == idx || j == idx2 ? ~0u : rk[j]);
        b3 = min(b3, s3);
        seconds |= static_cast<uint32_t>(c * 16 + idx2) << (8 * i);
        r1a = i == 0 ? m : r1a;
        r2a = i == 0 ? s2 : r2a;
        r1b = i == 0 ? r1b : m;
        r2b = i == 0 ? r2b : s2;
        if (i == 0) pad = idx != 0 && idx2 != 0 ? 0 : (idx != 1 && idx2 != 1 ? 1 : 2);
      }
    }
  }
  small = tile.all(small);
  if (!small) {  // a score >= 2^24 or not 128 slots (never at the lab's LRU clocks): main's scan, no summary
    summary = make_uint4(kVsumNone, kVsumNone, 0u, 0u);
    return scan_bucket(tile, t, base, d4);
  }
  b2 = min(b2, tile.shfl_xor(b2, 1));
  b2 = min(b2, tile.shfl_xor(b2, 2));
  // Lane l's two entries go to bytes 2 (l & 1), 2 (l & 1) + 1 of x (lanes 0, 1) or y (lanes 2, 3) (vsum_scan).
  uint32_t q = (mins & 0xffffu) << (16 * (l & 1));
  q |= tile.shfl_xor(q, 1);
  uint32_t x = tile.shfl(q, 0), y = tile.shfl(q, 2), bound = b2;
  if (E == 2) {
    b3 = min(b3, tile.shfl_xor(b3, 1));
    b3 = min(b3, tile.shfl_xor(b3, 2));
    // The lane's candidates in order (chunk l: least, second; chunk l + 4: least, second), their count, positions.
    uint32_t cand = 0;
    int cnt = 0;
    if (r1a < b3) cand |= (mins & 0xffu) << (8 * cnt++);
    if (r2a < b3) cand |= (seconds & 0xffu) << (8 * cnt++);
    if (r1b < b3) cand |= ((mins >> 8) & 0xffu) << (8 * cnt++);
    if (r2b < b3) cand |= ((seconds >> 8) & 0xffu) << (8 * cnt++);
    int inc = cnt;
#pragma unroll
    for (int o = 1; o < kTile; o <<= 1) {
      const int v = tile.shfl_up(inc, o);
      if (l >= o) inc += v;
    }
    const int total = tile.shfl(inc, kTile - 1);
    const int pos = inc - cnt;
    uint64_t w = pos < 8 ? static_cast<uint64_t>(cand) << (8 * pos) : 0ull;
    w |= tile.shfl_xor(w, 1);
    w |= tile.shfl_xor(w, 2);
    const uint64_t p = static_cast<uint64_t>(tile.shfl(pad, 0)) * 0x0101010101010101ull;
    const bool two = total <= 8 && total > 0;
    if (two) {
      w |= total == 8 ? 0ull : p & (~0ull << (8 * total));
      x = static_cast<uint32_t>(w);
      y = static_cast<uint32_t>(w >> 32);
      bound = b3;
    }
    if (NEXT) {  // the entry after the victim: keys rank << 3 | entry, the lane's two least, then the tile's
      uint64_t ka = ~0ull, kb = ~0ull;
      auto put = [&](uint32_t rank, int e) {
        const uint64_t k = (static_cast<uint64_t>(rank) << 3) | static_cast<uint64_t>(e);
        kb = min(kb, max(ka, k));
        ka = min(ka, k);
      };
      if (two) {
        int e = pos;
        if (r1a < b3) put(r1a, e++);
        if (r2a < b3) put(r2a, e++);
        if (r1b < b3) put(r1b, e++);
        if (r2b < b3) put(r2b, e++);
      } else {
        if (r1a < b2) put(r1a, 2 * l);
        if (r1b < b2) put(r1b, 2 * l + 1);
      }
      // The victim is the bucket's least rank, the least key when the summary holds it: the next is the second.
      const uint64_t k2 = tile_second_least(tile, ka, kb);
      nxt = k2 == ~0ull ? -1 : static_cast<int>(k2 & 7u);
    }
  }
  const bool ok = new_score < (1ull << 48) && static_cast<uint64_t>(bound) < (new_score << 8) && (!NEXT || nxt >= 0);
  summary = ok ? make_uint4(x, y, bound, NEXT ? kVsumNext | static_cast<uint32_t>(nxt) : 0u)
               : make_uint4(kVsumNone, kVsumNone, 0u, 0u);
  return r;
}

// Lab 12 (S = 8): the summary names the entry the next evictor takes (w = kVsumNext | entry), and that evictor
// claims it in the round trip that validates the summary: under the lock it issues the scan's loads (the 8 entries'
// scores and digests, its two digest chunks), the key word of the first slot of the key's digest seen in the digest
// chunks it loaded before the lock (stale: checked against the fresh ones), and then (so the loads do not wait for
// its acquire) the exchange of the guessed victim. `e_old` (lead lane): the word the exchange replaced; `k0`, `j0`:
// the key word read and its look bit (-1: none). `nxt`: the entry after the least (-1: none below the bound).
// False as vsum_scan; the caller takes the claim only when the least is the guess with the fresh look unchanged,
// and otherwise puts the guessed word back.
__device__ __forceinline__ bool vsum_scan_early(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4,
                                                const uint4& vs, uint64_t look_pre, bool claim, BucketScan& r,
                                                int& remaining, int& nxt, int& guess, uint64_t& e_old,
                                                uint64_t& k0, int& j0) {
  const int l = static_cast<int>(tile.thread_rank());
  const uint32_t w = (l < 2 ? vs.x : vs.y) >> (16 * (l & 1));
  const int i0 = static_cast<int>(w & 0xffu), i1 = static_cast<int>((w >> 8) & 0xffu);
  const uint4 c0 = load_digests(t.digests, base, l, true);
  const uint4 c1 = load_digests(t.digests, base, l + kTile, true);
  const unsigned long long* sp = reinterpret_cast<const unsigned long long*>(t.scores) + base;
  const uint64_t s0 = __ldcg(sp + i0), s1 = __ldcg(sp + i1);
  const uint32_t g0 = __ldcg(t.digests + base + i0), g1 = __ldcg(t.digests + base + i1);
  const int ge = static_cast<int>(vs.w & 7u);
  guess = static_cast<int>(((ge < 4 ? vs.x : vs.y) >> (8 * (ge & 3))) & 0xffu);
  const uint64_t lp = look_pre & ~look_bit(tile, guess);
  j0 = lp ? __ffsll(static_cast<long long>(lp)) - 1 : -1;
  k0 = j0 >= 0 ? __ldcg(reinterpret_cast<const unsigned long long*>(t.keys) + base + look_slot(tile, j0)) : 0ull;
  e_old = kLockedKey;
  if (claim && l == 0) e_old = lock_victim(t.keys, base + guess);
  r.look = static_cast<uint64_t>(match16(c0, d4)) | (static_cast<uint64_t>(match16(c1, d4)) << 16);
  r.big = static_cast<uint32_t>(s0 >> 32) | static_cast<uint32_t>(s1 >> 32);
  const uint64_t r0 = (s0 << 8) | g0, r1 = (s1 << 8) | g1;
  const bool lt = r1 < r0;
  r.min = EvictCand{lt ? r1 : r0, lt ? i1 : i0, r1 == r0};
  bool big = (r.big >> 24) != 0;
  const EvictCand m = tile_min_rank(tile, r.min, big);
  const uint64_t bound = vs.z;
  int c = (r0 < bound ? 1 : 0) + (r1 < bound ? 1 : 0);
  c += tile.shfl_xor(c, 1);
  c += tile.shfl_xor(c, 2);
  remaining = c;
  // The entry after the least: ranks below 2^56 (big: none), keys rank << 3 | entry over the 8.
  const uint64_t ka0 = r0 < bound ? (r0 << 3) | static_cast<uint64_t>(2 * l) : ~0ull;
  const uint64_t kb0 = r1 < bound ? (r1 << 3) | static_cast<uint64_t>(2 * l + 1) : ~0ull;
  const uint64_t k2 = tile_second_least(tile, min(ka0, kb0), max(ka0, kb0));
  nxt = big || k2 == ~0ull ? -1 : static_cast<int>(k2 & 7u);
  return !big && m.rank < bound;
}

// ---- Labs 13-15: table29's L6 (the evictor flags a summary it could not use or nearly used up; S = 4) with the
// flagged buckets appended to a list, and a refresh that takes a warp per listed bucket (a grid of 6 blocks of 256
// per SM, each warp prefetching its next bucket's score and digest lines before it selects the current one), where
// L6's vsum_refresh swept all 524K summaries with a thread each and rebuilt a warp's flagged buckets one at a time.
__constant__ int g_vlist_on;                 // set by t30_list_prepare for labs 13-17's ops
__constant__ int g_vsum_refresh_at;          // their flagging threshold (kVsumRefreshAt; lab 16: 1)
__constant__ int64_t* g_vlist;               // (2 num_buckets) flagged buckets
__constant__ unsigned long long* g_vlist_n;  // their count (zeroed after each refresh)
constexpr int kVlistBlocksPerSm = 6;

__device__ __forceinline__ void vlist_append(const TableRef& t, int64_t bucket) {
  const unsigned long long i = atomicAdd(g_vlist_n, 1ull);
  if (i < static_cast<unsigned long long>(2 * t.num_buckets)) g_vlist[i] = bucket;
}
// Labs 14 / 15's rebuild of one bucket's summary by a warp, in fewer instructions than vsum_select (which takes 9
// rounds of a warp min over every lane's 4 ranks, then finds and clears the winner): each lane sorts its 4 slots'
// 32-bit ranks once (5 compare-exchanges), then each of the 9 rounds takes the least lane head (one redux) and the
// winning lane pops its head. Entries in rank order, bound the 9th rank; none when a score is >= 2^24 - 1.
__device__ __forceinline__ void vsum_build_fast(const TableRef& t, int64_t bucket, int lane) {
  const int64_t base = bucket * t.bucket_capacity;
  const ulonglong2* sp = reinterpret_cast<const ulonglong2*>(t.scores + base) + 2 * lane;
  const ulonglong2 s01 = __ldcg(sp), s23 = __ldcg(sp + 1);
  const uint32_t dg = __ldcg(reinterpret_cast<const unsigned int*>(t.digests + base) + lane);
  const uint64_t mx = max(max(s01.x, s01.y), max(s23.x, s23.y));
  if (!__all_sync(0xffffffffu, mx < (1ull << 24) - 1 && t.bucket_capacity == 128)) {
    if (lane == 0) g_vsum[bucket] = make_uint4(kVsumNone, kVsumNone, 0u, 0u);
    return;
  }
  uint32_t r[4] = {(static_cast<uint32_t>(s01.x) << 8) | (dg & 0xffu),
                   (static_cast<uint32_t>(s01.y) << 8) | ((dg >> 8) & 0xffu),
                   (static_cast<uint32_t>(s23.x) << 8) | ((dg >> 16) & 0xffu),
                   (static_cast<uint32_t>(s23.y) << 8) | (dg >> 24)};
  int j[4] = {0, 1, 2, 3};
  auto cx = [&](int a, int b) {
    const bool sw = r[b] < r[a];
    const uint32_t lo = sw ? r[b] : r[a], hi = sw ? r[a] : r[b];
    const int ja = sw ? j[b] : j[a], jb = sw ? j[a] : j[b];
    r[a] = lo;
    r[b] = hi;
    j[a] = ja;
    j[b] = jb;
  };
  cx(0, 1);
  cx(2, 3);
  cx(0, 2);
  cx(1, 3);
  cx(1, 2);
  uint32_t w0 = 0, w1 = 0, bound = 0;
#pragma unroll
  for (int q = 0; q <= 8; ++q) {
    const uint32_t m = __reduce_min_sync(0xffffffffu, r[0]);
    if (q == 8) {
      bound = m;
      break;
    }
    const int wl = __ffs(__ballot_sync(0xffffffffu, r[0] == m)) - 1;
    const uint32_t slot = static_cast<uint32_t>(4 * wl + __shfl_sync(0xffffffffu, j[0], wl));
    if (lane == wl) {
      r[0] = r[1];
      r[1] = r[2];
      r[2] = r[3];
      r[3] = ~0u;
      j[0] = j[1];
      j[1] = j[2];
      j[2] = j[3];
    }
    if (q < 4) w0 |= slot << (8 * q);
    else w1 |= slot << (8 * (q - 4));
  }
  if (lane == 0) g_vsum[bucket] = make_uint4(w0, w1, bound, 0u);
}

// MODE 0: vsum_build_warp (labs 13), 1: vsum_build_fast (14-16), 2: the fast build with the list entries and the
// lines of the next 3 buckets in flight instead of 1 (lab 17).
template <int MODE>
__global__ void __launch_bounds__(256, kVlistBlocksPerSm) vsum_refresh_list(TableRef t) {
  constexpr int D = MODE == 2 ? 3 : 1;
  const int lane = threadIdx.x & 31;
  const long long nw = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  const long long n = min(static_cast<long long>(*reinterpret_cast<volatile unsigned long long*>(g_vlist_n)),
                          2 * static_cast<long long>(t.num_buckets));
  long long i = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  auto ahead = [&](long long k) {  // list entry k and its bucket's score and digest lines (-1: none)
    const int64_t b = k < n ? __ldcg(g_vlist + k) : -1;
    if (b >= 0) {
      const int64_t base = b * t.bucket_capacity;
      if (lane < 8) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.scores + base + 16 * lane));
      else if (lane == 8) asm volatile("prefetch.global.L2 [%0];" : : "l"(t.digests + base));
    }
    return b;
  };
  int64_t q[D + 1];
  q[0] = i < n ? __ldcg(g_vlist + i) : -1;
#pragma unroll
  for (int d = 1; d <= D; ++d) q[d] = ahead(i + d * nw);
  while (i < n) {
    if (MODE >= 1) vsum_build_fast(t, q[0], lane);
    else vsum_build_warp(t, g_vsum, q[0], lane, false);
#pragma unroll
    for (int d = 0; d < D; ++d) q[d] = q[d + 1];
    q[D] = ahead(i + (D + 1) * nw);
    i += nw;
  }
}
inline void vsum_refresh_list_launch(const TableRef& t, cudaStream_t s, int mode) {
  static int sms = 0;
  static unsigned long long* n_ptr = nullptr;
  if (sms == 0) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaMemcpyFromSymbol(&n_ptr, g_vlist_n, sizeof(n_ptr));
  }
  const unsigned g = static_cast<unsigned>(sms * kVlistBlocksPerSm);
  if (mode == 2) vsum_refresh_list<2><<<g, 256, 0, s>>>(t);
  else if (mode == 1) vsum_refresh_list<1><<<g, 256, 0, s>>>(t);
  else vsum_refresh_list<0><<<g, 256, 0, s>>>(t);
  cudaMemsetAsync(n_ptr, 0, sizeof(unsigned long long), s);
}
// Before each op of evict_bench (after lab_prepare): lab 13 restores the warmed summaries (lab_prepare did), an empty
// list, the evictor's appends on; every other lab: appends off.
inline void t30_list_prepare(int lab, const TableRef& t, cudaStream_t s) {
  static int64_t* list = nullptr;
  static unsigned long long* cnt = nullptr;
  if (list == nullptr) {
    if (cudaMalloc(&list, 2 * t.num_buckets * sizeof(int64_t)) != cudaSuccess) std::abort();
    if (cudaMalloc(&cnt, sizeof(unsigned long long)) != cudaSuccess) std::abort();
    cudaMemcpyToSymbol(g_vlist, &list, sizeof(list));
    cudaMemcpyToSymbol(g_vlist_n, &cnt, sizeof(cnt));
  }
  const int on = lab >= 13 && lab <= 17 ? 1 : 0;
  const int at = lab == 16 ? 1 : kVsumRefreshAt;  // lab 16: flagged only when its last entry is taken
  cudaMemcpyToSymbolAsync(g_vsum_refresh_at, &at, sizeof(at), 0, cudaMemcpyHostToDevice, s);
  cudaMemsetAsync(cnt, 0, sizeof(unsigned long long), s);
  cudaMemcpyToSymbolAsync(g_vlist_on, &on, sizeof(on), 0, cudaMemcpyHostToDevice, s);
}

}  // namespace table
}  // namespace dynamicemb
