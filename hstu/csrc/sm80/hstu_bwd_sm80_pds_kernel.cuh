// HSTU attention backward, sm80-class, FlashAttention-2's warp layout (issue 39): the default sm80-class backward at
// D = 64 / 128 / 256 (bf16 and fp16) where 8 warps' shared memory fits (launch_hstu_bwd_fitting); its comparisons
// kernel_options(sm90=False, bwd_sm80_cfg=1 / 2 / 3 / 4 / 5 / 6 / 7 / 9).
//
// The old default kernel (hstu_bwd_sm80_kernel.cuh) gives each warp 16 key rows for every GEMM, so P^T / dS^T stay in
// registers but every warp loads the whole Q / dO tile per MMA row (about 0.081 byte of ldmatrix per MMA flop at
// D = 128), and at D = 256 the dK / dV accumulators force a column split that recomputes S and dP. Here the eight
// warps of a block change roles between the three GEMM phases of a (query tile, key block) pair, each phase with
// its own warp grid, and P and dS pass through shared memory (in T, BM x BN each):
//   1. S = Q K^T, dP = dO V^T: SWM x (8 / SWM) warps over queries x keys (D = 128: 32 x 32 warp tiles); the
//      pointwise SiLU / SiLU' / mask / rab / drab in registers; P and dS stored.
//   2. dV += P^T dO, dK += dS^T Q: KWN x (8 / KWN) warps over keys x head dim (32 keys x 64 columns each), P^T and
//      dS^T read back with ldmatrix.trans; the accumulators live across the query tiles (128 floats a thread).
//   3. dQ += dS K: QWM x (8 / QWM) warps over queries x head dim, QPW columns per pass, fp32 atomics into the
//      workspace as the default kernel (skipped in deterministic mode: hstu_bwd_dq_kernel computes dQ).
// About 0.06 byte per flop over the five GEMMs and S / dP computed once at every D (5 GEMM passes, not 7 at D = 256).
// The mask, rab / drab, delta-q, seqused and jagged handling are the default kernel's (same SeqInfo, bwd_work_tiles,
// element rules). Shared memory: K, V, STAGES Q / dO buffers, P, dS; 128 / 160 / 224 KB at D = 128 (1 / 2 / 3
// stages; 3: two P / dS buffers, sm_90+), 144 / 208 / 224 KB at D = 256 (1 / 2 stages, 2 with two P / dS buffers:
// kPdsMbarCopies, sm_90+): A100 and Hopper, not sm86 / sm89 (99 KB), where the launcher reports not supported and
// the old layouts run (D = 64: 80 / 96 / 144 KB).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "common/device_info.h"
#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/sm80/hstu_bwd_sm80_limits.h"
#include "hstu/csrc/sm80/hstu_bwd_sm80_split.cuh"

namespace hstu {

// BM queries x BN keys per step, NWARPS warps; SWM / KWN / QWM warps along the queries (S, dP), keys (dK, dV),
// queries (dQ); QPW dQ columns per pass (bounds the dQ accumulator registers next to dK / dV's 128). Every head dim
// has the same warp tiles (S / dP 32 x 32 or 16 x 32, dK / dV 32 keys x 64 columns (D = 64: 32), dQ 32 rows).
template <int D, int NWARPS>
struct BwdPdsConfig {
  static constexpr bool kExists = false;
};
template <>
struct BwdPdsConfig<128, 8> {
  static constexpr bool kExists = true;
  static constexpr int kBlockM = 64, kBlockN = 128, kSWM = 2, kKWN = 4, kQWM = 2, kQPW = 32;
};
// D = 64 (the default on sm_90+, bf16 and fp16): D = 128's 64 x 128 tile and warp grid (S / dP 32 x 32, dK / dV 32
// keys x 32 columns, dQ 32 x 16) with the loop-free body (dQ-first warps, as D = 256) and fragment-ordered dQ; 96 KB
// at two stages.
template <>
struct BwdPdsConfig<64, 8> {
  static constexpr bool kExists = true;
  static constexpr int kBlockM = 64, kBlockN = 128, kSWM = 2, kKWN = 4, kQWM = 2, kQPW = 16;
};
template <>
struct BwdPdsConfig<256, 8> {
  static constexpr bool kExists = true;
  static constexpr int kBlockM = 64, kBlockN = 64, kSWM = 4, kKWN = 2, kQWM = 2, kQPW = 32;
};

// The bodies (template argument BODY of hstu_bwd_pds_body). 0, the plain one (the context kernels): dP in two halves
// of the keys where a warp has two query m16 tiles, rolled k-loops, predicated dQ atomics; at D = 128 / 256 half of
// the warps run phase 3 (dQ) before phase 2 (dK / dV) (D = 256: 2.4 % faster on an H200; D = 128: at par, and in
// the fixed order its sm_90a code spilled 4 B), at D = 64 every warp dK / dV, then dQ.
// kPdsLoopFree, D = 128's default body in the one- / two-stage kernels (8 warps, calls without contexts): dP in one
// pass, the phases in the fixed order (dV, dK, then dQ; every warp), the S, dV and dK k-loops unrolled (their ldmatrix
// addresses base registers plus immediates), the dP k-loop by 4 (fully it spilled), dQ's by 2 at D = 256, the dQ
// atomics without predicates; on an H200 3-6 % faster than the bodies before it. kPdsLoopFreeDqFirst, D = 64 / 256's
// default body and D = 128's in the three-stage loop (kBwdPdsDefaultBody): the same with warps 4-7 running dQ first
// (at D = 256 4.1 % faster than the plain body, at D = 64 1.3-1.5 % faster than the fixed order). The bodies
// measured slower (FA2's phase order, pipelined k-loops, dP halves with unrolled loops): see docs/hstu_kernel_notes.md.
constexpr int kPdsLoopFree = 7;
constexpr int kPdsLoopFreeDqFirst = 10;
// A flag on BODY (kOneBar only): the next tile's Q copies right after the barrier, its dO copies after the warp's dV
// k-loop, so that the LSU's global queue does not take all of them at once. D = 64's one-barrier default (on an H200
// 0.7-0.8 % faster than the copies together there, 0.2-1.2 % slower at D = 128).
constexpr int kPdsSplitCopies = 16;
// A flag on BODY: grid (heads, key blocks, batch) instead of (batch, key blocks, heads): a sequence's heads and key
// blocks run together, so its Q / dO tiles and dQ rows are reused from L2. The default for short sequences
// (bwd_sm80_heads_first): batch first holds a few dozen sequences at once (on an H200 at B128 S1K D128 34 % L2 hits
// and 2.5 GB of DRAM reads, heads first 74 % and 0.8 GB, 1.7 % faster; D256 25 % faster); at long ones batch first
// starts every sequence's heaviest key blocks early (the tail; heads first within +-0.3 % at S4K - S16K with H = 4,
// and with one head it is FA2's order, 5 % slower at B16 S4K on the older kernel).
constexpr int kPdsHeadsFirst = 32;
// A flag on BODY with kPdsHeadsFirst (the one-barrier loops' heads first, sm_90+, at D = 64 / 256: kBwdPdsTailFirst
// in hstu_bwd_sm80_kernel.cuh; at D = 128 it measured slower): the grid's last sequences (about one wave of CTAs,
// the device's SM count, which the launcher passes) run key blocks first (every head's block 0 of those
// sequences, then block 1, ...). Heads first starts a sequence's heaviest key block (causal: block 0 walks every
// query tile) with its others, so the last sequences' blocks 0 start in the last wave and set the kernel's end (a
// dispatch model at B128 S1K: 3 % past the SMs' mean busy time; ~1 % with this order). A tail of one wave keeps
// its sequences' Q / dO and dQ rows few (two waves measured alike at D = 64 / 256).
constexpr int kPdsTailBlocksFirst = 256;
// A flag on BODY (STAGES = 2, the loop-free bodies, calls without contexts, sm_90+; D = 256's default there,
// kBwdPdsD256OneBar): one block barrier per tile pair with two Q / dO stages. kOneBar's three stages do not fit at
// D = 256 (288 KB); here the next tile's copies are issued after the barrier behind phase 1 (every warp is done with
// the tile before, the stage's last occupant) and complete on an mbarrier per stage (cp.async.mbarrier.arrive), which
// phase 1 of that tile waits for instead of a block barrier; P / dS alternate between two buffers (224 KB at D =
// 256). kPdsLeanCopies: with D = 128's lean Q / dO copies and full-tile intervals (kLeanLoad, kFullMap).
constexpr int kPdsMbarCopies = 64;
constexpr int kPdsLeanCopies = 128;
// A flag on BODY: dK / dV leave through shared memory (K / V's buffers, free after the last tile) as bf16 / fp16
// rows in K's swizzled layout, then 16-byte stores of whole rows (a warp 512 contiguous bytes), instead of 4-byte
// stores in fragment order (8 rows x 16 bytes a warp instruction: ~4,100 L1 store transactions a 128 x 128 block,
// 5.0 of a key block's 8.5 us of fixed SM time on an H200 at D = 128). sm_90 code writes the fragments with
// stmatrix (a quarter of the st.shared instructions). The default of the sm_90+ one-barrier loops (D = 64 / 128:
// kBwdPdsDefaultFlags; D = 256: kBwdPdsD256OneBar), measured there (docs/hstu_kernel_notes.md).
constexpr int kPdsSmemEpilogue = 512;
// A flag on BODY (the one-barrier loop at D = 64 / 128, sm_90 code): P and dS leave phase 1 by stmatrix.x4 (four n8
// row halves of the warp's 32 x 32 scores a store: 8 a thread and tile pair instead of 32 st.shared.b32, and two
// address registers instead of the 16 that the 4-byte stores kept live from the SiLU pass to the dS stores). The
// same bytes in the same places: gradients bitwise. Alone 1.2-1.3 % slower at D = 64 on an H200 (short-scoreboard
// waits on the four packs) and spilling at D = 128; with kPdsPtrCopies (which its freed registers pay for) the
// default of D = 64 / 128's sm_90+ one-barrier loops (kBwdPdsDefaultFlags; bwd_sm80_cfg 10 / 11 / 12 the loop
// without one or both).
constexpr int kPdsStsmPdS = 1024;
// A flag on BODY (the one-barrier loop at D = 64 / 128, sm_90 code): the next tile's lean Q / dO copies from each
// thread's chunk pointers formed once per key block (the sequence's first row, 64-bit, and the chunk's swizzled
// shared offset: five registers across the loop) plus the tile's row offset, instead of the pointers, the thread's
// row / chunk and the offsets re-formed for every tile (~40 instructions a copy half a warp and tile pair at D = 64,
// ~80 of its 875). With kPdsStsmPdS on an H200 0.8-0.9 % faster than main's loop at D = 64, 2.8-3.1 % at D = 128
// (B16 S4K / S16K, B128 S1K); at D = 128 ptxas keeps one 8-byte value on the stack on the rab path.
constexpr int kPdsPtrCopies = 2048;
// A flag on BODY (the one-barrier loop at D = 64, sm_90 code, with kPdsPtrCopies): running pointers for the address
// work a tile pair repeats. The next tile's Q / dO copy sources advance by a tile's rows each tile (instead of m x
// the row stride, a 64-bit product, per copy half), and the thread's place in the fragment-ordered dQ block of the
// sequence's first tile is formed once per key block (m0 D added per tile). Alone 0.8-1.2 % slower on an H200
// (bwd_sm80_cfg 14); with kPdsLaneOnce D = 64's default (0.7-1.05 % faster than the loop without both, cfg 13).
constexpr int kPdsRunPtrs = 4096;
// A flag on BODY with kPdsRunPtrs: the phases' lane offsets (ldmatrix / stmatrix / dQ bases) from the lane index
// itself, not opaque(lane): formed once per key block instead of per tile, in more registers (812 -> 699
// instructions a warp and tile pair; measured: docs/hstu_kernel_notes.md).
constexpr int kPdsLaneOnce = 8192;
// A flag on BODY (D = 64, kPdsMbarCopies' two stages, sm_90 code; D = 64's default there: kBwdPdsD64Tile128 in
// hstu_bwd_sm80_kernel.cuh, 6.4-6.8 % faster than the three-stage loop on an H200 at B16 S8K / S4K): 128-query tiles
// against the 128-key block. Phase 1 runs on the tile's two 64-row halves in turn (the same warp tiles and registers),
// phase 2's k-loops span the 128 rows, phase 3 gives each warp 32 rows x 32 columns (4 x 2 warps: 2 dS + 2 K ldmatrix
// per 8 MMAs instead of 2 + 1 per 4; the same red.v4 per row into the same fragment-ordered blocks), and the loop has
// one barrier and one Q / dO copy per 128 rows. 224 KB + 16 B (two 32 KB stages, two 64 KB P / dS buffers).
constexpr int kPdsTile128 = 16384;
// A flag on BODY (D = 256's mbarrier loop, sm_90 code; its default there, kBwdPdsD256OneBar in
// hstu_bwd_sm80_kernel.cuh): S and dP split over the head dim across warp pairs (w, w ^ 1,
// the two 16-row slabs of one 32-row quadrant and the same 32 keys). Each warp of a pair computes the quadrant's
// 32 x 32 partial sums over its half of D (per k-step 2 + 2 ldmatrix for 8 MMAs: 64 ldmatrix a warp for S and dP
// instead of 96; 8 accumulator chains instead of 4), sends the partner's 16 rows (2 KB of fp32) through the bytes
// of the P / dS buffer that its own P and dS take later, and adds the partner's half for its own rows after a
// pair barrier (bar.sync 1 + w / 2, 64). S: each warp writes its own area and reads the partner's; dP: it writes
// the partner's area (read by itself before) and reads its own, then stores P / dS there: two pair barriers a tile.
// The same sums in another order: S / dP differ from the default's in rounding (each element h0 + h1 of the two
// halves, the same bits in both warps).
constexpr int kPdsKSplitS = 32768;
// A flag on BODY (the sm_90+ defaults' loops: D = 128's three-stage one-barrier loop, D = 64's 128-query tiles and
// D = 256's mbarrier loop; bf16 calls with a 16-byte aligned rab, without contexts: bwd_sm80_rab_smem): rab through
// shared memory. Each warp copies the rab of its own phase-1 scores (query positions x keys of the next tile, 16-byte
// chunks, zero past the sequence) by cp.async into the bytes of the tile's P buffer that its P takes later (no
// other warp reads or writes them before), and the score pass reads one 32-bit word per key pair there, instead of
// a 2-byte global load per element behind a bounds test. Tile mb + 1's P buffer is free after the barrier behind tile
// mb's phase 1 (its last readers, tile mb - 1's phases 2 / 3, are done): the copies go out there with the next
// Q / dO copies; the mbarrier loops' stage barrier covers them, the one-barrier loop waits for its own group
// (cp.async.wait_group 1, then a warp barrier). A per-head drab (q's dtype, one writer per element, 16-byte
// aligned) leaves from the warp's dS tile in shared memory (its bits but -0 stored as +0: drab_value) as 16-byte
// row chunks. The same sums as without (D = 256: rab added to the exchanged S, its words read before the exchange
// writes the warp's bytes): gradients bit for bit main's path.
constexpr int kPdsRabSmem = 65536;
// A flag on BODY (kPdsTile128's context twin): the walk's last context tile in full, without kHalfSkip (the context
// loop before it: kernel_options(bwd_sm80_cfg=13) at D = 64 with contexts, for comparisons).
constexpr int kPdsFullCtxTile = 131072;
// A flag on BODY with kPdsRabSmem (sm_90 code; the rab loops' default where they write drab's zeros,
// bwd_pds_drab_self_zero; kernel_options(fwd_sm80_cfg=12) without it): those zeros leave as bulk copies
// (cp.async.bulk, the TMA unit) of a zeroed shared row, one per drab row piece of the block
// (bwd_pds_zero_drab_bulk), instead of 16-byte st.global per lane, which queued behind / ahead of the phases'
// shared-memory and dQ traffic in the LSU (on an H200 rab + drab 3.8 / 4.4 / 1.1 % faster at D = 128 / 64 / 256).
constexpr int kPdsDrabBulk = 524288;
// A flag on BODY (D = 128's three-stage one-barrier loop, D = 256's mbarrier loop, heads first, sm_90 code;
// the op's kBwdSm80DqClaim (hstu_bwd_sm80_limits.h; hstu_ops.cc's default rule, kernel_options(fwd_sm80_cfg=13) for
// every call it applies to); measured on an H200:
// docs/hstu_kernel_notes.md, branch bwd38): the fp32 dQ workspace arrives uninitialized, with one claim word per
// (head, workspace row) behind it (p.dq_zero_flags, zeroed by the launcher). In phase 3 lane 0 of each warp claims
// its fragment block of the tile (the word of row m0 + warp: 0 -> 1 by atom.cas) before the dQ k-loop; the first
// claimer stores its block (st.global.v4), fences and publishes 2, any later one waits for 2 (at once in practice:
// the claim is published within the claimer's phase 3, which waits on nothing) and adds (red.global.add.v4). So the
// torch fill of the workspace (285 MB at B128 S1K D128) is gone; hstu_dq_tile_convert_kernel reads a block whose
// word is 0 (no key block walked it) as zeros. dQ sums in another order (the first one stored, not added to +0).
constexpr int kPdsDqClaim = 1048576;
// A flag on BODY (kernel_options(fwd_sm80_cfg=14), hstu_bwd_sm80_split.cuh): the CTA's key block and chunk of its
// walk from the split's work list (blockIdx.y; heads in blockIdx.x), a split block's dK / dV merged by its last chunk.
constexpr int kPdsSplitWalk = 262144;
// D = 128's three-stage one-barrier loop (STAGES = 3, sm_90 code) takes the dQ-first body with the lane offsets once
// (kPdsLaneOnce): together they compile without spills (255 registers; the fixed-order body spilled 8 B, with the lane
// offsets once 16 B, the dQ-first body alone 24 B). kBwdPdsD128Main (hstu_bwd_sm80_kernel.cuh): the loop before.
template <int D, int NWARPS, int STAGES = 1>
constexpr int kBwdPdsDefaultBody =
    NWARPS != 8 ? 0 : D == 128 && STAGES != 3 ? kPdsLoopFree : kPdsLoopFreeDqFirst;
template <int D, int STAGES, int NWARPS>
constexpr int kBwdPdsDefaultFlags = (STAGES == 3 && D == 64 ? kPdsSplitCopies | kPdsRunPtrs | kPdsLaneOnce : 0) |
                                    (STAGES == 3 && D == 128 ? kPdsLaneOnce : 0) |
                                    (STAGES == 3 ? kPdsSmemEpilogue | kPdsStsmPdS | kPdsPtrCopies : 0);
// The sm_90+ three-stage one-barrier loop's BODY at D (8 warps).
template <int D>
constexpr int kBwdPdsOneBarLoop = kBwdPdsDefaultBody<D, 8, 3> | kBwdPdsDefaultFlags<D, 3, 8>;

// STAGES = 3 (kOneBar, below): three Q / dO stages and two P / dS buffers; mbar (kPdsMbarCopies): two P / dS buffers
// and two mbarriers behind them.
// (BM: the tile's query rows, 2 kBlockM with kPdsTile128)
template <int D, int BM, int BN>
constexpr int bwd_pds_smem_bytes(int stages, bool mbar = false) {
  return (2 * BN * D + stages * 2 * BM * D + (stages == 3 || mbar ? 4 : 2) * BM * BN) * 2 + (mbar ? 16 : 0);
}

// mbarriers for kPdsMbarCopies (sm_90+ code only: the kernels that use them are traps below sm_90).
__device__ __forceinline__ void pds_mbar_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// The thread's earlier cp.async copies arrive on bar once complete (the barrier counts one arrival per thread).
__device__ __forceinline__ void pds_mbar_arrive_copies(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}
__device__ __forceinline__ void pds_mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "PDS_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra PDS_WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Calls f(mt, nt, e, r, j) for each S / dP accumulator element of a warp (row position r = rbase + mt*16 + (e/2)*8,
// key j = jbase + nt*8 + (e&1)) row by row, with r and j hidden from the optimizer: the mask / rab / drab passes
// then keep one row's values live, not every row's and key's derived values at once (which spilled).
template <int SMT, int SNT, typename F>
__device__ __forceinline__ void for_each_score(int rbase, int jbase, F&& f) {
#pragma unroll
  for (int mt = 0; mt < SMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = static_cast<int>(opaque(static_cast<uint32_t>(rbase + mt * 16 + hf * 8)));
#pragma unroll
      for (int nt = 0; nt < SNT; ++nt)
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          const int j = static_cast<int>(opaque(static_cast<uint32_t>(jbase + nt * 8 + e2)));
          f(mt, nt, hf * 2 + e2, r, j);
        }
    }
}

