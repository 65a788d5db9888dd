// HSTU attention forward in FP8 (e4m3) for Hopper (sm_90a), issue 36:
//   O = v_descale / scaling_seqlen * (e4m3(SiLU(alpha * q_descale * k_descale * (Q8 K8^T)) masked) V8).
//
// Same structure as the bf16 forward (hstu_fwd_sm90_kernel.cuh, grid order): warpgroup 0 produces (one thread
// issues TMA loads of the Q tile and of K / Vt tiles into an mbarrier pipeline), warpgroups 1 and 2 consume (64
// query rows each) and take turns issuing their wgmmas (pingpong), the SiLU of KV tile i running under the P V of
// tile i - 1. The differences:
// - both GEMMs are m64nNk32 e4m3 x e4m3 -> fp32 (wgmma_fp8_sm90.cuh); Q and K rows are D bytes, so D = 64 uses a
//   64-byte swizzle (64-byte rows) and D >= 128 128-byte panels;
// - B of P V is Vt (hstu_fp8_sm90.h): the pre-pass hstu_fp8_vt_kernel writes it once per call, keys contiguous,
//   per-sequence padded and permuted per 32 keys so that P goes from S's accumulator registers straight into the
//   FP8 A-operand registers (hstu_fp8_key_perm); keys that no query may use (past seqused, padding) hold 0 there,
//   so P = 0 never meets a non-finite V;
// - P is rounded to e4m3 (cvt.rn.satfinite: round to nearest even, saturated to +-448) with no P factor: P =
//   SiLU(S) is O(|S|), inside e4m3's range for any sane input (the reference `hstu_attn_fp8_reference` rounds the
//   same way); 1 / scaling_seqlen and v_descale are applied in fp32 to the output accumulators;
// - descale factors: q's is constant per CTA in every mode (a 128-row query tile lies in one 128-row block), k's
//   and v's are constant per KV tile in block mode (BN = 128 or 64 keys, aligned to the sequence start). S is scaled by
//   alpha q_s k_s of its tile; O is kept in units of the current tile's v factor and rescaled (v_old / v_new) when
//   the factor changes (block mode only: other modes have one factor per CTA);
// - P_i is converted to e4m3 inside the SiLU's code, into registers apart from P_{i-1}'s (still read by the P V in
//   flight), so the conversions run in the MUFU stream's shadow (kEarlyPack; issue 36);
// - at D <= 128 half of an unmasked tile's scores (3 / 8 on 192-key tiles) take a SiLU in half2 arithmetic without
//   the MUFU (kSilu, silu_h2_e4m3x2), the others tanh.approx: the MUFU alone would bind there;
// - KV tiles of 192 keys at D = 128 in grid order (Fp8FwdTraits), not in block mode: by default for batches of at
//   least kFp8WideMinMeanKeys keys per sequence on average (fp8_wide_tiles), at any length on
//   kernel_options(fp8_bn192=True).
// (A 128-key tile lies in one 128-row block of factors; the 192-key tiles would not, hence not block mode.)
// The masked key tiles between the history and a query tile's target group are skipped (fwd_kv_tiles), and the
// query tiles scheduled in grid order, or on kernel_options(fp8_sched=True) by the bf16 forward's work list /
// persistent CTAs (Fp8FwdMode). No rab (the op keeps the dequantize + bf16 path for rab).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_tiles.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/wgmma_fp8_sm90.cuh"

