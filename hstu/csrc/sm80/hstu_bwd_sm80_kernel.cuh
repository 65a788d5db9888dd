// HSTU attention backward (FlashAttention-2 structure, KV-tile parallel).
//
// Forward: S = alpha * (Q K^T + rab), P = SiLU(S) masked, O = P V * inv_scaling. With dP = dO V^T * inv_scaling:
//   dV = P^T dO * inv_scaling,  dS = dP * SiLU'(S) * alpha (masked),  dK = dS^T Q,  dQ = dS K,  drab = dS.
// One block per (KV tile of BN rows, batch, head, head-dim chunk of DC columns). Each warp owns 16 KV rows and
// computes S^T and dP^T for them, so P^T and dS^T are already in the A-operand layout of dV += P^T dO and
// dK += dS^T Q (no smem round trip); dS^T goes to smem once for dQ = dS K, which is added with fp32 atomics into a
// workspace and converted afterwards. The query tiles walked are those some key of the tile can be seen from
// (fully masked tiles are skipped). For D = 256 the dK/dV accumulators of 16 rows x 256 columns do not fit one warp's
// registers. Two layouts: BwdSm80Config splits the output columns in two chunks over the grid, each block
// recomputing S and dP over the full D (7 GEMM passes of BM x BN x D/2 per tile pair instead of 5); BwdSm80PairConfig
// (KSPLIT = 2) gives each 16 key rows a warp pair, warp g owning output columns [g D/2, (g+1) D/2) and computing S^T
// and dP^T over that half of D only; the pair adds its two partial sums through shared memory (a named barrier
// per pair), so both hold the full S^T, dP^T and no GEMM is repeated.
#pragma once

#include <cuda_runtime.h>

#include "hstu/csrc/common/hstu_common.cuh"
#include "common/device_info.h"
#include "hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh"
#include "hstu/csrc/sm80/hstu_fwd_sm80_split.h"

namespace hstu {

template <typename T, int D, int BM, int BN, int NWARPS, int DC, int STAGES, int KSPLIT>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_kernel(const HstuParams p);

// Bytes of the KSPLIT > 1 partial-sum exchange: per warp and lane, the S^T and dP^T accumulators (BM / 8 n8 tiles
// of 4 floats each).
template <int BM, int NWARPS, int KSPLIT>
constexpr int bwd_exchange_bytes() {
  return KSPLIT > 1 ? NWARPS * 32 * 2 * (BM / 8) * 4 * 4 : 0;
}

// Shared memory of hstu_bwd_kernel<T, D, BM, BN, NWARPS, DC, STAGES, KSPLIT>: K, V; STAGES Q / dO buffers and two
// dS^T tiles (STAGES = 0, the compact layout: one Q / dO buffer, dS^T staged in it); the pair exchange.
template <int D, int BM, int BN, int NWARPS, int KSPLIT>
constexpr int bwd_smem_bytes(int stages) {
  return (stages == 0 ? (2 * BN * D + 2 * BM * D) * 2 : (2 * BN * D + stages * 2 * BM * D + 2 * BN * BM) * 2) +
         bwd_exchange_bytes<BM, NWARPS, KSPLIT>();
}

template <int D>
struct BwdSm80Config {
  static constexpr int kBlockM = D >= 128 ? 32 : 64;  // D >= 128: 64-row query tiles spill a few registers
  static constexpr int kBlockN = D <= 128 ? 128 : 64;
  static constexpr int kWarps = kBlockN / 16;
  static constexpr int kChunkD = D <= 128 ? D : 128;
  static constexpr int kSplitK = 1;
  // Q / dO double buffer (tile m+1 loads while tile m is computed); D = 256 keeps one stage so that two blocks
  // still fit an SM (measured: 2 stages, 1 block/SM: 280 ms vs 252 ms).
  static constexpr int kStages = D == 256 ? 1 : 2;
  // stages = 0 is the compact single-stage layout: dS^T is staged in the Q buffer (extra barriers, no dS^T
  // buffers), for devices whose per-block opt-in shared memory (sm86 / sm89: 99 KB) the 1-stage layout exceeds.
  static constexpr int smem(int stages) { return bwd_smem_bytes<D, kBlockM, kBlockN, kWarps, kSplitK>(stages); }
  static constexpr int kSmem = smem(kStages);
};

// D = 256 in one pass: 64 keys x 32 queries per step, 8 warps = 4 row tiles x 2 halves of D (see the top). Shared
// memory: K, V 64 KB, Q / dO 32 KB per stage, dS^T 8 KB, the exchange 32 KB: 168 KB with 2 stages (H100 / H200),
// 136 KB with 1 (A100: 163 KB per block); one block (8 warps) per SM either way. Not for sm86 / sm89 (99 KB): there
// the launcher keeps BwdSm80Config's compact layout.
template <int D>
struct BwdSm80PairConfig {
  static constexpr int kBlockM = 32;
  static constexpr int kBlockN = 64;
  static constexpr int kSplitK = 2;
  static constexpr int kWarps = kSplitK * kBlockN / 16;
  static constexpr int kChunkD = D / kSplitK;  // output columns per warp
  static constexpr int smem(int stages) { return bwd_smem_bytes<D, kBlockM, kBlockN, kWarps, kSplitK>(stages); }
};

// Launches the dK/dV/dQ kernel of config C with STAGES Q/dO buffers (0: compact single stage).
template <typename T, int D, typename C, int STAGES>
cudaError_t launch_hstu_bwd_main(const HstuParams& p, cudaStream_t stream) {
  constexpr int kSmem = C::smem(STAGES);
  auto kernel = hstu_bwd_kernel<T, D, C::kBlockM, C::kBlockN, C::kWarps, C::kChunkD, STAGES, C::kSplitK>;
  if (kSmem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
  }
  const int chunks = C::kSplitK > 1 ? 1 : D / C::kChunkD;
  dim3 grid((p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN, p.batch, p.heads * chunks);
  kernel<<<grid, C::kWarps * 32, kSmem, stream>>>(p);
  return cudaGetLastError();
}

// Zeroes the masked elements of a warp's S^T / dP^T fragments on a tile that is not full: element (nt, e) is key
// jr + 8 (e / 2), query position rc + 8 nt + (e % 2). Per query row of the thread (2 QT rows, 2 keys each) its keys
// as two intervals (SeqMask::row_keys: the group-size division once per row, where allowed(r, j) takes two per
// element on target tiles); the same predicate (tests/hstu/test_mask_rows.py, `bwd80` case).
template <int QT>
__device__ __forceinline__ void bwd_st_mask_rows(const SeqMask& mk, int rc, int jr, float (&s)[QT][4],
                                                 float (&dp)[QT][4]) {
#pragma unroll
  for (int nt = 0; nt < QT; ++nt)
#pragma unroll
    for (int odd = 0; odd < 2; ++odd) {
      int hlo, hhi, tlo, thi;
      mk.row_keys(rc + nt * 8 + odd, hlo, hhi, tlo, thi);
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        const int j = jr + kh * 8;
        if (!((j >= hlo && j < hhi) || (j >= tlo && j < thi))) {
          s[nt][2 * kh + odd] = 0.f;
          dp[nt][2 * kh + odd] = 0.f;
        }
      }
    }
}

// Stores one k16 slice of a warp's dS^T A-fragment (keys wrow + lane/4 (+8), queries ks*16 + 2*(lane%4) (+1, +8))
// into the swizzled BN x BM dS^T tile; t = LS::swz(wrow + lane / 4, (lane % 4) * 2).
template <int BM>
__device__ __forceinline__ void store_ds(uint32_t sdS, uint32_t t, int ks, const uint32_t (&ad)[4]) {
  using LS = SmemLayout<BM>;
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + (t ^ LS::swz(0, ks * 16))), "r"(ad[0]));
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + (t ^ LS::swz(8, ks * 16))), "r"(ad[1]));
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + (t ^ LS::swz(0, ks * 16 + 8))), "r"(ad[2]));
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + (t ^ LS::swz(8, ks * 16 + 8))), "r"(ad[3]));
}

// One accumulator fragment (4 floats) to / added from shared memory: the warp-pair exchange of partial sums.
__device__ __forceinline__ void st_shared_v4(uint32_t addr, const float (&v)[4]) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
}
__device__ __forceinline__ void add_shared_v4(float (&v)[4], uint32_t addr) {
  float x0, x1, x2, x3;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(x0), "=f"(x1), "=f"(x2), "=f"(x3)
               : "r"(addr)
               : "memory");
  v[0] += x0;
  v[1] += x1;
  v[2] += x2;
  v[3] += x3;
}

