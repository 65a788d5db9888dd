// Host declarations of the Hopper (sm_90a) FP8 (e4m3) HSTU backward (issue 36; no torch headers). Private and opt-in
// (kernel_options(fp8_bwd=True), hstu/_fp8_bwd.py): the kernel hstu_bwd_fp8_sm90_kernel.cuh, fed by the device
// pre-pass hstu/csrc/fp8/hstu_fp8_bwd_prepass.h (dO in e4m3 with per-block factors, the transposed copies Q^T, dO^T,
// K^T the GEMMs over rows read). Rounding points: hstu/_fp8_bwd.py (its reference emulates them).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

struct HstuFp8BwdParams {
  const void* do8;          // (total_q, H, D) e4m3, contiguous (the pre-pass's)
  const float* do_descale;  // (H, total_q / 128 + B): one factor per head and 128-row block of a sequence
  const void* qt;           // (H, D, q_cols) e4m3: Q^T, hstu_fp8_key_perm-permuted per 32 queries
  const void* dot;          // (H, D, q_cols): dO^T, likewise
  const void* kt;           // (H, D, k_cols): K^T, hstu_fp8_pair_perm-permuted per 16 keys
  int64_t q_cols, k_cols;   // hstu_fp8_vt_cols(total_q, B), hstu_fp8_vt_cols(total_k, B)
  const float* q_descale;   // checked copies (fp8_check_scales), Fp8DescaleMode layout
  const float* k_descale;
  const float* v_descale;
  int descale_mode;  // Fp8DescaleMode (hstu_fp8_sm90.h)
  int out_half;      // 1: dk / dv float16, 0: bfloat16
  int64_t total_k;
  float* dq_accum;   // fp32, zeroed: (total_q, H, D) (bulk tensor reduce-adds), or with kFp8BwdDqRedV4 the
                     // fragment-ordered groups of hstu_fp8_bwd_dq_tiled_floats (in bf16 with kFp8BwdDqBf16, the
                     // default: half of them)
  int diag;          // the kernel variant (the op's diag; Fp8BwdDiagBuilt): 0 the default
  int lpt_pairs;     // kFp8BwdLptGroups: (batch, head) pairs per group of the grid (hstu_fp8_bwd_lpt_pairs)
};

// Timing-only variants of the kernel (tools/hstu_dev/fp8_bwd_split.py through the private op's `diag` argument,
// never the product path): each bit removes one phase, so the time it takes shows in the difference.
constexpr int kFp8BwdDiagNoDq = 1;            // no dQ staging / reduce-adds (the dQ GEMM still runs)
constexpr int kFp8BwdDiagNoSilu = 2;          // no tanh: P = S / 2, SiLU' = 1
constexpr int kFp8BwdDiagNoAmaxBarrier = 4;   // the dS factor from each warp's own amax (the barriers stay: they
                                              // also bound the warpgroups' drift)
constexpr int kFp8BwdDiagNoPointwise = 8;     // no pointwise math: P8 = e4m3(S^T), dS' = dP^T (no scale, no select)
constexpr int kFp8BwdDiagNoReduce = 16;       // dQ staged in shared memory, no bulk reduce-adds (with 1: what the
                                              // staging and what the global reduce traffic cost)
constexpr int kFp8BwdDiagNoPark = 32;         // dS' not parked in shared memory (tile i's own dS' quantized late)
constexpr int kFp8BwdDiagNoFence = 128;       // no fence.proxy.async (dS8 stores, dQ staging: racy, timing only)
constexpr int kFp8BwdDiagNoReload = 256;      // no Q / dO / dO^T / Q^T loads past the first stages (the tile
                                              // traffic's energy: docs/hstu_kernel_notes.md, session 24)