// Calls f(mt, i, hf) for row half hf of the warp's n8 score tiles (mt, i), mt < SMT, i < N: the order of the P / dS
// stores (one packed pair of a row each).
template <int SMT, int N, typename F>
__device__ __forceinline__ void for_each_pair(F&& f) {
#pragma unroll
  for (int mt = 0; mt < SMT; ++mt)
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) f(mt, i, hf);
}

// The visibility bits of a warp's SMT x SNT m16n8 score tiles on a tile that is not full: bit (mt SNT + nt) 4 + e
// for the element of query position rbase + 16 mt + 8 (e / 2), key jbase + 8 nt + (e % 2) (the accumulator
// layout). Each of the thread's 2 SMT rows' keys as two intervals (SeqMask::row_keys: the group-size division once
// per row, where allowed(r, j) takes two per element on target tiles), turned into the row's bits by
// fwd_key_interval_bits, in a rolled loop over the rows; the same bits as allowed() (tests/hstu/test_mask_rows.py,
// `bwd80` case).
template <int SMT, int SNT, typename Keep>
__device__ __forceinline__ Keep bwd_pds_keep_bits(const SeqMask& mk, int rbase, int jbase) {
  static_assert(SNT <= 8 && SMT * SNT * 4 <= 8 * static_cast<int>(sizeof(Keep)), "one word of bits per row pair");
  Keep keep = 0u;
#pragma unroll 1
  for (int k = 0; k < 2 * SMT; ++k) {
    const int mt = k / 2, hf = k % 2;
    int hlo, hhi, tlo, thi;
    mk.row_keys(rbase + mt * 16 + hf * 8, hlo, hhi, tlo, thi);
    uint32_t w[1] = {0u};
    fwd_key_interval_bits<SNT * 8>(w, jbase, hf, hlo, hhi);
    fwd_key_interval_bits<SNT * 8>(w, jbase, hf, tlo, thi);
    keep |= static_cast<Keep>(w[0]) << (mt * SNT * 4);
  }
  return keep;
}

// The query positions r0 whose BM-row tile is full against the key block [n0, n0 + BN)
// (SeqMask::tile_full(r0, r0 + BM, n0, n0 + BN)): r0 <= x, or y <= r0 <= z. tile_full solved for r0: either all
// rows are context rows (r0 + BM <= ctx, within the history), or the rows lie in [ctx, hist - BM] and inside both
// windows of every key (tests/hstu/test_mask_rows.py, `bwd80` case, checks it against tile_full).
template <int BM, int BN>
__device__ __forceinline__ void bwd_pds_full_rows(const SeqMask& mk, const int n0, int& x, int& y, int& z) {
  x = INT_MIN;
  y = 1;
  z = 0;  // (none)
  if (n0 + BN > mk.hist) return;
  const int64_t xl = static_cast<int64_t>(min(mk.ctx, mk.hist)) - BM;
  const int64_t zl = (mk.wl >= 0 ? min(static_cast<int64_t>(mk.hist), static_cast<int64_t>(n0) + 1 + mk.wl)
                                 : static_cast<int64_t>(mk.hist)) - BM;
  x = static_cast<int>(max(xl, static_cast<int64_t>(INT_MIN)));
  y = mk.wr >= 0 ? max(mk.ctx, n0 + BN - 1 - mk.wr) : mk.ctx;
  z = static_cast<int>(max(zl, static_cast<int64_t>(INT_MIN)));
}

// The fragment-ordered dQ workspace (kDqFrag: the 8-warp kernels at D = 256, and at D = 128 those with dP in one
// pass, in sm_90+ code; hstu_bwd_sm80_limits.h bwd_sm80_dq_floats sizes it): per head, the queries of every sequence
// b from row cu_seqlens_q[b] + 64 b (each sequence padded by one tile, so its last partial tile ends before the next
// sequence's rows), (H, total_q + 64 B, D) fp32; a 64-query tile's 64 x D floats in the order the dQ warps hold them:
// warp w's QR x QC block at w QR QC, in it one red.global.add.v4.f32 per (piece, mt, dt) (a thread's 4 values of that
// m16n8 accumulator), its 32 lanes' 512 bytes contiguous: 4 L2 lines per instruction, 32 a warp and (64 x 128) tile
// pair, where the row-major workspace takes 16 red.v2 of 8 rows x 32 bytes (128 lines: the L1's request queue
// fills, lg_throttle). Those kernels set the flag word behind the workspace (dq_frag_flag), so that
// hstu_dq_tile_convert_kernel reads the layout that was written; the other kernels (and sm_80 code, which has no
// vector reductions) add into the row-major layout.
constexpr int kDqFragPad = static_cast<int>(kBwdSm80DqFragPad);
__device__ __forceinline__ int64_t dq_frag_head_rows(const HstuParams& p) { return p.total_q + kDqFragPad * p.batch; }
template <int D>
__device__ __forceinline__ float* dq_frag_flag(const HstuParams& p) {
  return p.dq_accum + dq_frag_head_rows(p) * p.heads * D;
}
// *addr += x[0..3] by one fp32 vector reduction (sm_90+).
__device__ __forceinline__ void red_add_f4(float* addr, const float* x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(x[0]), "f"(x[1]), "f"(x[2]),
               "f"(x[3])
               : "memory");
#endif
}

// The plain k-loops of phases 2 / 3: acc[mt][2 np + h] += A(ks, mt) B(ks, np) over KS k-steps, MT m16 row tiles and
// N8 / 2 n16 column blocks (load_a / load_b fill one ldmatrix.x4 fragment each), the loop rolled unless UNROLL > 1.
template <typename T, int KS, int UNROLL, int MT, int N8, typename LoadA, typename LoadB>
__device__ __forceinline__ void plain_k_loop(float (&acc)[MT][N8][4], LoadA&& load_a, LoadB&& load_b) {
  constexpr int NP = N8 / 2;
#pragma unroll UNROLL
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_a(a[mt], ks, mt);
#pragma unroll
    for (int np = 0; np < NP; ++np) {
      uint32_t b[4];
      load_b(b, ks, np);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(acc[mt][2 * np], a[mt], b[0], b[1]);
        mma_16816<T>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// *addr += (x, y) by fp32 reductions, unpredicated (atomic_add_f2 without its predicate).
__device__ __forceinline__ void red_add_f2(float* addr, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(x), "f"(y) : "memory");
#else
  asm volatile("red.global.add.f32 [%0], %1;\n red.global.add.f32 [%0+4], %2;\n" ::"l"(addr), "f"(x), "f"(y)
               : "memory");
#endif
}

// A masked element's dS is 0 * dP, -0 where dP < 0; drab stores x + 0 (+0 there, the value of the entries no walked
// tile writes: drab starts as zeros), so its bits do not depend on which fully masked query tiles a kernel walks
// (the context gap, CTX). add.rn: not contracted or folded away.
__device__ __forceinline__ float drab_value(float x) {
  float y;
  asm("add.rn.f32 %0, %1, 0f00000000;\n" : "=f"(y) : "f"(x));
  return y;
}
// drab_value on two packed 16-bit values (bf16 / fp16): -0 -> +0, other bits kept (a half's sign stays where its
// magnitude is not 0: (m + 0x7fff) has bit 15 set iff m > 0, no carry into the other half).
__device__ __forceinline__ uint32_t drab_value2(uint32_t w) {
  return w & (0x7fff7fffu | ((w & 0x7fff7fffu) + 0x7fff7fffu));
}

// __syncwarp as a compiler memory barrier too (ordered with the volatile shared loads and stores around it).
__device__ __forceinline__ void syncwarp_mem() { asm volatile("bar.warp.sync 0xffffffff;\n" ::: "memory"); }
// The two floats of a packed pair of T (lo: the first element), exact (to_float of each).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  } else {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
}

