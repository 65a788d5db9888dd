// HSTU attention backward for Hopper (sm_90a): dQ, dK, dV, and with kRab the rab term and drab.
//
// Math (hstu/_reference.py, hstu_attn_reference_backward), per sequence and head, S = alpha (Q K^T + rab), N = scaling:
//   P = SiLU(S) masked,  dV = P^T dO / N,  dP = dO V^T / N,  dS = dP SiLU'(S) alpha masked,  dQ = dS K,  dK = dS^T Q,
//   drab = dS (summed over heads for a 1-head rab with H > 1: fp32 atomics into p.drab_accum, converted afterwards)
// (alpha and 1/N are folded into dS once, so dQ/dK need no scaling; dV is scaled in the epilogue).
//
// KV-tile parallel (FA3 structure): one CTA per (128-key block, head, batch) walks the query tiles (64 rows) some
// of its keys can be seen from. Warpgroup 0 is the producer (one thread issues TMA: K and V once, on two mbarriers,
// Q and dO per query tile into a 2-stage mbarrier pipeline, in the order K, Q, V, dO, Q, dO, ... so that the first
// S^T waits for K and Q only; setmaxnreg 24); warpgroups 1 and 2 are consumers (setmaxnreg 240), each
// owning 64 keys of the block with dK/dV accumulators in registers. Per query tile t a consumer warpgroup:
//   S^T = K_wg Q^T, dP^T = V_wg dO^T       (SS wgmma, both K-major, m64n64)
//   P^T, dS^T in registers                  (one tanh per element; masked by select, not multiply; D = 128: the
//                                            P^T part while dP^T still runs, selects only on partly masked tiles)
//   dS^T -> smem (swizzled keys x queries tile), arrive on "my dS^T of tile t ready" (named barrier, no wait)
//   dV += P^T dO, dK += dS^T Q              (RS wgmma, dO/Q MN-major, m64nD)
//   dQ of tile t - 1 (one tile late): wait for the other warpgroup's dS^T of t - 1, dQ = dS K (SS wgmma, MN-major
//   A and B, m64n64; D = 128: warpgroup g takes columns [64 g, 64 g + 64) over all 128 keys; D = 64: its own 64
//   keys), staged in smem (fp32, 128B swizzle) and added to the fp32 workspace p.dq_accum by bulk tensor
//   reduce-adds (cp.reduce.async.bulk.tensor, one per warp and 32-column panel; kDqMode selects alternatives).
// The warpgroups never wait for each other inside a tile, so one's SiLU / dQ staging runs under the other's GEMMs.
// Garbage rows (keys past the used keys, queries past the used rows: next sequence, seqused tail, NaN-poisoned) are
// zeroed in smem after they land (K/V once, Q/dO of the last query tile), so masked zeros never meet a non-finite
// operand in any GEMM. Fully masked query tiles are never loaded (SeqMask::row_range).
// D = 256 (BwdSm90Traits::kSplitD): 64 keys per CTA; warpgroup g owns dK, dV columns [128 g, 128 g + 128) (and, in
// the kSplitSP 0 kernel, the same dQ columns; kSplitSP 1: warpgroup 0 dQ columns 0 .. 63, warpgroup 1 64 .. 255).
// Its dQ tiles go straight from the accumulator registers into a tiled workspace (red.global.add.v4.f32, 512
// contiguous bytes per warp instruction; dq_red_tiled), converted into rows by hstu_dq_convert_tiled_sm90_kernel.
// Default (kSplitSP): S^T and dP^T are computed once per tile, S^T by warpgroup 0 (which also writes P^T and SiLU'
// to smem) and dP^T by warpgroup 1 (which turns SiLU' into dS^T in place), exchanged through two 8 KB smem tiles
// with named barriers; dV / dK with the other warpgroup's operand from smem (SS); dQ's four
// 64-column blocks are split 1 | 3 between the warpgroups (warpgroup 0 also runs the SiLU pass) and warpgroup 1
// issues the next tile's dP^T between its dQ reductions. Previous kernel (kSplitSP = 0,
// dev variant 6): both warpgroups compute the full S^T / dP^T / P^T / dS^T (dQ through their own dS^T buffer, no
// cross-warpgroup waits; kPingpong orders their S^T / dP^T issues).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "hstu/csrc/hstu_common.cuh"
#include "hstu/csrc/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_plan.cuh"
#include "hstu/csrc/sm90/sm90_utils.cuh"

namespace hstu {
namespace sm90 {

template <int D, int STAGES = 2>
struct BwdSm90Traits {
  // D = 256 ("split D"): dK + dV of 64 keys x 256 columns would need 256 fp32 registers per thread, so the CTA owns
  // 64 keys and the two consumer warpgroups split the columns: warpgroup g keeps dK, dV[:, 128 g : 128 g + 128] in
  // registers (128 per thread, as at D = 128), and both compute the full S^T / dP^T / P^T / dS^T of the 64 keys
  // (the two 64 x 64 x 256 GEMMs twice per CTA: 7 GEMM units for 5 useful) so that they never wait for each other.
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
  // dQ staging (kDqMode 1, 2): per consumer warpgroup 64 queries x 64 columns fp32 in 32-column (128-byte) panels
  // in the 128B-swizzled layout of the dq_accum tensor map's box, reduced into dq_accum by bulk tensor ops.
  // Split D: none (dQ goes from registers into the tiled workspace, dq_red_tiled).
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

__device__ __forceinline__ void red_add_v4(float* addr, float a, float b, float c, float d, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(addr),
      "f"(a), "f"(b), "f"(c), "f"(d), "r"(static_cast<int>(pred))
      : "memory");
}

// D = 256: the fp32 dq workspace in 16-row groups (hstu_bwd_sm90_dq_accum_floats), one per warp of a 64-row query
// tile: rows 16 g' .. 16 g' + 15 of sequence b are group (cu_seqlens_q[b] + 16 b) / 16 + g' (the padding keeps every
// sequence's groups its own: at most total_q / 16 + B + 1 groups). A group of head h holds 4 blocks of 64 columns,
// each in the register order of a warp's part of an m64n64 fp32 wgmma accumulator: float4 j of lane l (its
// registers 4 j .. 4 j + 3: rows l / 4 and l / 4 + 8 of the group, columns 8 j + 2 (l % 4), + 1) at float4 index
// 32 j + l. Each warp's red.global.add.v4.f32 then covers 512 contiguous bytes, with no staging in shared memory;
// hstu_dq_convert_tiled_sm90_kernel puts the rows back. The last query tile's warps past the sequence's rows add
// exact zeros (their Q / dO rows are zeroed in smem, so dS = 0) into the next groups, which changes nothing.
__device__ __forceinline__ int64_t dq_group_index(int q_start, int b, int row0) {
  return ((static_cast<int64_t>(q_start) + 16 * static_cast<int64_t>(b)) >> 4) + (row0 >> 4);
}
// One m64n64 block of a warpgroup's dQ tile (query rows m0 .. m0 + 63, columns 64 blk .. 64 blk + 63) for thread wtid.
__device__ __forceinline__ void dq_red_tiled_block(float* acc, int q_start, int b, int m0, int heads, int h, int blk,
                                                   int wtid, const float (&q)[32]) {
  const int64_t g = dq_group_index(q_start, b, m0) + wtid / 32;
  float* a = acc + ((g * heads + h) * 4 + blk) * 1024 + 4 * (wtid % 32);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(a + 128 * j), "f"(q[4 * j]), "f"(q[4 * j + 1]),
                 "f"(q[4 * j + 2]), "f"(q[4 * j + 3])
                 : "memory");
  }
}
// Its two halves (columns 64 blk, 64 blk + 64: the kSplitSP 0 kernel's warpgroup tile).
__device__ __forceinline__ void dq_red_tiled(float* acc, int q_start, int b, int m0, int heads, int h, int blk,
                                             int wtid, const float (&q0)[32], const float (&q1)[32]) {
  dq_red_tiled_block(acc, q_start, b, m0, heads, h, blk, wtid, q0);
  dq_red_tiled_block(acc, q_start, b, m0, heads, h, blk + 1, wtid, q1);
}

// Bulk tensor reduction shared -> global (dst += src, fp32 add), tracked by the issuing thread's bulk groups.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The same with an L2 cache policy (createpolicy) for the reduced lines.
__device__ __forceinline__ void tma_reduce_add_3d_hint(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2,
                                                       uint64_t policy) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group.L2::cache_hint"
      " [%0, {%2, %3, %4}], [%1], %5;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk groups are complete (their writes performed).
__device__ __forceinline__ void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// All but this thread's newest N bulk groups are complete.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// dst (global) <- src (shared), `bytes` contiguous (non-tensor bulk copy, this thread's bulk group).
__device__ __forceinline__ void bulk_store(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
// dst (shared) <- src (global), `bytes` contiguous, completing `bytes` of transactions on mbarrier bar.
__device__ __forceinline__ void bulk_load(uint32_t dst, const float* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// The bulk groups of this thread have finished reading shared memory (the source may be overwritten).
__device__ __forceinline__ void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

__device__ __forceinline__ void st_shared_zero16(uint32_t a) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
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

// The kSkipWg kernel's 1-D grid (kLpt): groups of gp (batch, head) pairs, about one wave of CTAs each (so that a
// group's Q / dO stay in L2: 16 pairs at S = 1K, 1 at S >= 16K); inside a group key block 0 of every pair, then
// block 1, ... (host twin: hstu_bwd_sm90_lpt_pairs).
template <int BN, int kLptPairs, int kLptCtas>
__device__ __forceinline__ int bwd_lpt_group_pairs(const HstuParams& p) {
  return max(1, min(kLptPairs, kLptCtas / ((p.max_seqlen_k + BN - 1) / BN)));
}
// CTA lin of that grid -> its (batch, head) pair (b * H + h) and key block.
template <int BN, int kLptPairs, int kLptCtas>
__device__ __forceinline__ void bwd_lpt_decode(const HstuParams& p, int lin, int& pair, int& n_block) {
  const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
  const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
  const int g = lin / (gp * nblk_k);
  const int gpairs = min(gp, p.batch * p.heads - g * gp);
  const int r = lin - g * gp * nblk_k;
  pair = g * gp + r % gpairs;
  n_block = r / gpairs;
}

// Self-zeroing dq workspace (p.dq_zero_flags: the D = 64 / 128 kernels, hstu_bwd_sm90_dq_zero_words). The workspace is
// cut into chunks of 128 query rows x D columns of one (batch, head) pair; pair P's chunks are zeroed by the CTAs of
// pair P - gp (a group earlier in the grid's order; the launcher zeroes the first group's) and flagged:
// 0 untouched, 1 claimed (being zeroed), 2 zero. Whoever needs a chunk and finds it untouched claims and zeroes it
// itself, so no CTA ever waits for one that has not started (deadlock-free in any dispatch order).
// Flag of chunk qb of pair P (>= gp): dq_zero_flags[(P - gp) * bwd_dq_chunks(p) + qb].
// Chunks per pair (a longer sequence than max_seqlen_q breaks the op's contract: its extra rows are left alone rather
// than flags overrun).
__device__ __forceinline__ int bwd_dq_chunks(const HstuParams& p) { return (p.max_seqlen_q + 127) / 128; }
__device__ __forceinline__ uint32_t ld_acquire_u32(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_relaxed_u32(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(ptr), "r"(v) : "memory");
}
// 0 -> 1 (claim); returns the old value.
__device__ __forceinline__ uint32_t atom_claim_u32(uint32_t* ptr) {
  uint32_t old;
  asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], 0, 1;\n" : "=r"(old) : "l"(ptr) : "memory");
  return old;
}
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
// Chunk qb of pair (b, h): rows [128 qb, min(128 qb + 128, the sequence's rows)), 16-byte zero stores by n threads
// (this one is t of them), flat over the chunk's rows x float4 columns with 32-bit offsets (few live registers: a
// producer warp runs it with 24); then the caller's proxy fence and the flag's release.
template <int D>
__device__ __forceinline__ void bwd_dq_zero_chunk(float* acc, int heads, int q_start, int lq_alloc, int h, int qb,
                                                  int t, int n) {
  constexpr int kC4 = D / 4;  // float4 columns per row (a power of 2)
  const int end = min(128, lq_alloc - 128 * qb) * kC4;
  const uint32_t rs4 = static_cast<uint32_t>(heads) * kC4;  // < 2^22: offsets below 128 rows stay under 2^31
  float4* base = reinterpret_cast<float4*>(acc + (static_cast<int64_t>(q_start) + 128 * qb) * heads * D +
                                           static_cast<int64_t>(h) * D);
#pragma unroll 1
  for (int e = t; e < end; e += n) {
    st_global_v4(base + (static_cast<uint32_t>(e) / kC4) * rs4 + (static_cast<uint32_t>(e) % kC4),
                 make_uint4(0u, 0u, 0u, 0u));
  }
}
// The zeroing share of CTA (pair P, key block n) of either grid (the kSkipWg kernel's 1-D longest-first one or the
// (key block, head, batch) one; decoded again here so that nothing is live into the 24-register producer): chunks
// qb = n, n + nblk_k, ... of pair P + gp, by one warp, each claimed (skipped if someone else has), zeroed and
// released.
template <int D, int BN, int kLptPairs, int kLptCtas, bool kLpt>
__device__ __forceinline__ void bwd_dq_zero_ahead(const HstuParams& p, int lane) {
  const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
  const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
  int pair, n_block;
  if constexpr (kLpt) {
    bwd_lpt_decode<BN, kLptPairs, kLptCtas>(p, static_cast<int>(blockIdx.x), pair, n_block);
  } else {  // the (key block, head, batch) grid: CTAs dispatched in the order of n_block + nblk_k * pair
    pair = static_cast<int>(blockIdx.z) * p.heads + static_cast<int>(blockIdx.y);
    n_block = static_cast<int>(blockIdx.x);
  }
  const int target = pair + gp;
  if (target >= p.batch * p.heads) return;
  const int b = target / p.heads;
  const int q_start = p.cu_seqlens_q[b];
  const int lq_alloc = p.cu_seqlens_q[b + 1] - q_start;
  const int nq = bwd_dq_chunks(p);
  uint32_t* flags = p.dq_zero_flags + static_cast<int64_t>(pair) * nq;
  for (int qb = n_block; 128 * qb < lq_alloc && qb < nq; qb += nblk_k) {
    uint32_t old = 0;
    if (lane == 0) old = atom_claim_u32(flags + qb);
    old = __shfl_sync(0xffffffffu, old, 0);
    if (old != 0) continue;
    bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, q_start, lq_alloc, target - b * p.heads, qb, lane, 32);
    fence_proxy_async_global();
    fence_acq_rel_gpu();
    __syncwarp();
    if (lane == 0) st_release_u32(flags + qb, 2u);
  }
}
// Before the first reduce-add into chunk qb (flag f) of the pair (rows from q_start, head h): wait until it is zero,
// zeroing it alone if nobody has claimed it.
template <int D>
__device__ __forceinline__ void bwd_dq_zero_wait(const HstuParams& p, uint32_t* f, int q_start, int lq_alloc, int h,
                                                 int qb) {
  uint32_t v = ld_acquire_u32(f);
  if (v == 0 && atom_claim_u32(f) == 0u) {
    bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, q_start, lq_alloc, h, qb, 0, 1);
    fence_proxy_async_global();
    st_release_u32(f, 2u);
    v = 2;
  }
  while (v != 2) v = ld_acquire_u32(f);
  fence_proxy_async_global();  // the zeros (generic proxy) before this CTA's bulk reduce-adds (async proxy)
}