template <typename T, int D, int BM, int BN, int NWARPS, int DC, int STAGES, int KSPLIT>
__device__ __forceinline__ void hstu_bwd_body(const HstuParams& p) {
  constexpr int NT = NWARPS * 32;
  constexpr int RWARPS = NWARPS / KSPLIT;             // warps along the key rows (16 each)
  constexpr int NCHUNK = KSPLIT > 1 ? 1 : D / DC;     // blocks along the head dim (grid z)
  constexpr int KD = D / KSPLIT;                      // head-dim span of a warp's S^T / dP^T sums
  constexpr int DQC = KSPLIT > 1 ? D : DC;            // dQ columns of a block
  constexpr int QTILES = BM / 8;  // n8 tiles of S^T along the query axis
  constexpr int CTILES = DC / 8;  // n8 tiles of dK / dV along the head dim chunk
  static_assert(BN == 16 * RWARPS, "one m16 tile of KV rows per warp (per warp pair with KSPLIT = 2)");
  static_assert(KSPLIT == 1 || (KSPLIT == 2 && DC * 2 == D && STAGES > 0 && RWARPS <= 8),
                "warp pairs: two halves of D, a dS^T buffer, at most 8 named barriers");
  using L = SmemLayout<D>;
  using LS = SmemLayout<BM>;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sK = smem_u32(smem);
  const uint32_t sV = sK + BN * D * 2;
  const uint32_t sQ0 = sV + BN * D * 2;  // stage s: Q at sQ0 + s * kStageBytes, dO right after it
  constexpr uint32_t kStageBytes = 2 * BM * D * 2;
  // dS^T, 2 buffers: BN rows (keys) x BM columns (queries); the compact layout (STAGES = 0) stages it in sQ.
  const uint32_t sdS0 = sQ0 + (STAGES > 0 ? STAGES : 1) * kStageBytes;
  constexpr uint32_t kdSBytes = BN * BM * 2;
  // KSPLIT > 1: the partial sums' exchange, [warp][accumulator (S^T n8 tiles, then dP^T)][lane] x 16 bytes.
  const uint32_t sX = sdS0 + 2 * kdSBytes;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wgrp = KSPLIT > 1 ? warp / RWARPS : 0;  // which half of D this warp sums S^T over and owns dK, dV of
  const int n_block = blockIdx.x;
  const int b = blockIdx.y;
  const int h = blockIdx.z / NCHUNK;
  const int d0 = KSPLIT > 1 ? wgrp * DC : (blockIdx.z % NCHUNK) * DC;
  const SeqInfo si = seq_info(p, b);
  const int n0 = n_block * BN;
  if (n0 >= si.lk_alloc) return;
  const SeqMask& mk = si.mask;

  const T* qg = static_cast<const T*>(p.q) + (int64_t)si.q_start * p.q_row_stride + h * p.q_head_stride;
  const T* dog = static_cast<const T*>(p.dout) + (int64_t)si.q_start * p.do_row_stride + h * p.do_head_stride;
  const T* kg = static_cast<const T*>(p.k) + (int64_t)(si.k_start + n0) * p.k_row_stride + h * p.k_head_stride;
  const T* vg = static_cast<const T*>(p.v) + (int64_t)(si.k_start + n0) * p.v_row_stride + h * p.v_head_stride;
  const T* rab = p.rab == nullptr ? nullptr
                                  : static_cast<const T*>(p.rab) + b * p.rab_batch_stride + h * p.rab_head_stride;
  T* drab = nullptr;
  float* drab_acc = nullptr;
  float* drab_h = nullptr;  // deterministic shared rab: this head's fp32 slice, summed over heads afterwards
  if (p.drab != nullptr && d0 == 0) {
    if (p.drab_heads != nullptr) {
      drab_h = p.drab_heads + b * p.drab_heads_batch_stride + h * p.drab_heads_head_stride;
    } else if (p.drab_accum != nullptr) {
      drab_acc = p.drab_accum + b * p.drab_batch_stride;  // shared rab: sum over heads
    } else {
      drab = static_cast<T*>(p.drab) + b * p.drab_batch_stride + h * p.drab_head_stride;
    }
  }

  const int keys_used = max(0, min(BN, si.lk - n0));
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, false>(si, n0, mb_begin, n_a, gap, n_mt);
  const int mb_end = mb_begin + n_mt;

  float acc_dk[CTILES][4];
  float acc_dv[CTILES][4];
#pragma unroll
  for (int i = 0; i < CTILES; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc_dk[i][e] = 0.f;
      acc_dv[i][e] = 0.f;
    }

  const int wrow = (warp % RWARPS) * 16;  // first KV row of this warp inside the tile
  const float half_alpha = 0.5f * p.alpha;
  const float ds_scale = p.inv_scaling * p.alpha;
  const int64_t dq_row_stride = (int64_t)p.heads * D;
  // dq_accum == nullptr: deterministic mode, dQ is computed by hstu_bwd_dq_kernel instead (no atomics here).
  const bool with_dq = p.dq_accum != nullptr;
  float* dq_acc = with_dq ? p.dq_accum + (int64_t)si.q_start * dq_row_stride + h * D : nullptr;

  if (mb_end > mb_begin) {
    load_tile_async<BN, D, NT>(sK, kg, p.k_row_stride, keys_used, tid);
    load_tile_async<BN, D, NT>(sV, vg, p.v_row_stride, keys_used, tid);
    {
      const int m0 = mb_begin * BM;
      load_tile_async<BM, D, NT>(sQ0, qg + (int64_t)m0 * p.q_row_stride, p.q_row_stride, si.lq - m0, tid);
      load_tile_async<BM, D, NT>(sQ0 + BM * D * 2, dog + (int64_t)m0 * p.do_row_stride, p.do_row_stride,
                                 si.lq - m0, tid);
    }
    cp_async_commit();

    // dQ[m0 : m0 + BM, d0 : d0 + DC] += dS K, with dS^T read from sdS_t. Runs one tile late (after the next
    // tile's barrier), so with two stages one barrier per query tile suffices (compact layout: right away).
    auto dq_tile = [&](const int m0, const uint32_t sdS_t) {
      constexpr int WM = BM / 16;       // m16 tiles of queries
      constexpr int NDG = NWARPS / WM;  // warps per m16 tile, each taking DQC / NDG columns
      static_assert(NWARPS % WM == 0, "bad dq warp layout");
      constexpr int COLS = DQC / NDG;
      constexpr int PW = COLS < 64 ? COLS : 64;  // columns per pass (bounds the accumulator registers)
      const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
      const int mtile = warp % WM;
      const int dg = warp / WM;
      const int dq0 = KSPLIT > 1 ? 0 : d0;  // the block's first dQ column
      const uint32_t tS = LS::swz(ln % 8 + (ln / 16) * 8, mtile * 16 + ((ln / 8) % 2) * 8);
      const uint32_t tK = L::swz(ln % 8 + ((ln / 8) % 2) * 8, dq0 + dg * COLS + (ln / 16) * 8);
#pragma unroll
      for (int piece = 0; piece < COLS / PW; ++piece) {
        const int c0 = dq0 + dg * COLS + piece * PW;
        float acc_q[PW / 8][4];
#pragma unroll
        for (int i = 0; i < PW / 8; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_q[i][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks) {
          uint32_t a[4];
          ldsm_x4_t(a, sdS_t + LS::xadd(tS, ks * 16, 0));
#pragma unroll
          for (int dp = 0; dp < PW / 16; ++dp) {
            uint32_t bk[4];
            ldsm_x4_t(bk, sK + (tK ^ L::swz(ks * 16, piece * PW + dp * 16)));
            mma_16816<T>(acc_q[2 * dp], a, bk[0], bk[1]);
            mma_16816<T>(acc_q[2 * dp + 1], a, bk[2], bk[3]);
          }
        }
#pragma unroll
        for (int dt = 0; dt < PW / 8; ++dt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int i = m0 + mtile * 16 + lane / 4 + half * 8;
            const int col = c0 + dt * 8 + (lane % 4) * 2;
            atomic_add_f2(dq_acc + (int64_t)i * dq_row_stride + col, acc_q[dt][2 * half], acc_q[dt][2 * half + 1],
                          i < si.lq);
          }
        }
      }
    };

    int stage = 0;
    for (int mb = mb_begin; mb < mb_end; ++mb, stage ^= (STAGES == 2 ? 1 : 0)) {
      const int m0 = mb * BM;
      const int r0 = m0 + mk.offset;
      float acc_s[QTILES][4];
      float acc_dp[QTILES][4];
#pragma unroll
      for (int i = 0; i < QTILES; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc_s[i][e] = 0.f;
          acc_dp[i][e] = 0.f;
        }

      cp_async_wait<0>();
      __syncthreads();  // Q, dO of tile mb landed; every warp is done with the previous tile (other stage, dS^T)
      if (STAGES == 2 && mb + 1 < mb_end) {
        const int mn = m0 + BM;
        const uint32_t ot = opaque(tid);
        const uint32_t sQn = sQ0 + (stage ^ 1) * kStageBytes;
        load_tile_async<BM, D, NT>(sQn, qg + (int64_t)mn * p.q_row_stride, p.q_row_stride, si.lq - mn, ot);
        load_tile_async<BM, D, NT>(sQn + BM * D * 2, dog + (int64_t)mn * p.do_row_stride, p.do_row_stride,
                                   si.lq - mn, ot);
        cp_async_commit();
      }
      const uint32_t sQ = sQ0 + stage * kStageBytes;
      const uint32_t sdO = sQ + BM * D * 2;
      const uint32_t sdS = sdS0 + ((mb - mb_begin) & 1) * kdSBytes;
      if (STAGES > 0 && with_dq && mb > mb_begin) dq_tile(m0 - BM, sdS0 + ((mb - 1 - mb_begin) & 1) * kdSBytes);

      // Per-thread parts of the ldmatrix addresses, recomputed from an opaque lane id each iteration so they are
      // not hoisted out of the loop into registers (see opaque()).
      const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
      const uint32_t tA = L::swz(wrow + ln % 16, (ln / 16) * 8);                    // K, V as A operands
      const uint32_t tB = L::swz(ln % 8 + (ln / 16) * 8, ((ln / 8) % 2) * 8);       // Q, dO as B operands
      const uint32_t tBt = L::swz(ln % 8 + ((ln / 8) % 2) * 8, d0 + (ln / 16) * 8);  // dO, Q, K transposed

      // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys (KSPLIT > 1: over its half of D; the column offset
      // wgrp * KD is a multiple of 64 elements, above the swizzled bits, so it adds to the tile bases).
      {
        const uint32_t kofs = static_cast<uint32_t>(wgrp * KD * 2);
#pragma unroll
        for (int ks = 0; ks < KD / 16; ++ks) {
          uint32_t ak[4], av[4];
          ldsm_x4(ak, sK + kofs + L::xadd(tA, 0, ks * 16));
          ldsm_x4(av, sV + kofs + L::xadd(tA, 0, ks * 16));
#pragma unroll
          for (int np = 0; np < BM / 16; ++np) {
            uint32_t bq[4], bo[4];
            const uint32_t off = kofs + L::xadd(tB, np * 16, ks * 16);
            ldsm_x4(bq, sQ + off);
            ldsm_x4(bo, sdO + off);
            mma_16816<T>(acc_s[2 * np], ak, bq[0], bq[1]);
            mma_16816<T>(acc_s[2 * np + 1], ak, bq[2], bq[3]);
            mma_16816<T>(acc_dp[2 * np], av, bo[0], bo[1]);
            mma_16816<T>(acc_dp[2 * np + 1], av, bo[2], bo[3]);
          }
        }
      }
      if constexpr (KSPLIT > 1) {
        // The pair's two partial sums: each warp stores its own, waits for its partner (a named barrier of the two
        // warps) and adds the partner's, which sits at the same lane and fragment position (a + b == b + a: both
        // warps then hold bit-identical S^T and dP^T). The next tile's stores come after the block barrier at the
        // top of the loop, which the partner passes only once done reading.
        // (addresses from the opaque thread id, recomputed per tile rather than held in registers across the loop)
        const uint32_t ot = opaque(static_cast<uint32_t>(tid));
        const uint32_t xme = sX + ((ot / 32) * 2 * QTILES * 32 + ot % 32) * 16;
        const uint32_t xpa = sX + ((((ot / 32) + RWARPS) % NWARPS) * 2 * QTILES * 32 + ot % 32) * 16;
#pragma unroll
        for (int nt = 0; nt < QTILES; ++nt) {
          st_shared_v4(xme + nt * 32 * 16, acc_s[nt]);
          st_shared_v4(xme + (QTILES + nt) * 32 * 16, acc_dp[nt]);
        }
        asm volatile("bar.sync %0, %1;\n" ::"r"(1 + warp % RWARPS), "n"(64) : "memory");
#pragma unroll
        for (int nt = 0; nt < QTILES; ++nt) {
          add_shared_v4(acc_s[nt], xpa + nt * 32 * 16);
          add_shared_v4(acc_dp[nt], xpa + (QTILES + nt) * 32 * 16);
        }
      }

      // Pointwise: P^T and dS^T (with alpha), drab. Element (nt, e): key j = n0 + wrow + lane/4 + (e/2)*8,
      // absolute query position r = r0 + nt*8 + 2*(lane%4) + (e&1). The rab, mask and drab passes are skipped
      // by uniform branches in the common case (no rab, tile fully visible).
      // h = alpha s / 2, t = tanh(h): sigmoid = (1 + t) / 2, SiLU = h (1 + t), SiLU' = sigmoid (1 + h (1 - t)).
      const bool full = mk.tile_full(r0, r0 + BM, n0, n0 + BN);
      if (rab != nullptr) {
#pragma unroll
        for (int nt = 0; nt < QTILES; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = n0 + wrow + lane / 4 + (e / 2) * 8;
            const int r = r0 + nt * 8 + (lane % 4) * 2 + (e & 1);
            if (r < mk.lk && j < mk.lk) acc_s[nt][e] += to_float(rab[(int64_t)r * p.rab_row_stride + j]);
          }
      }
#pragma unroll
      for (int nt = 0; nt < QTILES; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float hh = acc_s[nt][e] * half_alpha;
          const float t = tanh_approx(hh);
          const float sig = fmaf(0.5f, t, 0.5f);
          acc_s[nt][e] = fmaf(hh, t, hh);
          acc_dp[nt][e] = acc_dp[nt][e] * ds_scale * sig * fmaf(hh, 1.f - t, 1.f);
        }
      }
      // The mask by rows (bwd_st_mask_rows); in sm_86 / sm_89 code the warp-pair kernels (KSPLIT 2) keep the element
      // rule: by rows their spill grew 4 -> 8 / 12 B there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ < 900
      constexpr bool kRowMask = KSPLIT == 1;
#else
      constexpr bool kRowMask = true;
#endif
      if (!full && kRowMask) {
        bwd_st_mask_rows(mk, r0 + (lane % 4) * 2, n0 + wrow + lane / 4, acc_s, acc_dp);
      } else if (!full) {
#pragma unroll
        for (int nt = 0; nt < QTILES; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = n0 + wrow + lane / 4 + (e / 2) * 8;
            const int r = r0 + nt * 8 + (lane % 4) * 2 + (e & 1);
            if (!mk.allowed(r, j)) {
              acc_s[nt][e] = 0.f;
              acc_dp[nt][e] = 0.f;
            }
          }
      }
      if (drab != nullptr || drab_acc != nullptr || drab_h != nullptr) {  // (KSPLIT > 1: the wgrp 0 warps)
#pragma unroll
        for (int nt = 0; nt < QTILES; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = n0 + wrow + lane / 4 + (e / 2) * 8;
            const int r = r0 + nt * 8 + (lane % 4) * 2 + (e & 1);
            const float ds = acc_dp[nt][e];
            if (r < mk.lk && j < mk.lk) {
              if (drab_h != nullptr) {
                drab_h[(int64_t)r * p.drab_row_stride + j] = ds;
              } else if (drab != nullptr) {
                drab[(int64_t)r * p.drab_row_stride + j] = from_float<T>(ds);
              } else if (ds != 0.f) {
                atomicAdd(drab_acc + (int64_t)r * p.drab_row_stride + j, ds);
              }
            }
          }
      }

      // dV += P^T dO, dK += dS^T Q (this chunk's columns), and dS^T to smem (compact layout: after a barrier).
      uint32_t ds_frag[BM / 16][4];
      const uint32_t tdS = LS::swz(wrow + ln / 4, (ln % 4) * 2);
#pragma unroll
      for (int ks = 0; ks < BM / 16; ++ks) {
        uint32_t ap[4];
        uint32_t (&ad)[4] = ds_frag[ks];
        ap[0] = pack2<T>(acc_s[2 * ks][0], acc_s[2 * ks][1]);
        ap[1] = pack2<T>(acc_s[2 * ks][2], acc_s[2 * ks][3]);
        ap[2] = pack2<T>(acc_s[2 * ks + 1][0], acc_s[2 * ks + 1][1]);
        ap[3] = pack2<T>(acc_s[2 * ks + 1][2], acc_s[2 * ks + 1][3]);
        ad[0] = pack2<T>(acc_dp[2 * ks][0], acc_dp[2 * ks][1]);
        ad[1] = pack2<T>(acc_dp[2 * ks][2], acc_dp[2 * ks][3]);
        ad[2] = pack2<T>(acc_dp[2 * ks + 1][0], acc_dp[2 * ks + 1][1]);
        ad[3] = pack2<T>(acc_dp[2 * ks + 1][2], acc_dp[2 * ks + 1][3]);
        if (STAGES > 0 && with_dq && wgrp == 0) store_ds<BM>(sdS, tdS, ks, ad);
#pragma unroll
        for (int dp = 0; dp < DC / 16; ++dp) {
          uint32_t bo[4], bq[4];
          const uint32_t off = L::xadd(tBt, ks * 16, dp * 16);
          ldsm_x4_t(bo, sdO + off);
          ldsm_x4_t(bq, sQ + off);
          mma_16816<T>(acc_dv[2 * dp], ap, bo[0], bo[1]);
          mma_16816<T>(acc_dv[2 * dp + 1], ap, bo[2], bo[3]);
          mma_16816<T>(acc_dk[2 * dp], ad, bq[0], bq[1]);
          mma_16816<T>(acc_dk[2 * dp + 1], ad, bq[2], bq[3]);
        }
      }

      if (STAGES == 0 && with_dq) {
        __syncthreads();  // every warp is done with Q: stage dS^T there, then dQ of this tile
#pragma unroll
        for (int ks = 0; ks < BM / 16; ++ks) store_ds<BM>(sQ, tdS, ks, ds_frag[ks]);
        __syncthreads();
        dq_tile(m0, sQ);
      }
      if (STAGES <= 1 && mb + 1 < mb_end) {
        __syncthreads();  // single stage: every warp is done with Q and dO (and dS^T) of this tile
        const int mn = m0 + BM;
        const uint32_t ot = opaque(tid);
        load_tile_async<BM, D, NT>(sQ, qg + (int64_t)mn * p.q_row_stride, p.q_row_stride, si.lq - mn, ot);
        load_tile_async<BM, D, NT>(sdO, dog + (int64_t)mn * p.do_row_stride, p.do_row_stride, si.lq - mn, ot);
        cp_async_commit();
      }
    }
    if (STAGES > 0 && with_dq) {
      __syncthreads();  // dS^T of the last tile complete
      dq_tile((mb_end - 1) * BM, sdS0 + ((mb_end - 1 - mb_begin) & 1) * kdSBytes);
    }
  }

  // Epilogue: dK, dV of this chunk (rows past seqused are zeros).
  const int rows_store = min(BN, si.lk_alloc - n0);
  T* dkg = static_cast<T*>(p.dk) + (int64_t)(si.k_start + n0) * p.dk_row_stride + h * p.dk_head_stride;
  T* dvg = static_cast<T*>(p.dv) + (int64_t)(si.k_start + n0) * p.dv_row_stride + h * p.dv_head_stride;
