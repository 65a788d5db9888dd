// Compiled by seqmask_bruteforce.sh (mask.h: SeqMask, SeqInfo and bwd_work_tiles extracted from hstu_common.cuh; the
// FP8 kernels' bounds from their headers).
#include <cstdio>

#include "mask.h"
// hstu_mask (hstu/_reference.py), one element
static bool ref(int lq, int lk, int c, int t, int g, int wl, int wr, bool gr, int row, int j) {
  int h = lk - t, i = row + (lk - lq);
  auto tpos = [&](int x) { return x < h ? x : h + (x - h) % g; };
  int ti = tpos(i), tj = tpos(j);
  if (gr && c > 0) { ti = max(ti - c + 1, 0); tj = max(tj - c + 1, 0); }
  bool base = (wl < 0 || tj >= ti - wl) && (wr < 0 || tj <= ti + wr);
  bool grp = j < h || (i >= h && (i - h) / g == (j - h) / g);
  return (base && grp) || (i < c && j < h);
}
int main() {
  long checks = 0;
  for (int lk = 1; lk <= 14; ++lk)
  for (int lq = 1; lq <= lk; ++lq)
  for (int t = 0; t <= lk; ++t)
  for (int c = 0; c <= lk - t; ++c)
  for (int g = 1; g <= 3; ++g)
  for (int wl = -1; wl <= 5; ++wl)
  for (int wr : {-1, 0, 1, 3})
  for (int gr = 0; gr < 2; ++gr) {
    if ((c > 0 || t > 0) && wr != 0) continue;  // the API's domain (contexts/targets need wr == 0)
    hstu::SeqMask m{lk, lk - lq, lk - t, c, g, wl, wr, gr};
    bool A[16][16];
    for (int r = 0; r < lq; ++r) for (int j = 0; j < lk; ++j) {
      A[r][j] = ref(lq, lk, c, t, g, wl, wr, gr, r, j);
      if (m.allowed(r + lk - lq, j) != A[r][j]) { printf("allowed mismatch lk%d lq%d t%d c%d g%d w%d,%d gr%d r%d j%d\n", lk, lq, t, c, g, wl, wr, gr, r, j); return 1; }
      ++checks;
    }
    // The Hopper forward's no-target fast path (hstu_fwd_sm90_kernel.cuh, copied here): one interval [lo, hi) a row.
    if (t == 0) {
      for (int r = 0; r < lq; ++r) {
        const int rp = r + lk - lq;
        int lo = m.wl < 0 ? 0 : rp - m.wl;
        if (m.gr && lo < m.ctx) lo = 0;
        int hi = m.wr < 0 ? m.lk : min(m.lk, rp + m.wr + 1);
        if (rp < m.ctx) { lo = 0; hi = m.lk; }
        for (int j = 0; j < lk; ++j)
          if ((j >= lo && j < hi) != A[r][j]) { printf("fwd fast path mismatch\n"); return 1; }
      }
    }
    // key_range / full tiles over all row and key intervals
    for (int r0 = 0; r0 < lq; ++r0) for (int r1 = r0 + 1; r1 <= lq; ++r1) {
      int kb, ke; m.key_range(r0 + lk - lq, r1 + lk - lq, kb, ke);
      for (int r = r0; r < r1; ++r) for (int j = 0; j < lk; ++j)
        if (A[r][j] && (j < kb || j >= ke)) { printf("key_range miss lk%d lq%d t%d c%d g%d w%d,%d gr%d rows[%d,%d) j%d kr[%d,%d)\n", lk, lq, t, c, g, wl, wr, gr, r0, r1, j, kb, ke); return 1; }
      for (int j0 = 0; j0 < lk; ++j0) for (int j1 = j0 + 1; j1 <= lk; ++j1) {
        bool all = true;
        for (int r = r0; r < r1; ++r) for (int j = j0; j < j1; ++j) all &= A[r][j];
        if (m.tile_full(r0 + lk - lq, r1 + lk - lq, j0, j1) && !all) { printf("tile_full wrong\n"); return 1; }
        if (m.tile_full_targets(r0 + lk - lq, r1 + lk - lq, j0, j1) && !all) { printf("tile_full_targets wrong\n"); return 1; }
      }
      for (int bn = 1; bn <= 4; ++bn) { int lo, hi; m.full_tiles(r0 + lk - lq, r1 + lk - lq, bn, lo, hi);
        for (int j0 = 0; j0 + bn <= lk; ++j0) if (j0 >= lo && j0 <= hi) {
          bool all = true; for (int r = r0; r < r1; ++r) for (int j = j0; j < j0 + bn; ++j) all &= A[r][j];
          if (!all) { printf("full_tiles wrong\n"); return 1; } } }
    }
    // the FP8 backward's full-tile bounds: exactly tile_full's first rows, any row position (the kernel's m0 + offset)
    for (int j0 = 0; j0 < lk; ++j0) for (int j1 = j0 + 1; j1 <= lk; ++j1) for (int bm = 1; bm <= 4; ++bm) {
      int fa, fb0, fb1; hstu::fp8_bwd_full_rows(m, j0, j1, bm, fa, fb0, fb1);
      for (int r0 = -6; r0 <= lk + 2; ++r0)
        if ((r0 <= fa || (fb0 <= r0 && r0 <= fb1)) != m.tile_full(r0, r0 + bm, j0, j1)) { printf("fp8_bwd_full_rows wrong lk%d lq%d t%d c%d g%d w%d,%d keys[%d,%d) bm%d r0 %d\n", lk, lq, t, c, g, wl, wr, j0, j1, bm, r0); return 1; }
    }
    // the FP8 forward's unmasked-tile bounds: exactly tile_full_targets (targets) / tile_full over the rows [r0, r0 + bm)
    // of any position and every tile start (tiles past lk too)
    for (int bn = 1; bn <= 4; ++bn) for (int bm = 1; bm <= 4; ++bm) for (int r0 = -6; r0 <= lk + 2; ++r0)
    for (int tg = 0; tg < 2; ++tg) {
      int lo, hi; hstu::fp8_full_tiles(m, r0, r0 + bm, bn, tg != 0, lo, hi);
      for (int j0 = 0; j0 <= lk + bn; ++j0) {
        const bool full = tg ? m.tile_full_targets(r0, r0 + bm, j0, j0 + bn) : m.tile_full(r0, r0 + bm, j0, j0 + bn);
        if ((j0 >= lo && j0 <= hi) != full) { printf("fp8_full_tiles wrong lk%d lq%d t%d c%d g%d w%d,%d gr%d rows[%d,%d) bn%d j0 %d tg%d\n", lk, lq, t, c, g, wl, wr, gr, r0, r0 + bm, bn, j0, tg); return 1; }
      }
    }
    for (int j0 = 0; j0 < lk; ++j0) for (int j1 = j0 + 1; j1 <= lk; ++j1) {
      int rb, re; m.row_range(j0, j1, rb, re);
      for (int r = 0; r < lq; ++r) for (int j = j0; j < j1; ++j)
        if (A[r][j] && (r + lk - lq < rb || r + lk - lq >= re)) { printf("row_range miss lk%d lq%d t%d c%d g%d w%d,%d gr%d keys[%d,%d) r%d rr[%d,%d)\n", lk, lq, t, c, g, wl, wr, gr, j0, j1, r, rb, re); return 1; }
    }
    // bwd_work_tiles with small tiles: every allowed (row, key) lies in a visited query tile of its key block
    hstu::SeqInfo si{}; si.lq = lq; si.lk = lk; si.mask = m;
    for (int BMi = 0; BMi < 2; ++BMi) {
      const int BM = BMi ? 3 : 2, BN = BMi ? 2 : 3;
      for (int n0 = 0; n0 < lk; n0 += BN) {
        int mb, na, gap, nmt;
        if (BMi) hstu::bwd_work_tiles<3, 2, true>(si, n0, mb, na, gap, nmt); else hstu::bwd_work_tiles<2, 3, true>(si, n0, mb, na, gap, nmt);
        for (int r = 0; r < lq; ++r) for (int j = n0; j < min(lk, n0 + BN); ++j) if (A[r][j]) {
          int tile = r / BM, idx = tile - mb;
          bool in = idx >= 0 && (idx < na || (idx >= na + gap && idx < nmt + gap));
          if (!in) { printf("bwd_work_tiles miss lk%d lq%d t%d c%d g%d w%d,%d gr%d n0 %d r%d\n", lk, lq, t, c, g, wl, wr, gr, n0, r); return 1; }
        }
      }
    }
  }
  printf("ok, %ld element checks\n", checks);
}
