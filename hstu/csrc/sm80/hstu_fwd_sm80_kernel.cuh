// HSTU attention forward: O = (SiLU(alpha * (Q K^T + rab)) masked) V / scaling_seqlen.
//
// FlashAttention-2 structure without the online-softmax bookkeeping (SiLU needs no row normalization): one block
// per (query tile of BM rows, batch, head); each warp owns MT m16 tiles of rows; the KV tiles are walked from the
// last one that any row of the tile can see down to the first, fully masked tiles are never loaded (nor the gap of
// other groups' targets between the history and a tile of targets' own group: SeqMask::key_tiles). K and V have
// one smem buffer each and their cp.async loads overlap the other GEMM (K for tile n-1 loads during P V of tile n,
// V of tile n during Q K^T of tile n). S stays in registers and becomes the A operand of P V directly.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "common/pdl.cuh"  // griddep_wait, griddep_launch_dependents, launch_pdl (the split's launches)
#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/sm80/hstu_fwd_sm80_split.h"

namespace hstu {

// c += a b, m16n8k8 (a: 16 x 8 row-major, two registers; b: 8 x 8, one)
template <typename T>
__device__ __forceinline__ void mma_1688(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  if constexpr (std::is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
  }
}

// Tile shape of one forward kernel: BM query rows per block (MT = BM / (16 * WARPS) m16 tiles per warp), K/V tiles
// of BN keys computed in sub-tiles of BNS keys, MINB blocks per SM (__launch_bounds__), STAGES K/V buffers (2: tile
// n-1 loads while tile n is computed, one barrier per tile; 1: FA2's order, V of tile n loads during Q K^T and K of
// tile n-1 during P V, two barriers per tile, BNS == BN), SKIP: on sub-tiles that the mask cuts, each warp skips the
// work on keys that every one of its rows has masked (the causal diagonal): 1 Q K^T and the pointwise of whole
// sub-tiles (P V of the zeros runs: skipping it spills at D = 128's 128-register cap), 2 whole sub-tiles, 3 also
// 16-key chunks of a sub-tile; 4 only in tiles with context rows: 2, and each warp's own fully visible sub-tiles
// take the unmasked path (a warp of context rows on the history); 5 (hstu_fwd_kernel): 4 in a copy of the body that
// only the tiles with context rows run, 0 in the others (no branch in their loop). PAIR 2: warp pairs (below,
// hstu_fwd_kernel), one K/V stage.
template <int D, int BM, int BN, int BNS, int WARPS, int MINB, int STAGES, int SKIP, int PAIR = 1>
struct FwdSm80Tile {
  static constexpr int kBlockM = BM;
  static constexpr int kBlockN = BN;
  static constexpr int kSubN = BNS;
  static constexpr int kWarps = WARPS;
  static constexpr int kMinBlocks = MINB;
  static constexpr int kStages = STAGES;
  static constexpr int kSkip = SKIP;
  static constexpr int kPair = PAIR;
  // the warps' Q fragments in registers, loaded once per block (hstu_fwd_qreg_kernel), not per sub-tile
  static constexpr bool kQreg = false;
  // kQreg: those fragments scaled by alpha / 2, a power of two (FwdSm80QregScaled; hstu_fwd_qreg_scaled_kernel)
  static constexpr bool kQscale = false;
  // Q's copy issued before the mask's setup (FwdSm80PairsEarly; hstu_fwd_qearly_kernel)
  static constexpr bool kQearly = false;
  // kQscale: the unmasked sub-tiles without rab in 16-key groups, the SiLU of one group issued between the MMAs of
  // others (FwdSm80QregIlv; hstu_fwd_qreg_ilv_kernel)
  static constexpr bool kIlv = false;
  // PAIR 2: the S and P V ldmatrix addresses as L::xadd (a base per swizzled chunk, the rest immediates;
  // hstu_fwd_block's XADD; hstu_fwd_xadd_kernel)
  static constexpr bool kXadd = false;
  // kXadd: the S and P V fragments loaded kFwdPf MMA steps ahead (hstu_fwd_block's PF; hstu_fwd_xpf_kernel)
  static constexpr bool kPrefetch = false;
  // rab's tiles copied into shared memory with K / V (hstu_fwd_block's RABS; hstu_fwd_qreg_rab_kernel)
  static constexpr bool kRabSmem = false;
  // kRabSmem: rab added by the tensor cores after S's MMAs (hstu_fwd_block's RABM; hstu_fwd_qreg_rabm_kernel)
  static constexpr bool kRabMma = false;
  // kRabMma: each warp copies its own rows of the rab tile per sub-tile into two slots (hstu_fwd_block's RABW;
  // hstu_fwd_qreg_rabw_kernel)
  static constexpr bool kRabWarp = false;
  // kRabSmem: a rab tile within the sequence copied without predicates (hstu_fwd_block's RABF)
  static constexpr bool kRabCopyFast = false;
  // kRabSmem: the rab body's address forms (hstu_fwd_block's RABX: kFwdRabLdsm, kFwdRabLaneOnce)
  static constexpr int kRabX = 0;
  // > 0: the longest-first grid's chunks hold at most this many sequences where a sequence has at most
  // kFwdSm80ShortTiles query tiles (launch_hstu_fwd)
  static constexpr int kShortChunk = 0;
  // Q | K, V per stage | each query row's keys (SeqMask::row_keys: 4 ints per row, the mask of tiles not full) |
  // PAIR 2: each warp's P (its rows x its half of the sub-tile's keys, bf16 / fp16) for its partner
  static constexpr int kSmemRowKeys = (BM + STAGES * 2 * BN) * D * 2;
  static constexpr int kSmemP = kSmemRowKeys + BM * 16;
  // SKIP 4 / 5: each warp's key bound and fully visible sub-tiles (4 ints per warp), read in the loop, not kept live
  static constexpr int kSmemWarp = kSmemP + (PAIR > 1 ? BM * BNS * 2 : 0);
  static constexpr int kSmem = kSmemWarp + (SKIP >= 4 ? WARPS * 16 : 0);
  static_assert(STAGES == 2 || (STAGES == 1 && BNS == BN), "one K/V stage computes whole KV tiles");
  static_assert(PAIR == 1 || (PAIR == 2 && STAGES == 1 && (SKIP == 0 || SKIP >= 4)), "warp pairs: one K/V stage");
};

// The rab tiles' buffers of hstu_fwd_block's RABS (one per K / V stage, BM x BN elements each): with Q in registers
// at the start of Q's buffer where they fit in it (D >= 2 BN), else behind the tile's shared memory (the tiles'
// kSmem count them: FwdSm80QregRab, FwdSm80PairsPfRab)
template <int D, int BM, int BN, bool QREG = true>
constexpr bool fwd_rab_smem_in_q() {
  return QREG && D >= 2 * BN;
}

// The default. D <= 128: 8 warps of one m16 tile (128 rows), 2 blocks (16 warps) per SM at the 128-register cap;
// KV tiles of 64 keys in sub-tiles of 64 (32 at D = 64: its S registers) . D = 256: 4 warps of 16 rows, KV tiles of
// 32 keys. K/V double-buffered.
template <int D>
struct FwdSm80Config : FwdSm80Tile<D, D <= 128 ? 128 : 64, D <= 128 ? 64 : 32, (D == 256 || D == 64) ? 32 : 64,
                                   D <= 128 ? 8 : 4, D <= 128 ? 2 : 1, 2, 0> {};

// Issue 39's forward candidates (kernel_options(fwd_sm80_cfg=n), bf16, comparisons until measured; fp16, D = 32 and
// a candidate a head dim lacks run the default). FlashAttention-2's forward on A100 / H100 runs 128 x 64 tiles of 4
// warps x 32 rows at D = 128 (64 KB, K and V one buffer each), 128 x 128 of 4 warps at D = 64, 64 x 64 of 4 warps at
// D = 256 (96 KB): a warp with two m16 tiles uses each K / V fragment it loads twice, half the default's ldmatrix
// bytes per MMA, and has the registers (255 at 2 blocks of 4 warps per SM) to keep fragments in flight.
//   1: D = 64 / 128: 4 warps x 32 rows, K/V double-buffered (one barrier per KV tile), 64-key sub-tiles; D = 128
//      128 x 64 tiles (98 KB: 2 blocks per SM on Hopper, 1 on the A100 and sm86 / sm89; 64-key sub-tiles once
//      they stopped spilling), D = 64 FA2's 128 x 128 (80 KB); D = 256: warp pairs (PAIR 2), 64 x 64 tiles, one K/V
//      stage (105 KB: 2 blocks per SM on Hopper, 1 on the A100), as FwdSm80PairsXadd (below);
//   2: FA2's tiles and order, one K/V stage: D = 64 / 128 4 warps x 32 rows, 128 x 64 (64 / 32 KB), D = 256 64 x 64,
//      4 warps x 16 rows (96 KB);
//   4: the default's tile (D = 64: 1, D = 128: 2, D = 256: 1) with SKIP 5: the warp skip in a copy of the body for
//      the tiles with context rows (query tile 0: its warps of non-context rows stop at their diagonal instead of
//      walking the history with the context rows), the default's body elsewhere; the default for calls with
//      contexts where 5 does not run (D = 128 where two of 3's blocks do not fit per SM; D = 256: the pairs);
//   3: D = 64 1 with Q in registers, D = 128 1's tile in 32-key sub-tiles with Q in registers, D = 256 1 with short
//      sequences' grid chunks capped (below: the defaults there);
//   5: D = 64 / 128 3's tile with SKIP 5 (hstu_fwd_qreg_ctx_kernel: 4's skip body in query tile 0, 3's elsewhere;
//      D = 128 where two blocks fit per SM, as 3's default); the default for calls with contexts there is its
//      tile with SKIP 6 (FwdSm80QregCtx: tile 0's context-only KV tiles two per step); D = 256 3 with Q's copy
//      issued before the mask's setup (FwdSm80PairsEarly) at every row count.
// (Other tile shapes and loads measured slower or no faster and were removed; docs/hstu_kernel_notes.md.) 1, 3, 4
// and 5 at D = 256 (105 KB) run where the device's opt-in shared memory holds them and not on sm86 / sm89 (their code
// of it traps; elsewhere the default runs). ptxas (nvcc 13.0, bf16): no spill in sm_80, sm_86, sm_89 and sm_90a code.
constexpr int kFwdSm80Candidates = 5;
// kernel_options(fwd_sm80_cfg=6): the default tiles (FwdSm80Config) whatever the shape, for comparisons.
constexpr int kFwdSm80CfgOld = 6;
// kernel_options(fwd_sm80_cfg=7) (kFwdSm80CfgSplit, hstu_fwd_sm80_split.h): the bf16 long-row tile (D = 256 the
// warp pairs, 128 candidate 2, 64 candidate 1) with the split of long KV ranges where its plan splits (the query tiles
// fill less than about four waves); so does the default (0) where the op made room for the plan.
// The default (fwd_sm80_cfg=0) for bf16 at D = 256: the warp pairs (candidate kFwdSm80PairCfg) at every row count
// where they fit (105 KB; not sm86 / sm89), short sequences' grid chunks capped (3), Q's copy early and the
// ldmatrix addresses as L::xadd, the fragments ahead (FwdSm80PairsPf). Measured on an H200 (forward
// ms, issue 39): B16 S4K 1.523 against candidate 2's 1.715 and FA2's 1.848, B64 S1K 0.475 / 0.523, B256 S256 0.216
// against the old tiles' 0.238 (the chunks capped: 0.194 against 0.209), a Zipf(1.2) B32 batch with 3 contexts
// 0.112 / 0.133. Elsewhere (and where they do not fit) it runs kFwdSm80DefaultCfg for bf16 when the mean query rows
// per sequence (total_q / batch, host values) reach kFwdSm80LongRows, else the old tiles (FwdSm80Config: fp16
// always). Measured on an H200 (forward ms
// with the longest-first grid order; issue 39; docs/hstu_kernel_notes.md): candidate 2 at B128 S1K D128 0.473
// against the old tiles' 0.564 (before the row-table mask: 0.63x), B256 S512 0.297 / 0.337, B16 S4K 0.734 / 0.966,
// S16K 11.04 / 13.81, D256 S4K 1.728 / 1.909; at D = 64 S8K candidate 1 1.614, 2 1.699, the old tiles 2.161 (3,
// 1 with Q in registers: 1.501 against 1's 1.615; at D = 128 3 where two of its blocks fit per SM: below). Below 512
// rows unmeasured: the old tiles.
constexpr int64_t kFwdSm80LongRows = 512;
template <int D>
constexpr int kFwdSm80DefaultCfg = D == 64 ? 3 : 2;  // (D = 128: 3 where two of its blocks fit per SM, run_hstu_fwd)
constexpr int kFwdSm80PairCfg = 3;
template <int D, int CFG>
struct FwdSm80Candidate {
  static constexpr bool kExists = false;
};
template <int D>
struct FwdSm80Candidate<D, 1> : FwdSm80Tile<D, 128, D == 64 ? 128 : 64, 64, 4, 2, 2, 0> {
  static constexpr bool kExists = D == 64 || D == 128;
};
template <int D>
struct FwdSm80Candidate<D, 2> : FwdSm80Tile<D, D == 256 ? 64 : 128, 64, 64, 4, 2, 1, 0> {
  static constexpr bool kExists = D == 64 || D == 128 || D == 256;
};
template <int D>
struct FwdSm80Candidate<D, 4> : FwdSm80Tile<D, 128, D == 64 ? 128 : 64, 64, 4, 2, D == 64 ? 2 : 1, 5> {
  static constexpr bool kExists = D == 64 || D == 128;
};
// (the candidates of one head dim only)
template <typename Tile>
struct FwdSm80Only : Tile {
  static constexpr bool kExists = true;
};
// (D = 256's 1 after FwdSm80PairsXadd below)
template <>
struct FwdSm80Candidate<256, 4> : FwdSm80Only<FwdSm80Tile<256, 64, 64, 64, 4, 2, 1, 5, 2>> {};
// 3: D = 64: candidate 1's tile (128 x 128, 4 warps x 32 rows, K / V double-buffered, two blocks per SM) with the
// warp's Q fragments in registers (32, loaded once per block; 246 registers): a sub-tile's ldmatrix are K's and V's
// only (32 instead of 40 per 64 keys and warp); the bf16 default at D = 64 from kFwdSm80LongRows (B16 S8K on an
// H200: 1.501 / 1.505 ms against 1's 1.615 / 1.595 and NVIDIA's Ampere HSTU's 1.702 / 1.693). D = 256: the warp
// pairs (1) with the longest-first grid's chunks of at most 32 sequences where a sequence has at most 4 query tiles
// (B256 S256: 128 blocks per chunk instead of 512), the bf16 default at D = 256 where the pairs fit (B256 S256 on an
// H200: 0.194 ms against 1's 0.209 and FA2's 0.196-0.198; the same cap on 2-sequence chunks at S4K was 4.5 % slower,
// on D = 128's chunks 2.5-8 %: docs/hstu_kernel_notes.md).
constexpr int kFwdSm80ShortTiles = 4;
// (3 and 5 at D = 64 / 128: 4 warps x 32 rows, K / V double-buffered, Q in registers; SKIP 0 / 5)
template <int D, int SKIP>
struct FwdSm80QregTile : FwdSm80Only<FwdSm80Tile<D, 128, D == 64 ? 128 : 64, D == 64 ? 64 : 32, 4, 2, 2, SKIP>> {
  static constexpr bool kQreg = true;
};
template <>
struct FwdSm80Candidate<64, 3> : FwdSm80QregTile<64, 0> {};
// D = 128: 128 x 64 tiles of 4 warps x 32 rows, K / V double-buffered (98 KB), 32-key sub-tiles, the warp's Q
// fragments in registers (64: the S accumulators of 32-key sub-tiles make the room): no Q ldmatrix in the loop
// (64 instead of 80 per 64 keys and warp), one barrier per KV tile instead of candidate 2's two. The bf16 default
// at D = 128 (long rows, no contexts) where two of its blocks fit per SM (fwd_sm80_two_fit: the H100 / H200 class;
// elsewhere 2): on an H200 B16 S16K 10.69 ms against 2's 10.96 and NVIDIA's Ampere HSTU's 13.07, S4K 0.707 / 0.732 /
// 0.903, B128 S1K 0.466 / 0.469 / 0.589.
template <>
struct FwdSm80Candidate<128, 3> : FwdSm80QregTile<128, 0> {};
// The bf16 D = 128 long-row default without contexts or rab (where two of candidate 3's blocks fit per SM): 3's tile
// with Q's copy issued before the mask's setup (hstu_fwd_block's QEARLY, as FwdSm80PairsEarly at D = 256), so that
// the block's integer setup (seq_info, the walk's bounds, the row table) runs under Q's latency. The same output bit
// for bit; on an H200 (fwd40, session 38) 1.5-1.8 % faster at B128 S1K (kernel 0.450 ms against 0.458, FA2 0.519),
// 0.7-1.8 % at B64 S2K / B256 S512 / B32 S4K. kernel_options(fwd_sm80_cfg=3): candidate 3 without it.
struct FwdSm80QregEarly : FwdSm80Candidate<128, 3> {
  static constexpr bool kQearly = true;
};
template <>
struct FwdSm80Candidate<256, 3> : FwdSm80Only<FwdSm80Tile<256, 64, 64, 64, 4, 2, 1, 0, 2>> {
  static constexpr int kShortChunk = 32;
};
// 5: candidate 3's tile at D = 64 / 128 with SKIP 5 (hstu_fwd_qreg_ctx_kernel): query tile 0 of a call with
// contexts runs the warp-skip body (Q from shared memory; D = 128: a call, not inlined), the other tiles candidate
// 3's body (Q in registers). The bf16 default with contexts at D = 64 and at D = 128 where two blocks fit per SM until
// FwdSm80QregCtx (B16 S4K ctx64 on an H200: D = 64 0.444 ms against 4's 0.454, D = 128 0.785 / 0.801; 1.08x / 1.07x
// their causal).
template <>
struct FwdSm80Candidate<64, 5> : FwdSm80QregTile<64, 5> {};
template <>
struct FwdSm80Candidate<128, 5> : FwdSm80QregTile<128, 5> {};
// The bf16 default with contexts at D = 64 and at D = 128 where two blocks fit per SM: candidate 5 with SKIP 6, query
// tile 0's KV tiles that only its context rows see walked two per step by all four warps (hstu_fwd_block's PAIRKV):
// half the block steps of its walk past its other rows' keys; D = 64's context body a call, as D = 128's. B16 S4K
// ctx64 on an H200 (issue 39, branch ctx26): D = 64 0.425 ms, 1.037-1.039x faster than 5 and 1.043-1.044x its
// causal; D = 128 1.022-1.025x faster than 5, 1.053-1.058x its causal.
template <int D>
struct FwdSm80QregCtx : FwdSm80QregTile<D, 6> {};
// The bf16 default at D = 64 (long rows, no contexts, no split) where alpha / 2 is a power of two (alpha = D^-1/2:
// 2^-4): candidate 3's tile with the warp's Q fragments scaled by alpha / 2 once per block (exact: a power of two),
// so that S comes out of the MMAs as the SiLU's h, without the FMUL per score (64 per warp and 64-key sub-tile,
// beside 64 MUFU, 64 FFMA and 128 HMMA; hstu_fwd_qreg_scaled_kernel). kernel_options(fwd_sm80_qscale=False): the
// tile without it (for comparisons; the same output bit for bit but for Q elements that the scale makes subnormal).
template <int D>
struct FwdSm80QregScaled : FwdSm80QregTile<D, 0> {
  static constexpr bool kQscale = true;
};
// FwdSm80QregScaled with its unmasked sub-tiles (no rab) in 16-key groups g whose work is issued interleaved:
// S of g, P V of g - 2 and the SiLU of g - 1 in one straight block (hstu_fwd_block's ILV). In the plain body each
// warp runs S (tensor pipe), then the SiLU (MUFU: 64 of them per warp and sub-tile), then P V (tensor) in sequence,
// and the rab / mask branches between them keep ptxas from overlapping them; so the MUFU and tensor pipes overlap
// only where the two warps of a scheduler happen to be in different phases (ncu: tensor 59 % + MUFU 39 % of the
// cycles). On an H200 (issue 39, fwd30; bitwise the same output): B16 S8K 1.371 ms against FwdSm80QregScaled's 1.479
// (1.079x; tensor active 64 %, `wait` stalls 1.61 per instruction against 2.85), S4K 1.072x, B128 S1K 1.046x.
// kernel_options(fwd_sm80_interleave=False): FwdSm80QregScaled (for comparisons).
template <int D>
struct FwdSm80QregIlv : FwdSm80QregScaled<D> {
  static constexpr bool kIlv = true;
};
// The bf16 default with contexts at D = 64 where alpha / 2 is a power of two: FwdSm80QregCtx whose tiles without
// context rows run FwdSm80QregIlv's body (Q scaled by alpha / 2, the interleaved 16-key groups); the context tiles'
// body (query tile 0, Q read from shared memory) is FwdSm80QregCtx's, unscaled. kernel_options(fwd_sm80_interleave=
// False) or (fwd_sm80_qscale=False): FwdSm80QregCtx (for comparisons).
template <int D>
struct FwdSm80QregCtxIlv : FwdSm80QregCtx<D> {
  static constexpr bool kQscale = true;
  static constexpr bool kIlv = true;
};
// The bf16 defaults with rab where fwd_sm80_rab_smem holds (no contexts, long rows): the rab tiles copied into shared
// memory with K / V (hstu_fwd_block's RABS; hstu_fwd_qreg_rab_kernel). D = 128: candidate 3's tile (where two of
// its blocks fit per SM), the two rab buffers (32 KB) in Q's; D = 64: 128 x 64 tiles in 64-key sub-tiles with Q in
// registers scaled by alpha / 2 (where that is a power of two), the rab buffers behind (82 KB: two blocks per SM;
// the 128-key tiles of the default would need 64 KB more). kernel_options(fwd_sm80_cfg=8): main's rab path.
template <int D>
struct FwdSm80QregRab;
template <>
struct FwdSm80QregRab<128> : FwdSm80Candidate<128, 3> {
  static constexpr bool kRabSmem = true;
  static_assert(fwd_rab_smem_in_q<128, 128, 64>(), "the rab buffers in Q's");
};
template <>
struct FwdSm80QregRab<64> : FwdSm80Only<FwdSm80Tile<64, 128, 64, 64, 4, 2, 2, 0>> {
  static constexpr bool kQreg = true;
  static constexpr bool kQscale = true;
  static constexpr bool kRabSmem = true;
  static_assert(!fwd_rab_smem_in_q<64, 128, 64>(), "the rab buffers behind");
  static constexpr int kSmem = FwdSm80Tile<64, 128, 64, 64, 4, 2, 2, 0>::kSmem + 2 * 128 * 64 * 2;
};
// D = 64: FwdSm80QregRab<64> with the fully visible sub-tiles in FwdSm80QregIlv's interleaved 16-key groups, each
// group's rab added before its SiLU (no longer launched: the base of FwdSm80QregRabIlvMma)
struct FwdSm80QregRabIlv : FwdSm80QregRab<64> {
  static constexpr bool kIlv = true;
};
// The bf16 default at D = 64 with rab (where fwd_sm80_rab_smem holds): FwdSm80QregRabIlv with rab added by the
// tensor cores after S's MMAs, two m16n8k8 MMAs per m16 tile and 16 keys (hstu_fwd_block's RABM), instead of an LDS
// per key pair and an FFMA per score (on an H200 B16 S4K: 1.07-1.08x faster, 13.5 % fewer warp instructions; at
// D = 128 / 256 the same MMAs measured 1.02-1.03x / 1.00x slower: the tensor pipe and the MMA chain, not the issue
// slots, bound those, docs/hstu_kernel_notes.md).
struct FwdSm80QregRabIlvMma : FwdSm80QregRabIlv {
  static constexpr bool kRabMma = true;
};
// The bf16 default at D = 128 with rab (where FwdSm80QregRab<128> runs): it with the rab tiles inside the sequence
// copied without predicates and S's accumulators starting as the rab (hstu_fwd_block's RABF, RABI; sm_90+ code: in
// sm_80 code it is FwdSm80QregRab<128>'s). On an H200 B16 S4K 1.038-1.045x faster (rab / causal 1.13x against
// 1.17-1.18x, 11 % fewer warp instructions). kernel_options(fwd_sm80_cfg=11): FwdSm80QregRab<128>.
struct FwdSm80QregRabF128 : FwdSm80QregRab<128> {
  static constexpr bool kRabCopyFast = true;
};
// hstu_fwd_block's RABX bits (FwdSm80Tile::kRabX): kFwdRabLdsm, RABI's rab pairs by ldmatrix.x4 (the m16 tile's rows
// 0-7 / 8-15 x two n8 tiles: per lane exactly the words of four LDS) instead of an LDS per pair; kFwdRabLaneOnce,
// RABW's lane parts of the K / V fragment and rab slot addresses formed once per block instead of per sub-tile
constexpr int kFwdRabLdsm = 1;
constexpr int kFwdRabLaneOnce = 2;
// kFwdRabEvict (opt-in, kernel_options(fwd_sm80_rab_evict=True), being measured): the rab copies without predicates
// (RABF's, RABW's fast path) carry an L2 evict-first policy: rab is read once, K / V by every query tile of their
// sequence, so rab's stream should not push K / V out of L2
constexpr int kFwdRabEvict = 4;
// 16-byte async copy global -> shared with an L2 cache policy (createpolicy's descriptor)
__device__ __forceinline__ void cp_async_16_policy(uint32_t smem_addr, const void* gptr, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gptr),
               "l"(policy));
}
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}
// The bf16 default at D = 128 with rab where FwdSm80QregRabF128 runs: it with the rab pairs by ldmatrix (RABX
// kFwdRabLdsm: 4 LDSM instead of 16 LDS per 32-key sub-tile; the same words in the same accumulators: bit for bit
// its output; sm_90+ code, as RABI). kernel_options(fwd_sm80_cfg=9): FwdSm80QregRabF128.
struct FwdSm80QregRabL128 : FwdSm80QregRabF128 {
  static constexpr int kRabX = kFwdRabLdsm;
};
// FwdSm80QregRabL128 with evict-first rab copies (kernel_options(fwd_sm80_rab_evict=True); opt-in, being measured)
struct FwdSm80QregRabL128E : FwdSm80QregRabL128 {
  static constexpr int kRabX = kFwdRabLdsm | kFwdRabEvict;
};
// FwdSm80QregRabIlvMma's plain body (kernel_options(fwd_sm80_interleave=False); for comparisons)
struct FwdSm80QregRabMma : FwdSm80QregRab<64> {
  static constexpr bool kRabMma = true;
};
// The bf16 default at D = 64 with rab where two of its blocks fit per SM (the H100 / H200 class): the tile without rab
// (FwdSm80QregIlv<64>: 128 x 128, K / V double-buffered, 64-key sub-tiles in interleaved groups) with rab added by
// the tensor cores as FwdSm80QregRabIlvMma, each warp copying its own 32 rows of each sub-tile's rab (4 KB) into
// one of two slots, slot 1 in Q's buffer, slot 0 behind the tile (98 KB), waited for per warp (hstu_fwd_block's
// RABW): one block barrier per 128 keys instead of per 64, and a rab copy from one row pointer per lane (on an H200
// B16 S4K 1.10-1.11x faster, rab / causal 1.16-1.19x against 1.28-1.31x, 17 % fewer warp instructions). Where two
// do not fit (and for kernel_options(fwd_sm80_cfg=10)): FwdSm80QregRabIlvMma.
struct FwdSm80QregRabW : FwdSm80QregIlv<64> {
  static constexpr bool kRabSmem = true;
  static constexpr bool kRabMma = true;
  static constexpr bool kRabWarp = true;
  static constexpr int kSmem = FwdSm80QregIlv<64>::kSmem + 128 * 64 * 2;
};
// The bf16 default at D = 64 with rab where FwdSm80QregRabW runs: it with the lane parts of the K / V fragment and
// rab slot addresses formed once per block (RABX kFwdRabLaneOnce; ptxas recomputed them per sub-tile from the
// opaque lane id: 38 instructions of each sub-tile's prologue against the causal kernel's 9; sm_90+ code: in sm_80
// code it is FwdSm80QregRabW's). Bit for bit its output. kernel_options(fwd_sm80_cfg=9): FwdSm80QregRabW.
struct FwdSm80QregRabWH : FwdSm80QregRabW {
  static constexpr int kRabX = kFwdRabLaneOnce;
};
// FwdSm80QregRabWH with evict-first rab copies (kernel_options(fwd_sm80_rab_evict=True); opt-in, being measured)
struct FwdSm80QregRabWHE : FwdSm80QregRabWH {
  static constexpr int kRabX = kFwdRabLaneOnce | kFwdRabEvict;
};
// Whether the bf16 defaults run FwdSm80QregRab: rab given, not kernel_options(fwd_sm80_cfg=8), its 16-byte chunks
// aligned (the pointer and every stride)
inline bool fwd_sm80_rab_smem(const HstuParams& p) {
  return p.rab != nullptr && !(p.fwd_sm80_cfg & kFwdSm80RabMain) && reinterpret_cast<uintptr_t>(p.rab) % 16 == 0 &&
         p.rab_batch_stride % 8 == 0 && p.rab_head_stride % 8 == 0 && p.rab_row_stride % 8 == 0;
}
// The warp pairs (candidate 3) with Q's copy issued before the mask's setup (hstu_fwd_qearly_kernel), so that the
// setup's ~400 dependent instructions run under Q's load instead of in front of it: a block of 1-4 KV steps spends
// ~45 % of its instructions outside the KV loop. On an H200 B256 S256 0.190 ms against 3's 0.194 (FA2 0.196).
struct FwdSm80PairsEarly : FwdSm80Candidate<256, 3> {
  static constexpr bool kQearly = true;
};
// The split at D = 64 / 128 in 64 x 64 tiles (kernel_options(fwd_sm80_bm64=n); the op's rule picks n: hstu_plan.h
// fwd_sm80_bm64_rule): D = 64 K / V double-buffered (41 KB), D = 128 one stage (49 KB); n = 1: 4 warps x 16 rows
// (each K / V fragment a warp loads feeds one m16 tile), 2 per SM in the split's rule (178-186 registers); n = 2
// (D = 64; at D = 128 as 1: its 2-warp tile spilled at 255 registers): 2 warps x 32 rows (two m16 tiles per
// fragment, as the 128-row tiles), 4 per SM (208-216 registers). Against the 128-row tiles a batch of short
// sequences walks fewer KV steps per query row (the Zipf batch 0.80x its dense twin's against 0.88x at D = 64,
// 0.83x at D = 128), and a batch below a few waves has twice the query tiles to spread.
template <int D, int N>
struct FwdSm80SplitBm64 : FwdSm80Tile<D, 64, 64, 64, N == 1 ? 4 : 2, N == 1 ? 2 : 4, D == 64 ? 2 : 1, 0> {};
// 5 at D = 256 (for comparisons): FwdSm80PairsEarly at every row count (on an H200 B128 S512 0.279 ms against 3's
// 0.284, B64 S1K 0.460 / 0.465, B16 S4K within +-0.8 %)
template <>
struct FwdSm80Candidate<256, 5> : FwdSm80PairsEarly {};
// FwdSm80PairsEarly with the S and P V ldmatrix addresses as L::xadd (hstu_fwd_xadd_kernel: 4 bases per operand and
// sub-tile, the rest ldmatrix immediates, instead of a LOP3 and an add per ldmatrix; the same output bit for bit as 3
// and 5). On an H200 (issue 39) B16 S4K 1.010-1.021x faster than 3, B256 S256 1.001x 5; with Q's copy late
// 0.989-0.997x 3.
struct FwdSm80PairsXadd : FwdSm80PairsEarly {
  static constexpr bool kXadd = true;
};
// The bf16 default at D = 256 without contexts or split where the pairs fit, at every row count: FwdSm80PairsXadd
// with each k16 step's S fragments (Q's and K's) and each P V step's V fragment loaded kFwdPf steps ahead of their
// MMAs in kFwdPf + 1 register sets (hstu_fwd_xpf_kernel; the same output bit for bit): ptxas's own schedule of
// FwdSm80PairsXadd issues half of them 2-4 HMMA ahead, short of an ldmatrix's latency (and needs 254 registers
// against 241). Measured on an H200: docs/hstu_kernel_notes.md (issue 39).
constexpr int kFwdPf = 2;
struct FwdSm80PairsPf : FwdSm80PairsXadd {
  static constexpr bool kPrefetch = true;
};
// The bf16 default at D = 256 with rab where fwd_sm80_rab_smem holds (no contexts): FwdSm80PairsPf with each KV
// tile's rab tile in shared memory (hstu_fwd_block's RABS; hstu_fwd_xpf_rab_kernel), one buffer (8 KB) loaded with
// the tile's K: 113 KB per block, two blocks per SM on the H100 / H200 (the opt-in limit exactly)
struct FwdSm80PairsPfRab : FwdSm80PairsPf {
  static constexpr bool kRabSmem = true;
  static constexpr int kSmem = FwdSm80PairsPf::kSmem + 64 * 64 * 2;
};
// The bf16 default at D = 256 with rab where FwdSm80PairsPfRab fits: it with the rab tiles inside the sequence copied
// without predicates (hstu_fwd_block's RABF; sm_90+ code; 1.003-1.018x faster on an H200).
// kernel_options(fwd_sm80_cfg=11): FwdSm80PairsPfRab.
struct FwdSm80PairsPfRabF : FwdSm80PairsPfRab {
  static constexpr bool kRabCopyFast = true;
};
// FwdSm80PairsPfRabF with evict-first rab copies (kernel_options(fwd_sm80_rab_evict=True); opt-in, being measured)
struct FwdSm80PairsPfRabFE : FwdSm80PairsPfRabF {
  static constexpr int kRabX = kFwdRabEvict;
};
// 1 at D = 256 (for comparisons): FwdSm80PairsXadd
template <>
struct FwdSm80Candidate<256, 1> : FwdSm80PairsXadd {};
// The bf16 default at D = 256 with contexts where the pairs fit: candidate 4 (query tile 0 in the warp-skip body,
// here a call) with the other tiles in FwdSm80PairsPf's body (xadd addresses, fragments ahead, Q's copy early;
// hstu_fwd_ctx_xpf_kernel) instead of the plain pairs' body. fwd_sm80_cfg=4: candidate 4 (for comparisons).
struct FwdSm80PairsCtxPf : FwdSm80Candidate<256, 4> {
  static constexpr bool kQearly = true;
  static constexpr bool kXadd = true;
  static constexpr bool kPrefetch = true;
};
// Whether the bf16 defaults scale Q by alpha / 2: a normal power of two, and not kernel_options(fwd_sm80_qscale=False)
inline bool fwd_sm80_qscale(const HstuParams& p) {
  int e = 0;
  const float ha = 0.5f * p.alpha;
  return !(p.fwd_sm80_cfg & kFwdSm80NoQscale) && ha > 0.f && std::isnormal(ha) && std::frexp(ha, &e) == 0.5f;
}

