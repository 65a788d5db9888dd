// Hopper (sm_90a) FP8 (e4m3) HSTU backward at D = 256 (issue 36; private: kernel_options(fp8_bwd=True)).
//
// Why a kernel of its own: the D = 64 / 128 kernel (hstu_bwd_fp8_sm90_kernel.cuh) gives each consumer warpgroup 64
// keys and all D columns of dK / dV; at D = 256 those are 2 x 128 fp32 registers a thread, past the limit. Here the
// bf16 kernel's split-D tiling (hstu_bwd_sm90_kernel.cuh, kSplitD): one CTA per (64-key block, head, batch), a
// producer warpgroup issuing TMA (K, V, K^T once; per 64-row query tile Q, dO, Q^T, dO^T into a ring of 2 stages),
// and two consumer warpgroups that share the block's 64 keys and split the D columns of dK, dV and dQ: warpgroup g
// owns columns [128 g, 128 g + 128). Per query tile (math and rounding points: hstu/_fp8_bwd.py; the dS factor's
// group is the 64 x 64 tile, DS_KEYS_D256):
//   wg g: S^T and dP^T of queries [32 g, 32 g + 32) (SS m64n32 over D), P8 = e4m3(SiLU(S)) and dS' = dP^T SiLU'(S)
//         alpha q_s do_s v_s / N masked; its k-step g of P8^T (dV's RS A fragments: the m64n64 tile's elements
//         16 g ..) to shared memory in the accumulator's fragment order (thread t of the other warpgroup reads thread
//         t's words), its warps' amax posted
//   barrier; both: the other k-step of P8^T; dV_g += P8^T dO^T[g] (RS m64n128); u = max(u, pow2ceil(amax / 448))
//         (acc_dk in units of u: rescaled when it grows); dS8 = e4m3(dS' / u) of its 32 queries to shared memory
//         twice: fragment order (dK's A) and (queries x keys, 64-byte swizzle, keys paired as K^T:
//         hstu_fp8_pair_perm) for dQ's A
//   barrier; both: the other k-step of dS8^T; dK_g += dS8^T Q^T[g] (RS m64n128), dQ[:, g] = dS8 K^T[g] (SS, two
//         m64n64 halves), * u k_s / q_s,
//         reduce-added in bf16 into the fragment-ordered dq workspace (hstu_fp8_bwd_dq_tiled_floats: block g of
//         each 16-row group is warpgroup g's columns); the stage released.
// All synchronous (two named barriers a tile, no drift between the warpgroups): the first D = 256 kernel, correct
// before fast (docs/hstu_kernel_notes.md, "The FP8 backward at D = 256"). !kQSplit (lab, diag kFp8BwdD256Sync): wg 0
// computes S^T and the pointwise P8 / SiLU' for all 64 queries, wg 1 dP^T and then dS' from those (three barriers).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90_kernel.cuh"  // fp8_pack_a64, fp8_pow2_ceil, the stores, red_add_v4_bf16x2
#include "hstu/csrc/sm90/hstu_bwd_sm90_dq.cuh"          // dq_group_index
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh"  // fp8_descale, make_desc_kmajor, cvt_e4m3x4
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/wgmma_fp8_sm90.cuh"