// Not timing-only (correct gradients; the private op's diag argument until it is measured against 0): the proxy
// fences of tile i's dS8 stores and dQ staging issued one iteration later, one fence for both, with the dS8 arrive
// and the reduce-adds (the fence's MEMBAR.ALL.CTA then finds the stores long completed).
constexpr int kFp8BwdLateFence = 64;
// Not timing-only (bit-equal gradients): the dS8 tile stored by two stmatrix.x4.trans per thread (8 byte permutes)
// instead of 16 16-bit stores (16 byte permutes).
constexpr int kFp8BwdStsmDs8 = 1024;
// Not timing-only (the same gradients up to rare double roundings, below): dS' of a tile quantized in its own
// iteration with ug = u as it is then (folded into dS's factor: exact; a warp whose dS' / ug exceeds 448, or while
// u = 0: its own factor pow2ceil(amax / 448)) and kept in registers (8 words) until the late part of the next
// iteration, instead of parked in fp32 in shared memory. Where the tile's u exceeds that factor (rare), the kept
// bytes are scaled by factor / u: exact unless the result is an e4m3 subnormal (a second rounding, which the
// emulating reference does not model).
constexpr int kFp8BwdSpecQ = 2048;
// Not timing-only (bit-equal gradients): the producer loads each tile's q / dO descale factors with its stage (two
// words in shared memory) instead of the consumers' dependent global loads per tile.
constexpr int kFp8BwdPrefetch = 4096;
// Not timing-only (bit-equal gradients): the mask bits of partly masked tiles by a few compares per element where
// the sequence has no contexts, no targets and no left window (causal, none, right windows).
constexpr int kFp8BwdMaskFast = 8192;
// Not timing-only (bit-equal gradients): the grid (head, batch, key block), so the longest CTAs of causal masks (key
// block 0) start first (launch fails with more than 65535 key blocks). Measured slower (not in the default).
constexpr int kFp8BwdLpt = 16384;
// Not timing-only (bit-equal gradients): dK / dV stored by 16-byte stores (a quad transposes its bf16 pairs in two
// shuffle rounds) instead of 4-byte ones.
constexpr int kFp8BwdEpiV4 = 65536;
// The op's private diag d runs hstu_bwd_fp8_sm90_kernel<D, d ^ kFp8BwdDefault>: d = 0 the default; a timing-only bit
// (1 ... 16, 128) removes a phase from it; a feature bit toggles that feature (kFp8BwdLpt: on); kFp8BwdDefault is
// the kernel without them, with its parking (32) and late-fence (64, 96) variants.
// Not timing-only (the same gradients up to the order of dQ's fp32 additions): dQ added to the fp32 workspace from the
// accumulator registers by red.global.add.v4.f32 in the accumulator's fragment order (16-row groups per warp, each
// warp instruction 512 contiguous bytes, as the bf16 D = 256 kernel's dq_red_tiled_block): no shared-memory staging,
// no proxy fence, no wait for the previous reduce's reads; the finishing pass puts the rows back
// (hstu_fp8_bwd_dq_tiled_floats says the layout).
constexpr int kFp8BwdDqRedV4 = 131072;
// Not timing-only (bit-equal gradients): a 1-D grid in groups of HstuFp8BwdParams::lpt_pairs (batch, head) pairs,
// inside a group key block 0 of every pair, then block 1, ... (the bf16 kernel's bwd_lpt_decode): the longest CTAs of
// causal masks start first within a group whose Q / dO tiles stay in L2, and the last CTAs dispatched are short ones
// (the plain grid dispatches the last pair's key block 0 a pair before the end). A group of one pair is the plain
// grid's order.
constexpr int kFp8BwdLptGroups = 262144;
// Not timing-only (bit-equal gradients): three stages per ring (Q, dO, dO^T and Q^T of a tile loaded up to two tiles
// ahead instead of one), in the shared memory of the buffers that kFp8BwdSpecQ and kFp8BwdDqRedV4 leave unused (dS'
// parking, dQ staging; a kernel without either keeps two stages).
constexpr int kFp8BwdStages3 = 524288;
// Not timing-only (bit-equal gradients): the dQ reduce-adds' address registers kept live until the next tile's
// reduce-adds (a reduce-add holds its source registers until the LSU takes them; the loop top's first write reused
// them and waited: 7 % of the stall samples at B16 S16K, ncu, docs/hstu_kernel_notes.md).
constexpr int kFp8BwdRedKeep = 1048576;
// Not timing-only (bit-equal gradients): whether tile i + 1 is full (tile_full: no mask bits, no selects) decided in
// iteration i under its GEMMs instead of at the top of iteration i + 1 (shared loads of the sequence's fields).
constexpr int kFp8BwdFullNext = 4194304;
// Not timing-only (bit-equal gradients): the consumer's warpgroup and warp index broadcast from lane 0, so that
// ptxas keeps the wgmma descriptors and addresses derived from them in uniform registers (without it each
// descriptor of K / V / K^T is rebuilt per k-step by 64-bit vector adds and two R2UR).
constexpr int kFp8BwdWgUniform = 16777216;
// Not timing-only (the same gradients up to the order of dQ's fp32 additions): the last 2 of the 8 dQ reduce-adds of
// tile i - 2 (scaled in the late part of iteration i, held in 8 registers) issued in iteration i + 1 between its S^T
// and dP^T issue, so the loop top no longer waits for the LSU to read their source registers.
constexpr int kFp8BwdRedNext = 33554432;
// Not timing-only (as kFp8BwdRedNext): kFp8BwdRedNext with 3 of the 8 reduce-adds held instead of 2 (4 spill;
// measured 0.978-0.995 / 0.989-0.999 of the kernel with 2 at B16 S16K / S4K in three runs, docs/hstu_kernel_notes.md).
constexpr int kFp8BwdRedNextWide = 67108864;
// Not timing-only (bit-equal gradients): kFp8BwdPrefetch's q / dO factor words of the tile read right after its full
// barrier, before the S^T / dP^T issue and the held reduce-adds, instead of after the issue: their shared load queued
// behind the reduce-adds, and ptxas placed the R2UR that waits for it between dP^T's wgmmas (the top stall line, 4 %
// of the samples at B16 S4K, ncu of main df4a8c3's default; docs/hstu_kernel_notes.md, session 23).
constexpr int kFp8BwdFactorsEarly = 536870912;
// Not timing-only (dq rounded differently, within the tests' error rule, docs/hstu_kernel_notes.md, session 26):
// with kFp8BwdDqRedV4, dQ of a tile rounded to bf16 and reduce-added in bf16 (red.global.add.noftz.v4.bf16x2, 16
// bytes = 8 values per instruction: 4 per thread and tile instead of 8, half the 34.6 GB of L2 reduce traffic at B16
// S16K) into a bf16 workspace of the same fragment order (hstu_fp8_bwd_dq_tiled_floats / 2 floats); the zeroing and
// the finishing pass move half the bytes. A row's dq is the bf16 sum of its key blocks' bf16 partials (measured: 4.7x
// the fp32 kernel's error against the fp64 emulation at a 16K sequence, 1.4x the bf16 emulation's; B16 S16K 0.95x
// the time sustained, S4K 0.93x).
constexpr int kFp8BwdDqBf16 = 134217728;
// Lab variants of session 26's run 4 (the default but 1 / none of a tile's 4 bf16 reduce-adds held for the next
// tile's S^T instead of 2; dev builds only).
constexpr int kFp8BwdDqBf16Held1 = 268435456;
constexpr int kFp8BwdDqBf16Held0 = 1073741824;
// Not timing-only (bit-equal dk / dv; dq up to u (k_s / q_s) against (u k_s) / q_s): fewer instructions per tile:
// whether a tile is full (no mask bits) by three bounds per warpgroup computed once (SeqMask::tile_full's tests are
// each a bound on the tile's first row) instead of the sequence's mask fields re-read and tested per tile; the tile's
// dS factors without an IEEE division (pow2ceil(amax / 448) from amax's bits, c_ds0 / u as c_ds0 times u's exact
// reciprocal: u is a power of two); dQ's factor u (k_s / q_s) with k_s / q_s divided where q_s changes; dQ's
// reduce-add address from the previous tile's (measured: B16 S16K 0.92x the time in a burst, 0.94x sustained).
constexpr int kFp8BwdLean = 8388608;
// Not timing-only (bit-equal gradients): the dS pass's amax of a thread's 32 values as four independent maxima (the
// SASS had the last 22 of its 32 FMNMX back to back, each waiting for the one before), and the late part's maximum of
// the 8 posted words by a tree (measured: docs/hstu_kernel_notes.md, session 28).
constexpr int kFp8BwdAmaxTree = 32768;
// Not timing-only (bit-equal gradients): the late part's dS8 stores of tile i - 1 (quantized with the factor it was
// expected to have; rewritten after the amax barrier only where the factor grew, rare), their proxy fence and the dQ
// GEMM of tile i - 2 issued before that barrier, in four dS8 buffers instead of three (measured: B16 S16K 0.976x the
// time in a burst, 0.985x sustained; the dQ issue alone ahead measured slower; docs/hstu_kernel_notes.md, session 29).
constexpr int kFp8BwdDs8Early = 2097152;
// The kernel's default: the features above that measured correct and faster (docs/hstu_kernel_notes.md;
// not kFp8BwdLpt: 1.7x slower at B16 S16K with the others, its concurrent CTAs share no Q / dO tiles in L2).
constexpr int kFp8BwdDefault = kFp8BwdPrefetch | kFp8BwdMaskFast | kFp8BwdStsmDs8 | kFp8BwdSpecQ | kFp8BwdEpiV4 |
                               kFp8BwdDqRedV4 | kFp8BwdLptGroups | kFp8BwdStages3 | kFp8BwdRedKeep | kFp8BwdFullNext |
                               kFp8BwdWgUniform | kFp8BwdRedNext | kFp8BwdRedNextWide | kFp8BwdFactorsEarly |
                               kFp8BwdDqBf16 | kFp8BwdLean | kFp8BwdAmaxTree | kFp8BwdDs8Early;
