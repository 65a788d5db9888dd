// Hopper HSTU backward: tile shapes and shared-memory layout (BwdSm90Traits), the wgmma shapes of its GEMMs and the
// rab / drab fragment loads and stores of the kRab kernels, the mask bits of a thread's S^T elements on target tiles
// (hstu_bwd_sm90_kernel.cuh).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"

namespace hstu {
namespace sm90 {

template <int D, int STAGES = 2>
struct BwdSm90Traits {
  // D = 256 ("split D"): dK + dV of 64 keys x 256 columns would need 256 fp32 registers per thread, so the CTA owns
  // 64 keys and the two consumer warpgroups split the columns: warpgroup g keeps dK, dV[:, 128 g : 128 g + 128] in
  // registers (128 per thread, as at D = 128); S^T and dP^T are computed once per tile (warpgroup 0 / 1) and
  // exchanged through smem.
  static constexpr bool kSplitD = D == 256;
  static constexpr int kBlockM = 64;   // query rows per tile
  static constexpr int kBlockN = kSplitD ? 64 : 128;  // keys per CTA: 2 consumer warpgroups x 64 (D = 256: 64)
  static constexpr int kAccN = kSplitD ? 128 : D;      // dK / dV columns per consumer warpgroup
  static constexpr int kKeyRows = 64;                  // keys per consumer warpgroup
  static constexpr int kStages = STAGES;  // Q/dO pipeline depth
  static constexpr int kPanels = D / 64;  // 64-element (128-byte) column panels (TMA box width)
  static constexpr int kQPanelBytes = kBlockM * 128;
  static constexpr int kKVPanelBytes = kBlockN * 128;
  static constexpr int kQBytes = kBlockM * D * 2;   // one Q or dO tile
  static constexpr int kKVBytes = kBlockN * D * 2;  // K or V
  static constexpr int kdSBytes = kBlockN * kBlockM * 2;  // dS^T: 128 (split D: 64) keys x 64 queries (128-byte rows)
  static constexpr int kOffV = kKVBytes;
  static constexpr int kOffQ = 2 * kKVBytes;
  static constexpr int kOffdO = kOffQ + kStages * kQBytes;
  static constexpr int kOffdS = kOffdO + kStages * kQBytes;
  // dS^T buffers and "dS^T of tile t ready" named barriers per warpgroup: dQ of tile t runs one tile late, and a
  // warpgroup can be at most kStages tiles ahead of the other (Q/dO pipeline), so kStages + 1 of each suffice.
  // Split D: one private buffer per warpgroup (its dQ runs in the same tile; buffer index = warpgroup).
  static constexpr int kdSBufs = kSplitD ? 2 : kStages + 1;
  static constexpr int kBarIdBase = 6;  // ids 6 .. 6 + 2 kdSBufs - 1 (1, 3, 4, 5: other named barriers)
  // dQ staging: per consumer warpgroup 64 queries x 64 columns fp32 in 32-column (128-byte) panels in the
  // 128B-swizzled layout of the dq_accum tensor map's box (per warp: its 16 rows), reduced into dq_accum by bulk
  // tensor ops. Split D: none (dQ goes from registers into the tiled workspace, dq_red_tiled_block).
  static constexpr int kDqPanelBytes = 64 * 128;
  static constexpr int kDqStageBytes = kSplitD ? 0 : 2 * kDqPanelBytes;
  static constexpr int kOffDqStage = kOffdS + kdSBufs * kdSBytes;
  static constexpr int kBarOffset = kOffDqStage + 2 * kDqStageBytes;
  static constexpr int kParkOffset = 96;      // split D, work list: key block, head, batch; the last chunk's flag
  static constexpr int kTileMapOffset = 120;  // split D: the work's tile map (2 words) behind the mbarriers
  static constexpr int kSmem = kBarOffset + 128 + 1024;  // + mbarriers + slack to align the base to 1024 bytes
  static constexpr int kLptPairs = 16;  // kSkipWg kernel's 1-D grid: at most this many (batch, head) pairs per
  static constexpr int kLptCtas = 128;  // group, and about this many CTAs
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  // D = 128: the two consumer warpgroups split dQ's columns (each over all 128 keys); D = 64: each its own keys.
  static constexpr bool kSplitDqCols = D == 128;
  static_assert(D == 64 || D == 128 || D == 256, "sm90 backward: head dim 64, 128 or 256");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 65536, "register budget");
  static_assert(kSmem <= 232448, "shared memory");
  static_assert(8 + 8 * (3 * kStages + 1) <= kParkOffset && kParkOffset + 16 <= kTileMapOffset,
                "mbarriers (bar_k, full_q, full_do, empty, bar_v), parked words, tile map");
  static_assert(kBarIdBase + 2 * kdSBufs <= 16, "named barrier ids");
};

// m64n128k16 SS with a K-major A and an MN-major B (split-S/dP D = 256: dV += P^T dO, dK += dS^T Q, A from smem).
template <typename T>
__device__ __forceinline__ void wgmma_ss_tb_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    wgmma_m64n128k16_sst_bf16<0, 1>(d, da, db, scale_d);
  } else {
    wgmma_m64n128k16_sst_f16<0, 1>(d, da, db, scale_d);
  }
}