// kPdsRabSmem's per-head drab is uninitialized unless the op zeroed it (kBwdSm80DrabZeroed,
// hstu_bwd_sm80_limits.h): then these kernels write every element of it.
__host__ __device__ __forceinline__ bool bwd_pds_drab_self_zero(const HstuParams& p) {
  return p.drab != nullptr && p.drab_accum == nullptr && p.drab_heads == nullptr &&
         (p.fwd_sm80_cfg & kBwdSm80DrabZeroed) == 0;
}
// Zeros in drab (b, h)'s column block [n0z, n0z + BN) (within its max_seqlen_k rows and columns) where that block's
// walk (rows [w0, w1): bwd_pds_zero_walk) stores no dS, rows u in [u_a, u_b) of its list of such rows: row u below
// w0, u + w1 - w0 from there; the chunks from lk on (no walk stores them) every row u. 16-byte stores (a warp's
// lanes: whole rows of the block), evict-first (the ~1 GB of zeros at B16 S4K H4 need no L2 room); the loop unrolled
// by UNROLL (the form without spills in sm_90a code, nvcc 13.0).
template <typename T, int BN, int NT, int UNROLL>
__device__ __forceinline__ void bwd_pds_zero_drab(const HstuParams& p, int b, int h, int n0z, int lk, int w0, int w1,
                                                  int u_a, int u_b) {
  constexpr int kCpr = BN / 8, kStep = NT / kCpr;  // chunks a row; rows a pass
  const int rows = p.max_seqlen_k;
  const int c = n0z + (static_cast<int>(threadIdx.x) % kCpr) * 8;
  if (c >= rows) return;
  int sh = w1 - w0;
  if (c >= lk) {  // (every row)
    w0 = rows;
    sh = 0;
  }
  const int u_end = min(u_b, rows - sh);
  char* d = reinterpret_cast<char*>(static_cast<T*>(p.drab) + b * p.drab_batch_stride + h * p.drab_head_stride + c);
  const int64_t rs = p.drab_row_stride * (int64_t)sizeof(T);
#pragma unroll UNROLL
  for (int u = u_a + static_cast<int>(threadIdx.x) / kCpr; u < u_end; u += kStep) {
    const int r = u < w0 ? u : u + sh;
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"l"(d + r * rs), "r"(0u) : "memory");
  }
}
// bwd_pds_zero_drab's zeros (the same elements) as bulk copies of the zeroed shared row zrow (BN values of T), list
// entry u of [u_a, u_b) by thread u % NT: its row's piece of the block (from the first chunk at or past lk only in
// the walk's rows when the block has such chunks) in one copy, evict-first in L2. The rows then follow the list of
// the block's longest column (all rows where it has chunks past lk). Committed as one bulk group per thread;
// bwd_pds_zero_bulk_wait before the CTA exits (zrow is read asynchronously).
template <typename T, int BN, int NT>
__device__ __forceinline__ void bwd_pds_zero_drab_bulk(const HstuParams& p, int b, int h, int n0z, int lk, int w0,
                                                       int w1, int u_a, int u_b, uint32_t zrow) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int rows = p.max_seqlen_k;
  const int c_end = min(n0z + BN, (rows + 7) & ~7);  // (whole 16-byte chunks, as bwd_pds_zero_drab)
  const int c_lk = max(n0z, (lk + 7) & ~7);
  const bool past = c_lk < c_end;  // chunks from lk on: every row
  const int sh = past ? 0 : w1 - w0;
  const int u_end = min(u_b, rows - sh);
  char* d = reinterpret_cast<char*>(static_cast<T*>(p.drab) + b * p.drab_batch_stride + h * p.drab_head_stride);
  const int64_t rs = p.drab_row_stride * (int64_t)sizeof(T);
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  for (int u = u_a + static_cast<int>(threadIdx.x); u < u_end; u += NT) {
    const int r = u < w0 ? u : u + sh;
    const int c0 = (past && r >= w0 && r < w1) ? c_lk : n0z;  // (the walk's rows: from lk on)
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n" ::"l"(
                     d + r * rs + c0 * (int)sizeof(T)),
                 "r"(zrow), "r"((c_end - c0) * (int)sizeof(T)), "l"(pol)
                 : "memory");
  }
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// The zeroed shared row of bwd_pds_zero_drab_bulk (BN values of T), written (and fenced for the async proxy) by the
// CTA's first threads; the caller's block barrier orders it before the copies.
template <typename T, int BN>
__device__ __forceinline__ uint4* bwd_pds_zero_row() {
  __shared__ __align__(128) uint4 zrow[BN * sizeof(T) / 16];
  return zrow;
}
template <typename T, int BN>
__device__ __forceinline__ void bwd_pds_zero_row_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x < BN * sizeof(T) / 16) {
    bwd_pds_zero_row<T, BN>()[threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
#endif
}
// The thread's bulk copies have read their shared source (before the CTA exits).
__device__ __forceinline__ void bwd_pds_zero_bulk_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
// The rows [w0, w1) in which the walk of key block n0z of sequence si stores dS (its query tiles from bwd_work_tiles,
// no context gap: the rab loops' calls have no contexts), as positions.
template <int BM, int BN>
__device__ __forceinline__ void bwd_pds_zero_walk(const SeqInfo& si, int n0z, int& w0, int& w1) {
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, false>(si, n0z, mb_begin, n_a, gap, n_mt);
  w0 = n_mt > 0 ? mb_begin * BM + si.mask.offset : 0;
  w1 = n_mt > 0 ? min((mb_begin + n_mt) * BM + si.mask.offset, si.lk) : 0;
}

// CTX: a call with contexts (num_contexts given; hstu_bwd_pds_ctx_kernel), the only one that can have a context gap
// to skip: without contexts the kernel is the plain tile walk (no skip bookkeeping in the loop).
// sms: the device's SM count (kPdsTailBlocksFirst's tail of one wave).
template <typename T, int D, int STAGES, int NWARPS, int BODY, bool CTX>
__device__ __forceinline__ void hstu_bwd_pds_body(const HstuParams& p, const int sms) {
  using C = BwdPdsConfig<D, NWARPS>;
  // BM query rows a tile (the loop's step), HM of them a phase-1 pass (kPdsTile128: two passes)
  constexpr bool kTile128 = (BODY & kPdsTile128) != 0;
  constexpr int HM = C::kBlockM, BM = kTile128 ? 2 * HM : HM, BN = C::kBlockN;
  constexpr int NT = NWARPS * 32;
  // The loop-free bodies (kPdsLoopFree, kPdsLoopFreeDqFirst): the S, dV and dK k-loops unrolled, the dP k-loop by
  // kDpUnroll, unpredicated dQ atomics (phase_dq). Fully unrolled the dP k-loop spilled 20 B in sm_90a code and
  // 16-20 B in sm_80 code; the dV / dK k-loop of both operands unrolled spilled 20 B (sm_90a); dP by 4 in the
  // one-stage kernels spilled 4 B (sm_80, sm_90a).
  constexpr int kBody = BODY & ~(kPdsSplitCopies | kPdsHeadsFirst | kPdsMbarCopies | kPdsLeanCopies |
                                 kPdsTailBlocksFirst | kPdsSmemEpilogue | kPdsStsmPdS | kPdsPtrCopies |
                                 kPdsRunPtrs | kPdsLaneOnce | kPdsTile128 | kPdsKSplitS | kPdsRabSmem |
                                 kPdsFullCtxTile | kPdsDrabBulk | kPdsDqClaim | kPdsSplitWalk);
  static_assert(kBody == 0 || kBody == kPdsLoopFree || kBody == kPdsLoopFreeDqFirst, "a body of the list above");
  constexpr bool kDqFirstBody = kBody == kPdsLoopFreeDqFirst;
  constexpr bool kLoopFree = kBody == kPdsLoopFree || kDqFirstBody;
  // D = 128's loop-free body copies the next Q / dO tile with load_q_do_lean (the predicated copies of load_q_do took
  // ~130 instructions a warp and tile pair, a tenth of the kernel's) and tests for full tiles against two intervals
  // formed once per key block (tile_full_at; ~30 instructions a tile pair in tile_full): -0.5 / -0.7 % on an H200
  // (B16 S4K). At D = 256 with kPdsLeanCopies (the one-barrier default: -2.2 / -1.5 % at B16 S4K / B128 S1K); not in
  // sm_80 code (the two-stage D = 128 kernel spilled 4 B with them).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kLeanLoad = false;
#else
  constexpr bool kLeanLoad = kLoopFree && (D == 64 || D == 128 || (BODY & kPdsLeanCopies) != 0);
#endif
  constexpr bool kFullMap = kLeanLoad;
  constexpr int kDpUnroll = STAGES >= 2 ? 4 : 2;
  // kOneBar (STAGES = 3: D = 64 / 128's default on sm_90+ for calls without contexts): one block barrier per tile
  // pair instead of two (on an H200 2.5-5 % faster than two). Tile mb + 1's Q / dO copies land before the barrier after phase 1 (they were issued
  // right after the previous one), tile mb + 2's are issued right after it into the third stage, and P / dS alternate
  // between two buffers: that barrier alone orders every reuse (a stage or a P / dS buffer is rewritten only after
  // every warp has passed the barrier that follows its last reads), so a warp that finishes phases 2 / 3 runs on into
  // the next tile's phase 1 instead of waiting at the loop's top.
  constexpr bool kOneBar = STAGES == 3;
  constexpr bool kSplitCopies = (BODY & kPdsSplitCopies) != 0;
  static_assert(!kSplitCopies || kOneBar, "split copies: the one-barrier loop only");
  constexpr bool kMbar = (BODY & kPdsMbarCopies) != 0;  // (kPdsMbarCopies above)
  static_assert(!kMbar || (STAGES == 2 && kLoopFree), "kPdsMbarCopies: two stages, a loop-free body");
  static_assert(!kTile128 || (kMbar && D == 64 && NWARPS == 8), "128-row tiles: D = 64's mbarrier loop");
  constexpr bool kKSplit = (BODY & kPdsKSplitS) != 0;  // (kPdsKSplitS above)
  static_assert(!kKSplit || (kMbar && D == 256 && NWARPS == 8 && C::kSWM == 4 && !kTile128),
                "the K-split S / dP: D = 256's mbarrier loop");
  constexpr bool kTwoPdS = kOneBar || kMbar;  // two P / dS buffers, alternating by tile parity
  constexpr bool kRabSmem = (BODY & kPdsRabSmem) != 0;  // (kPdsRabSmem above)
  constexpr bool kDqClaim = (BODY & kPdsDqClaim) != 0;  // (kPdsDqClaim above)
  static_assert(!kRabSmem || (kMbar || (kOneBar && !kSplitCopies)),
                "rab through shared memory: the one-barrier loop with the copies together, or the mbarrier loops");
  // The fragment-ordered dQ workspace (dq_frag_flag): 8 warps at D = 256, and at D = 64 / 128 the loop-free bodies;
  // D = 64 / 128's plain body (the context kernels) adds row-major (with the fragment order it spilled 4-12 B in
  // sm_90a code).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kDqFrag = NWARPS == 8 && (D == 256 || ((D == 64 || D == 128) && kLoopFree));
#else
  constexpr bool kDqFrag = false;
#endif
  static_assert(!kDqClaim || (((D == 128 && kOneBar) || (D == 256 && kMbar)) && !kTile128 && !kRabSmem && !CTX),
                "dQ claims: D = 128's one-barrier loop, D = 256's mbarrier loop, without rab or contexts");
  // (D = 256: the dQ k-loop by 2; fully unrolled, four pieces of 32 columns, it spilled 4-8 B in sm_90a code)
  constexpr int kDqUnroll = kLoopFree ? (D == 256 ? 2 : BN / 16) : 1;
  // Phase 1 warp tile: SM queries x SN keys.
  constexpr int SM = HM / C::kSWM, SN = BN / (NWARPS / C::kSWM);
  constexpr int SMT = SM / 16, SNT = SN / 8;
  // Phase 2 warp tile: KR keys x KC columns.
  constexpr int KR = BN / C::kKWN, KC = D / (NWARPS / C::kKWN);
  constexpr int KMT = KR / 16, KNT = KC / 8;
  // Phase 3 warp tile: QR queries x QC columns, QPW at a time (kTile128: 4 x 2 warps of 32 x 32, one pass).
  constexpr int QWM = kTile128 ? 4 : C::kQWM;
  constexpr int QR = BM / QWM, QC = D / (NWARPS / QWM), QPW = kTile128 ? QC : C::kQPW;
  // The fragment-ordered dQ layout's block (a warp's QR x QC of an HM-row tile without kTile128), in floats.
  constexpr int kFragBlock = (HM / C::kQWM) * (D / (NWARPS / C::kQWM));
  constexpr int QMT = QR / 16;
  static_assert(SM % 16 == 0 && SN % 16 == 0 && KR % 16 == 0 && KC % 16 == 0 && QR % 16 == 0 && QC % QPW == 0 &&
                    QPW % 16 == 0,
                "bad warp tiles");
  static_assert(STAGES == 1 || STAGES == 2 || (kOneBar && kLoopFree), "one or two Q / dO stages, or kOneBar");
  // S / dP k-loop of the plain body unrolled by 2 (4 in sm_86 / sm_89 code, whose ptxas spilled 4 B with 1 and 2).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ < 900
  constexpr int kUnrollS = 4;
#else
  constexpr int kUnrollS = D == 64 ? 1 : 2;  // (D = 64's 128 x 128 tile: by 2 its sm_80 code spilled 4 B)
#endif
  // Target tiles' mask bits by rows (bwd_pds_keep_bits) or by elements (allowed()): the element rule kept where the
  // row loop spilled: in sm_80 code D = 64 and D = 256's two-stage kernel (4-52 B; neither an A100 default); in
  // sm_86 / sm_89 code every kernel of this layout (4-8 B).
  // kMaskReread: the mask fields re-read from the parameters for the row loop, not kept live through the main loop
  // (sm_80 code: without it the D = 256 kernels spilled 12 B; in sm_90a code it made other bodies spill 8-36 B).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
  constexpr bool kRowMask = D != 64 && !(D == 256 && STAGES == 2);
  constexpr bool kMaskReread = true;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kRowMask = false;
  constexpr bool kMaskReread = false;
#else
  constexpr bool kRowMask = true;
  constexpr bool kMaskReread = false;
#endif
  using L = SmemLayout<D>;    // K, V, Q, dO: rows x D
  using LP = SmemLayout<BN>;  // P, dS: BM query rows x BN keys

  extern __shared__ __align__(128) char smem[];
  const uint32_t sK = smem_u32(smem);
  const uint32_t sV = sK + BN * D * 2;
  const uint32_t sQ0 = sV + BN * D * 2;  // stage s: Q at sQ0 + s * kStageBytes, dO right after it
  constexpr uint32_t kStageBytes = 2 * BM * D * 2;
  const uint32_t sP0 = sQ0 + STAGES * kStageBytes;  // P, dS (kTwoPdS: then the second P, dS)
  const uint32_t sBar = sP0 + (kTwoPdS ? 4 : 2) * BM * BN * 2;  // kMbar: stage s's mbarrier at sBar + 8 s

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // Grid (batch, key blocks, heads) (launch_hstu_bwd_pds): each head's key blocks 0 of every sequence (the heaviest
  // under a causal mask: they walk every query tile) go first, then its blocks 1, ... (Each index read straight
  // from blockIdx: a run-time choice of the order here made the one-stage and other kernels spill 4-12 B.)
  constexpr bool kHeadsFirst = (BODY & kPdsHeadsFirst) != 0;
  constexpr bool kTailBlocksFirst = (BODY & kPdsTailBlocksFirst) != 0;
  static_assert(!kTailBlocksFirst || (kHeadsFirst && !CTX), "the tail order: heads first, no contexts");
  static_assert(!kRabSmem || !CTX, "rab through shared memory: calls without contexts");
  constexpr int kZeroUnroll = D == 256 ? 4 : 1;  // (kRabSmem's zeros in drab: bwd_pds_zero_drab)
  constexpr bool kDrabBulk = kRabSmem && (BODY & kPdsDrabBulk) != 0;  // (bwd_pds_zero_drab_bulk)
  constexpr bool kSplitWalk = (BODY & kPdsSplitWalk) != 0;
  static_assert(!kSplitWalk || (!kHeadsFirst && !kRabSmem), "the split's list: its own grid, no rab");
  int n_block = blockIdx.y;
  int b = kHeadsFirst ? blockIdx.z : blockIdx.x;
  const int h = kHeadsFirst || kSplitWalk ? blockIdx.x : blockIdx.z;
  if constexpr (kTailBlocksFirst) {  // the last g sequences: CTA j of theirs (heads fastest) takes block j / g
    const int per_seq = gridDim.x * gridDim.y;
    const int g = min(static_cast<int>(gridDim.z), (sms + per_seq - 1) / per_seq);
    const int b0 = gridDim.z - g;
    if (b >= b0) {
      const int j = blockIdx.y + gridDim.y * (b - b0);
      n_block = j / g;
      b = b0 + j % g;
    }
  }
  if (kDqFrag && tid == 0 && p.dq_accum != nullptr) *dq_frag_flag<D>(p) = 1.f;  // (every CTA: one store)
  if constexpr (kSplitWalk) {  // (the chunk word is read again at the end: bwd_split_item_again)
    const int4 it = bwd_split_item(p);
    if (it.z < 0) return;
    b = it.x;
    n_block = it.y;
  }
  const SeqInfo si = seq_info(p, b);
  const int n0 = n_block * BN;
  // kRabSmem with drab uninitialized (bwd_pds_drab_self_zero): this CTA writes the zeros of drab's column block
  // n0z (bwd_pds_zero_drab), the block paired with its own (gridDim.y - 1 - n_block: under a causal mask a long
  // walk with a block of few zeros and a short one with many, about a row of zeros a query row walked), in slices
  // of zero_map.z rows after each tile's phase 1 (the stores drain under phases 2 / 3), or at once without a walk.
  auto zero_block = [&] { return (static_cast<int>(gridDim.y) - 1 - n_block) * BN; };  // n0z
  auto zero_paired_at_once = [&] {  // (kRabSmem: a CTA without a walk)
    if (bwd_pds_drab_self_zero(p)) {
      const int n0z = zero_block();
      int w0, w1;
      bwd_pds_zero_walk<BM, BN>(si, n0z, w0, w1);
      if constexpr (kDrabBulk) {
        bwd_pds_zero_row_init<T, BN>();
        __syncthreads();
        bwd_pds_zero_drab_bulk<T, BN, NT>(p, b, h, n0z, si.lk, w0, w1, 0, p.max_seqlen_k,
                                          smem_u32(bwd_pds_zero_row<T, BN>()));
        bwd_pds_zero_bulk_wait();
      } else {
        bwd_pds_zero_drab<T, BN, NT, kZeroUnroll>(p, b, h, n0z, si.lk, w0, w1, 0, p.max_seqlen_k);
      }
    }
  };
  if (n0 >= si.lk_alloc) {
    if constexpr (kRabSmem) zero_paired_at_once();
    return;
  }
  const SeqMask& mk = si.mask;

  // Q / dO rows from m of this sequence and head into stage buffer sq (pointers formed per load: fewer registers
  // live across the loop).
  auto load_q_do = [&](const uint32_t sq, const int m, const uint32_t t) {
    const T* qg = static_cast<const T*>(p.q) + (int64_t)(si.q_start + m) * p.q_row_stride + h * p.q_head_stride;
    const T* dog =
        static_cast<const T*>(p.dout) + (int64_t)(si.q_start + m) * p.do_row_stride + h * p.do_head_stride;
    load_tile_async<BM, D, NT>(sq, qg, p.q_row_stride, si.lq - m, t);
    load_tile_async<BM, D, NT>(sq + BM * D * 2, dog, p.do_row_stride, si.lq - m, t);
  };
  // kLeanLoad: the same copies on a full tile (m + BM <= lq, uniform; else load_q_do) without per-row predicates
  // and with fewer address instructions: the tile's two base pointers are uniform, each thread's byte offset is
  // formed once, its ROWS / KR rows are KR rows apart (a uniform step), and in shared memory each is the first
  // one's offset plus a constant (the swizzle depends on row % 8 only: a thread's chunk lies below the KR-row step).
  // parts: 3 Q and dO, 1 Q, 2 dO (kSplitCopies; a partial tile's copies all with part 1).
  // kPtrCopies (kPdsPtrCopies): the thread's chunk of the sequence's row lr_t (its first Q / dO copy's source) and its
  // swizzled shared offset, formed once (unused, and so not formed, without the flag).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kPtrCopies = (BODY & kPdsPtrCopies) != 0;
  constexpr bool kRunPtrs = (BODY & kPdsRunPtrs) != 0;
  constexpr bool kLaneOnce = (BODY & kPdsLaneOnce) != 0;
#else
  constexpr bool kPtrCopies = false;
  constexpr bool kRunPtrs = false;
  constexpr bool kLaneOnce = false;
#endif
  static_assert(!kRunPtrs || (kPtrCopies && kOneBar && kSplitCopies && kDqFrag && D == 64),
                "running pointers: D = 64's one-barrier loop");
  static_assert(!kLaneOnce || kRunPtrs || kTile128 || (kPtrCopies && D == 128),
                "lane offsets once: with the running pointers, kTile128 or D = 128's pointer copies");
  // The lane index of the phases' offsets: opaque, so that they are formed where used (fewer registers live across
  // the loop), unless kLaneOnce.
  auto phase_lane = [&] {
    if constexpr (kLaneOnce) {
      return lane;
    } else {
      return static_cast<int>(opaque(static_cast<uint32_t>(lane)));
    }
  };
  const int lr_t = tid / (D / 8), lc_t = tid % (D / 8);
  const char* const q_t0 = reinterpret_cast<const char*>(
      static_cast<const T*>(p.q) + ((int64_t)si.q_start + lr_t) * p.q_row_stride + h * p.q_head_stride + lc_t * 8);
  const char* const do_t0 = reinterpret_cast<const char*>(
      static_cast<const T*>(p.dout) + ((int64_t)si.q_start + lr_t) * p.do_row_stride + h * p.do_head_stride + lc_t * 8);
  const uint32_t ls_t = L::swz(lr_t, lc_t * 8);
  // kRunPtrs: q_t0 / do_t0 advanced to the rows of the tile the loop copies next (mb + 2), a tile per tile.
  const char* q_nx = q_t0;
  const char* do_nx = do_t0;
  auto load_q_do_lean = [&](const uint32_t sq, const int m, const uint32_t t, auto parts) {
    constexpr int kParts = decltype(parts)::value;
    constexpr int kChunks = D / 8, KR = NT / kChunks;
    static_assert(BM % KR == 0 && KR % 8 == 0 && L::swz(KR, 0) == KR * D * 2, "rows KR apart: a constant offset");
    if (m + BM > si.lq) {
      if (kParts != 2) load_q_do(sq, m, t);
      return;
    }
    if constexpr (kPtrCopies) {
      // (kRunPtrs: m is (mb + 2) BM, the one-barrier loop's copies)
      const char* qg = kRunPtrs ? q_nx : q_t0 + (int64_t)m * p.q_row_stride * (int64_t)sizeof(T);
      const char* dog = kRunPtrs ? do_nx : do_t0 + (int64_t)m * p.do_row_stride * (int64_t)sizeof(T);
      const int64_t q_step = KR * p.q_row_stride * (int64_t)sizeof(T);
      const int64_t do_step = KR * p.do_row_stride * (int64_t)sizeof(T);
      const uint32_t s_t = sq + ls_t;
#pragma unroll
      for (int it = 0; it < BM / KR; ++it) {
        if (kParts & 1) cp_async_16(s_t + it * KR * D * 2, qg + it * q_step);
        if (kParts & 2) cp_async_16(s_t + BM * D * 2 + it * KR * D * 2, dog + it * do_step);
      }
      return;
    }
    const int r_t = static_cast<int>(t) / kChunks, c_t = static_cast<int>(t) % kChunks;
    const uint32_t s_t = sq + L::swz(r_t, c_t * 8);
    const char* qg = reinterpret_cast<const char*>(static_cast<const T*>(p.q) + (int64_t)(si.q_start + m) *
                                                   p.q_row_stride + h * p.q_head_stride);
    const char* dog = reinterpret_cast<const char*>(static_cast<const T*>(p.dout) + (int64_t)(si.q_start + m) *
                                                    p.do_row_stride + h * p.do_head_stride);
    qg += ((int64_t)r_t * p.q_row_stride + c_t * 8) * (int64_t)sizeof(T);
    dog += ((int64_t)r_t * p.do_row_stride + c_t * 8) * (int64_t)sizeof(T);
    const int64_t q_step = KR * p.q_row_stride * (int64_t)sizeof(T);
    const int64_t do_step = KR * p.do_row_stride * (int64_t)sizeof(T);
#pragma unroll
    for (int it = 0; it < BM / KR; ++it) {
      if (kParts & 1) cp_async_16(s_t + it * KR * D * 2, qg + it * q_step);
      if (kParts & 2) cp_async_16(s_t + BM * D * 2 + it * KR * D * 2, dog + it * do_step);
    }
  };
  const T* kg = static_cast<const T*>(p.k) + (int64_t)(si.k_start + n0) * p.k_row_stride + h * p.k_head_stride;
  const T* vg = static_cast<const T*>(p.v) + (int64_t)(si.k_start + n0) * p.v_row_stride + h * p.v_head_stride;
  const int keys_used = max(0, min(BN, si.lk - n0));
  // The work's query tiles: [mb_begin, a_end), then from a_end + gap on (n_mt in all). With contexts every history
  // key block's work starts at the tile of the context rows; the tiles between those rows and the rows the keys reach
  // without them are fully masked and skipped (bwd_work_tiles' gap; walking them doubled the causal time with 64
  // contexts). Skipped tiles only added zeros: dK / dV keep their order of sums.
  // Only in the CTX kernels (calls with contexts; the 8-warp defaults), not in D = 256's
  // one-stage kernel in sm_80 code, the A100's default there (skipping spilled 12 B), nor in sm_86 / sm_89 code
  // (20 B in the 4-warp tile that was opt-in there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
  constexpr bool kSkipGap = CTX && !(D == 256 && STAGES == 1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kSkipGap = false;
#else
  constexpr bool kSkipGap = CTX;
#endif
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, kSkipGap>(si, n0, mb_begin, n_a, gap, n_mt);
  if constexpr (kSplitWalk) {  // chunk c of nc: walk tiles [w0, w1) of the n_mt, as (mb_begin, n_a, gap, n_mt) again
    const int cw = bwd_split_item(p).z;  // (read at the start too: an L1 / L2 hit)
    const int c = cw & 0xffff, nc = cw >> 16;
    const int len = (n_mt + nc - 1) / nc;
    const int w0 = min(c * len, n_mt), w1 = min(w0 + len, n_mt);
    if (w0 >= n_a) {  // past the context gap: one run
      mb_begin += w0 + gap;
      n_a = w1 - w0;
      gap = 0;
    } else {  // from the first run (the gap kept where the chunk crosses it)
      mb_begin += w0;
      if (w1 <= n_a) gap = 0;
      n_a = min(n_a, w1) - w0;
    }
    n_mt = w1 - w0;
  }
  const int mb_end = mb_begin + n_mt;  // (without kSkipGap; kWalkIdx: the walk's end)
  // kWalkIdx (the one-barrier / mbarrier loops with contexts): mb counts the walk's tiles (mb_begin .. mb_end, no
  // gap), so the loops' stage, P / dS parity and copy-ahead logic (tiles mb + 1 / mb + 2) stay as without contexts;
  // only a tile's rows (tile_m) jump over the gap.
  // kRealIdx (D = 256's mbarrier loop with contexts, the split S / dP's): mb is the tile's own index, the next one
  // read from the map (next_tile) and the P / dS buffer picked by the stage (both alternate per step): with the walk's
  // index (kWalkIdx) each tile's first row came from the map at every use (the copy, phase 1, dQ's block), and
  // ptxas kept those live: 76 B spilled (sm_90a), none this way.
  constexpr bool kRealIdx = kSkipGap && kMbar && !kTile128;
  constexpr bool kWalkIdx = kSkipGap && (kOneBar || kMbar) && !kRealIdx;
  static_assert(!kWalkIdx || !kRunPtrs, "the running pointers advance a tile per tile: no gap");
  // The gap's first tile (the end when there is none), its size and one past the last tile, parked in shared memory
  // and re-read on each use inside the loop (written before its first barrier): held in registers they made the
  // kernels spill 4-80 B (255 registers before them).
  // kHalfSkip (kTile128 with kWalkIdx: D = 64's context loop): the last tile of context rows before a gap whose
  // second 64-row half holds no context row sees none of this key block (its rows see the keys neither as context
  // rows nor causally: they lie before the gap's end), so the walk skips that half's phase 1, its rows in the dV / dK
  // k-loops and its dQ warps; the half only added zeros (P = dS = 0). Its walk index in tile_map.w (else -1).
  constexpr bool kHalfSkip = kTile128 && kWalkIdx && (BODY & kPdsFullCtxTile) == 0;
  __shared__ int4 tile_map;
  if (kSkipGap && tid == 0) {
    int half_mb = -1;
    if (kHalfSkip && gap > 0) {
      const int a_last = mb_begin + n_a - 1;  // (the walk's last tile before the gap)
      if (min(si.lq, mk.ctx - mk.offset) <= a_last * BM + HM) half_mb = a_last;
    }
    tile_map = make_int4(mb_begin + n_a, gap, mb_begin + n_mt + gap, half_mb);
  }
  const uint32_t sMap = smem_u32(&tile_map);
  auto half_masked = [&](const int mb) {  // kHalfSkip: tile mb's second half skipped (uniform)
    if constexpr (!kHalfSkip) return false;
    int hm;
    asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(hm) : "r"(sMap + 12));
    return mb == hm;
  };
  // kFullMap: the query positions r0 whose tile is full against this key block (bwd_pds_full_rows), parked in shared
  // memory as tile_map (no registers across the loop).
  __shared__ int4 full_map;
  if (kFullMap && tid == 0) {
    int x, y, z;
    bwd_pds_full_rows<HM, BN>(mk, n0, x, y, z);
    full_map = make_int4(x, y, z, 0);
  }
  const uint32_t sFull = smem_u32(&full_map);
  // kRabSmem: the paired block's (w0, w1, rows a tile, lk) and (mb_begin, n0z), re-read on each use in the loop
  __shared__ int4 zero_map;
  __shared__ int2 zero_at;
  if (kRabSmem && tid == 0 && n_mt > 0) {
    const int n0z = zero_block();
    int w0, w1;
    bwd_pds_zero_walk<BM, BN>(si, n0z, w0, w1);
    const int rows = n0z + BN > si.lk ? p.max_seqlen_k : p.max_seqlen_k - (w1 - w0);  // (the longest list)
    zero_map = make_int4(w0, w1, (rows + n_mt - 1) / n_mt, si.lk);
    zero_at = make_int2(mb_begin, n0z);
  }
  if constexpr (kDrabBulk) {  // (ordered before the first slice by the loop's barrier behind phase 1)
    if (n_mt > 0 && bwd_pds_drab_self_zero(p)) bwd_pds_zero_row_init<T, BN>();
  }
  const uint32_t sZero = smem_u32(&zero_map), sZeroAt = smem_u32(&zero_at);
  auto tile_full_at = [&](const int r0) {
    if constexpr (!kFullMap) {
      return mk.tile_full(r0, r0 + HM, n0, n0 + BN);
    } else {
      int x, y, z;
      asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "r"(sFull));
      asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(z) : "r"(sFull + 8));
      return r0 <= x || (r0 >= y && r0 <= z);
    }
  };
  auto next_tile = [&](const int mb) {  // the tile after mb (kRealIdx too)
    if constexpr (!kSkipGap || kWalkIdx) return mb + 1;
    int a_end, g;
    asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(a_end), "=r"(g) : "r"(sMap));
    return mb + 1 == a_end ? a_end + g : mb + 1;
  };
  auto tiles_end = [&] {
    if constexpr (!kSkipGap || kWalkIdx) return mb_end;
    int e;
    asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(e) : "r"(sMap + 8));
    return e;
  };
  auto tile_m = [&](const int mb) {  // the first query row of tile mb (kWalkIdx: the walk's tile mb)
    if constexpr (!kWalkIdx) return mb * BM;
    int a_end, g;
    asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(a_end), "=r"(g) : "r"(sMap));
    return (mb >= a_end ? mb + g : mb) * BM;
  };
  // tile_m from registers, for the copies before the first barrier: only that barrier makes thread 0's tile_map
  // visible to the other threads (read there, it raced with the store: a stale map of the CTA that ran before on the
  // SM, one key block's Q / dO rows from the wrong tile; docs/hstu_kernel_notes.md, session 37).
  auto tile_m_early = [&](const int mb) {
    if constexpr (!kWalkIdx) return mb * BM;
    return (mb >= mb_begin + n_a ? mb + gap : mb) * BM;
  };

  // kRabSmem: lane l's chunk of the warp's phase-1 rows (SN keys = kRabCpr 16-byte chunks a row): chunk l % kRabCpr
  // of rows l / kRabCpr + kRabStep i, in the P / dS tile's layout.
  constexpr int kRabCpr = SN / 8, kRabStep = 32 / kRabCpr;
  static_assert(!kRabSmem || (32 % kRabCpr == 0 && SM % kRabStep == 0), "whole rows a lane step");
  // The rab of this warp's phase-1 scores of the tile at query row m into P buffer sp (both HM-row passes with
  // kTile128); rows at or past lk and keys past lk zero-filled (a chunk across lk: its bytes before lk copied).
  // (from opaque(tid): formed where used, not hoisted out of the loop into registers)
  auto load_rab_warp = [&](const uint32_t sp, const int m) {
    const int t = static_cast<int>(opaque(static_cast<uint32_t>(tid))), w = t / 32, ln = t % 32;
    const int s_m = (w % C::kSWM) * SM, s_n = (w / C::kSWM) * SN;
    const int row = ln / kRabCpr, j = n0 + s_n + (ln % kRabCpr) * 8;
    const int bytes = max(0, min(8, mk.lk - j)) * static_cast<int>(sizeof(T));
    const char* g = reinterpret_cast<const char*>(static_cast<const T*>(p.rab) + b * p.rab_batch_stride +
                                                  h * p.rab_head_stride + j);
    const int64_t rs = p.rab_row_stride * (int64_t)sizeof(T);
    const int r = m + mk.offset + s_m + row;
    const uint32_t st = sp + LP::swz(s_m + row, s_n + (ln % kRabCpr) * 8);
#pragma unroll
    for (int hm = 0; hm < BM; hm += HM)
#pragma unroll
      for (int i = 0; i < SM / kRabStep; ++i) {
        const int ri = r + hm + i * kRabStep;
        const int n = ri < mk.lk ? bytes : 0;
        cp_async_16_n(st + (hm + i * kRabStep) * BN * 2, n > 0 ? g + ri * rs : p.rab, n);
      }
  };
  // kRabSmem: a per-head drab (q's dtype) from this warp's dS tile at sds (the HM-row pass at position rp), its
  // chunks in 16-byte stores, whole (a chunk across lk too: dS past lk is +-0 there, stored +0, and the chunk lies
  // inside drab's max_seqlen_k columns, a multiple of 8 for this kernel: bwd_sm80_rab_smem).
  auto store_drab_warp = [&](const uint32_t sds, const int rp) {
    const int t = static_cast<int>(opaque(static_cast<uint32_t>(tid))), w = t / 32, ln = t % 32;
    const int s_m = (w % C::kSWM) * SM, s_n = (w / C::kSWM) * SN;
    const int row = ln / kRabCpr, j = n0 + s_n + (ln % kRabCpr) * 8;
    if (j >= mk.lk) return;
    T* d = static_cast<T*>(p.drab) + b * p.drab_batch_stride + h * p.drab_head_stride + j;
    const uint32_t st = sds + LP::swz(s_m + row, s_n + (ln % kRabCpr) * 8);
#pragma unroll
    for (int i = 0; i < SM / kRabStep; ++i) {
      const int r = rp + s_m + row + i * kRabStep;
      if (r >= mk.lk) break;
      uint4 x = lds_b128(st + i * kRabStep * BN * 2);
      x.x = drab_value2(x.x);
      x.y = drab_value2(x.y);
      x.z = drab_value2(x.z);
      x.w = drab_value2(x.w);
      *reinterpret_cast<uint4*>(d + (int64_t)r * p.drab_row_stride) = x;
    }
  };

  float acc_dk[KMT][KNT][4];
  float acc_dv[KMT][KNT][4];