#pragma unroll
  for (int dt = 0; dt < CTILES; ++dt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = wrow + lane / 4 + half * 8;
      const int col = d0 + dt * 8 + (lane % 4) * 2;
      if (row < rows_store) {
        *reinterpret_cast<uint32_t*>(dkg + (int64_t)row * p.dk_row_stride + col) =
            pack2<T>(acc_dk[dt][2 * half], acc_dk[dt][2 * half + 1]);
        *reinterpret_cast<uint32_t*>(dvg + (int64_t)row * p.dv_row_stride + col) =
            pack2<T>(acc_dv[dt][2 * half] * p.inv_scaling, acc_dv[dt][2 * half + 1] * p.inv_scaling);
      }
    }
  }
}

// Layouts over 99 KB of shared memory (D = 256 with Q / dO stages: the warp pairs, the 1-stage column chunks) cannot
// fit sm86 / sm89's opt-in limit, and the launchers run them there never (launch_hstu_bwd_fitting picks the compact
// form): in sm_86 / sm_89 code they are a trap,
// which keeps those builds' register report free of their spills (a compute_80 PTX JIT-ed on any GPU keeps the
// body). D <= 128's default tiles keep their bodies (sm87, 163 KB, runs the sm_86 code's 2-stage form).
template <typename T, int D, int BM, int BN, int NWARPS, int DC, int STAGES, int KSPLIT>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_kernel(const HstuParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ < 900
  constexpr bool kDefaultTile = D < 256 && KSPLIT == 1 && BM == BwdSm80Config<D>::kBlockM &&
                                BN == BwdSm80Config<D>::kBlockN;
  if constexpr (!kDefaultTile && bwd_smem_bytes<D, BM, BN, NWARPS, KSPLIT>(STAGES) > 99 * 1024) {
    __trap();
  } else {
    hstu_bwd_body<T, D, BM, BN, NWARPS, DC, STAGES, KSPLIT>(p);
  }
#else
  hstu_bwd_body<T, D, BM, BN, NWARPS, DC, STAGES, KSPLIT>(p);
#endif
}

// dq (total_q, H, D) with arbitrary row/head strides <- the fp32 workspace (total_q, H, D) contiguous.
template <typename T, int D>
__global__ void hstu_dq_convert_kernel(const HstuParams p) {
  const int64_t n = p.total_q * p.heads * D;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int d = idx % D;
    const int64_t rh = idx / D;
    const int hh = rh % p.heads;
    const int64_t row = rh / p.heads;
    static_cast<T*>(p.dq)[row * p.dq_row_stride + hh * p.dq_head_stride + d] = from_float<T>(p.dq_accum[idx]);
  }
}