template <typename T>
__device__ __forceinline__ void wgmma_ss_tt_n64(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    wgmma_m64n64k16_sst_bf16<1, 1>(d, da, db, scale_d);
  } else {
    wgmma_m64n64k16_sst_f16<1, 1>(d, da, db, scale_d);
  }
}

// Split D: acc = A B^T, 64 keys x 64 queries over D (S^T = K Q^T, dP^T = V dO^T): A the 64-key tile at a, B the
// query tile at b, both in kPanels 128-byte-swizzled 64-column panels; one commit group.
template <typename T, typename C, int BM, int D>
__device__ __forceinline__ void wgmma_keys_queries_t(float (&acc)[BM / 2], uint32_t a, uint32_t b) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint64_t da = make_desc_sw128(a + (ks / 4) * C::kKVPanelBytes + (ks % 4) * 32, 16);
    const uint64_t db = make_desc_sw128(b + (ks / 4) * C::kQPanelBytes + (ks % 4) * 32, 16);
    wgmma_ss<T, BM>(acc, da, db, ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// kRab: rab^T of one thread's 64 x 64 (keys x queries) S^T fragment. Element e = key j_w0 + 16 warp + lane/4 +
// 8 ((e % 4) / 2), query position r0 + 2 (lane % 4) + 8 (e / 4) + (e % 2), value rab[b, h][r][j]; elements e, e + 1
// (queries r, r + 1 of one key) packed in one register (two 16-bit loads), 0 outside [0, lk) x [0, lk).
template <typename T, int BM>
__device__ __forceinline__ void bwd_load_rab_t(uint32_t (&rab_v)[BM / 4], const HstuParams& p, int b, int h, int r0,
                                               int j_w0, int lk, int warp, int lane) {
  const T* rb = static_cast<const T*>(p.rab) + static_cast<int64_t>(b) * p.rab_batch_stride +
                static_cast<int64_t>(h) * p.rab_head_stride;
  const int jk = j_w0 + 16 * warp + lane / 4;
  const int rq = r0 + 2 * (lane % 4);
  const int64_t rs = p.rab_row_stride;
  const T* base = rb + static_cast<int64_t>(rq) * rs + jk;
  if (r0 + BM <= lk && j_w0 + 64 <= lk) {  // interior (uniform per warpgroup): no guards
#pragma unroll
    for (int e = 0; e < BM / 2; e += 2) {
      const T* a = base + static_cast<int64_t>(8 * (e / 4)) * rs + 8 * ((e % 4) / 2);
      rab_v[e / 2] = ld_nc_2u16(a, a + rs);
    }
  } else {
#pragma unroll
    for (int e = 0; e < BM / 2; e += 2) {
      const int j = jk + 8 * ((e % 4) / 2);
      const int r = rq + 8 * (e / 4);
      const T* a = base + static_cast<int64_t>(8 * (e / 4)) * rs + 8 * ((e % 4) / 2);
      rab_v[e / 2] = ld_nc_2u16_if(a, a + rs, r < lk && j < lk, r + 1 < lk && j < lk);
    }
  }
}

// kRab: drab[r][j] = dS from one 64-key x 64-query dS^T tile in smem (128-byte rows, 16-byte chunk index XOR
// (row % 8), T-rounded as the GEMMs use it): the calling lane takes tile row kr (key j = n0 + kr) and query columns
// lane / 16 + 2 it, so each half-warp covers 16 adjacent keys of one rab row (32-byte segments). Direct 16-bit
// stores (per-head rab or H = 1) or fp32 atomics into p.drab_accum (shared rab with H > 1, 0 skipped). The caller
// has made the tile's rows visible to this warp; every (r, j) of the tile must have exactly one calling lane.
template <typename T, int BM>
__device__ __forceinline__ void bwd_store_drab_rows(const HstuParams& p, uint32_t tile, int kr, int n0, int r0, int lk,
                                                    int b, int h, int lane) {
  const int j = n0 + kr;
  const int64_t rs = p.drab_row_stride;
  const int64_t off0 = static_cast<int64_t>(b) * p.drab_batch_stride + static_cast<int64_t>(r0) * rs + j;
  const uint32_t rowa = tile + kr * 128;
#pragma unroll 4
  for (int it = 0; it < BM / 2; ++it) {
    const int c = 2 * it + lane / 16;  // query column of the tile
    unsigned short raw;
    asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(raw) : "r"(rowa + ((((c / 8) ^ (kr % 8))) << 4) + (c % 8) * 2));
    if (j < lk && r0 + c < lk) {
      const int64_t off = off0 + static_cast<int64_t>(c) * rs;
      if (p.drab_accum != nullptr) {
        const float v = unpack_lo<T>(raw);
        if (v != 0.f) atomicAdd(p.drab_accum + off, v);
      } else {
        reinterpret_cast<unsigned short*>(p.drab)[off + static_cast<int64_t>(h) * p.drab_head_stride] = raw;
      }
    }
  }
}