// The grid order longest first over chunks of sequences (launch_hstu_fwd) in kernels with more than 128 registers per
// thread: at 128 (the 8-warp tiles, 2 blocks per SM) the block's tile recomputed from the grid spilled 68-84 B
// (ptxas, sm_90a); those keep each sequence's tiles in order, heaviest first.
template <int NWARPS, int MINB>
constexpr bool kFwdSm80Lpt = 65536 / (NWARPS * 32 * MINB) > 128;

// The AND mask of P's packed pair q of k16 step ks (the A fragment of P V: acc_s[mt][2 ks + q / 2][2 (q % 2) + {0,
// 1}]) from one m16 tile's mask bits (bit 4 nt + 2 hf + odd: fwd_key_interval_bits over the thread's two rows): the
// half of an element whose bit is clear becomes 0x0000, what pack2 makes of its 0.f. Bit k goes to bit 7 of x's
// byte 0, bit k + 1 to bit 7 of y's; prmt's sign mode (selector nibbles 8: x's byte 0, C: y's) replicates each
// across its half (2 shifts and a prmt per pair: -20 % instructions on a masked sub-tile against two selects).
__device__ __forceinline__ uint32_t fwd_pair_keep(uint32_t bits, int ks, int q) {
  const int k = 4 * (2 * ks + q / 2) + 2 * (q % 2);  // the bit of the pair's first element
  const uint32_t x = k <= 7 ? bits << (7 - k) : bits >> (k - 7);
  const uint32_t y = k <= 6 ? bits << (6 - k) : bits >> (k - 6);
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, 0xCC88;\n" : "=r"(r) : "r"(x), "r"(y));
  return r;
#else  // (host code: tests/hstu/test_mask_rows.py) prmt's sign mode on the same bytes
  return ((x & 0x80u) ? 0xffffu : 0u) | ((y & 0x80u) ? 0xffff0000u : 0u);
#endif
}