namespace hstu {
namespace sm90 {

struct Fp8BwdD256Traits {
  static constexpr int D = 256;
  static constexpr int kBlockM = 64;   // query rows per tile
  static constexpr int kBlockN = 64;   // keys per CTA (both consumer warpgroups)
  static constexpr int kPanel = 128;   // K / V / Q / dO rows as two 128-byte panels (TMA box width, 128B swizzle)
  static constexpr int kRowsBytes = 64 * D;  // K, V, Q or dO: 64 rows x D bytes (two panels of 8 KB)
  static constexpr int kTBytes = D * 64;     // K^T, Q^T or dO^T: D rows of 64 keys / queries (64-byte swizzle)
  static constexpr int kOffV = kRowsBytes;
  static constexpr int kOffKt = 2 * kRowsBytes;
  static constexpr int kOffStage = kOffKt + kTBytes;
  // stage: Q, dO (rows), Q^T, dO^T
  static constexpr int kStageBytes = 2 * kRowsBytes + 2 * kTBytes;
  static constexpr int kStages = 2;
  static constexpr int kOffDs8 = kOffStage + kStages * kStageBytes;  // dS8 (64 queries x 64 keys, 64B swizzle)
  static constexpr int kDs8Bytes = 64 * 64;
  static constexpr int kOffXd = kOffDs8 + kDs8Bytes;  // SiLU' factors d: 32 floats per thread of warpgroup 0
  static constexpr int kXdBytes = 128 * 32 * 4;
  static constexpr int kOffXp = kOffXd + kXdBytes;  // P8 fragments: 8 words per thread
  static constexpr int kOffXs = kOffXp + 128 * 32;  // dS8 fragments: 8 words per thread
  static constexpr int kOffRed = kOffXs + 128 * 32;  // amax words of the consumer warps
  static constexpr int kBarOffset = kOffRed + 128;
  // mbarriers: K / V / K^T, full[2], empty[2] (40 B), the stages' q / dO factors at 64 + 8 s
  static constexpr int kSmem = kBarOffset + 128 + 1024;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kSmem <= 232448, "shared memory");
  static_assert(kOffStage % 1024 == 0 && kStageBytes % 1024 == 0 && kOffDs8 % 1024 == 0, "swizzled tiles");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= (65536 / kThreads) / 8 * 8 * kThreads,
                "register budget");
};

__device__ __forceinline__ void st_shared_v4_u32(uint32_t addr, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
__device__ __forceinline__ void ld_shared_v4_u32(uint32_t addr, uint32_t& x, uint32_t& y, uint32_t& z, uint32_t& w) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
               : "r"(addr)
               : "memory");
}

// The K-major descriptor of k-step kk (32 bytes) of a 64-row x 256-byte operand stored as two 128-byte panels.
__device__ __forceinline__ uint64_t fp8_d256_desc_rows(uint32_t tile, int kk) {
  return desc_k32(make_desc_kmajor(tile + (kk / 4) * (64 * 128), 128), kk % 4);
}