// dq <- the fp32 workspace at D = 64 / 128 / 256 (bwd_sm80_dq_floats): in the fragment-ordered layout where the
// kernel set its flag (dq_frag_flag), else row-major. Grid (64-query tiles of max_seqlen_q, batch, heads), 256
// threads; only a tile that holds rows of its sequence reads (a tile past a short sequence's end would read past the
// sequence's padded block: past the workspace for the last one). Fragment order: each thread whole lane slots (16
// bytes: columns c, c + 1 of rows r and r + 8 of one lane's m16n8 accumulator; a warp 512 contiguous bytes), all of
// its D / 16 slots' loads before its stores (on an H200 0.5 / 2.3 % of the backward at B128 S1K D128 / D256 faster
// than a float2 at a time); the tile then goes through shared memory (rows padded by 16 bytes: a warp's 4-byte writes
// of 8 rows x 4 column pairs hit 32 banks) and leaves as 16-byte pieces of whole rows, where 4-byte stores straight
// from the slots filled half of each 32-byte sector (on an H200 the backward 4.2 / 3.2 % faster at B128 S1K D128 /
// D256, 1.2 / 1.7 % at B16 S4K D256 / D128: the convert ~180 -> ~105 us at B128 S1K D128). (dq's strides and base
// allow 16-byte stores: the op's contiguous (total_q, H, D) tensor; else the 4-byte stores.) Then the rows outside
// every sequence (before cu_seqlens_q[0], from cu_seqlens_q[batch] on) get zeros (dq is uninitialized). With
// kBwdSm80DqClaim the workspace was not zeroed: a warp block nobody claimed reads as zeros.
template <typename T, int D>
__global__ void __launch_bounds__(256) hstu_dq_tile_convert_kernel(const HstuParams p) {
  using C = BwdPdsConfig<D, 8>;
  constexpr int QR = C::kBlockM / C::kQWM, QC = D / (8 / C::kQWM), QPW = C::kQPW;
  constexpr int QMT = QR / 16, NDT = QPW / 8, NPC = QC / QPW;
  constexpr int kSlots = kDqFragPad * D / 4, kPer = kSlots / 256;  // (lane slots of a tile; per thread)
  static_assert(kSlots % 256 == 0 && C::kBlockM == kDqFragPad, "whole slots per thread");
  const int b = blockIdx.y, h = blockIdx.z, m0 = blockIdx.x * kDqFragPad;
  const int q_start = p.cu_seqlens_q[b];
  // kBwdSm80DqClaim: the fragment order always, a warp block whose claim word is 0 (no key block walked it) zeros
  const bool claims = (p.fwd_sm80_cfg & kBwdSm80DqClaim) != 0;
  const int rows = min(kDqFragPad, p.cu_seqlens_q[b + 1] - q_start - m0);
  T* out = static_cast<T*>(p.dq) + (int64_t)(q_start + m0) * p.dq_row_stride + h * p.dq_head_stride;
  if (rows <= 0) {
    // (a tile past the sequence's end)
  } else if (claims || *dq_frag_flag<D>(p) != 0.f) {
    const int64_t tile_row = h * dq_frag_head_rows(p) + q_start + kDqFragPad * b + m0;
    const float4* ws = reinterpret_cast<const float4*>(p.dq_accum + tile_row * D);
    float4 x[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int w = (k * 256 + static_cast<int>(threadIdx.x)) / (32 * NDT * QMT * NPC);  // (the slot's warp block)
      x[k] = claims && p.dq_zero_flags[tile_row + w] == 0u ? make_float4(0.f, 0.f, 0.f, 0.f)
                                                           : __ldcs(ws + k * 256 + threadIdx.x);  // (read once)
    }
    constexpr int kPadRow = D + 8;  // (elements)
    __shared__ __align__(16) T rows_s[kDqFragPad * kPadRow];
    const bool vec16 = ((p.dq_row_stride | p.dq_head_stride) & 7) == 0 && (reinterpret_cast<uintptr_t>(p.dq) & 15) == 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = k * 256 + threadIdx.x, lane = i % 32, g = i / 32;
      const int dt = g % NDT, mt = (g / NDT) % QMT, piece = (g / (NDT * QMT)) % NPC, w = g / (NDT * QMT * NPC);
      const int rr = (w % C::kQWM) * QR + mt * 16 + lane / 4;
      const int c = (w / C::kQWM) * QC + piece * QPW + dt * 8 + (lane % 4) * 2;
      if (vec16) {
        *reinterpret_cast<uint32_t*>(rows_s + rr * kPadRow + c) = pack2<T>(x[k].x, x[k].y);
        *reinterpret_cast<uint32_t*>(rows_s + (rr + 8) * kPadRow + c) = pack2<T>(x[k].z, x[k].w);
      } else {
        if (rr < rows) {
          *reinterpret_cast<uint32_t*>(out + (int64_t)rr * p.dq_row_stride + c) = pack2<T>(x[k].x, x[k].y);
        }
        if (rr + 8 < rows) {
          *reinterpret_cast<uint32_t*>(out + (int64_t)(rr + 8) * p.dq_row_stride + c) = pack2<T>(x[k].z, x[k].w);
        }
      }
    }
    if (vec16) {
      __syncthreads();
      constexpr int kPieces = D / 8;  // 16-byte pieces of a row
#pragma unroll
      for (int k = 0; k < kDqFragPad * kPieces / 256; ++k) {
        const int i = k * 256 + threadIdx.x, rr = i / kPieces, c = (i % kPieces) * 8;
        if (rr < rows) {
          *reinterpret_cast<uint4*>(out + (int64_t)rr * p.dq_row_stride + c) =
              *reinterpret_cast<const uint4*>(rows_s + rr * kPadRow + c);
        }
      }
    }
  } else {
    const float* ws = p.dq_accum + ((int64_t)(q_start + m0) * p.heads + h) * D;
    for (int i = threadIdx.x; i < rows * (D / 2); i += blockDim.x) {
      const int rr = i / (D / 2), c = (i % (D / 2)) * 2;
      const float2 x = *reinterpret_cast<const float2*>(ws + (int64_t)rr * p.heads * D + c);
      *reinterpret_cast<uint32_t*>(out + (int64_t)rr * p.dq_row_stride + c) = pack2<T>(x.x, x.y);
    }
  }
  const int64_t lo = p.cu_seqlens_q[0], hi = p.cu_seqlens_q[p.batch];
  const int64_t per_row = (int64_t)p.heads * (D / 2);
  const int64_t first = ((int64_t)(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * blockDim.x;
  const int64_t step = (int64_t)gridDim.x * gridDim.y * gridDim.z * blockDim.x;
  for (int64_t e = first + threadIdx.x; e < (lo + p.total_q - hi) * per_row; e += step) {
    const int64_t r = e / per_row, row = r < lo ? r : hi + (r - lo);
    const int hh = static_cast<int>((e % per_row) / (D / 2)), c = static_cast<int>(e % (D / 2)) * 2;
    *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dq) + row * p.dq_row_stride + hh * p.dq_head_stride + c) = 0u;
  }
}

template <typename T>
__global__ void hstu_drab_convert_kernel(const HstuParams p) {
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.drab_numel;
       idx += (int64_t)gridDim.x * blockDim.x) {
    static_cast<T*>(p.drab)[idx] = from_float<T>(p.drab_accum[idx]);
  }
}

// Deterministic mode, shared rab: drab (B, 1, R, C) = sum over heads, in head order, of drab_heads (B, H, R, C).
template <typename T>
__global__ void hstu_drab_reduce_kernel(const HstuParams p) {
  const int64_t per_batch = p.drab_batch_stride;  // R * C (drab is contiguous with one head)
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.drab_numel;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t bb = idx / per_batch;
    const float* src = p.drab_heads + bb * p.drab_heads_batch_stride + (idx - bb * per_batch);
    float acc = 0.f;
    for (int hh = 0; hh < p.heads; ++hh) acc += src[hh * p.drab_heads_head_stride];
    static_cast<T*>(p.drab)[idx] = from_float<T>(acc);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Deterministic dQ (query-tile parallel, no atomics): one block per (query tile of BM = 16 * NWARPS rows, batch,
// head), each warp owning 16 rows. For every KV tile the block recomputes S = Q K^T and dP = dO V^T, forms
// dS = dP * SiLU'(alpha (S + rab)) * alpha * inv_scaling (masked) in registers (the A operand of dS K, as P is
// in the forward) and accumulates dQ += dS K in a fixed order; dQ is written once. Costs 3 GEMMs more per tile
// pair than the atomic path's 1, so it is only used when deterministic=True.
template <int D>
struct BwdDqSm80Config {
  static constexpr int kWarps = D == 256 ? 2 : 4;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = D == 256 ? 16 : 32;  // D = 256: 32-key S / dP tiles spill (dQ takes 128 registers)
  static constexpr int kSmem = (2 * kBlockM * D + 2 * 2 * kBlockN * D) * 2;  // Q, dO | 2 stages of K, V
};

template <typename T, int D, int BM, int BN, int NWARPS>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_dq_kernel(const HstuParams p) {
  constexpr int NT = NWARPS * 32;
  constexpr int NTILES = BN / 8;
  constexpr int DTILES = D / 8;
  static_assert(BM == 16 * NWARPS, "one m16 tile of query rows per warp");
  using L = SmemLayout<D>;
  constexpr uint32_t kTileBytes = BN * D * 2;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sQ = smem_u32(smem);
  const uint32_t sdO = sQ + BM * D * 2;
  const uint32_t sKV0 = sdO + BM * D * 2;  // stage s: K at sKV0 + 2 s kTileBytes, V right after it

  const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) tiles first
  const int b = blockIdx.y;
  const int h = blockIdx.z;
  const SeqInfo si = seq_info(p, b);
  const int m0 = m_block * BM;
  if (m0 >= si.lq_alloc) return;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const SeqMask& mk = si.mask;

  const T* qg = static_cast<const T*>(p.q) + (int64_t)(si.q_start + m0) * p.q_row_stride + h * p.q_head_stride;
  const T* dog = static_cast<const T*>(p.dout) + (int64_t)(si.q_start + m0) * p.do_row_stride + h * p.do_head_stride;
  const T* kg = static_cast<const T*>(p.k) + (int64_t)si.k_start * p.k_row_stride + h * p.k_head_stride;
  const T* vg = static_cast<const T*>(p.v) + (int64_t)si.k_start * p.v_row_stride + h * p.v_head_stride;
  const T* rab = p.rab == nullptr ? nullptr
                                  : static_cast<const T*>(p.rab) + b * p.rab_batch_stride + h * p.rab_head_stride;

  const int r0 = m0 + mk.offset;
  const int rows_used = max(0, min(BM, si.lq - m0));
  // Tiles [nb_begin, nb_end) less the masked gap [gap_begin, gap_end) (SeqMask::key_tiles), walked up: after tile
  // gap_begin - 1 the next one is gap_end (gap_skip: 0 without a gap).
  int nb_begin, nb_end, gap_begin, gap_end;
  mk.key_tiles(r0, rows_used, BN, nb_begin, nb_end, gap_begin, gap_end);
  const int gap_skip = gap_end - gap_begin;

  float acc_dq[DTILES][4];
#pragma unroll
  for (int i = 0; i < DTILES; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dq[i][e] = 0.f;

  const int warp_row0 = warp * 16;
  const float half_alpha = 0.5f * p.alpha;
  const float ds_scale = p.inv_scaling * p.alpha;

  if (nb_end > nb_begin) {
    load_tile_async<BM, D, NT>(sQ, qg, p.q_row_stride, rows_used, tid);
    load_tile_async<BM, D, NT>(sdO, dog, p.do_row_stride, rows_used, tid);
    {
      const int n0 = nb_begin * BN;
      load_tile_async<BN, D, NT>(sKV0, kg + (int64_t)n0 * p.k_row_stride, p.k_row_stride, si.lk - n0, tid);
      load_tile_async<BN, D, NT>(sKV0 + kTileBytes, vg + (int64_t)n0 * p.v_row_stride, p.v_row_stride,
                                 si.lk - n0, tid);
    }
    cp_async_commit();

    int stage = 0;
    for (int nb = nb_begin; nb < nb_end; nb += 1 + (nb + 1 == gap_begin ? gap_skip : 0), stage ^= 1) {
      cp_async_wait<0>();
      __syncthreads();  // K, V of tile nb landed; every warp is done with the other stage
      if (nb + 1 < nb_end) {
        const int nn0 = (nb + 1 + (nb + 1 == gap_begin ? gap_skip : 0)) * BN;
        const uint32_t ot = opaque(tid);
        const uint32_t sKn = sKV0 + (stage ^ 1) * 2 * kTileBytes;
        load_tile_async<BN, D, NT>(sKn, kg + (int64_t)nn0 * p.k_row_stride, p.k_row_stride, si.lk - nn0, ot);
        load_tile_async<BN, D, NT>(sKn + kTileBytes, vg + (int64_t)nn0 * p.v_row_stride, p.v_row_stride,
                                   si.lk - nn0, ot);
        cp_async_commit();
      }
      const int n0 = nb * BN;
      const uint32_t sK = sKV0 + stage * 2 * kTileBytes;
      const uint32_t sV = sK + kTileBytes;
      const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
      const uint32_t tA = L::swz(warp_row0 + ln % 16, (ln / 16) * 8);                // Q, dO as A operands
      const uint32_t tB = L::swz(ln % 8 + (ln / 16) * 8, ((ln / 8) % 2) * 8);        // K, V as B operands
      const uint32_t tBt = L::swz(ln % 8 + ((ln / 8) % 2) * 8, (ln / 16) * 8);       // K transposed (dS K)

      float acc_s[NTILES][4], acc_dp[NTILES][4];
#pragma unroll
      for (int i = 0; i < NTILES; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc_s[i][e] = 0.f;
          acc_dp[i][e] = 0.f;
        }
      // S = Q K^T, dP = dO V^T for this warp's 16 rows.
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t aq[4], ao[4];
        ldsm_x4(aq, sQ + (tA ^ L::swz(0, ks * 16)));
        ldsm_x4(ao, sdO + (tA ^ L::swz(0, ks * 16)));
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
          uint32_t bk[4], bv[4];
          const uint32_t off = tB ^ L::swz(np * 16, ks * 16);
          ldsm_x4(bk, sK + off);
          ldsm_x4(bv, sV + off);
          mma_16816<T>(acc_s[2 * np], aq, bk[0], bk[1]);
          mma_16816<T>(acc_s[2 * np + 1], aq, bk[2], bk[3]);
          mma_16816<T>(acc_dp[2 * np], ao, bv[0], bv[1]);
          mma_16816<T>(acc_dp[2 * np + 1], ao, bv[2], bv[3]);
        }
      }
      // dS (with alpha and 1 / scaling_seqlen), masked: the mask as bits (bit 4 nt + e) from the thread's two
      // rows' key intervals (SeqMask::row_keys, fwd_key_interval_bits: one group-size division per row, not two
      // per element), all set on a fully visible tile.
      uint32_t keep[(BN + 63) / 64];
#pragma unroll
      for (int w = 0; w < (BN + 63) / 64; ++w) keep[w] = ~0u;
      if (!mk.tile_full(r0, r0 + BM, n0, n0 + BN)) {
#pragma unroll
        for (int w = 0; w < (BN + 63) / 64; ++w) keep[w] = 0u;
#pragma unroll 1
        for (int hf = 0; hf < 2; ++hf) {
          int hlo, hhi, tlo, thi;
          mk.row_keys(r0 + warp_row0 + lane / 4 + hf * 8, hlo, hhi, tlo, thi);
          fwd_key_interval_bits<BN>(keep, n0 + (lane % 4) * 2, hf, hlo, hhi);
          fwd_key_interval_bits<BN>(keep, n0 + (lane % 4) * 2, hf, tlo, thi);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NTILES; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = r0 + warp_row0 + lane / 4 + (e / 2) * 8;
          const int j = n0 + nt * 8 + (lane % 4) * 2 + (e & 1);
          float sv = acc_s[nt][e];
          if (rab != nullptr && r < mk.lk && j < mk.lk) sv += to_float(rab[(int64_t)r * p.rab_row_stride + j]);
          const float hh = sv * half_alpha;
          const float t = tanh_approx(hh);
          const float sig = fmaf(0.5f, t, 0.5f);
          float ds = acc_dp[nt][e] * ds_scale * sig * fmaf(hh, 1.f - t, 1.f);
          if (!((keep[nt / 8] >> ((4 * nt + e) % 32)) & 1u)) ds = 0.f;
          acc_dp[nt][e] = ds;
        }
      }
      // dQ += dS K
#pragma unroll
      for (int ks = 0; ks < BN / 16; ++ks) {
        uint32_t a[4];
        a[0] = pack2<T>(acc_dp[2 * ks][0], acc_dp[2 * ks][1]);
        a[1] = pack2<T>(acc_dp[2 * ks][2], acc_dp[2 * ks][3]);
        a[2] = pack2<T>(acc_dp[2 * ks + 1][0], acc_dp[2 * ks + 1][1]);
        a[3] = pack2<T>(acc_dp[2 * ks + 1][2], acc_dp[2 * ks + 1][3]);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bb[4];
          ldsm_x4_t(bb, sK + (tBt ^ L::swz(ks * 16, dp * 16)));
          mma_16816<T>(acc_dq[2 * dp], a, bb[0], bb[1]);
          mma_16816<T>(acc_dq[2 * dp + 1], a, bb[2], bb[3]);
        }
      }
    }
  }

  // Epilogue: dQ rows of this tile (rows past seqused, or that see no key, are zeros).
  T* dqg = static_cast<T*>(p.dq) + (int64_t)(si.q_start + m0) * p.dq_row_stride + h * p.dq_head_stride;
  const int rows_store = min(BM, si.lq_alloc - m0);