// dq converted behind (the kLpt kernel with the self-zeroing workspace): pair P's workspace rows are converted to dq
// by the CTAs of pair P + 2 gp, two groups later in the grid (CTA (P + 2 gp, n): chunk n of pair P), while they are
// still in L2, by their otherwise idle producer warps 2 and 3 (one 64-row half each), and then dropped from L2
// (`discard.global.L2`: converted lines are never written back to HBM). Two groups, not one: a group later the pair
// is often not finished yet, and the converters' wait for it cost more than it saved (docs/archive/hstu_sm90_log.md "Session 19").
// What they do not convert goes to the launcher's pass (hstu_dq_convert_rest_sm90_kernel): the last 2 gp pairs (no
// CTA two groups later), and the rows the main kernel lists (the rest of a 64-row half from a multiple of 16 rows
// on): those of a converter that stopped (its CTA's consumers finished first), of chunks nblk_k, ...
// (max_seqlen_q > max_seqlen_k), and of CTAs that exit at once (keys past their sequence). Words behind the zero
// flags ((pairs - gp) x nq): done[pairs], each pair's arrivals (one per consumer warp once its reduce-adds are
// complete: 8 x nblk_k when the pair is done), then the list: its length, then (pairs - gp) x nq x 8 entries
// (pair P x 8 nq + row / 16).
constexpr int kBwdConvBehindGroups = 2;
// The op asked for it (the kernel converts only where kConvBehind; the launcher runs the rest pass after it).
__host__ __device__ __forceinline__ bool bwd_dq_conv_behind(const HstuParams& p) {
  return p.dq_zero_flags != nullptr && p.dq_conv_behind != 0;
}
__device__ __forceinline__ uint32_t* bwd_dq_done_words(const HstuParams& p, int gp, int nq) {
  return p.dq_zero_flags + static_cast<int64_t>(p.batch * p.heads - gp) * nq;
}
__device__ __forceinline__ uint32_t* bwd_dq_list_words(const HstuParams& p, int gp, int nq) {
  return bwd_dq_done_words(p, gp, nq) + p.batch * p.heads;
}
// Lists rows [r, end of r's 64-row half) of pair src (r a multiple of 16) for the launcher's pass: one entry,
// pair x 8 nq + r / 16.
__device__ __forceinline__ void bwd_dq_list_rows(const HstuParams& p, int gp, int nq, int src, int r) {
  // (a cold path inside the converters' loops: its address is not hoisted out of them, opaque())
  uint32_t* list = bwd_dq_list_words(p, static_cast<int>(opaque(static_cast<uint32_t>(gp))), nq);
  const uint32_t i = atomicAdd(list, 1u);
  list[1 + i] = static_cast<uint32_t>(src) * 8u * nq + r / 16;
}
__device__ __forceinline__ void red_release_add_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(ptr), "r"(v) : "memory");
}
// The converters' shared memory (kConvBehind kernels only: a static __shared__ object, so that its addresses are
// constants and cost the 24-register warps no register): the consumers' mbarrier (one arrive per consumer warp at
// its end), each converter warp's buffer (16 rows of fp32, 128B-swizzled bulk tensor loads: 1024-byte aligned), its
// mbarrier and its parked words.
template <int D>
struct alignas(1024) BwdConvSmem {
  float buf[2][16 * D];
  uint64_t cdone;
  uint64_t bar[2];
  uint32_t park[2][8];
};
template <int D>
__device__ __forceinline__ BwdConvSmem<D>& bwd_conv_smem() {
  __shared__ BwdConvSmem<D> s;
  return s;
}
// Rows [r0, r0 + rows) of head h from the sequence's first row q_start: dq (T) <- the fp32 workspace, thread t of
// N, 8 elements per step (two 16-byte L2 loads, one 16-byte store).
template <typename T, int D, int N>
__device__ __forceinline__ void bwd_dq_convert_rows(const HstuParams& p, int q_start, int h, int r0, int rows, int t) {
  constexpr int kC8 = D / 8;       // 8-element groups per row (a power of 2, <= N)
  constexpr int kRows = N / kC8;   // rows per step
  static_assert(N % kC8 == 0, "whole rows per step");
  const int64_t row0 = static_cast<int64_t>(q_start) + r0 + t / kC8;
  const int c = t % kC8;
  const float* src = p.dq_accum + (row0 * p.heads + h) * D + c * 8;
  T* dst = static_cast<T*>(p.dq) + row0 * p.dq_row_stride + static_cast<int64_t>(h) * p.dq_head_stride + c * 8;
#pragma unroll 1
  for (int r = t / kC8; r < rows; r += kRows) {
    float4 a, b;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w)
                 : "l"(src));
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(b.x), "=f"(b.y), "=f"(b.z), "=f"(b.w)
                 : "l"(src + 4));
    st_global_v4(dst, make_uint4(pack_pair<T>(a.x, a.y), pack_pair<T>(a.z, a.w), pack_pair<T>(b.x, b.y),
                                 pack_pair<T>(b.z, b.w)));
    src += static_cast<int64_t>(kRows) * p.heads * D;
    dst += kRows * p.dq_row_stride;
  }
}
// Producer warp 2 + half of CTA (pair P, key block n) of the kLpt grid: half `half` (64 rows) of chunk n of pair
// P - 2 gp, once all of that pair's reduce-adds are complete (and the chunk is zeroed: one no CTA of the pair added
// into may still wait for its zeroing CTA; then it is listed). Stops, listing what is left for the launcher's pass,
// as soon as this CTA's consumers are done (mbarrier cdone), so that no CTA waits on one that may not have started
// and none outlives its consumers by more than a round. Lists chunks n + nblk_k, ... too. Rounds of 16 rows: D / 32
// bulk tensor loads through the dq workspace's map (16 rows x 32 columns, 128B-swizzled) into the warp's buffer
// (mbarrier bar[half]), the lines dropped from L2 once copied, then rounded stores to dq. The warp runs with 24
// registers: the pair, block and sizes are parked in shared memory and re-read where used, and `half` is a template
// argument (the addresses it selects are constants).
template <typename T, int D, int BN, int kLptPairs, int kLptCtas, int half>
__device__ __forceinline__ void bwd_dq_convert_behind(const HstuParams& p, const CUtensorMap* tm_dq, int lane) {
  BwdConvSmem<D>& cs = bwd_conv_smem<D>();
  const uint32_t bar_cdone = smem_addr(&cs.cdone);
  const uint32_t park = smem_addr(&cs.park[half][0]);
  {
    const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
    const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
    const int nq = bwd_dq_chunks(p);
    int src, n;
    bwd_lpt_decode<BN, kLptPairs, kLptCtas>(p, static_cast<int>(blockIdx.x), src, n);
    src -= kBwdConvBehindGroups * gp;
    if (src < 0) return;
    if (lane == 0) {
      st_shared_u32(park, static_cast<uint32_t>(src));
      st_shared_u32(park + 4, static_cast<uint32_t>(n));
      st_shared_u32(park + 8, static_cast<uint32_t>(gp));
      st_shared_u32(park + 12, static_cast<uint32_t>(nq));
#pragma unroll 1
      for (int q2 = n + nblk_k; q2 < nq; q2 += nblk_k) bwd_dq_list_rows(p, gp, nq, src, 128 * q2 + 64 * half);
    }
    __syncwarp();
    if (n >= nq) return;
  }
  // (from here on the pair, block and sizes are re-read from `park` where used)
  auto src_p = [&]() { return static_cast<int>(ld_shared_u32(park)); };
  auto qb_p = [&]() { return static_cast<int>(ld_shared_u32(park + 4)); };
  auto gp_p = [&]() { return static_cast<int>(ld_shared_u32(park + 8)); };
  auto nq_p = [&]() { return static_cast<int>(ld_shared_u32(park + 12)); };
  {
    const uint32_t* done = bwd_dq_done_words(p, gp_p(), nq_p()) + src_p();
    const uint32_t want = 8u * static_cast<uint32_t>((p.max_seqlen_k + BN - 1) / BN);
    bool stop = false;
    while (true) {
      const uint32_t v = ld_relaxed_u32(done);  // (in flight during the timed wait on the consumers)
      stop = mbar_try_wait_ns(bar_cdone, 0, 2000u);
      if (v >= want || stop) break;
    }
    if (stop) {
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), src_p(), 128 * qb_p() + 64 * half);
      return;
    }
  }
  // (the fence before the first round's loads orders them after both relaxed reads: the count and the zero flag)
  // Round it: rows 16 it of this warp's half. Lane: 4-element group c = lane % (D / 4) (16-byte chunk c % 8 of panel
  // c / 8) of rows lane / (D / 4) + k 128 / D.
  constexpr int kC4 = D / 4;
  constexpr int kStep = 32 / kC4;  // rows per step
#pragma unroll 1
  for (int it = 0; it < 4; ++it) {
    // (opaque: loop invariants hoisted out of this loop cost registers across it)
    const int heads = static_cast<int>(opaque(static_cast<uint32_t>(p.heads)));
    const int sp = src_p();
    const int qb = qb_p();
    const int b = sp / heads;
    const int q_start = p.cu_seqlens_q[b];
    const int rows = p.cu_seqlens_q[b + 1] - q_start;
    const int r = 128 * qb + 64 * half + 16 * it;
    if (r >= rows) break;
    // (the launcher zeroes the first group's chunks; later ones may still wait for their zeroing CTA: listed)
    if (it == 0 && sp >= gp_p() &&
        ld_relaxed_u32(p.dq_zero_flags + static_cast<int64_t>(sp - gp_p()) * nq_p() + qb) != 2u) {
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), sp, r);
      break;
    }
    if (mbar_test(bar_cdone, 0)) {  // the consumers are done: the rest is the launcher's
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), sp, r);
      break;
    }
    const int h = sp - b * heads;
    if (it == 0) {
      fence_acq_rel_gpu();
      fence_proxy_async_global();  // (the bulk loads below read what the pair's reduce-adds wrote)
    }
    const uint32_t buf = smem_addr(&cs.buf[half][0]);
    const uint32_t bar_buf = smem_addr(&cs.bar[half]);
    if (lane == 0) {
      mbar_arrive_expect_tx(bar_buf, 16 * D * 4);  // whole boxes (rows past the tensor: zero-filled, counted)
#pragma unroll
      for (int pn = 0; pn < D / 32; ++pn) tma_load_3d(buf + pn * 2048, tm_dq, bar_buf, 32 * pn, h, q_start + r);
    }
    mbar_wait(bar_buf, it & 1);
    const int nr = min(16, rows - r);
    const int c = lane % kC4;
    const int64_t row = static_cast<int64_t>(q_start) + r;
    T* out = static_cast<T*>(p.dq) + row * p.dq_row_stride + static_cast<int64_t>(h) * p.dq_head_stride + c * 4;
    const float* ws = p.dq_accum + (row * heads + h) * D + c * 4;
    const uint32_t pa = buf + (c / 8) * 2048;  // panel: row j's chunk k at j * 128 + ((k ^ j % 8) << 4)
    // 32-bit offsets of row j (the op turns the conversion off where 16 rows could pass 2^31 elements)
#pragma unroll 1
    for (int j = lane / kC4; j < nr; j += kStep) {
      // copied: the lane holding a line's first 16 bytes drops it from L2 (never written back; measured: no cost)
      if (c % 8 == 0) {
        asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(ws + static_cast<uint32_t>(j * heads * D)) : "memory");
      }
      float4 x;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
                   : "r"(pa + j * 128 + (((c % 8) ^ (j % 8)) << 4)));
      st_global_v2(out + static_cast<uint32_t>(j * static_cast<int>(p.dq_row_stride)), pack_pair<T>(x.x, x.y),
                   pack_pair<T>(x.z, x.w));
    }
    __syncwarp();  // every lane has read the buffer before the next round's loads overwrite it
    fence_proxy_async_smem();
  }
}

