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
//   reduce-adds (cp.reduce.async.bulk.tensor, one per warp and 32-column panel).
// The warpgroups never wait for each other inside a tile, so one's SiLU / dQ staging runs under the other's GEMMs.
// Garbage rows (keys past the used keys, queries past the used rows: next sequence, seqused tail, NaN-poisoned) are
// zeroed in smem after they land (K/V once, Q/dO of the last query tile), so masked zeros never meet a non-finite
// operand in any GEMM. Fully masked query tiles are never loaded (SeqMask::row_range).
// D = 256 (BwdSm90Traits::kSplitD): 64 keys per CTA; warpgroup g owns dK, dV columns [128 g, 128 g + 128); dQ
// columns 0 .. 63 belong to warpgroup 0, 64 .. 255 to warpgroup 1.
// Its dQ tiles go straight from the accumulator registers into a tiled workspace (red.global.add.v4.f32, 512
// contiguous bytes per warp instruction; dq_red_tiled_block), converted into rows by hstu_dq_convert_tiled_sm90_kernel.
// S^T and dP^T are computed once per tile, S^T by warpgroup 0 (which also writes P^T and SiLU'
// to smem) and dP^T by warpgroup 1 (which turns SiLU' into dS^T in place), exchanged through two 8 KB smem tiles
// with named barriers; dV / dK with the other warpgroup's operand from smem (SS); dQ's four
// 64-column blocks are split 1 | 3 between the warpgroups (warpgroup 0 also runs the SiLU pass) and warpgroup 1
// issues the next tile's dP^T between its dQ reductions.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_dq.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_schedule.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_traits.cuh"