#pragma unroll
  for (int dt = 0; dt < DTILES; ++dt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + lane / 4 + half * 8;
      const int col = dt * 8 + (lane % 4) * 2;
      if (row < rows_store) {
        *reinterpret_cast<uint32_t*>(dqg + (int64_t)row * p.dq_row_stride + col) =
            pack2<T>(acc_dq[dt][2 * half], acc_dq[dt][2 * half + 1]);
      }
    }
  }
}

template <typename T, int D>
cudaError_t launch_hstu_bwd_dq(const HstuParams& p, cudaStream_t stream) {
  using C = BwdDqSm80Config<D>;
  auto kernel = hstu_bwd_dq_kernel<T, D, C::kBlockM, C::kBlockN, C::kWarps>;
  if (C::kSmem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (err != cudaSuccess) return err;
  }
  dim3 grid((p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM, p.batch, p.heads);
  kernel<<<grid, C::kWarps * 32, C::kSmem, stream>>>(p);
  return cudaGetLastError();
}

// Picks the main-kernel layout that fits the device's per-block opt-in shared memory. D = 256 (unless
// p.bwd_sm80_pair is 0): the warp-pair config with 2 stages (sm90: 227 KB; p.bwd_sm80_pair 2), else with 1 (sm80:
// 163 KB). Otherwise
// BwdSm80Config: the preferred number of Q/dO stages, else one stage (D = 128 on sm86 / sm89, 99 KB: 96 KB instead
// of 112 KB), else the compact layout (D = 256 there: 96 KB instead of 104 KB).
// The per-block opt-in shared memory the sm80-class backward may use on the current device. cap_sm8x: a layout that
// sm86 / sm89's builds trap over 99 KB (hstu_bwd_kernel), so compute capability 8.x other than 8.0 counts as 99 KB.
inline cudaError_t bwd_sm80_smem_limit(int& max_smem, bool cap_sm8x) {
  accel::DeviceInfo d;
  const cudaError_t err = accel::current_device_info(d);
  if (err != cudaSuccess) return err;
  max_smem = d.max_smem_optin;
  if (cap_sm8x && d.cc_major == 8 && d.cc_minor != 0 && max_smem > 99 * 1024) max_smem = 99 * 1024;
  return cudaSuccess;
}

// The sm80-class backward a call gets by default (p.bwd_sm80_cfg == 0, no warp-pair switch) at D = 128 / 256, bf16
// and fp16: FA2's warp layout (hstu_bwd_sm80_pds_kernel.cuh) with 8 warps, two Q / dO stages where they fit (cfg 5:
// 160 KB at D = 128, 208 KB at D = 256; Hopper), else one (cfg 4: 128 / 144 KB; A100), else the old layouts
// (BwdSm80Config; sm86 / sm89's 99 KB). Measured on an H200 (issue 39, bwd ms, B16 S4K D128 / D256, B128 S1K D128):
// old 3.671 / 9.653 / 2.480, cfg 5 3.440 / 7.552 / 2.371, cfg 4 3.475 / 7.682 / 2.384. kBwdSm80OldCfg (8) runs the
// old layouts where this default would apply, for comparisons.
// D = 64 (bwd64, B16 S8K / S4K on an H200: see docs/hstu_kernel_notes.md) the same layout with D = 128's tile, on
// compute capability 9.0 and newer only (the A100 / sm86 / sm89 keep the old layout: unmeasured there).
template <int D>
constexpr bool kBwdSm80PdsDefault = D == 64 || D == 128 || D == 256;
// cudaSuccess on an sm_90-class device, cudaErrorNotSupported elsewhere, the device query's error where it fails
// (never cudaErrorNotSupported: cudaGetDevice / cudaDeviceGetAttribute do not return it), so callers may read
// cudaErrorNotSupported as "not sm_90-class".
inline cudaError_t bwd_sm80_require_sm90() {
  accel::DeviceInfo d;
  const cudaError_t err = accel::current_device_info(d);
  return err != cudaSuccess ? err : d.cc_major >= 9 ? cudaSuccess : cudaErrorNotSupported;
}
// The launch prologue of the sm_90+ loops: bwd_sm80_require_sm90, and on an sm_90-class device its per-block opt-in
// shared memory in max_smem (else max_smem stays 0).
inline cudaError_t bwd_sm80_sm90_smem(int& max_smem) {
  max_smem = 0;
  const cudaError_t err = bwd_sm80_require_sm90();
  return err != cudaSuccess ? err : bwd_sm80_smem_limit(max_smem, /*cap_sm8x=*/true);
}
constexpr int kBwdSm80OldCfg = 8;
// kernel_options(bwd_sm80_cfg=n), for comparisons: 4 / 5 (bf16) the default's one / two Q / dO stage kernels where
// they fit (two block barriers per tile pair); 1 (bf16 and fp16) at D = 64 / 128 / 256 on sm_90+ the two-barrier
// kernels instead of the default's one-barrier loop (kOneBar; D = 256: kPdsMbarCopies); 2 (bf16, D = 64, sm_90+,
// calls without contexts) the one-barrier loop with the next tile's Q and dO copies issued together (D = 64's default
// splits them: kPdsSplitCopies); 7 (below); elsewhere the default runs.
// Their measured history (tile candidates, pipelined k-loops, earlier bodies and phase orders) is in
// docs/hstu_kernel_notes.md.
constexpr int kBwdSm80TwoBarCfg = 1;
constexpr int kBwdSm80JoinedCopiesCfg = 2;
// 3 (calls without contexts; D = 64 / 128 / 256 the one-barrier loops on sm_90+, elsewhere D = 256's two stages where
// they fit): the default kernels in the other grid order than bwd_sm80_heads_first picks.
constexpr int kBwdSm80OtherOrderCfg = 3;
// D = 256's default on sm_90+ for calls without contexts: one block barrier per tile pair with two Q / dO stages
// whose copies complete on mbarriers (kPdsMbarCopies, 224 KB; cfg 1: the two-barrier kernels), with the lean Q / dO
// copies and full-tile intervals (kPdsLeanCopies), S / dP split over the head dim across warp pairs (kPdsKSplitS: on
// an H200 4.6 / 5.0 % faster than the loop without it at B16 S4K / B128 S1K; cfg 13 the loop without it); 6 (bf16,
// the default's grid order) the mbarrier loop without the lean copies nor the split (kBwdPdsD256Alt), for
// comparisons.
constexpr int kBwdPdsD256OneBar =
    kPdsLoopFreeDqFirst | kPdsMbarCopies | kPdsLeanCopies | kPdsSmemEpilogue | kPdsKSplitS;
constexpr int kBwdPdsD256Alt = kPdsLoopFreeDqFirst | kPdsMbarCopies | kPdsSmemEpilogue;
constexpr int kBwdSm80MbarCfg = 6;
// 7 (bf16, calls without contexts, sm_90+, where the default runs heads first): the default's loop with the other
// choice of kPdsTailBlocksFirst than kBwdPdsTailFirst's, for comparisons.
constexpr int kBwdSm80TailCfg = 7;
// The heads-first loops take the grid's last wave of sequences key blocks first (kPdsTailBlocksFirst) at D = 64 / 256
// (on an H200 at B128 S1K: D64 -1.2 / -1.6 %, D256 -0.6 / -0.6 %; two runs), not at D = 128 (+0.4 / +0.6 %, B64 S2K
// +0.9 %).
template <int D>
constexpr int kBwdPdsTailFirst = D == 64 || D == 256 ? kPdsTailBlocksFirst : 0;
// 9 (bf16, sm_90+, calls without contexts): the default's loop (either grid order) with dK / dV stored in fragment
// order (without kPdsSmemEpilogue), for comparisons.
constexpr int kBwdSm80SmemEpiCfg = 9;
// 10 (bf16, D = 64 / 128, sm_90+, calls without contexts): the default's one-barrier loop (either grid order) without
// kPdsStsmPdS and kPdsPtrCopies (main's loop before them), 11 without kPdsPtrCopies (P / dS by stmatrix alone), 12
// without kPdsStsmPdS (the Q / dO copies from pointers alone), for comparisons; at D = 64 each also without
// kPdsRunPtrs | kPdsLaneOnce (the running pointers need kPdsPtrCopies).
constexpr int kBwdSm80StsmCfg = 10;
constexpr int kBwdSm80PtrCfg = 11;
constexpr int kBwdSm80PtrOnlyCfg = 12;
// 13 (bf16, D = 64, sm_90+, calls without contexts): the default's one-barrier loop (either grid order) without the
// running pointers and the lane offsets once (kPdsRunPtrs | kPdsLaneOnce: session 28's default loop), 14 without
// kPdsLaneOnce (the running pointers alone), for comparisons; 13 at D = 64 with contexts: the default's context
// loop with the last context tile in full (kPdsFullCtxTile: without kHalfSkip). 13 at D = 256 (bf16, sm_90+, with or
// without contexts): the default's mbarrier loop (either grid order) without the split S / dP (kBwdPdsD256Unsplit:
// main's loop before it; its dK / dV / drab bitwise the two-barrier kernels').
constexpr int kBwdSm80RunPtrCfg = 13;
constexpr int kBwdPdsD256Unsplit = kBwdPdsD256OneBar & ~kPdsKSplitS;
constexpr int kBwdSm80LaneOnceCfg = 14;
// D = 128's three-stage one-barrier loop before the default's (kBwdPdsOneBarLoop<128>: the dQ-first body with the
// lane offsets once; measured in docs/hstu_kernel_notes.md): the fixed-order body (kPdsLoopFree) without kPdsLaneOnce.
// Comparisons at D = 128 (bf16, sm_90+, calls without contexts, either grid order): cfg 14 this loop, cfg 13 this
// loop with kPdsLaneOnce, cfgs 10 / 11 / 12 this loop without kPdsStsmPdS | kPdsPtrCopies / kPdsPtrCopies /
// kPdsStsmPdS. The rab loop (kPdsRabSmem) keeps it: with the default's body and flags it spilled 68 B (sm_90a).
constexpr int kBwdPdsD128Main = kPdsLoopFree | kPdsSmemEpilogue | kPdsStsmPdS | kPdsPtrCopies;
// D = 64's default on sm_90+ for calls without contexts (bf16 and fp16, either grid order): 128-query tiles
// (kPdsTile128) on kPdsMbarCopies' two stages, 224 KB; on an H200 6.4-6.8 % faster than the three-stage loop at B16
// S8K / S4K, 2.5-3.0 % at B128 S1K / B64 S2K (heads first). 15 (bf16, D = 64, sm_90+, calls without contexts): the
// three-stage one-barrier loop instead (the default before; cfgs 2, 7, 9-14 at D = 64 are its variants), for
// comparisons.
constexpr int kBwdPdsD64Tile128 = kPdsLoopFreeDqFirst | kPdsMbarCopies | kPdsTile128 | kPdsSmemEpilogue |
                                  kPdsStsmPdS | kPdsPtrCopies | kPdsLaneOnce;
constexpr int kBwdSm80ThreeStageCfg = 15;
constexpr int kBwdSm80LastCfg = 15;

// Whether the sm_90+ defaults run with rab through shared memory (kPdsRabSmem): bf16, rab given, no contexts, not
// kernel_options(fwd_sm80_cfg=8) (kFwdSm80RabMain: main's rab path in both directions, for comparisons), rab's 16-byte
// chunks aligned (the pointer and every stride), and a per-head drab (q's dtype) aligned the same way (the fp32
// drab of a shared rab keeps its per-element atomics / stores).
// (kBwdSm80RabSmem<T>: whether T has the kernels; only the launched kernels are instantiated)
template <typename T>
constexpr bool kBwdSm80RabSmem = std::is_same<T, __nv_bfloat16>::value;
template <typename T>
inline bool bwd_sm80_rab_smem(const HstuParams& p) {
  const auto aligned = [](const void* x, int64_t s0, int64_t s1, int64_t s2) {
    return reinterpret_cast<uintptr_t>(x) % 16 == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
  };
  return kBwdSm80RabSmem<T> && p.rab != nullptr && p.num_contexts == nullptr &&
         !(p.fwd_sm80_cfg & kFwdSm80RabMain) &&
         aligned(p.rab, p.rab_batch_stride, p.rab_head_stride, p.rab_row_stride) &&
         (p.drab == nullptr || p.drab_accum != nullptr || p.drab_heads != nullptr ||
          aligned(p.drab, p.drab_batch_stride, p.drab_head_stride, p.drab_row_stride));
}

// The grid order of the default kernels for calls without contexts (kPdsHeadsFirst; cfg 3 the other one): heads
// first for sequences of at most 2,048 keys (measured on an H200 at B128 S1K: D128 1.7 % faster, L2 hits 34 -> 74 %;
// D256 (its two-stage kernel, where it fits) 3.64 against 4.83 ms; D64 at par; at S4K within 0.2 %), else batch
// first. At D = 64 / 256 the one-barrier loops' heads first takes the grid's last sequences key blocks first
// (kBwdPdsTailFirst; cfg 7 the other choice).
template <int D>
inline bool bwd_sm80_heads_first(const HstuParams& p) {
  const bool rule = (D == 64 || D == 128 || D == 256) && p.max_seqlen_k <= 2048;
  return rule != (p.bwd_sm80_cfg == kBwdSm80OtherOrderCfg);
}

// The one-barrier loop of BODY in the grid order bwd_sm80_heads_first picks: heads first (with D's kBwdPdsTailFirst
// choice) or batch first; cudaErrorNotSupported where its shared memory does not fit max_smem.
template <typename T, int D, int STAGES, int BODY, bool CTX_TWIN = false>
cudaError_t launch_hstu_bwd_pds_ordered(const HstuParams& p, int max_smem, cudaStream_t stream) {
  // CTX_TWIN: calls with contexts run the loop's context kernel, heads first without the tail's order (which the
  // context kernels do not take)
  if constexpr (CTX_TWIN) {
    if (p.num_contexts != nullptr) {
      return bwd_sm80_heads_first<D>(p)
                 ? launch_hstu_bwd_pds<T, D, STAGES, 8, BODY | kPdsHeadsFirst, true>(p, max_smem, stream)
                 : launch_hstu_bwd_pds<T, D, STAGES, 8, BODY, true>(p, max_smem, stream);
    }
  }
  return bwd_sm80_heads_first<D>(p)
             ? launch_hstu_bwd_pds<T, D, STAGES, 8, BODY | kPdsHeadsFirst | kBwdPdsTailFirst<D>>(p, max_smem, stream)
             : launch_hstu_bwd_pds<T, D, STAGES, 8, BODY>(p, max_smem, stream);
}

// FA2's warp layout (hstu_bwd_sm80_pds_kernel.cuh) with two Q / dO stages where they fit the device, else one;
// cudaErrorNotSupported where neither does or the layout lacks D / NWARPS.
template <typename T, int D, int NWARPS, int PIPE>
cudaError_t launch_hstu_bwd_pds_fitting(const HstuParams& p, cudaStream_t stream) {
  int max_smem = 0;
  cudaError_t err = bwd_sm80_smem_limit(max_smem, /*cap_sm8x=*/true);
  if (err != cudaSuccess) return err;
  err = launch_hstu_bwd_pds<T, D, 2, NWARPS, PIPE>(p, max_smem, stream);
  if (err == cudaErrorNotSupported) err = launch_hstu_bwd_pds<T, D, 1, NWARPS, PIPE>(p, max_smem, stream);
  return err;
}

// The comparison cfg where it applies and fits; otherwise cudaErrorNotSupported and the default runs.
template <typename T, int D>
cudaError_t launch_hstu_bwd_candidate(const HstuParams& p, int cfg, cudaStream_t stream) {
  if constexpr (kBwdSm80PdsDefault<D> && std::is_same<T, __nv_bfloat16>::value) {
    int max_smem = 0;
    cudaError_t err = bwd_sm80_smem_limit(max_smem, /*cap_sm8x=*/true);
    if (err != cudaSuccess) return err;
    switch (cfg) {
      case 4:
        return launch_hstu_bwd_pds<T, D, 1, 8>(p, max_smem, stream);
      case 5:
        return launch_hstu_bwd_pds<T, D, 2, 8>(p, max_smem, stream);
      case kBwdSm80JoinedCopiesCfg:
        if constexpr (D == 64) {
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          return launch_hstu_bwd_pds<T, D, 3, 8, kBwdPdsDefaultBody<D, 8> | kPdsSmemEpilogue>(p, max_smem, stream);
        }
        return cudaErrorNotSupported;
      case kBwdSm80MbarCfg:
        if constexpr (D == 256) {
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          return bwd_sm80_heads_first<D>(p)
                     ? launch_hstu_bwd_pds<T, D, 2, 8, kBwdPdsD256Alt | kPdsHeadsFirst>(p, max_smem, stream)
                     : launch_hstu_bwd_pds<T, D, 2, 8, kBwdPdsD256Alt>(p, max_smem, stream);
        }
        return cudaErrorNotSupported;
      case kBwdSm80TailCfg: {
        err = bwd_sm80_require_sm90();
        if (err != cudaSuccess) return err;
        if (p.num_contexts != nullptr || !bwd_sm80_heads_first<D>(p)) return cudaErrorNotSupported;
        constexpr int kTail = kBwdPdsTailFirst<D> ^ kPdsTailBlocksFirst;  // (the default's other choice)
        if constexpr (D == 256) {
          return launch_hstu_bwd_pds<T, D, 2, 8, kBwdPdsD256OneBar | kPdsHeadsFirst | kTail>(p, max_smem, stream);
        } else {
          return launch_hstu_bwd_pds<T, D, 3, 8, kBwdPdsOneBarLoop<D> | kPdsHeadsFirst | kTail>(p, max_smem, stream);
        }
      }
      case kBwdSm80SmemEpiCfg: {
        err = bwd_sm80_require_sm90();
        if (err != cudaSuccess) return err;
        if (p.num_contexts != nullptr) return cudaErrorNotSupported;
        // (D = 256: its two-stage one-barrier loop; else the three-stage default's)
        constexpr int kStages = D == 256 ? 2 : 3;
        constexpr int kBody = (D == 256 ? kBwdPdsD256OneBar : kBwdPdsOneBarLoop<D>) & ~kPdsSmemEpilogue;
        return launch_hstu_bwd_pds_ordered<T, D, kStages, kBody>(p, max_smem, stream);
      }
      case kBwdSm80StsmCfg:
      case kBwdSm80PtrCfg:
      case kBwdSm80PtrOnlyCfg:
        if constexpr (D == 64 || D == 128) {
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          if (p.num_contexts != nullptr) return cudaErrorNotSupported;
          constexpr int kDefault = D == 128 ? kBwdPdsD128Main : kBwdPdsOneBarLoop<D> & ~(kPdsRunPtrs | kPdsLaneOnce);
          if (cfg == kBwdSm80PtrOnlyCfg) {
            return launch_hstu_bwd_pds_ordered<T, D, 3, kDefault & ~kPdsStsmPdS>(p, max_smem, stream);
          }
          if (cfg == kBwdSm80PtrCfg) {
            return launch_hstu_bwd_pds_ordered<T, D, 3, kDefault & ~kPdsPtrCopies>(p, max_smem, stream);
          }
          return launch_hstu_bwd_pds_ordered<T, D, 3, kDefault & ~(kPdsStsmPdS | kPdsPtrCopies)>(p, max_smem, stream);
        }
        return cudaErrorNotSupported;
      case kBwdSm80RunPtrCfg:
      case kBwdSm80LaneOnceCfg:
        if constexpr (D == 256) {
          if (cfg != kBwdSm80RunPtrCfg) return cudaErrorNotSupported;
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          return launch_hstu_bwd_pds_ordered<T, D, 2, kBwdPdsD256Unsplit, true>(p, max_smem, stream);
        }
        if constexpr (D == 128) {  // (13: main's loop with the lane offsets once, 14: main's loop)
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          if (p.num_contexts != nullptr) return cudaErrorNotSupported;
          return cfg == kBwdSm80RunPtrCfg
                     ? launch_hstu_bwd_pds_ordered<T, D, 3, kBwdPdsD128Main | kPdsLaneOnce>(p, max_smem, stream)
                     : launch_hstu_bwd_pds_ordered<T, D, 3, kBwdPdsD128Main>(p, max_smem, stream);
        }
        if constexpr (D == 64) {
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          if (p.num_contexts != nullptr) {  // (13: the 128-query context loop with its last context tile in full)
            if (cfg != kBwdSm80RunPtrCfg) return cudaErrorNotSupported;
            return launch_hstu_bwd_pds_ordered<T, D, 2, kBwdPdsD64Tile128 | kPdsFullCtxTile, true>(p, max_smem, stream);
          }
          constexpr int kDefault = kBwdPdsOneBarLoop<D>;
          static_assert((kDefault & (kPdsRunPtrs | kPdsLaneOnce)) == (kPdsRunPtrs | kPdsLaneOnce), "D = 64's default");
          if (cfg == kBwdSm80RunPtrCfg) {
            return launch_hstu_bwd_pds_ordered<T, D, 3, kDefault & ~(kPdsRunPtrs | kPdsLaneOnce)>(p, max_smem, stream);
          }
          return launch_hstu_bwd_pds_ordered<T, D, 3, kDefault & ~kPdsLaneOnce>(p, max_smem, stream);
        }
        return cudaErrorNotSupported;
      case kBwdSm80ThreeStageCfg:
        if constexpr (D == 64) {
          err = bwd_sm80_require_sm90();
          if (err != cudaSuccess) return err;
          if (p.num_contexts != nullptr) return cudaErrorNotSupported;
          return bwd_sm80_heads_first<D>(p)
                     ? launch_hstu_bwd_pds<T, D, 3, 8, kBwdPdsOneBarLoop<D> | kPdsHeadsFirst | kBwdPdsTailFirst<D>>(
                           p, max_smem, stream)
                     : launch_hstu_bwd_pds<T, D, 3, 8>(p, max_smem, stream);
        }
        return cudaErrorNotSupported;
      default:
        return cudaErrorNotSupported;
    }
  }
  return cudaErrorNotSupported;
}

// The default's sm_90+ loops with rab through shared memory (kPdsRabSmem: D = 128's three-stage one-barrier loop,
// D = 64's 128-query tiles, D = 256's mbarrier loop; bf16, bwd_sm80_rab_smem) on an sm_90-class device where they
// fit and the default's loops apply; else cudaErrorNotSupported (nothing launched). Where they write drab's zeros
// (bwd_pds_drab_self_zero) by bulk copies (kPdsDrabBulk), with kernel_options(fwd_sm80_cfg=12) by 16-byte stores
// (kBwdSm80DrabLsu; private, for comparisons); else (rab alone, a shared rab, drab zeroed) the loop without them.
template <typename T, int D>
cudaError_t launch_hstu_bwd_rab_smem(const HstuParams& p, cudaStream_t stream) {
  if constexpr (kBwdSm80PdsDefault<D> && kBwdSm80RabSmem<T> && (D == 64 || D == 128 || D == 256)) {
    if (p.bwd_sm80_cfg == kBwdSm80OldCfg || p.bwd_sm80_cfg == kBwdSm80TwoBarCfg || (D == 256 && p.bwd_sm80_pair != 0) ||
        !bwd_sm80_rab_smem<T>(p)) {
      return cudaErrorNotSupported;
    }
    int max_smem = 0;
    const cudaError_t err = bwd_sm80_sm90_smem(max_smem);
    if (err != cudaSuccess) return err;
    constexpr int kBody = D == 64    ? kBwdPdsD64Tile128 | kPdsRabSmem
                          : D == 128 ? kBwdPdsD128Main | kPdsRabSmem
                                     : kBwdPdsD256OneBar | kPdsRabSmem;
    constexpr int kStages = D == 128 ? 3 : 2;
    return bwd_pds_drab_self_zero(p) && (p.fwd_sm80_cfg & kBwdSm80DrabLsu) == 0
               ? launch_hstu_bwd_pds_ordered<T, D, kStages, kBody | kPdsDrabBulk>(p, max_smem, stream)
               : launch_hstu_bwd_pds_ordered<T, D, kStages, kBody>(p, max_smem, stream);
  }
  return cudaErrorNotSupported;
}

// The split of long key-block walks (kernel_options(fwd_sm80_cfg=14): kBwdSm80SplitWalk, hstu_bwd_sm80_walk_split.h)
// with BODY's loop (STAGES Q / dO stages): the list kernel, then one CTA per (head, item) (heads fastest: each
// item's heads side by side, the heaviest items first); cudaErrorNotSupported where BODY's shared memory does not
// fit or the op gave no workspace. (BM: the loop's query rows a tile; the list counts the walks as the body does.)
template <typename T, int D, int STAGES, int BODY>
cudaError_t launch_hstu_bwd_pds_split(const HstuParams& p, int max_smem, cudaStream_t stream) {
  using C = BwdPdsConfig<D, 8>;
  constexpr int BM = (BODY & kPdsTile128) ? 2 * C::kBlockM : C::kBlockM, BN = C::kBlockN;
  static_assert(BN == bwd_split_block_n(D), "the op's workspace assumes this key block");
  constexpr int kSmem = bwd_pds_smem_bytes<D, BM, BN>(STAGES, (BODY & kPdsMbarCopies) != 0);
  if (kSmem > max_smem || p.bwd_sched == nullptr) return cudaErrorNotSupported;
  const int ctas = accel::current_device_sms();  // (one CTA an SM: launch bounds 1, over half the SM's memory)
  const BwdSplitLayout l = bwd_split_layout(0, 0, p.heads, BN, D, ctas);
  const int64_t cap = bwd_split_cap_from_bytes(p.bwd_sched_bytes, p.heads, BN, D, ctas);
  if (cap <= 0 || cap > 65535) return cudaErrorNotSupported;
  BwdSplitHeader off{};
  off.counters = l.counters;
  off.slots = l.slots;
  off.list = l.list;
  const int forced = p.fwd_split_tiles > 0 ? p.fwd_split_tiles : 0;  // (kernel_options(fwd_split_tiles=n))
  const bool ctx = p.num_contexts != nullptr;
  if (ctx) {
    hstu_bwd_split_list_kernel<BM, BN, true><<<1, 1024, 0, stream>>>(p, static_cast<int>(cap),
                                                                     static_cast<int>(l.slot_cap), ctas, forced, off);
  } else {
    hstu_bwd_split_list_kernel<BM, BN, false><<<1, 1024, 0, stream>>>(p, static_cast<int>(cap),
                                                                      static_cast<int>(l.slot_cap), ctas, forced, off);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const auto launch = [&](const auto kernel) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.heads, static_cast<unsigned>(cap)), 256, kSmem, stream>>>(p);
    return cudaGetLastError();
  };
  return ctx ? launch(hstu_bwd_pds_split_kernel<T, D, STAGES, 8, BODY, true>)
             : launch(hstu_bwd_pds_split_kernel<T, D, STAGES, 8, BODY, false>);
}