// The split-D kernel's grids (kGrid): the (key block, head, batch) grid, the (head, key block, batch) one
// (hstu_bwd_sm90_heads_first), or the jagged work list (hstu_sm90_plan.cuh, BwdPlanUnits; the CTA's item and head:
// sched_cta_item).
constexpr int kBwdGridKHB = 0;
constexpr int kBwdGridHKB = 1;
constexpr int kBwdGridList = 2;
// Key block, head and batch of the CTA. The split-D kernel re-reads them where it uses them (not kept live through
// its loops): from %ctaid, or (work list) from the words its prologue parked in shared memory at `park`.
template <int kAxis>  // %ctaid.x / y / z
__device__ __forceinline__ uint32_t ctaid_reg() {
  uint32_t v;
  if constexpr (kAxis == 0) {
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  } else if constexpr (kAxis == 1) {
    asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(v));
  } else {
    asm volatile("mov.u32 %0, %%ctaid.z;\n" : "=r"(v));
  }
  return v;
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_key_block(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park);
  return ctaid_reg<kGrid == kBwdGridHKB ? 1 : 0>();
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_head(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park + 4);
  return ctaid_reg<kGrid == kBwdGridHKB ? 0 : 1>();
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_batch(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park + 8);
  return ctaid_reg<2>();
}

// The D = 256 backward's work-list units (hstu_sm90_plan.cuh): key blocks of 64 keys, their work's query tiles (the
// no-rab kernel's, gaps skipped).
struct BwdPlanUnits {
  static constexpr bool kHeavyLast = false;  // (causal: key block 0 sees the most queries)
  static __device__ __forceinline__ int count(const HstuParams& p, const SeqInfo& si) {
    return min((p.max_seqlen_k + 63) / 64, (si.lk_alloc + 63) / 64);
  }
  static __device__ __forceinline__ void range(const SeqInfo& si, int u, int& lo, int& hi) {
    int mb_begin, n_a, gap;
    lo = 0;
    bwd_work_tiles<64, 64, true>(si, u * 64, mb_begin, n_a, gap, hi);
  }
};

// kDqMode: how dQ tiles reach dq_accum. 0: red.global.add.v4.f32 from registers; 1: staged in smem, one bulk
// tensor reduce-add per 32-column panel per warpgroup (tm_dq box 64 rows, after a warpgroup barrier); 2: the same
// per warp (box 16 rows: each warp stages and reduces its own 16 rows, no barrier). kNoDqRed (experiments only,
// wrong dq): skip the reductions. kRab: S^T += rab^T before the SiLU (each thread loads its 32 elements from global
// memory right after issuing the S^T / dP^T wgmmas, so the loads fly under them) and drab = dS written from the
// pointwise pass (direct 16-bit stores, or fp32 atomics for a shared rab); kRab = false is the no-rab kernel.
// Split D (kSplitSP != 0): warpgroup 0 loads rab^T (under its S^T) and writes drab from the dS^T tile in sX.
// kPingpong (split D only): the two consumer warpgroups take turns issuing their S^T / dP^T GEMMs (named barriers
// 6 and 7), so that one's pointwise pass runs under the other's GEMMs (they do identical work and would otherwise
// stay in phase). kGrid (split D only): the grid order or the work list (`sched`, kBwdGridList: no rab; launched
// behind its planner, programmatic dependent launch), bwd_cta_key_block.
template <typename T, int D, int kStagesT, int kDqMode, bool kNoDqRed = false, bool kRab = false,
          bool kPingpong = false, bool kSkipWg = false, int kSplitSP = 0, int kGrid = kBwdGridKHB>