namespace hstu {
namespace sm90 {

// QBUFS: Q buffers (2: persistent CTAs, the next tile's Q loads under the current one). BN: keys per KV tile (a
// multiple of 32: Vt's permuted groups); 192 (D = 128, kernel_options(fp8_bn192=True)) cuts the per-tile overheads
// per key (pingpong barriers, waits, loop top, wgmma issue) by a third, as FA3's FP8 forward's wide tiles (224 keys
// there); its Vt tile is two panels (128 keys with the 128-byte swizzle, then 64 with the 64-byte one).
template <int D, int QBUFS = 1, int BN = (D == 256 ? 64 : 128)>
struct Fp8FwdTraits {
  static constexpr int kBlockM = 128;                  // 2 consumer warpgroups x 64 rows
  static constexpr int kBlockN = BN;
  static constexpr int kStages = D == 256 || BN > 128 ? 3 : 4;
  // Vt panel 0: D rows of kVtRowBytes keys (+ panel 1 of BN - kVtRowBytes = 64 keys at BN 192)
  static constexpr int kVtRowBytes = BN < 128 ? BN : 128;
  static constexpr int kQBufs = QBUFS;
  static constexpr int kRowBytes = D < 128 ? D : 128;  // Q / K panel rows (TMA box width and swizzle span)
  static constexpr int kPanels = D / kRowBytes;
  static constexpr int kQPanelBytes = kBlockM * kRowBytes;
  static constexpr int kKPanelBytes = kBlockN * kRowBytes;
  static constexpr int kQBytes = kBlockM * D;
  static constexpr int kTileBytes = kBlockN * D;       // one K tile or one Vt tile (D rows of kBlockN keys)
  static constexpr int kOPanelBytes = kBlockM * 128;   // output staging: 64 16-bit columns per panel
  static constexpr int kOBytes = kBlockM * D * 2;
  static constexpr int kBarOffset = kQBufs * kQBytes + 2 * kStages * kTileBytes + kOBytes;
  // + mbarriers (the persistent Q buffer 1 full / empty at 200-223) + the persistent FwdTile slots (128 bytes each)
  // + slack to align the base to 1024 bytes
  static constexpr int kSmem = kBarOffset + 256 + (QBUFS > 1 ? 128 * QBUFS : 0) + 1024;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = BN > 128 ? 24 : 40;  // (BN 192: grid order only)
  static constexpr int kConsumerRegs = BN > 128 ? 240 : 232;
  static_assert(D == 64 || D == 128 || D == 256, "head dim");
  static_assert(BN == 64 || BN == 128 || (BN == 192 && D == 128), "KV tile");
  static_assert(8 + 32 * kStages <= 200, "mbarriers");
  static_assert(QBUFS == 1 || QBUFS == 2, "Q buffers");
  static_assert(kSmem <= 232448, "shared memory opt-in limit");
};

// K-major shared-memory descriptor of a tile written by TMA with a swizzle of row_bytes (128, 64 or 32): 8-row atoms.
__device__ __forceinline__ uint64_t make_desc_kmajor(uint32_t saddr, int row_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((saddr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>(1) << 16;  // LBO: unused for swizzled K-major operands
  d |= static_cast<uint64_t>((8 * row_bytes) >> 4) << 32;
  d |= static_cast<uint64_t>(row_bytes == 128 ? 1 : row_bytes == 64 ? 2 : 3) << 62;  // SWIZZLE_128B / 64B / 32B
  return d;
}

template <int N>
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (N == 64) {
    wgmma_m64n64k32_ss_e4m3(d, da, db, scale_d);
  } else if constexpr (N == 128) {
    wgmma_m64n128k32_ss_e4m3(d, da, db, scale_d);
  } else {
    static_assert(N == 192, "QK^T tile width");
    wgmma_m64n192k32_ss_e4m3(d, da, db, scale_d);
  }
}

template <int N>
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (N == 64) {
    wgmma_m64n64k32_rs_e4m3(d, a, db, 1);
  } else if constexpr (N == 128) {
    wgmma_m64n128k32_rs_e4m3(d, a, db, 1);
  } else {
    static_assert(N == 256, "head dim");
    wgmma_m64n256k32_rs_e4m3(d, a, db, 1);
  }
}

// Four fp32 -> e4m3 (round to nearest even, saturated to +-448), byte 0 = a.
__device__ __forceinline__ uint32_t cvt_e4m3x4(float a, float b, float c, float d) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return r;
}

// fp16 pair ops (two scores per instruction).
__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// -r's coefficient k for silu_h2_e4m3x2 (fp16 pairs, k = 0 for degree 5): the minimax polynomial of degree 5 of
// sigmoid(-a) on [0, 6] weighted by a (max a |error| 2.1e-3; a linear program over 1,500 points, docs/hstu_attn.md).
__host__ __device__ constexpr uint32_t silu_h2_coef(int k) {
  constexpr uint32_t c[6] = {0x86f586f5u, 0x160e160eu, 0x9a2b9a2bu, 0xa9e8a9e8u, 0x349a349au, 0xb80eb80eu};
  return c[k];
}

// SiLU of two scores h0, h1 (h = alpha q_s k_s S) without the MUFU, rounded to e4m3 (byte 0 = h0), in fp16 (P is
// rounded to e4m3's 4 significant bits, fp16 keeps 11): P = relu(h) - a r(a), a = min(|h|, 6), r the degree-5
// polynomial of sigmoid(-a) above (about the bf16 SiLU's error; beyond 6 the term a sigmoid(-a) < 0.015 is dropped).
// 8 half2 ops per pair besides the f32 -> f16x2 and f16x2 -> e4m3 conversions (degree 4, one op less, was no faster).
__device__ __forceinline__ uint16_t silu_h2_e4m3x2(float h0, float h1) {
  uint32_t x, a, y;
  asm("cvt.rn.f16x2.f32 %0, %2, %1;\n" : "=r"(x) : "f"(h0), "f"(h1));
  asm("{\n.reg .b32 t;\nabs.f16x2 t, %1;\nmin.f16x2 %0, t, %2;\n}\n" : "=r"(a) : "r"(x), "r"(0x46004600u));
  uint32_t p = hfma2(a, silu_h2_coef(0), silu_h2_coef(1));
#pragma unroll
  for (int k = 2; k <= 5; ++k) p = hfma2(p, a, silu_h2_coef(k));
  asm("max.f16x2 %0, %1, %2;\n" : "=r"(y) : "r"(x), "r"(0u));
  y = hfma2(a, p, y);
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;\n" : "=h"(r) : "r"(y));
  return r;
}
// Four scores: bytes 0-3 = h0..h3.
__device__ __forceinline__ uint32_t silu_h2_e4m3x4(float h0, float h1, float h2, float h3) {
  uint32_t r;
  asm("mov.b32 %0, {%1, %2};\n" : "=r"(r) : "h"(silu_h2_e4m3x2(h0, h1)), "h"(silu_h2_e4m3x2(h2, h3)));
  return r;
}

// The SiLU forms of unmasked tiles (kSilu; kernel_options(fp8_silu=...)): kFp8SiluTanh the tanh form for every score;
// kFp8SiluMixed silu_h2_e4m3x4 for the odd P words of each thread (4 scores each, word 4 ks + q), the tanh form
// for the even ones, so that the MUFU and the FMA pipes share the SiLU. The
// default (fp8_silu_default): mixed at D <= 128, where one MUFU op per score matches the tensor cores' time (the mix
// is faster there on an H200, docs/hstu_attn.md), tanh at D = 256 (the MUFU is half the tensor time: the mix only
// adds work) and in the late P conversion (kEarlyPack false, the kernel as it was, for comparisons: half2 words
// there keep pn live across the P V wait beside acc_s, and ptxas serializes the wgmmas, C7511).
// kFp8SiluMix3: 3 of every 8 words in half2, spread evenly (word w is half2 where floor((w + 1) n / 8) > floor(w n /
// 8), n = 3; n = 4 gives the odd words of kFp8SiluMixed): the default on the 192-key tiles (bn > 128), where the
// half2 words' issue and FMA-pipe cost binds before the MUFU (H200, B16 causal: 0.95x the time of kFp8SiluMixed there
// at S8K / S16K; on 128-key tiles 1.04x, so those keep kFp8SiluMixed).
enum Fp8Silu : int { kFp8SiluTanh = 0, kFp8SiluMixed = 1, kFp8SiluMix3 = 2 };
__host__ __device__ constexpr int fp8_silu_default(int D, bool early_pack = true, int bn = 0) {
  return early_pack && D <= 128 ? (bn > 128 ? kFp8SiluMix3 : kFp8SiluMixed) : kFp8SiluTanh;
}
__host__ __device__ constexpr bool fp8_silu_h2_word(int silu, int w) {
  const int n = silu == kFp8SiluMixed ? 4 : silu == kFp8SiluMix3 ? 3 : 0;
  return (w + 1) * n / 8 > w * n / 8;
}

// Variants of the FP8 forward (HstuFp8FwdParams::var, kernel_options(fp8_fwd_var=...), private; the measured ones
// that lost are in docs/hstu_attn.md): kFp8VarTrace (timing-only, WRONG outputs in one CTA) the default's kernel
// (D = 128: its 192-key tiles; D = 256: its grid kernel) with clock stamps of CTA (0, 0, 0)'s consumer loop over
// its output rows (kFp8FwdDiagTrace; tools/hstu_dev/fp8_fwd_split.py --trace).
// kFp8VarMainLoop (correct output, bitwise the default's): the default's grid kernels (D = 128: the 192-key tiles
// where they apply, else 128-key; D = 64: 128-key; D = 256: 64-key) with the kFp8FwdMainLoop bit below.
// kFp8VarTailCopy (correct output, bitwise the default's): the default's grid kernels with the kFp8FwdTailCopy bit
// below. kFp8VarTileTest (the same): D = 128's 192-key tiles with the kFp8FwdTileTest bit (main 0bb35f74's default
// kernel there), elsewhere the default.
// kFp8VarMainVt (correct output, bitwise the default's): the default kernels behind main's Vt pre-pass
// (hstu_fp8_vt_main_kernel).
enum Fp8FwdVar : int {
  kFp8VarNone = 0,
  kFp8VarMainLoop = 1,
  kFp8VarTailCopy = 2,
  kFp8VarTileTest = 3,
  kFp8VarMainVt = 4,
  kFp8VarTrace = 15
};
// Whether the D = 128 forward takes 192-key tiles (grid order, not block mode: checked by the launcher): on
// kernel_options(fp8_bn192=True), and by default for batches of at least kFp8WideMinMeanKeys keys per sequence on
// average (total_k / batch), where they were faster on an H200 (B16 causal, with their 3 / 8 mix: 0.97x the time of
// the 128-key tiles at S4K, 0.93x at S8K / S16K; shorter batches keep 128 keys, unmeasured there).
constexpr int64_t kFp8WideMinMeanKeys = 4096;
inline bool fp8_wide_tiles(int bn192, int64_t total_k, int batch) {
  return bn192 != 0 || total_k >= kFp8WideMinMeanKeys * batch;
}

// Timing-only variants of the FP8 forward (kernel_options(fp8_fwd_diag=...), private, WRONG outputs; grid order,
// unmasked tiles; tools/hstu_dev/fp8_fwd_split.py): each bit removes one cost of P, so its time shows in the
// difference. kFp8FwdDiagNoMufu: P = h + h h (the FMUL and FFMA stay, the MUFU.TANH goes); kFp8FwdDiagNoCvt: P packed
// by XORs of the fp32 bits (two ALU ops per 4 elements) instead of two F2FP.SATFINITE.E4M3.
constexpr int kFp8FwdDiagNoMufu = 1;
constexpr int kFp8FwdDiagNoCvt = 2;
// kFp8FwdDiagTrace: the arithmetic of the default; CTA (0, 0, 0) (grid order: the first sequence's last query tile)
// writes clock stamps of each consumer warpgroup's loop over its output rows instead of its output (32-bit words
// 4096 wg + 8 i + j, 64 per output row: j 0 loop top, 1 K / V ready, 2 turn, 3 issued, 4 S done, 5 SiLU done, 6 P V
// done; i 0 the first tile, i = n_tiles the last P V; word 4096 wg + 4088: n_tiles).
constexpr int kFp8FwdDiagTrace = 4;
// kFp8FwdMainLoop (not timing-only: the same output; kFp8VarMainLoop, for comparisons): the grid kernels without
// kBounds (the kernel below), the loop as it was.
constexpr int kFp8FwdMainLoop = 8;
// kFp8FwdTailCopy (the same output): the kBounds kernels with P_i's copy into the P V's A registers where it was,
// between the P V wait and the next turn's sync (their default: after the turn's S issue).
// kFp8FwdTileTest (the same output; 192-key tiles): their unmasked-tile test from tile(i)'s bounds per tile, as
// main 0bb35f74 had it (their default: kIdxTest below).
constexpr int kFp8FwdTailCopy = 16;
constexpr int kFp8FwdTileTest = 32;


// Tiles [j0, j0 + bn) with lo <= j0 <= hi are exactly those of rows [r0, r1) for which tile_full_targets (targets:
// true) or tile_full holds: SeqMask::full_tiles plus tile_full_targets' target rows against the history.
__device__ __forceinline__ void fp8_full_tiles(const SeqMask& mk, int r0, int r1, int bn, bool targets, int& lo,
                                               int& hi) {
  if (targets && r1 > mk.hist && r0 >= mk.hist && r1 <= mk.lk && mk.wl < 0) {
    lo = INT_MIN;
    hi = mk.hist - bn;
    return;
  }
  mk.full_tiles(r0, r1, bn, lo, hi);
}

// The walk's positions i (fwd_kv_tile(nb_end, gap_end, gap_len, i), i < n_tiles) whose tile nb has lo <= nb * bn <=
// hi: [idx_lo, idx_lo + idx_n) (the walk is decreasing: the tiles of [nlo, nhi] are consecutive positions). Walk
// position t = nb_end - 1 - i visits tile t (t >= gap_end) or t - gap_len (t < gap_end).
__device__ __forceinline__ void fp8_full_span(int lo, int hi, int bn, int nb_end, int gap_end, int gap_len,
                                              int n_tiles, int& idx_lo, int& idx_n) {
  const int nlo = lo <= 0 ? 0 : (lo + bn - 1) / bn, nhi = hi < 0 ? -1 : hi / bn;  // tiles [nlo, nhi] (nb >= 0)
  const int gap_begin = gap_end - gap_len;
  const int t_hi = nhi >= gap_end ? nhi : min(nhi + gap_len, gap_end - 1);  // the last position with tile <= nhi
  const int t_lo = nlo >= gap_begin ? max(nlo, gap_end) : nlo + gap_len;   // the first with tile >= nlo
  idx_lo = max(0, nb_end - 1 - t_hi);
  idx_n = max(0, min(n_tiles - 1, nb_end - 1 - t_lo) - idx_lo + 1);
}

// The descale factor of sequence b, head h, 128-row block blk of a sequence starting at row `start`.
__device__ __forceinline__ float fp8_descale(const float* s, int mode, int b, int h, int heads, int64_t block_cols,
                                             int start, int blk) {
  if (mode == kFp8Tensor) return __ldg(s);
  if (mode == kFp8Head) return __ldg(s + h);
  if (mode == kFp8BatchHead) return __ldg(s + b * heads + h);
  return __ldg(s + h * block_cols + start / 128 + b + blk);
}

// Vt pre-pass: block x (a 1-D grid, the head fastest: h = x % H) writes columns [64 (x / H), 64 (x / H) + 64) of
// head h's D rows (hstu_fp8_sm90.h layout), with kVtThreads threads: each issues all of its V loads (kLoads 16-byte
// chunks) before its first shared store, and 128 threads per block let 16 blocks share an SM (D <= 128; 13 at
// D = 256, by shared memory). Main's version (hstu_fp8_vt_main_kernel, kernel_options(fp8_fwd_var=4): grid (column
// block, h), 256 threads, each load waited for before the next) ran at 2.4 TB/s at B16 S16K H4 D128 on an H200
// (0.113 ms, 2.9 % of the op); this one 1.10-1.12x faster than main's in one process at D 128 / 256 (session 32,
// docs/hstu_attn.md). The head fastest (the blocks in flight read all H heads' bytes of their keys' V rows together)
// measured the same as main's (column block, head) order.
constexpr int kVtThreads = 128;
// One output item of both Vt pre-passes: item idx in [0, 4 D) packs row d = idx / 4's 16 keys from column
// c0 + 16 (idx % 4) of `tile` (the block's 64 keys x D bytes of V) into four words, one 16-byte store (none from
// vt_cols on).
template <int D>
__device__ __forceinline__ void hstu_fp8_vt_store(const uint8_t (&tile)[64][D + 16], uint8_t* vt, int64_t vt_cols,
                                                  int64_t c0, int idx) {
  const int d = idx / 4, g = idx % 4;
  const int64_t c = c0 + 16 * g;
  if (c >= vt_cols) return;
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int cc = 16 * g + 4 * q;
    w[q] = static_cast<uint32_t>(tile[cc][d]) | static_cast<uint32_t>(tile[cc + 1][d]) << 8 |
           static_cast<uint32_t>(tile[cc + 2][d]) << 16 | static_cast<uint32_t>(tile[cc + 3][d]) << 24;
  }
  st_global_v4(vt + d * vt_cols + c, make_uint4(w[0], w[1], w[2], w[3]));
}
template <int D>
__global__ void __launch_bounds__(kVtThreads) hstu_fp8_vt_kernel(const HstuParams p, const HstuFp8FwdParams f) {
  __shared__ __align__(16) uint8_t tile[64][D + 16];
  __shared__ int64_t src_row[64];
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.heads));
  const int64_t c0 = static_cast<int64_t>(blockIdx.x / static_cast<unsigned>(p.heads)) * 64;
  if (threadIdx.x < 64) {
    src_row[threadIdx.x] = hstu_fp8_col_src_row(p.cu_seqlens_k, p.seqused_k, p.batch, c0 + threadIdx.x, 32);
  }
  __syncthreads();
  constexpr int kChunks = D / 16;
  constexpr int kLoads = 64 * kChunks / kVtThreads;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + static_cast<int64_t>(h) * p.v_head_stride;
  uint4 x[kLoads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int idx = threadIdx.x + k * kVtThreads;
    const int64_t src = src_row[idx / kChunks];
    x[k] = make_uint4(0, 0, 0, 0);
    if (src >= 0) x[k] = __ldg(reinterpret_cast<const uint4*>(v + src * p.v_row_stride + (idx % kChunks) * 16));
  }
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int idx = threadIdx.x + k * kVtThreads;
    *reinterpret_cast<uint4*>(&tile[idx / kChunks][(idx % kChunks) * 16]) = x[k];
  }
  __syncthreads();
  uint8_t* vt = static_cast<uint8_t*>(f.vt) + static_cast<int64_t>(h) * D * f.vt_cols;