// SPLIT's end of a chunk (hstu_fwd_sm80_split.h): reads the query tile's slot, the block's chunk c, the tile's counter
// and its walk's chunks k (the kernel's start left them in shared memory at byte `words`, behind the tile's) and,
// when the walk has k > 1 chunks, loads the tile's first partial (the list's base for the slot x heads + h; chunk
// c's is c x heads further), stores the chunk's accumulator as an fp32 partial (fragment order: float4 i * NT +
// tid for i = mt * DTILES + dt, a warp's stores contiguous), counts the chunk on the tile's counter and returns
// false unless it is the last of the k; the last adds the k partials in chunk order 0 .. k - 1 from 0.0f (its own
// read back from L2 too: acc_o is dead in between, which keeps the sum's registers) into acc_o and returns true.
// The partials are p.fwd_sched, the tiles' counters p.fwd_tile_counter.
// LEAN (the default kernel's, where p.fwd_sm80_cfg has no kFwdSm80SplitPlain): the first partial's base was stored
// at word 7 by the block's prologue (hstu_fwd_block, behind the first copies), and the count is thread 0's
// acquire-release atomic behind the barrier (its release covers the block's partial stores, ordered before it by the
// barrier; its acquire, with the barrier after it, the other chunks' partials for the last block's L2 loads) instead
// of two full fences (__threadfence: MEMBAR.SC.GPU in every warp).
template <int MT, int DTILES, int NT, int BM>
__device__ __forceinline__ bool fwd_split_sum(float (&acc_o)[MT][DTILES][4], const HstuParams& p, char* smem,
                                              int words, bool lean = false) {
  __syncthreads();  // (the split's words, written by thread 0 at the start)
  // the words, read again from shared memory where used (asm volatile: not kept live across the count, where acc_o
  // holds the registers)
  auto word = [&](int i) { return static_cast<int>(lds_b32(smem_u32(smem) + words + 4 * i)); };
  constexpr int kElems = MT * DTILES * 4 * NT;  // one chunk's partial (BM x D)
  auto partial = [&](int c) {
    const int first = word(7);
    return reinterpret_cast<float4*>(static_cast<float*>(p.fwd_sched) +
                                     static_cast<int64_t>(first + c * p.heads) * kElems) +
           threadIdx.x;
  };
  if (word(3) <= 1) return true;
  if (!lean) {
    // the tile's first partial: the list's base for its slot (word 0) x heads + h, loaded here, not at the block's
    // start (there thread 0's dependent load held its warp's Q / K copies back); every thread stores the same word
    const int first = p.fwd_tile_counter[(p.total_q / BM + p.batch) * p.heads + word(0)] * p.heads +
                      static_cast<int>(blockIdx.x);
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(smem_u32(smem) + words + 28), "r"(first));
  }
  {
    float4* mine = partial(word(1));
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int dt = 0; dt < DTILES; ++dt)
        __stcg(mine + (mt * DTILES + dt) * NT,
               make_float4(acc_o[mt][dt][0], acc_o[mt][dt][1], acc_o[mt][dt][2], acc_o[mt][dt][3]));
  }
  if (!lean) __threadfence();
  __syncthreads();  // every thread's partial stored (and fenced, or covered by the count's release) before the count
  int* flag = reinterpret_cast<int*>(smem);
  if (threadIdx.x == 0) {
    int* ctr = p.fwd_tile_counter + word(2);
    *flag = lean ? atom_add_acq_rel_gpu(ctr, 1) : atomicAdd(ctr, 1);
  }
  __syncthreads();
  const int k = word(3);
  if (*flag != k - 1) return false;
  if (!lean) __threadfence();
  // chunk by chunk (0.0f + p0 + p1 + ...: the same order in every element), kG independent 16-byte loads in flight
  // per group: one L2 latency per group, not one per chunk and element
  constexpr int kFrags = MT * DTILES, kG = kFrags % 8 == 0 ? 8 : kFrags;
#pragma unroll
  for (int i = 0; i < kFrags; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[i / DTILES][i % DTILES][e] = 0.f;
  for (int c = 0; c < k; ++c) {
    const float4* src = partial(c);
#pragma unroll
    for (int i0 = 0; i0 < kFrags; i0 += kG) {
      float4 v[kG];
#pragma unroll
      for (int j = 0; j < kG; ++j) v[j] = __ldcg(src + (i0 + j) * NT);
#pragma unroll
      for (int j = 0; j < kG; ++j) {
        float* a = acc_o[(i0 + j) / DTILES][(i0 + j) % DTILES];
        a[0] += v[j].x;
        a[1] += v[j].y;
        a[2] += v[j].z;
        a[3] += v[j].w;
      }
    }
  }
  return true;
}

// PAIR 2 (warp pairs): the two warps of a pair share 32 query rows (MT = 2 m16 tiles each); for S = Q K^T each takes
// half of the sub-tile's keys over all of D, for O += P V half of D's columns over all the keys, so each K / V
// fragment a warp loads feeds two m16 tiles (half the ldmatrix bytes per MMA of 16-row warps, which D = 256's
// registers otherwise force: 32 x 256 fp32 of O per warp do not fit). A warp hands its P (bf16 / fp16 A fragments,
// 2 KB) to its partner through shared memory, made visible by the barrier that one K/V stage has before P V.
// SPLIT (hstu_fwd_sm80_split.h; the kernel hstu_fwd_split_kernel): grid (heads, the work list's bound); block
// (h, y) runs item y of the list (behind the counters p.fwd_tile_counter: a query tile and a chunk of its KV walk
// of the list's KV tiles per chunk) for head h, a split tile's chunks leave fp32 partials that the last one sums.
// QREG: the warp's Q fragments held in registers from the block's first barrier on (PAIR 1, no SPLIT).
// PAIRKV (SKIP 4, K / V double-buffered, PAIR 1): in a tile with context rows, the KV tiles that only the rows of its
// first half see (query tile 0's context rows on the history: warps 2-3 have nothing there) are walked two per
// step, unpipelined (both stages hold the pair): warps 0-1 compute tile nb, warps 2-3 tile nb - 1 for the rows of
// warp - 2, so the walk takes half the block steps (each one K / V tile per barrier when walked one by one). The
// walk runs down, so warps 2-3's accumulators are still zero there; after the last pair they hand their fp32
// partial to warps 0-1 through shared memory (the second stage) and go on with their own rows.
// ILV (QREG): a sub-tile fully visible to the block's rows, without rab, in 16-key groups, S of group g, P V of g - 2
// and the SiLU of g - 1 issued together (one basic block: ptxas interleaves the MUFU ops with the MMAs).
// RABS (QREG, K / V double-buffered; launched only with rab): the rab tile of each KV tile (BM rows x BN keys) copied
// into shared memory by cp.async with the tile's K / V (16-byte chunks, rows past lk and keys past lk zero-filled),
// one buffer per stage (fwd_rab_smem_in_q: in Q's buffer, free once Q is in registers, where it fits, else behind
// the tile's shared memory), and the score pass reads it there (a 32-bit word per pair of keys, chunks swizzled by
// the row: conflict-free). Without it the pass loads every element from global memory after the sub-tile's S MMAs.
// RABM (RABS, QREG): the tensor cores add rab after S's MMAs (the per-score add's order): per m16 tile and 8 keys an
// m16n8k8 MMA with A = the rab rows x 8 keys (ldmatrix from the buffer, conflict-free) and B = s I, I the 8 x 8
// identity, s = 1 (alpha / 2 with Q scaled: a power of two, exact in bf16), instead of an LDS per key pair and an
// unpack and FADD / FFMA per score.
// RABW (RABM, 64-key sub-tiles, two per KV tile): rab's tiles per sub-tile, each warp copying (and waiting for) its
// own rows, so no block barrier guards them: two slots of BM x BNS (slot 0 behind the tile's shared memory, slot 1 in
// Q's buffer), the sub-tile 0 rab of KV tile n + 1 into slot 0 once the warp is past sub-tile 0 of tile n, the sub-tile
// 1 rab of tile n into slot 1 at tile n's start (its own cp.async group ahead of the K / V copies', so that the
// wait before sub-tile 1 leaves those in flight): one sub-tile of lead, as with a whole tile's rab per stage.
// RABF (RABS): a rab tile within the rows and keys of lk (block-uniform) copied without predicates, from one pointer
// per thread and a row step (about 30 instructions per thread instead of 150 for 8 chunks); in the unscaled
// Q-in-registers body also RABI: S's accumulators start as the rab tile's values (no FADD per score, no zeroing).
// RABX (bits): kFwdRabLdsm, RABI's rab pairs by ldmatrix.x4; kFwdRabLaneOnce, RABW's lane address parts (K / V
// fragments, the rab slot) formed once per block and passed through opaque() per sub-tile (one MOV each, so that
// nvcc does not hoist the sub-tile's 16 derived addresses; ptxas had recomputed them from the opaque lane id).
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool SPLIT,
          bool QREG = false, bool PAIRKV = false, bool QSCALE = false, bool QEARLY = false, bool ILV = false,
          bool XADD = false, bool PF = false, bool RABS = false, bool RABM = false, bool RABW = false,
          bool RABF = false, int RABX = 0>
