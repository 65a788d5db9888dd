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
// self scan, that used the summary, that marked it none, and self scans that could leave no summary; printed (and
// reset) by evict_bench before each op's preparation, i.e. the previous op's (the first line: the warm-up's).
#ifdef T30_COUNT
__device__ unsigned long long g_t30[4];
#define T30_ADD(i) atomicAdd(&g_t30[i], 1ull)
inline void t30_report() {
  unsigned long long h[4];
  cudaMemcpyFromSymbol(h, g_t30, sizeof(h));
  if (h[0] + h[1] + h[2] + h[3] == 0) return;
  std::printf("t30 counts: self %llu used %llu marked_none %llu self_none %llu\n", h[0], h[1], h[2], h[3]);
  const unsigned long long z[4] = {0, 0, 0, 0};
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
template <int E>
__device__ __forceinline__ BucketScan scan_bucket_self(const Tile& tile, const TableRef& t, int64_t base, uint32_t d4,
                                                       uint64_t new_score, uint4& summary) {
  const int l = static_cast<int>(tile.thread_rank());
  BucketScan r{EvictCand{~0ull, -1, false}, 0u, 0ull};
  bool small = t.bucket_capacity == 128;
  uint32_t mins = 0, seconds = 0, b2 = ~0u, b3 = ~0u;  // slot bytes (chunk i in byte i), bounds
  uint32_t r1a = ~0u, r2a = ~0u, r1b = ~0u, r2b = ~0u;  // the two least ranks of the lane's chunks (E = 2)
  int pad = 0;
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
    if (total <= 8 && total > 0) {
      w |= total == 8 ? 0ull : p & (~0ull << (8 * total));
      x = static_cast<uint32_t>(w);
      y = static_cast<uint32_t>(w >> 32);
      bound = b3;
    }
  }
  const bool ok = new_score < (1ull << 48) && static_cast<uint64_t>(bound) < (new_score << 8);
  summary = ok ? make_uint4(x, y, bound, 0u) : make_uint4(kVsumNone, kVsumNone, 0u, 0u);
  return r;
}

}  // namespace table
}  // namespace dynamicemb