#pragma unroll
  for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
    for (int i = 0; i < KNT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc_dk[mt][i][e] = 0.f;
        acc_dv[mt][i][e] = 0.f;
      }

  const float half_alpha = 0.5f * p.alpha;
  const float half_ds_scale = 0.5f * p.inv_scaling * p.alpha;
  const int64_t dq_row_stride = (int64_t)p.heads * D;
  // dq_accum == nullptr: deterministic mode, dQ is computed by hstu_bwd_dq_kernel instead (no atomics here).
  const bool with_dq = p.dq_accum != nullptr;
  // The thread's place in block blk of the fragment-ordered dQ tile at query row m (phase_dq's layout).
  auto dq_frag_at = [&](const int m, const int blk) {
    return p.dq_accum + (h * dq_frag_head_rows(p) + si.q_start + kDqFragPad * b + m) * D + blk * kFragBlock + lane * 4;
  };
  // kRunPtrs: the warp's place in the sequence's first query tile, formed once per key block (the tile's m0 D added
  // there).
  float* const dq_frag0 = kRunPtrs && with_dq ? dq_frag_at(0, warp) : nullptr;
  // kDqClaim: this warp's claim word of the tile at query row m (kPdsDqClaim above), and its block's publication:
  // the stores before the word (the fence), the word 2
  auto claim_word = [&](const int m) {
    return p.dq_zero_flags + ((int64_t)h * dq_frag_head_rows(p) + si.q_start + kDqFragPad * b + m + warp);
  };
  auto claim_publish = [&](const int m) {
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
    __syncwarp();
    if (lane == 0) asm volatile("st.relaxed.gpu.global.b32 [%0], 2;\n" ::"l"(claim_word(m)) : "memory");
  };

  if (n_mt > 0) {
    load_tile_async<BN, D, NT>(sK, kg, p.k_row_stride, keys_used, tid);
    load_tile_async<BN, D, NT>(sV, vg, p.v_row_stride, keys_used, tid);
    {
      const int m0 = tile_m_early(mb_begin);
      load_q_do(sQ0, m0, tid);
      if constexpr (kRabSmem) load_rab_warp(sP0 + static_cast<uint32_t>(mb_begin & 1) * (2 * BM * BN * 2), m0);
    }
    cp_async_commit();
    if constexpr (kOneBar) {  // the second tile's copies too; the first tile (with K, V) waited for
      if (mb_begin + 1 < mb_end) load_q_do(sQ0 + kStageBytes, tile_m_early(mb_begin + 1), tid);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
    }
    if constexpr (kMbar) {  // (the copies above in flight while the barriers are set up)
      if (tid == 0) {
        pds_mbar_init(sBar, NT);
        pds_mbar_init(sBar + 8, NT);
      }
      __syncthreads();
      pds_mbar_arrive_copies(sBar);  // K, V and the first tile on stage 0's barrier
    }

    int stage = 0;
    uint32_t parity = 0u;  // kMbar: bit s the phase parity stage s's barrier completes next
    int mb = mb_begin;
    if constexpr (kRunPtrs) {
      q_nx += (int64_t)(mb_begin + 2) * (BM * p.q_row_stride * (int64_t)sizeof(T));
      do_nx += (int64_t)(mb_begin + 2) * (BM * p.do_row_stride * (int64_t)sizeof(T));
    }
    do {
      const int m0 = tile_m(mb);
      const int r0 = m0 + mk.offset;
      if constexpr (kMbar) {
        pds_mbar_wait(sBar + stage * 8, (parity >> stage) & 1u);  // Q, dO of tile mb landed
        parity ^= 1u << stage;
      } else if constexpr (!kOneBar) {
        cp_async_wait<0>();
        __syncthreads();  // Q, dO of tile mb landed; every warp is done with the previous tile (P, dS, other stage)
      }
      if (STAGES == 2 && !kMbar && next_tile(mb) < tiles_end()) {
        const int mn = next_tile(mb) * BM;
        const uint32_t ot = opaque(tid);
        const uint32_t sQn = sQ0 + (stage ^ 1) * kStageBytes;
        if constexpr (kLeanLoad) {
          load_q_do_lean(sQn, mn, ot, std::integral_constant<int, 3>());
        } else {
          load_q_do(sQn, mn, ot);
        }
        cp_async_commit();
      }
      const uint32_t sQ = sQ0 + stage * kStageBytes;
      const uint32_t sdO = sQ + BM * D * 2;
      const uint32_t pds_parity = static_cast<uint32_t>(kRealIdx ? stage : mb & 1);  // (kTwoPdS' buffer)
      const uint32_t sP = sP0 + (kTwoPdS ? pds_parity * (2 * BM * BN * 2) : 0u);
      const uint32_t sdS = sP + BM * BN * 2;

      // ---- Phase 1: S = Q K^T, then dP = dO V^T, over this warp's SM queries x SN keys of the HM-row pass at
      // position r0 (its Q, dO, P, dS at sQ, sdO, sP, sdS). Two passes over D, not one: the rab / mask / SiLU work
      // between them runs with only S live next to dK / dV (a fused pass spilled).
      // Element (mt, nt, e): query row m0 + s_m + mt*16 + lane/4 + (e/2)*8 (position r = row + offset), key
      // j = n0 + s_n + nt*8 + 2*(lane%4) + (e&1).
      auto phase_s = [&](const int r0, const uint32_t sQ, const uint32_t sdO, const uint32_t sP, const uint32_t sdS) {
        float acc[SMT][SNT][4];  // S, then SiLU'(alpha S) * alpha / scaling (masked), then dP, then dS
        const int ln = phase_lane();
        // (each phase's warp coordinates formed in the phase: fewer registers live across the loop)
        const int s_m = (warp % C::kSWM) * SM, s_n = (warp / C::kSWM) * SN;
        const uint32_t tA = L::swz(s_m + ln % 16, (ln / 16) * 8);                      // Q, dO as A
        const uint32_t tB = L::swz(s_n + ln % 8 + (ln / 16) * 8, ((ln / 8) % 2) * 8);  // K, V as B
        // c[mt][i] += A B^T over D for the n8 key tiles NP0 * 2 + i of the warp (c: SMT x (2 NPN) n8 tiles).
        // full: 1 the plain k-loop fully unrolled (one basic block with the code around it, which ptxas can then
        // interleave with the MMAs; a loop's back edge also waits out the last MMA's latency), N > 1 unrolled by N.
        auto gemm = [&](auto& c, const uint32_t sa, const uint32_t sb, auto np0, auto full) {
          constexpr int NPN = std::extent<std::remove_reference_t<decltype(c)>, 1>::value / 2;
          constexpr int NP0 = decltype(np0)::value;
          constexpr int kFull = decltype(full)::value;
          constexpr int kUnroll = kFull > 1 ? kFull : kFull == 1 ? D / 16 : kUnrollS;
#pragma unroll
          for (int mt = 0; mt < SMT; ++mt)
#pragma unroll
            for (int i = 0; i < 2 * NPN; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) c[mt][i][e] = 0.f;
#pragma unroll kUnroll
          for (int ks = 0; ks < D / 16; ++ks) {
            uint32_t a[SMT][4];
#pragma unroll
            for (int mt = 0; mt < SMT; ++mt) ldsm_x4(a[mt], sa + L::xadd(tA, mt * 16, ks * 16));
#pragma unroll
            for (int np = 0; np < NPN; ++np) {
              uint32_t bb[4];
              ldsm_x4(bb, sb + L::xadd(tB, (NP0 + np) * 16, ks * 16));
#pragma unroll
              for (int mt = 0; mt < SMT; ++mt) {
                mma_16816<T>(c[mt][2 * np], a[mt], bb[0], bb[1]);
                mma_16816<T>(c[mt][2 * np + 1], a[mt], bb[2], bb[3]);
              }
            }
          }
        };
        // kKSplit: the pair's 32 x 32 partial sums over this warp's half of D (c[0] its own 16 rows, c[1] the
        // partner's: rows s_m ^ 16), each k-step 2 A + SNT / 2 B ldmatrix; the halves start 128 columns apart
        // (256 bytes: above the swizzle's chunk bits).
        const uint32_t kh = static_cast<uint32_t>(warp & 1) * (D / 2) * 2;
        const uint32_t dA1 = static_cast<uint32_t>((s_m ^ 16) - s_m) * (D * 2);  // (partner rows: +-16 rows)
        auto gemm_split = [&](float(&c)[2][SNT][4], const uint32_t sa, const uint32_t sb) {
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int i = 0; i < SNT; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) c[mt][i][e] = 0.f;
          const uint32_t a0 = sa + kh, a1 = a0 + dA1, b0 = sb + kh;
#pragma unroll
          for (int ks = 0; ks < D / 32; ++ks) {
            uint32_t a[2][4];
            ldsm_x4(a[0], a0 + L::xadd(tA, 0, ks * 16));
            ldsm_x4(a[1], a1 + L::xadd(tA, 0, ks * 16));
#pragma unroll
            for (int np = 0; np < SNT / 2; ++np) {
              uint32_t bb[4];
              ldsm_x4(bb, b0 + L::xadd(tB, np * 16, ks * 16));
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                mma_16816<T>(c[mt][2 * np], a[mt], bb[0], bb[1]);
                mma_16816<T>(c[mt][2 * np + 1], a[mt], bb[2], bb[3]);
              }
            }
          }
        };
        // kKSplit: slot 0 of this lane in the exchange area of the warp whose rows start at s_mo (the bytes of
        // that warp's P (nt 0, 1) and dS (nt 2, 3): 16 rows x 32 keys each); a quarter warp's 8 chunks lie in rows
        // r and r + 4 (disjoint swizzled chunk sets: no bank conflicts). Slot nt lies xoff(nt) bytes after slot 0:
        // nt / 2 the dS buffer's offset, nt % 2 eight rows (immediates: the swizzle takes row % 8).
        auto xslot = [&](const int s_mo) {
          const int rs = (ln >> 3) + ((ln >> 2) & 1) * 4;
          return sP + LP::swz(s_mo + rs, s_n + (ln % 4) * 8);
        };
        auto xoff = [](const int nt) {
          return static_cast<uint32_t>((nt / 2) * (BM * BN * 2) + (nt % 2) * (8 * BN * 2));
        };
        // c[1] to the area at s_w, the pair barrier, then c[0] += the partner's c[1] from the area at s_r.
        auto exchange = [&](float(&c)[2][SNT][4], const int s_w, const int s_r) {
          static_assert(!kKSplit || (SNT == 4 && SMT == 1), "16 x 32 warp tiles: four 16-byte slots a lane");
          const uint32_t xw = xslot(s_w), xr = xslot(s_r);
#pragma unroll
          for (int nt = 0; nt < SNT; ++nt)
            asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(xw + xoff(nt)),
                         "f"(c[1][nt][0]),
                         "f"(c[1][nt][1]), "f"(c[1][nt][2]), "f"(c[1][nt][3])
                         : "memory");
          asm volatile("bar.sync %0, 64;\n" ::"r"(1 + warp / 2) : "memory");
#pragma unroll
          for (int nt = 0; nt < SNT; ++nt) {
            float x[4];
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
                         : "r"(xr + xoff(nt))
                         : "memory");
#pragma unroll
            for (int e = 0; e < 4; ++e) c[0][nt][e] += x[e];
          }
        };
        // kRabSmem: the rab of the warp's scores from its P bytes (rab_w: row half hf of n8 tile (mt, nt)), read
        // before anything is written there (kKSplit: the S exchange), then added to S as main's path adds it.
        uint32_t rab_w[SMT][SNT][2];
        auto rab_load = [&] {
          const uint32_t tR = LP::swz(s_m + ln / 4, s_n + (ln % 4) * 2);
          for_each_pair<SMT, SNT>([&](int mt, int nt, int hf) {
            rab_w[mt][nt][hf] = lds_b32(sP + (tR ^ LP::swz(mt * 16 + hf * 8, nt * 8)));
          });
        };
        // c[mt] += the rab words (c: SMT x SNT n8 tiles)
        auto rab_add = [&](float(&c)[SMT][SNT][4]) {
          for_each_pair<SMT, SNT>([&](int mt, int nt, int hf) {
            const float2 x = unpack2<T>(rab_w[mt][nt][hf]);
            c[mt][nt][2 * hf] += x.x;
            c[mt][nt][2 * hf + 1] += x.y;
          });
        };
        if constexpr (kKSplit) {
          float c[2][SNT][4];
          gemm_split(c, sQ, sK);
          if constexpr (kRabSmem) rab_load();  // (before the exchange writes this warp's rows' bytes)
          exchange(c, s_m, s_m ^ 16);  // (its own area; the partner's S partials from the partner's)
#pragma unroll
          for (int nt = 0; nt < SNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[0][nt][e] = c[0][nt][e];
        } else {
          gemm(acc, sQ, sK, std::integral_constant<int, 0>(), std::integral_constant<int, kLoopFree ? 1 : 0>());
        }

        const int rbase = r0 + s_m + lane / 4, jbase = n0 + s_n + (lane % 4) * 2;
        if constexpr (kRabSmem) {
          if constexpr (!kKSplit) {
            if constexpr (kOneBar) {  // (this tile's rab group; the next tile's Q / dO copies may stay pending)
              cp_async_wait<1>();
              syncwarp_mem();
            }
            rab_load();
          }
          rab_add(acc);
        } else if (p.rab != nullptr) {  // (pointers formed where used: fewer registers live across the loop)
          const T* rab = static_cast<const T*>(p.rab) + b * p.rab_batch_stride + h * p.rab_head_stride;
          for_each_score<SMT, SNT>(rbase, jbase, [&](int mt, int nt, int e, int r, int j) {
            if (r < mk.lk && j < mk.lk) acc[mt][nt][e] += to_float(rab[(int64_t)r * p.rab_row_stride + j]);
          });
        }
        // keep: bit (mt * SNT + nt) * 4 + e set where the element is visible (all set for a fully visible tile).
        // (64 bits where a warp holds 64 score elements: D = 64's 64 x 32 warp tile)
        using Keep = std::conditional_t<(SMT * SNT * 4 > 32), uint64_t, uint32_t>;
        static_assert(SMT * SNT * 4 <= 64, "one mask bit per accumulator element");
        Keep keep = ~Keep{0};
        if (!tile_full_at(r0)) {
          if constexpr (!kRowMask) {
            keep = 0u;
            for_each_score<SMT, SNT>(rbase, jbase, [&](int mt, int nt, int e, int r, int j) {
              if (mk.allowed(r, j)) keep |= Keep{1} << ((mt * SNT + nt) * 4 + e);
            });
          } else {
            if constexpr (kMaskReread) {
              const SeqMask mk2 = seq_info(p, static_cast<int>(opaque(static_cast<uint32_t>(b)))).mask;
              keep = bwd_pds_keep_bits<SMT, SNT, Keep>(mk2, rbase, jbase);
            } else {
              keep = bwd_pds_keep_bits<SMT, SNT, Keep>(mk, rbase, jbase);
            }
          }
        }
        // h = alpha s / 2, t = tanh(h): P = SiLU(alpha s) = h (1 + t), SiLU' = sigmoid (1 + h (1 - t)), and the
        // dS factor ds_scale sigmoid (1 + h (1 - t)) = m (1 + h - h t) with m = ds_scale (1 + t) / 2 (four FMAs
        // after the tanh); P goes to shared memory (rows lane/4 and lane/4 + 8, two keys each), the dS factor stays
        // in acc (kFmaFactor; else ds_scale sigmoid (1 + h (1 - t)) as written: with the FMA form the A100's D = 256
        // kernel, sm_80 code, spilled 12 B, sm_86 / sm_89's 4-warp D = 128 one 4 B). silu_pair: the two elements of row half hf of n8 tile (mt, nt), P
        // packed; store_p stores them.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
        constexpr bool kFmaFactor = D != 256;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
        constexpr bool kFmaFactor = false;  // (sm_86 / sm_89: the 4-warp D = 128 tile spilled 4 B)
#else
        constexpr bool kFmaFactor = true;
#endif
        const uint32_t tP = LP::swz(s_m + ln / 4, s_n + (ln % 4) * 2);
        // Element (mt, nt, hf)'s P / dS address in the tile (one register per store).
        auto p_off = [&](const int mt, const int nt, const int hf) { return tP ^ LP::swz(mt * 16 + hf * 8, nt * 8); };
        auto silu_pair = [&](const int mt, const int nt, const int hf, auto masked) {
          float pv[2];
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int e = hf * 2 + e2;
            const bool vis = !decltype(masked)::value || ((keep >> ((mt * SNT + nt) * 4 + e)) & Keep{1});
            const float hh = acc[mt][nt][e] * half_alpha;
            const float t = tanh_approx(hh);
            pv[e2] = vis ? fmaf(hh, t, hh) : 0.f;
            if constexpr (kFmaFactor) {
              const float m = fmaf(half_ds_scale, t, half_ds_scale);
              acc[mt][nt][e] = vis ? fmaf(m, fmaf(-hh, t, hh), m) : 0.f;
            } else {
              acc[mt][nt][e] = vis ? (2.f * half_ds_scale) * fmaf(0.5f, t, 0.5f) * fmaf(hh, 1.f - t, 1.f) : 0.f;
            }
          }
          return pack2<T>(pv[0], pv[1]);
        };
        auto store_p = [&](const int mt, const int nt, const int hf, const uint32_t pk) {
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sP + p_off(mt, nt, hf)), "r"(pk));
        };
        // kStsm (kPdsStsmPdS): lanes 8 i .. 8 i + 7 address the rows of matrix i = (row half i % 2, n8 tile nt + i /
        // 2) of a pair of n8 tiles, whose registers are the packs in for_each_pair's order; the pair's offset is tS's
        // XOR a constant (row 16 mt: an add; column 8 nt).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        constexpr bool kStsm = (BODY & kPdsStsmPdS) != 0;