// The features the default gained last (measured one by one against the kernel without them; dev builds keep the
// kernel without all three).
constexpr int kFp8BwdNewest = kFp8BwdEpiV4 | kFp8BwdDqRedV4 | kFp8BwdLptGroups;
// Pairs per group of kFp8BwdLptGroups' grid for sequences of nblk_k key blocks: groups of about group_ctas CTAs
// (at most 16 pairs), but a pair of >= 128 key blocks (S >= 16K) a group of its own: such a pair alone is about a
// wave of CTAs (measured level with two per group; docs/hstu_kernel_notes.md).
constexpr int hstu_fp8_bwd_lpt_pairs(int nblk_k, int group_ctas) {
  const int gp = group_ctas / (nblk_k > 0 ? nblk_k : 1);
  return nblk_k >= 128 ? 1 : gp < 1 ? 1 : gp > 16 ? 16 : gp;
}
// The FP8 backward's bit of hstu_attn::fp8_bwd_sm90's `options`: bit 56 is the routing's kernel_options(fp8_bwd=False)
// (hstu/_fp8.py; no kernel reads it). The op's private kernel variants are its diag argument (below; none in the
// product build now, their measurements in docs/hstu_kernel_notes.md).
constexpr int64_t kOptFp8BwdDequant = int64_t{1} << 56;
// The op's private variants by option bits (hstu/_fp8_bwd.py FP8_BWD_VARIANT_BITS; the op's diag, when not 0, wins):
// bit 59 main_kernel toggles kFp8BwdDs8Early (off: main 4d2d71ae's kernel); bit 60 free.
constexpr int64_t kOptFp8BwdMainKernel = int64_t{1} << 59;
constexpr int64_t kOptFp8BwdMask = kOptFp8BwdDequant | kOptFp8BwdMainKernel;
constexpr int fp8_bwd_option_diag(int64_t options) { return (options & kOptFp8BwdMainKernel) ? kFp8BwdDs8Early : 0; }
constexpr int kFp8BwdLptGroupCtas = 256;