// The mask bits of this thread's BM / 2 S^T elements on a tile the element rule would cover (targets, or the GR
// window): bit e for key jr + 8 ((e % 4) / 2), query position rc + 8 (e / 4) + (e % 2) (the S^T fragment layout),
// from each query row's two key intervals (SeqMask::row_keys: the group-size divisions once per row, BM / 4 rows)
// instead of allowed() per element (two divisions each); the same bits (tests/hstu/test_mask_rows.py).
template <int BM>
__device__ __forceinline__ uint32_t bwd_row_key_bits(const SeqMask& mk, int rc, int jr) {
  uint32_t bits = 0;
#pragma unroll 1
  for (int k = 0; k < BM / 8; ++k) {  // query positions rc + 8 k, rc + 8 k + 1
#pragma unroll
    for (int odd = 0; odd < 2; ++odd) {
      int hlo, hhi, tlo, thi;
      mk.row_keys(rc + 8 * k + odd, hlo, hhi, tlo, thi);
      const int j1 = jr + 8;
      const bool ok0 = (jr >= hlo && jr < hhi) || (jr >= tlo && jr < thi);
      const bool ok1 = (j1 >= hlo && j1 < hhi) || (j1 >= tlo && j1 < thi);
      bits |= (static_cast<uint32_t>(ok0) | static_cast<uint32_t>(ok1) << 2) << (4 * k + odd);
    }
  }
  return bits;
}

}  // namespace sm90
}  // namespace hstu