__global__ void __launch_bounds__(384, 1)
    hstu_bwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                         const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_dk,
                         const __grid_constant__ CUtensorMap tm_dv, const HstuParams p, const SchedArgs sched) {
  using C = BwdSm90Traits<D, kStagesT>;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  constexpr bool kSplitD = C::kSplitD;
  constexpr int NA = C::kAccN;
  static_assert(!(kSplitD && (kDqMode != 2 || (kRab && kSplitSP == 0))),
                "split-D backward: default dQ mode; rab with split S^T / dP^T only");
  static_assert(kSplitD || !kPingpong, "pingpong: split-D kernel only");
  // kSkipWg (D = 64 / 128 without rab): a query tile that none of a warpgroup's 64 keys can see (causal: the first
  // tile of the block for warpgroup 1; keys past the sequence) costs that warpgroup no GEMM: it only writes zeros
  // as its dS^T rows (read by the other warpgroup's dQ) and takes part in dQ as usual.
  static_assert(!kSkipWg || (!kSplitD && !kRab), "warpgroup tile skip: D = 64 / 128 without rab");
  // kSplitSP (split D only): S^T / dP^T computed once per tile (warpgroup 0: S^T, P^T, SiLU'; warpgroup 1: dP^T, dS^T)
  // and exchanged through smem (section "split S^T / dP^T" in docs/archive/hstu_sm90_log.md).
  // dQ's 64-column blocks are split 1 | 3 between the warpgroups (warpgroup 0: block 0, warpgroup 1: blocks 1-3), and
  // warpgroup 1 issues the next tile's dP^T inside the tile, between its dQ reductions.
  static_assert(kSplitSP == 0 || (kSplitSP == 1 && kSplitD && !kPingpong),
                "split S^T / dP^T: split-D kernel without pingpong");
  static_assert(kGrid == kBwdGridKHB || kSplitD, "other grids: split-D kernel only");
  static_assert(kGrid != kBwdGridList || !kRab, "work list: no rab");

  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base;
  const uint32_t sV = base + C::kOffV;
  const uint32_t sQ = base + C::kOffQ;    // stage s at + s * kQBytes
  const uint32_t sdO = base + C::kOffdO;  // stage s at + s * kQBytes
  const uint32_t sdS = base + C::kOffdS;  // tile t's buffer at + (t % kdSBufs) * kdSBytes
  const uint32_t sDqStage = base + C::kOffDqStage;  // consumer warpgroup wg at + wg * kDqStageBytes (mode 1, 2)
  const uint32_t bar = base + C::kBarOffset;
  const uint32_t bar_k = bar;  // K (V has its own, bar_v, so that S^T need not wait for V)
  auto bar_full_q = [&](int s) { return bar + 8u + 8u * s; };
  auto bar_full_do = [&](int s) { return bar + 8u + 8u * (S + s); };
  auto bar_empty = [&](int s) { return bar + 8u + 8u * (2 * S + s); };
  const uint32_t bar_v = bar + 8u + 8u * (3 * S);

  // D = 128 with a right window (causal, local: the kSkipWg kernel): a 1-D grid in groups of (batch, head) pairs,
  // and inside a group key block 0 of every pair first, then block 1, ...: under a causal mask the longest works
  // start first, so the grid's last wave holds the shortest ones (a shorter tail). The other kernels keep the
  // (key block, head, batch) grid: full windows (all blocks equal) measured 2-4 % slower in this order, D = 64 no
  // faster, with rab the decoded indices spilled. launch_bwd picks the grid by the same rule.
  constexpr bool kLpt = kSkipWg;
  // Self-zeroing workspace (p.dq_zero_flags, hstu_bwd_sm90_dq_zero_words): the D = 64 / 128 kernels, with or
  // without rab. The pairs zeroed a group ahead follow the grid's order: the longest-first groups (kLpt), else gp
  // pairs = about gp * nblk CTAs later in the (key block, head, batch) order. Not the split-D kernel (D = 256): with
  // the zeroing warp, the polls and the second Q-barrier arrival it spilled 8 / 28-40 B into its consumer loops.
  constexpr bool kSelfZero = !kSplitD;
  // dq converted behind (bwd_dq_convert_behind): the kLpt kernel with the self-zeroing workspace (the default dQ
  // mode: the converters read through tm_dq's 16-row boxes).
  constexpr bool kConvBehind = kSelfZero && kLpt && kDqMode == 2;
  // kSplitPw (D = 128): the SiLU pass in two parts, the first under this warpgroup's dP^T (at D = 64, whose S^T / dP^T
  // take half as long, it measured 0-3 % slower); kFullPw: each part also in a copy without mask selects, for tiles
  // that every thread sees in full (not with rab: with both copies the rab kernel spilled 24 B).
  constexpr bool kSplitPw = D == 128;
  constexpr bool kFullPw = kSplitPw && !kRab;
  int n_block, h, b;
  int t_lo = 0, t_hi = 0;  // work list: the item's tiles of its key block's work
  if constexpr (kLpt) {
    int pair;
    bwd_lpt_decode<BN, C::kLptPairs, C::kLptCtas>(p, static_cast<int>(blockIdx.x), pair, n_block);
    h = pair % p.heads;
    b = pair / p.heads;
  } else if constexpr (kGrid == kBwdGridList) {
    int4 it;
    if (!sched_cta_work(sched, p.heads, it, h)) return;
    b = it.x;
    n_block = it.y;
    t_lo = it.z;
    t_hi = it.w;
  } else {
    // The mapping of bwd_cta_key_block / bwd_cta_head / bwd_cta_batch, through the builtins here: the helpers' volatile
    // reads in this place made the D = 64 / 128 / 256 kernels spill (up to 40 / 64 B).
    n_block = kGrid == kBwdGridHKB ? blockIdx.y : blockIdx.x;
    h = kGrid == kBwdGridHKB ? blockIdx.x : blockIdx.y;
    b = blockIdx.z;
  }
  // Self-zeroing workspace: producer warp 1 zeroes this CTA's share of the chunks of the pair a group later (also
  // when the CTA has no keys).
  auto zero_ahead = [&]() {
    if constexpr (kSelfZero) {
      if (p.dq_zero_flags != nullptr && threadIdx.x >= 32 && threadIdx.x < 64) {
        bwd_dq_zero_ahead<D, BN, C::kLptPairs, C::kLptCtas, kLpt>(p, threadIdx.x - 32);
      }
    }
  };
  const SeqInfo si = seq_info(p, b);
  const int n0 = n_block * BN;
  if (n0 >= si.lk_alloc) {
    if constexpr (kConvBehind) {  // no reduce-adds: the consumer warps' 8 arrivals at once; no conversion
      if (bwd_dq_conv_behind(p) && threadIdx.x == 0) {
        const int gp = bwd_lpt_group_pairs<BN, C::kLptPairs, C::kLptCtas>(p);
        const int nq = bwd_dq_chunks(p);
        red_release_add_u32(bwd_dq_done_words(p, gp, nq) + b * p.heads + h, 8u);
        const int src = b * p.heads + h - kBwdConvBehindGroups * gp;
        if (src >= 0) {
          for (int qb = n_block; qb < nq; qb += (p.max_seqlen_k + BN - 1) / BN) {
            bwd_dq_list_rows(p, gp, nq, src, 128 * qb);
            bwd_dq_list_rows(p, gp, nq, src, 128 * qb + 64);
          }
        }
      }
    }
    zero_ahead();
    return;
  }
  const SeqMask& mk = si.mask;
  const int keys_used = max(0, min(BN, si.lk - n0));
  // The work's query tiles (bwd_work_tiles; D = 256 with rab walks the context gap).
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, !(kSplitD && kRab)>(si, n0, mb_begin, n_a, gap, n_mt);
  if constexpr (kGrid == kBwdGridList) {  // the item's tiles [t_lo, t_hi) of the work (a chunk of a split block)
    mb_begin += t_lo;
    n_a = max(0, n_a - t_lo);
    n_mt = t_hi - t_lo;
  }
  // Query tile of the work's i-th tile (i in [0, n_mt)). Split D: mb_begin, n_a and gap are parked in shared memory
  // (behind the mbarriers) and re-read on each use, because three more live registers made its loops spill.
  const uint32_t sTileMap = bar + C::kTileMapOffset;
  const uint32_t park = bar + C::kParkOffset;  // work list: key block, head, batch (bwd_cta_key_block)
  auto tile_of = [&](int i) {
    if constexpr (kSplitD && kRab) {
      return mb_begin + i;  // gap == 0
    } else if constexpr (kSplitD) {
      const uint32_t w0 = ld_shared_u32(sTileMap);      // mb_begin
      const uint32_t w1 = ld_shared_u32(sTileMap + 4);  // n_a | gap << 16
      return static_cast<int>(w0) + i + (i >= static_cast<int>(w1 & 0xffffu) ? static_cast<int>(w1 >> 16) : 0);
    } else {
      return mb_begin + i + (i >= n_a ? gap : 0);
    }
  };

  const int tid = threadIdx.x;
  if (tid == 0) {
    mbar_init(bar_k, 1);
    mbar_init(bar_v, 1);
    // Self-zeroing workspace: the producer arrives once more on tile i's Q barrier, for pairs after the first
    // group when it has seen tile i's chunk zeroed (it polls the flag while the tile's loads are in flight). (Every
    // pair: deciding it here needs the group size, a division that made the D = 256 kernel spill.)
    const uint32_t q_arrivals = kSelfZero && p.dq_zero_flags != nullptr ? 2 : 1;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      mbar_init(bar_full_q(s), q_arrivals);
      mbar_init(bar_full_do(s), 1);
      mbar_init(bar_empty(s), 8);  // one arrive per consumer warp
    }
    if constexpr (kConvBehind) {
      BwdConvSmem<D>& cs = bwd_conv_smem<D>();
      mbar_init(smem_addr(&cs.cdone), 8);  // one arrive per consumer warp, at its end
      mbar_init(smem_addr(&cs.bar[0]), 1);  // producer warps 2, 3: their conversion buffers
      mbar_init(smem_addr(&cs.bar[1]), 1);
    }
    fence_barrier_init();
    if constexpr (kGrid == kBwdGridList) {
      st_shared_u32(park, static_cast<uint32_t>(n_block));
      st_shared_u32(park + 4, static_cast<uint32_t>(h));
      st_shared_u32(park + 8, static_cast<uint32_t>(b));
    }
    if constexpr (kSplitD && !kRab) {
      st_shared_u32(sTileMap, static_cast<uint32_t>(mb_begin));
      st_shared_u32(sTileMap + 4, static_cast<uint32_t>(n_a) | (static_cast<uint32_t>(gap) << 16));
    }
  }
  __syncthreads();

  if (tid < 128) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<C::kProducerRegs>();
    if (tid >= 32) {
      // Warp 1 zeroes its share in its own branch (thread 0's values are not live through its loop: 24 registers),
      // once V (the last of the CTA's first loads) has landed (its stores do not compete with them).
      if (kSelfZero && p.dq_zero_flags != nullptr && tid < 64) {
        if (n_mt > 0) mbar_wait(bar_v, 0);
        zero_ahead();
      } else if (kConvBehind && bwd_dq_conv_behind(p) && tid >= 64) {
        if constexpr (kConvBehind) {
          if (tid < 96) {  // (the half a template argument: no register for the addresses it selects)
            bwd_dq_convert_behind<T, D, BN, C::kLptPairs, C::kLptCtas, 0>(p, &tm_dq, tid % 32);
          } else {
            bwd_dq_convert_behind<T, D, BN, C::kLptPairs, C::kLptCtas, 1>(p, &tm_dq, tid % 32);
          }
        }
      }
    } else if (tid == 0 && n_mt > 0) {
      prefetch_tensormap(&tm_q);
      prefetch_tensormap(&tm_k);
      prefetch_tensormap(&tm_v);
      prefetch_tensormap(&tm_do);
      // K first, then Q of tile 0, V, dO of tile 0 (the loop below): the first S^T needs K and Q only.
      mbar_arrive_expect_tx(bar_k, C::kKVBytes);
#pragma unroll
      for (int pn = 0; pn < C::kPanels; ++pn) {
        tma_load_3d(sK + pn * C::kKVPanelBytes, &tm_k, bar_k, pn * 64, h, si.k_start + n0);
      }
      // Self-zeroing workspace: this pair's flags start at p.dq_zero_flags + zbase; -1: the first group (zeroed by
      // the launcher, nothing to wait for); -2: a zeroed workspace.
      int zbase = -2;
      if constexpr (kSelfZero) {
        const int gp = bwd_lpt_group_pairs<BN, C::kLptPairs, C::kLptCtas>(p);
        const int pair = b * p.heads + h;
        if (p.dq_zero_flags != nullptr) zbase = pair >= gp ? (pair - gp) * bwd_dq_chunks(p) : -1;
      }
      int zq = -1;  // chunk last waited for
      for (int i = 0; i < n_mt; ++i) {
        const int s = i % S;
        const uint32_t ph = (i / S) & 1;
        const int row = si.q_start + tile_of(i) * BM;
        mbar_wait(bar_empty(s), ph ^ 1);
        mbar_arrive_expect_tx(bar_full_q(s), C::kQBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(sQ + s * C::kQBytes + pn * C::kQPanelBytes, &tm_q, bar_full_q(s), pn * 64, h, row);
        }
        if (i == 0) {
          mbar_arrive_expect_tx(bar_v, C::kKVBytes);
#pragma unroll
          for (int pn = 0; pn < C::kPanels; ++pn) {
            tma_load_3d(sV + pn * C::kKVPanelBytes, &tm_v, bar_v, pn * 64, h, si.k_start + n0);
          }
        }
        mbar_arrive_expect_tx(bar_full_do(s), C::kQBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(sdO + s * C::kQBytes + pn * C::kQPanelBytes, &tm_do, bar_full_do(s), pn * 64, h, row);
        }
        if constexpr (kSelfZero) {
          // Tile i's chunk is zero (polled while the loads fly) before the consumers see tile i's Q, so before any
          // of this CTA's reduce-adds into it.
          if (zbase >= -1) {
            const int qb = tile_of(i) * BM / 128;
            if (zbase >= 0 && qb != zq && 128 * qb < p.max_seqlen_q) {  // (no flag past max_seqlen_q: see
                                                                        // bwd_dq_zero_ahead)
              bwd_dq_zero_wait<D>(p, p.dq_zero_flags + zbase + qb, si.q_start, si.lq_alloc, h, qb);
              zq = qb;
            }
            mbar_arrive(bar_full_q(s));
          }
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<C::kConsumerRegs>();
    const int ctid = tid - 128;
    const int wg = ctid / 128;  // keys [64 wg, 64 wg + 64) of the block (split D: all 64 keys, columns 128 wg..)
    const int wtid = ctid % 128;
    const int warp = wtid / 32;
    const int lane = wtid % 32;
    const int kr0 = kSplitD ? 0 : 64 * wg;  // this warpgroup's first key row of the block
    const int j_w0 = n0 + kr0;              // key position of this warpgroup's first key
    const int c0w = kSplitD ? 128 * wg : 0;  // split D: first dK / dV (kSplitSP 0: dQ) column of this warpgroup

    float acc_dk[NA / 2];
    float acc_dv[NA / 2];
#pragma unroll
    for (int i = 0; i < NA / 2; ++i) {
      acc_dk[i] = 0.f;
      acc_dv[i] = 0.f;
    }

    if (n_mt > 0) {
      float acc_s[BM / 2];   // S^T
      float acc_dp[BM / 2];  // dP^T
      float acc_dq[32];      // dQ: 64 queries x 64 columns
      uint32_t pf[BM / 16][4];
      uint32_t df[BM / 16][4];
      uint32_t rab_v[kRab ? BM / 4 : 1];  // kRab: elements e, e + 1 rab values (16 bits each), 0 outside [0, lk)
      const float half_alpha = 0.5f * p.alpha;
      const float ds_scale = p.inv_scaling * p.alpha;
      const int64_t dq_rs = static_cast<int64_t>(p.heads) * D;
      float* dq_acc = p.dq_accum + static_cast<int64_t>(si.q_start) * dq_rs + static_cast<int64_t>(h) * D;

      // K (and V, waited for before the first dP^T): zero the rows past the used keys once they have landed (both
      // consumer warpgroups share the rows; then both wait for V here).
      mbar_wait(bar_k, 0);
      if (keys_used < BN) {
        mbar_wait(bar_v, 0);
        const int nrows = BN - keys_used;
        const int total = 2 * C::kPanels * nrows * 8;
        for (int idx = ctid; idx < total; idx += 256) {
          const int chunk = idx % 8;
          const int rr = (idx / 8) % nrows;
          const int rest = idx / (8 * nrows);
          const int pn = rest % C::kPanels;
          const uint32_t t = rest / C::kPanels == 0 ? sK : sV;
          st_shared_zero16(t + pn * C::kKVPanelBytes + (keys_used + rr) * 128 + chunk * 16);
        }
        fence_proxy_async_smem();
        named_barrier_sync(1, 256);
      }

      if constexpr (kSplitSP != 0) {
        // ------------------------------------------------ split S^T / dP^T (D = 256): each computed once per tile.
        // Warpgroup 0: S^T = K Q^T, P^T = SiLU (T) -> sP, SiLU' (fp16, 0 where masked) -> sX, dV += P^T dO (RS),
        //   dK += dS^T Q (SS, A = sX once warpgroup 1 has turned SiLU' into dS^T), dQ (SS, A = sX).
        // Warpgroup 1: dP^T = V dO^T, dS^T = dP^T alpha / N SiLU' (read from sX, written back in place, same thread
        //   and address), dK += dS^T Q (RS), dV += P^T dO (SS, A = sP), dQ (SS, A = sX).
        // Named barriers (256 threads: one warpgroup arrives, the other syncs (E: both sync); each used once per
        // tile, and neither warpgroup can arrive twice on one before the other has synced on it, see docs/archive/hstu_sm90_log.md):
        //   A (0 -> 1) P^T, SiLU' of tile i in smem; B (1 -> 0) dS^T of tile i in sX;
        //   E (both) the dV (sP) and dQ (sX) wgmmas of tile i of both warpgroups are done (warpgroup 0 may write
        //   P^T, SiLU' of tile i + 1).
        // dQ goes from the accumulators into the tiled workspace (dq_red: no smem).
        constexpr uint32_t kBarA = 10, kBarB = 11, kBarE = 13;
        const uint32_t sP = sdS;
        const uint32_t sX = sdS + C::kdSBytes;
        // Q / dO of tile i have landed; the last tile's rows past the used rows are zeroed by both warpgroups.
        // kDo: dO too (warpgroup 0 waits for it before its dV; the last tile's zeroing needs both).
        auto wait_tile = [&](int i, auto do_tag) {
          constexpr bool kDo = decltype(do_tag)::value;
          const int s = i % S;
          const uint32_t ph = (i / S) & 1;
          mbar_wait(bar_full_q(s), ph);
          if constexpr (kDo) mbar_wait(bar_full_do(s), ph);
          const int m0 = tile_of(i) * BM;
          const int q_used = si.lq - m0;
          if (q_used < BM) {
            if constexpr (!kDo) mbar_wait(bar_full_do(s), ph);
            const int nrows = BM - q_used;
            const int total = 2 * C::kPanels * nrows * 8;
            for (int idx = ctid; idx < total; idx += 256) {
              const int chunk = idx % 8;
              const int rr = (idx / 8) % nrows;
              const int rest = idx / (8 * nrows);
              const int pn = rest % C::kPanels;
              const uint32_t t = (rest / C::kPanels == 0 ? sQ : sdO) + s * C::kQBytes;
              st_shared_zero16(t + pn * C::kQPanelBytes + (q_used + rr) * 128 + chunk * 16);
            }
            fence_proxy_async_smem();
            named_barrier_sync(1, 256);
          }
        };
        // dQ[m0 : m0 + 64, 64 b : 64 b + 64] += dS K[:, 64 b ..] into q (A = dS^T in sX, MN-major; B = K panel b,
        // MN-major), one commit group. The descriptors' bases
        // through opaque() (hoisted out of the loop, they cost registers across it).
        auto dq_block = [&](float (&q)[32], int b) {
          const uint32_t sXo = opaque(sX);
          const uint32_t sKo = opaque(sK);
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            wgmma_ss_tt_n64<T>(q, make_desc_sw128(sXo + ks * 16 * 128, C::kdSBytes),
                               make_desc_sw128(sKo + b * C::kKVPanelBytes + ks * 16 * 128, C::kKVPanelBytes),
                               ks > 0 ? 1 : 0);
          }
          wgmma_commit();
        };
        // That block into the tiled workspace (dq_red_tiled_block).
        auto dq_red_blk = [&](const float (&q)[32], int m0, int b) {
          if constexpr (!kNoDqRed) {
            // head, batch re-read (not kept live through the loop)
            const uint32_t hy = bwd_cta_head<kGrid>(park);
            const uint32_t bz = bwd_cta_batch<kGrid>(park);
            // kRab: the sequence's first row re-read too (kept live, it made the rab kernel spill); the kernel
            // without rab keeps it (the load on its reduction path cost it 3 %).
            const int qs = kRab ? __ldg(p.cu_seqlens_q + bz) : si.q_start;
            dq_red_tiled_block(p.dq_accum, qs, static_cast<int>(bz), m0, p.heads, static_cast<int>(hy), b, wtid, q);
          }
        };
        // Word (ks, q) of a thread's 64 x 64 tile fragment: key row 16 warp + lane/4 + 8 (q % 2), query columns
        // 8 (2 ks + q / 2) + 2 (lane % 4) (+1), elements e = 8 ks + 2 q, e + 1; 128-byte rows, 16-byte chunk
        // index XOR (row % 8) = lane / 4 (conflict-free 4-byte accesses).
        auto word_addr = [&](uint32_t buf, int ln, int ks, int q) {
          return buf + (16 * warp + ln / 4) * 128 + (ln % 4) * 4 + (q % 2) * 8 * 128 +
                 (((2 * ks + q / 2) ^ (ln / 4)) << 4);
        };
        // warp-uniform for ptxas (the two roles hold wgmmas: a branch it cannot prove uniform serializes them)
        if (__shfl_sync(0xffffffffu, wg, 0) == 0) {
          float acc_s0[BM / 2];
          uint32_t pf0[BM / 16][4];
          uint32_t xf0[BM / 16][4];
          uint32_t rab0[kRab ? BM / 4 : 1];  // kRab: rab^T of this thread's S^T elements (bwd_load_rab_t)
          auto mask_bits = [&](int r0) {
            const uint32_t cx = bwd_cta_key_block<kGrid>(park);  // n0 re-read (not kept live through the loop)
            const int n0 = static_cast<int>(cx) * BN;
            uint32_t bits = 0xffffffffu;
            if (!mk.tile_full(r0, r0 + BM, n0, n0 + 64)) {
              const int jr = n0 + 16 * warp + lane / 4;
              const int rc = r0 + 2 * (lane % 4);
              bits = 0;
              // kRab: mk.hist re-read through opaque() (the comparison hoisted out of the loop spilled 4 B)
              if ((kRab ? static_cast<int>(opaque(static_cast<uint32_t>(mk.hist))) : mk.hist) == mk.lk) {
#pragma unroll
                for (int e = 0; e < BM / 2; ++e) {
                  const int j = jr + 8 * ((e % 4) / 2);
                  const int r = rc + 8 * (e / 4) + (e % 2);
                  const bool ok = r < mk.lk && j < mk.lk &&
                                  (r < mk.ctx || ((mk.wl < 0 || j >= r - mk.wl) && (mk.wr < 0 || j <= r + mk.wr)));
                  bits |= static_cast<uint32_t>(ok) << e;
                }
              } else {
#pragma unroll 1
                for (int e = 0; e < BM / 2; ++e) {
                  const int j = jr + 8 * ((e % 4) / 2);
                  const int r = rc + 8 * (e / 4) + (e % 2);
                  bits |= static_cast<uint32_t>(mk.allowed(r, j)) << e;
                }
              }
            }
            return bits;
          };
          auto issue_s = [&](int i) { wgmma_keys_queries_t<T, C, BM, D>(acc_s0, sK, sQ + (i % S) * C::kQBytes); };
          wait_tile(0, std::false_type{});
          issue_s(0);
          for (int i = 0; i < n_mt; ++i) {
            const int m0 = tile_of(i) * BM;
            const int s = i % S;
            const uint32_t sQs = sQ + s * C::kQBytes;
            const uint32_t sdOs = sdO + s * C::kQBytes;
            if constexpr (kRab) {
              // rab^T of tile i: the loads fly under S^T of tile i (issued at the end of the previous iteration).
              // n0, h, b re-read (not kept live through the loop)
              const uint32_t cx = bwd_cta_key_block<kGrid>(park);
              const uint32_t hy = bwd_cta_head<kGrid>(park);
              const uint32_t bz = bwd_cta_batch<kGrid>(park);
              bwd_load_rab_t<T, BM>(rab0, p, static_cast<int>(bz), static_cast<int>(hy), m0 + mk.offset,
                                    static_cast<int>(cx) * BN, mk.lk, warp,
                                    static_cast<int>(opaque(static_cast<uint32_t>(lane))));
            }
            const uint32_t bits = mask_bits(m0 + mk.offset);  // while S^T of tile i flies
            wgmma_wait<0>();
            pin_all(acc_s0);
            // P^T = SiLU(alpha S^T), SiLU'(alpha S^T) = sigmoid (1 + h (1 - t)) (h = alpha s / 2, t = tanh h),
            // both 0 where masked (select). kRab: S^T + rab^T.
#pragma unroll
            for (int e = 0; e < BM / 2; e += 2) {
              float pv[2], xv[2];
#pragma unroll
              for (int u = 0; u < 2; ++u) {
                float sv = acc_s0[e + u];
                if constexpr (kRab) sv += u ? unpack_hi<T>(rab0[e / 2]) : unpack_lo<T>(rab0[e / 2]);
                const float x = sv * half_alpha;
                const float t = tanh_fast(x);
                const bool ok = (bits >> (e + u)) & 1u;
                pv[u] = ok ? fmaf(x, t, x) : 0.f;
                xv[u] = ok ? fmaf(0.5f, t, 0.5f) * fmaf(x, 1.f - t, 1.f) : 0.f;
              }
              pf0[e / 8][(e % 8) / 2] = pack_pair<T>(pv[0], pv[1]);
              xf0[e / 8][(e % 8) / 2] = pack_pair<__half>(xv[0], xv[1]);
            }
            // Warpgroup 1 is done reading sP (its dV of tile i - 1) and both warpgroups' dQ wgmmas of tile i - 1 have
            // read sX.
            if (i > 0) named_barrier_sync(kBarE, 256);
            {
              const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
#pragma unroll
              for (int ks = 0; ks < BM / 16; ++ks) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(word_addr(sP, ln, ks, q)), "r"(pf0[ks][q]) : "memory");
                  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(word_addr(sX, ln, ks, q)), "r"(xf0[ks][q]) : "memory");
                }
              }
            }
            fence_proxy_async_smem();
            named_barrier_arrive(kBarA, 256);
            mbar_wait(bar_full_do(s), (i / S) & 1);  // (wait_tile waited for Q only)
            // dV += P^T dO[:, c0w ..] (A from registers).
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BM / 16; ++ks) {
              wgmma_rs<T, NA, 1>(acc_dv, pf0[ks],
                                 make_desc_sw128(sdOs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes),
                                 1);
            }
            wgmma_commit();
            named_barrier_sync(kBarB, 256);  // dS^T of tile i in sX
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BM / 16; ++ks) {
              wgmma_ss_tb_n128<T>(acc_dk, make_desc_sw128(sX + ks * 32, 16),
                                  make_desc_sw128(sQs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes),
                                  1);
            }
            wgmma_commit();
            // kRab: drab from dS^T of tile i in sX while dK / dV fly. Each warp reads back its own 16 key rows
            // (16 warp .. + 15, the rows its SiLU' stores use). Ordering of these reads:
            // - after warpgroup 1's dS^T stores of tile i (all of warpgroup 1 arrives on B after them, fenced);
            // - before every later write to these rows: this warpgroup's SiLU' stores of tile i + 1 come after
            //   barrier E of tile i + 1; warpgroup 1 writes sX again (dS^T of tile i + 1) only after barrier A of
            //   tile i + 1, on which this warpgroup arrives after those stores.
            // Warpgroup 0 does it (not 1): between B and its dQ it has 2 GEMM units less to issue than warpgroup 1.
            if constexpr (kRab) {
              if (p.drab != nullptr) {
                const uint32_t cx = bwd_cta_key_block<kGrid>(park);
                const uint32_t hy = bwd_cta_head<kGrid>(park);
                const uint32_t bz = bwd_cta_batch<kGrid>(park);
                const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
                bwd_store_drab_rows<T, BM>(p, sX, 16 * warp + ln % 16, static_cast<int>(cx) * BN, m0 + mk.offset,
                                           mk.lk, static_cast<int>(bz), static_cast<int>(hy), ln);
              }
            }
            wgmma_wait<0>();  // dV, dK: P^T fragments and dQ accumulators are never in flight together
            pin_all(acc_dv);
            pin_all(acc_dk);
            pin_all(pf0);
            if (lane == 0) mbar_arrive(bar_empty(s));  // Q / dO of stage s no longer read by this warp
            // dQ block 0 only (warpgroup 1 has blocks 1-3: this warpgroup's chain S^T -> SiLU -> ... -> S^T of the next
            // tile is the longer one), then S^T of tile i + 1 (after the reductions: dK, dV, dQ and S^T accumulators
            // would not fit).
            float qa[32];
            dq_block(qa, 0);
            wgmma_wait<0>();
            pin_all(qa);
            dq_red_blk(qa, m0, 0);
            // Unconditional issue (a conditional one makes ptxas wait for it at the join): after the last tile it
            // multiplies whatever stage n_mt % S holds (valid smem, result unused), one wasted S^T per CTA.
            if (i + 1 < n_mt) wait_tile(i + 1, std::false_type{});
            issue_s(i + 1);
          }
          wgmma_wait<0>();  // the unused S^T after the last tile reads sK, which the epilogue overwrites
          pin_all(acc_s0);
        } else {
          float acc_dp1[BM / 2];
          uint32_t df1[BM / 16][4];
          // dP^T of tile t, issued before the loop (t = 0) and inside tile t - 1 (below); unconditional as
          // warpgroup 0's S^T (after the last tile: a wasted dP^T on valid smem, waited for after the loop). The
          // descriptors' bases go through opaque(): hoisted out of the loop, they made the kernel spill.
          const uint32_t sV0 = sV;
          auto issue_dp = [&](int t) {
            wgmma_keys_queries_t<T, C, BM, D>(acc_dp1, opaque(sV0), opaque(sdO + (t % S) * C::kQBytes));
          };
          wait_tile(0, std::true_type{});
          mbar_wait(bar_v, 0);
          issue_dp(0);
          for (int i = 0; i < n_mt; ++i) {
            const int m0 = tile_of(i) * BM;
            const int s = i % S;
            const uint32_t sQs = sQ + s * C::kQBytes;
            const uint32_t sdOs = sdO + s * C::kQBytes;
            if (i > 0) {
              // This warpgroup's dV (reads sP) and dQ (reads sX) of tile i - 1 are done. A full sync, not an arrive:
              // warpgroup 0 reaches its side just before its P^T stores, and this warpgroup waits for those (barrier
              // A) right after anyway.
              named_barrier_sync(kBarE, 256);
            }
            wgmma_wait<0>();
            pin_all(acc_dp1);
            named_barrier_sync(kBarA, 256);  // P^T, SiLU' of tile i in smem
            {
              // dS^T = dP^T alpha / N SiLU' (0 where masked), read from sX and written back in place.
              const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
              uint32_t xw[BM / 16][4];
#pragma unroll
              for (int ks = 0; ks < BM / 16; ++ks) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(xw[ks][q]) : "r"(word_addr(sX, ln, ks, q)) : "memory");
                }
              }