#pragma unroll
  for (int k = 0; k < D * 4 / kVtThreads; ++k) {
    hstu_fp8_vt_store<D>(tile, vt, f.vt_cols, c0, threadIdx.x + k * kVtThreads);
  }
}
// main's Vt pre-pass (kernel_options(fp8_fwd_var=4), for the comparison): the same columns by 256 threads.
template <int D>
__global__ void __launch_bounds__(256) hstu_fp8_vt_main_kernel(const HstuParams p, const HstuFp8FwdParams f) {
  __shared__ __align__(16) uint8_t tile[64][D + 16];
  __shared__ int64_t src_row[64];
  const int h = blockIdx.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * 64;
  if (threadIdx.x < 64) {
    src_row[threadIdx.x] = hstu_fp8_col_src_row(p.cu_seqlens_k, p.seqused_k, p.batch, c0 + threadIdx.x, 32);
  }
  __syncthreads();
  constexpr int kChunks = D / 16;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + static_cast<int64_t>(h) * p.v_head_stride;
  for (int idx = threadIdx.x; idx < 64 * kChunks; idx += 256) {
    const int col = idx / kChunks, part = idx % kChunks;
    const int64_t src = src_row[col];
    uint4 x = make_uint4(0, 0, 0, 0);
    if (src >= 0) x = __ldg(reinterpret_cast<const uint4*>(v + src * p.v_row_stride + part * 16));
    *reinterpret_cast<uint4*>(&tile[col][part * 16]) = x;
  }
  __syncthreads();
  uint8_t* vt = static_cast<uint8_t*>(f.vt) + static_cast<int64_t>(h) * D * f.vt_cols;
  for (int idx = threadIdx.x; idx < D * 4; idx += 256) hstu_fp8_vt_store<D>(tile, vt, f.vt_cols, c0, idx);
}