__device__ __forceinline__ void hstu_fwd_block(const HstuParams& p) {
  constexpr int NT = NWARPS * 32;
  constexpr int MT = BM * PAIR / (16 * NWARPS);  // m16 tiles per warp
  constexpr int NTILES = BNS / 8 / PAIR;         // n8 tiles of S per m16 tile (the warp's keys of one sub-tile)
  constexpr int DTILES = D / 8 / PAIR;           // n8 tiles of O per m16 tile (the warp's columns)
  constexpr int KSW = BNS / 16 / PAIR;           // k16 steps of P V over the warp's own keys
  static_assert(MT >= 1 && (BM * PAIR) % (16 * NWARPS) == 0 && NWARPS % PAIR == 0, "bad tile config");
  static_assert(BN % BNS == 0, "sub-tile must divide the KV tile");
  static_assert(!QREG || (PAIR == 1 && !SPLIT && SKIP == 0), "Q in registers: the plain body");
  static_assert(!QSCALE || (QREG && std::is_same<T, __nv_bfloat16>::value), "Q scaled: the bf16 Q registers");
  static_assert(!QEARLY || !PAIRKV, "Q's copy before the mask's setup: the plain or split body");
  static_assert(!ILV || (QREG && STAGES == 2), "the interleaved groups: the Q-in-registers body");
  static_assert(!XADD || (PAIR == 2 && !QREG && !PAIRKV && !SPLIT), "xadd addresses: the warp pairs' body");
  static_assert(!PF || (XADD && SKIP == 0 && STAGES == 1), "fragments ahead: the xadd pairs, no skip");
  static_assert(!RABS || (SKIP == 0 && !SPLIT && !PAIRKV && (BN == 64 || RABW) &&
                          ((QREG && STAGES == 2 && PAIR == 1) || (XADD && STAGES == 1 && PAIR == 2))),
                "rab tiles in shared memory: the plain Q-in-registers body, the warp pairs' xadd body");
  static_assert(!RABM || (RABS && QREG), "rab by the tensor cores: the Q-in-registers rab body");
  // RABF and RABI (with RABF in the unscaled Q-in-registers rab body: D = 128's FwdSm80QregRabF128) not in sm_80
  // code: D = 128's kernel spilled 80 B there with them (it runs only where two of its blocks fit per SM, not on the
  // A100); its sm_80 code is the predicated copies' and the add after S. RABX neither: D = 64's RABH spilled 12 B
  // there (FwdSm80QregRabW runs only where two of its 98 KB blocks fit per SM, not on the A100)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
  constexpr bool kRabF = false;
  constexpr int kRabX = 0;
#else
  constexpr bool kRabF = RABF;
  constexpr int kRabX = RABX;
#endif
  constexpr bool RABI = kRabF && RABS && QREG && !QSCALE && !RABM && !ILV && STAGES == 2;
  constexpr bool RABL = RABI && (kRabX & kFwdRabLdsm);
  constexpr bool RABH = RABW && (kRabX & kFwdRabLaneOnce);
  constexpr bool RABE = (kRabX & kFwdRabEvict) != 0;
  static_assert(!(RABX & kFwdRabLaneOnce) || RABW, "the lane parts once: the warps' rab slots");
  static_assert(!(RABX & kFwdRabEvict) || RABW || RABF, "evict-first rab copies: the copies without predicates");
  static_assert(!RABW || (RABM && STAGES == 2 && BN == 2 * BNS && BNS == 64 && MT == 2 && BM * D * 2 == BM * BNS * 2),
                "the warps' rab slots: two 64-key sub-tiles per KV tile, 32 rows per warp, slot 1 = Q's buffer");
  static_assert(!PAIRKV || (SKIP == 4 && STAGES == 2 && PAIR == 1 && !SPLIT && NWARPS == 4 && MT * 32 == BM / 2),
                "paired KV tiles: the 4-warp context body");
  using Tile = FwdSm80Tile<D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR>;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ < 900
  // sm86 / sm89 (99 KB per block): a tile over it is never launched there (launch_hstu_fwd_candidate)
  if constexpr (Tile::kSmem > 99 * 1024) {
    __trap();
    return;
  }
#endif
  using L = SmemLayout<D>;
  constexpr uint32_t kTileBytes = BN * D * 2;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sQ0 = smem_u32(smem);
  // a K / V fragment's address, base + (lane ^ swz); in sm_80 code QREG at D = 128 forms it as ((the sub-tile's
  // offset + lane) ^ swz) + the smem base (the offset 8 KB-aligned, above the lane's and the swizzle's bits): the
  // loop-variant offset keeps ptxas from hoisting the sub-tile's 16 addresses out of the loop into registers, which
  // spilled there at 255 registers (the sm_86 / sm_89 / sm_90a code spills with this form and not without it)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
  constexpr bool kKvPerUse = QREG && D == 128;
#else
  constexpr bool kKvPerUse = false;
#endif
  auto kv_addr = [&](uint32_t base, uint32_t t, int r, int col) -> uint32_t {
    if constexpr (XADD) {  // (t's rows below 16 or r's bit, its chunk below 8: L::xadd's condition)
      return base + L::xadd(t, r, col);
    } else if constexpr (kKvPerUse) {
      static_assert(BNS * D * 2 % 8192 == 0 && kTileBytes % 8192 == 0 && BM * D * 2 % 8192 == 0, "8 KB-aligned");
      return (((base - sQ0) + t) ^ L::swz(r, col)) + sQ0;
    } else {
      return base + (t ^ L::swz(r, col));
    }
  };

  // Grid (n G, batch chunks, heads), G = 2^g sequences per chunk (launch_hstu_fwd): block x runs query tile rank
  // x >> g of batch G y + x % G; rank 0 is the heaviest tile (causal: the last; with contexts tile 0, which walks
  // every key tile, then the last ones). gridDim.x = n 2^g, so g = clz(n) - clz(gridDim.x): no division, and every
  // term is cheap to recompute from the grid (the 128-register kernels keep none of it live through the loop).
  // SPLIT: the work list's item blockIdx.y (its query tile and chunk), head blockIdx.x.
  const int4* list = reinterpret_cast<const int4*>(reinterpret_cast<const char*>(p.fwd_tile_counter) +
                                                   fwd_sm80_split_counter_bytes(p.total_q / BM + p.batch, p.heads));
  auto block_tile = [&](uint32_t bx, uint32_t by, int& bt, int& m0t) {
    if constexpr (SPLIT) {
      const int4 it = list[2 + 2 * by];
      bt = it.x;
      m0t = it.y;
    } else if constexpr (kFwdSm80Lpt<NWARPS, MINB>) {
      const int n_m = (p.max_seqlen_q + BM - 1) / BM;
      const int lg = __clz(n_m) - __clz(static_cast<int>(gridDim.x));
      const int rank = static_cast<int>(bx >> lg);
      bt = static_cast<int>((by << lg) + (bx & ((1u << lg) - 1)));
      m0t = (p.num_contexts != nullptr ? (rank == 0 ? 0 : n_m - rank) : n_m - 1 - rank) * BM;
    } else {  // grid (n, batch, heads), each sequence's heaviest (causal) tiles first
      bt = static_cast<int>(by);
      m0t = static_cast<int>(gridDim.x - 1 - bx) * BM;
    }
  };
  // SPLIT: a programmatic dependent launch behind the list's kernel (launch_hstu_fwd_split, sm_90+) waits for it
  // before the first read of the list (a no-op in a plain launch)
  if constexpr (SPLIT) accel::griddep_wait();
  int b, m0;
  if constexpr (SPLIT && QEARLY) {  // the list's bound and the item loaded together (one L2 latency, not two; the
    // list has room for every y of the grid): empty blocks at the end
    const int items = list[0].x;
    block_tile(blockIdx.x, blockIdx.y, b, m0);
    if (static_cast<int>(blockIdx.y) >= items) return;
  } else {
    if constexpr (SPLIT) {
      if (static_cast<int>(blockIdx.y) >= list[0].x) return;  // (the list's bound: empty blocks at the end)
    }
    block_tile(blockIdx.x, blockIdx.y, b, m0);
  }
  if (b >= p.batch) return;
  // SPLIT: the block's item (re-read where used, not kept live); its second half {Q's first row, Q's rows in the
  // tile, the sequence's first key, its keys} at split_item() + 1
  auto split_item = [&]() { return list + 2 + 2 * blockIdx.y; };
  // the head (re-derived where used)
  auto head_u = [&]() -> uint32_t { return SPLIT ? blockIdx.x : blockIdx.z; };
  auto head = [&]() -> int { return static_cast<int>(head_u()); };
  const int h = head();
  // SPLIT && QEARLY (lean: no kFwdSm80SplitPlain): Q's copy and the walk's first K / V copies issued from the item
  // alone, before the sequence's info is loaded (the item's latency, not the item's and then seq_info's, ahead of
  // them); else as the other kernels, from seq_info
  const bool early = SPLIT && QEARLY && !(p.fwd_sm80_cfg & kFwdSm80SplitPlain);
  if constexpr (SPLIT && QEARLY) {
    if (early) {
      const int4 at = __ldg(split_item() + 1);
      const int walk = __ldg(&split_item()->w);  // (nb_end | nb_begin << 16)
      const int t = static_cast<int>(threadIdx.x);
      const T* q0 = static_cast<const T*>(p.q) + (int64_t)at.x * p.q_row_stride + h * p.q_head_stride;
      load_tile_async<BM, D, NT>(sQ0, q0, p.q_row_stride, at.y, t);
      if ((walk & 0xffff) > (walk >> 16)) {  // the walk's last KV tile (its first step)
        const int n0 = ((walk & 0xffff) - 1) * BN;
        const int64_t row = at.z + n0;
        const uint32_t sKV0 = sQ0 + BM * D * 2;
        const T* k0 = static_cast<const T*>(p.k) + row * p.k_row_stride + h * p.k_head_stride;
        load_tile_async<BN, D, NT>(sKV0, k0, p.k_row_stride, at.w - n0, t);
        if constexpr (STAGES == 2) {
          const T* v0 = static_cast<const T*>(p.v) + row * p.v_row_stride + h * p.v_head_stride;
          load_tile_async<BN, D, NT>(sKV0 + BN * D * 2, v0, p.v_row_stride, at.w - n0, t);
        }
      }
      cp_async_commit();  // (the walk's first wait, or the epilogue's for an empty walk, covers them)
    }
  }
  const SeqInfo si = seq_info(p, b);
  if (m0 >= si.lq_alloc) return;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const SeqMask& mk = si.mask;

  const T* qg = static_cast<const T*>(p.q) + (int64_t)(si.q_start + m0) * p.q_row_stride + h * p.q_head_stride;
  const T* kg = static_cast<const T*>(p.k) + (int64_t)si.k_start * p.k_row_stride + h * p.k_head_stride;
  const T* vg = static_cast<const T*>(p.v) + (int64_t)si.k_start * p.v_row_stride + h * p.v_head_stride;
  // K / V of the sequence and head re-derived inside the main loop (an opaque batch index: a cached load, not
  // hoisted) rather than two 64-bit pointers kept live through it (the 4-warp D = 128 kernels sit at 255 registers).
  auto kv_rows = [&](const void* base, int64_t row_stride, int64_t head_stride) {
    int bb = static_cast<int>(opaque(static_cast<uint32_t>(b)));
    if constexpr (SPLIT) bb = static_cast<int>(lds_b32(smem_u32(smem) + Tile::kSmem + 20));
    return static_cast<const T*>(base) + (int64_t)p.cu_seqlens_k[bb] * row_stride +
           static_cast<int64_t>(head_u()) * head_stride;
  };

  // QEARLY: Q's copy issued before the mask's setup (the tile's full sub-tiles and KV walk, the row table), which
  // then runs while Q is in flight (the other kernels issue it behind that setup)
  if constexpr (QEARLY) {
    if (!early) load_tile_async<BM, D, NT>(sQ0, qg, p.q_row_stride, max(0, min(BM, si.lq - m0)), tid);
  }
  const int r0 = m0 + mk.offset;  // absolute position of the tile's first row
  // Inside the main loop only lk and the range of fully visible sub-tiles stay in registers; the rab path re-derives
  // its pointer, the mask of the sub-tiles that are not full reads the rows' key intervals from shared memory.
  const int lk = si.lk;
  int full_lo, full_hi;
  // (SKIP 4: the tiles with context rows, none of them has full sub-tiles; the 128-register tiles: the rule below
  // spilled 8 B in sm_80 code)
  if constexpr (SKIP == 4 || !kFwdSm80Lpt<NWARPS, MINB>) {
    mk.full_tiles(r0, r0 + BM, BNS, full_lo, full_hi);
  } else {
    // SeqMask::full_tiles gives a tile with target rows none; a target row sees every history key its window allows
    // (SeqMask::row_keys: up to hist where the window is open to the right), so the history sub-tiles that all of
    // the tile's rows see are full_tiles' with the targets counted as history, clipped to the history.
    SeqMask mh = mk;
    mh.hist = mk.lk;
    mh.full_tiles(r0, r0 + BM, BNS, full_lo, full_hi);
    full_hi = min(full_hi, mk.hist - BNS);
  }
  const int rows_used = max(0, min(BM, si.lq - m0));
  // Tiles [nb_begin, nb_end) less the masked gap [gap_begin, gap_end), walked down: after tile gap_end the next
  // one is gap_begin - 1 (gap_skip: 0 without a gap).
  int nb_begin, nb_end, gap_begin, gap_end;
  mk.key_tiles(r0, rows_used, BN, nb_begin, nb_end, gap_begin, gap_end);
  const int gap_skip = gap_end - gap_begin;
  if constexpr (SPLIT) {  // the item: chunk c of the k of the walk, its KV tiles [nb_begin, nb_end) (with the gap)
    const int ck = __ldg(&split_item()->z);  // (c | k << 16; w: nb_end | nb_begin << 16)
    if (threadIdx.x == 0) {  // its slot, c, its counter, k (fwd_split_sum; the query tile's slot total_q / BM +
      // batch is unique), m0 and b (the epilogue's, kv_rows': not live in the loop)
      const int slot = si.q_start / BM + b + m0 / BM;
      const int ctr = slot * p.heads + h;
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sQ0 + Tile::kSmem), "r"(slot),
                   "r"(ck & 0xffff), "r"(ctr), "r"(ck >> 16));
      asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(sQ0 + Tile::kSmem + 16), "r"(m0), "r"(b));
    }
    const int tiles = __ldg(&split_item()->w);
    nb_end = tiles & 0xffff;
    nb_begin = tiles >> 16;
    // every thread stores nb_begin (the same value): its own reads in the loop need no barrier
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sQ0 + Tile::kSmem + 24), "r"(nb_begin));
  }

  float acc_o[MT][DTILES][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < DTILES; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][i][e] = 0.f;

  const int warp_row0 = (warp / PAIR) * MT * 16;
  // PAIRKV: the warp whose rows this warp computes in the current step (warps 2-3 in a pair step: warp - 2)
  [[maybe_unused]] int vwarp = warp;
  const int wh = warp % PAIR;  // PAIR 2: the warp's half of the keys (S) and of the columns (O)
  const float half_alpha = 0.5f * p.alpha;
  // SKIP: keys >= warp_kend are masked for every row of this warp (the hull of its rows' key ranges); SKIP 4: the
  // warp's own fully visible sub-tiles [wfull_lo, wfull_hi] (as full_lo / full_hi for the block's rows).
  int warp_kend = lk, wfull_lo = 1, wfull_hi = 0;
  if constexpr (SKIP > 0) {
    const int wr0 = r0 + warp_row0, wr1 = min(wr0 + MT * 16, lk);
    warp_kend = 0;
    if (wr1 > wr0) {
      int kb, ke;
      mk.key_range(wr0, wr1, kb, ke);
      warp_kend = min(ke, lk);
    }
    if (SKIP == 4) {
      if (mk.ctx > r0) {  // a tile with context rows: the warp's own full sub-tiles
        mk.full_tiles(wr0, wr0 + MT * 16, BNS, wfull_lo, wfull_hi);
      } else {  // the others: the block's, and no skip
        wfull_lo = full_lo;
        wfull_hi = full_hi;
        warp_kend = INT_MAX / 2;
      }
      // every lane stores the warp's words (the same values): its own reads in the loop need no barrier
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sQ0 + Tile::kSmemWarp + warp * 16),
                   "r"(warp_kend), "r"(wfull_lo), "r"(wfull_hi), "r"(wr0));
    }
  }
  // SKIP 4: the sub-tile at n0 fully visible to the warp's rows; the warp's keys of it from n0 (BNS: all)
  auto warp_full_lim = [&](int n0, bool& wfull, int& wlim) {
    const uint4 lim = lds_b128(sQ0 + Tile::kSmemWarp + (PAIRKV ? vwarp : warp) * 16);  // (kend, lo, hi, -)
    const int kend = static_cast<int>(lim.x), lo = static_cast<int>(lim.y), hi = static_cast<int>(lim.z);
    wfull = n0 >= lo && n0 <= hi;
    wlim = wfull ? BNS : min(BNS, kend - n0);
  };

  // Each row's keys as two intervals (SeqMask::row_keys: its history keys, its target group's keys; the group-size
  // divisions once per row and block), behind Q and K / V in shared memory: the sub-tiles that are not fully visible
  // (the diagonal, contexts, windows, targets) read their rows' intervals there and turn them into bits, no division
  // and no mask field in the loop (allowed(r, j) per element took two divisions on target tiles).
  const uint32_t sRowKeys0 = sQ0 + (BM + STAGES * 2 * BN) * D * 2;
  // SPLIT: nb_begin from shared memory in the loop (not live through it)
  auto nb_first = [&]() {
    int v = nb_begin;
    if constexpr (SPLIT) v = static_cast<int>(lds_b32(sQ0 + Tile::kSmem + 24));
    return v;
  };
  // RABS: the rab tile of keys [n0, n0 + BN) into the buffer at dst (thread t: 16-byte chunk t % (BN / 8) of rows
  // t / (BN / 8) + i NT / (BN / 8); chunk c of row r at (c ^ (r & 7)) 16 bytes; rows and keys past lk zero-filled)
  constexpr uint32_t kRabBytes = BM * BN * 2;
  [[maybe_unused]] const uint32_t sRab0 = sQ0 + (fwd_rab_smem_in_q<D, BM, BN, QREG>() ? 0 : Tile::kSmem);
  [[maybe_unused]] auto load_rab = [&](uint32_t dst, int n0) {
    constexpr int CH = BN / 8, RPI = NT / CH;
    static_assert(!RABS || (RPI % 8 == 0 && BM % RPI == 0), "whole swizzle periods per pass");
    if constexpr (kRabF) {
      if (r0 + BM <= lk && n0 + BN <= lk) {
        const int t = static_cast<int>(opaque(static_cast<uint32_t>(threadIdx.x)));
        const int rr = t / CH, c = t % CH;
        const T* g = static_cast<const T*>(p.rab) + static_cast<int64_t>(opaque(static_cast<uint32_t>(b))) *
                     p.rab_batch_stride + head() * p.rab_head_stride + (int64_t)(r0 + rr) * p.rab_row_stride +
                     n0 + c * 8;
        const int64_t step = RPI * p.rab_row_stride;
        const uint32_t st = dst + rr * (BN * 2) + ((c ^ (rr & 7)) * 16);
        if constexpr (RABE) {
          const uint64_t pol = l2_evict_first_policy();
#pragma unroll
          for (int i = 0; i < BM / RPI; ++i) cp_async_16_policy(st + i * RPI * (BN * 2), g + i * step, pol);
        } else {
#pragma unroll
          for (int i = 0; i < BM / RPI; ++i) cp_async_16(st + i * RPI * (BN * 2), g + i * step);
        }
        return;
      }
    }
    int rb, rm0;
    block_tile(blockIdx.x, blockIdx.y, rb, rm0);
    const int t = static_cast<int>(opaque(static_cast<uint32_t>(threadIdx.x)));
    const int rr = t / CH, c = t % CH;
    const int j0 = n0 + c * 8;
    const int bytes = min(16, max(0, lk - j0) * 2);
    const T* base = static_cast<const T*>(p.rab) + rb * p.rab_batch_stride + head() * p.rab_head_stride;
    const T* g = base + (int64_t)(r0 + rr) * p.rab_row_stride + j0;
    const uint32_t st = dst + rr * (BN * 2) + ((c ^ (rr & 7)) * 16);
#pragma unroll
    for (int i = 0; i < BM / RPI; ++i) {
      const int n = r0 + rr + i * RPI < lk ? bytes : 0;
      cp_async_16_n(st + i * RPI * (BN * 2), n > 0 ? g + (int64_t)i * RPI * p.rab_row_stride : base, n);
    }
  };
  // RABW: slot s's address (slot 0 behind the tile, slot 1 Q's buffer), and the warp's 32 rows x BNS keys of rab from
  // key n0 into slot s (lane l: 16-byte chunk l % 8 of rows l / 8 + 4 i, whole 128-byte lines per 8 lanes; chunk c of
  // row r at (c ^ (r & 7)) 16 bytes) from the lane's row pointer and smem offset, formed once per block. Within the
  // rows and keys of lk (the warp-uniform common case) no predicate; else rows and keys past lk zero-filled.
  [[maybe_unused]] auto rab_slot = [&](int s) -> uint32_t { return s == 0 ? sQ0 + Tile::kSmem : sQ0; };
  [[maybe_unused]] const T* rab_lane = nullptr;  // (chunk l % 8 of the lane's first row, key 0)
  [[maybe_unused]] uint32_t rab_dl = 0;          // (the lane's first row and chunk in a slot)
  if constexpr (RABW) {
    const int l = static_cast<int>(threadIdx.x % 32), rr = l / 8, c = l % 8;
    rab_lane = static_cast<const T*>(p.rab) + static_cast<int64_t>(b) * p.rab_batch_stride +
               h * p.rab_head_stride + (int64_t)(r0 + warp_row0 + rr) * p.rab_row_stride + c * 8;
    rab_dl = (warp_row0 + rr) * (BNS * 2) + (c ^ rr) * 16;
  }
  [[maybe_unused]] auto load_rab_w = [&](uint32_t dst, int n0) {
    const T* g = rab_lane + n0;
    const int64_t step = 4 * p.rab_row_stride;
    const uint32_t d0 = dst + rab_dl, d1 = dst + (rab_dl ^ 64);  // (rows rr + 4 i: r & 7 = rr + 4 (i & 1))
    if (r0 + warp_row0 + 32 <= lk && n0 + BNS <= lk) {  // (warp-uniform)
      if constexpr (RABE) {
        // (the slot's base through a shuffle: a per-lane register, so that ptxas does not fold it into a uniform
        // register beside the policy; with it folded (nvcc 13.0) the copies took a [R + UR] form with an odd
        // descriptor register, and branch rabf39's kernel of that form faulted with an illegal instruction)
        const uint32_t sb = __shfl_sync(0xffffffffu, dst, 0), e0 = sb + rab_dl, e1 = sb + (rab_dl ^ 64);
        const uint64_t pol = l2_evict_first_policy();
#pragma unroll
        for (int i = 0; i < 8; ++i) cp_async_16_policy((i & 1 ? e1 : e0) + i * 4 * (BNS * 2), g + i * step, pol);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) cp_async_16((i & 1 ? d1 : d0) + i * 4 * (BNS * 2), g + i * step);
      }
    } else {
      const int l = static_cast<int>(threadIdx.x % 32), rw = r0 + warp_row0 + l / 8;
      const int bytes = min(16, max(0, lk - (n0 + (l % 8) * 8)) * 2);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int n = rw + 4 * i < lk ? bytes : 0;
        cp_async_16_n((i & 1 ? d1 : d0) + i * 4 * (BNS * 2), n > 0 ? g + i * step : p.rab, n);
      }
    }
  };
  if (nb_end > nb_begin) {
    static_assert(NT >= BM && BM % 32 == 0, "one row per thread, whole warps");
    auto row_table = [&]() {
      if (tid < BM) {
        int hlo, hhi, tlo, thi;
        mk.row_keys(r0 + tid, hlo, hhi, tlo, thi);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sRowKeys0 + tid * 16), "r"(hlo), "r"(hhi),
                     "r"(tlo), "r"(thi));
      }  // (visible after the loop's first barrier)
    };
    if constexpr (!QEARLY) row_table();
    // PAIRKV: the walk's tiles from nb_pair up are walked in pairs (nb, nb - 1): KV tiles past every key of the
    // rows BM / 2 .. BM - 1 (none in a tile without context rows, with a masked gap, or where fewer than two are left)
    [[maybe_unused]] int nb_pair = INT_MAX;
    if constexpr (PAIRKV) {
      const int hr0 = r0 + BM / 2, hr1 = min(r0 + BM, lk);
      int help = nb_begin;
      if (hr1 > hr0) {
        int kb, ke;
        mk.key_range(hr0, hr1, kb, ke);
        help = max(nb_begin, (min(ke, lk) + BN - 1) / BN);
      }
      const int pairs = mk.ctx > r0 && gap_skip == 0 ? (nb_end - help) / 2 : 0;
      if (pairs > 0) nb_pair = nb_end - 2 * pairs;
    }
    // smem: Q | stage 0: K, V | stage 1: K, V (STAGES 1: Q | K | V) | row keys
    const uint32_t sKV0 = sQ0 + BM * D * 2;
    if constexpr (!QEARLY) load_tile_async<BM, D, NT>(sQ0, qg, p.q_row_stride, rows_used, tid);
    if (!early) {  // (early: issued from the item above)
      const int n0 = (nb_end - 1) * BN;
      load_tile_async<BN, D, NT>(sKV0, kg + (int64_t)n0 * p.k_row_stride, p.k_row_stride, si.lk - n0, tid);
      if constexpr (STAGES == 2) {
        load_tile_async<BN, D, NT>(sKV0 + kTileBytes, vg + (int64_t)n0 * p.v_row_stride, p.v_row_stride,
                                   si.lk - n0, tid);
      }
      if constexpr (RABW) {
        load_rab_w(rab_slot(0), n0);
      } else if constexpr (RABS && !fwd_rab_smem_in_q<D, BM, BN, QREG>()) {
        load_rab(sRab0, n0);
      }
      if constexpr (PAIRKV) {  // the first pair's second tile into stage 1
        if (nb_end - 2 >= nb_pair) {
          const int n1 = n0 - BN;
          load_tile_async<BN, D, NT>(sKV0 + 2 * kTileBytes, kg + (int64_t)n1 * p.k_row_stride, p.k_row_stride,
                                     si.lk - n1, tid);
          load_tile_async<BN, D, NT>(sKV0 + 3 * kTileBytes, vg + (int64_t)n1 * p.v_row_stride, p.v_row_stride,
                                     si.lk - n1, tid);
        }
      }
    }
    cp_async_commit();
    if constexpr (QEARLY) row_table();  // (behind the first copies: its divisions run while they are in flight)
    if constexpr (SPLIT && QEARLY) {
      // the query tile's first partial (fwd_split_sum, lean = early): the list's base for its slot x heads + h,
      // loaded here by the last thread (its latency runs with the first copies'; thread 0's would hold its warp's
      // copies back); a walk of one chunk never reads it
      if (tid == NT - 1 && early) {
        const int slot = si.q_start / BM + b + m0 / BM;
        const int first = p.fwd_tile_counter[(p.total_q / BM + p.batch) * p.heads + slot] * p.heads + h;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sQ0 + Tile::kSmem + 28), "r"(first));
      }
    }
    // QREG: the warp's Q fragments, once Q (with the first K / V) landed
    [[maybe_unused]] uint32_t qf[QREG ? D / 16 : 1][MT][4];
    if constexpr (QREG) {
      cp_async_wait<0>();
      __syncthreads();
      const uint32_t tQ = L::swz(warp_row0 + lane % 16, (lane / 16) * 8);
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) ldsm_x4(qf[ks][mt], sQ0 + (tQ ^ L::swz(mt * 16, ks * 16)));
      if constexpr (RABS && fwd_rab_smem_in_q<D, BM, BN, QREG>()) {  // every warp has its Q fragments: the first KV
        // tile's rab tile into Q's buffer (else issued with its K / V)
        __syncthreads();
        load_rab(sRab0, (nb_end - 1) * BN);
        cp_async_commit();
      }
      if constexpr (QSCALE) {  // Q x alpha / 2 (a power of two: exact), so S is the SiLU's h
        const __nv_bfloat162 c2 = __float2bfloat162_rn(half_alpha);
        const uint32_t c = *reinterpret_cast<const uint32_t*>(&c2);
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int q = 0; q < 4; ++q)
              asm("fma.rn.bf16x2 %0, %1, %2, %3;\n"
                  : "=r"(qf[ks][mt][q])
                  : "r"(qf[ks][mt][q]), "r"(c), "r"(0x80008000u));
      }
    }

    // RABW: the identity word of rab_mma's B (lane l: s at k = n, n = l / 4, k = 2 (l % 4) + {0, 1}), once per block
    [[maybe_unused]] uint32_t rw_id = 0;
    if constexpr (RABW) {
      const int gr = lane / 4, tc = (lane % 4) * 2;
      const float sc = QSCALE ? half_alpha : 1.f;
      rw_id = pack2<T>(gr == tc ? sc : 0.f, gr == tc + 1 ? sc : 0.f);
    }
    // RABH: the lane parts of the sub-tiles' K / V fragment addresses and of the rab slot address, once per block
    [[maybe_unused]] uint32_t rh_k = 0, rh_v = 0, rh_r = 0;
    if constexpr (RABH) {
      rh_k = L::swz(lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8);
      rh_v = L::swz(lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8);
      rh_r = (warp_row0 + lane % 16) * (BNS * 2) + (((lane / 16) ^ (lane % 8)) * 16);
    }
    int stage = 0;
    constexpr int SK = SKIP == 4 ? 2 : SKIP;  // (SKIP 4: 2 in the tiles with context rows, else no skip)
    for (int nb = nb_end - 1; nb >= nb_first(); nb -= 1 + (nb == gap_end ? gap_skip : 0)) {
      // PAIRKV: a pair step (tiles nb and nb - 1, both stages), and this warp's tile, stage and rows in it
      const bool pr = PAIRKV && nb - 1 >= nb_pair;
      const int hw = pr && warp >= 2 ? 1 : 0;
      const int nbw = nb - hw;
      const int sw = pr ? hw : stage;
      if constexpr (PAIRKV) vwarp = warp - 2 * hw;
      const int vrow0 = PAIRKV ? vwarp * MT * 16 : warp_row0;
      cp_async_wait<0>();
      // STAGES 2: K, V of tile nb landed; every warp is done with the other stage (the tile before).
      // STAGES 1: K of tile nb (and Q) landed; every warp is done with V (the tile before).
      __syncthreads();
      if constexpr (RABW) {  // sub-tile 1's rab (slot 1: every warp is past its Q fragments and tile nb + 1)
        load_rab_w(rab_slot(1), nb * BN + BNS);
        cp_async_commit();
      }
      if constexpr (STAGES == 2) {
        if (!pr && nb > nb_first()) {
          const int nn0 = (nb - 1 - (nb == gap_end ? gap_skip : 0)) * BN;
          const uint32_t ot = opaque(tid);
          const uint32_t sKn = sKV0 + (stage ^ 1) * 2 * kTileBytes;
          const T* kn = kv_rows(p.k, p.k_row_stride, p.k_head_stride) + (int64_t)nn0 * p.k_row_stride;
          const T* vn = kv_rows(p.v, p.v_row_stride, p.v_head_stride) + (int64_t)nn0 * p.v_row_stride;
          load_tile_async<BN, D, NT, true>(sKn, kn, p.k_row_stride, lk - nn0, ot);
          load_tile_async<BN, D, NT, true>(sKn + kTileBytes, vn, p.v_row_stride, lk - nn0, ot);
          if constexpr (RABS && !RABW) load_rab(sRab0 + (stage ^ 1) * kRabBytes, nn0);
          cp_async_commit();
        } else if constexpr (RABW) {
          cp_async_commit();  // (an empty group: sub-tile 1's wait leaves the newest group in flight)
        }
      } else {  // V of tile nb, during Q K^T
        const int n0 = nb * BN;
        const T* vn = kv_rows(p.v, p.v_row_stride, p.v_head_stride) + (int64_t)n0 * p.v_row_stride;
        load_tile_async<BN, D, NT, true>(sKV0 + kTileBytes, vn, p.v_row_stride, lk - n0, opaque(tid));
        cp_async_commit();
      }

#pragma unroll 1
      for (int sub = 0; sub < BN / BNS; ++sub) {
        const int n0 = nbw * BN + sub * BNS;
        if constexpr (RABW) {
          if (sub == 1) {  // the warp's sub-tile 1 rab landed (the K / V copies may not have); the warp is past slot 0
            cp_async_wait<1>();
            __syncwarp();
            if (nb > nb_first()) {
              load_rab_w(rab_slot(0), (nb - 1 - (nb == gap_end ? gap_skip : 0)) * BN);
              cp_async_commit();
            }
          }
        }
        const uint32_t sQ = sQ0;
        const uint32_t sK = sKV0 + sw * 2 * kTileBytes + sub * BNS * D * 2;
        const uint32_t sV = sK + kTileBytes;
        const int kw0 = n0 + wh * (BNS / PAIR);  // the warp's first key of S
        // SK: this warp's rows see none of the sub-tile's keys from n0 + lim on (lim <= 0: none of them); work: the
        // warp's keys of S (PAIR 2: its half) start below lim.
        bool full = n0 >= full_lo && n0 <= full_hi;
        int lim = SK > 0 && !full ? min(BNS, warp_kend - n0) : BNS;
        if constexpr (SKIP == 4) warp_full_lim(n0, full, lim);
        const bool work = SK == 0 || wh * (BNS / PAIR) < lim;
        if (SK == 2 && STAGES == 2 && !work) continue;  // warp-uniform: nothing to compute here
        // Per-thread parts of the ldmatrix addresses, recomputed from an opaque lane id each sub-tile so they are
        // not hoisted out of the loop (see opaque()).
        const int ln = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
        const uint32_t tQ = L::swz(vrow0 + ln % 16, (ln / 16) * 8);
        const uint32_t tK = RABH ? opaque(rh_k) : L::swz(ln % 8 + (ln / 16) * 8, ((ln / 8) % 2) * 8);
        const uint32_t tV = RABH ? opaque(rh_v) : L::swz(ln % 8 + ((ln / 8) % 2) * 8, (ln / 16) * 8);
        float acc_s[MT][NTILES][4];
        if constexpr (!RABI) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < NTILES; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc_s[mt][i][e] = 0.f;
        }

        // RABS: rab added to S's n8 tiles [nt0, nt1): the pair of keys (jw, jw + 1) of row rw (the warp's row
        // lane / 4 of m16 tile mt, + 8 in the second half) as one 32-bit word, byte (rw * BN + (chunk ^ (rw & 7)) * 8)
        // * 2 + (lane % 4) * 4 of the stage's buffer, chunk = the n8 tile's in the KV tile; rw & 7 = lane / 4
        [[maybe_unused]] auto rab_add = [&](int nt0, int nt1) {
          const int lr = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t tr = sRab0 + (STAGES == 2 ? stage * kRabBytes : 0) + (warp_row0 + lr / 4) * (BN * 2) +
                              (lr % 4) * 4;
#pragma unroll
          for (int nt = nt0; nt < nt1; ++nt) {
            const uint32_t tc = tr + ((((kw0 - nbw * BN) / 8 + nt) ^ (lr / 4)) * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const uint32_t w = lds_b32(tc + (mt * 16 + hf * 8) * (BN * 2));
                const float rv[2] = {unpack_lo<T>(w), unpack_hi<T>(w)};
#pragma unroll
                for (int o = 0; o < 2; ++o) {
                  float& a = acc_s[mt][nt][2 * hf + o];
                  a = QSCALE ? fmaf(rv[o], half_alpha, a) : a + rv[o];
                }
              }
          }
        };
        // RABI: S's accumulators start as the sub-tile's rab (the pairs rab_add reads, unpacked), so the MMAs add
        // Q K^T to it: no FADD per score and no zeroing, and the loads run ahead of the MMAs, not after them
        // RABL: the pairs by ldmatrix.x4 per m16 tile and n8 tiles 2 q, 2 q + 1 (matrices: rows 0-7 / 8-15 of the
        // tile x the two chunks, so lane l gets the words of rows l / 4, l / 4 + 8 at word l % 4, as the LDS below;
        // the lane's address rows l % 16, chunk l / 16 ^ l % 8, XORed by 16 (c0 + 2 q): c0 + 2 q is even)
        if constexpr (RABL) {
          static_assert(NTILES % 2 == 0 && BN == 64, "pairs of n8 tiles, 8 chunks per rab row");
          const int lr = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t ta = sRab0 + stage * kRabBytes + (warp_row0 + lr % 16) * (BN * 2) +
                              (((lr / 16) ^ (lr % 8)) * 16);
          const uint32_t c0 = static_cast<uint32_t>(kw0 - nbw * BN) / 8;
#pragma unroll
          for (int q = 0; q < NTILES / 2; ++q)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              uint32_t ra[4];
              ldsm_x4(ra, (ta ^ ((c0 + 2 * q) * 16)) + mt * 16 * (BN * 2));
#pragma unroll
              for (int m = 0; m < 4; ++m) {
                acc_s[mt][2 * q + m / 2][2 * (m % 2)] = unpack_lo<T>(ra[m]);
                acc_s[mt][2 * q + m / 2][2 * (m % 2) + 1] = unpack_hi<T>(ra[m]);
              }
            }
        } else if constexpr (RABI) {
          const int lr = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t tr = sRab0 + stage * kRabBytes + (warp_row0 + lr / 4) * (BN * 2) + (lr % 4) * 4;
#pragma unroll
          for (int nt = 0; nt < NTILES; ++nt) {
            const uint32_t tc = tr + ((((kw0 - nbw * BN) / 8 + nt) ^ (lr / 4)) * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const uint32_t w = lds_b32(tc + (mt * 16 + hf * 8) * (BN * 2));
                acc_s[mt][nt][2 * hf] = unpack_lo<T>(w);
                acc_s[mt][nt][2 * hf + 1] = unpack_hi<T>(w);
              }
          }
        }
        // RABM: rab's keys [16 g, 16 g + 16) of the warp's sub-tile added to S's n8 tiles 2 g, 2 g + 1 by m16n8k8
        // MMAs with rab as A (16 rows x 8 keys: ldmatrix of the m16 tile's rows, Q's pattern; row & 7 = l % 8 for the
        // swizzle) and B the 8 x 8 identity times s (lane l's word: s at k = n, n = l / 4, k = 2 (l % 4) + {0, 1}): one
        // register, not the 16 x 16 identity's four
        // RABW: the lane's slot address once per sub-tile; chunk (2 g + l / 16) ^ (l % 8) is (l / 16 ^ l % 8) ^ 2 g,
        // so group g's address is the lane's XOR 32 g (the slots' rows are 128-byte aligned)
        [[maybe_unused]] uint32_t rw_ta = 0;
        if constexpr (RABH) {
          rw_ta = rab_slot(sub) + opaque(rh_r);
        } else if constexpr (RABW) {
          const int lr = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          rw_ta = rab_slot(sub) + (warp_row0 + lr % 16) * (BNS * 2) + (((lr / 16) ^ (lr % 8)) * 16);
        }
        [[maybe_unused]] auto rab_mma = [&](int g) {
          if constexpr (RABW) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              uint32_t ra[4];
              ldsm_x4(ra, (rw_ta ^ (32 * g)) + mt * 16 * (BNS * 2));
              mma_1688<T>(acc_s[mt][2 * g], ra[0], ra[1], rw_id);
              mma_1688<T>(acc_s[mt][2 * g + 1], ra[2], ra[3], rw_id);
            }
            return;
          }
          const int lr = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const int gr = lr / 4, tc = (lr % 4) * 2;
          const float sc = QSCALE ? half_alpha : 1.f;
          const uint32_t id = pack2<T>(gr == tc ? sc : 0.f, gr == tc + 1 ? sc : 0.f);
          const uint32_t ta = sRab0 + (STAGES == 2 ? stage * kRabBytes : 0) + (warp_row0 + lr % 16) * (BN * 2) +
                              ((((kw0 - nbw * BN) / 8 + 2 * g + lr / 16) ^ (lr % 8)) * 16);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t ra[4];
            ldsm_x4(ra, ta + mt * 16 * (BN * 2));
            mma_1688<T>(acc_s[mt][2 * g], ra[0], ra[1], id);
            mma_1688<T>(acc_s[mt][2 * g + 1], ra[2], ra[3], id);
          }
        };
        if constexpr (ILV) {
          if (full && (RABS || p.rab == nullptr)) {  // (block-uniform; RABS: rab added per group)
            // 16-key group g: S of its keys (two n8 tiles per m16 tile) over D, its P (the A fragment of k16 step g
            // of P V), its P V over D
            constexpr int G = BNS / 16;
            uint32_t pg[MT][G][4];
            auto s_grp = [&](int g) {
#pragma unroll
              for (int ks = 0; ks < D / 16; ++ks) {
                uint32_t bb[4];
                ldsm_x4(bb, kv_addr(sK, tK, g * 16, ks * 16));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                  mma_16816<T>(acc_s[mt][2 * g], qf[ks][mt], bb[0], bb[1]);
                  mma_16816<T>(acc_s[mt][2 * g + 1], qf[ks][mt], bb[2], bb[3]);
                }
              }
              if constexpr (RABM) rab_mma(g);  // (after S, as the plain body: the same sums)
            };
            auto silu_grp = [&](int g) {
              if constexpr (RABS && !RABM) rab_add(2 * g, 2 * g + 2);
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  const float* a = acc_s[mt][2 * g + q / 2] + 2 * (q % 2);
                  pg[mt][g][q] = pack2<T>(silu_from_half(QSCALE ? a[0] : a[0] * half_alpha),
                                          silu_from_half(QSCALE ? a[1] : a[1] * half_alpha));
                }
            };
            auto pv_grp = [&](int g) {
#pragma unroll
              for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t bb[4];
                ldsm_x4_t(bb, kv_addr(sV, tV, g * 16, dp * 16));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                  mma_16816<T>(acc_o[mt][2 * dp], pg[mt][g], bb[0], bb[1]);
                  mma_16816<T>(acc_o[mt][2 * dp + 1], pg[mt][g], bb[2], bb[3]);
                }
              }
            };