#pragma unroll
              for (int ks = 0; ks < BM / 16; ++ks) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  const int e = 8 * ks + 2 * q;
                  df1[ks][q] = pack_pair<T>(acc_dp1[e] * ds_scale * unpack_lo<__half>(xw[ks][q]),
                                            acc_dp1[e + 1] * ds_scale * unpack_hi<__half>(xw[ks][q]));
                  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(word_addr(sX, ln, ks, q)), "r"(df1[ks][q]) : "memory");
                }
              }
            }
            fence_proxy_async_smem();
            named_barrier_arrive(kBarB, 256);
            // dK += dS^T Q[:, c0w ..] (A from registers), dV += P^T dO[:, c0w ..] (A = sP).
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BM / 16; ++ks) {
              wgmma_rs<T, NA, 1>(acc_dk, df1[ks],
                                 make_desc_sw128(sQs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes),
                                 1);
            }
#pragma unroll
            for (int ks = 0; ks < BM / 16; ++ks) {
              wgmma_ss_tb_n128<T>(acc_dv, make_desc_sw128(sP + ks * 32, 16),
                                  make_desc_sw128(sdOs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes),
                                  1);
            }
            wgmma_commit();
            wgmma_wait<0>();
            pin_all(acc_dk);
            pin_all(acc_dv);
            pin_all(df1);
            if (lane == 0) mbar_arrive(bar_empty(s));
            named_barrier_sync(5, 128);  // all 4 warps' dS^T rows are in sX (fenced)
            {
              // dQ blocks 1-3 (warpgroup 0 has block 0). Blocks 1 and 2 in two commit groups, block 1's reductions
              // under block 2's wgmmas; then dP^T of tile i + 1 (this warpgroup's next dP^T no longer waits for all of
              // its reductions); block 2's reductions; block 3 into block 2's registers (an array that a scale-d 0
              // wgmma writes is its operand from the declaration on: a third array would be live across the dP^T
              // issue, and ptxas serializes the wgmmas), its reductions.
              float qa[32], qb[32];
              dq_block(qa, 1);
              dq_block(qb, 2);
              wgmma_wait<1>();
              pin_all(qa);
              dq_red_blk(qa, m0, 1);
              wgmma_wait<0>();
              pin_all(qb);
              if (i + 1 < n_mt) wait_tile(i + 1, std::true_type{});
              issue_dp(i + 1);
              dq_red_blk(qb, m0, 2);
              dq_block(qb, 3);
              wgmma_wait<0>();
              pin_all(qb);
              dq_red_blk(qb, m0, 3);
            }
          }
          wgmma_wait<0>();  // the unused dP^T after the last tile (it reads sV, which the epilogue overwrites)
          pin_all(acc_dp1);
        }
      } else {
      // dQ[m0 : m0 + 64] += dS K for tile t once its dS^T is in smem (A = dS^T buffer, MN-major; B = K, MN-major),
      // added to the fp32 workspace; lane pairs swap halves so that each lane owns 4 consecutive columns of a row.
      auto dq_tile = [&](int t, int m0) {
        const uint32_t sdSb = sdS + (t % C::kdSBufs) * C::kdSBytes;
        // kDqMode 1: the previous tile's reduce has read the staging buffer (published by the barrier below).
        if (kDqMode == 1 && wtid == 0) bulk_wait_read0();
        wgmma_fence();
        if constexpr (C::kSplitDqCols) {
          // the other warpgroup's dS^T of tile t (and, through this barrier, all of this warpgroup's warps')
          named_barrier_sync(C::kBarIdBase + (wg ^ 1) * C::kdSBufs + t % C::kdSBufs, 256);
#pragma unroll
          for (int ks = 0; ks < BN / 16; ++ks) {
            const uint64_t da = make_desc_sw128(sdSb + ks * 16 * 128, C::kdSBytes);
            const uint64_t db = make_desc_sw128(sK + wg * C::kKVPanelBytes + ks * 16 * 128, C::kKVPanelBytes);
            wgmma_ss_tt_n64<T>(acc_dq, da, db, ks > 0 ? 1 : 0);
          }
        } else {
          named_barrier_sync(4 + wg, 128);  // this warpgroup's own dS^T rows (all 4 warps)
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint64_t da = make_desc_sw128(sdSb + (64 * wg + ks * 16) * 128, C::kdSBytes);
            const uint64_t db = make_desc_sw128(sK + (64 * wg + ks * 16) * 128, C::kKVPanelBytes);
            wgmma_ss_tt_n64<T>(acc_dq, da, db, ks > 0 ? 1 : 0);
          }
        }
        wgmma_commit();
        wgmma_wait<0>();
        pin_all(acc_dq);
        if constexpr (kDqMode == 2) {
          // Per warp: rows 16 warp .. + 15 of the tile, two 2 KB panels (16 rows x 128 B) at warp * 4 KB.
          const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t stg = sDqStage + wg * C::kDqStageBytes + warp * 4096;
          if (ln == 0) bulk_wait_read0();  // this warp's previous reduce has read the buffer
          __syncwarp();
          const uint32_t rowa = stg + (ln / 4) * 128 + ((ln % 4) % 2) * 8;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const uint32_t a = rowa + (j / 4) * 2048 + half * 8 * 128 + (((2 * (j % 4) + (ln % 4) / 2) ^ (ln / 4)) << 4);
              asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(acc_dq[4 * j + 2 * half]),
                           "f"(acc_dq[4 * j + 2 * half + 1])
                           : "memory");
            }
          }
          fence_proxy_async_smem();
          __syncwarp();
          if (ln == 0 && !kNoDqRed) {
            const int c0 = C::kSplitDqCols ? 64 * wg : 0;
            if constexpr (kLpt) {
              // evict_last: more of the workspace is still in L2 when the conversion reads it (B128 S1K: conversion
              // 140 -> 133 us, main kernel +0-3 us; docs/archive/hstu_sm90_log.md "Session 11").
              uint64_t pol;
              asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
#pragma unroll
              for (int pn = 0; pn < 2; ++pn) {
                tma_reduce_add_3d_hint(&tm_dq, stg + pn * 2048, c0 + 32 * pn, h, si.q_start + m0 + 16 * warp, pol);
              }
            } else {
#pragma unroll
              for (int pn = 0; pn < 2; ++pn) {
                tma_reduce_add_3d(&tm_dq, stg + pn * 2048, c0 + 32 * pn, h, si.q_start + m0 + 16 * warp);
              }
            }
            bulk_commit();
          }
          return;
        }
        if constexpr (kDqMode == 1) {
          // Stage: element (row 16 warp + lane/4 + 8 half, column 8 j + 2 (lane % 4) (+1)) -> panel j / 4, 16-byte
          // chunk 2 (j % 4) + (lane % 4) / 2 XOR (row % 8), 8 bytes at (lane % 4) % 2 (2 wavefronts per store).
          const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t stg = sDqStage + wg * C::kDqStageBytes;
          const uint32_t rowa = stg + (16 * warp + ln / 4) * 128 + ((ln % 4) % 2) * 8;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const uint32_t a = rowa + (j / 4) * C::kDqPanelBytes + half * 8 * 128 +
                                 (((2 * (j % 4) + (ln % 4) / 2) ^ (ln / 4)) << 4);
              asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(acc_dq[4 * j + 2 * half]),
                           "f"(acc_dq[4 * j + 2 * half + 1])
                           : "memory");
            }
          }
          fence_proxy_async_smem();
          named_barrier_sync(4 + wg, 128);
          // Rows past the used queries hold exact zeros (dS = 0 there), so adding them into the next sequence's rows
          // changes nothing; rows past the tensor are clipped by TMA.
          if (wtid == 0 && !kNoDqRed) {
            const int c0 = C::kSplitDqCols ? 64 * wg : 0;
#pragma unroll
            for (int pn = 0; pn < 2; ++pn) {
              tma_reduce_add_3d(&tm_dq, stg + pn * C::kDqPanelBytes, c0 + 32 * pn, h, si.q_start + m0);
            }
            bulk_commit();
          }
          return;
        }
        const bool odd = lane & 1;
        const int row = 16 * warp + lane / 4 + (odd ? 8 : 0);
        const int col0 = (C::kSplitDqCols ? 64 * wg : 0) + 2 * (lane % 4) - (odd ? 2 : 0);
        const bool in = !kNoDqRed && m0 + row < si.lq;
        float* rp = dq_acc + static_cast<int64_t>(m0 + row) * dq_rs + col0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float s0 = odd ? acc_dq[4 * j] : acc_dq[4 * j + 2];
          const float s1 = odd ? acc_dq[4 * j + 1] : acc_dq[4 * j + 3];
          const float g0 = __shfl_xor_sync(0xffffffffu, s0, 1);
          const float g1 = __shfl_xor_sync(0xffffffffu, s1, 1);
          if (odd) {
            red_add_v4(rp + 8 * j, g0, g1, acc_dq[4 * j + 2], acc_dq[4 * j + 3], in);
          } else {
            red_add_v4(rp + 8 * j, acc_dq[4 * j], acc_dq[4 * j + 1], g0, g1, in);
          }
        }
      };

      if constexpr (kPingpong) {
        if (wg == 1) named_barrier_arrive(6, 256);  // warpgroup 0 issues first
      }
      // kSkipWg: tiles i in [lo, hi) (of this work) hold query rows this warpgroup's keys can see; packed lo | hi << 16
      // (query tiles per work < 2^16).
      uint32_t wt_range = 0;
      if constexpr (kSkipWg) {
        const int wkeys = min(64, keys_used - kr0);
        if (wkeys > 0) {
          int rb, re;
          mk.row_range(j_w0, j_w0 + wkeys, rb, re);
          const int ib = max(0, rb - mk.offset);
          const int ie = min(si.lq, re - mk.offset);
          if (ie > ib) {
            // work index of query tile t (tiles in the skipped gap map to the first tile after it)
            const int a_end = mb_begin + n_a;
            auto iter_of = [&](int t) { return t < a_end ? t - mb_begin : max(n_a, t - mb_begin - gap); };
            const int lo = min(n_mt, max(0, iter_of(ib / BM)));
            const int hi = min(n_mt, max(lo, iter_of((ie + BM - 1) / BM)));
            wt_range = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
          }
        }
        wt_range = __shfl_sync(0xffffffffu, wt_range, 0);  // warp-uniform (lets ptxas keep the loop uniform)
      }
      for (int i = 0; i < n_mt; ++i) {
        const int m0 = tile_of(i) * BM;
        const int s = i % S;
        const uint32_t ph = (i / S) & 1;
        const uint32_t sQs = sQ + s * C::kQBytes;
        const uint32_t sdOs = sdO + s * C::kQBytes;
        const uint32_t sdSb = sdS + (kSplitD ? wg : i % C::kdSBufs) * C::kdSBytes;
        const int r0 = m0 + mk.offset;  // key position of the tile's first query row

        // dO (and V): waited for below, after the S^T issue (kRab: here; the late waits made it spill 24 B).
        mbar_wait(bar_full_q(s), ph);
        if constexpr (kRab) {
          mbar_wait(bar_v, 0);
          mbar_wait(bar_full_do(s), ph);
        }
        const int q_used = si.lq - m0;  // >= 1 (m0 < lq)
        if (q_used < BM) {  // last query tile: zero the Q / dO rows past the used rows
          mbar_wait(bar_full_do(s), ph);
          const int nrows = BM - q_used;
          const int total = 2 * C::kPanels * nrows * 8;
          for (int idx = ctid; idx < total; idx += 256) {
            const int chunk = idx % 8;
            const int rr = (idx / 8) % nrows;
            const int rest = idx / (8 * nrows);
            const int pn = rest % C::kPanels;
            const uint32_t t = rest / C::kPanels == 0 ? sQs : sdOs;
            st_shared_zero16(t + pn * C::kQPanelBytes + (q_used + rr) * 128 + chunk * 16);
          }
          fence_proxy_async_smem();
          named_barrier_sync(1, 256);
        }

        if constexpr (kSkipWg) {
          // Tiles outside [lo, hi): none of this warpgroup's keys are visible from their rows.
          if (__builtin_expect(i < (wt_range & 0xffff) || i >= (wt_range >> 16), 0)) {
            // This warpgroup's 64 rows of the dS^T tile are zeros (8 KB: 64 bytes per thread); no GEMMs. (dO is
            // waited for: the stage is released below, and its loads must have landed before it is reused.)
            mbar_wait(bar_full_do(s), ph);
            const uint32_t za = sdSb + kr0 * 128 + wtid * 64;
#pragma unroll
            for (int c = 0; c < 4; ++c) st_shared_zero16(za + 16 * c);
            fence_proxy_async_smem();
            if constexpr (C::kSplitDqCols) {
              named_barrier_arrive(C::kBarIdBase + wg * C::kdSBufs + i % C::kdSBufs, 256);  // my dS^T of tile i
            }
            if (i > 0) dq_tile(i - 1, tile_of(i - 1) * BM);
            if (lane == 0) mbar_arrive(bar_empty(s));
            continue;
          }
        }
        // Mask bits of this thread's 32 elements, before the GEMMs (no mask temporaries live while they fly).
        // Element e: key row 16 warp + lane/4 + 8 ((e % 4) / 2), query column 8 (e / 4) + 2 (lane % 4) + (e % 2).
        uint32_t bits = 0xffffffffu;
        if (!mk.tile_full_targets(r0, r0 + BM, j_w0, j_w0 + 64)) {  // D = 64 / 128 (split D: mask_bits above)
          const int jr = j_w0 + 16 * warp + lane / 4;
          const int rc = r0 + 2 * (lane % 4);
          bits = 0;
          if (mk.hist == mk.lk) {
            // No targets: (r < lk, j < lk) and (context row, or inside the window).
#pragma unroll
            for (int e = 0; e < BM / 2; ++e) {
              const int j = jr + 8 * ((e % 4) / 2);
              const int r = rc + 8 * (e / 4) + (e % 2);
              const bool ok = r < mk.lk && j < mk.lk &&
                              (r < mk.ctx || ((mk.wl < 0 || j >= r - mk.wl) && (mk.wr < 0 || j <= r + mk.wr)));
              bits |= static_cast<uint32_t>(ok) << e;
            }
          } else {
            // Targets: the general rule by a rolled loop (one copy of the code).
#pragma unroll 1
            for (int e = 0; e < BM / 2; ++e) {
              const int j = jr + 8 * ((e % 4) / 2);
              const int r = rc + 8 * (e / 4) + (e % 2);
              bits |= static_cast<uint32_t>(mk.allowed(r, j)) << e;
            }
          }
        }
        // S^T = K_wg Q^T and dP^T = V_wg dO^T (64 keys x 64 queries each).
        // kPingpong: wait for the other warpgroup to have issued its S^T / dP^T (warpgroup 1: of the same tile,
        // warpgroup 0: of the previous tile; warpgroup 1 pre-arrives once before the loop).
        if constexpr (kPingpong) named_barrier_sync(6 + wg, 256);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          const uint64_t da =
              make_desc_sw128(sK + (ks / 4) * C::kKVPanelBytes + kr0 * 128 + (ks % 4) * 32, 16);
          const uint64_t db = make_desc_sw128(sQs + (ks / 4) * C::kQPanelBytes + (ks % 4) * 32, 16);
          wgmma_ss<T, BM>(acc_s, da, db, ks > 0 ? 1 : 0);
        }
        wgmma_commit();
        // dP^T needs V (its own barrier: it lands after K and Q of tile 0) and dO of this tile.
        if constexpr (!kRab) {
          mbar_wait(bar_v, 0);
          mbar_wait(bar_full_do(s), ph);
          wgmma_fence();  // (the waits' loops end the previous fence's reach: ptxas would inject one)
        }
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          const uint64_t da =
              make_desc_sw128(sV + (ks / 4) * C::kKVPanelBytes + kr0 * 128 + (ks % 4) * 32, 16);
          const uint64_t db = make_desc_sw128(sdOs + (ks / 4) * C::kQPanelBytes + (ks % 4) * 32, 16);
          wgmma_ss<T, BM>(acc_dp, da, db, ks > 0 ? 1 : 0);
        }
        wgmma_commit();
        if constexpr (kPingpong) {
          if (wg == 0 || i + 1 < n_mt) named_barrier_arrive(6 + (wg ^ 1), 256);  // the other warpgroup's turn
        }
        // rab^T of this thread's elements: element e = key j_w0 + 16 warp + lane/4 + 8 ((e % 4) / 2), query position
        // r0 + 2 (lane % 4) + 8 (e / 4) + (e % 2), value rab[r][j]; elements e, e + 1 (queries r, r + 1 of one key)
        // packed in one register.
        if constexpr (kRab) bwd_load_rab_t<T, BM>(rab_v, p, b, h, r0, j_w0, mk.lk, warp, lane);
        // P^T = SiLU(alpha S^T) and dS^T = dP^T alpha / N SiLU'(alpha S^T), masked (select: a non-finite dP^T of a
        // masked element cannot leak). h = alpha s / 2, t = tanh(h): SiLU = h (1 + t), SiLU' = sigmoid (1 + h (1 - t)),
        // sigmoid = (1 + t) / 2.
        if constexpr (kSplitPw) {
          // Two passes: the S^T part (tanh, P^T, and alpha / N SiLU' kept in acc_s's registers) as soon as S^T is
          // complete, while this warpgroup's dP^T still runs; then dS^T.
          wgmma_wait<1>();
          pin_all(acc_s);
          auto pass_s = [&](auto full) {
#pragma unroll
            for (int e = 0; e < BM / 2; e += 2) {
              float pv[2];
#pragma unroll
              for (int u = 0; u < 2; ++u) {
                float sv = acc_s[e + u];
                if constexpr (kRab) sv += u ? unpack_hi<T>(rab_v[e / 2]) : unpack_lo<T>(rab_v[e / 2]);
                const float x = sv * half_alpha;
                const float t = tanh_fast(x);
                const bool ok = decltype(full)::value || ((bits >> (e + u)) & 1u);
                pv[u] = ok ? fmaf(x, t, x) : 0.f;
                acc_s[e + u] = ds_scale * fmaf(0.5f, t, 0.5f) * fmaf(x, 1.f - t, 1.f);
              }
              pf[e / 8][(e % 8) / 2] = pack_pair<T>(pv[0], pv[1]);
            }
          };
          auto pass_dp = [&](auto full) {
#pragma unroll
            for (int e = 0; e < BM / 2; e += 2) {
              float dv[2];
#pragma unroll
              for (int u = 0; u < 2; ++u) {
                const bool ok = decltype(full)::value || ((bits >> (e + u)) & 1u);
                dv[u] = ok ? acc_dp[e + u] * acc_s[e + u] : 0.f;
              }
              df[e / 8][(e % 8) / 2] = pack_pair<T>(dv[0], dv[1]);
            }
          };
          const bool full = kFullPw && bits == 0xffffffffu;
          if (full) pass_s(std::true_type{}); else pass_s(std::false_type{});
          wgmma_wait<0>();
          pin_all(acc_dp);
          if (full) pass_dp(std::true_type{}); else pass_dp(std::false_type{});
        } else {
          wgmma_wait<0>();
          pin_all(acc_s);
          pin_all(acc_dp);
          // One pass, so S^T / dP^T registers die while P^T / dS^T fragments are packed.
#pragma unroll
          for (int e = 0; e < BM / 2; e += 2) {
            float pv[2], dv[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              float sv = acc_s[e + u];
              if constexpr (kRab) sv += u ? unpack_hi<T>(rab_v[e / 2]) : unpack_lo<T>(rab_v[e / 2]);
              const float x = sv * half_alpha;
              const float t = tanh_fast(x);
              const bool ok = (bits >> (e + u)) & 1u;
              pv[u] = ok ? fmaf(x, t, x) : 0.f;
              dv[u] = ok ? acc_dp[e + u] * ds_scale * fmaf(0.5f, t, 0.5f) * fmaf(x, 1.f - t, 1.f) : 0.f;
            }
            pf[e / 8][(e % 8) / 2] = pack_pair<T>(pv[0], pv[1]);
            df[e / 8][(e % 8) / 2] = pack_pair<T>(dv[0], dv[1]);
          }
        }
        // dS^T -> smem: word df[ks][q] holds key row 64 wg + 16 warp + lane/4 + 8 (q % 2), query columns
        // 8 (2 ks + q / 2) + 2 (lane % 4) (+1); 128-byte rows, 16-byte chunk index XOR (row % 8) = lane / 4.
        {
          const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));  // keep addresses in the loop
          const uint32_t rowa = sdSb + (kr0 + 16 * warp + ln / 4) * 128 + (ln % 4) * 4;