// The split (launch_hstu_bwd_pds_split) with the default's loop at D = 64 / 128 / 256 (bf16, sm_90-class devices,
// no rab; at D = 256 with bwd_sm80_cfg=13 the loop without the split S / dP: its context twin spills none, the
// default's 108 B with the split's item and merge); cudaErrorNotSupported elsewhere (the default runs).
template <typename T, int D>
cudaError_t launch_hstu_bwd_split(const HstuParams& p, cudaStream_t stream) {
  if constexpr (kBwdSm80PdsDefault<D> && std::is_same<T, __nv_bfloat16>::value && (D == 64 || D == 128 || D == 256)) {
    if (p.rab != nullptr || p.bwd_sched == nullptr) return cudaErrorNotSupported;
    int max_smem = 0;
    const cudaError_t err = bwd_sm80_sm90_smem(max_smem);
    if (err != cudaSuccess) return err;
    if constexpr (D == 64) {
      return launch_hstu_bwd_pds_split<T, D, 2, kBwdPdsD64Tile128>(p, max_smem, stream);
    } else if constexpr (D == 128) {
      return launch_hstu_bwd_pds_split<T, D, 3, kBwdPdsOneBarLoop<D>>(p, max_smem, stream);
    } else {  // (the loop without the split S / dP; bwd_sm80_cfg=13 the default's loop with it)
      return p.bwd_sm80_cfg == kBwdSm80RunPtrCfg
                 ? launch_hstu_bwd_pds_split<T, D, 2, kBwdPdsD256OneBar>(p, max_smem, stream)
                 : launch_hstu_bwd_pds_split<T, D, 2, kBwdPdsD256Unsplit>(p, max_smem, stream);
    }
  }
  return cudaErrorNotSupported;
}