#pragma unroll
            for (int t = 0; t < G + 2; ++t) {
              if (t < G) s_grp(t);
              if (t >= 2) pv_grp(t - 2);
              if (t >= 1 && t <= G) silu_grp(t - 1);
            }
            continue;
          }
        }
        if (work) {
          // S = Q K^T
          if constexpr (PF) {  // (k16 step ks + kFwdPf's Q and K fragments loaded before step ks's MMAs)
            constexpr int NP = BNS / 16 / PAIR, NB = kFwdPf + 1;
            uint32_t fa[NB][MT][4], fb[NB][NP][4];
            auto load_s = [&](int ks, int buf) {
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) ldsm_x4(fa[buf][mt], sQ + L::xadd(tQ, mt * 16, ks * 16));
#pragma unroll
              for (int np = 0; np < NP; ++np)
                ldsm_x4(fb[buf][np], kv_addr(sK + wh * (BNS / PAIR) * D * 2, tK, np * 16, ks * 16));
            };
#pragma unroll
            for (int ks = 0; ks < kFwdPf; ++ks) load_s(ks, ks);
#pragma unroll
            for (int ks = 0; ks < D / 16; ++ks) {
              if (ks + kFwdPf < D / 16) load_s(ks + kFwdPf, (ks + kFwdPf) % NB);
#pragma unroll
              for (int np = 0; np < NP; ++np)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                  mma_16816<T>(acc_s[mt][2 * np], fa[ks % NB][mt], fb[ks % NB][np][0], fb[ks % NB][np][1]);
                  mma_16816<T>(acc_s[mt][2 * np + 1], fa[ks % NB][mt], fb[ks % NB][np][2], fb[ks % NB][np][3]);
                }
            }
          }