#else
        constexpr bool kStsm = false;
#endif
        static_assert(!kStsm || (kTwoPdS && SNT % 2 == 0 && D != 256), "stmatrix P / dS: the one-barrier loops");
        const uint32_t tS = LP::swz(s_m + ((ln / 8) % 2) * 8 + ln % 8, s_n + (ln / 16) * 8);
        auto stsm4 = [&](const uint32_t base, const int mt, const int nt, const uint32_t (&r)[4]) {
          asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                           base + (tS ^ LP::swz(mt * 16, nt * 8))),
                       "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
        };
        // kStsm: f(mt, nt, hf) -> the pack of row half hf of n8 tile (mt, nt), stored at base by stmatrix.
        auto stsm_tiles = [&](const uint32_t base, auto&& f) {
#pragma unroll
          for (int mt = 0; mt < SMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < SNT; nt += 2) {
              const uint32_t r[4] = {f(mt, nt, 0), f(mt, nt, 1), f(mt, nt + 1, 0), f(mt, nt + 1, 1)};
              stsm4(base, mt, nt, r);
            }
        };

        // dS = dP * factor; dP in two halves of the keys where the warp has two query m16 tiles (D = 128: 16 fewer
        // accumulators live next to the factor and dK / dV; the dO fragments are loaded twice).
        // kOverlapDp (issue 39's ILP step): each part's SiLU / SiLU' runs in the basic block of its dP GEMM (the
        // k-loop fully unrolled, P stored after it), so ptxas fills the 5 idle issue slots behind each mma.sync
        // (stall 6 on sm_90a) with the pointwise work instead of running it alone between the GEMMs; the same
        // arithmetic and MMA chains: bitwise the same gradients. Else the SiLU pass first, then the dP loops.
        // Only D = 256 in sm_90a code: at D = 128 (255 registers already) the unrolled dP loop spilled 36-64 B, in
        // sm_80 code D = 256 spilled 4-12 B.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
        constexpr bool kOverlapDp = false;