#pragma unroll
          for (int ks = 0; ks < BM / 16; ++ks) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const uint32_t a = rowa + (q % 2) * 8 * 128 + (((2 * ks + q / 2) ^ (ln / 4)) << 4);
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(df[ks][q]) : "memory");
            }
          }
        }
        fence_proxy_async_smem();
        if constexpr (C::kSplitDqCols) {
          named_barrier_arrive(C::kBarIdBase + wg * C::kdSBufs + i % C::kdSBufs, 256);  // my dS^T of tile i ready
        }

        // dV += P^T dO, dK += dS^T Q (A from registers, dO / Q as MN-major B).
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BM / 16; ++ks) {
          wgmma_rs<T, NA, 1>(acc_dv, pf[ks],
                             make_desc_sw128(sdOs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes), 1);
        }
#pragma unroll
        for (int ks = 0; ks < BM / 16; ++ks) {
          wgmma_rs<T, NA, 1>(acc_dk, df[ks],
                             make_desc_sw128(sQs + (c0w / 64) * C::kQPanelBytes + ks * 16 * 128, C::kQPanelBytes), 1);
        }
        wgmma_commit();
        // kRab: drab[r][j] = dS while dV / dK fly, read back from this warp's own 16 key rows of the dS^T tile
        // (T-rounded, as stored: direct 16-bit stores for a per-head rab or H = 1; fp32 atomics into drab_accum for
        // a shared rab, summed over heads). Lane: key 16 warp + lane % 16, queries lane / 16 + 2 it: 16 adjacent
        // keys of one rab row per half-warp (32-byte segments). Every (r, j) has one writer.
        if constexpr (kRab) {
          if (p.drab != nullptr) {
            __syncwarp();
            bwd_store_drab_rows<T, BM>(p, sdSb, 64 * wg + 16 * warp + lane % 16, n0, r0, mk.lk, b, h, lane);
          }
        }
        wgmma_wait<0>();  // before dQ: P^T / dS^T fragments and dQ's accumulators are never in flight together
        pin_all(acc_dv);
        pin_all(acc_dk);
        pin_all(pf);
        pin_all(df);

        if constexpr (kSplitD) {
          // Q / dO of stage s are no longer read (dQ reads K and dS^T only).
          if (lane == 0) mbar_arrive(bar_empty(s));
          // dQ[m0 : m0 + 64, c0w : c0w + 128] += dS K[:, c0w : c0w + 128] over the 64 keys, as two m64n64 halves
          // (A = this warpgroup's dS^T buffer, MN-major; B = K panels 2 wg, 2 wg + 1, MN-major).
          float acc_q0[32], acc_q1[32];
          named_barrier_sync(4 + wg, 128);  // all 4 warps' dS^T rows are in smem (fenced)
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint64_t da = make_desc_sw128(sdSb + ks * 16 * 128, C::kdSBytes);
            wgmma_ss_tt_n64<T>(acc_q0, da,
                               make_desc_sw128(sK + (2 * wg) * C::kKVPanelBytes + ks * 16 * 128, C::kKVPanelBytes),
                               ks > 0 ? 1 : 0);
          }
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint64_t da = make_desc_sw128(sdSb + ks * 16 * 128, C::kdSBytes);
            wgmma_ss_tt_n64<T>(acc_q1, da,
                               make_desc_sw128(sK + (2 * wg + 1) * C::kKVPanelBytes + ks * 16 * 128, C::kKVPanelBytes),
                               ks > 0 ? 1 : 0);
          }
          wgmma_commit();
          wgmma_wait<0>();
          pin_all(acc_q0);
          pin_all(acc_q1);
          // every warp's dQ wgmma has read the dS^T buffer (the next tile's dS^T stores overwrite it)
          named_barrier_sync(4 + wg, 128);
          if constexpr (!kNoDqRed) dq_red_tiled(p.dq_accum, si.q_start, b, m0, p.heads, h, 2 * wg, wtid, acc_q0, acc_q1);
          continue;
        }

        // dQ of the previous tile (one tile late: the warpgroups need not meet on every tile, so one's SiLU can
        // run under the other's GEMMs).
        if (i > 0) dq_tile(i - 1, tile_of(i - 1) * BM);
        // Q / dO of stage s no longer read by this warp. Released after dQ of tile i - 1 (which waited for the other
        // warpgroup's dS^T of tile i - 1): then a warpgroup is never more than kStages tiles ahead of the other's
        // last dQ, which is what makes kdSBufs = kStages + 1 dS^T buffers and barrier ids safe to reuse.
        if (lane == 0) mbar_arrive(bar_empty(s));
      }
      if constexpr (!kSplitD) dq_tile(n_mt - 1, tile_of(n_mt - 1) * BM);
      }
    }

    // Work list, a chunk of a split key block ({split id, chunk, chunks, first part}, re-read: not kept live): the
    // chunks count their arrivals (low 16 bits of the split's counter) and completions (high bits). The last to
    // arrive keeps its dK / dV in registers; the others leave theirs (fp32, in the accumulators' register order,
    // 128 KB) in their part (staged through the Q / dO stages, which no tile reads any more, and one bulk copy) and
    // are done. The last waits for the others' completions, brings each part into the stages (one bulk load) and
    // adds it, then runs the epilogue (one rounding).
    if constexpr (kGrid == kBwdGridList) {
      int idx, hh;
      sched_cta_item(sched, p.heads, idx, hh);
      const int4 sp = sched.items[2 * idx + 1];
      if (sp.x >= 0) {
        const int hy = hh;
        int* counter = sched.counters + sp.x * p.heads + hy;
        const uint32_t last_flag = park + 12;
        const uint32_t stg = sQ + ((ctid / 128) * 4096 + ctid % 128) * 16;  // (NA / 4) float4 per thread
        static_assert(C::kOffdO == C::kOffQ + 2 * C::kQBytes && 4 * C::kQBytes == 256 * NA * 4 && C::kStages == 2,
                      "the dK / dV partials (256 threads x NA x 2 floats) fill the Q / dO stages");
        named_barrier_sync(3, 256);  // both warpgroups are done with the Q / dO stages
        if (ctid == 0) {
          const int old = atomicAdd(counter, 1);
          st_shared_u32(last_flag, (old & 0xffff) == sp.z - 1 ? 1u : 0u);
        }
        named_barrier_sync(3, 256);
        if (ld_shared_u32(last_flag) == 0) {
#pragma unroll
          for (int j = 0; j < NA / 8; ++j) {
            asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(stg + 2048 * j), "f"(acc_dk[4 * j]),
                         "f"(acc_dk[4 * j + 1]), "f"(acc_dk[4 * j + 2]), "f"(acc_dk[4 * j + 3])
                         : "memory");
            asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(stg + 2048 * (NA / 8 + j)),
                         "f"(acc_dv[4 * j]), "f"(acc_dv[4 * j + 1]), "f"(acc_dv[4 * j + 2]), "f"(acc_dv[4 * j + 3])
                         : "memory");
          }
          fence_proxy_async_smem();
          named_barrier_sync(3, 256);
          if (ctid == 0) {
            bulk_store(sched.parts + static_cast<int64_t>((sp.w + sp.y) * p.heads + hy) * (64 * D * 2), sQ,
                       4 * C::kQBytes);
            bulk_commit();
            bulk_wait0();
            fence_proxy_async_global();
            __threadfence();
            atomicAdd(counter, 1 << 16);
          }
          return;
        }
        if (ctid == 0) {
          while ((static_cast<int>(ld_acquire_u32(reinterpret_cast<const uint32_t*>(counter))) >> 16) != sp.z - 1) {
          }
          fence_proxy_async_global();
        }
        uint32_t ph = 1;  // bar_k's next phase (phase 0: K)
        for (int c = 0; c < sp.z; ++c) {
          if (c == sp.y) continue;
          if (ctid == 0) {
            mbar_arrive_expect_tx(bar_k, 4 * C::kQBytes);
            bulk_load(sQ, sched.parts + static_cast<int64_t>((sp.w + c) * p.heads + hy) * (64 * D * 2),
                      4 * C::kQBytes, bar_k);
          }
          mbar_wait(bar_k, ph);
          ph ^= 1;
#pragma unroll
          for (int j = 0; j < NA / 8; ++j) {
            float4 a, v;
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w)
                         : "r"(stg + 2048 * j));
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                         : "r"(stg + 2048 * (NA / 8 + j)));
            acc_dk[4 * j] += a.x;
            acc_dk[4 * j + 1] += a.y;
            acc_dk[4 * j + 2] += a.z;
            acc_dk[4 * j + 3] += a.w;
            acc_dv[4 * j] += v.x;
            acc_dv[4 * j + 1] += v.y;
            acc_dv[4 * j + 2] += v.z;
            acc_dv[4 * j + 3] += v.w;
          }
          named_barrier_sync(3, 256);  // every thread has read the stages before the next part lands there
        }
      }
    }
    // Epilogue: dK, dV rounded to T, staged through this warpgroup's rows of sK / sV (same 128B swizzle), then
    // 16-byte coalesced stores of the rows < cu_seqlens length (rows past seqused hold zeros: fully masked).
    named_barrier_sync(3, 256);  // both warpgroups are done reading K (dQ) and V
    // V has landed before its rows are overwritten (a warpgroup whose tiles were all skipped never waited for it).
    if (n_mt > 0) mbar_wait(bar_v, 0);
    const float sc = p.inv_scaling;