// kQSplit (the default): both warpgroups compute S^T and dP^T of their 32 queries and their pointwise passes (two
// barriers a tile); false (diag kFp8BwdD256Sync): warpgroup 0 S^T, warpgroup 1 dP^T, their passes in turn (three).
template <bool kQSplit>
__global__ void __launch_bounds__(384, 1)
    hstu_bwd_fp8_sm90_d256_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                  const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                                  const __grid_constant__ CUtensorMap tm_qt, const __grid_constant__ CUtensorMap tm_dot,
                                  const __grid_constant__ CUtensorMap tm_kt, const HstuParams p,
                                  const HstuFp8BwdParams f) {
  using C = Fp8BwdD256Traits;
  constexpr int D = C::D;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base;
  const uint32_t sV = base + C::kOffV;
  const uint32_t sKt = base + C::kOffKt;
  const uint32_t bar = base + C::kBarOffset;
  auto bar_full = [&](int s) { return bar + 8u + 8u * s; };
  auto bar_empty = [&](int s) { return bar + 8u + 8u * (S + s); };
  auto stage = [&](int s) { return base + C::kOffStage + s * C::kStageBytes; };  // Q, dO, Q^T, dO^T

  const int n_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const SeqInfo si = seq_info(p, b);
  const int n0 = n_block * BN;
  if (n0 >= si.lk_alloc) return;
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, true>(si, n0, mb_begin, n_a, gap, n_mt);
  auto tile_of = [&](int i) { return mb_begin + i + (i >= n_a ? gap : 0); };
  const int64_t blk_cols_q = p.total_q / 128 + p.batch;

  const int tid = threadIdx.x;
  if (tid == 0) {
    mbar_init(bar, 1);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      mbar_init(bar_full(s), 1);
      mbar_init(bar_empty(s), 8);  // one arrive per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (tid < 128) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0 && n_mt > 0) {
      mbar_arrive_expect_tx(bar, 2 * C::kRowsBytes + C::kTBytes);
#pragma unroll
      for (int pn = 0; pn < 2; ++pn) {
        tma_load_3d(sK + pn * 64 * C::kPanel, &tm_k, bar, C::kPanel * pn, h, si.k_start + n0);
        tma_load_3d(sV + pn * 64 * C::kPanel, &tm_v, bar, C::kPanel * pn, h, si.k_start + n0);
      }
      tma_load_3d(sKt, &tm_kt, bar, static_cast<int>(hstu_fp8_vt_start(si.k_start, b)) + n0, 0, h);
      const int qt_col0 = static_cast<int>(hstu_fp8_vt_start(si.q_start, b));
      for (int i = 0; i < n_mt; ++i) {
        const int s = i % S;
        const uint32_t ph = (i / S) & 1;
        const int m0 = tile_of(i) * BM;
        const uint32_t st = stage(s);
        const float fq = fp8_descale(f.q_descale, f.descale_mode, b, h, p.heads, blk_cols_q, si.q_start, m0 / 128);
        const float fdo = fp8_descale(f.do_descale, kFp8Block, b, h, p.heads, blk_cols_q, si.q_start, m0 / 128);
        mbar_wait(bar_empty(s), ph ^ 1);
        st_shared_u32(bar + 64u + 8u * s, __float_as_uint(fq));  // (released by the full barrier's arrive)
        st_shared_u32(bar + 68u + 8u * s, __float_as_uint(fdo));
        mbar_arrive_expect_tx(bar_full(s), C::kStageBytes);
#pragma unroll
        for (int pn = 0; pn < 2; ++pn) {
          tma_load_3d(st + pn * 64 * C::kPanel, &tm_q, bar_full(s), C::kPanel * pn, h, si.q_start + m0);
          tma_load_3d(st + C::kRowsBytes + pn * 64 * C::kPanel, &tm_do, bar_full(s), C::kPanel * pn, h,
                      si.q_start + m0);
        }
        tma_load_3d(st + 2 * C::kRowsBytes, &tm_qt, bar_full(s), qt_col0 + m0, 0, h);
        tma_load_3d(st + 2 * C::kRowsBytes + C::kTBytes, &tm_dot, bar_full(s), qt_col0 + m0, 0, h);
      }
    }
    return;
  }
  // ---------------------------------------------------------------- consumer warpgroups
  setmaxnreg_inc<C::kConsumerRegs>();
  const int ctid = tid - 128;
  const int wg = __shfl_sync(0xffffffffu, ctid / 128, 0);
  const int warp = __shfl_sync(0xffffffffu, (ctid % 128) / 32, 0);
  const int lane = ctid % 32;
  const int wtid = ctid % 128;
  // k's and v's factors: one per CTA in every mode (its 64 keys lie in one 128-row block).
  const float ks = fp8_descale(f.k_descale, f.descale_mode, b, h, p.heads, f.total_k / 128 + p.batch, si.k_start,
                               n0 / 128);
  const float vs = fp8_descale(f.v_descale, f.descale_mode, b, h, p.heads, f.total_k / 128 + p.batch, si.k_start,
                               n0 / 128);
  const uint32_t sDs8 = base + C::kOffDs8;
  const uint32_t sXd = base + C::kOffXd;
  const uint32_t sXp = base + C::kOffXp;
  const uint32_t sXs = base + C::kOffXs;
  const uint32_t sRed = base + C::kOffRed;
  auto opaque = [](uint32_t x) {
    asm volatile("" : "+r"(x));
    return x;
  };
  constexpr uint32_t kBarP = 1, kBarAmax = 2, kBarDs = 3;  // (named barriers of the 256 consumer threads)

  float acc_dk[64];  // dK[:, 128 wg ..] in units of u
  float acc_dv[64];  // dV[:, 128 wg ..] in units of do_cur
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    acc_dk[i] = 0.f;
    acc_dv[i] = 0.f;
  }
  float u = 0.f, do_cur = 0.f;
  const int n = n_mt;
  for (int i = 0; i < n; ++i) {
    const int s = i % S;
    const uint32_t ph = (i / S) & 1;
    const int m0 = tile_of(i) * BM;
    if (i == 0) mbar_wait(bar, 0);
    mbar_wait(bar_full(s), ph);
    const float qs = __uint_as_float(ld_shared_u32(bar + 64u + 8u * s));
    const float dos = __uint_as_float(ld_shared_u32(bar + 68u + 8u * s));
    const uint32_t st = opaque(stage(s));
    if (dos != do_cur) {  // acc_dv in units of the tile's dO factor (before any wgmma of the tile)
      if (do_cur != 0.f) {
        const float r = do_cur / dos;
#pragma unroll
        for (int k = 0; k < 64; ++k) acc_dv[k] *= r;
      }
      do_cur = dos;
    }
    uint32_t pa[2][4];  // P8^T of the tile (dV's A fragments)
    uint32_t da[2][4];  // dS8^T of the tile (dK's A fragments)
    // dS' factor u of the tile from the posted warp maxima (both warpgroups alike; acc_dk has no wgmma in flight)
    auto tile_factor = [&](int words) {
      float amax = 0.f;
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        if (w < words) amax = fmaxf(amax, __uint_as_float(ld_shared_u32(sRed + 4 * w)));
      }
      const float sf = fp8_pow2_ceil_div448(amax);
      if (sf > u) {
        if (u > 0.f) {
          const float r = u / sf;
#pragma unroll
          for (int k = 0; k < 64; ++k) acc_dk[k] *= r;
        }
        u = sf;
      }
    };
    // The e4m3 words w of k-step hq (dS8^T's A fragment: queries 32 hq ..) as (64 queries x 64 keys) for dQ's A
    // (hstu_fp8_pair_perm's pairs, as K^T): stmatrix register m holds the 16-bit words (keys j, j + 8) of queries
    // 32 hq + 8 m + 2 (lane % 4), + 1; stored transposed, row i of matrix m is query 32 hq + 8 m + i's 16-byte chunk
    // `warp` (its keys 16 warp ..), 64-byte swizzle (chunk ^ (row / 2) % 4).
    auto store_ds8 = [&](const uint32_t(&w)[4], int hq) {
      uint32_t r[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t s0 = 2 * (m % 2);
        r[m] = __byte_perm(w[2 * (m / 2)], w[2 * (m / 2) + 1],
                           s0 | ((4 + s0) << 4) | ((s0 + 1) << 8) | ((5 + s0) << 12));
      }
      const int row = 32 * hq + lane;
      const uint32_t a = sDs8 + row * 64 + ((warp ^ ((row >> 1) & 3)) << 4);
      asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(r[0]),
                   "r"(r[1]), "r"(r[2]), "r"(r[3])
                   : "memory");
    };
    const float h_scale = 0.5f * p.alpha * qs * ks;
    const float c_ds = 0.5f * dos * vs * p.inv_scaling * p.alpha * qs;
    // x[wg] = own, x[wg ^ 1] from the other warpgroup's words at `addr` (constant indices: no local memory)
    auto own_and_other = [&](uint32_t(&x)[2][4], const uint32_t(&own)[4], uint32_t addr) {
      uint32_t o[4];
      ld_shared_v4_u32(addr, o[0], o[1], o[2], o[3]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        x[0][q] = wg == 0 ? own[q] : o[q];
        x[1][q] = wg == 0 ? o[q] : own[q];
      }
    };
    if constexpr (kQSplit) {
      // Both warpgroups: S^T and dP^T of queries [32 wg, 32 wg + 32) (SS m64n32 over D), their pointwise passes,
      // this warpgroup's k-step wg of P8^T / dS8^T (the m64n64 tile's elements 16 wg ..); the other k-step from
      // the other warpgroup.
      float acc_s[16], acc_p[16];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) {
        wgmma_m64n32k32_ss_e4m3(acc_s, fp8_d256_desc_rows(opaque(sK), kk),
                                fp8_d256_desc_rows(st + 32 * wg * C::kPanel, kk), kk > 0 ? 1 : 0);
      }
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) {
        wgmma_m64n32k32_ss_e4m3(acc_p, fp8_d256_desc_rows(opaque(sV), kk),
                                fp8_d256_desc_rows(st + C::kRowsBytes + 32 * wg * C::kPanel, kk), kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<1>();
      pin_all(acc_s);
      // Element e: key jrow + 8 ((e % 4) / 2), query qcol + 8 (e / 4) + (e % 2).
      const int jrow = n0 + 16 * warp + lane / 4;
      const int qcol = m0 + 32 * wg + 2 * (lane % 4);
      const bool full = m0 + BM <= si.lq && n0 + BN <= si.lk &&
                        si.mask.tile_full(m0 + si.mask.offset, m0 + BM + si.mask.offset, n0, n0 + BN);
      uint32_t own[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int e0 = 8 * (q >> 1) + 2 * (q & 1);
        float pv[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int e = e0 + (c & 1) + 4 * (c >> 1);
          const int j = jrow + 8 * ((e % 4) / 2), qi = qcol + 8 * (e / 4) + (e % 2);
          const bool ok = full || (qi < si.lq && j < si.lk && si.mask.allowed(qi + si.mask.offset, j));
          const float hx = acc_s[e] * h_scale;
          const float t = tanh_fast(hx);
          pv[c] = ok ? fmaf(hx, t, hx) : 0.f;
          const float a = fmaf(-hx, t, hx);
          const float ct = fmaf(c_ds, t, c_ds);
          acc_s[e] = ok ? fmaf(a, ct, ct) : 0.f;  // SiLU'(S) alpha q_s do_s v_s / N, 0 where masked
        }
        own[q] = cvt_e4m3x4(pv[0], pv[1], pv[2], pv[3]);
      }
      st_shared_v4_u32(sXp + (wg * 128 + wtid) * 16, own[0], own[1], own[2], own[3]);
      wgmma_wait<0>();
      pin_all(acc_p);
      float am[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        acc_p[e] = acc_s[e] != 0.f ? acc_p[e] * acc_s[e] : 0.f;  // dS' (the select keeps garbage rows' dP out)
        am[e & 3] = fmaxf(am[e & 3], fabsf(acc_p[e]));
      }
      float amax = fmaxf(fmaxf(am[0], am[1]), fmaxf(am[2], am[3]));
      amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(amax)));
      if (lane == 0) st_shared_u32(sRed + 4 * (4 * wg + warp), __float_as_uint(amax));
      named_barrier_sync(kBarP, 256);
      own_and_other(pa, own, sXp + ((wg ^ 1) * 128 + wtid) * 16);
      // dV[:, 128 wg ..] += P8^T dO^T (RS; B: dO^T's rows 128 wg .., 64-byte swizzle)
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t bt = st + 2 * C::kRowsBytes + C::kTBytes + wg * (128 * 64);
        fp8_bwd_wgmma_rs<128>(acc_dv, pa[kk], desc_k32(make_desc_kmajor(bt, 64), kk), 1);
      }
      wgmma_commit();
      tile_factor(8);
      const float inv_u = u > 0.f ? fp8_pow2_rcp(u) : 0.f;  // (exact: u is a power of two)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int e = 8 * (q >> 1) + 2 * (q & 1);
        own[q] = cvt_e4m3x4(acc_p[e] * inv_u, acc_p[e + 1] * inv_u, acc_p[e + 4] * inv_u, acc_p[e + 5] * inv_u);
      }
      st_shared_v4_u32(sXs + (wg * 128 + wtid) * 16, own[0], own[1], own[2], own[3]);
      store_ds8(own, wg);
      fence_proxy_async_smem();
      named_barrier_sync(kBarDs, 256);
      own_and_other(da, own, sXs + ((wg ^ 1) * 128 + wtid) * 16);
    } else {
      float acc[32];  // wg 0: S^T, wg 1: dP^T (rows: the block's 64 keys, columns: the tile's 64 queries)
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) {
        const uint32_t a = opaque(wg == 0 ? sK : sV), bq = st + (wg == 0 ? 0 : C::kRowsBytes);
        wgmma_m64n64k32_ss_e4m3(acc, fp8_d256_desc_rows(a, kk), fp8_d256_desc_rows(bq, kk), kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      pin_all(acc);
      if (wg == 0) {
        // Element e of this thread: key jrow + 8 ((e % 4) / 2), query qcol + 8 (e / 4) + (e % 2).
        const int jrow = n0 + 16 * warp + lane / 4;
        const int qcol = m0 + 2 * (lane % 4);
        const bool full = m0 + BM <= si.lq && n0 + BN <= si.lk &&
                          si.mask.tile_full(m0 + si.mask.offset, m0 + BM + si.mask.offset, n0, n0 + BN);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int e0 = 16 * kk + 8 * (q >> 1) + 2 * (q & 1);
            float pv[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              const int e = e0 + (c & 1) + 4 * (c >> 1);
              const int j = jrow + 8 * ((e % 4) / 2), qi = qcol + 8 * (e / 4) + (e % 2);
              const bool ok = full || (qi < si.lq && j < si.lk && si.mask.allowed(qi + si.mask.offset, j));
              const float hx = acc[e] * h_scale;
              const float t = tanh_fast(hx);
              pv[c] = ok ? fmaf(hx, t, hx) : 0.f;
              const float a = fmaf(-hx, t, hx);
              const float ct = fmaf(c_ds, t, c_ds);
              acc[e] = ok ? fmaf(a, ct, ct) : 0.f;  // SiLU'(S) alpha q_s do_s v_s / N, 0 where masked
            }
            pa[kk][q] = cvt_e4m3x4(pv[0], pv[1], pv[2], pv[3]);
          }
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          st_shared_v4_f32(sXd + (k * 128 + wtid) * 16, acc[4 * k], acc[4 * k + 1], acc[4 * k + 2], acc[4 * k + 3]);
        }
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          st_shared_v4_u32(sXp + (kk * 128 + wtid) * 16, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]);
        }
      }
      named_barrier_sync(kBarP, 256);
      if (wg == 1) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          ld_shared_v4_u32(sXp + (kk * 128 + wtid) * 16, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]);
        }
      }
      // dV[:, 128 wg ..] += P8^T dO^T (RS; B: dO^T's rows 128 wg .., 64-byte swizzle)
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t bt = st + 2 * C::kRowsBytes + C::kTBytes + wg * (128 * 64);
        fp8_bwd_wgmma_rs<128>(acc_dv, pa[kk], desc_k32(make_desc_kmajor(bt, 64), kk), 1);
      }
      wgmma_commit();
      if (wg == 1) {  // dS' = dP^T d (d is 0 where masked; the select keeps garbage rows' dP out), the tile's amax
        float am[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          float d[4];
          ld_shared_v4_f32(sXd + (k * 128 + wtid) * 16, d[0], d[1], d[2], d[3]);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int e = 4 * k + c;
            acc[e] = d[c] != 0.f ? acc[e] * d[c] : 0.f;
            am[c] = fmaxf(am[c], fabsf(acc[e]));
          }
        }
        float amax = fmaxf(fmaxf(am[0], am[1]), fmaxf(am[2], am[3]));
        amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(amax)));
        if (lane == 0) st_shared_u32(sRed + 4 * warp, __float_as_uint(amax));
      }
      named_barrier_sync(kBarAmax, 256);
      tile_factor(4);  // (warpgroup 1's 4 words)
      if (wg == 1) {
        const float inv_u = u > 0.f ? fp8_pow2_rcp(u) : 0.f;  // (exact: u is a power of two)
#pragma unroll
        for (int e = 0; e < 32; ++e) acc[e] *= inv_u;
        fp8_pack_a64(acc, da);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          st_shared_v4_u32(sXs + (kk * 128 + wtid) * 16, da[kk][0], da[kk][1], da[kk][2], da[kk][3]);
        }
        store_ds8(da[0], 0);
        store_ds8(da[1], 1);
        fence_proxy_async_smem();
      }
      named_barrier_sync(kBarDs, 256);
      if (wg == 0) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          ld_shared_v4_u32(sXs + (kk * 128 + wtid) * 16, da[kk][0], da[kk][1], da[kk][2], da[kk][3]);
        }
      }
    }
    // dK[:, 128 wg ..] += dS8^T Q^T (RS; B: Q^T's rows 128 wg ..), then dQ[:, 128 wg ..] = dS8 K^T in two halves of
    // 64 columns (SS; A: the dS8 tile, B: K^T's rows), each reduce-added once done.
    float acc_dq[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const uint32_t bt = st + 2 * C::kRowsBytes + wg * (128 * 64);
      fp8_bwd_wgmma_rs<128>(acc_dk, da[kk], desc_k32(make_desc_kmajor(bt, 64), kk), 1);
    }
    const float dq_scale = u * ks / qs;
    const int64_t g = dq_group_index(si.q_start, b, m0) + warp;
    float* dq_row = f.dq_accum + ((g * p.heads + h) * 2 + wg) * (4 * D) + 4 * lane;  // (bf16: 8 D floats per group)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t kt = opaque(sKt) + (128 * wg + 64 * half) * 64;
        wgmma_m64n64k32_ss_e4m3(acc_dq, desc_k32(make_desc_kmajor(opaque(sDs8), 64), kk),
                                desc_k32(make_desc_kmajor(kt, 64), kk), kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      pin_all(acc_dq);
      // bf16 reduce-add j (16 bytes: float4 2 j, 2 j + 1 of the m64n128 accumulator) of this half: j = 4 half + jj
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        uint32_t w[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          w[c] = pack_bf16x2(acc_dq[8 * jj + 2 * c] * dq_scale, acc_dq[8 * jj + 2 * c + 1] * dq_scale);
        }
        red_add_v4_bf16x2(dq_row + 128 * (4 * half + jj), w[0], w[1], w[2], w[3]);
      }
      if (half == 0) wgmma_fence();
    }
    pin_all(acc_dk);
    pin_all(acc_dv);
    pin_all(pa);
    pin_all(da);
    if (lane == 0) mbar_arrive(bar_empty(s));  // this warp is done with the stage
  }
  // Epilogue: every key row of the block inside the sequence (0 where no query sees it); columns 128 wg ...
  const int j_first = n0 + 16 * warp + lane / 4;
  uint16_t* dk = static_cast<uint16_t*>(p.dk) + 128 * wg;
  uint16_t* dv = static_cast<uint16_t*>(p.dv) + 128 * wg;
  fp8_bwd_store_rows_v4<128>(acc_dk, u, dk, p.dk_row_stride, p.dk_head_stride, h, si.k_start, j_first, si.lk_alloc,
                             f.out_half, lane);
  fp8_bwd_store_rows_v4<128>(acc_dv, do_cur * p.inv_scaling, dv, p.dv_row_stride, p.dv_head_stride, h, si.k_start,
                             j_first, si.lk_alloc, f.out_half, lane);
}

}  // namespace sm90
}  // namespace hstu