#else
        constexpr bool kOverlapDp = D == 256;
#endif
        constexpr int kDpParts = SMT > 1 && !kLoopFree ? 2 : 1;
        constexpr int kNpPart = SN / 16 / kDpParts;
        static_assert(kNpPart >= 1, "bad dP split");
        // kFullTilePass: on a fully visible tile the SiLU pass without the mask's bit tests and selects (3
        // instructions fewer per element), where that compiled without spills (sm_90a: D = 128's two-stage kernels;
        // sm_80: D = 128's; elsewhere 4-32 B).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
        constexpr bool kFullTilePass = D == 128;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
        constexpr bool kFullTilePass = false;
#else
        constexpr bool kFullTilePass = (D == 64 || D == 128) && STAGES >= 2;
#endif
        if constexpr (!kOverlapDp) {
          auto silu_pass = [&](auto masked) {
            if constexpr (kStsm) {
              stsm_tiles(sP, [&](int mt, int nt, int hf) { return silu_pair(mt, nt, hf, masked); });
            } else {
              for_each_pair<SMT, SNT>(
                  [&](int mt, int nt, int hf) { store_p(mt, nt, hf, silu_pair(mt, nt, hf, masked)); });
            }
          };
          if constexpr (kFullTilePass) {
            // (kStsm: stmatrix is a warp-wide store, so the warp takes the unmasked pass only if every lane's
            // elements are visible; keep is per lane)
            if (kStsm ? __all_sync(0xffffffffu, keep == ~Keep{0}) : keep == ~Keep{0}) {
              silu_pass(std::false_type());
            } else {
              silu_pass(std::true_type());
            }
          } else {
            silu_pass(std::true_type());
          }
        }
        auto dp_part = [&](auto part) {
          constexpr int P0 = decltype(part)::value * kNpPart;
          uint32_t pp[SMT][2 * kNpPart][2];  // P of the part's n8 tiles 2 P0 + i
          // kKSplit batch first: the SiLU pass after the dP exchange (its 8 packs not live across the dP GEMM's 32
          // partials); heads first in the GEMM's block as kOverlapDp. Each the form that compiled without spills
          // (sm_90a, nvcc 13.0: 255 registers; the other form 44-64 B of spills in the loop); with kRabSmem the
          // late pass in both orders (heads first in the GEMM's block: 72 B).
          constexpr bool kLateSilu = kKSplit && (!(kHeadsFirst && kTailBlocksFirst) || kRabSmem);
          if constexpr (kOverlapDp && !kLateSilu) {
            for_each_pair<SMT, 2 * kNpPart>(
                [&](int mt, int i, int hf) { pp[mt][i][hf] = silu_pair(mt, 2 * P0 + i, hf, std::true_type()); });
          }
          float acc_dp[SMT][2 * kNpPart][4];
          if constexpr (kKSplit) {
            static_assert(kOverlapDp && kDpParts == 1, "kKSplit: P stored after the dP exchange");
            float c[2][SNT][4];
            gemm_split(c, sdO, sV);
            // (into the partner's area, whose S partials this warp has read; then its own, where P / dS go next)
            exchange(c, s_m ^ 16, s_m);
            __syncwarp();  // (every lane's reads of the area before its P / dS stores)
#pragma unroll
            for (int i = 0; i < SNT; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc_dp[0][i][e] = c[0][i][e];
          } else {
            gemm(acc_dp, sdO, sV, std::integral_constant<int, P0>(),
                 std::integral_constant<int, kLoopFree && !kOverlapDp ? kDpUnroll : kOverlapDp>());
          }
          if constexpr (kLateSilu) {
            for_each_pair<SMT, SNT>(
                [&](int mt, int nt, int hf) { store_p(mt, nt, hf, silu_pair(mt, nt, hf, std::true_type())); });
          } else if constexpr (kOverlapDp) {
            for_each_pair<SMT, 2 * kNpPart>(
                [&](int mt, int i, int hf) { store_p(mt, 2 * P0 + i, hf, pp[mt][i][hf]); });
          }
#pragma unroll
          for (int mt = 0; mt < SMT; ++mt)
#pragma unroll
            for (int i = 0; i < 2 * kNpPart; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][2 * P0 + i][e] *= acc_dp[mt][i][e];
        };
        dp_part(std::integral_constant<int, 0>());
        if constexpr (kDpParts > 1) dp_part(std::integral_constant<int, 1>());
        // drab = dS: deterministic shared rab: this head's fp32 slice (summed over heads afterwards); shared rab:
        // fp32 atomics, the sum over heads; per-head rab: drab itself. One loop per kind (one pointer live each).
        if (p.drab == nullptr) {
        } else if (p.drab_heads != nullptr) {
          float* d = p.drab_heads + b * p.drab_heads_batch_stride + h * p.drab_heads_head_stride;
          for_each_score<SMT, SNT>(rbase, jbase, [&](int mt, int nt, int e, int r, int j) {
            if (r < mk.lk && j < mk.lk) d[(int64_t)r * p.drab_row_stride + j] = drab_value(acc[mt][nt][e]);
          });
        } else if (p.drab_accum != nullptr) {
          float* d = p.drab_accum + b * p.drab_batch_stride;
          for_each_score<SMT, SNT>(rbase, jbase, [&](int mt, int nt, int e, int r, int j) {
            if (r < mk.lk && j < mk.lk && acc[mt][nt][e] != 0.f)
              atomicAdd(d + (int64_t)r * p.drab_row_stride + j, acc[mt][nt][e]);
          });
        } else if constexpr (!kRabSmem) {  // (kRabSmem: from the dS tile, below)
          T* d = static_cast<T*>(p.drab) + b * p.drab_batch_stride + h * p.drab_head_stride;
          for_each_score<SMT, SNT>(rbase, jbase, [&](int mt, int nt, int e, int r, int j) {
            if (r < mk.lk && j < mk.lk) d[(int64_t)r * p.drab_row_stride + j] = from_float<T>(drab_value(acc[mt][nt][e]));
          });
        }
        if constexpr (kStsm) {
          stsm_tiles(sdS, [&](int mt, int nt, int hf) {
            return pack2<T>(acc[mt][nt][2 * hf], acc[mt][nt][2 * hf + 1]);
          });
        } else {
          for_each_pair<SMT, SNT>([&](int mt, int nt, int hf) {
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + p_off(mt, nt, hf)),
                         "r"(pack2<T>(acc[mt][nt][2 * hf], acc[mt][nt][2 * hf + 1])));
          });
        }
        if constexpr (kRabSmem) {  // a per-head drab from the warp's dS tile
          if (p.drab != nullptr && p.drab_heads == nullptr && p.drab_accum == nullptr) {
            syncwarp_mem();
            store_drab_warp(sdS, r0);
          }
        }
      };
      if constexpr (kTile128) {
#pragma unroll 1
        for (int hm = 0; hm < BM; hm += HM) {
          if (hm > 0 && half_masked(mb)) break;
          phase_s(r0 + hm, sQ + hm * D * 2, sdO + hm * D * 2, sP + hm * BN * 2, sdS + hm * BN * 2);
        }
      } else {
        phase_s(r0, sQ, sdO, sP, sdS);
      }
      if constexpr (kOneBar) {
        cp_async_wait<0>();
        __syncthreads();  // P, dS complete; Q, dO of tile mb + 1 landed; every warp is done with tile mb - 1
        if constexpr (kRabSmem) {  // tile mb + 1's rab into its P buffer (free now): a group of its own
          if (mb + 1 < mb_end) {
            load_rab_warp(sP0 + static_cast<uint32_t>((mb + 1) & 1) * (2 * BM * BN * 2), tile_m(mb + 1));
          }
          cp_async_commit();
        }
        if (mb + 2 < mb_end) {
          const uint32_t ot = opaque(tid);
          load_q_do_lean(sQ0 + (stage == 0 ? 2 : stage - 1) * kStageBytes, tile_m(mb + 2), ot,
                         std::integral_constant<int, kSplitCopies ? 1 : 3>());
          cp_async_commit();
        } else if constexpr (kRabSmem) {
          cp_async_commit();  // (an empty group: phase 1's wait_group 1 then leaves only the Q / dO copies pending)
        }
      } else if constexpr (kMbar) {
        __syncthreads();  // P, dS complete; every warp is done with tile mb - 1 (the other stage, P / dS buffer)
        if (kRealIdx ? next_tile(mb) < tiles_end() : mb + 1 < mb_end) {
          const uint32_t ot = opaque(tid);
          const uint32_t sQn = sQ0 + (stage ^ 1) * kStageBytes;
          const int mn = kRealIdx ? next_tile(mb) * BM : tile_m(mb + 1);
          if constexpr (kLeanLoad) {
            load_q_do_lean(sQn, mn, ot, std::integral_constant<int, 3>());
          } else {
            load_q_do(sQn, mn, ot);
          }
          // (tile mb + 1's rab into its P buffer, free now: on the same stage barrier)
          if constexpr (kRabSmem) {
            load_rab_warp(sP0 + static_cast<uint32_t>((mb + 1) & 1) * (2 * BM * BN * 2), tile_m(mb + 1));
          }
          pds_mbar_arrive_copies(sBar + (stage ^ 1) * 8);
        }
      } else {
        __syncthreads();  // P, dS complete
      }

      if constexpr (kRabSmem) {  // tile mb's slice of the paired block's zeros (zero_map), draining under phases 2 / 3
        if (bwd_pds_drab_self_zero(p)) {
          int w0, w1, zs, lkz, zmb, n0z;
          asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(w0), "=r"(w1), "=r"(zs), "=r"(lkz)
                       : "r"(sZero));
          asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(zmb), "=r"(n0z) : "r"(sZeroAt));
          const int u_a = (mb - zmb) * zs;
          if constexpr (kDrabBulk) {
            bwd_pds_zero_drab_bulk<T, BN, NT>(p, b, h, n0z, lkz, w0, w1, u_a, u_a + zs,
                                              smem_u32(bwd_pds_zero_row<T, BN>()));
          } else {
            bwd_pds_zero_drab<T, BN, NT, kZeroUnroll>(p, b, h, n0z, lkz, w0, w1, u_a, u_a + zs);
          }
        }
      }

      // ---- Phase 2: dV += P^T dO, dK += dS^T Q over this warp's KR keys x KC columns.
      // parts: 3 dV and dK in one k-loop (the plain body); 1 dV only, 2 dK only (the loop-free bodies).
      auto phase_kv = [&](auto parts) {
        constexpr int kParts = decltype(parts)::value;
        const int ln = phase_lane();
        const int k_n = (warp % C::kKWN) * KR, k_d = (warp / C::kKWN) * KC;
        const uint32_t tPt = LP::swz(ln % 8 + (ln / 16) * 8, k_n + ((ln / 8) % 2) * 8);  // P^T, dS^T as A
        const uint32_t tBt = L::swz(ln % 8 + ((ln / 8) % 2) * 8, k_d + (ln / 16) * 8);   // dO, Q as B
        if constexpr (kParts != 3 && kHalfSkip) {
          // (the rows in two k-loops of HM rows, the second one not where the half is skipped: the same sums in the
          // same order)
          const uint32_t sA = kParts == 1 ? sP : sdS, sB = kParts == 1 ? sdO : sQ;
          auto half_rows = [&](auto r0c) {
            constexpr int r = decltype(r0c)::value;
            plain_k_loop<T, HM / 16, HM / 16>(
                kParts == 1 ? acc_dv : acc_dk,
                [&](uint32_t(&f)[4], const int ks, const int mt) {
                  ldsm_x4_t(f, sA + LP::xadd(tPt, r + ks * 16, mt * 16));
                },
                [&](uint32_t(&f)[4], const int ks, const int dp) {
                  ldsm_x4_t(f, sB + L::xadd(tBt, r + ks * 16, dp * 16));
                });
          };
          half_rows(std::integral_constant<int, 0>());
          if (!half_masked(mb)) half_rows(std::integral_constant<int, HM>());
        } else if constexpr (kParts != 3) {
          const uint32_t sA = kParts == 1 ? sP : sdS, sB = kParts == 1 ? sdO : sQ;
          plain_k_loop<T, BM / 16, kLoopFree ? BM / 16 : 1>(
              kParts == 1 ? acc_dv : acc_dk,
              [&](uint32_t(&f)[4], const int ks, const int mt) { ldsm_x4_t(f, sA + LP::xadd(tPt, ks * 16, mt * 16)); },
              [&](uint32_t(&f)[4], const int ks, const int dp) { ldsm_x4_t(f, sB + L::xadd(tBt, ks * 16, dp * 16)); });
        } else {
#pragma unroll 1
          for (int ks = 0; ks < BM / 16; ++ks) {
            uint32_t ap[KMT][4], ad[KMT][4];
#pragma unroll
            for (int mt = 0; mt < KMT; ++mt) {
              ldsm_x4_t(ap[mt], sP + LP::xadd(tPt, ks * 16, mt * 16));
              ldsm_x4_t(ad[mt], sdS + LP::xadd(tPt, ks * 16, mt * 16));
            }
#pragma unroll
            for (int dp = 0; dp < KC / 16; ++dp) {
              uint32_t bo[4], bq[4];
              ldsm_x4_t(bo, sdO + L::xadd(tBt, ks * 16, dp * 16));
              ldsm_x4_t(bq, sQ + L::xadd(tBt, ks * 16, dp * 16));
#pragma unroll
              for (int mt = 0; mt < KMT; ++mt) {
                mma_16816<T>(acc_dv[mt][2 * dp], ap[mt], bo[0], bo[1]);
                mma_16816<T>(acc_dv[mt][2 * dp + 1], ap[mt], bo[2], bo[3]);
                mma_16816<T>(acc_dk[mt][2 * dp], ad[mt], bq[0], bq[1]);
                mma_16816<T>(acc_dk[mt][2 * dp + 1], ad[mt], bq[2], bq[3]);
              }
            }
          }
        }
      };
      // ---- Phase 3: dQ[m0 + q_m .., q_d ..] += dS K, QPW columns per pass, added to the fp32 workspace.
      auto phase_dq = [&] {
        if (!with_dq) return;
        float* dq_acc = p.dq_accum + (int64_t)si.q_start * dq_row_stride + h * D;
        const int ln = phase_lane();
        const int q_m = (warp % QWM) * QR, q_d = (warp / QWM) * QC;
        if (kHalfSkip && q_m >= HM && half_masked(mb)) return;  // (the skipped half's rows: no dQ)
        const uint32_t tdA = LP::swz(q_m + ln % 16, (ln / 16) * 8);                     // dS as A
        const uint32_t tK = L::swz(ln % 8 + ((ln / 8) % 2) * 8, q_d + (ln / 16) * 8);  // K as B
        // kDqClaim: the warp's claim of the tile's block (the state before it in `claimed`: 0 this warp stores the
        // block, 1 another one is storing it, 2 stored), the CAS's latency under the k-loop. Relaxed, so that
        // nothing after it waits for it (an acquire would hold the k-loop's loads): the adds that follow a 2 are
        // L2 atomics issued after the CAS returned, and the claimer's stores reached L2 before its word (its fence).
        [[maybe_unused]] uint32_t claimed = 2u;
        if constexpr (kDqFrag && kDqClaim) {
          if (lane == 0) {
            asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], 0, 1;\n"
                         : "=r"(claimed)
                         : "l"(claim_word(m0)));
          }
        }