// rab_smem: whether to try launch_hstu_bwd_rab_smem (false: the caller did, and it did not apply).
template <typename T, int D>
cudaError_t launch_hstu_bwd_fitting(const HstuParams& p, cudaStream_t stream, bool rab_smem = true) {
  if (p.fwd_sm80_cfg & kBwdSm80SplitWalk) {  // (kernel_options(fwd_sm80_cfg=14): the split where it applies)
    const cudaError_t err = launch_hstu_bwd_split<T, D>(p, stream);
    if (err != cudaErrorNotSupported) return err;
  }
  if (p.bwd_sm80_cfg >= 1 && p.bwd_sm80_cfg <= kBwdSm80LastCfg && p.bwd_sm80_cfg != kBwdSm80OldCfg) {
    // the call's candidate where it applies and fits
    const cudaError_t err = launch_hstu_bwd_candidate<T, D>(p, p.bwd_sm80_cfg, stream);
    if (err != cudaErrorNotSupported) return err;
  }
  if constexpr (kBwdSm80PdsDefault<D>) {  // the default: cfg 5, else cfg 4 (bf16 and fp16)
    if (rab_smem) {  // (first the sm_90+ loops with rab through shared memory where they apply)
      const cudaError_t err = launch_hstu_bwd_rab_smem<T, D>(p, stream);
      if (err != cudaErrorNotSupported) return err;
    }
    bool applies = p.bwd_sm80_cfg != kBwdSm80OldCfg && (D != 256 || p.bwd_sm80_pair == 0);
    if (D == 64 && applies) {
      const cudaError_t err = bwd_sm80_require_sm90();
      if (err != cudaSuccess && err != cudaErrorNotSupported) return err;
      applies = err == cudaSuccess;
    }
    // With contexts too (the loops skip the context gap: hstu_bwd_pds_body_ctx_kernel; bwd_sm80_cfg=5: the
    // two-stage context kernel, for comparisons), not in the tail order; at D = 256 with the split S / dP (cfg 13
    // with contexts: the loop without it, the default there before).
    if constexpr (D == 64 || D == 128) {  // sm_90+: the one-barrier loop (three Q / dO stages) where it fits
      if (applies && p.bwd_sm80_cfg != kBwdSm80TwoBarCfg) {
        int max_smem = 0;
        cudaError_t err = bwd_sm80_sm90_smem(max_smem);
        if (err != cudaSuccess && err != cudaErrorNotSupported) return err;
        const bool sm90 = err == cudaSuccess;
        if constexpr (D == 64) {  // the 128-query tiles where they fit (kBwdPdsD64Tile128), else the three stages
          if (sm90) {
            err = launch_hstu_bwd_pds_ordered<T, D, 2, kBwdPdsD64Tile128, true>(p, max_smem, stream);
            if (err != cudaErrorNotSupported) return err;
          }
        }
        if (sm90 && bwd_sm80_heads_first<D>(p)) {
          err = launch_hstu_bwd_pds<T, D, 3, 8, kBwdPdsOneBarLoop<D> | kPdsHeadsFirst | kBwdPdsTailFirst<D>, true>(
              p, max_smem, stream);
          if (err != cudaErrorNotSupported) return err;
        }
        if (sm90) {  // (with contexts the same body by name: its context kernel)
          err = p.num_contexts != nullptr
                    ? launch_hstu_bwd_pds<T, D, 3, 8, kBwdPdsOneBarLoop<D>, true>(p, max_smem, stream)
                    : launch_hstu_bwd_pds<T, D, 3, 8>(p, max_smem, stream);
          if (err != cudaErrorNotSupported) return err;
        }
      }
    }
    if constexpr (D == 256) {  // sm_90+: one block barrier per tile pair (kBwdPdsD256OneBar) where it fits
      if (applies && p.bwd_sm80_cfg != kBwdSm80TwoBarCfg) {
        int max_smem = 0;
        cudaError_t err = bwd_sm80_sm90_smem(max_smem);
        if (err != cudaSuccess && err != cudaErrorNotSupported) return err;
        const bool sm90 = err == cudaSuccess;
        if (sm90) {  // (calls with contexts: its context twin; cfg 13 the loop without the split S / dP)
          err = launch_hstu_bwd_pds_ordered<T, D, 2, kBwdPdsD256OneBar, true>(p, max_smem, stream);
          if (err != cudaErrorNotSupported) return err;
        }
      }
    }
    if constexpr (D == 256) {  // (else the two-stage kernel heads first where it fits)
      if (applies && p.num_contexts == nullptr && bwd_sm80_heads_first<D>(p)) {
        int max_smem = 0;
        cudaError_t err = bwd_sm80_smem_limit(max_smem, /*cap_sm8x=*/true);
        if (err == cudaSuccess) {
          err = launch_hstu_bwd_pds<T, D, 2, 8, kBwdPdsDefaultBody<D, 8> | kPdsHeadsFirst>(p, max_smem, stream);
        }
        if (err != cudaErrorNotSupported) return err;
      }
    }
    if (applies) {
      const cudaError_t err = launch_hstu_bwd_pds_fitting<T, D, 8, 0>(p, stream);
      if (err != cudaErrorNotSupported) return err;
    }
  }
  // The old layouts (kBwdSm80OldCfg, the warp-pair switch, other head dims, sm86 / sm89).
  using C = BwdSm80Config<D>;
  constexpr int kSmallestOptin = 99 * 1024;  // sm86 / sm89
  if constexpr (C::kSmem <= kSmallestOptin) {
    return launch_hstu_bwd_main<T, D, C, C::kStages>(p, stream);
  } else {
    int max_smem = 0;  // (the layouts over 99 KB are compiled for sm_80 and sm_90+ only, see hstu_bwd_kernel)
    cudaError_t err = bwd_sm80_smem_limit(max_smem, /*cap_sm8x=*/D == 256);
    if (err != cudaSuccess) return err;
    if constexpr (D == 256) {
      using P = BwdSm80PairConfig<D>;
      if (p.bwd_sm80_pair >= 2 && P::smem(2) <= max_smem) return launch_hstu_bwd_main<T, D, P, 2>(p, stream);
      if (p.bwd_sm80_pair >= 1 && P::smem(1) <= max_smem) return launch_hstu_bwd_main<T, D, P, 1>(p, stream);
    }
    if (C::kSmem <= max_smem) return launch_hstu_bwd_main<T, D, C, C::kStages>(p, stream);
    constexpr int kFallback = (C::kStages == 2 && C::smem(1) <= kSmallestOptin) ? 1 : 0;
    static_assert(C::smem(kFallback) <= kSmallestOptin, "no backward layout fits 99 KB");
    return launch_hstu_bwd_main<T, D, C, kFallback>(p, stream);
  }
}

