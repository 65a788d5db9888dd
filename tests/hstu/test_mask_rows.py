"""The target-mask paths against the element rule, on the CPU. Forwards (Hopper fwd_silu_mask in
hstu_fwd_sm90_tiles.cuh, sm80-class hstu_fwd_kernel): SeqMask::row_keys (a row's keys as two intervals) and
fwd_key_interval_bits (hstu_common.cuh: those intervals as the bits of a thread's accumulator elements), BN 32 (the
sm80-class 32-key sub-tiles) / 64 / 128 / 192. Hopper backward (hstu_bwd_sm90_kernel.cuh): bwd_row_key_bits
(hstu_bwd_sm90_traits.cuh, the bits of a thread's S^T elements from row_keys) and the no-target rule on tiles without
target rows or keys. The sm80-class forward (hstu_fwd_sm80_kernel.cuh): row_keys of each query row once per block
(its shared-memory table), fwd_key_interval_bits per m16 tile (one or two per warp) over 32- / 64-key sub-tiles, and
fwd_pair_keep, the AND masks of P's packed pairs. The sm80-class backward (`bwd80`): bwd_pds_keep_bits
(hstu_bwd_sm80_pds_kernel.cuh, FA2's warp layout: SMT x SNT m16n8 score tiles per warp, 32 / 64-bit keep masks) and
bwd_pds_full_rows (its full query tiles per key block as two intervals, against SeqMask::tile_full),
bwd_st_mask_rows (hstu_bwd_sm80_kernel.cuh, the old layouts' S^T fragments, zeroing S and dP) and the deterministic
dQ kernel's fwd_key_interval_bits over 16 / 32 keys (the `fwd` case's check<16>, <32>). Each must give
SeqMask::allowed(r, j) for every element of every thread of a tile, for random masks (targets, groups, contexts, left
/ right windows, the GR rule). The device code is compiled as host C++ (its
__device__ qualifiers dropped) by the system's C++ compiler."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMON = os.path.join(ROOT, "hstu", "csrc", "common", "hstu_common.cuh")
FWD80 = os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_fwd_sm80_kernel.cuh")
BWD = os.path.join(ROOT, "hstu", "csrc", "sm90", "hstu_bwd_sm90_traits.cuh")
PDS80 = os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_pds_kernel.cuh")
BWD80 = os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_kernel.cuh")
CXX = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")

DRIVER = r"""
#include <climits>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <random>
using std::max;
using std::min;
#define __device__
#define __forceinline__ inline
%(seqmask)s
%(bits)s
%(bwd_bits)s
%(pair_keep)s
%(pds80)s
%(st80)s
template <int BN>
long check(const SeqMask& m, std::mt19937& rng, long& bad) {
  long n = 0;
  for (int n0 = 0; n0 < m.lk + BN; n0 += BN) {
    const int row_w0 = std::uniform_int_distribution<int>(-70, m.lk + 10)(rng);
    for (int warp = 0; warp < 4; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int jj = n0 + 2 * (lane %% 4);  // the kernel's indexing (fwd_silu_mask)
        uint32_t bits[(BN + 63) / 64] = {};
        for (int half = 0; half < 2; ++half) {
          int hlo, hhi, tlo, thi;
          m.row_keys(row_w0 + 16 * warp + lane / 4 + 8 * half, hlo, hhi, tlo, thi);
          fwd_key_interval_bits<BN>(bits, jj, half, hlo, hhi);
          fwd_key_interval_bits<BN>(bits, jj, half, tlo, thi);
        }
        for (int e = 0; e < BN / 2; ++e) {
          const int r = row_w0 + 16 * warp + lane / 4 + 8 * ((e %% 4) / 2);
          const int j = jj + 8 * (e / 4) + (e %% 2);
          ++n;
          if (m.allowed(r, j) != static_cast<bool>((bits[e / 32] >> (e %% 32)) & 1u) && ++bad <= 5) {
            printf("mismatch BN %%d lk %%d hist %%d ctx %%d group %%d wl %%d wr %%d gr %%d: r %%d j %%d\n", BN,
                   m.lk, m.hist, m.ctx, m.group, m.wl, m.wr, m.gr, r, j);
          }
        }
      }
    }
  }
  return n;
}
// The backward's S^T tiles (BM query positions from r0 >= 0, 64 keys from n0 per warpgroup): bwd_row_key_bits on
// every tile, the kernel's no-target rule on the tiles it takes it for.
template <int BM>
long check_bwd(const SeqMask& m, std::mt19937& rng, long& bad) {
  long n = 0;
  for (int n0 = 0; n0 < m.lk + 64; n0 += 64) {
    const int r0 = std::uniform_int_distribution<int>(0, m.lk + 10)(rng);
    const bool no_tgt = (m.hist == m.lk || max(r0 + BM, n0 + 64) <= m.hist) && !m.gr_window();
    for (int warp = 0; warp < 4; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int jr = n0 + 16 * warp + lane / 4;  // the kernel's indexing (S^T fragment)
        const int rc = r0 + 2 * (lane %% 4);
        const uint32_t bits = bwd_row_key_bits<BM>(m, rc, jr);
        for (int e = 0; e < BM / 2; ++e) {
          const int j = jr + 8 * ((e %% 4) / 2);
          const int r = rc + 8 * (e / 4) + (e %% 2);
          const bool want = m.allowed(r, j);
          const bool fast = r < m.lk && j < m.lk &&
                            (r < m.ctx || ((m.wl < 0 || j >= r - m.wl) && (m.wr < 0 || j <= r + m.wr)));
          ++n;
          if ((want != static_cast<bool>((bits >> e) & 1u) || (no_tgt && fast != want)) && ++bad <= 5) {
            printf("bwd mismatch BM %%d lk %%d hist %%d ctx %%d group %%d wl %%d wr %%d gr %%d: r %%d j %%d\n", BM,
                   m.lk, m.hist, m.ctx, m.group, m.wl, m.wr, m.gr, r, j);
          }
        }
      }
    }
  }
  return n;
}
// The sm80-class forward's tiles (BM = 4 warps x MT m16 tiles of query rows from r0, sub-tiles of BNS keys from
// n0): the rows' row_keys table, the bits of each m16 tile over the thread's two rows, fwd_pair_keep per packed pair
// of P (the A fragment of P V: pair q of k16 step ks holds acc_s[mt][2 ks + q / 2][2 (q %% 2) + {0, 1}]).
template <int BNS, int MT>
long check_fwd80(const SeqMask& m, std::mt19937& rng, long& bad) {
  constexpr int BM = 4 * MT * 16;
  long n = 0;
  const int r0 = std::uniform_int_distribution<int>(0, m.lk + 10)(rng);
  int tab[BM][4];
  for (int i = 0; i < BM; ++i) m.row_keys(r0 + i, tab[i][0], tab[i][1], tab[i][2], tab[i][3]);
  for (int n0 = 0; n0 < m.lk + BNS; n0 += BNS) {
    for (int warp = 0; warp < 4; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int jw = n0 + 2 * (lane %% 4);
        for (int mt = 0; mt < MT; ++mt) {
          const int row = warp * MT * 16 + mt * 16 + lane / 4;  // rows row and row + 8 of the block
          uint32_t bits[1] = {0u};
          for (int hf = 0; hf < 2; ++hf) {
            const int* t = tab[row + 8 * hf];
            fwd_key_interval_bits<BNS>(bits, jw, hf, t[0], t[1]);
            fwd_key_interval_bits<BNS>(bits, jw, hf, t[2], t[3]);
          }
          for (int ks = 0; ks < BNS / 16; ++ks) {
            for (int q = 0; q < 4; ++q) {
              const uint32_t keep = fwd_pair_keep(bits[0], ks, q);
              for (int odd = 0; odd < 2; ++odd) {
                const int r = r0 + row + 8 * (q %% 2);
                const int j = jw + 8 * (2 * ks + q / 2) + odd;
                const uint32_t h = (keep >> (16 * odd)) & 0xffffu;
                ++n;
                if ((h != 0u && h != 0xffffu) || m.allowed(r, j) != (h == 0xffffu)) {
                  if (++bad <= 5)
                    printf("fwd80 mismatch BNS %%d MT %%d lk %%d hist %%d ctx %%d group %%d wl %%d wr %%d gr %%d: r %%d "
                           "j %%d\n", BNS, MT, m.lk, m.hist, m.ctx, m.group, m.wl, m.wr, m.gr, r, j);
                }
              }
            }
          }
        }
      }
    }
  }
  return n;
}
// The sm80-class FA2-layout backward's score tiles (warp tiles of SMT x SNT m16n8 tiles at query positions from
// r0 >= 0, keys from n0; 4 warps at random offsets): bwd_pds_keep_bits on every tile.
template <int SMT, int SNT, typename Keep>
long check_pds(const SeqMask& m, std::mt19937& rng, long& bad) {
  long n = 0;
  for (int n0 = 0; n0 < m.lk + 8 * SNT; n0 += 8 * SNT) {
    const int r0 = std::uniform_int_distribution<int>(0, m.lk + 10)(rng);
    for (int warp = 0; warp < 4; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int rbase = r0 + 16 * SMT * warp + lane / 4, jbase = n0 + 2 * (lane %% 4);  // (hstu_bwd_pds_body)
        const Keep keep = bwd_pds_keep_bits<SMT, SNT, Keep>(m, rbase, jbase);
        for (int mt = 0; mt < SMT; ++mt)
          for (int nt = 0; nt < SNT; ++nt)
            for (int e = 0; e < 4; ++e) {
              const int r = rbase + mt * 16 + (e / 2) * 8, j = jbase + nt * 8 + (e %% 2);
              ++n;
              if (m.allowed(r, j) != static_cast<bool>((keep >> ((mt * SNT + nt) * 4 + e)) & 1u) && ++bad <= 5) {
                printf("pds mismatch SMT %%d SNT %%d lk %%d hist %%d ctx %%d group %%d wl %%d wr %%d gr %%d: r %%d j %%d\n",
                       SMT, SNT, m.lk, m.hist, m.ctx, m.group, m.wl, m.wr, m.gr, r, j);
              }
            }
      }
    }
  }
  return n;
}
// The sm80-class FA2-layout backward's full-tile intervals (bwd_pds_full_rows) against SeqMask::tile_full: every
// query tile position r0 around the sequence, every key block.
template <int BM, int BN>
long check_full(const SeqMask& m, long& bad) {
  long n = 0;
  for (int n0 = 0; n0 < m.lk + BN; n0 += BN) {
    int x, y, z;
    bwd_pds_full_rows<BM, BN>(m, n0, x, y, z);
    for (int r0 = -BM - 8; r0 < m.lk + 8; ++r0) {
      ++n;
      if ((r0 <= x || (y <= r0 && r0 <= z)) != m.tile_full(r0, r0 + BM, n0, n0 + BN) && ++bad <= 5) {
        printf("full mismatch BM %%d BN %%d lk %%d hist %%d ctx %%d wl %%d wr %%d: r0 %%d n0 %%d\n", BM, BN, m.lk,
               m.hist, m.ctx, m.wl, m.wr, r0, n0);
      }
    }
  }
  return n;
}
// The old sm80-class layouts' S^T fragments (BM = 8 QT query positions from r0 >= 0, 16 keys per warp from n0):
// bwd_st_mask_rows zeroes exactly the masked elements of S and dP.
template <int QT>
long check_st(const SeqMask& m, std::mt19937& rng, long& bad) {
  long n = 0;
  for (int n0 = 0; n0 < m.lk + 64; n0 += 64) {
    const int r0 = std::uniform_int_distribution<int>(0, m.lk + 10)(rng);
    for (int warp = 0; warp < 4; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int rc = r0 + 2 * (lane %% 4), jr = n0 + 16 * warp + lane / 4;  // (hstu_bwd_body)
        float s[QT][4], dp[QT][4];
        for (int nt = 0; nt < QT; ++nt)
          for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 1.f + e;
        bwd_st_mask_rows(m, rc, jr, s, dp);
        for (int nt = 0; nt < QT; ++nt)
          for (int e = 0; e < 4; ++e) {
            const int r = rc + 8 * nt + (e %% 2), j = jr + 8 * (e / 2);
            const float want = m.allowed(r, j) ? 1.f + e : 0.f;
            ++n;
            if ((s[nt][e] != want || dp[nt][e] != want) && ++bad <= 5) {
              printf("st mismatch QT %%d lk %%d hist %%d ctx %%d group %%d wl %%d wr %%d gr %%d: r %%d j %%d\n", QT,
                     m.lk, m.hist, m.ctx, m.group, m.wl, m.wr, m.gr, r, j);
            }
          }
      }
    }
  }
  return n;
}
int main(int argc, char** argv) {
  const bool bwd = argc > 1 && argv[1][0] == 'b' && argv[1][3] != '8';
  const bool bwd80 = argc > 1 && argv[1][0] == 'b' && argv[1][3] == '8';
  const bool fwd80 = argc > 1 && argv[1][0] == 's';
  std::mt19937 rng(%(seed)d);
  long n = 0, bad = 0;
  for (int it = 0; it < %(masks)d; ++it) {
    auto u = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
    SeqMask m;
    m.lk = u(0, 700);
    m.hist = m.lk - (u(0, 3) == 0 ? 0 : u(0, m.lk));
    m.ctx = u(0, 2) == 0 ? 0 : u(0, min(m.hist, 90));
    if (u(0, 9) == 0) m.ctx = u(0, m.lk + 3);  // (past the contract too)
    m.group = u(0, 2) == 0 ? 1 : (u(0, 1) ? u(1, 12) : u(1, 300));
    if (u(0, 20) == 0) m.group = INT_MAX;
    m.wl = u(0, 2) == 0 ? -1 : (u(0, 30) == 0 ? (1 << 30) - 1 : u(0, 400));
    m.wr = u(0, 2) == 0 ? 0 : (u(0, 1) ? -1 : (u(0, 30) == 0 ? (1 << 30) - 1 : u(0, 400)));
    m.gr = u(0, 1);
    m.offset = 0;
    if (fwd80) {
      n += check_fwd80<32, 1>(m, rng, bad) + check_fwd80<64, 1>(m, rng, bad) + check_fwd80<32, 2>(m, rng, bad) +
           check_fwd80<64, 2>(m, rng, bad);
    } else if (bwd80) {
      n += check_pds<2, 4, uint32_t>(m, rng, bad) + check_pds<1, 4, uint32_t>(m, rng, bad) +
           check_pds<4, 4, uint64_t>(m, rng, bad) + check_st<8>(m, rng, bad) + check_st<4>(m, rng, bad) +
           check_full<64, 128>(m, bad) + check_full<64, 64>(m, bad);
    } else {
      n += bwd ? check_bwd<64>(m, rng, bad) + check_bwd<64>(m, rng, bad)
               : check<16>(m, rng, bad) + check<32>(m, rng, bad) + check<64>(m, rng, bad) + check<128>(m, rng, bad) +
                     check<192>(m, rng, bad);
    }
  }
  printf("elements %%ld mismatches %%ld\n", n, bad);
  return bad != 0;
}
"""


def _block(text, start, end_line):
    i = text.index(start)
    return text[i:text.index(end_line, i) + len(end_line)]


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.skipif(not all(os.path.exists(f) for f in (COMMON, BWD, FWD80, PDS80, BWD80)),
                    reason="hstu/csrc is not in this tree")
@pytest.mark.parametrize("kernel", ["fwd", "bwd", "sm80_fwd", "bwd80"])
def test_target_mask_bits_match_the_element_rule(tmp_path, kernel):
    seqmask = _block(open(COMMON).read(), "struct SeqMask {", "\n};\n")
    bits = _block(open(COMMON).read(), "template <int BN>\n__device__ __forceinline__ void fwd_key_interval_bits",
                  "\n}\n")
    bwd_bits = _block(open(BWD).read(), "template <int BM>\n__device__ __forceinline__ uint32_t bwd_row_key_bits",
                      "\n}\n")
    pair_keep = _block(open(FWD80).read(), "__device__ __forceinline__ uint32_t fwd_pair_keep", "\n}\n")
    pds80 = _block(open(PDS80).read(), "template <int SMT, int SNT, typename Keep>\n__device__ __forceinline__ Keep "
                   "bwd_pds_keep_bits", "\n}\n") + "\n" + _block(
        open(PDS80).read(), "template <int BM, int BN>\n__device__ __forceinline__ void bwd_pds_full_rows", "\n}\n")
    st80 = _block(open(BWD80).read(), "template <int QT>\n__device__ __forceinline__ void bwd_st_mask_rows", "\n}\n")
    assert "row_keys" in seqmask and re.search(r"bool allowed\(int r, int j\)", seqmask)
    src = tmp_path / "mask_rows.cpp"
    src.write_text(DRIVER % dict(seqmask=seqmask, bits=bits, bwd_bits=bwd_bits, pair_keep=pair_keep, pds80=pds80,
                                st80=st80, seed=20261129, masks=3000))
    exe = tmp_path / "mask_rows"
    subprocess.run([CXX, "-O2", "-std=c++17", str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    res = subprocess.run([str(exe), kernel], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout
    assert " mismatches 0" in res.stdout and int(res.stdout.split()[1]) > 10**8, res.stdout