// The diag values built: the one list the launcher instantiates and the op accepts. The product build holds the
// default and kFp8BwdDs8Early (the default without its newest feature = main 4d2d71ae's kernel, option bit 59).
// Builds with HSTU_DEV_VARIANTS (--define hstu_dev=1) add the timing-only phase splits
// (tools/hstu_dev/fp8_bwd_split.py) and the default without one older feature each; which main commit each of those
// equals: docs/hstu_kernel_notes.md, "The FP8 backward's dev variants".
#ifdef HSTU_DEV_VARIANTS
using Fp8BwdDiagBuilt = std::integer_sequence<int, 0, kFp8BwdNewest, kFp8BwdEpiV4, kFp8BwdDqRedV4, kFp8BwdLptGroups,
                                              kFp8BwdDiagNoDq, kFp8BwdDiagNoSilu, kFp8BwdDiagNoAmaxBarrier, 7,
                                              kFp8BwdDiagNoPointwise, 15, kFp8BwdDqRedV4 | kFp8BwdDiagNoReduce,
                                              kFp8BwdDiagNoFence,
                                              kFp8BwdDqRedV4 | kFp8BwdDiagNoFence | kFp8BwdDiagNoReduce,
                                              kFp8BwdStsmDs8, kFp8BwdSpecQ,
                                              kFp8BwdPrefetch, kFp8BwdMaskFast, kFp8BwdLpt, kFp8BwdDefault,
                                              kFp8BwdDefault | kFp8BwdDiagNoDq, kFp8BwdDefault | kFp8BwdDiagNoPark,
                                              kFp8BwdDefault | kFp8BwdLateFence,
                                              kFp8BwdDefault | kFp8BwdLateFence | kFp8BwdDiagNoPark,
                                              kFp8BwdStages3 | kFp8BwdRedKeep, kFp8BwdStages3, kFp8BwdFullNext,
                                              kFp8BwdWgUniform | kFp8BwdRedNext, kFp8BwdRedNext,
                                              kFp8BwdRedNextWide, kFp8BwdFactorsEarly, kFp8BwdDiagNoReload,
                                              kFp8BwdDqBf16, kFp8BwdDqBf16Held1, kFp8BwdDqBf16Held0,
                                              kFp8BwdLean, kFp8BwdAmaxTree, kFp8BwdDs8Early>;