// Schedules (kMode; the grid by default, the other two on kernel_options(fp8_sched=True), picked then as the bf16
// forward's are in hstu_fwd_sm90_launch.cuh): kFp8Grid, grid (m_blocks,
// H, B), the query tiles of each (b, h) heaviest (last) first; kFp8List, the jagged work list (hstu_sm90_work_list.cuh,
// planned without splits: CTA x runs one whole query tile); kFp8Persist, one CTA per SM taking the grid's tiles from a
// global counter (fwd_persist_produce), two Q buffers with their published tiles, the K / Vt pipeline running on across
// tiles (the next tile's Q and first K / Vt tiles load under the current tile's last GEMMs and epilogue). A query
// tile's arithmetic is the same in all three: the outputs are identical.
enum Fp8FwdMode : int { kFp8Grid = 0, kFp8List = 1, kFp8Persist = 2 };

// kEarlyPack (the default; false: kernel_options(fp8_early_pack=False), the order before, for comparisons): where P
// is converted to e4m3, see pf / pn below. Both orders compute bitwise the same output for a SiLU form (the late one
// runs the tanh form only: fp8_silu_default). kBN: Fp8FwdTraits's BN (192:
// grid order, D = 128; tm_vt2 maps Vt's second panel, unused otherwise). kDiag: 0, or the kFp8FwdDiag* bits above.
// kSilu: the SiLU form of unmasked tiles (Fp8Silu).
template <int D, int kMode, bool kEarlyPack, int kBN = (D == 256 ? 64 : 128), int kDiag = 0,
          int kSilu = fp8_silu_default(D, kEarlyPack)>