#pragma unroll
        for (int piece = 0; piece < QC / QPW; ++piece) {
          float acc_q[QMT][QPW / 8][4];
#pragma unroll
          for (int mt = 0; mt < QMT; ++mt)
#pragma unroll
            for (int i = 0; i < QPW / 8; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc_q[mt][i][e] = 0.f;
          auto dq_a = [&](uint32_t(&f)[4], const int ks, const int mt) {
            ldsm_x4(f, sdS + LP::xadd(tdA, mt * 16, ks * 16));
          };
          auto dq_b = [&](uint32_t(&f)[4], const int ks, const int dp) {
            ldsm_x4_t(f, sK + L::xadd(tK, ks * 16, piece * QPW + dp * 16));
          };
          plain_k_loop<T, BN / 16, kDqUnroll>(acc_q, dq_a, dq_b);
          if constexpr (kTile128) {
            // The warp's rows lie in the HM-row tile q_m / HM of the layout, its 16-column blocks (rows (q_m % HM) /
            // 32, columns q_d / 16 + dt / 2) two apart; the second tile adds nothing past lq (nor past the
            // sequence's padded rows).
            if (q_m >= HM && m0 + HM >= si.lq) continue;
            float* fp = dq_frag_at(m0 + (q_m / HM) * HM, (q_m % HM) / 32 + 2 * (q_d / 16));
            static_assert(kFragBlock == 32 * 16 && QMT == 2 && QPW == 32, "D = 64's 32 x 16 layout blocks");
#pragma unroll
            for (int mt = 0; mt < QMT; ++mt)
#pragma unroll
              for (int dt = 0; dt < QPW / 8; ++dt)
                red_add_f4(fp + (dt / 2) * 2 * kFragBlock + (mt * 2 + dt % 2) * 128, acc_q[mt][dt]);
            continue;
          }
          if constexpr (kDqFrag) {
            // The tile's fragment-ordered block: rows past lq add their zeros to their own slots (no predicate).
            float* fp = kRunPtrs ? dq_frag0 + (int64_t)m0 * D : dq_frag_at(m0, warp);
            if constexpr (kDqClaim) {
              if (piece == 0) {
                // (the state tied to the k-loop's last accumulator, min(claimed, 2 or 3) = claimed: otherwise
                // ptxas put the SHFL two HMMAs after the CAS and the warp waited out the CAS there, run 2: +80 us)
                const uint32_t tie = 2u + (__float_as_uint(acc_q[QMT - 1][QPW / 8 - 1][3]) >> 31);
                claimed = __shfl_sync(0xffffffffu, min(claimed, tie), 0);
              }
              if (claimed == 0u) {  // the first: store; after the last piece publish
#pragma unroll
                for (int mt = 0; mt < QMT; ++mt)
#pragma unroll
                  for (int dt = 0; dt < QPW / 8; ++dt)
                    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(
                                     fp + ((piece * QMT + mt) * (QPW / 8) + dt) * 128),
                                 "f"(acc_q[mt][dt][0]), "f"(acc_q[mt][dt][1]), "f"(acc_q[mt][dt][2]),
                                 "f"(acc_q[mt][dt][3])
                                 : "memory");
                if (piece == QC / QPW - 1) claim_publish(m0);
                continue;
              }
              if (piece == 0 && claimed == 1u) {  // another warp is storing the block: wait for its word
                if (lane == 0) {
                  uint32_t v;
                  uint32_t n = 0;  // (a bound of seconds: a protocol error traps instead of hanging the GPU)
                  do {
                    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(claim_word(m0)) : "memory");
                    if (++n == (1u << 24)) __trap();
                  } while (v != 2u);
                }
                __syncwarp();
              }
            }
#pragma unroll
            for (int mt = 0; mt < QMT; ++mt)
#pragma unroll
              for (int dt = 0; dt < QPW / 8; ++dt)
                red_add_f4(fp + ((piece * QMT + mt) * (QPW / 8) + dt) * 128, acc_q[mt][dt]);
            continue;
          }
#pragma unroll
          for (int mt = 0; mt < QMT; ++mt)