// kBwdSm80DqClaim (kernel_options(fwd_sm80_cfg=13); the op's workspace uninitialized, claim words behind it): the
// default's loop with dQ claims (kPdsDqClaim; D = 128's one-barrier loop, D = 256's mbarrier loop) heads first (at
// most 2,048 keys; cfg 3 the other order: not claimed), bf16 on an sm_90-class device, calls without rab, contexts
// or another comparison cfg; else cudaErrorNotSupported (nothing launched). Batch first the claim loops ran slower
// than the fill they save (B16 S16K D128 +2.7 %; at D = 256 that loop spilled 28-84 B, B16 S4K +5.5 %).
template <typename T, int D>
cudaError_t launch_hstu_bwd_dq_claim(const HstuParams& p, cudaStream_t stream) {
  if constexpr ((D == 128 || D == 256) && std::is_same<T, __nv_bfloat16>::value) {
    if (p.rab != nullptr || p.num_contexts != nullptr || p.bwd_sm80_cfg != 0 || !bwd_sm80_heads_first<D>(p) ||
        (D == 256 && p.bwd_sm80_pair != 0)) {
      return cudaErrorNotSupported;
    }
    int max_smem = 0;
    const cudaError_t err = bwd_sm80_sm90_smem(max_smem);
    if (err != cudaSuccess) return err;
    constexpr int kBody = D == 128 ? kBwdPdsOneBarLoop<D> | kPdsDqClaim : kBwdPdsD256OneBar | kPdsDqClaim;
    return launch_hstu_bwd_pds<T, D, D == 128 ? 3 : 2, 8, kBody | kPdsHeadsFirst | kBwdPdsTailFirst<D>>(p, max_smem,
                                                                                                     stream);
  }
  return cudaErrorNotSupported;
}

template <typename T, int D>
cudaError_t run_hstu_bwd(const HstuParams& p_in, cudaStream_t stream) {
  cudaError_t err;
  HstuParams p = p_in;
  bool launched = false, tried = false;
  // kBwdSm80DqClaim: the claim words and the layout's flag word zeroed, then the claims' loop (no rab: no drab);
  // where it does not apply the whole workspace zeroed before any other kernel and the bit cleared (the default's
  // path)
  if ((p.fwd_sm80_cfg & kBwdSm80DqClaim) != 0) {
    const bool ws = p.dq_accum != nullptr && p.dq_zero_flags != nullptr;  // (else a zeroed workspace or none)
    const int64_t floats = bwd_sm80_dq_floats(p.total_q, p.batch, p.heads, D);
    bool claimed = false;
    if (ws) {
      const int64_t words = bwd_sm80_dq_claim_words(p.total_q, p.batch, p.heads);
      err = cudaMemsetAsync(p.dq_accum + floats - 4, 0, (4 + words) * static_cast<int64_t>(sizeof(float)), stream);
      if (err != cudaSuccess) return err;
      if (p.batch > 0 && p.heads > 0 && p.max_seqlen_k > 0) {
        err = launch_hstu_bwd_dq_claim<T, D>(p, stream);
        if (err != cudaSuccess && err != cudaErrorNotSupported) return err;
        claimed = launched = err == cudaSuccess;
      }
    }
    if (!claimed) {
      if (ws) {
        err = cudaMemsetAsync(p.dq_accum, 0, floats * static_cast<int64_t>(sizeof(float)), stream);
        if (err != cudaSuccess) return err;
      }
      p.fwd_sm80_cfg &= ~kBwdSm80DqClaim;
      p.dq_zero_flags = nullptr;
    }
  }
  // A per-head drab arrives uninitialized unless the op zeroed it (kBwdSm80DrabZeroed, hstu_bwd_sm80_limits.h): the
  // default's rab loops write all of it (their zeros where the walk stores none); before any other kernel, a memset.
  if (p.drab != nullptr && p.drab_accum == nullptr && p.drab_heads == nullptr &&
      (p.fwd_sm80_cfg & kBwdSm80DrabZeroed) == 0) {
    if (p.batch > 0 && p.heads > 0 && p.max_seqlen_k > 0 && p.bwd_sm80_cfg == 0) {  // (else the cfg's own kernel)
      err = launch_hstu_bwd_rab_smem<T, D>(p, stream);
      if (err != cudaSuccess && err != cudaErrorNotSupported) return err;
      launched = err == cudaSuccess;
      tried = true;
    }
    if (!launched) {
      err = cudaMemsetAsync(p.drab, 0, p.drab_numel * static_cast<int64_t>(sizeof(T)), stream);
      if (err != cudaSuccess) return err;
      p.fwd_sm80_cfg |= kBwdSm80DrabZeroed;
    }
  }
  if (p.batch <= 0 || p.heads <= 0) return cudaSuccess;
  if (p.max_seqlen_k > 0 && !launched) {
    err = launch_hstu_bwd_fitting<T, D>(p, stream, /*rab_smem=*/!tried);
    if (err != cudaSuccess) return err;
  }
  if (p.dq_accum == nullptr) {
    // Deterministic: dQ from its own query-parallel kernel (also writes zero rows for empty key ranges).
    if (p.max_seqlen_q > 0) {
      err = launch_hstu_bwd_dq<T, D>(p, stream);
      if (err != cudaSuccess) return err;
    }
  } else if (p.total_q > 0) {
    if constexpr (D == 64 || D == 128 || D == 256) {  // (the workspace of either layout: bwd_sm80_dq_floats)
      const dim3 grid(max(1, (p.max_seqlen_q + kDqFragPad - 1) / kDqFragPad), p.batch, p.heads);
      hstu_dq_tile_convert_kernel<T, D><<<grid, 256, 0, stream>>>(p);
    } else {
      const int64_t n = p.total_q * p.heads * D;
      const int blocks = static_cast<int>(n / 256 + 1 < 65536 ? n / 256 + 1 : 65536);
      hstu_dq_convert_kernel<T, D><<<blocks, 256, 0, stream>>>(p);
    }
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (p.drab != nullptr && p.drab_numel > 0 && (p.drab_accum != nullptr || p.drab_heads != nullptr)) {
    const int blocks = static_cast<int>(p.drab_numel / 256 + 1 < 65536 ? p.drab_numel / 256 + 1 : 65536);
    if (p.drab_heads != nullptr) {
      hstu_drab_reduce_kernel<T><<<blocks, 256, 0, stream>>>(p);
    } else {
      hstu_drab_convert_kernel<T><<<blocks, 256, 0, stream>>>(p);
    }
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace hstu