__global__ void __launch_bounds__(384, 1)
    hstu_fwd_fp8_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                             const __grid_constant__ CUtensorMap tm_vt, const __grid_constant__ CUtensorMap tm_vt2,
                             const HstuParams p, const HstuFp8FwdParams f, const SchedArgs sched) {
  constexpr bool kPersist = kMode == kFp8Persist;
  static_assert(kBN <= 128 || kMode == kFp8Grid, "192-key tiles: grid order only");
  static_assert(kDiag == 0 || (kMode == kFp8Grid && kEarlyPack), "timing-only variants: grid order");
  static_assert(kSilu == kFp8SiluTanh || ((kDiag & 3) == 0 && kEarlyPack), "half2 SiLU words: packed early, no diag");
  // kBounds: per KV tile less bookkeeping in the grid kernels (H200, B16 causal: faster sustained at D = 64 / 128 /
  // 256, 128- and 192-key tiles, docs/hstu_attn.md): the unmasked-tile test by two bounds per
  // warpgroup computed once (fp8_full_tiles) instead of the mask fields, the stages and phases by increments instead
  // of divisions by the stage count, no block-mode branch on the 192-key tiles (never block mode).
  constexpr bool kBounds = kMode == kFp8Grid && kEarlyPack && (kDiag & kFp8FwdMainLoop) == 0;
  // kLateCopy (with kBounds; faster on an H200, docs/hstu_attn.md; at the loop's tail the copy also cost the SiLU
  // block register moves): P_i's copy into pf right after the next turn's S issue.
  constexpr bool kLateCopy = kBounds && (kDiag & kFp8FwdTailCopy) == 0;
  // kIdxTest (192-key tiles with kLateCopy; faster sustained on an H200, docs/hstu_attn.md): the unmasked-tile test
  // by the walk position, i - idx_lo < idx_n (fp8_full_span), instead of tile(i)'s gap arithmetic per tile.
  constexpr bool kIdxTest = kLateCopy && kBN > 128 && (kDiag & kFp8FwdTileTest) == 0;
  using C = Fp8FwdTraits<D, kPersist ? 2 : 1, kBN>;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  constexpr int RB = C::kRowBytes;

  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  // Q buffer qb at base + qb * kQBytes, then the K and Vt stages, the output staging, the mbarriers, the slots.
  const uint32_t sK = base + C::kQBufs * C::kQBytes;
  const uint32_t sV = sK + S * C::kTileBytes;
  const uint32_t sO = sV + S * C::kTileBytes;
  const uint32_t bar = base + C::kBarOffset;
  auto bar_q = [&](int qb) { return qb == 0 ? bar : bar + 200u; };
  auto bar_q_empty = [&](int qb) { return bar + 208u + 8u * qb; };  // persistent: one arrive per consumer warp
  auto bar_full_k = [&](int s) { return bar + 8u + 8u * s; };
  auto bar_full_v = [&](int s) { return bar + 8u + 8u * (S + s); };
  auto bar_empty_k = [&](int s) { return bar + 8u + 8u * (2 * S + s); };
  auto bar_empty_v = [&](int s) { return bar + 8u + 8u * (3 * S + s); };
  auto tile_slot = [&](int qb) {
    return reinterpret_cast<FwdTile*>(smem_raw + (bar + 256u + 128u * qb - smem_addr(smem_raw)));
  };

  int h = 0, b = 0, m_block = 0, nb_begin = 0, nb_end = 0, gap_end = 0, gap_len = 0;
  if constexpr (kMode == kFp8List) {
    int4 it;
    if (!sched_cta_work(sched, p.heads, it, h)) return;
    b = it.x;
    m_block = it.y;  // (it.z, it.w: all of the tile's KV tiles, the list has no splits)
  } else if constexpr (kMode == kFp8Grid) {
    m_block = gridDim.x - 1 - blockIdx.x;
    h = blockIdx.y;
    b = blockIdx.z;
  }
  SeqInfo si = seq_info(p, b);
  int m0 = m_block * BM;
  if (!kPersist && m0 >= si.lq_alloc) return;
  // KV tiles from the last down, skipping the masked gap between the history and this tile's target group.
  if constexpr (!kPersist) fwd_kv_tiles<BM, BN>(si, m0, nb_begin, nb_end, gap_end, gap_len);
  int n_tiles = fwd_kv_count(nb_begin, nb_end, gap_len);

  const int tid = threadIdx.x;
  if (tid == 0) fwd_init_barriers<S, kPersist>(bar, 200u, 1);
  __syncthreads();

  if (tid < 128) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0 && (kPersist || n_tiles > 0)) {
      prefetch_tensormap(&tm_q);
      prefetch_tensormap(&tm_k);
      prefetch_tensormap(&tm_vt);
      if constexpr (BN != C::kVtRowBytes) prefetch_tensormap(&tm_vt2);
      auto load_q = [&](int qb) {
        mbar_arrive_expect_tx(bar_q(qb), C::kQBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(base + qb * C::kQBytes + pn * C::kQPanelBytes, &tm_q, bar_q(qb), pn * RB, h, si.q_start + m0);
        }
      };
      auto load_kv = [&](int it, int nb) {  // it: K / Vt tiles loaded before this one
        const int s = it % S;
        const uint32_t ph = (it / S) & 1;
        mbar_wait(bar_empty_k(s), ph ^ 1);
        mbar_arrive_expect_tx(bar_full_k(s), C::kTileBytes);
#pragma unroll
        for (int pn = 0; pn < C::kPanels; ++pn) {
          tma_load_3d(sK + s * C::kTileBytes + pn * C::kKPanelBytes, &tm_k, bar_full_k(s), pn * RB, h,
                      si.k_start + nb * BN);
        }
        const int vt_col0 = static_cast<int>(hstu_fp8_vt_start(si.k_start, b));  // 16-byte aligned (TMA)
        mbar_wait(bar_empty_v(s), ph ^ 1);
        mbar_arrive_expect_tx(bar_full_v(s), C::kTileBytes);
        tma_load_3d(sV + s * C::kTileBytes, &tm_vt, bar_full_v(s), vt_col0 + nb * BN, 0, h);
        if constexpr (BN != C::kVtRowBytes) {  // panel 1: keys kVtRowBytes .. BN - 1 of the tile
          constexpr int P0 = C::kVtRowBytes;
          tma_load_3d(sV + s * C::kTileBytes + D * P0, &tm_vt2, bar_full_v(s), vt_col0 + nb * BN + P0, 0, h);
        }
      };
      if constexpr (!kPersist) {
        load_q(0);
        for (int i = 0; i < n_tiles; ++i) load_kv(i, fwd_kv_tile(nb_end, gap_end, gap_len, i));
      } else {
        fwd_persist_produce<BM, BN>(p, bar_q, bar_q_empty, tile_slot, load_q, load_kv, si, h, b, m_block, m0, nb_begin,
                                    nb_end, gap_end, gap_len, n_tiles);
      }
    }
    return;
  }
  // ---------------------------------------------------------------- consumer warpgroups
  setmaxnreg_inc<C::kConsumerRegs>();
  const int ctid = tid - 128;
  const int wg = ctid / 128;  // 0 or 1: rows [64 wg, 64 wg + 64) of the tile
  const int wtid = ctid % 128;
  const int warp = wtid / 32;
  const int lane = wtid % 32;
  // kFp8FwdDiagTrace: CTA (0, 0, 0)'s stamps, one thread per consumer warpgroup, over the CTA's output rows.
  const bool trace_cta = (kDiag & kFp8FwdDiagTrace) != 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
  auto trace_put = [&](int k, uint32_t v) {
    if constexpr ((kDiag & kFp8FwdDiagTrace) != 0) {
      if (trace_cta && wtid == 0) {
        k += 4096 * wg;
        uint16_t* row = static_cast<uint16_t*>(p.out) +
                        static_cast<int64_t>(si.q_start + m0 + k / 64) * p.o_row_stride +
                        static_cast<int64_t>(h) * p.o_head_stride;
        reinterpret_cast<uint32_t*>(row)[k % 64] = v;
      }
    }
  };
  auto stamp = [&](int i, int j) {
    if constexpr ((kDiag & kFp8FwdDiagTrace) != 0) {
      uint32_t c;
      asm volatile("mov.u32 %0, %%clock;\n" : "=r"(c));
      if (8 * i + j < 4088) trace_put(8 * i + j, c);  // (4088: n_tiles)
    }
  };
  int kv0 = 0;  // K / Vt tiles consumed before this tile (persistent)
  for (int q_it = 0;; ++q_it) {  // (persistent: the CTA's q_it-th tile, in Q buffer q_it % 2)
    const int qb = q_it % C::kQBufs;
    if constexpr (kPersist) {
      const uint32_t qph = (q_it / 2) & 1;
      if (!fwd_persist_consume<BM>(bar_q(qb), qph, tile_slot(qb), si, h, b, m_block, m0, nb_begin, nb_end, gap_end,
                                   gap_len, n_tiles)) {
        break;
      }
    }
    const uint32_t sQ = base + qb * C::kQBytes;
    auto tile = [&](int i) { return fwd_kv_tile(nb_end, gap_end, gap_len, i); };
    const SeqMask& mk = si.mask;
    const int row_w0 = m0 + mk.offset + 64 * wg;  // key position of this warpgroup's first row
    const int64_t k_cols = f.total_k / 128 + p.batch;
    // k and v factors: per KV tile in block mode, else one per CTA (loaded once, off the main loop's path).
    // (kBounds: the 192-key tiles never run block mode, launch_fwd_fp8)
    const bool per_tile = !(kBounds && BN > 128) && f.descale_mode == kFp8Block;
    const float k_const = fp8_descale(f.k_descale, f.descale_mode, b, h, p.heads, k_cols, si.k_start, 0);
    const float v_const = fp8_descale(f.v_descale, f.descale_mode, b, h, p.heads, k_cols, si.k_start, 0);
    auto k_factor = [&](int nb) {
      return per_tile ? fp8_descale(f.k_descale, kFp8Block, b, h, p.heads, k_cols, si.k_start, nb * BN / 128)
                      : k_const;
    };
    auto v_factor = [&](int nb) {
      return per_tile ? fp8_descale(f.v_descale, kFp8Block, b, h, p.heads, k_cols, si.k_start, nb * BN / 128)
                      : v_const;
    };

    float acc_o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc_o[i] = 0.f;
    float v_cur = 1.f;  // acc_o * v_cur is the output so far (times scaling_seqlen)
    const float qs = fp8_descale(f.q_descale, f.descale_mode, b, h, p.heads, p.total_q / 128 + p.batch, si.q_start,
                                 m_block);

    if (n_tiles > 0) {
      float acc_s[BN / 2];
      // P as e4m3 A fragments: pf = P_{i-1}, read by the P V wgmma in flight. kEarlyPack: P_i is packed into pn
      // inside the SiLU's code (its conversions interleaved with the MUFU stream, off the path from the P V wait to
      // the next issue), then copied to pf once that wgmma is waited for; else P_i goes into pf after the wait.
      uint32_t pf[BN / 32][4];
      uint32_t pn[BN / 32][4];
      const float half_alpha_q = 0.5f * p.alpha * qs;
      // kBounds: tile nb is unmasked for this warpgroup's rows iff full_lo <= nb * BN <= full_hi.
      int full_lo = 1, full_hi = 0;
      if constexpr (kBounds) fp8_full_tiles(mk, row_w0, row_w0 + 64, BN, D <= 128, full_lo, full_hi);
      // kIdxTest: position i's tile is unmasked iff i - idx_lo < idx_n (unsigned).
      int idx_lo = 0, idx_n = 0;
      if constexpr (kIdxTest) fp8_full_span(full_lo, full_hi, BN, nb_end, gap_end, gap_len, n_tiles, idx_lo, idx_n);
      auto full_tile = [&](int n0) {
        if constexpr (kBounds) {
          return n0 >= full_lo && n0 <= full_hi;
        } else {
          return D <= 128 ? mk.tile_full_targets(row_w0, row_w0 + 64, n0, n0 + BN)
                          : mk.tile_full(row_w0, row_w0 + 64, n0, n0 + BN);
        }
      };
      auto full_at = [&](int i, int nb) {  // whether walk position i (tile nb) is unmasked
        if constexpr (kIdxTest) {
          return static_cast<unsigned>(i - idx_lo) < static_cast<unsigned>(idx_n);
        } else {
          return full_tile(nb * BN);
        }
      };
      v_cur = v_factor(tile(0));
      auto stage = [&](int i) { return (kv0 + i) % S; };
      auto phase = [&](int i) { return static_cast<uint32_t>(((kv0 + i) / S) & 1); };
      // kBounds (grid order: kv0 = 0): the stages and phases of tiles i (st_i, ph_i) and i - 1 (st_p, ph_p) by
      // increments, advanced after each tile, instead of the divisions by S per tile.
      int st_i = 0, st_p = 0;
      uint32_t ph_i = 0, ph_p = 0;
      auto advance = [&]() {
        st_p = st_i;
        ph_p = ph_i;
        st_i = st_i + 1 == S ? 0 : st_i + 1;
        ph_i ^= st_i == 0 ? 1u : 0u;
      };
      auto issue_qk = [&](int s) {
        wgmma_fence();
        const uint32_t q_wg = sQ + wg * 64 * RB;
#pragma unroll
        for (int ks = 0; ks < D / 32; ++ks) {
          const int off = (ks * 32) % RB;  // k offset inside the panel row
          const uint64_t da = make_desc_kmajor(q_wg + (ks * 32 / RB) * C::kQPanelBytes + off, RB);
          const uint64_t db =
              make_desc_kmajor(sK + s * C::kTileBytes + (ks * 32 / RB) * C::kKPanelBytes + off, RB);
          wgmma_ss_e4m3<BN>(acc_s, da, db, ks > 0 ? 1 : 0);
        }
        wgmma_commit();
      };
      auto issue_pv = [&](int s, const uint32_t(&pp)[BN / 32][4]) {
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BN / 32; ++ks) {
          // (k step ks: 32 keys of Vt's panel 0, kVtRowBytes-byte rows; BN 192: steps 4, 5 in panel 1, 64-byte rows)
          constexpr int P0 = C::kVtRowBytes;
          const uint32_t vt = sV + s * C::kTileBytes;
          const uint64_t db = ks * 32 < P0 ? make_desc_kmajor(vt + ks * 32, P0)
                                           : make_desc_kmajor(vt + D * P0 + (ks * 32 - P0), BN - P0);
          wgmma_rs_e4m3<D>(acc_o, pp[ks], db);
        }
        wgmma_commit();
      };
      // The next P V adds tile nb: O kept in units of its v factor (acc_o settled: no P V in flight here).
      auto rescale_o = [&](float vf) {
        if (vf != v_cur) {
          pin_all(acc_o);
          const float r = v_cur / vf;
#pragma unroll
          for (int i = 0; i < D / 2; ++i) acc_o[i] *= r;
          v_cur = vf;
        }
      };
      // P to e4m3 A fragments: k-slot 4 t + i of block ks holds key 2 t + (i & 1) + 8 (i >> 1) (+ 16 for a2 / a3),
      // i.e. accumulator elements 16 ks + {0, 1, 4, 5} (a0; + 2 for the row + 8: a1; + 8 for keys + 16: a2, a3).
      auto pack_into = [&](uint32_t(&dst)[BN / 32][4]) {
#pragma unroll
        for (int ks = 0; ks < BN / 32; ++ks) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int e = 16 * ks + 8 * (q >> 1) + 2 * (q & 1);
            if constexpr ((kDiag & kFp8FwdDiagNoCvt) != 0) {
              dst[ks][q] = (__float_as_uint(acc_s[e]) ^ __float_as_uint(acc_s[e + 1])) ^
                           (__float_as_uint(acc_s[e + 4]) ^ __float_as_uint(acc_s[e + 5]));
            } else {
              dst[ks][q] = cvt_e4m3x4(acc_s[e], acc_s[e + 1], acc_s[e + 4], acc_s[e + 5]);
            }
          }
        }
      };
      // P = SiLU(alpha q_s k_s S), masked to 0 (fwd_silu_mask); kEarlyPack: packed into pn at the end of each of its
      // paths (a mixed kSilu's unmasked tiles: every word straight into pn).
      auto silu_mask = [&](int nb, bool full, float kf, uint32_t(&pn)[BN / 32][4]) {
        const int n0 = nb * BN;
        const float sc = half_alpha_q * kf;
        if constexpr (kSilu != kFp8SiluTanh) {  // (fwd_silu_mask's first path, some words in half2)
          if (full) {
            const float sc2 = sc + sc;  // (sc: the tanh form's h / 2 per unit of S)
#pragma unroll
            for (int ks = 0; ks < BN / 32; ++ks) {
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                const int e = 16 * ks + 8 * (q >> 1) + 2 * (q & 1);
                if (fp8_silu_h2_word(kSilu, 4 * ks + q)) {  // (unrolled: resolved at compile time)
                  pn[ks][q] = silu_h2_e4m3x4(acc_s[e] * sc2, acc_s[e + 1] * sc2, acc_s[e + 4] * sc2,
                                             acc_s[e + 5] * sc2);
                } else {
                  float v[4];
#pragma unroll
                  for (int u = 0; u < 4; ++u) {
                    const float x = acc_s[e + (u & 1) + 4 * (u >> 1)] * sc;
                    v[u] = fmaf(x, tanh_fast(x), x);
                  }
                  pn[ks][q] = cvt_e4m3x4(v[0], v[1], v[2], v[3]);
                }
              }
            }
            return;
          }
        }
        if constexpr (kEarlyPack) {
          // (fwd_silu_mask's first path, the unmasked-tile test by the bounds; diag: without its MUFU)
          if constexpr (kSilu == kFp8SiluTanh && (kBounds || (kDiag & kFp8FwdDiagNoMufu) != 0)) {
            if (full) {
#pragma unroll
              for (int e = 0; e < BN / 2; ++e) {
                const float x = acc_s[e] * sc;
                acc_s[e] = (kDiag & kFp8FwdDiagNoMufu) != 0 ? fmaf(x, x, x) : fmaf(x, tanh_fast(x), x);
              }
              pack_into(pn);
              return;
            }
          }
          fwd_silu_mask<BN>(acc_s, sc, mk, row_w0, warp, lane, n0, D <= 128, [&]() { pack_into(pn); });
        } else {
          fwd_silu_mask<BN>(acc_s, sc, mk, row_w0, warp, lane, n0, D <= 128);
        }
      };
      // P_i into pf, the next P V's A operand (its previous contents waited for). The copy is an opaque prmt: a plain
      // move lets ptxas coalesce pn with pf, so the SiLU would write registers of the P V in flight, and ptxas then
      // serializes every wgmma of the kernel (C7513).
      auto take_p = [&]() {
        if constexpr (kEarlyPack) {
#pragma unroll
          for (int ks = 0; ks < BN / 32; ++ks) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              asm volatile("prmt.b32 %0, %1, %1, 0x3210;\n" : "=r"(pf[ks][q]) : "r"(pn[ks][q]));
            }
          }
        } else {
          pack_into(pf);
        }
      };
      auto release = [&](uint32_t bb) {
        if (lane == 0) mbar_arrive(bb);
      };

      if constexpr (!kPersist) mbar_wait(bar_q(0), 0);
      // Pingpong turns (as in the bf16 forward): warpgroup wg syncs on barrier 4 + wg before issuing, then arrives
      // on the other's; each issues n_tiles + 1 times, warpgroup 1 opens warpgroup 0's first turn and skips its last
      // arrive.
      auto pp_sync = [&]() { named_barrier_sync(4 + wg, 256); };
      auto pp_arrive = [&]() { named_barrier_arrive(4 + (wg ^ 1), 256); };
      if (wg == 1) named_barrier_arrive(4, 256);
      // Block mode's k / v factors (global loads) are loaded an iteration before their use, off the path from S_i's
      // wait to the SiLU and from P_{i-1}'s to the next issue: kf_nx = k factor of tile i + 1, vf_nx = v factor of
      // tile i at the end of iteration i (other modes: the CTA's constants).
      float kf_nx = n_tiles > 1 ? k_factor(tile(1)) : 0.f;
      float vf_nx = v_cur;
      {
        const int s0 = stage(0);
        trace_put(4088, n_tiles);
        stamp(0, 0);
        mbar_wait(bar_full_k(s0), phase(0));
        stamp(0, 1);
        pp_sync();
        stamp(0, 2);
        issue_qk(s0);
        pp_arrive();
        stamp(0, 3);
        wgmma_wait<0>();
        pin_all(acc_s);
        stamp(0, 4);
        release(bar_empty_k(s0));
        silu_mask(tile(0), full_at(0, tile(0)), k_factor(tile(0)), pn);
        stamp(0, 5);
        if constexpr (!kLateCopy) take_p();
        if constexpr (kBounds) advance();
      }
      // Iteration i: S_i and O += P_{i-1} V_{i-1} issued, P_i computed under them. pin: P_{i-1}'s registers (read by
      // the P V in flight), pout: P_i's (pn, then copied to pf).
      auto step = [&](int i, uint32_t(&pin)[BN / 32][4], uint32_t(&pout)[BN / 32][4]) {
        const int nb = tile(i);
        const int s = kBounds ? st_i : stage(i);
        const int sp = kBounds ? st_p : stage(i - 1);
        const uint32_t ph = kBounds ? ph_i : phase(i), php = kBounds ? ph_p : phase(i - 1);
        const float kf = kf_nx, vf_prev = vf_nx;  // tile i's k factor, tile i - 1's v factor
        kf_nx = i + 1 < n_tiles ? k_factor(tile(i + 1)) : 0.f;
        vf_nx = v_factor(nb);
        stamp(i, 0);
        mbar_wait(bar_full_k(s), ph);
        mbar_wait(bar_full_v(sp), php);
        stamp(i, 1);
        rescale_o(vf_prev);
        pp_sync();
        stamp(i, 2);
        issue_qk(s);  // S_i, in flight during the P V below
        if constexpr (kLateCopy) take_p();  // (P_{i-1} into pin = pf: its last reader waited for last iteration)
        issue_pv(sp, pin);  // O += P_{i-1} Vt_{i-1}
        pp_arrive();
        stamp(i, 3);
        wgmma_wait<1>();  // S_i done
        pin_all(acc_s);
        stamp(i, 4);
        release(bar_empty_k(s));
        silu_mask(nb, full_at(i, nb), kf, pout);  // overlaps the P V wgmma (and the other warpgroup's GEMMs)
        stamp(i, 5);
        wgmma_wait<0>();
        pin_all(pin);
        stamp(i, 6);
        release(bar_empty_v(sp));
        if constexpr (!kLateCopy) take_p();
        if constexpr (kBounds) advance();
      };
      // The last P V (P_{n-1} in pl).
      auto last_pv = [&](uint32_t(&pl)[BN / 32][4]) {
        const int il = n_tiles - 1;
        const int sl = kBounds ? st_p : stage(il);
        stamp(n_tiles, 0);
        mbar_wait(bar_full_v(sl), kBounds ? ph_p : phase(il));
        stamp(n_tiles, 1);
        rescale_o(vf_nx);  // (tile il's v factor)
        pp_sync();
        stamp(n_tiles, 2);
        if constexpr (kLateCopy) take_p();
        issue_pv(sl, pl);
        if (wg == 0) pp_arrive();
        stamp(n_tiles, 3);
        wgmma_wait<0>();
        pin_all(pl);
        stamp(n_tiles, 6);
        release(bar_empty_v(sl));
      };
      for (int i = 1; i < n_tiles; ++i) step(i, pf, pn);
      last_pv(pf);
      pin_all(acc_o);
    }

    // Epilogue: scale, round to the output dtype, stage this warpgroup's 64 rows (128-byte swizzled panels of 64
    // columns), then 16-byte coalesced stores. Rows past the sequence are not stored.
    // (A descale violation leaves every checked factor NaN: then every row is NaN, masked or not.)
    // Persistent: the warpgroup's reads of the previous tile's staging are done before it is written again.
    if constexpr (kPersist) named_barrier_sync(2 + wg, 128);
    const float sc = isnan(qs) ? qs : p.inv_scaling * v_cur;
    const bool out_half = f.out_half != 0;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int rr = 16 * warp + lane / 4 + 8 * half;
        const float x0 = acc_o[4 * j + 2 * half] * sc, x1 = acc_o[4 * j + 2 * half + 1] * sc;
        const uint32_t v = out_half ? pack2<__half>(x0, x1) : pack2<__nv_bfloat16>(x0, x1);
        const uint32_t a =
            sO + (j / 8) * C::kOPanelBytes + (64 * wg + rr) * 128 + (((j % 8) ^ (rr % 8)) << 4) + (lane % 4) * 4;
        st_shared_u32(a, v);
      }
    }
    named_barrier_sync(2 + wg, 128);
    const int rows_store = trace_cta ? 0 : min(64, si.lq_alloc - m0 - 64 * wg);
    uint16_t* og = static_cast<uint16_t*>(p.out) +
                   static_cast<int64_t>(si.q_start + m0 + 64 * wg) * p.o_row_stride +
                   static_cast<int64_t>(h) * p.o_head_stride;
    constexpr int kChunks = D / 8;
#pragma unroll 4
    for (int idx = wtid; idx < 64 * kChunks; idx += 128) {
      const int rr = idx / kChunks;
      const int c = idx % kChunks;
      if (rr < rows_store) {
        const uint32_t a = sO + (c / 8) * C::kOPanelBytes + (64 * wg + rr) * 128 + (((c % 8) ^ (rr % 8)) << 4);
        const uint4 val = lds_b128(a);
        st_global_v4(og + static_cast<int64_t>(rr) * p.o_row_stride + c * 8, val);
      }
    }
    if constexpr (!kPersist) break;
    // Persistent: this warp is done with the tile's Q buffer (its wgmmas waited for) and slot.
    __syncwarp();
    if (lane == 0) mbar_arrive(bar_q_empty(qb));
    kv0 += n_tiles;
  }  // query tiles
}

}  // namespace sm90
}  // namespace hstu