#pragma unroll
            for (int dt = 0; dt < QPW / 8; ++dt)
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const int i = m0 + q_m + mt * 16 + lane / 4 + hf * 8;
                const int col = q_d + piece * QPW + dt * 8 + (lane % 4) * 2;
                if constexpr (kLoopFree) {
                  // Rows past lq hold dQ = 0 (their Q / dO rows were zero-filled): added to the last row instead of
                  // skipped, so the adds need no predicate (ptxas branches around each predicated red). sm_90a:
                  // the row's address formed once, the columns immediates (in sm_80 code that spilled 12 B).
                  float* rp = dq_acc + (int64_t)min(i, si.lq - 1) * dq_row_stride + q_d + (lane % 4) * 2;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
                  asm("mov.b64 %0, %0;\n" : "+l"(rp));
#endif
                  red_add_f2(rp + piece * QPW + dt * 8, acc_q[mt][dt][2 * hf], acc_q[mt][dt][2 * hf + 1]);
                } else {
                  atomic_add_f2(dq_acc + (int64_t)i * dq_row_stride + col, acc_q[mt][dt][2 * hf],
                                acc_q[mt][dt][2 * hf + 1], i < si.lq);
                }
              }
        }
      };
      if constexpr (STAGES >= 2) {
        // dQ-first warps (kPdsLoopFreeDqFirst, and the plain body at D = 128 / 256): the two warps of a scheduler (w,
        // w + NWARPS / 2) run phases 2 and 3 in opposite orders, so that while one runs dK / dV (128 MMAs a warp at
        // D = 128, back to back) the other runs dQ (short k-loops waiting on their loads, then the atomics), instead
        // of both waiting in the same phase. Two straight paths, not a loop over the phases (which made D = 256 spill
        // 88 B).
        constexpr auto kBoth = std::integral_constant<int, 3>();
        if constexpr (kLoopFree) {
          auto do_copies = [&] {  // (kSplitCopies: tile mb + 2's dO, after dV, the last reader of this tile's dO)
            if constexpr (kSplitCopies) {
              if (mb + 2 < mb_end) {
                const uint32_t ot = opaque(tid);
                load_q_do_lean(sQ0 + (stage == 0 ? 2 : stage - 1) * kStageBytes, tile_m(mb + 2), ot,
                               std::integral_constant<int, 2>());
                cp_async_commit();
              }
            }
          };
          if (kDqFirstBody && warp >= NWARPS / 2) {
            phase_dq();
            phase_kv(std::integral_constant<int, 1>());
            do_copies();
            phase_kv(std::integral_constant<int, 2>());
          } else {
            phase_kv(std::integral_constant<int, 1>());
            do_copies();
            phase_kv(std::integral_constant<int, 2>());
            phase_dq();
          }
        } else {
          const bool dq_first = D != 64 && warp >= NWARPS / 2;
          if (dq_first) {
            phase_dq();
            phase_kv(kBoth);
          } else {
            phase_kv(kBoth);
            phase_dq();
          }
        }
      } else {
        phase_kv(std::integral_constant<int, 3>());  // (both parts)
        if (STAGES == 1 && next_tile(mb) < tiles_end()) {
          __syncthreads();  // every warp is done with Q and dO: the next tile's load overlaps dQ
          const int mn = next_tile(mb) * BM;
          const uint32_t ot = opaque(tid);
          if constexpr (kLeanLoad) {
            load_q_do_lean(sQ, mn, ot, std::integral_constant<int, 3>());
          } else {
            load_q_do(sQ, mn, ot);
          }
          cp_async_commit();
        }
        phase_dq();
      }
      mb = next_tile(mb);
      if constexpr (kRunPtrs) {
        q_nx += BM * p.q_row_stride * (int64_t)sizeof(T);
        do_nx += BM * p.do_row_stride * (int64_t)sizeof(T);
      }
      if constexpr (kOneBar) {
        stage = stage == 2 ? 0 : stage + 1;
      } else {
        stage ^= (STAGES == 2 ? 1 : 0);
      }
    } while (mb < tiles_end());
    if constexpr (kDrabBulk) bwd_pds_zero_bulk_wait();  // (the slices' copies: read long before)
  } else if constexpr (kRabSmem) {  // (no walk)
    zero_paired_at_once();
  }

  if constexpr (kSplitWalk) {  // a split block's chunk: partials merged, the last chunk's CTA stores dK / dV
    const int4 it = bwd_split_item_again(p);
    const int nc = it.z >> 16;
    if (nc > 1 && !bwd_split_merge<NT, KMT, KNT>(p, h, it.z & 0xffff, nc, it.w, acc_dk, acc_dv)) return;
  }
  // Epilogue: dK, dV (rows past seqused are zeros).
  const int k_n = (warp % C::kKWN) * KR, k_d = (warp / C::kKWN) * KC;
  const int rows_store = min(BN, si.lk_alloc - n0);
  T* dkg = static_cast<T*>(p.dk) + (int64_t)(si.k_start + n0) * p.dk_row_stride + h * p.dk_head_stride;
  T* dvg = static_cast<T*>(p.dv) + (int64_t)(si.k_start + n0) * p.dv_row_stride + h * p.dv_head_stride;
  if constexpr ((BODY & kPdsSmemEpilogue) != 0) {
    // dK into K's buffer, dV into V's (BN x D each, K's swizzled layout), then each thread's 16-byte chunks of rows
    // as load_tile_async copies them in (row r_t + KI i, chunk c_t); the same values as the fragment-order stores.
    __syncthreads();  // every warp is done with K and V (the last tile's phases 1 and 3)
    const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // stmatrix.x4: lanes 8 i .. 8 i + 7 address the rows of 8 x 8 matrix i = (row half, column tile) of the four
    // (mt, dt .. dt + 1, hf) fragments, whose registers are the accumulator pairs in mma order.
    const uint32_t tS = L::swz(k_n + ((ln / 8) % 2) * 8 + ln % 8, k_d + (ln / 16) * 8);
    auto st_frags = [&](const uint32_t base, const float (&acc)[KMT][KNT][4], const float scale) {
#pragma unroll
      for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
        for (int dt = 0; dt < KNT; dt += 2)
          asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                           base + (tS ^ L::swz(mt * 16, dt * 8))),
                       "r"(pack2<T>(acc[mt][dt][0] * scale, acc[mt][dt][1] * scale)),
                       "r"(pack2<T>(acc[mt][dt][2] * scale, acc[mt][dt][3] * scale)),
                       "r"(pack2<T>(acc[mt][dt + 1][0] * scale, acc[mt][dt + 1][1] * scale)),
                       "r"(pack2<T>(acc[mt][dt + 1][2] * scale, acc[mt][dt + 1][3] * scale))
                       : "memory");
    };
#else
    const uint32_t tS = L::swz(k_n + ln / 4, k_d + (ln % 4) * 2);
    auto st_frags = [&](const uint32_t base, const float (&acc)[KMT][KNT][4], const float scale) {
#pragma unroll
      for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
        for (int dt = 0; dt < KNT; ++dt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(base + (tS ^ L::swz(mt * 16 + hf * 8, dt * 8))),
                         "r"(pack2<T>(acc[mt][dt][2 * hf] * scale, acc[mt][dt][2 * hf + 1] * scale))
                         : "memory");
    };
#endif
    st_frags(sK, acc_dk, 1.f);
    st_frags(sV, acc_dv, p.inv_scaling);
    __syncthreads();
    constexpr int kChunks = D / 8, KI = NT / kChunks;
    static_assert(BN % KI == 0 && KI % 8 == 0, "rows KI apart: the same swizzle");
    const int r_t = tid / kChunks, c_t = tid % kChunks;
    const uint32_t s_t = L::swz(r_t, c_t * 8);
    char* gk = reinterpret_cast<char*>(dkg + (int64_t)r_t * p.dk_row_stride + c_t * 8);
    char* gv = reinterpret_cast<char*>(dvg + (int64_t)r_t * p.dv_row_stride + c_t * 8);
#pragma unroll
    for (int it = 0; it < BN / KI; ++it) {
      if (r_t + it * KI < rows_store) {
        const uint32_t so = s_t ^ L::swz(it * KI, 0);
        const uint4 xk = lds_b128(sK + so), xv = lds_b128(sV + so);
        *reinterpret_cast<uint4*>(gk + it * KI * p.dk_row_stride * (int64_t)sizeof(T)) = xk;
        *reinterpret_cast<uint4*>(gv + it * KI * p.dv_row_stride * (int64_t)sizeof(T)) = xv;
      }
    }
    return;
  }
  static_assert(!kRabSmem || (BODY & kPdsSmemEpilogue) != 0, "rab through shared memory: with kPdsSmemEpilogue");
#pragma unroll
  for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
    for (int dt = 0; dt < KNT; ++dt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = k_n + mt * 16 + lane / 4 + hf * 8;
        const int col = k_d + dt * 8 + (lane % 4) * 2;
        if (row < rows_store) {
          *reinterpret_cast<uint32_t*>(dkg + (int64_t)row * p.dk_row_stride + col) =
              pack2<T>(acc_dk[mt][dt][2 * hf], acc_dk[mt][dt][2 * hf + 1]);
          *reinterpret_cast<uint32_t*>(dvg + (int64_t)row * p.dv_row_stride + col) =
              pack2<T>(acc_dv[mt][dt][2 * hf] * p.inv_scaling, acc_dv[mt][dt][2 * hf + 1] * p.inv_scaling);
        }
      }
}

// The layouts over 99 KB cannot fit sm86 / sm89's per-block limit: in their code the kernel is a trap (the launcher
// never picks it on compute capability 8.x other than 8.0), which keeps those builds' register report clean; so are
// the three-stage kernels (kOneBar) and kPdsMbarCopies' in code below sm_90 (their launchers check the device).
template <typename T, int D, int STAGES, int NWARPS, int BODY, bool CTX>
__device__ __forceinline__ void hstu_bwd_pds_entry(const HstuParams& p, const int sms) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  using C = BwdPdsConfig<D, NWARPS>;
  if constexpr (STAGES == 3 || (BODY & kPdsMbarCopies) != 0 ||
                (__CUDA_ARCH__ != 800 && bwd_pds_smem_bytes<D, C::kBlockM, C::kBlockN>(STAGES) > 99 * 1024)) {
    __trap();
  } else {
    hstu_bwd_pds_body<T, D, STAGES, NWARPS, BODY, CTX>(p, sms);
  }
#else
  hstu_bwd_pds_body<T, D, STAGES, NWARPS, BODY, CTX>(p, sms);
#endif
}
template <typename T, int D, int STAGES, int NWARPS>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_pds_kernel(const HstuParams p) {
  constexpr int kBody = kBwdPdsDefaultBody<D, NWARPS, STAGES> | kBwdPdsDefaultFlags<D, STAGES, NWARPS>;
  hstu_bwd_pds_entry<T, D, STAGES, NWARPS, kBody, false>(p, 0);
}
// The same for calls with contexts (num_contexts given, chosen on the host): the plain body, which skips the query
// tiles of the context gap (bwd_work_tiles). (D = 128's default body with the gap's bookkeeping spilled 12-16 B in
// sm_90a code.)
template <typename T, int D, int STAGES, int NWARPS>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_pds_ctx_kernel(const HstuParams p) {
  hstu_bwd_pds_entry<T, D, STAGES, NWARPS, 0, true>(p, 0);
}
// The split of long walks (kPdsSplitWalk; launch_hstu_bwd_pds_split): BODY's loop on the work list's items.
template <typename T, int D, int STAGES, int NWARPS, int BODY, bool CTX>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_pds_split_kernel(const HstuParams p) {
  hstu_bwd_pds_entry<T, D, STAGES, NWARPS, BODY | kPdsSplitWalk, CTX>(p, 0);
}
// Another body than the default's (the heads-first loops, comparison cfgs); sms: the device's SM count.
template <typename T, int D, int STAGES, int NWARPS, int BODY>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_pds_body_kernel(const HstuParams p, const int sms) {
  hstu_bwd_pds_entry<T, D, STAGES, NWARPS, BODY, false>(p, sms);
}
// The one-barrier / mbarrier loops (STAGES = 3 or kPdsMbarCopies) for calls with contexts: the context gap skipped
// by the walk's tile index (kWalkIdx).
template <typename T, int D, int STAGES, int NWARPS, int BODY>
__global__ void __launch_bounds__(NWARPS * 32, 1) hstu_bwd_pds_body_ctx_kernel(const HstuParams p, const int sms) {
  hstu_bwd_pds_entry<T, D, STAGES, NWARPS, BODY, true>(p, sms);
}

// Launches the kernel (BODY > 0: hstu_bwd_pds_body_kernel with that body; else the default's, or the context kernel
// for calls with contexts) where its shared memory fits max_smem (the device's usable per-block opt-in bytes); else
// cudaErrorNotSupported (the caller runs the default layout). CTX_TWIN (the default's loops): calls with contexts run
// the loop's hstu_bwd_pds_body_ctx_kernel (only the loops the default takes are instantiated so).
template <typename T, int D, int STAGES, int NWARPS, int BODY = 0, bool CTX_TWIN = false>
cudaError_t launch_hstu_bwd_pds(const HstuParams& p, int max_smem, cudaStream_t stream) {
  using C = BwdPdsConfig<D, NWARPS>;
  if constexpr (!C::kExists) {
    return cudaErrorNotSupported;
  } else {
    constexpr int kSmem = bwd_pds_smem_bytes<D, (BODY & kPdsTile128) ? 2 * C::kBlockM : C::kBlockM, C::kBlockN>(
        STAGES, (BODY & kPdsMbarCopies) != 0);
    if (kSmem > max_smem) return cudaErrorNotSupported;
    // The one-barrier / mbarrier loops (the caller checks for sm_90+) take calls with contexts only as their context
    // twin (hstu_bwd_pds_body_ctx_kernel), which is not in the tail order nor with the running pointers.
    constexpr bool kLoop = STAGES == 3 || (BODY & kPdsMbarCopies) != 0;
    constexpr bool kCtxTwin = CTX_TWIN && kLoop && (BODY & (kPdsTailBlocksFirst | kPdsRunPtrs)) == 0;
    if (kLoop && !kCtxTwin && p.num_contexts != nullptr) return cudaErrorNotSupported;
    // Key blocks in gridDim.y (at most 65535): the op refuses max_seqlen_k over 65535 blocks of 64 keys with a
    // message before this (hstu/csrc/ops/hstu_plan.h kBwdSm80MaxSeqlenK, which assumes tiles of 64 keys or more).
    static_assert(C::kBlockN >= kBwdSm80MinBlockN, "kBwdSm80MaxSeqlenK assumes key blocks of at least 64 keys");
    if ((p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN > kBwdSm80MaxKeyBlocks) return cudaErrorInvalidConfiguration;
    constexpr int kMaxGridZ = 65535;  // (heads first puts the batch in gridDim.z)
    if ((BODY & kPdsHeadsFirst) && p.batch > kMaxGridZ) return cudaErrorNotSupported;
    int sms = 0;  // (the tail order's wave)
    if constexpr ((BODY & kPdsTailBlocksFirst) != 0) sms = accel::current_device_sms();
    // (only the kernel launched is instantiated)
    const auto launch = [&](const auto kernel) {
      if (kSmem > 48 * 1024) {
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        if (err != cudaSuccess) return err;
      }
      // (batch, key blocks, heads): the heaviest key blocks first (causal: block 0 walks every query tile); in a
      // dispatch model of B16 S4K 6 % shorter than (key blocks, batch, heads), whose last sequences' block 0 started
      // last.
      const int nb = (p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN;
      const dim3 grid = (BODY & kPdsHeadsFirst) ? dim3(p.heads, nb, p.batch) : dim3(p.batch, nb, p.heads);
      if constexpr (BODY != 0) {
        kernel<<<grid, NWARPS * 32, kSmem, stream>>>(p, sms);
      } else {
        kernel<<<grid, NWARPS * 32, kSmem, stream>>>(p);
      }
      return cudaGetLastError();
    };
    if constexpr (BODY != 0) {
      if constexpr (kCtxTwin) {
        if (p.num_contexts != nullptr) return launch(hstu_bwd_pds_body_ctx_kernel<T, D, STAGES, NWARPS, BODY>);
      }
      return launch(hstu_bwd_pds_body_kernel<T, D, STAGES, NWARPS, BODY>);
    } else {
      if constexpr (NWARPS == 8 && STAGES != 3) {  // (a host pointer test: no device sync)
        if (p.num_contexts != nullptr) return launch(hstu_bwd_pds_ctx_kernel<T, D, STAGES, NWARPS>);
      }
      return launch(hstu_bwd_pds_kernel<T, D, STAGES, NWARPS>);
    }
  }
}

}  // namespace hstu