#else
using Fp8BwdDiagBuilt = std::integer_sequence<int, 0, kFp8BwdDs8Early>;
#endif
// The variants built at head dims other than 128 (D = 64): the product's two in every build (the dev variants' phase
// splits and dQ staging were written for D = 128).
using Fp8BwdDiagProduct = std::integer_sequence<int, 0, kFp8BwdDs8Early>;
// D = 256 (hstu_bwd_fp8_sm90_d256_kernel.cuh): the product's two run its default kernel; kFp8BwdD256Sync (lab,
// every build: the op's diag) its first form, warpgroup 0's S^T and pointwise pass, warpgroup 1's dP^T and dS' after.
constexpr int kFp8BwdD256Sync = 512;
using Fp8BwdDiagBuiltD256 = std::integer_sequence<int, 0, kFp8BwdDs8Early, kFp8BwdD256Sync>;
template <int D>
using Fp8BwdDiagBuiltAt = std::conditional_t<D == 128, Fp8BwdDiagBuilt,
                                             std::conditional_t<D == 256, Fp8BwdDiagBuiltD256, Fp8BwdDiagProduct>>;
template <int... Ds>
constexpr bool fp8_bwd_diag_in(int diag, std::integer_sequence<int, Ds...>) {
  return ((diag == Ds) || ...);
}
constexpr bool fp8_bwd_diag_built(int diag, int head_dim = 128) {
  return head_dim == 128   ? fp8_bwd_diag_in(diag, Fp8BwdDiagBuilt{})
         : head_dim == 256 ? fp8_bwd_diag_in(diag, Fp8BwdDiagBuiltD256{})
                           : fp8_bwd_diag_in(diag, Fp8BwdDiagProduct{});
}
// The head dims the FP8 backward kernel is built for (hstu/kernel_matrix.bzl HSTU_SM90_FP8_BWD_HDIMS; D = 256: a
// kernel of its own, hstu_bwd_fp8_sm90_d256_kernel.cuh, which every product variant runs).
constexpr bool fp8_bwd_head_dim_built(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// Runs the FP8 backward kernel on `stream`. p: q / k / v pointing at e4m3 data (contiguous (rows, H, D)), p.dk /
// p.dv in bf16 or fp16 per f.out_half (every row of a sequence written; rows of no sequence left alone), no rab,
// sanitized int32 vectors. D = 64, 128 or 256; cudaErrorNotSupported in builds without sm_90a device code.
// kFp8BwdDqRedV4's dq workspace: 16-row groups, rows 16 k .. 16 k + 15 of sequence b in group
// (cu_seqlens_q[b] + 16 b) / 16 + k (hstu::sm90::dq_group_index: every sequence's groups its own), each group of head h
// two blocks of D / 2 columns in the register order of a warp's part of an m64n(D / 2) fp32 accumulator (float4
// 32 j + l: rows l / 4 and l / 4 + 8, columns 8 j + 2 (l % 4), + 1); floats of total_q / 16 + B + 1 groups, + 3 for
// the last 64-row tile's warps past its sequence (they add exact zeros).
constexpr int64_t hstu_fp8_bwd_dq_tiled_groups(int64_t total_q, int64_t batch) { return total_q / 16 + batch + 4; }
constexpr int64_t hstu_fp8_bwd_dq_tiled_floats(int64_t total_q, int64_t batch, int64_t heads, int64_t head_dim) {
  return hstu_fp8_bwd_dq_tiled_groups(total_q, batch) * heads * 16 * head_dim;
}

template <int D>
cudaError_t run_hstu_bwd_fp8_sm90(const HstuParams& p, const HstuFp8BwdParams& f, cudaStream_t stream);

}  // namespace hstu