#pragma unroll
          for (int ks = 0; ks < (PF ? 0 : D / 16); ++ks) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              if constexpr (QREG) {
#pragma unroll
                for (int q = 0; q < 4; ++q) a[mt][q] = qf[ks][mt][q];
              } else {
                ldsm_x4(a[mt], sQ + (XADD ? L::xadd(tQ, mt * 16, ks * 16) : (tQ ^ L::swz(mt * 16, ks * 16))));
              }
            }
#pragma unroll
            for (int np = 0; np < BNS / 16 / PAIR; ++np) {
              if (SK == 3 && np * 16 >= lim) continue;  // warp-uniform
              uint32_t bb[4];
              ldsm_x4(bb, kv_addr(sK + wh * (BNS / PAIR) * D * 2, tK, np * 16, ks * 16));
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                mma_16816<T>(acc_s[mt][2 * np], a[mt], bb[0], bb[1]);
                mma_16816<T>(acc_s[mt][2 * np + 1], a[mt], bb[2], bb[3]);
              }
            }
          }

          // P = SiLU(alpha * (S + rab)), masked. SiLU(s) = h + h tanh(h), h = s / 2 (one MUFU op). Three passes
          // (rab, SiLU, then the mask on the packed pairs below); the rab and mask passes sit behind block-uniform
          // branches, so the common case (no rab, sub-tile fully visible) runs the SiLU pass alone, with no
          // per-element index or mask arithmetic.
          if constexpr (RABM) {
#pragma unroll
            for (int g = 0; g < NTILES / 2; ++g) rab_mma(g);
          } else if constexpr (RABS) {
            if constexpr (!RABI) rab_add(0, NTILES);
          } else if (p.rab != nullptr) {
            // (re-derived here, not kept live through the loop)
            int rb, rm0;
            if constexpr (SPLIT) {  // (b is live for kv_rows anyway)
              rb = static_cast<int>(opaque(static_cast<uint32_t>(b)));
              (void)rm0;
            } else {
              block_tile(blockIdx.x, blockIdx.y, rb, rm0);
            }
            const T* rab = static_cast<const T*>(p.rab) + rb * p.rab_batch_stride +
                           head() * p.rab_head_stride;
            int rw0 = r0 + warp_row0;  // the warp's first row (SKIP 4: from shared memory, not live in the loop)
            if constexpr (SKIP == 4)
              rw0 = static_cast<int>(lds_b32(sQ0 + Tile::kSmemWarp + (PAIRKV ? vwarp : warp) * 16 + 12));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int nt = 0; nt < NTILES; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  const int r = rw0 + mt * 16 + lane / 4 + (e / 2) * 8;
                  const int j = kw0 + nt * 8 + (lane % 4) * 2 + (e & 1);
                  if (r < lk && j < lk) {
                    const float rv = to_float(rab[(int64_t)r * p.rab_row_stride + j]);
                    acc_s[mt][nt][e] = QSCALE ? fmaf(rv, half_alpha, acc_s[mt][nt][e]) : acc_s[mt][nt][e] + rv;
                  }
                }
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NTILES; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                acc_s[mt][nt][e] = silu_from_half(QSCALE ? acc_s[mt][nt][e] : acc_s[mt][nt][e] * half_alpha);
        }
        // P as the A operand of P V (bf16 / fp16 pairs), then the mask of a sub-tile that is not fully visible on
        // the pairs (half the registers of S: the 4-warp kernels sit at 255), from each row's key intervals.
        uint32_t pk[MT][KSW][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int ks = 0; ks < KSW; ++ks)
#pragma unroll
            for (int q = 0; q < 4; ++q)
              pk[mt][ks][q] = pack2<T>(acc_s[mt][2 * ks + q / 2][2 * (q % 2)],
                                       acc_s[mt][2 * ks + q / 2][2 * (q % 2) + 1]);
        if constexpr (SKIP == 4) {  // (re-read: not live through S)
          int mlim;
          warp_full_lim(n0, full, mlim);
        }
        if (work && !full) {
          // Keys jw + 8 nt + odd of rows warp_row0 + lane / 4 + 16 mt + 8 hf (an opaque lane: not hoisted); per
          // m16 tile its two rows' intervals as bits (bit 4 nt + 2 hf + odd), then the pairs' AND masks.
          static_assert(NTILES <= 8, "one word of mask bits per m16 tile");
          const int lm = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t tr = sRowKeys0 + (vrow0 + lm / 4) * 16;
          const int jw = kw0 + (lm % 4) * 2;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t bits[1] = {0u};
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const uint4 iv = lds_b128(tr + (mt * 16 + hf * 8) * 16);  // (hlo, hhi, tlo, thi)
              const int hlo = static_cast<int>(iv.x), hhi = static_cast<int>(iv.y), tlo = static_cast<int>(iv.z),
                        thi = static_cast<int>(iv.w);
              fwd_key_interval_bits<NTILES * 8>(bits, jw, hf, hlo, hhi);
              fwd_key_interval_bits<NTILES * 8>(bits, jw, hf, tlo, thi);
            }
#pragma unroll
            for (int ks = 0; ks < KSW; ++ks)
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                pk[mt][ks][q] &= fwd_pair_keep(bits[0], ks, q);
              }
          }
        }
        // PAIR 2: P's A fragments to the partner, lane-major (16 bytes per lane: conflict-free), slot (warp, mt, ks)
        const uint32_t sP0 = sQ0 + Tile::kSmemP;
        if constexpr (PAIR == 2) {
          const int lp = static_cast<int>(opaque(static_cast<uint32_t>(lane)));
          const uint32_t sPw = sP0 + (warp * MT * KSW * 32 + lp) * 16;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int ks = 0; ks < KSW; ++ks)
              asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sPw + (mt * KSW + ks) * 512),
                           "r"(pk[mt][ks][0]), "r"(pk[mt][ks][1]), "r"(pk[mt][ks][2]), "r"(pk[mt][ks][3]));
        }
        if constexpr (STAGES == 1) {
          cp_async_wait<0>();
          __syncthreads();  // V of tile nb landed; every warp is done with K: K of the next tile loads during P V
          if (nb > nb_first()) {
            const int nn0 = (nb - 1 - (nb == gap_end ? gap_skip : 0)) * BN;
            const T* kn = kv_rows(p.k, p.k_row_stride, p.k_head_stride) + (int64_t)nn0 * p.k_row_stride;
            load_tile_async<BN, D, NT, true>(sKV0, kn, p.k_row_stride, lk - nn0, opaque(tid));
            if constexpr (RABS) load_rab(sRab0, nn0);  // (one buffer: every warp has read this tile's)
            cp_async_commit();
          }
        }

        // O += P V (PAIR 2: the warp's own keys, then its partner's P from shared memory; the warp's columns)
        int plim = lim;
        if constexpr (SKIP == 4 && (SK == 3 || (SK == 2 && STAGES == 1))) {  // (re-read: not live through S and P)
          bool pfull;
          warp_full_lim(n0, pfull, plim);
        }
        if constexpr (PF) {  // (P V step i + kFwdPf's V fragment loaded before step i's MMAs; the partner's P
          // two steps before its first use)
          constexpr int DP = D / 16 / PAIR, STEPS = PAIR * KSW * DP, NB = kFwdPf + 1;
          auto v_addr = [&](int i) {
            const int hh = wh ^ (i / (KSW * DP));
            return kv_addr(sV + hh * (BNS / PAIR) * D * 2 + wh * (D / PAIR) * 2, tV, (i / DP) % KSW * 16,
                           i % DP * 16);
          };
          uint32_t fv[NB][4], po[MT][KSW][4];
#pragma unroll
          for (int i = 0; i < kFwdPf; ++i) ldsm_x4_t(fv[i], v_addr(i));
#pragma unroll
          for (int i = 0; i < STEPS; ++i) {
            const int j = i / (KSW * DP), ks = (i / DP) % KSW, dp = i % DP;
            if (i == KSW * DP - 2) {
              const uint32_t sPo = sP0 + ((warp ^ 1) * MT * KSW * 32 + lane) * 16;
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int k2 = 0; k2 < KSW; ++k2)
                  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                               : "=r"(po[mt][k2][0]), "=r"(po[mt][k2][1]), "=r"(po[mt][k2][2]), "=r"(po[mt][k2][3])
                               : "r"(sPo + (mt * KSW + k2) * 512));
            }
            if (i + kFwdPf < STEPS) ldsm_x4_t(fv[(i + kFwdPf) % NB], v_addr(i + kFwdPf));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const uint32_t(&a)[4] = j == 0 ? pk[mt][ks] : po[mt][ks];
              mma_16816<T>(acc_o[mt][2 * dp], a, fv[i % NB][0], fv[i % NB][1]);
              mma_16816<T>(acc_o[mt][2 * dp + 1], a, fv[i % NB][2], fv[i % NB][3]);
            }
          }
        }
#pragma unroll
        for (int j = 0; j < (PF ? 0 : PAIR); ++j) {
          const int hh = wh ^ j;  // the half of the keys
          const uint32_t sVh = sV + hh * (BNS / PAIR) * D * 2 + wh * (D / PAIR) * 2;
#pragma unroll
          for (int ks = 0; ks < KSW; ++ks) {
            if ((SK == 3 || (SK == 2 && STAGES == 1)) && hh * (BNS / PAIR) + ks * 16 >= plim) continue;  // uniform
            uint32_t a[MT][4];
            if (j == 0) {
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int q = 0; q < 4; ++q) a[mt][q] = pk[mt][ks][q];
            } else {
              const uint32_t sPo = sP0 + ((warp ^ 1) * MT * KSW * 32 + lane) * 16;
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
                asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(a[mt][0]), "=r"(a[mt][1]), "=r"(a[mt][2]), "=r"(a[mt][3])
                             : "r"(sPo + (mt * KSW + ks) * 512));
            }
#pragma unroll
            for (int dp = 0; dp < D / 16 / PAIR; ++dp) {
              uint32_t bb[4];
              ldsm_x4_t(bb, kv_addr(sVh, tV, ks * 16, dp * 16));
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                mma_16816<T>(acc_o[mt][2 * dp], a[mt], bb[0], bb[1]);
                mma_16816<T>(acc_o[mt][2 * dp + 1], a[mt], bb[2], bb[3]);
              }
            }
          }
        }
      }
      if constexpr (PAIRKV) {
        if (pr) {
          __syncthreads();  // every warp is done with both stages
          const int nx = nb - 2;  // the next step's (first) tile
          auto load_kv = [&](int t, int st) {
            const int n = t * BN;
            const uint32_t ot = opaque(tid);
            const uint32_t sKn = sKV0 + st * 2 * kTileBytes;
            const T* kn = kv_rows(p.k, p.k_row_stride, p.k_head_stride) + (int64_t)n * p.k_row_stride;
            const T* vn = kv_rows(p.v, p.v_row_stride, p.v_head_stride) + (int64_t)n * p.v_row_stride;
            load_tile_async<BN, D, NT, true>(sKn, kn, p.k_row_stride, lk - n, ot);
            load_tile_async<BN, D, NT, true>(sKn + kTileBytes, vn, p.v_row_stride, lk - n, ot);
          };
          if (nx - 1 >= nb_pair) {  // the next pair
            load_kv(nx, 0);
            load_kv(nx - 1, 1);
            cp_async_commit();
          } else {
            // the last pair: the next tile (one per step from here) into stage 0; warps 2-3's partial of the rows of
            // warps 0-1 through stage 1 (fragment order, 16 bytes per lane: conflict-free), then their own rows
            if (nx >= nb_first()) {
              load_kv(nx, 0);
              cp_async_commit();
            }
            constexpr int kFrags = MT * DTILES;
            static_assert(kFrags * 64 * 16 <= 2 * kTileBytes, "the partial fits one stage");
            const uint32_t sH = sKV0 + 2 * kTileBytes + (tid % 64) * 16;
            if (warp >= 2) {
#pragma unroll
              for (int i = 0; i < kFrags; ++i) {
                float* a = acc_o[i / DTILES][i % DTILES];
                asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(sH + i * 64 * 16), "f"(a[0]),
                             "f"(a[1]), "f"(a[2]), "f"(a[3]));
                a[0] = a[1] = a[2] = a[3] = 0.f;
              }
            }
            __syncthreads();
            if (warp < 2) {
#pragma unroll
              for (int i = 0; i < kFrags; ++i) {
                float* a = acc_o[i / DTILES][i % DTILES];
                float x, y, z, w;
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
                             : "r"(sH + i * 64 * 16));
                a[0] += x;
                a[1] += y;
                a[2] += z;
                a[3] += w;
              }
            }
            stage = 0;  // (the next step prefetches into stage 1 after its barrier: warps 0-1 have read it by then)
          }
          nb -= 1;  // (the loop's step takes the other one)
          continue;
        }
      }
      if constexpr (STAGES == 2) stage ^= 1;
    }
  }

  if constexpr (SPLIT) {
    if (!fwd_split_sum<MT, DTILES, NT, BM>(acc_o, p, smem, Tile::kSmem, early)) return;
  }

  // Epilogue: scale, round, stage through smem (the Q buffer), store 16-byte rows. Rows past seqused are zeros.
  if constexpr (QEARLY) cp_async_wait<0>();  // (an empty walk: Q's copy)
  __syncthreads();
  const uint32_t sQ = sQ0;
  // (SKIP 4: the warp's first row re-derived here, not kept live through the loop)
  const int erow0 = SKIP == 4 ? (static_cast<int>(opaque(static_cast<uint32_t>(warp))) / PAIR) * MT * 16 : warp_row0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DTILES; ++dt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = erow0 + mt * 16 + lane / 4 + half * 8;
        const uint32_t v = pack2<T>(acc_o[mt][dt][2 * half] * p.inv_scaling, acc_o[mt][dt][2 * half + 1] * p.inv_scaling);
        const uint32_t addr = sQ + L::offset(row, wh * DTILES + dt) + (lane % 4) * 4;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v));
      }
    }
  }
  __syncthreads();
  const SeqInfo se = seq_info(p, static_cast<int>(opaque(static_cast<uint32_t>(b))));
  int m0e = m0;
  if constexpr (SPLIT) {  // (from shared memory: not live through the loop)
    m0e = static_cast<int>(lds_b32(sQ0 + Tile::kSmem + 16));
  }
  T* og = static_cast<T*>(p.out) + (int64_t)(se.q_start + m0e) * p.o_row_stride + head() * p.o_head_stride;
  const int rows_store = min(BM, se.lq_alloc - m0e);
  constexpr int kChunks = D / 8;
  for (int idx = tid; idx < BM * kChunks; idx += NT) {
    const int r = idx / kChunks;
    const int c = idx % kChunks;
    if (r < rows_store) {
      const uint4 val = lds_b128(sQ + L::offset(r, c));
      *reinterpret_cast<uint4*>(og + (int64_t)r * p.o_row_stride + c * 8) = val;
    }
  }
}