#pragma unroll
    for (int j = 0; j < NA / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int rr = 16 * warp + lane / 4 + 8 * half;
        const uint32_t a = (c0w / 64 + j / 8) * C::kKVPanelBytes + (kr0 + rr) * 128 + (((j % 8) ^ (rr % 8)) << 4) +
                           (lane % 4) * 4;
        const uint32_t vk = pack_pair<T>(acc_dk[4 * j + 2 * half], acc_dk[4 * j + 2 * half + 1]);
        const uint32_t vv = pack_pair<T>(acc_dv[4 * j + 2 * half] * sc, acc_dv[4 * j + 2 * half + 1] * sc);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sK + a), "r"(vk) : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sV + a), "r"(vv) : "memory");
      }
    }
    // Sequence bounds reloaded here (not kept live in registers through the main loop; the work list's batch,
    // key block and head too).
    if constexpr (kGrid == kBwdGridList) {
      b = static_cast<int>(bwd_cta_batch<kGrid>(park));
      h = static_cast<int>(bwd_cta_head<kGrid>(park));
    }
    const int n0e = kGrid == kBwdGridList ? static_cast<int>(bwd_cta_key_block<kGrid>(park)) * BN : n0;
    const int k_start = p.cu_seqlens_k[b];
    const int rows_store = min(64, p.cu_seqlens_k[b + 1] - k_start - n0e - kr0);
    const int64_t krow = k_start + n0e + kr0;
    if (rows_store == 64) {
      // All 64 rows of this warpgroup are keys of the sequence: one bulk tensor store per 64-column panel of dK and
      // dV (the staging has the tensor maps' 128B-swizzled box layout); the issuing thread's final bulk wait keeps
      // the shared memory alive until they are done.
      fence_proxy_async_smem();
      named_barrier_sync(4 + wg, 128);
      if (wtid == 0) {
#pragma unroll
        for (int pn = 0; pn < NA / 64; ++pn) {
          const int c = c0w + 64 * pn;
          const uint32_t off = (c / 64) * C::kKVPanelBytes + kr0 * 128;
          tma_store_3d(&tm_dk, sK + off, c, h, static_cast<int>(krow));
          tma_store_3d(&tm_dv, sV + off, c, h, static_cast<int>(krow));
        }
        bulk_commit();
      }
    } else {
      named_barrier_sync(4 + wg, 128);
      T* dkg = static_cast<T*>(p.dk) + krow * p.dk_row_stride + static_cast<int64_t>(h) * p.dk_head_stride;
      T* dvg = static_cast<T*>(p.dv) + krow * p.dv_row_stride + static_cast<int64_t>(h) * p.dv_head_stride;
      constexpr int kChunks = NA / 8;  // 16-byte chunks of this warpgroup's columns per row
#pragma unroll 4
      for (int idx = wtid; idx < 64 * kChunks; idx += 128) {
        const int rr = idx / kChunks;
        const int c = c0w / 8 + idx % kChunks;
        if (rr < rows_store) {
          const uint32_t a = (c / 8) * C::kKVPanelBytes + (kr0 + rr) * 128 + (((c % 8) ^ (rr % 8)) << 4);
          uint4 vk, vv;
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(vk.x), "=r"(vk.y), "=r"(vk.z), "=r"(vk.w)
                       : "r"(sK + a));
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(vv.x), "=r"(vv.y), "=r"(vv.z), "=r"(vv.w)
                       : "r"(sV + a));
          st_global_v4(dkg + static_cast<int64_t>(rr) * p.dk_row_stride + c * 8, vk);
          st_global_v4(dvg + static_cast<int64_t>(rr) * p.dv_row_stride + c * 8, vv);
        }
      }
    }
    // The dQ reductions and the dK / dV stores have read their shared-memory sources before it goes away. (Only the
    // reads: their global writes complete with the grid, as every bulk store / reduce does, and nothing in this CTA
    // reads those addresses again. The warps' EXIT still waits for the writes; ncu: that wait does not delay the
    // SM's next CTA, docs/archive/hstu_sm90_log.md "Session 14".)
    if (kConvBehind && bwd_dq_conv_behind(p)) {
      // This warp's reduce-adds are complete (their writes performed) before it counts for its pair (the dK / dV
      // stores just issued, the newest group of lane 0 of warp 0, need not be).
      if (lane == 0) {
        if (wtid == 0 && rows_store == 64) {
          bulk_wait<1>();
        } else {
          bulk_wait0();
        }
        fence_proxy_async_global();
        const int gp = bwd_lpt_group_pairs<BN, C::kLptPairs, C::kLptCtas>(p);
        red_release_add_u32(bwd_dq_done_words(p, gp, bwd_dq_chunks(p)) + b * p.heads + h, 1u);
        if constexpr (kConvBehind) mbar_arrive(smem_addr(&bwd_conv_smem<D>().cdone));
        bulk_wait_read0();
      }
    } else if (kDqMode == 2 ? lane == 0 : wtid == 0) {
      bulk_wait_read0();
    }
  }
}