namespace hstu {
namespace sm90 {

// The backward's named configurations (run_hstu_bwd_sm90 picks one per call from rab and the mask).
// BwdSm90Plain: D = 64 / 128 without rab, and the split-D kernel (D = 256) without rab.
struct BwdSm90Plain {
  static constexpr bool kRab = false;
  static constexpr bool kSkipWg = false;
};
// BwdSm90SkipWg: D = 128 with a right window (causal, local): the warpgroup tile skip, longest-first 1-D grid.
struct BwdSm90SkipWg {
  static constexpr bool kRab = false;
  static constexpr bool kSkipWg = true;
};
// BwdSm90Rab: with rab (and drab), every D.
struct BwdSm90Rab {
  static constexpr bool kRab = true;
  static constexpr bool kSkipWg = false;
};

// kRab: S^T += rab^T before the SiLU (each thread loads its 32 elements from global memory right after issuing the
// S^T / dP^T wgmmas, so the loads fly under them) and drab = dS written from the pointwise pass (direct 16-bit
// stores, or fp32 atomics for a shared rab). Split D: warpgroup 0 loads rab^T (under its S^T) and writes drab from
// the dS^T tile in sX. dQ tiles reach dq_accum staged in smem per warp, one bulk tensor reduce-add per 32-column
// panel (tm_dq box 16 rows, no barrier); split D: from registers into the tiled workspace (dq_red_tiled_block).
// kGrid (split D only): the grid order or the work list (`sched`, kBwdGridList: no rab; launched behind its planner,
// programmatic dependent launch), bwd_cta_key_block.
template <typename T, int D, class Config, int kGrid = kBwdGridKHB>
__global__ void __launch_bounds__(384, 1)
    hstu_bwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                         const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_dk,
                         const __grid_constant__ CUtensorMap tm_dv, const HstuParams p, const SchedArgs sched) {
  constexpr bool kRab = Config::kRab;
  constexpr bool kSkipWg = Config::kSkipWg;
  using C = BwdSm90Traits<D>;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  constexpr bool kSplitD = C::kSplitD;
  constexpr int NA = C::kAccN;
  // kSkipWg (D = 64 / 128 without rab): a query tile that none of a warpgroup's 64 keys can see (causal: the first
  // tile of the block for warpgroup 1; keys past the sequence) costs that warpgroup no GEMM: it only writes zeros
  // as its dS^T rows (read by the other warpgroup's dQ) and takes part in dQ as usual.
  static_assert(!kSkipWg || (!kSplitD && !kRab), "warpgroup tile skip: D = 64 / 128 without rab");
  static_assert(kGrid == kBwdGridKHB || kSplitD, "other grids: split-D kernel only");
  static_assert(kGrid != kBwdGridList || !kRab, "work list: no rab");

  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base;
  const uint32_t sV = base + C::kOffV;
  const uint32_t sQ = base + C::kOffQ;    // stage s at + s * kQBytes
  const uint32_t sdO = base + C::kOffdO;  // stage s at + s * kQBytes
  const uint32_t sdS = base + C::kOffdS;  // tile t's buffer at + (t % kdSBufs) * kdSBytes
  const uint32_t sDqStage = base + C::kOffDqStage;  // consumer warpgroup wg at + wg * kDqStageBytes
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
  // dq converted behind (bwd_dq_convert_behind): the kLpt kernel with the self-zeroing workspace (the converters
  // read through tm_dq's 16-row boxes).
  constexpr bool kConvBehind = kSelfZero && kLpt;
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
        red_release_add_gpu(bwd_dq_done_words(p, gp, nq) + b * p.heads + h, 8u);
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
    const int c0w = kSplitD ? 128 * wg : 0;  // split D: first dK / dV column of this warpgroup

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

      // K (and V, waited for before the first dP^T): zero the rows past the used keys once they have landed (both
      // consumer warpgroups share the rows; then both wait for V here).
      mbar_wait(bar_k, 0);
      if (keys_used < BN) {
        mbar_wait(bar_v, 0);
        zero_rows_sm90<C::kPanels, C::kKVPanelBytes>(sK, sV, 0, keys_used, BN - keys_used, ctid);
      }

      if constexpr (kSplitD) {
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
            // (zero_rows_sm90 written out: through it this kernel's code changed)
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
          // head, batch re-read (not kept live through the loop)
          const uint32_t hy = bwd_cta_head<kGrid>(park);
          const uint32_t bz = bwd_cta_batch<kGrid>(park);
          // kRab: the sequence's first row re-read too (kept live, it made the rab kernel spill); the kernel
          // without rab keeps it (the load on its reduction path cost it 3 %).
          const int qs = kRab ? __ldg(p.cu_seqlens_q + bz) : si.q_start;
          dq_red_tiled_block(p.dq_accum, qs, static_cast<int>(bz), m0, p.heads, static_cast<int>(hy), b, wtid, q);
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
              const int hist = kRab ? static_cast<int>(opaque(static_cast<uint32_t>(mk.hist))) : mk.hist;
              // no target row or key in the tile (the rule below is allowed()'s there); GR window: the row rule
              if ((hist == mk.lk || max(r0 + BM, n0 + 64) <= hist) && !mk.gr_window()) {
#pragma unroll
                for (int e = 0; e < BM / 2; ++e) {
                  const int j = jr + 8 * ((e % 4) / 2);
                  const int r = rc + 8 * (e / 4) + (e % 2);
                  const bool ok = r < mk.lk && j < mk.lk &&
                                  (r < mk.ctx || ((mk.wl < 0 || j >= r - mk.wl) && (mk.wr < 0 || j <= r + mk.wr)));
                  bits |= static_cast<uint32_t>(ok) << e;
                }
              } else {
                bits = bwd_row_key_bits<BM>(mk, rc, jr);
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
              pf0[e / 8][(e % 8) / 2] = pack2<T>(pv[0], pv[1]);
              xf0[e / 8][(e % 8) / 2] = pack2<__half>(xv[0], xv[1]);
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
                  df1[ks][q] = pack2<T>(acc_dp1[e] * ds_scale * unpack_lo<__half>(xw[ks][q]),
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
        if (ln == 0) {
          const int c0 = C::kSplitDqCols ? 64 * wg : 0;
          if constexpr (kLpt) {
            // evict_last: more of the workspace is still in L2 when the conversion reads it (B128 S1K: conversion
            // 140 -> 133 us, main kernel +0-3 us; docs/archive/hstu_sm90_log.md).
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
      };

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
        const uint32_t sdSb = sdS + (i % C::kdSBufs) * C::kdSBytes;
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
          zero_rows_sm90<C::kPanels, C::kQPanelBytes>(sQs, sdOs, 0, q_used, BM - q_used, ctid);
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
        if (!mk.tile_full_targets(r0, r0 + BM, j_w0, j_w0 + 64)) {
          const int jr = j_w0 + 16 * warp + lane / 4;
          const int rc = r0 + 2 * (lane % 4);
          bits = 0;
          // No target row or key in the tile (or none in the sequence), no GR window: (r < lk, j < lk) and
          // (context row, or inside the window), allowed()'s rule there.
          if ((mk.hist == mk.lk || max(r0 + BM, j_w0 + 64) <= mk.hist) && !mk.gr_window()) {
#pragma unroll
            for (int e = 0; e < BM / 2; ++e) {
              const int j = jr + 8 * ((e % 4) / 2);
              const int r = rc + 8 * (e / 4) + (e % 2);
              const bool ok = r < mk.lk && j < mk.lk &&
                              (r < mk.ctx || ((mk.wl < 0 || j >= r - mk.wl) && (mk.wr < 0 || j <= r + mk.wr)));
              bits |= static_cast<uint32_t>(ok) << e;
            }
          } else {
            // Targets or a GR window: each query row's key intervals (a rolled loop, one copy of the code).
            bits = bwd_row_key_bits<BM>(mk, rc, jr);
          }
        }
        // S^T = K_wg Q^T and dP^T = V_wg dO^T (64 keys x 64 queries each).
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
              pf[e / 8][(e % 8) / 2] = pack2<T>(pv[0], pv[1]);
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
              df[e / 8][(e % 8) / 2] = pack2<T>(dv[0], dv[1]);
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
            pf[e / 8][(e % 8) / 2] = pack2<T>(pv[0], pv[1]);
            df[e / 8][(e % 8) / 2] = pack2<T>(dv[0], dv[1]);
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

        // dQ of the previous tile (one tile late: the warpgroups need not meet on every tile, so one's SiLU can
        // run under the other's GEMMs).
        if (i > 0) dq_tile(i - 1, tile_of(i - 1) * BM);
        // Q / dO of stage s no longer read by this warp. Released after dQ of tile i - 1 (which waited for the other
        // warpgroup's dS^T of tile i - 1): then a warpgroup is never more than kStages tiles ahead of the other's
        // last dQ, which is what makes kdSBufs = kStages + 1 dS^T buffers and barrier ids safe to reuse.
        if (lane == 0) mbar_arrive(bar_empty(s));
      }
      dq_tile(n_mt - 1, tile_of(n_mt - 1) * BM);
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
          while ((ld_acquire_gpu(counter) >> 16) != sp.z - 1) {
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
        const uint32_t vk = pack2<T>(acc_dk[4 * j + 2 * half], acc_dk[4 * j + 2 * half + 1]);
        const uint32_t vv = pack2<T>(acc_dv[4 * j + 2 * half] * sc, acc_dv[4 * j + 2 * half + 1] * sc);
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
          const uint4 vk = lds_b128(sK + a), vv = lds_b128(sV + a);
          st_global_v4(dkg + static_cast<int64_t>(rr) * p.dk_row_stride + c * 8, vk);
          st_global_v4(dvg + static_cast<int64_t>(rr) * p.dv_row_stride + c * 8, vv);
        }
      }
    }
    // The dQ reductions and the dK / dV stores have read their shared-memory sources before it goes away. (Only the
    // reads: their global writes complete with the grid, as every bulk store / reduce does, and nothing in this CTA
    // reads those addresses again. The warps' EXIT still waits for the writes; ncu: that wait does not delay the
    // SM's next CTA, docs/archive/hstu_sm90_log.md.)
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
        red_release_add_gpu(bwd_dq_done_words(p, gp, bwd_dq_chunks(p)) + b * p.heads + h, 1u);
        if constexpr (kConvBehind) mbar_arrive(smem_addr(&bwd_conv_smem<D>().cdone));
        bulk_wait_read0();
      }
    } else if (lane == 0) {
      bulk_wait_read0();
    }
  }
}

}  // namespace sm90
}  // namespace hstu