template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_kernel(const HstuParams p) {
  if constexpr (SKIP == 5) {  // rank 0 of the longest-first grid is query tile 0 where contexts are given
    static_assert(kFwdSm80Lpt<NWARPS, MINB>, "the grid's rank 0");
    const unsigned n_m = static_cast<unsigned>((p.max_seqlen_q + BM - 1) / BM);
    if (p.num_contexts != nullptr && blockIdx.x < gridDim.x / n_m) {
      hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 4, PAIR, false>(p);
    } else {
      hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 0, PAIR, false>(p);
    }
  } else {
    hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false>(p);
  }
}
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_split_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, true>(p);
}
// hstu_fwd_split_kernel with the list's bound loaded beside the item and Q's copy issued before the mask's setup
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_split_qearly_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, true, false, false, false, true>(p);
}
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true>(p);
}
// hstu_fwd_qreg_kernel with the Q fragments scaled by alpha / 2 (FwdSm80QregScaled)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_scaled_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, true>(p);
}
// hstu_fwd_qreg_scaled_kernel with the unmasked sub-tiles' work interleaved in 16-key groups (FwdSm80QregIlv)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_ilv_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, true, false, true>(p);
}
// The warp pairs (SKIP 0) with the ldmatrix addresses as L::xadd (C::kXadd), Q's copy early where QEARLY
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool QEARLY>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_xadd_kernel(const HstuParams p) {
  static_assert(SKIP == 0 && PAIR == 2, "the warp pairs' plain body");
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, false, false, false, QEARLY, false,
                 true>(p);
}
// hstu_fwd_xadd_kernel with Q's copy early and the S / P V fragments loaded kFwdPf steps ahead (C::kPrefetch)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_xpf_kernel(const HstuParams p) {
  static_assert(SKIP == 0 && PAIR == 2, "the warp pairs' plain body");
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, false, false, false, true, false, true,
                 true>(p);
}
// hstu_fwd_kernel with Q's copy issued before the mask's setup (the warp pairs: FwdSm80PairsEarly)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qearly_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, false, false, false, true>(p);
}
// hstu_fwd_qreg_kernel with Q's copy issued before the mask's setup (FwdSm80QregEarly)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_qearly_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, false, true>(p);
}
// hstu_fwd_xpf_kernel with the rab tiles in shared memory (FwdSm80PairsPfRab; RABF: FwdSm80PairsPfRabF; RABX
// kFwdRabEvict: FwdSm80PairsPfRabFE)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool RABF,
          int RABX>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_xpf_rab_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, false, false, false, true, false, true,
                 true, true, false, false, RABF, RABX>(p);
}
// hstu_fwd_qreg_kernel (QSCALE: hstu_fwd_qreg_scaled_kernel; ILV: hstu_fwd_qreg_ilv_kernel) with the rab tiles in
// shared memory (FwdSm80QregRab; RABF: FwdSm80QregRabF128; RABX kFwdRabLdsm: FwdSm80QregRabL128)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool QSCALE,
          bool ILV, bool RABF, int RABX>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_rab_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, QSCALE, false, ILV, false,
                 false, true, false, false, RABF, RABX>(p);
}
// hstu_fwd_qreg_rab_kernel with rab added by the tensor cores (FwdSm80QregRabIlvMma, FwdSm80QregRabMma)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool QSCALE,
          bool ILV>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_rabm_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, QSCALE, false, ILV, false,
                 false, true, true>(p);
}
// hstu_fwd_qreg_rabm_kernel with each warp's own rab rows per sub-tile in two slots (FwdSm80QregRabW; RABX
// kFwdRabLaneOnce: FwdSm80QregRabWH)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR, bool QSCALE,
          bool ILV, int RABX>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_rabw_kernel(const HstuParams p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, true, false, QSCALE, false, ILV, false,
                 false, true, true, true, false, RABX>(p);
}
// SKIP 5 with Q in registers; D = 128: the context tiles' body as a call (inlined beside the Q-in-registers body,
// the two spilled 84 B in the loop, sm_90a), p by address (__grid_constant__: no local copy); D = 64 inlined (252
// registers, no spill; as a call its body spilled 12 B), except with SKIP 6: a call (255 registers, no spill: the
// context kernel without extra tiles cost 2.8 % over the plain one at D = 64 inlined, 0.9 % at D = 128 as a call)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int PAIR, bool PAIRKV>
__device__ __noinline__ void hstu_fwd_ctx_block(const HstuParams& p) {
  hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 4, PAIR, false, false, PAIRKV>(p);
}
// SKIP 6: 5 with the context tiles' history walked two KV tiles per step (hstu_fwd_block's PAIRKV)
// SKIP 5 with the warp pairs' prefetched xadd body (FwdSm80PairsCtxPf): query tile 0 of a call with contexts in the
// warp-skip body (a call: p by address), the other tiles in hstu_fwd_xpf_kernel's
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_ctx_xpf_kernel(const __grid_constant__ HstuParams p) {
  static_assert(SKIP == 5 && PAIR == 2 && STAGES == 1 && kFwdSm80Lpt<NWARPS, MINB>, "the pairs' rank 0: tile 0");
  const unsigned n_m = static_cast<unsigned>((p.max_seqlen_q + BM - 1) / BM);
  if (p.num_contexts != nullptr && blockIdx.x < gridDim.x / n_m) {
    hstu_fwd_ctx_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, PAIR, false>(p);
  } else {
    hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 0, PAIR, false, false, false, false, true, false, true,
                   true>(p);
  }
}
// QSCALE / ILV: the tiles without context rows in hstu_fwd_qreg_ilv_kernel's body (hstu_fwd_qreg_ctx_ilv_kernel)
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR,
          bool QSCALE, bool ILV>
__device__ __forceinline__ void hstu_fwd_qreg_ctx_body(const HstuParams& p) {
  static_assert((SKIP == 5 || SKIP == 6) && kFwdSm80Lpt<NWARPS, MINB>, "rank 0 of the longest-first grid: tile 0");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if constexpr (D == 128) {  // launched only where two blocks fit per SM (run_hstu_fwd): no sm_8x part
    __trap();
    return;
  }
#endif
  const unsigned n_m = static_cast<unsigned>((p.max_seqlen_q + BM - 1) / BM);
  if (p.num_contexts != nullptr && blockIdx.x < gridDim.x / n_m) {
    if constexpr (D == 128 || SKIP == 6) {
      hstu_fwd_ctx_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, PAIR, SKIP == 6>(p);
    } else {
      hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 4, PAIR, false, false, SKIP == 6>(p);
    }
  } else {
    hstu_fwd_block<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, 0, PAIR, false, true, false, QSCALE, false, ILV>(p);
  }
}
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB) hstu_fwd_qreg_ctx_kernel(const __grid_constant__ HstuParams p) {
  hstu_fwd_qreg_ctx_body<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, false, false>(p);
}
// FwdSm80QregCtxIlv: hstu_fwd_qreg_ctx_kernel with its tiles without context rows in hstu_fwd_qreg_ilv_kernel's body
template <typename T, int D, int BM, int BN, int BNS, int NWARPS, int MINB, int STAGES, int SKIP, int PAIR>
__global__ void __launch_bounds__(NWARPS * 32, MINB)
    hstu_fwd_qreg_ctx_ilv_kernel(const __grid_constant__ HstuParams p) {
  hstu_fwd_qreg_ctx_body<T, D, BM, BN, BNS, NWARPS, MINB, STAGES, SKIP, PAIR, true, true>(p);
}
// The kernel of tile C (hstu_fwd_qreg_kernel where C::kQreg, hstu_fwd_qreg_qearly_kernel where also C::kQearly;
// hstu_fwd_qreg_ctx_kernel with SKIP 5 / 6, its _ilv form
// where C::kIlv; hstu_fwd_ctx_xpf_kernel with SKIP 5 where C::kPrefetch;
// hstu_fwd_qreg_ilv_kernel where C::kIlv; hstu_fwd_qreg_scaled_kernel where C::kQscale; hstu_fwd_qearly_kernel
// where C::kQearly)
template <typename T, int D, typename C>
constexpr auto fwd_sm80_kernel() {
  if constexpr (C::kRabSmem && C::kXadd) {
    return hstu_fwd_xpf_rab_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                   C::kSkip, C::kPair, C::kRabCopyFast, C::kRabX>;
  } else if constexpr (C::kRabSmem && C::kRabWarp) {
    return hstu_fwd_qreg_rabw_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                     C::kSkip, C::kPair, C::kQscale, C::kIlv, C::kRabX>;
  } else if constexpr (C::kRabSmem && C::kRabMma) {
    return hstu_fwd_qreg_rabm_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                     C::kSkip, C::kPair, C::kQscale, C::kIlv>;
  } else if constexpr (C::kRabSmem) {
    return hstu_fwd_qreg_rab_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                    C::kSkip, C::kPair, C::kQscale, C::kIlv, C::kRabCopyFast, C::kRabX>;
  } else if constexpr (C::kXadd && C::kPrefetch && C::kSkip == 5) {
    return hstu_fwd_ctx_xpf_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                   C::kSkip, C::kPair>;
  } else if constexpr (C::kXadd && C::kPrefetch) {
    return hstu_fwd_xpf_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                               C::kSkip, C::kPair>;
  } else if constexpr (C::kXadd) {
    return hstu_fwd_xadd_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                C::kSkip, C::kPair, C::kQearly>;
  } else if constexpr (C::kQreg && C::kQearly) {
    static_assert(!C::kQscale && !C::kIlv && C::kSkip == 0, "the plain Q-in-registers body");
    return hstu_fwd_qreg_qearly_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                       C::kSkip, C::kPair>;
  } else if constexpr (C::kQreg && C::kSkip >= 5 && C::kIlv) {
    static_assert(C::kQscale, "the scaled kernel's body");
    return hstu_fwd_qreg_ctx_ilv_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                        C::kSkip, C::kPair>;
  } else if constexpr (C::kQreg && C::kSkip >= 5) {
    return hstu_fwd_qreg_ctx_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                    C::kSkip, C::kPair>;
  } else if constexpr (C::kQreg && C::kIlv) {
    static_assert(C::kQscale, "the scaled kernel's body");
    return hstu_fwd_qreg_ilv_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                    C::kSkip, C::kPair>;
  } else if constexpr (C::kQreg && C::kQscale) {
    return hstu_fwd_qreg_scaled_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                       C::kSkip, C::kPair>;
  } else if constexpr (C::kQearly) {
    return hstu_fwd_qearly_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                  C::kSkip, C::kPair>;
  } else if constexpr (C::kQreg) {
    return hstu_fwd_qreg_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages,
                                C::kSkip, C::kPair>;
  } else {
    return hstu_fwd_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks, C::kStages, C::kSkip,
                           C::kPair>;
  }
}

// Whether tile C runs on the current device: its shared memory within the opt-in limit, and over 99 KB not on
// sm86 / sm89 (their code of it traps, hstu_fwd_kernel).
template <typename C>
cudaError_t fwd_sm80_fits(bool& fits) {
  fits = true;
  if constexpr (C::kSmem > 99 * 1024) {
    int sms = 0, max_smem = 0;
    bool narrow = false;
    cudaError_t err = fwd_sm80_device(sms, max_smem, narrow);
    if (err != cudaSuccess) return err;
    fits = C::kSmem <= max_smem && !narrow;
  }
  return cudaSuccess;
}

// Whether two blocks of tile C fit per SM: the opt-in limit per block is the SM's shared memory less the 1 KB that
// each block reserves (227 KB on the H100 / H200: two of D = 128's 98 KB Q-in-registers tiles; 163 KB on the A100 and
// 99 KB on sm86 / sm89: one, where the 4-warp tile would leave half the SM's warp slots empty).
template <typename C>
cudaError_t fwd_sm80_two_fit(bool& two) {
  int sms = 0, max_smem = 0;
  bool narrow = false;
  const cudaError_t err = fwd_sm80_device(sms, max_smem, narrow);
  if (err != cudaSuccess) return err;
  two = 2 * (C::kSmem + 1024) <= max_smem + 1024;
  return cudaSuccess;
}

// Launches config C. The grid walks the query tiles longest first over chunks of G sequences (per head): G batches'
// rank-0 tiles (the heaviest: the last query tile, or tile 0 with contexts), then their rank-1 tiles, ... With
// G n about the blocks resident on the device or up to twice that, the last wave holds the lightest tiles of a
// chunk (the (b, h) tiles in order, before, left the heavy tiles of the last sequences for the end: 5-10 % of the
// time at B16 S4K in a dispatch model); G is kept that small so the K / V rows in use stay about what they were.
template <typename T, int D, typename C>
cudaError_t launch_hstu_fwd(const HstuParams& p, cudaStream_t stream) {
  auto kernel = fwd_sm80_kernel<T, D, C>();
  int sms = 0, max_smem = 0;
  bool narrow = false;
  cudaError_t err = fwd_sm80_device(sms, max_smem, narrow);
  if (err != cudaSuccess) return err;
  if (C::kSmem > 48 * 1024) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (err != cudaSuccess) return err;
  }
  // G: the power of two at most 2 resident / n (and at most the batch's), at least 1
  const int64_t n_m = (p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM;
  if constexpr (!kFwdSm80Lpt<C::kWarps, C::kMinBlocks>) {
    kernel<<<dim3(static_cast<unsigned>(n_m), p.batch, p.heads), C::kWarps * 32, C::kSmem, stream>>>(p);
    return cudaGetLastError();
  }
  int64_t want = std::min<int64_t>(p.batch, 2 * static_cast<int64_t>(sms) * C::kMinBlocks / n_m);
  if constexpr (C::kShortChunk > 0) {
    if (n_m <= kFwdSm80ShortTiles) want = std::min<int64_t>(want, C::kShortChunk);
  }
  int lg = 0;
  while ((int64_t{2} << lg) <= want && (n_m << (lg + 1)) <= INT32_MAX) ++lg;
  if ((n_m << lg) > INT32_MAX) return cudaErrorInvalidConfiguration;
  dim3 grid(static_cast<unsigned>(n_m << lg), static_cast<unsigned>((p.batch + (1 << lg) - 1) >> lg), p.heads);
  kernel<<<grid, C::kWarps * 32, C::kSmem, stream>>>(p);
  return cudaGetLastError();
}

// The split's work list (hstu_fwd_sm80_split.h), one block: zeroes the tiles' counters, picks the KV tiles per
// chunk (exact: `least`; else the mean work per block slot of the real walks, sum over query tiles and heads of
// max(walk, 1) over `resident` block slots, at least `least`), then lists every query tile (b, m0) and chunk c of the
// k of its KV walk, n steps of it over KV tiles [nb_begin, nb_end) (32 bytes: int4 {b, m0, c | k << 16, nb_end |
// nb_begin << 16}, all below 2^15: fwd_sm80_split_plan, then int4 {Q's first row, Q's rows in the tile (at most BM),
// the sequence's first key, its keys}, for the split kernel's first copies; behind a 32-byte header {items, ns, KV
// tiles per chunk, 0}) in a counting sort
// by n, heaviest first (256 buckets). The walks: a warp per sequence, a lane per query tile, the walk's length as
// hstu_fwd_block computes it; the first walk keeps up to kFwdListCache tiles' walks in shared memory, from which a
// thread per tile places the items (else, or with kFwdSm80SplitMain, the sequences are walked again). The kernel is
// one block's latency on the forward's path: the buckets' counts follow from the first walk's histogram of lengths
// where the walks are at most kFwdListHist KV tiles, the buckets' starts from a warp scan. The work is summed per
// warp (a shuffle reduction, then one 32-bit shared atomic per warp: the sum stays below 2^31, the list's bound
// times the longest walk) and the divisions by the chunk are a multiply by a 2^40 reciprocal (numerators below 2^23);
// a walk's k - 1 whole chunks (all in bucket 0) take one range of the heaviest bucket (one atomic, not k). MAIN
// (kFwdSm80SplitPlain / kFwdSm80SplitMain, for comparisons): the kernel as it was (a 64-bit shared atomic, which
// compiles to a compare-and-swap loop, 64-bit divisions, one atomic per chunk).
constexpr int kFwdListBuckets = 256;
constexpr int kFwdListHist = 1024;
constexpr int kFwdListCache = 1024;
// A query tile's walk down its KV tiles [.., nb_end) less the masked gap [gap_end - gap, gap_end)
struct FwdListWalk {
  int nb_end, gap_end, gap;
  // the KV tile of step s (after tile gap_end the next one is gap_end - gap - 1)
  __device__ __forceinline__ int tile_at(int s) const {
    const int t = nb_end - 1 - s;
    return gap > 0 && t < gap_end ? t - gap : t;
  }
};
template <int BM, int BN, bool MAIN>
__global__ void __launch_bounds__(1024) hstu_sm80_fwd_list_kernel(const HstuParams p, int4* list, int counters,
                                                                  int ns, int least, int resident) {
  __shared__ int cursor[kFwdListBuckets];
  __shared__ int hist[kFwdListHist + 1];  // query tiles per walk length
  __shared__ int4 walk_a[kFwdListCache];  // the first walk's tiles: {b, m0, slot, steps | gap << 16}
  __shared__ int walk_b[kFwdListCache];   // nb_end | gap_end << 16
  __shared__ int4 walk_c[kFwdListCache];  // the item's second half (each_tile's `at`)
  __shared__ unsigned long long work;  // (MAIN)
  __shared__ unsigned work32;
  __shared__ int long_walk, partials, cached;
  // A programmatic dependent launch (sm_90+, launch_hstu_fwd_split): the block waits for the kernel before it (the
  // validation) before its first global access, then lets the split kernel's blocks start (they wait in turn for
  // this grid's completion before reading the list); both no-ops in a plain launch.
  accel::griddep_wait();
  accel::griddep_launch_dependents();
  for (int i = threadIdx.x; i < counters; i += blockDim.x) p.fwd_tile_counter[i] = 0;
  for (int i = threadIdx.x; i < kFwdListBuckets; i += blockDim.x) cursor[i] = 0;
  for (int i = threadIdx.x; i <= kFwdListHist; i += blockDim.x) hist[i] = 0;
  if (threadIdx.x == 0) work = work32 = long_walk = partials = cached = 0;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const bool cache = !(p.fwd_sm80_cfg & kFwdSm80SplitMain);
  // each query tile's walk (KV tiles, less the target gap): f(b, m0, steps, walk, slot, at), at = {Q's first row,
  // Q's rows in the tile, the sequence's first key, its keys}
  auto each_tile = [&](auto&& f) {
    for (int b = warp; b < p.batch; b += warps) {
      const SeqInfo si = seq_info(p, b);
      for (int m0 = lane * BM; m0 < si.lq_alloc; m0 += 32 * BM) {
        int nb_begin, nb_end, gap_begin, gap_end;
        si.mask.key_tiles(m0 + si.mask.offset, max(0, min(BM, si.lq - m0)), BN, nb_begin, nb_end, gap_begin,
                          gap_end);
        const int gap = gap_end - gap_begin;
        f(b, m0, nb_end > nb_begin ? nb_end - nb_begin - gap : 0, FwdListWalk{nb_end, gap_end, gap},
          si.q_start / BM + b + m0 / BM,
          make_int4(si.q_start + m0, max(0, min(BM, si.lq - m0)), si.k_start, si.lk));
      }
    }
  };
  {
    unsigned long long mine = 0;
    int longer = 0;
    each_tile([&](int b, int m0, int steps, const FwdListWalk& wk, int slot, const int4& at) {
      mine += static_cast<unsigned long long>(max(steps, 1));
      if (steps >= 0 && steps <= kFwdListHist) {
        atomicAdd(&hist[steps], 1);
      } else {
        longer = 1;
      }
      if (cache) {  // (steps, gap, nb_end, gap_end < 2^15: fwd_sm80_split_plan)
        const int i = atomicAdd(&cached, 1);
        if (i < kFwdListCache) {
          walk_a[i] = make_int4(b, m0, slot, steps | wk.gap << 16);
          walk_b[i] = wk.nb_end | wk.gap_end << 16;
          walk_c[i] = at;
        }
      }
    });
    if constexpr (MAIN) {
      if (mine > 0) atomicAdd(&work, mine);
    } else {
      const unsigned sum = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(mine));
      if (lane == 0 && sum > 0) atomicAdd(&work32, sum);
    }
    if (longer) long_walk = 1;
    __syncthreads();
  }
  // (not MAIN: at most 2^15 - 1, the longest walk's bound, so that the reciprocal below is exact; a larger chunk
  // leaves every walk whole too)
  const unsigned long long total = MAIN ? work : static_cast<unsigned long long>(work32);
  const unsigned long long per_block =
      max(static_cast<unsigned long long>(least), (total * p.heads + resident - 1) / max(resident, 1));
  const int chunk = resident > 0 ? static_cast<int>(MAIN ? per_block : min(32767ull, per_block)) : least;
  // n / chunk for n < 2^23 (not MAIN): floor(n m / 2^40) with m = floor(2^40 / chunk) + 1 is n / chunk plus less
  // than n / 2^40 < 2^-17 < 1 / chunk, so its floor is exact
  const unsigned long long rcp = MAIN ? 0 : (1ull << 40) / static_cast<unsigned>(chunk) + 1;
  auto div_chunk = [&](int n) {
    return MAIN ? n / chunk : static_cast<int>((static_cast<unsigned long long>(n) * rcp) >> 40);
  };
  const int n_cached = cache && cached <= kFwdListCache ? cached : -1;  // (-1: walk the sequences again)
  // the first walk's tiles back from shared memory, a thread per tile, or the sequences walked again
  auto each_tile_again = [&](auto&& f) {
    if (n_cached < 0) {
      each_tile(f);
      return;
    }
    for (int i = threadIdx.x; i < n_cached; i += blockDim.x) {
      const int4 a = walk_a[i];
      const int w = walk_b[i];
      f(a.x, a.y, a.w & 0xffff, FwdListWalk{w & 0xffff, w >> 16, a.w >> 16}, a.z, walk_c[i]);
    }
  };
  // the bucket of a chunk of w KV tiles (w = chunk: 0, the heaviest)
  auto bucket_of = [&](int w) {
    return kFwdListBuckets - 1 -
           (MAIN ? static_cast<int>(int64_t{w} * (kFwdListBuckets - 1) / chunk) : div_chunk(w * (kFwdListBuckets - 1)));
  };
  // pass 0 counts each bucket's chunks (from the walks' lengths, or over the tiles), pass 1 places them
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 0 && !long_walk) {  // a walk of s steps: k - 1 chunks of `chunk`, the last of s - (k - 1) chunk
      for (int st = threadIdx.x; st <= kFwdListHist; st += blockDim.x) {
        const int n = hist[st];
        if (n == 0) continue;
        const int k = max(1, div_chunk(st + chunk - 1));
        if (k > 1) atomicAdd(&cursor[bucket_of(chunk)], n * (k - 1));
        atomicAdd(&cursor[bucket_of(st - (k - 1) * chunk)], n);
      }
    } else {
      each_tile_again([&](int b, int m0, int steps, const FwdListWalk& wk, int slot, const int4& at) {
        const int k = max(1, div_chunk(steps + chunk - 1));
        // a split tile's k partials per head: consecutive from its base (fwd_sm80_split_partials bounds them)
        if (pass == 1 && k > 1) p.fwd_tile_counter[counters + slot] = atomicAdd(&partials, k);
        if constexpr (!MAIN) {  // chunks 0 .. k - 2 of `chunk` KV tiles (bucket 0) in one range, then the last
          const int last = steps - (k - 1) * chunk;
          if (pass == 0) {
            if (k > 1) atomicAdd(&cursor[0], k - 1);
            atomicAdd(&cursor[bucket_of(last)], 1);
          } else {
            const int i0 = k > 1 ? atomicAdd(&cursor[0], k - 1) : 0;
            for (int c = 0; c < k; ++c) {
              const int w = c < k - 1 ? chunk : last;
              const int nb_end = wk.tile_at(c * chunk) + 1, nb_begin = wk.tile_at(c * chunk + w - 1);
              const int i = 2 + 2 * (c < k - 1 ? i0 + c : atomicAdd(&cursor[bucket_of(last)], 1));
              list[i] = make_int4(b, m0, c | k << 16, nb_end | nb_begin << 16);
              list[i + 1] = at;
            }
          }
        } else {
          for (int c = 0; c < k; ++c) {
            const int w = min(chunk, steps - c * chunk);
            const int bucket = bucket_of(w);
            if (pass == 0) {
              atomicAdd(&cursor[bucket], 1);
            } else {
              const int nb_end = wk.tile_at(c * chunk) + 1, nb_begin = wk.tile_at(c * chunk + w - 1);
              const int i = 2 + 2 * atomicAdd(&cursor[bucket], 1);
              list[i] = make_int4(b, m0, c | k << 16, nb_end | nb_begin << 16);
              list[i + 1] = at;
            }
          }
        }
      });
    }
    __syncthreads();
    if (pass == 0 && warp == 0) {  // the buckets' starts (heaviest first): kPer per lane, a scan of the lanes' sums
      constexpr int kPer = kFwdListBuckets / 32;
      int c[kPer], sum = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        c[i] = cursor[lane * kPer + i];
        sum += c[i];
      }
      int n = sum;  // (inclusive over the lanes)
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, n, o);
        if (lane >= o) n += v;
      }
      if (lane == 31) list[0] = make_int4(n, ns, chunk, 0);  // the header
      n -= sum;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        cursor[lane * kPer + i] = n;
        n += c[i];
      }
    }
    __syncthreads();
  }
}