// Self-zeroing workspace (p.dq_zero_flags), before the backward kernel: what no CTA zeroes. blockIdx.y < gp: the
// rows of pair blockIdx.y (the first group); gp: the rows before cu_seqlens_q[0] and from cu_seqlens_q[B] on (all
// heads); gp + 1: the flag words.
template <int D>
__global__ void hstu_dq_zero_first_sm90_kernel(const HstuParams p, int gp, int64_t nflags) {
  const int y = blockIdx.y;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int n = gridDim.x * blockDim.x;
  if (y < gp) {
    const int b = y / p.heads;
    const int rows = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    for (int qb = 0; 128 * qb < rows; ++qb) {
      bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, p.cu_seqlens_q[b], rows, y % p.heads, qb, t, n);
    }
  } else if (y == gp) {
    const int64_t rs4 = static_cast<int64_t>(p.heads) * D / 4;
    const int64_t head4 = p.cu_seqlens_q[0] * rs4;
    const int64_t tail4 = p.cu_seqlens_q[p.batch] * rs4;
    const int64_t end4 = p.total_q * rs4;
    for (int64_t e = t; e < head4; e += n) st_global_v4(p.dq_accum + 4 * e, make_uint4(0u, 0u, 0u, 0u));
    for (int64_t e = tail4 + t; e < end4; e += n) st_global_v4(p.dq_accum + 4 * e, make_uint4(0u, 0u, 0u, 0u));
  } else {
    for (int64_t e = t; e < nflags; e += n) p.dq_zero_flags[e] = 0u;
  }
}

// Zeros into the dq rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[batch] on), heads
// [h0, h0 + nh), by 16-byte stores: this thread takes elements (outside row, head, 8-column group) first, first + step,
// ... (the conversion kernels' last duty, so that one launch writes all of dq).
template <typename T, int D>
__device__ __forceinline__ void dq_zero_outside_rows(T* dq, const int* cu_seqlens_q, int batch, int64_t total_q,
                                                     int64_t row_stride, int64_t head_stride, int h0, int nh,
                                                     int64_t first, int64_t step) {
  constexpr int kC8 = D / 8;
  const int64_t lo = cu_seqlens_q[0], hi = cu_seqlens_q[batch];
  const int64_t n_out = lo + (total_q - hi);
  const int64_t per_row = static_cast<int64_t>(nh) * kC8;
  for (int64_t e = first; e < n_out * per_row; e += step) {
    const int64_t r = e / per_row;
    const int64_t row = r < lo ? r : hi + (r - lo);
    const int hh = h0 + static_cast<int>((e % per_row) / kC8);
    st_global_v4(dq + row * row_stride + hh * head_stride + (e % kC8) * 8, make_uint4(0u, 0u, 0u, 0u));
  }
}

// After the kLpt kernel with dq converted behind: what it did not convert: the 64-row halves of the last 2 gp pairs,
// then its list (the rest of a half from a multiple of 16 rows on), by 16-row granules: CTA x takes units x,
// x + gridDim.x, ... (one 8-element group per thread at D = 128; the grid is about all resident at once); then
// the grid writes zeros into the dq rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[B] on),
// all heads.
template <typename T, int D>
__global__ void __launch_bounds__(256) hstu_dq_convert_rest_sm90_kernel(const HstuParams p, int gp) {
  const int pairs = p.batch * p.heads;
  const int nq = bwd_dq_chunks(p);
  const int first = max(0, pairs - kBwdConvBehindGroups * gp);
  const int n_last = (pairs - first) * 2 * nq;
  const uint32_t* list = bwd_dq_list_words(p, gp, nq);
  const int n_items = n_last + static_cast<int>(*list);
  // unit u: 16-row granule u % 4 of item u / 4 (granules before the item's first row, or past its half, are empty)
  for (int u = blockIdx.x; u < 4 * n_items; u += gridDim.x) {
    const int i = u / 4;
    const uint32_t w = i < n_last ? static_cast<uint32_t>(first * 8 * nq + 4 * i) : list[1 + i - n_last];
    const int pair = static_cast<int>(w / (8u * nq));
    const int g0 = static_cast<int>(w % (8u * nq));  // the item's first granule
    const int g = (g0 & ~3) + u % 4;                  // this unit's granule of the item's half
    if (g < g0) continue;
    const int b = pair / p.heads;
    const int q_start = p.cu_seqlens_q[b];
    const int rows = min(16, p.cu_seqlens_q[b + 1] - q_start - 16 * g);
    if (rows > 0) bwd_dq_convert_rows<T, D, 256>(p, q_start, pair - b * p.heads, 16 * g, rows, threadIdx.x);
  }
  dq_zero_outside_rows<T, D>(static_cast<T*>(p.dq), p.cu_seqlens_q, p.batch, p.total_q, p.dq_row_stride,
                             p.dq_head_stride, 0, p.heads, static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x,
                             static_cast<int64_t>(gridDim.x) * 256);
}

// drab (T) <- drab_accum (fp32), both (B, 1, R, C) contiguous: a shared rab's gradient summed over heads.
template <typename T>
__global__ void hstu_drab_convert_sm90_kernel(const float* __restrict__ acc, T* __restrict__ drab, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    drab[idx] = from_float<T>(acc[idx]);
  }
}

// dq (total_q, H, D), any row/head strides (multiples of 8 elements) <- the fp32 workspace (total_q, H, D): 8
// elements per thread and step (two streaming 16-byte loads, one 16-byte store), 32-bit index math (the caller
// launches it over row ranges of at most 2^30 groups of 8; 64-bit divisions made it instruction-bound).
template <typename T, int D>
__global__ void hstu_dq_convert_sm90_kernel(const float* __restrict__ acc, T* __restrict__ dq, int rows, int heads,
                                            int64_t row_stride, int64_t head_stride) {
  // Read once: evict_first, which also takes back the evict_last priority of the lines the D = 128 causal / local
  // backward reduced into (the workspace does not stay favoured in L2 after its conversion).
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  const int n8 = rows * heads * (D / 8);
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n8; idx += gridDim.x * blockDim.x) {
    const int d8 = idx % (D / 8);
    const int rh = idx / (D / 8);
    const int hh = rh % heads;
    const int row = rh / heads;
    float4 a, c;
    const float* src = acc + static_cast<int64_t>(idx) * 8;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w)
                 : "l"(src), "l"(pol));
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(c.x), "=f"(c.y), "=f"(c.z), "=f"(c.w)
                 : "l"(src + 4), "l"(pol));
    const uint4 v = {pack_pair<T>(a.x, a.y), pack_pair<T>(a.z, a.w), pack_pair<T>(c.x, c.y), pack_pair<T>(c.z, c.w)};
    st_global_v4(dq + row * row_stride + hh * head_stride + d8 * 8, v);
  }
}

// The sequence that owns workspace group g (dq_red_tiled's layout) and the group's first row in it, or b = -1 when
// g is a padding group or lies before the first sequence. Called by a whole warp (same g): the groups' first
// indices G_b = (cu_seqlens_q[b] + 16 b) / 16 rise strictly with b, and the warp narrows [lo, hi) 32 ways per round
// (one round up to B = 32, two up to 1024), so a CTA pays one or two dependent loads instead of log2(B).
__device__ __forceinline__ void dq_group_owner(const int* cu_seqlens_q, int batch, int64_t g, int& b, int& row0) {
  const int lane = threadIdx.x % 32;
  auto first_group = [&](int i) { return (static_cast<int64_t>(cu_seqlens_q[i]) + 16 * static_cast<int64_t>(i)) >> 4; };
  int lo = 0, hi = batch;  // the owner is the last i in [lo, hi) with G_i <= g
  b = -1;
  while (hi - lo > 0) {
    const int step = (hi - lo + 31) / 32;
    const int i = lo + lane * step;
    const unsigned below = __ballot_sync(0xffffffffu, i < hi && first_group(i) <= g);
    if (below == 0) break;  // (first round only: g before G_0)
    const int k = 31 - __clz(below);
    lo += k * step;
    if (step == 1) {
      b = lo;
      break;
    }
    hi = min(lo + step, hi);
  }
  if (b < 0) return;
  row0 = 16 * static_cast<int>(g - first_group(b));
  if (row0 >= cu_seqlens_q[b + 1] - cu_seqlens_q[b]) b = -1;  // a padding group behind sequence b
}

// D = 256: dq (total_q, H, 256), any row / head strides (multiples of 8 elements) <- the tiled fp32 workspace
// (dq_red_tiled). CTA (x, h) converts workspace groups 4 x .. 4 x + 3 of head h: the grid covers the groups that
// can exist (total_q / 16 + B + 1), not B x the longest sequence's tiles, which for a jagged batch were mostly empty
// CTAs. Each thread issues its 16 coalesced float4 loads first (padding groups are read too, and dropped), and warp
// w < 4 finds the owner of group 4 x + w (dq_group_owner) under their latency; the values are rounded to T into a
// padded shared tile (rows of 132 words: the 8 rows a warp's stores touch land in 8 different bank groups), then
// stored as 16-byte row pieces, rows past a sequence's cu_seqlens length skipped. The CTAs past the groups (x >=
// quads) write zeros into head h of the rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[B]
// on), so one launch writes all of dq.
template <typename T>
__global__ void __launch_bounds__(256) hstu_dq_convert_tiled_sm90_kernel(const float* __restrict__ acc,
                                                                         T* __restrict__ dq, const int* cu_seqlens_q,
                                                                         int batch, int heads, int64_t total_q,
                                                                         int64_t row_stride, int64_t head_stride,
                                                                         int quads) {
  constexpr int kRowWords = 132;
  __shared__ __align__(16) uint32_t tile[64 * kRowWords];
  __shared__ int64_t s_row[4];  // output row of each group's first row, or -1
  __shared__ int s_rows[4];     // rows of the group inside its sequence (0: skip)
  const int x = blockIdx.x, h = blockIdx.y;
  const int t = threadIdx.x, warp = t / 32;
  if (x >= quads) {
    dq_zero_outside_rows<T, 256>(dq, cu_seqlens_q, batch, total_q, row_stride, head_stride, h, 1,
                                 static_cast<int64_t>(x - quads) * 256 + t,
                                 static_cast<int64_t>(gridDim.x - quads) * 256);
    return;
  }
  const int64_t g0 = 4 * static_cast<int64_t>(x);
  // All 16 loads first (every group < 4 quads lies inside the workspace, padding groups too), so that their
  // latency covers the owner search.
  uint64_t pol;  // read once
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  const float* src = acc + (g0 * heads + h) * 4096 + 4 * t;
  const int64_t group_floats = static_cast<int64_t>(heads) * 4096;
  float4 v[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // float4 f = 256 k + t of the 4 groups: group k / 4, float4 f % 1024 of it
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(v[k].x), "=f"(v[k].y), "=f"(v[k].z), "=f"(v[k].w)
                 : "l"(src + (k / 4) * group_floats + 1024 * (k % 4)), "l"(pol));
  }
  if (warp < 4) {
    int b, row0 = 0;
    dq_group_owner(cu_seqlens_q, batch, g0 + warp, b, row0);
    if (t % 32 == 0) {
      s_rows[warp] = b < 0 ? 0 : min(16, cu_seqlens_q[b + 1] - cu_seqlens_q[b] - row0);
      s_row[warp] = b < 0 ? -1 : static_cast<int64_t>(cu_seqlens_q[b]) + row0;
    }
  }
  // float4 f: block (f / 256) % 4, j = (f / 32) % 8, lane f % 32 (rows ln / 4 and ln / 4 + 8 of the group)
  const int ln = t % 32;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int r = 16 * (k / 4) + ln / 4;
    const int w = 32 * (k % 4) + 4 * (t / 32) + ln % 4;  // word (column pair) in the row
    tile[r * kRowWords + w] = pack_pair<T>(v[k].x, v[k].y);
    tile[(r + 8) * kRowWords + w] = pack_pair<T>(v[k].z, v[k].w);
  }
  __syncthreads();
  T* out = dq + h * head_stride;
#pragma unroll 4
  for (int k = 0; k < 8; ++k) {
    const int e = 256 * k + t;  // 16-byte chunk e % 32 of row e / 32
    const int r = e / 32;
    const int gr = r / 16;
    if (r % 16 < s_rows[gr]) {
      uint4 o;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(o.x), "=r"(o.y), "=r"(o.z), "=r"(o.w)
                   : "r"(smem_addr(tile + r * kRowWords + 4 * (e % 32))));
      st_global_v4(out + (s_row[gr] + r % 16) * row_stride + (e % 32) * 8, o);
    }
  }
}

}  // namespace sm90
}  // namespace hstu