// Tile C (the split's, fwd_sm80_split_tile) with the split of long KV ranges where the op planned it (p.fwd_sched:
// the workspace, p.fwd_split_tiles: n > 0 chunks of n KV tiles, -n at least n; fwd_sm80_split_for): the work list's
// kernel, then C's split kernel on grid (heads, the list's bound); else C without the split.
template <typename T, int D, typename C>
cudaError_t launch_hstu_fwd_split(const HstuParams& p, cudaStream_t stream) {
  constexpr FwdSm80SplitTile t =
      fwd_sm80_split_tile(D, D == 256 || C::kBlockM != 64 ? 0 : C::kWarps == 4 ? 1 : 2);
  static_assert(t.bm == C::kBlockM && t.bn == C::kBlockN && t.minb == C::kMinBlocks, "the plan's tile");
  if (p.fwd_sched == nullptr || p.fwd_split_tiles == 0) return launch_hstu_fwd<T, D, C>(p, stream);
  const int least = std::abs(p.fwd_split_tiles);
  accel::DeviceInfo d;
  cudaError_t err = accel::current_device_info(d);
  if (err != cudaSuccess) return err;
  const int resident = p.fwd_split_tiles > 0 ? 0 : d.sms * C::kMinBlocks;  // (0: exact chunks)
  // On sm_90+ both kernels are programmatic dependent launches: the list's block starts as the validation's ends,
  // the split kernel's blocks while the list is built (each waits in-kernel: griddep_wait), which takes two launch
  // gaps off the call (kFwdSm80SplitPlain, kFwdSm80SplitMain: plain launches, for comparisons)
  const bool pdl = d.cc_major >= 9 && !(p.fwd_sm80_cfg & (kFwdSm80SplitPlain | kFwdSm80SplitMain));
  const FwdSm80Split s = fwd_sm80_split_layout(p, t, least, resident);
  if (p.fwd_sched_bytes < s.bytes || s.items > 65535) return cudaErrorInvalidValue;
  HstuParams q = p;  // workspace: counters and the split tiles' first partials | list | partials
  q.fwd_tile_counter = static_cast<int*>(p.fwd_sched);
  q.fwd_sched = static_cast<char*>(p.fwd_sched) + s.counter_bytes + s.list_bytes;
  // (kFwdSm80SplitPlain / kFwdSm80SplitMain: main's list kernel, for comparisons)
  auto list_kernel = (p.fwd_sm80_cfg & (kFwdSm80SplitPlain | kFwdSm80SplitMain))
                         ? hstu_sm80_fwd_list_kernel<C::kBlockM, C::kBlockN, true>
                         : hstu_sm80_fwd_list_kernel<C::kBlockM, C::kBlockN, false>;
  err = accel::launch_pdl(list_kernel, dim3(1), dim3(1024), 0, stream, pdl, q,
                          reinterpret_cast<int4*>(static_cast<char*>(p.fwd_sched) + s.counter_bytes),
                          static_cast<int>(s.slots * p.heads), s.ns, least, resident);
  if (err != cudaSuccess) return err;
  // (kFwdSm80SplitMain: main's split kernel, for comparisons)
  auto kernel = (p.fwd_sm80_cfg & kFwdSm80SplitMain)
                    ? hstu_fwd_split_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks,
                                            C::kStages, C::kSkip, C::kPair>
                    : hstu_fwd_split_qearly_kernel<T, D, C::kBlockM, C::kBlockN, C::kSubN, C::kWarps, C::kMinBlocks,
                                                   C::kStages, C::kSkip, C::kPair>;
  // (+ the query tile's slot, the chunk, its counter, the walk's chunks, m0, b, nb_begin and the first partial)
  constexpr int kSmem = C::kSmem + 32;
  if (kSmem > 48 * 1024) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
  }
  return accel::launch_pdl(kernel, dim3(p.heads, static_cast<unsigned>(s.items)), dim3(C::kWarps * 32), kSmem,
                           stream, pdl, q);
}

// Candidate CFG of kernel_options(fwd_sm80_cfg=CFG) where it applies (bf16, a head dim that has it), else the default.
template <typename T, int D, int CFG>
cudaError_t launch_hstu_fwd_candidate(const HstuParams& p, cudaStream_t stream) {
  using C = FwdSm80Candidate<D, CFG>;
  if constexpr (C::kExists && std::is_same<T, __nv_bfloat16>::value) {
    bool fits = false;
    const cudaError_t err = fwd_sm80_fits<C>(fits);
    if (err != cudaSuccess) return err;
    if (fits) return launch_hstu_fwd<T, D, C>(p, stream);
  }
  return launch_hstu_fwd<T, D, FwdSm80Config<D>>(p, stream);
}

template <typename T, int D>
cudaError_t run_hstu_fwd(const HstuParams& p, cudaStream_t stream) {
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0) return cudaSuccess;
  const int cfg = p.fwd_sm80_cfg & kFwdSm80CfgMask;
  static_assert(kFwdSm80Candidates == 5, "one case per candidate");
  if constexpr ((D == 64 || D == 128 || D == 256) && std::is_same<T, __nv_bfloat16>::value) {
    // the bf16 default tile with the split: cfg 7, and the default where the op made room for the split's plan
    // (fwd_sm80_split_for)
    if (cfg == kFwdSm80CfgSplit || (cfg == 0 && p.fwd_sched != nullptr)) {
      if constexpr (D != 256) {
        const int bm64 = fwd_sm80_bm64(p.fwd_sm80_cfg);
        if constexpr (D == 64) {
          if (bm64 == 2) return launch_hstu_fwd_split<T, D, FwdSm80SplitBm64<D, 2>>(p, stream);
        }
        if (bm64 != 0) return launch_hstu_fwd_split<T, D, FwdSm80SplitBm64<D, 1>>(p, stream);
      }
      using C = FwdSm80Candidate<D, D == 128 ? 2 : 1>;
      bool fits = false;
      const cudaError_t err = fwd_sm80_fits<C>(fits);
      if (err != cudaSuccess) return err;
      if (fits) return launch_hstu_fwd_split<T, D, C>(p, stream);
    }
  }
  if (cfg == 0 && std::is_same<T, __nv_bfloat16>::value) {
    // calls with contexts: FwdSm80QregCtx at D = 64 (D = 128 where two blocks fit per SM), 3's tile with the warp
    // skip and the paired KV tiles in query tile 0 (fwd_sm80_cfg=5: without the pairs); candidate 4 (the tile without
    // Q in registers, the skip without the pairs) elsewhere (fwd_sm80_cfg=1 / 2 / 3: the tiles without the skip, for
    // comparisons)
    const bool ctx = p.num_contexts != nullptr;
    if constexpr (D == 256 && std::is_same<T, __nv_bfloat16>::value) {  // the pairs at every row count where they fit
      using Pairs = FwdSm80Candidate<256, kFwdSm80PairCfg>;
      bool fits = false;
      const cudaError_t err = fwd_sm80_fits<Pairs>(fits);
      if (err != cudaSuccess) return err;
      if (fits) {
        if (ctx) {
          bool ctx_fits = false;
          const cudaError_t e1 = fwd_sm80_fits<FwdSm80PairsCtxPf>(ctx_fits);
          if (e1 != cudaSuccess) return e1;
          return ctx_fits ? launch_hstu_fwd<T, D, FwdSm80PairsCtxPf>(p, stream)
                          : launch_hstu_fwd_candidate<T, D, 4>(p, stream);
        }
        if (fwd_sm80_rab_smem(p)) {
          bool rab_fits = false;
          const cudaError_t e2 = fwd_sm80_fits<FwdSm80PairsPfRab>(rab_fits);
          if (e2 != cudaSuccess) return e2;
          if (rab_fits) {
            if (p.fwd_sm80_cfg & kFwdSm80RabCopyMain) return launch_hstu_fwd<T, D, FwdSm80PairsPfRab>(p, stream);
            return (p.fwd_sm80_cfg & kFwdSm80RabEvict) ? launch_hstu_fwd<T, D, FwdSm80PairsPfRabFE>(p, stream)
                                                       : launch_hstu_fwd<T, D, FwdSm80PairsPfRabF>(p, stream);
          }
        }
        return launch_hstu_fwd<T, D, FwdSm80PairsPf>(p, stream);
      }
    }
    if (FwdSm80Candidate<D, 2>::kExists && p.total_q >= kFwdSm80LongRows * p.batch) {
      if constexpr (D == 128 && std::is_same<T, __nv_bfloat16>::value) {  // Q in registers where two blocks fit
        bool two = false;
        const cudaError_t err = fwd_sm80_two_fit<FwdSm80Candidate<128, 3>>(two);
        if (err != cudaSuccess) return err;
        if (two) {
          if (!ctx && fwd_sm80_rab_smem(p)) {
            if (p.fwd_sm80_cfg & kFwdSm80RabCopyMain) return launch_hstu_fwd<T, D, FwdSm80QregRab<128>>(p, stream);
            if (p.fwd_sm80_cfg & kFwdSm80RabLoadMain) return launch_hstu_fwd<T, D, FwdSm80QregRabF128>(p, stream);
            return (p.fwd_sm80_cfg & kFwdSm80RabEvict) ? launch_hstu_fwd<T, D, FwdSm80QregRabL128E>(p, stream)
                                                       : launch_hstu_fwd<T, D, FwdSm80QregRabL128>(p, stream);
          }
          return ctx ? launch_hstu_fwd<T, D, FwdSm80QregCtx<128>>(p, stream)
                     : launch_hstu_fwd<T, D, FwdSm80QregEarly>(p, stream);
        }
      }
      if constexpr (D == 64 && std::is_same<T, __nv_bfloat16>::value) {
        if (ctx) {
          return fwd_sm80_qscale(p) && !(p.fwd_sm80_cfg & kFwdSm80NoIlv)
                     ? launch_hstu_fwd<T, D, FwdSm80QregCtxIlv<64>>(p, stream)
                     : launch_hstu_fwd<T, D, FwdSm80QregCtx<64>>(p, stream);
        }
        if (fwd_sm80_rab_smem(p) && fwd_sm80_qscale(p)) {
          if (p.fwd_sm80_cfg & kFwdSm80NoIlv) return launch_hstu_fwd<T, D, FwdSm80QregRabMma>(p, stream);
          bool two = false;
          const cudaError_t err = fwd_sm80_two_fit<FwdSm80QregRabW>(two);
          if (err != cudaSuccess) return err;
          if (!two || (p.fwd_sm80_cfg & kFwdSm80RabTile64)) {
            return launch_hstu_fwd<T, D, FwdSm80QregRabIlvMma>(p, stream);
          }
          if (p.fwd_sm80_cfg & kFwdSm80RabLoadMain) return launch_hstu_fwd<T, D, FwdSm80QregRabW>(p, stream);
          return (p.fwd_sm80_cfg & kFwdSm80RabEvict) ? launch_hstu_fwd<T, D, FwdSm80QregRabWHE>(p, stream)
                                                     : launch_hstu_fwd<T, D, FwdSm80QregRabWH>(p, stream);
        }
        if (fwd_sm80_qscale(p)) {
          return (p.fwd_sm80_cfg & kFwdSm80NoIlv) ? launch_hstu_fwd<T, D, FwdSm80QregScaled<64>>(p, stream)
                                                  : launch_hstu_fwd<T, D, FwdSm80QregIlv<64>>(p, stream);
        }
      }
      // (D = 256: the pairs do not fit)
      return ctx && D != 256 ? launch_hstu_fwd_candidate<T, D, D == 64 ? 5 : 4>(p, stream)
                             : launch_hstu_fwd_candidate<T, D, kFwdSm80DefaultCfg<D>>(p, stream);
    }
  }
  switch (cfg) {
    case 1:
      return launch_hstu_fwd_candidate<T, D, 1>(p, stream);
    case 2:
      return launch_hstu_fwd_candidate<T, D, 2>(p, stream);
    case 3:
      return launch_hstu_fwd_candidate<T, D, 3>(p, stream);
    case 4:
      return launch_hstu_fwd_candidate<T, D, 4>(p, stream);
    case 5:
      if constexpr (D == 128 && std::is_same<T, __nv_bfloat16>::value) {  // where two blocks fit per SM, as 3's
        bool two = false;
        const cudaError_t err = fwd_sm80_two_fit<FwdSm80Candidate<128, 5>>(two);
        if (err != cudaSuccess) return err;
        if (!two) return launch_hstu_fwd<T, D, FwdSm80Config<D>>(p, stream);
      }
      return launch_hstu_fwd_candidate<T, D, 5>(p, stream);
    default:  // 0 below kFwdSm80LongRows, kFwdSm80CfgOld
      return launch_hstu_fwd<T, D, FwdSm80Config<D>>(p, stream);
  }
}

}  // namespace hstu
