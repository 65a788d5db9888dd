// Hopper (sm_90a) FP8 (e4m3) HSTU backward, third version (issue 36; private: kernel_options(fp8_bwd=True)).
//
// Math and rounding points: hstu/_fp8_bwd.py (hstu_attn_fp8_backward_reference emulates them). The bf16 Hopper
// backward's structure (hstu_bwd_sm90_kernel.cuh), simplified: one CTA per (128-key block, head, batch) in grid
// order (kFp8BwdLpt: key blocks last, measured slower), a producer warpgroup issuing TMA (K, V, K^T once; per
// 64-row query tile Q, dO, dO^T into ring A and Q^T into ring B, 2 stages each, 3 with kFp8BwdStages3;
// kFp8BwdPrefetch: the tile's q / dO descale factors with it), two consumer warpgroups of 64 keys each, walking the
// query tiles their block can see (bwd_work_tiles, ascending). All five GEMMs in wgmma m64nNk32 e4m3 with fp32
// accumulators. kDiag's feature bits (hstu_bwd_fp8_sm90.h; the op's diag is their difference from kFp8BwdDefault)
// select the variants below. Iteration i of a consumer warpgroup (the kernel without kFp8BwdSpecQ):
//   S^T = K_wg Q^T, dP^T = V_wg dO^T     SS, both operands K-major as stored (D contiguous), m64n64
//   P^T = SiLU(S), dS'^T = dP^T SiLU'(S) alpha q_s   fp32, masked by select (SeqMask::allowed; none on tiles that
//                                                    tile_full passes); P^T and SiLU' once S^T is done, under dP^T
//   dV += P8^T dO^T                                  RS, m64nD, P8 = e4m3(P) straight from registers (Q^T / dO^T
//                                                    hold the queries permuted per 32, hstu_fp8_key_perm)
//   amax |dS'| of tile i posted                      one word per warp in smem + a named-barrier arrive (no wait)
//   dS' of tile i parked in smem (fp32), tile i - 1's taken back   (each thread its own 128 bytes)
//   u = max(u, pow2ceil(amax / 448)) of tile i - 1   amax over the CTA's (128 keys x 64 queries) tile: the other
//                                                    warpgroup's words were posted an iteration ago (the wait is
//                                                    rarely one), so the warpgroups drift: one's pointwise work
//                                                    runs under the other's GEMMs
//   dS8 = e4m3(dS' / u) of tile i - 1               into RS A fragments and (16-bit stores, byte pairs (key j,
//                                                    j + 8) of one query, 128-byte swizzle) into a (queries x 128
//                                                    keys) dS8 buffer of 3 (K^T holds the keys paired the same way)
//   dQ of tile i - 2 = dS8 K^T, * u k_s / q_s       SS m64n(D / 2) over all 128 keys, warpgroup g's columns
//                                                    [D / 2 g, D / 2 (g + 1)) (the bf16 kernel's split), once the
//                                                    other warpgroup's dS8 half is stored (a named barrier, arrived
//                                                    at an iteration ago); staged per warp in smem (two
//                                                    128B-swizzled 16 x 32 fp32 panels) and added to f.dq_accum by
//                                                    bulk tensor reduce-adds (the bf16 kernel's)
//   dK += dS8^T Q^T of tile i - 1                    RS, m64nD (Q^T of ring B, released an iteration later);
//                                                    acc_dv in units of dO's factor, acc_dk of u: rescaled when
//                                                    they change (u only grows, by powers of two)
// kFp8BwdSpecQ: no parking; the dS pass of tile i computes dS' / ug with ug = u then (two tiles old), quantizes it
// at once and keeps the 8 words in registers; the late part of iteration i + 1 rescales them by ug / u only where u
// grew since (rare). kFp8BwdStsmDs8: the dS8 buffer written by stmatrix.trans. kFp8BwdMaskFast: the mask bits of
// partly masked tiles by compares where the sequence has no contexts, targets or left window. kFp8BwdLateFence
// (the kernel without the features above only): the proxy fences of the dS8 stores and the dQ staging one
// iteration later, one for both (late_flush). kFp8BwdDqRedV4: dQ added from the registers by red.global.add.v4 into
// the fragment-ordered workspace (no staging; kFp8BwdRedKeep: their address registers kept live until the next
// ones). kFp8BwdLptGroups: the 1-D grid of pair groups, key block 0 first. kFp8BwdFullNext: tile i + 1's full-tile
// test in iteration i. kFp8BwdWgUniform: the warpgroup / warp index warp-uniform for ptxas (uniform wgmma
// descriptors). kFp8BwdRedNext: the last 2 (kFp8BwdRedNextWide: 3) of a tile's dQ reduce-adds issued under the next
// tile's S^T. kFp8BwdFactorsEarly: the tile's q / dO factor words read before its GEMMs' issue. kFp8BwdDqBf16: dQ
// rounded to bf16 and reduce-added in bf16 (D / 32 red.v4.bf16x2 per thread and tile) into a bf16 workspace.
// kFp8BwdLean: the full-tile test by per-warpgroup bounds, the tile's factors without IEEE divisions, dQ's address by
// increments.
// All measured in docs/hstu_kernel_notes.md.
// dK = acc_dk u, dV = acc_dv do_s / N, rounded once to bf16 / fp16. Rows of no used query / key are 0 in the
// transposed copies (the pre-pass), and masked P / dS are 0 by select, so garbage rows never reach a result.
// D = 64 or 128 (D = 64: K / V / Q / dO rows of 64 bytes, 64-byte swizzle; D = 256, whose dK / dV accumulators
// alone would take 256 registers a thread here: hstu_bwd_fp8_sm90_d256_kernel.cuh). Not yet: the work list, rab.
// Predictions and measurements: docs/hstu_kernel_notes.md, "The Hopper FP8 backward".
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_bwd_sm90_dq.cuh"  // tma_reduce_add_3d, bulk_commit, bulk_wait_read0
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh"  // fp8_descale, make_desc_kmajor, cvt_e4m3x4
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/wgmma_fp8_sm90.cuh"

namespace hstu {
namespace sm90 {

template <int D, int kVariant = kFp8BwdDefault>
struct Fp8BwdTraits {
  static_assert(D == 64 || D == 128, "this kernel: D = 64 or 128 (D = 256: hstu_bwd_fp8_sm90_d256_kernel.cuh)");
  static constexpr int kBlockM = 64;   // query rows per tile
  static constexpr int kBlockN = 128;  // keys per CTA: 2 consumer warpgroups x 64
  static constexpr int kKVBytes = kBlockN * D;  // K or V: 128 rows of D bytes (D-byte swizzle)
  static constexpr int kKtBytes = D * kBlockN;  // K^T: D rows of 128 keys (128-byte swizzle)
  static constexpr int kQBytes = kBlockM * D;   // Q or dO: 64 rows of D bytes (D-byte swizzle)
  static constexpr int kDqCols = D / 2;         // dQ columns per consumer warpgroup (dQ = dS8 K^T's column split)
  static constexpr int kQtBytes = D * kBlockM;  // Q^T or dO^T: D rows of 64 queries (64-byte swizzle)
  // kFp8BwdStages3: three stages per ring in the shared memory of the buffers the kernel does not use (dS' parking
  // under kFp8BwdSpecQ, dQ staging under kFp8BwdDqRedV4; with either of them in use, two stages)
  static constexpr bool kCompact = (kVariant & kFp8BwdStages3) != 0 && (kVariant & kFp8BwdSpecQ) != 0 &&
                                   (kVariant & kFp8BwdDqRedV4) != 0;
  // Two rings of 2 stages: A = Q, dO, dO^T of a tile (S^T, dP^T, dV: released in the tile), B = Q^T (dK, one tile
  // late: released at the end of the next tile).
  static constexpr int kStages = kCompact ? 3 : 2;
  static constexpr int kAStageBytes = 2 * kQBytes + kQtBytes;
  static constexpr int kOffV = kKVBytes;
  static constexpr int kOffKt = 2 * kKVBytes;
  static constexpr int kOffA = kOffKt + kKtBytes;
  static constexpr int kOffB = kOffA + kStages * kAStageBytes;
  // dS' of a tile in fp32 (quantized one tile late): each thread's 32 values, 8 float4 at (k 128 + thread) of its
  // warpgroup's 16 KB.
  static constexpr int kOffDsf = kOffB + kStages * kQtBytes;
  static constexpr int kDsfBytes = kCompact ? 0 : 2 * 128 * 32 * 4;
  // dS8: 64 queries x the block's 128 keys (128-byte swizzle), 3 buffers (tile j's written in tile j + 1, read by
  // dQ of tile j in tile j + 2); kFp8BwdDs8Early (where it applies: dS' quantized in its own tile and dS8 stored by
  // stmatrix, the fences in place): 4, tile j's written before the amax barrier of tile j
  static constexpr bool kDs8Early = (kVariant & kFp8BwdDs8Early) != 0 && (kVariant & kFp8BwdSpecQ) != 0 &&
                                    (kVariant & kFp8BwdStsmDs8) != 0 && (kVariant & kFp8BwdLateFence) == 0;
  static constexpr int kdSBytes = kBlockM * kBlockN;
  static constexpr int kdSBufs = kDs8Early ? 4 : 3;
  static constexpr int kOffdS = kOffDsf + kDsfBytes;
  // dQ staging: per consumer warp its 16 query rows x 64 columns fp32 as two 32-column (128-byte, 128B-swizzled)
  // panels of 2 KB, the boxes of the dq_accum tensor map (bulk tensor reduce-adds, as the bf16 kernel).
  static constexpr int kDqWarpBytes = 4096;
  static constexpr int kOffDq = kOffdS + kdSBufs * kdSBytes;
  static constexpr int kDqBytes = kCompact ? 0 : 8 * kDqWarpBytes;
  static constexpr int kAmaxSlots = 4;  // amax words of tiles j % 4: 8 consumer warps each
  static constexpr int kOffRed = kOffDq + kDqBytes;
  static constexpr int kBarOffset = kOffRed + kAmaxSlots * 32;
  // mbarriers (104 B: K / V / K^T, then full / empty of rings A and B; kFp8BwdLean's 6 words at 104), the parked
  // SeqInfo (64 B), tile map
  // (16 B) and the stages' q / dO factors (at 224, kFp8BwdPrefetch), slack to align the base to 1024 bytes
  static constexpr int kSmem = kBarOffset + 256 + 1024;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(8 + 32 * kStages <= 104 && sizeof(SeqInfo) <= 64 && kStages <= 3,
                "mbarriers, kFp8BwdLean's bounds at 104, parked SeqInfo, the stages' q / dO factors at 224 + 8 s");
  static_assert(kSmem <= 232448, "shared memory");
  static_assert(kOffDq % 1024 == 0 && kOffdS % 1024 == 0 && kOffB % 1024 == 0, "128B-swizzled tiles");
  // setmaxnreg moves registers inside the CTA's launch allocation (65536 / 384 rounded down to 8 = 168 per thread):
  // the consumers' increase must fit what the producers release
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= (65536 / kThreads) / 8 * 8 * kThreads,
                "register budget");
};

// The smallest power of two >= x for x > 0 (exponent arithmetic on the bits, as hstu/_fp8_bwd.py _pow2_ceil); 0 for
// x <= 0.
__device__ __forceinline__ float fp8_pow2_ceil(float x) {
  const uint32_t bits = __float_as_uint(x);
  uint32_t e = bits & 0x7F800000u;
  if (bits & 0x7FFFFFu) e += 0x800000u;
  return x > 0.f ? __uint_as_float(e) : 0.f;
}
// fp8_pow2_ceil(__fdiv_rn(x, 448.f)) without the division, bit for bit: x = m 2^E (m in [1, 2)) over 448 = 1.75 2^8
// is 2^(E - 8) where m <= 1.75, else it lies in (2^(E - 8), 2^(E - 7)) (the float after 448 2^k over 448 rounds above
// 2^k), so the rounded quotient passes 2^k exactly when x does. Exponents outside [9, 254] take the division.
__device__ __forceinline__ float fp8_pow2_ceil_div448(float x) {
  const uint32_t bits = __float_as_uint(x);
  if (bits - (9u << 23) >= (255u - 9u) << 23) return fp8_pow2_ceil(__fdiv_rn(x, 448.f));
  return __uint_as_float(((bits + 0x1FFFFFu) & 0x7F800000u) - (8u << 23));
}
// 1 / x for x = 2^k, |k| <= 126 (exact: 2^-k by its exponent field)
__device__ __forceinline__ float fp8_pow2_rcp(float x) { return __uint_as_float(0x7F000000u - __float_as_uint(x)); }
// The query rows r0 (tiles [r0, r0 + bm) in the mask's row positions) for which m.tile_full(r0, r0 + bm, j0, j1)
// holds are exactly r0 <= fa or fb0 <= r0 <= fb1 (each test of tile_full is a bound on r0; an empty part is an upper
// bound below a lower one); bounds clamped to +-2^30.
__device__ __forceinline__ void fp8_bwd_full_rows(const SeqMask& m, int j0, int j1, int bm, int& fa, int& fb0,
                                                  int& fb1) {
  using ll = long long;
  constexpr ll kBig = 1ll << 30;
  auto clamp = [](ll x) { return static_cast<int>(x < -kBig ? -kBig : x > kBig ? kBig : x); };
  ll a = -kBig, b0 = kBig, b1 = -kBig;  // (empty)
  if (j1 <= m.hist) {
    a = static_cast<ll>(m.ctx < m.hist ? m.ctx : m.hist) - bm;  // r1 <= ctx and r1 <= hist
    b0 = m.ctx;                                                   // r0 >= ctx
    if (m.wr >= 0 && static_cast<ll>(j1) - 1 - m.wr > b0) b0 = static_cast<ll>(j1) - 1 - m.wr;
    b1 = static_cast<ll>(m.hist) - bm;  // r1 <= hist
    if (m.wl >= 0 && static_cast<ll>(j0) + 1 + m.wl - bm < b1) b1 = static_cast<ll>(j0) + 1 + m.wl - bm;
  }
  fa = clamp(a);
  fb0 = clamp(b0);
  fb1 = clamp(b1);
}

// A 64 x 64 accumulator tile (m64n64 layout, rows = keys, columns = queries) as the e4m3 A fragments of two k-steps
// of 32 queries: k-slot 4 t + i of step ks holds query 2 t + (i & 1) + 8 (i >> 1) (+ 16 for a2 / a3), i.e. elements
// 16 ks + {0, 1, 4, 5} (the permutation of Q^T / dO^T's columns).
__device__ __forceinline__ void fp8_pack_a64(const float (&acc)[32], uint32_t (&dst)[2][4]) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int e = 16 * ks + 8 * (q >> 1) + 2 * (q & 1);
      dst[ks][q] = cvt_e4m3x4(acc[e], acc[e + 1], acc[e + 4], acc[e + 5]);
    }
  }
}

// fp8_pack_a64's inverse: the 32 values of two k-steps' e4m3 A fragments, back in accumulator order (exact).
__device__ __forceinline__ void fp8_unpack_a64(const uint32_t (&src)[2][4], float (&acc)[32]) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int e = 16 * ks + 8 * (q >> 1) + 2 * (q & 1);
      uint32_t lo, hi;
      asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
          : "=r"(lo), "=r"(hi)
          : "r"(src[ks][q]));
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      acc[e] = a.x;
      acc[e + 1] = a.y;
      acc[e + 4] = b.x;
      acc[e + 5] = b.y;
    }
  }
}

// The descriptor of k-step kk (32 bytes further along the rows) from k-step 0's: the start address field is
// address / 16 in bits 0..13, and smem addresses + 96 stay below 2^18, so no carry leaves the field.
__device__ __forceinline__ uint64_t desc_k32(uint64_t d, int kk) { return d + static_cast<uint64_t>(2 * kk); }

// wgmma m64nNk32 e4m3 by N (the dQ GEMM's N = D / 2, dK / dV's N = D).
template <int N>
__device__ __forceinline__ void fp8_bwd_wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  static_assert(N == 32 || N == 64, "the dQ GEMM's widths");
  if constexpr (N == 32) {
    wgmma_m64n32k32_ss_e4m3(d, da, db, scale_d);
  } else {
    wgmma_m64n64k32_ss_e4m3(d, da, db, scale_d);
  }
}
template <int N>
__device__ __forceinline__ void fp8_bwd_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  static_assert(N == 64 || N == 128, "dK / dV's widths");
  if constexpr (N == 64) {
    wgmma_m64n64k32_rs_e4m3(d, a, db, scale_d);
  } else {
    wgmma_m64n128k32_rs_e4m3(d, a, db, scale_d);
  }
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}

// 64 keys x D columns of one warpgroup's accumulator (m64nD layout) times `scale`, rounded to bf16 / fp16 into
// rows [k_start + j] of out (j < rows_alloc: the sequence's rows).
template <int D>
__device__ __forceinline__ void fp8_bwd_store_rows(const float (&acc)[D / 2], float scale, void* out,
                                                   int64_t row_stride, int64_t head_stride, int h, int k_start,
                                                   int j_first, int rows_alloc, int out_half, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = j_first + 8 * half;
    if (j >= rows_alloc) continue;
    const int64_t off = static_cast<int64_t>(k_start + j) * row_stride + static_cast<int64_t>(h) * head_stride +
                        2 * (lane % 4);
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const float x = acc[4 * c + 2 * half] * scale, y = acc[4 * c + 2 * half + 1] * scale;
      if (out_half) {
        *reinterpret_cast<__half2*>(static_cast<__half*>(out) + off + 8 * c) = __floats2half2_rn(x, y);
      } else {
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + off + 8 * c) =
            __floats2bfloat162_rn(x, y);
      }
    }
  }
}

// fp8_bwd_store_rows with 16-byte stores: in each quad the four lanes' bf16 / fp16 pairs of four column groups are
// transposed by two shuffle rounds, so that lane q holds the 8 columns of group 4 k + q of its row (one st.global.v4
// instead of four 4-byte stores; each warp instruction writes 64 contiguous bytes of 8 rows).
__device__ __forceinline__ uint32_t fp8_bwd_pack_out(float x, float y, int out_half) {
  if (out_half) {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <int D>
__device__ __forceinline__ void fp8_bwd_store_rows_v4(const float (&acc)[D / 2], float scale, void* out,
                                                      int64_t row_stride, int64_t head_stride, int h, int k_start,
                                                      int j_first, int rows_alloc, int out_half, int lane) {
  const int q = lane % 4;
  const bool q0 = (q & 1) != 0, q1 = (q & 2) != 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = j_first + 8 * half;
#pragma unroll
    for (int k = 0; k < D / 32; ++k) {
      uint32_t w[4];  // w[i]: columns 8 (4 k + i) + 2 q, + 1 of row j
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int c = 4 * k + i;
        w[i] = fp8_bwd_pack_out(acc[4 * c + 2 * half] * scale, acc[4 * c + 2 * half + 1] * scale, out_half);
      }
      // round 1 (lanes q, q ^ 1): keep the words i with i % 2 == q % 2, take the partner's
      const uint32_t ka = q0 ? w[1] : w[0], kb = q0 ? w[3] : w[2];
      const uint32_t ra = __shfl_xor_sync(0xffffffffu, q0 ? w[0] : w[1], 1);
      const uint32_t rb = __shfl_xor_sync(0xffffffffu, q0 ? w[2] : w[3], 1);
      // round 2 (lanes q, q ^ 2): keep word i = q (lanes q, q ^ 1's), take lanes q ^ 2, q ^ 3's word q
      const uint32_t k1 = q1 ? kb : ka, k2 = q1 ? rb : ra;
      const uint32_t r1 = __shfl_xor_sync(0xffffffffu, q1 ? ka : kb, 2);
      const uint32_t r2 = __shfl_xor_sync(0xffffffffu, q1 ? ra : rb, 2);
      uint32_t o[4];  // o[m]: lane m's word q = columns 8 (4 k + q) + 2 m, + 1
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int x = m ^ q;
        o[m] = x == 0 ? k1 : x == 1 ? k2 : x == 2 ? r1 : r2;
      }
      if (j < rows_alloc) {
        const int64_t off = static_cast<int64_t>(k_start + j) * row_stride + static_cast<int64_t>(h) * head_stride +
                            8 * (4 * k + q);
        *reinterpret_cast<uint4*>(static_cast<uint16_t*>(out) + off) = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
}

__device__ __forceinline__ void st_shared_v4_f32(uint32_t addr, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
__device__ __forceinline__ void ld_shared_v4_f32(uint32_t addr, float& x, float& y, float& z, float& w) {
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void red_add_v4(float* a, float x, float y, float z, float w) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(a), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
// kFp8BwdDqBf16: (hi, lo) rounded to nearest-even bf16 and packed (lo in the low half), and one 16-byte reduce-add of
// 8 bf16 values in the L2 (4 packed words).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ void red_add_v4_bf16x2(float* a, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(a), "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}

__device__ __forceinline__ void st_shared_v2_f32(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// kDiag: the variant bits of hstu_bwd_fp8_sm90.h: the features (kFp8BwdDefault's are the default) and the
// timing-only kFp8BwdDiag* bits (wrong gradients; tools/hstu_dev/fp8_bwd_split.py): no dQ reduce-adds / no tanh
// (P = S / 2, SiLU' = 1) / no amax exchange / no pointwise math at all / no parking / no proxy fences.
template <int D, int kDiag>
__global__ void __launch_bounds__(384, 1)
    hstu_bwd_fp8_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                             const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                             const __grid_constant__ CUtensorMap tm_qt, const __grid_constant__ CUtensorMap tm_dot,
                             const __grid_constant__ CUtensorMap tm_kt, const __grid_constant__ CUtensorMap tm_dq,
                             const HstuParams p, const HstuFp8BwdParams f) {
  using C = Fp8BwdTraits<D, kDiag>;
  constexpr int BM = C::kBlockM;
  constexpr int BN = C::kBlockN;
  constexpr int S = C::kStages;
  extern __shared__ char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base;
  const uint32_t sV = base + C::kOffV;
  const uint32_t sKt = base + C::kOffKt;
  const uint32_t bar = base + C::kBarOffset;  // bar: K, V, K^T; then full / empty of ring A, then of ring B
  auto bar_full_a = [&](int s) { return bar + 8u + 8u * s; };
  auto bar_empty_a = [&](int s) { return bar + 8u + 8u * (S + s); };
  auto bar_full_b = [&](int s) { return bar + 8u + 8u * (2 * S + s); };
  auto bar_empty_b = [&](int s) { return bar + 8u + 8u * (3 * S + s); };
  auto stage_a = [&](int s) { return base + C::kOffA + s * C::kAStageBytes; };  // Q, dO, dO^T
  auto stage_b = [&](int s) { return base + C::kOffB + s * C::kQtBytes; };     // Q^T

  // kFp8BwdLpt: grid (head, batch, key block), so the CTAs of key block 0 (the most query tiles under causal masks)
  // start first and the short ones fill the tail
  // kFp8BwdLptGroups: the 1-D grid of groups of (batch, head) pairs, key block 0 of each first (bwd_lpt_decode)
  constexpr bool kLpt = (kDiag & kFp8BwdLpt) != 0;
  constexpr bool kLptGroups = (kDiag & kFp8BwdLptGroups) != 0;
  int lpt_pair = 0, lpt_block = 0;
  if constexpr (kLptGroups) {  // (bwd_lpt_decode with the groups' sizes call parameters)
    const int nblk_k = (p.max_seqlen_k + BN - 1) / BN, pairs = p.batch * p.heads, gp = f.lpt_pairs;
    const int tp = pairs - (pairs - 1) / gp * gp;
    const int lead = pairs - tp;  // pairs in the groups of gp before the last group
    int lin = blockIdx.x, first = lead, gpairs = tp;
    if (lin < lead * nblk_k) {
      first = lin / (gp * nblk_k) * gp;
      gpairs = min(gp, lead - first);
    }
    lin -= first * nblk_k;
    lpt_pair = first + lin % gpairs;
    lpt_block = lin / gpairs;
  }
  const int n_block = kLptGroups ? lpt_block : kLpt ? blockIdx.z : blockIdx.x;
  const int h = kLptGroups ? lpt_pair % p.heads : kLpt ? blockIdx.x : blockIdx.y;
  const int b = kLptGroups ? lpt_pair / p.heads : kLpt ? blockIdx.y : blockIdx.z;
  const SeqInfo si = seq_info(p, b);
  const int n0 = n_block * BN;
  if (n0 >= si.lk_alloc) return;
  int mb_begin, n_a, gap, n_mt;
  bwd_work_tiles<BM, BN, true>(si, n0, mb_begin, n_a, gap, n_mt);
  auto tile_of = [&](int i) { return mb_begin + i + (i >= n_a ? gap : 0); };
  constexpr bool kLateFence = (kDiag & kFp8BwdLateFence) != 0;
  constexpr bool kSpecQ = (kDiag & kFp8BwdSpecQ) != 0;
  constexpr bool kGuessU = kSpecQ;  // dS' computed divided by the factor it is expected to be quantized with
  constexpr bool kPrefetch = (kDiag & kFp8BwdPrefetch) != 0;
  constexpr bool kMaskFast = (kDiag & kFp8BwdMaskFast) != 0;
  constexpr bool kStsmDs8 = (kDiag & kFp8BwdStsmDs8) != 0;
  constexpr bool kDqRed = (kDiag & kFp8BwdDqRedV4) != 0 && (kDiag & kFp8BwdDiagNoDq) == 0;
  constexpr bool kDqStaged = (kDiag & kFp8BwdDiagNoDq) == 0 && !kDqRed;  // dQ through shared memory + bulk reduces
  constexpr bool kRedKeep = (kDiag & kFp8BwdRedKeep) != 0 && kDqRed;
  constexpr bool kFullNext = (kDiag & kFp8BwdFullNext) != 0;
  constexpr bool kWgUniform = (kDiag & kFp8BwdWgUniform) != 0;
  constexpr bool kRedNext = (kDiag & kFp8BwdRedNext) != 0 && kDqRed && kRedKeep;
  // kFp8BwdDqBf16: dQ reduce-added in bf16 (4 red.v4.bf16x2 of 8 values per thread and tile instead of 8
  // red.v4.f32 of 4): each group and head 4 KB in the same order (float view: 512 per group and head)
  constexpr bool kDqBf16 = (kDiag & kFp8BwdDqBf16) != 0 && kDqRed;
  constexpr int kDqGroupFloats = kDqBf16 ? 8 * D : 16 * D;  // float view per group and head (16 rows x D)
  constexpr int kDqF4 = D / 16;  // float4 of a thread's dQ accumulator (m64n(D / 2): D / 4 floats)
  static_assert(!kDqStaged || D == 128, "dQ staging (dev variants): D = 128 only");
  constexpr bool kFactorsEarly = (kDiag & kFp8BwdFactorsEarly) != 0 && kPrefetch;
  // kFp8BwdLean: tile_is_full by three bounds per warpgroup (thread 0's, at bar + 104: past the mbarriers), no IEEE
  // division in the tile's dS factors (c_ds0 / ug, pow2ceil(amax / 448): exact forms), k_s / q_s divided where q_s
  // changes, dQ's reduce-add address from the previous tile's.
  constexpr bool kLean = (kDiag & kFp8BwdLean) != 0;
  // kFp8BwdAmaxTree: the tile's amax and the 8 posted words' maximum by trees instead of dependent chains
  constexpr bool kAmaxTree = (kDiag & kFp8BwdAmaxTree) != 0;
  // kFp8BwdDs8Early: the late part's dS8 stores, their fence and its dQ issue before its amax barrier (4 dS8
  // buffers: tile j's buffer j % 4 last held tile j - 4, whose dQ both warpgroups finished before the amax barrier
  // of tile j - 1 that this warpgroup passed in the previous late part)
  constexpr bool kDs8Early = C::kDs8Early;
  constexpr int kDsBufs = C::kdSBufs;

  const int tid = threadIdx.x;
  if (tid == 0) {
    mbar_init(bar, 1);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      mbar_init(bar_full_a(s), 1);
      mbar_init(bar_empty_a(s), 8);  // one arrive per consumer warp
      mbar_init(bar_full_b(s), 1);
      mbar_init(bar_empty_b(s), 8);
    }
    fence_barrier_init();
    *reinterpret_cast<SeqInfo*>(smem_raw + (bar + 128u - smem_addr(smem_raw))) = si;
    int* tmap = reinterpret_cast<int*>(smem_raw + (bar + 192u - smem_addr(smem_raw)));
    tmap[0] = mb_begin;
    tmap[1] = n_a;
    tmap[2] = gap;
    tmap[3] = n_mt;
    if constexpr (kLean) {  // tile_is_full(m0) = m0 <= fa || (fb0 <= m0 && m0 <= fb1), per warpgroup (its 64 keys)
      int* fb = reinterpret_cast<int*>(smem_raw + (bar + 104u - smem_addr(smem_raw)));
#pragma unroll
      for (int g = 0; g < 2; ++g) {
        const int j_w0 = n0 + 64 * g;
        int fa, fb0, fb1;
        fp8_bwd_full_rows(si.mask, j_w0, j_w0 + 64, BM, fa, fb0, fb1);
        const int off = si.mask.offset, last = si.lq - BM;  // (m0 + BM <= lq)
        const bool keys = j_w0 + 64 <= si.lk;
        fb[3 * g] = keys ? min(fa - off, last) : -(1 << 30);
        fb[3 * g + 1] = keys ? fb0 - off : 1 << 30;
        fb[3 * g + 2] = keys ? min(fb1 - off, last) : -(1 << 30);
      }
    }
  }
  __syncthreads();

  if (tid < 128) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0 && n_mt > 0) {
      prefetch_tensormap(&tm_q);
      prefetch_tensormap(&tm_k);
      prefetch_tensormap(&tm_v);
      prefetch_tensormap(&tm_do);
      prefetch_tensormap(&tm_qt);
      prefetch_tensormap(&tm_dot);
      prefetch_tensormap(&tm_kt);
      prefetch_tensormap(&tm_dq);
      mbar_arrive_expect_tx(bar, 2 * C::kKVBytes + C::kKtBytes);
      tma_load_3d(sK, &tm_k, bar, 0, h, si.k_start + n0);
      tma_load_3d(sV, &tm_v, bar, 0, h, si.k_start + n0);
      tma_load_3d(sKt, &tm_kt, bar, static_cast<int>(hstu_fp8_vt_start(si.k_start, b)) + n0, 0, h);
      const int qt_col0 = static_cast<int>(hstu_fp8_vt_start(si.q_start, b));  // 16-byte aligned (TMA)
      // Tile i: ring A's slot (freed in tile i - 2), then ring B's (freed at the end of tile i - 1, so ring A's
      // load of tile i + 1 goes out then too: one tile ahead, as with one ring).
      for (int i = 0; i < n_mt; ++i) {
        const int s = i % S;
        const uint32_t ph = (i / S) & 1;
        const int m0 = tile_of(i) * BM;
        const uint32_t sa = stage_a(s);
        float fq = 0.f, fdo = 0.f;
        if constexpr (kPrefetch) {  // the tile's q / dO factors, for the consumers (read before the slot's wait)
          const int64_t blk_cols_q = p.total_q / 128 + p.batch;
          fq = fp8_descale(f.q_descale, f.descale_mode, b, h, p.heads, blk_cols_q, si.q_start, m0 / 128);
          fdo = fp8_descale(f.do_descale, kFp8Block, b, h, p.heads, blk_cols_q, si.q_start, m0 / 128);
        }
        mbar_wait(bar_empty_a(s), ph ^ 1);
        if constexpr (kPrefetch) {  // (visible to the consumers through the full barrier's arrive: release)
          st_shared_u32(bar + 224u + 8u * s, __float_as_uint(fq));
          st_shared_u32(bar + 228u + 8u * s, __float_as_uint(fdo));
        }
        // kFp8BwdDiagNoReload (timing-only): past the first S tiles the stages keep their old tiles (no TMA, a plain
        // arrive completes the full barriers): the time and energy of the L2 -> shared-memory tile traffic
        const bool load = (kDiag & kFp8BwdDiagNoReload) == 0 || i < S;
        if (load) {
          mbar_arrive_expect_tx(bar_full_a(s), C::kAStageBytes);
          tma_load_3d(sa, &tm_q, bar_full_a(s), 0, h, si.q_start + m0);
          tma_load_3d(sa + C::kQBytes, &tm_do, bar_full_a(s), 0, h, si.q_start + m0);
          tma_load_3d(sa + 2 * C::kQBytes, &tm_dot, bar_full_a(s), qt_col0 + m0, 0, h);
        } else {
          mbar_arrive(bar_full_a(s));
        }
        mbar_wait(bar_empty_b(s), ph ^ 1);
        if (load) {
          mbar_arrive_expect_tx(bar_full_b(s), C::kQtBytes);
          tma_load_3d(stage_b(s), &tm_qt, bar_full_b(s), qt_col0 + m0, 0, h);
        } else {
          mbar_arrive(bar_full_b(s));
        }
      }
    }
    return;
  }
  // ---------------------------------------------------------------- consumer warpgroups
  setmaxnreg_inc<C::kConsumerRegs>();
  const int ctid = tid - 128;
  // keys [64 wg, 64 wg + 64) of the block. kWgUniform: wg and warp broadcast from lane 0, so that ptxas knows them
  // warp-uniform and keeps what derives from them (the wgmma descriptors, barrier ids) in uniform registers.
  const int wg = kWgUniform ? __shfl_sync(0xffffffffu, ctid / 128, 0) : ctid / 128;
  const int warp = kWgUniform ? __shfl_sync(0xffffffffu, (ctid % 128) / 32, 0) : (ctid % 128) / 32;
  const int lane = ctid % 32;
  // The sequence's fields and the work's tile map, parked in shared memory and re-read where used (they would hold
  // ~20 registers through the loop, where the accumulators leave none).
  const SeqInfo& sq = *reinterpret_cast<const SeqInfo*>(smem_raw + (bar + 128u - smem_addr(smem_raw)));
  const int* tmap = reinterpret_cast<const int*>(smem_raw + (bar + 192u - smem_addr(smem_raw)));
  const int kr0 = 64 * wg;
  // k's and v's factors: one per CTA in every mode (its 128 keys are one block).
  const float ks = fp8_descale(f.k_descale, f.descale_mode, b, h, p.heads, f.total_k / 128 + p.batch, sq.k_start,
                               n_block);
  const float vs = fp8_descale(f.v_descale, f.descale_mode, b, h, p.heads, f.total_k / 128 + p.batch, sq.k_start,
                               n_block);
  const uint32_t sdS = base + C::kOffdS;
  const uint32_t sRed = base + C::kOffRed;
  // Named barriers (0 is __syncthreads): warpgroup g's amax words of tile j posted, 1 + 4 g + j % 4; its dS8 half of
  // tile j stored, 9 + 3 g + j % 3. Each is arrived at by the owner (128 threads) and waited for by the other
  // (bar.sync, 128 threads: 256 in all).
  auto bar_amax = [](int g, int j) { return static_cast<uint32_t>(1 + 4 * g + (j & 3)); };
  auto bar_ds8 = [](int g, int j) { return static_cast<uint32_t>(9 + 3 * g + (j + 3) % 3); };  // j >= -2

  float acc_dk[D / 2];
  float acc_dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) {
    acc_dk[i] = 0.f;
    acc_dv[i] = 0.f;
  }
  float u = 0.f;        // dS' factor of the tiles quantized so far (acc_dk's unit)
  float do_cur = 0.f;   // dO factor of acc_dv's unit
  float qs_prev = 1.f;  // q's factor of the previous tile (whose dS' is quantized in this one; kLean: k_s / q_s)
  float kq = 0.f, qs_kq = -1.f;  // kLean: k_s / q_s for q_s = qs_kq (q's factors are >= 0: tile 0 divides)
  float dq_scale1 = 0.f, dq_scale2 = 0.f;  // u k_s / q_s of the last tile quantized and the one before
  float ug_prev = 0.f;  // kSpecQ: the factor the previous tile's dS' is divided by (tile -1: zeros, no fix-up)
  // kFp8BwdRedKeep: the address registers of the last dQ reduce-adds, kept live until the next ones: a reduce-add
  // holds its source registers until the LSU has taken them (long scoreboard under the L2's load), and without this
  // the loop top's first write reused them (the tile map's shared load: 7 % of the stall samples at S16K)
  float* red_keep = f.dq_accum + (h * 2 + wg) * (kDqGroupFloats / 2) + 4 * lane;  // (group red_g's)
  int64_t red_g = 0;
  uint32_t da_keep[2][4] = {};  // kSpecQ: the previous tile's e4m3 dS' / ug_prev (tile -1: zeros)
  // Shared-memory addresses computed where used, behind an opaque copy: otherwise the loop's wgmma descriptors are
  // hoisted out of it (or held through the SiLU) and spilled.
  auto opaque = [](uint32_t x) {
    asm volatile("" : "+r"(x));
    return x;
  };
  // fence.proxy.async (SASS: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S: the warp waits for its stores to complete); none
  // in the timing-only diag kFp8BwdDiagNoFence.
  auto proxy_fence = [] {
    if constexpr ((kDiag & kFp8BwdDiagNoFence) == 0) fence_proxy_async_smem();
  };
  auto tile_m0 = [&](int t) { return (tmap[0] + t + (t >= tmap[1] ? tmap[2] : 0)) * BM; };
  // This thread's dS' slot: 8 float4 at (k 128 + thread) of its warpgroup's 16 KB (conflict-free).
  auto dsf_addr = [&](int k) {
    return opaque(base + C::kOffDsf) + wg * (C::kDsfBytes / 2) + (k * 128 + ctid % 128) * 16;
  };
  // dQ[:, 64 wg : 64 wg + 64] of tile t = dS8 K^T over all 128 keys (SS: A the dS8 buffer (t + 3) % 3, B K^T's
  // rows 64 wg ..), issued in tile t + 2, once the other warpgroup's half of dS8 of tile t is stored (written in its
  // tile t + 1; this warpgroup's four warps wrote theirs before they reach the sync). Tiles -2 and -1 (issued in
  // iterations 0 and 1, never staged): buffers 1 and 2, tile -2 on a seeded barrier (below).
  auto dq_issue = [&](float(&acc)[D / 4], int t) {
    named_barrier_sync(bar_ds8(wg ^ 1, t), 256);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk) {
      const uint32_t kt = opaque(sKt + C::kDqCols * 128 * wg);  // K^T's rows of this warpgroup's dQ columns
      fp8_bwd_wgmma_ss<D / 2>(acc, desc_k32(make_desc_kmajor(opaque(sdS) + ((t + kDsBufs) % kDsBufs) * C::kdSBytes,
                                                              128), kk),
                               desc_k32(make_desc_kmajor(kt, 128), kk), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  // dQ of tile t in dS8's units, * u k_s / q_s: this warp's rows m0 + 16 warp .. + 15, columns 64 wg .. + 63, staged
  // as two 128B-swizzled 16 x 32 fp32 panels and added to f.dq_accum by two bulk tensor reduce-adds (rows past the
  // sequence add dS8's zeros: exact no-ops on the next sequence's rows, clipped past total_q).
  // The staged panels of tile t to f.dq_accum: the proxy fence (the stores seen by the bulk copies), then lane 0's two
  // reduce-adds. kLateFence: issued an iteration after the stores (with the dS8 arrive, one fence for both).
  auto dq_flush = [&](int t, bool fence) {
    if constexpr (kDqStaged) {
      const uint32_t stg = opaque(base + C::kOffDq) + (4 * wg + warp) * C::kDqWarpBytes;
      if (fence) proxy_fence();
      __syncwarp();
      if ((kDiag & kFp8BwdDiagNoReduce) == 0 && lane == 0) {
        const int row = sq.q_start + tile_m0(t) + 16 * warp;
#pragma unroll
        for (int pn = 0; pn < 2; ++pn) tma_reduce_add_3d(&tm_dq, stg + pn * 2048, kr0 + 32 * pn, h, row);
        bulk_commit();
      }
    }
  };
  // kRedNext: the last kRedNextHeld reduce-adds of dQ of tile i - 2 (scaled in the late part of iteration i) issued
  // in iteration i + 1 once its S^T is issued (after the loop: before the last late part), at red_keep (the address
  // of that tile's reduce-adds)
  constexpr int kRedNextHeld = (kDiag & kFp8BwdRedNextWide) != 0 && D == 128 ? 3 : 2;
  float dq_pend[4 * kRedNextHeld];
  // kDqBf16: the last kBf16Held of the 4 bf16 reduce-adds held, as packed words (8 registers for 2; 3 held measured
  // slower, session 26; lab bits kFp8BwdDqBf16Held1 / Held0: 1 / none)
  // (D = 64: 2 reduce-adds per tile, 1 held)
  constexpr int kBf16Held = (kDiag & kFp8BwdDqBf16Held0) != 0   ? 0
                            : (kDiag & kFp8BwdDqBf16Held1) != 0 ? 1
                            : kRedNextHeld >= 3                 ? 2
                                                                : 1;
  constexpr int kBf16Red = D / 32;  // bf16 reduce-adds per thread and tile
  uint32_t dq_pendw[4 * (kBf16Held > 0 ? kBf16Held : 1)];
  auto dq_pend_flush = [&] {
    if constexpr (kDqBf16) {
#pragma unroll
      for (int j = 0; j < kBf16Held; ++j) {
        red_add_v4_bf16x2(red_keep + 128 * (kBf16Red - kBf16Held + j), dq_pendw[4 * j], dq_pendw[4 * j + 1],
                          dq_pendw[4 * j + 2], dq_pendw[4 * j + 3]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kRedNextHeld; ++j) {
        red_add_v4(red_keep + 128 * (kDqF4 - kRedNextHeld + j), dq_pend[4 * j], dq_pend[4 * j + 1], dq_pend[4 * j + 2],
                   dq_pend[4 * j + 3]);
      }
    }
  };
  auto dq_stage = [&](const float(&acc)[D / 4], int t, float scale, bool flush, bool defer) {
    if constexpr (kDqRed) {  // fragment order: this warp's 16 rows are one group, its D / 2 columns block wg
      const int64_t g = dq_group_index(sq.q_start, b, tile_m0(t)) + warp;
      float* a = f.dq_accum + ((g * p.heads + h) * 2 + wg) * (kDqGroupFloats / 2) + 4 * lane;
      if constexpr (kLean && kRedKeep) {  // tiles in order: tile t's groups 4 after tile t - 1's (64 rows), past
                                          // the context gap also the gap's; tile 0's from the sequence's first
        const int64_t dg = t > 0 ? 4 * (1 + (t == tmap[1] ? tmap[2] : 0))
                                 : dq_group_index(sq.q_start, b, tile_m0(0)) + warp;
        a = red_keep + dg * (int64_t{p.heads} * kDqGroupFloats);
        red_keep = a;
      } else if constexpr (kRedKeep) {  // the address from the previous one (so that it stays live until here)
        a = red_keep + (g - red_g) * (int64_t{p.heads} * kDqGroupFloats);
        red_keep = a;
        red_g = g;
      }
      if constexpr (kDqBf16) {  // instruction j: the values of float4 2 j and 2 j + 1, 16 bytes at a + 128 j floats
#pragma unroll
        for (int j = 0; j < kBf16Red; ++j) {
          uint32_t w[4];
#pragma unroll
          for (int c = 0; c < 4; ++c) w[c] = pack_bf16x2(acc[8 * j + 2 * c] * scale, acc[8 * j + 2 * c + 1] * scale);
          if (kRedNext && defer && j >= kBf16Red - kBf16Held) {
#pragma unroll
            for (int c = 0; c < 4; ++c) dq_pendw[4 * (j - kBf16Red + kBf16Held) + c] = w[c];
          } else {
            red_add_v4_bf16x2(a + 128 * j, w[0], w[1], w[2], w[3]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < (kDqBf16 ? 0 : kDqF4); ++j) {
        if (kRedNext && defer && j >= kDqF4 - kRedNextHeld) {
#pragma unroll
          for (int c = 0; c < 4; ++c) dq_pend[4 * (j - kDqF4 + kRedNextHeld) + c] = acc[4 * j + c] * scale;
        } else {
          red_add_v4(a + 128 * j, acc[4 * j] * scale, acc[4 * j + 1] * scale, acc[4 * j + 2] * scale,
                     acc[4 * j + 3] * scale);
        }
      }
    }
    if constexpr (kDqStaged) {
      const uint32_t stg = opaque(base + C::kOffDq) + (4 * wg + warp) * C::kDqWarpBytes;
      if (lane == 0) bulk_wait_read0();  // this warp's previous reduce-adds have read the panels
      __syncwarp();
      const uint32_t rowa = stg + (lane / 4) * 128 + (lane % 2) * 8;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t a =
              rowa + (j / 4) * 2048 + half * 8 * 128 + (((2 * (j % 4) + (lane % 4) / 2) ^ (lane / 4)) << 4);
          st_shared_v2_f32(a, acc[4 * j + 2 * half] * scale, acc[4 * j + 2 * half + 1] * scale);
        }
      }
      if (flush) dq_flush(t, true);
    }
  };
  // Iteration i: the GEMMs and pointwise passes of tile i, then (late) the quantization of tile i - 1, dK of tile
  // i - 1 and dQ of tile i - 2; after the loop the last tile's quantization, dK and dQ. The warpgroups never wait
  // for each other's current tile: the amax of tile i - 1 and the dS8 of tile i - 2 they wait for were posted a
  // tile earlier, so one's pointwise work runs under the other's GEMMs. The late part runs unconditionally from
  // iteration 0 on (ptxas serialized the wgmmas and spilled with it inside an if): tile -1 is all zeros (dS' slot
  // and amax words zeroed, dS8 buffer 2 zeroed and dK's B there: 0 x 0 adds exact zeros, u stays 0), and the
  // barriers no iteration arrives at (tile -2's dS8, tile -1's amax) are seeded with this warpgroup's arrivals: one
  // arrival per wait on every barrier (a second, on tile -1's dS8 barrier, deadlocked the first device run).
  const int n = tmap[3];
  // Every (query, key) of this warpgroup's part of the tile at query row m0 allowed (the sequence's fields re-read
  // from shared memory). kFullNext: tile i + 1's computed in iteration i, under its GEMMs, instead of at the top of
  // iteration i + 1, where its shared loads' latency was not covered (14 % of the stall samples at B16 S16K).
  auto tile_is_full = [&](int m0) {
    if constexpr (kLean) {
      const uint32_t fw = bar + 104u + 12u * static_cast<uint32_t>(wg);
      const int fa = static_cast<int>(ld_shared_u32(fw)), fb0 = static_cast<int>(ld_shared_u32(fw + 4u)),
                fb1 = static_cast<int>(ld_shared_u32(fw + 8u));
      return m0 <= fa || (fb0 <= m0 && m0 <= fb1);
    }
    const int j_w0 = n0 + kr0;
    return m0 + BM <= sq.lq && j_w0 + 64 <= sq.lk &&
           sq.mask.tile_full(m0 + sq.mask.offset, m0 + BM + sq.mask.offset, j_w0, j_w0 + 64);
  };
  bool full_next = kFullNext && n > 0 && tile_is_full(tile_m0(0));
  {
    const uint32_t z = opaque(sdS) + 2 * C::kdSBytes + ctid * 32;  // 8 KB: 32 B per consumer thread
    st_shared_v4_f32(z, 0.f, 0.f, 0.f, 0.f);
    st_shared_v4_f32(z + 16, 0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < 8; ++k) st_shared_v4_f32(dsf_addr(k), 0.f, 0.f, 0.f, 0.f);
    if (ctid < 8) st_shared_u32(sRed + 32 * 3 + 4 * ctid, 0u);
    fence_proxy_async_smem();
    named_barrier_sync(15, 256);
    if (n > 0) {  // (tile -1's dS8 barrier is arrived at by iteration 0's late part, as any tile's; kLateFence:
                  // tile i - 2's by iteration i, tile -2's too)
      if (!kLateFence) named_barrier_arrive(bar_ds8(wg, -2), 256);
      named_barrier_arrive(bar_amax(wg, -1), 256);
    }
  }
  // kLateFence, iteration i (i = n: after the loop), once its S^T / dP^T are issued: the proxy fence for the dS8
  // stores of tile i - 2 and the dQ staging of tile i - 3 (both in the late part of iteration i - 1: by now they
  // have long completed, so the fence's MEMBAR rarely waits; one fence for both), then the dS8 arrive and the
  // reduce-adds. The other warpgroup waits for that dS8 in its late part of iteration i (dQ of tile i - 2).
  auto late_flush = [&](int i) {
    proxy_fence();
    named_barrier_arrive(bar_ds8(wg, i - 2), 256);
    if (i > 2) dq_flush(i - 3, false);
  };
  // kStsmDs8: the dS8 bytes d of tile t (da's e4m3 A fragments) into its buffer (t + kDsBufs) % kDsBufs.
  auto store_ds8 = [&](const uint32_t(&d)[2][4], int t) {
    // The same bytes by two stmatrix.x4.trans: register c holds the 16-bit words (keys j, j + 8) of queries
    // 8 c + 2 (lane % 4) and + 1 (one byte permute of two dK fragments), i.e. the 8 x 8 b16 matrix (key pair,
    // query) of query group c in the ldmatrix fragment layout; stored transposed, its row i is query 8 c + i's
    // 16-byte chunk (key pairs 0..7 of this warp), at chunk (4 wg + warp) ^ i of that row (128-byte swizzle).
    const uint32_t buf = opaque(sdS) + ((t + kDsBufs) % kDsBufs) * C::kdSBytes;
#pragma unroll
    for (int hq = 0; hq < 2; ++hq) {
      uint32_t r[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int c = 4 * hq + m;
        const uint32_t s0 = 2 * (c % 2);
        r[m] = __byte_perm(d[c / 4][2 * ((c % 4) / 2)], d[c / 4][2 * ((c % 4) / 2) + 1],
                           s0 | ((4 + s0) << 4) | ((s0 + 1) << 8) | ((5 + s0) << 12));
      }
      const uint32_t a = buf + (32 * hq + lane) * 128 + (((4 * wg + warp) ^ (lane & 7)) << 4);
      asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(a),
                   "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                   : "memory");
    }
  };
  // The late part of iteration i (i = n: after the loop) on acc_x = dS' of tile i - 1: its factor (tile order: u is
  // the running maximum), dS8 into A fragments and the dS8 buffer, dQ of tile i - 2, dK of tile i - 1; the waits.
  // kSpecQ: da_x = e4m3(dS' / ug_x) of tile i - 1, quantized in its own iteration (acc_x unused).
  auto late = [&](int i, float(&acc_x)[32], uint32_t(&pa)[2][4], float qs_cur, bool release_a, int s_a,
                  float ug_x, const uint32_t(&da_x)[2][4]) {
    float acc_dq[D / 4];
    if constexpr (kDs8Early) {  // (dS8 with ug_x: rewritten below where u != ug_x)
      store_ds8(da_x, i - 1);
      dq_issue(acc_dq, i - 2);
      proxy_fence();
    }
    // The factor of tile i - 1, shared by both warpgroups (dQ sums over all 128 keys): the 8 warp maxima posted in
    // tile i - 1 (the other warpgroup's arrive was a tile ago: rarely a wait). u only grows, by powers of two:
    // acc_dk rescaled exactly (dK of tile i - 2 was waited for at the end of the last iteration).
    named_barrier_sync(bar_amax(wg ^ 1, i - 1), 256);
    const uint32_t words = sRed + 32 * ((i - 1) & 3);
    float amax = 0.f;
    if constexpr ((kDiag & kFp8BwdDiagNoAmaxBarrier) != 0) {
      amax = __uint_as_float(ld_shared_u32(words + 4 * (4 * wg + warp)));
    } else {
      if constexpr (kAmaxTree) {  // (a tree: 3 dependent steps instead of 8; the same maximum)
        float wm[8];
#pragma unroll
        for (int w = 0; w < 8; ++w) wm[w] = __uint_as_float(ld_shared_u32(words + 4 * w));
        amax = fmaxf(fmaxf(fmaxf(wm[0], wm[1]), fmaxf(wm[2], wm[3])), fmaxf(fmaxf(wm[4], wm[5]), fmaxf(wm[6], wm[7])));
        amax = fmaxf(amax, 0.f);
      } else {
#pragma unroll
        for (int w = 0; w < 8; ++w) amax = fmaxf(amax, __uint_as_float(ld_shared_u32(words + 4 * w)));
      }
    }
    const float sf = kLean ? fp8_pow2_ceil_div448(amax) : fp8_pow2_ceil(__fdiv_rn(amax, 448.f));
    if (sf > u) {
      if (u > 0.f) {
        const float r = u / sf;
#pragma unroll
        for (int k = 0; k < D / 2; ++k) acc_dk[k] *= r;
      }
      u = sf;
    }
    dq_scale2 = dq_scale1;
    dq_scale1 = kLean ? u * qs_prev : u * ks / qs_prev;  // (u a power of two: the same rounding)
    uint32_t da[2][4];
    if constexpr (kSpecQ) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
#pragma unroll
        for (int q = 0; q < 4; ++q) da[k][q] = da_x[k][q];
      }
      if (u != ug_x) {  // (warp-uniform, rare) u grew since (ug_x <= u): the kept bytes times ug_x / u, a power
                        // of two <= 1 (exact where the result is normal in e4m3; a second rounding below)
        float x[32];
        fp8_unpack_a64(da, x);
        const float r = u > 0.f ? ug_x / u : 0.f;
#pragma unroll
        for (int e = 0; e < 32; ++e) x[e] *= r;
        fp8_pack_a64(x, da);
        if constexpr (kDs8Early) {
          store_ds8(da, i - 1);
          proxy_fence();
        }
      }
    } else {
      const float inv_u = u > 0.f ? 1.f / u : 0.f;  // exact: u is a power of two
#pragma unroll
      for (int e = 0; e < 32; ++e) acc_x[e] *= inv_u;
      fp8_pack_a64(acc_x, da);
    }
    // dS8 of tile i - 1 as (queries x the block's 128 keys) for dQ (buffer (i + 2) % 3, last read by both
    // warpgroups' dQ of tile i - 4, done in their iteration i - 2, before the other posted tile i - 1's amax;
    // kDs8Early: stored above, buffer (i - 1) % 4): keys
    // j, j + 8 of one query in one 16-bit store at byte 64 wg + 16 warp + 2 (lane / 4) of the query's 128-byte row
    // (hstu_fp8_pair_perm), 128-byte swizzle (16-byte chunk XOR row % 8; row 8 c + 2 (lane % 4) + odd: row % 8 =
    // 2 (lane % 4) + odd for every c).
    if constexpr (kStsmDs8) {
      if constexpr (!kDs8Early) store_ds8(da, i - 1);
    } else {
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        const uint32_t ds_thread = opaque(sdS) + ((i + 2) % 3) * C::kdSBytes + (2 * (lane % 4) + odd) * 128 +
                                   (((4 * wg + warp) ^ (2 * (lane % 4) + odd)) << 4) + 2 * (lane / 4);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          // e4m3 bytes of elements 4 c + odd, 4 c + 2 + odd from da (fp8_pack_a64's order: byte 2 (c % 2) + odd of
          // registers 2 ((c % 4) / 2) and + 1 of k-step c / 4), by one byte permute: no second conversion.
          const int bsel = 2 * (c % 2) + odd;
          const uint32_t pair = __byte_perm(da[c / 4][2 * ((c % 4) / 2)], da[c / 4][2 * ((c % 4) / 2) + 1],
                                            static_cast<uint32_t>(bsel | ((4 + bsel) << 4)));
          st_shared_u16(ds_thread + 8 * c * 128, static_cast<uint16_t>(pair));
        }
      }
    }
    if (!kLateFence || !release_a) {  // (kLateFence: in iteration i + 1, after its GEMMs' issue; the last at once)
      if constexpr (!kDs8Early) proxy_fence();
      named_barrier_arrive(bar_ds8(wg, i - 1), 256);
    }
    // dQ of tile i - 2 (kDs8Early: issued above), then dK += dS8^T Q^T of tile i - 1 (RS, B: Q^T's 64-query rows of D,
    // 64-byte swizzle, ring B; tile -1: the zeroed dS8 buffer 2), each its own commit group.
    if constexpr (!kDs8Early) dq_issue(acc_dq, i - 2);
    const int sb = (i + S - 1) % S;  // (tile i - 1's)
    if (i > 0) mbar_wait(bar_full_b(sb), ((i - 1) / S) & 1);
    const uint32_t bq = i > 0 ? stage_b(sb) : sdS + 2 * C::kdSBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      fp8_bwd_wgmma_rs<D>(acc_dk, da[kk], desc_k32(make_desc_kmajor(opaque(bq), 64), kk), 1);
    }
    wgmma_commit();
    wgmma_wait<1>();  // dV of tile i and dQ of tile i - 2 done
    pin_all(pa);      // (the RS fragments stay untouched until their wgmmas completed)
    pin_all(acc_dv);
    pin_all(acc_dq);
    if (release_a && lane == 0) mbar_arrive(bar_empty_a(s_a));  // this warp is done with tile i's Q, dO, dO^T
    if (i > 1) dq_stage(acc_dq, i - 2, dq_scale2, !kLateFence || !release_a, release_a);
    qs_prev = qs_cur;
    wgmma_wait<0>();  // dK of tile i - 1 done
    pin_all(da);
    pin_all(acc_dk);
    if (i > 0 && lane == 0) mbar_arrive(bar_empty_b(sb));  // tile i - 1's Q^T
  };
  for (int i = 0; i < n; ++i) {
    const int s = i % S;
    const uint32_t ph = (i / S) & 1;
    float acc_dp[32];   // dS'^T of tile i
    uint32_t pa[2][4];  // P8^T of tile i (dV's A fragments)
    const int m0 = tile_m0(i);
    if (i == 0) mbar_wait(bar, 0);
    mbar_wait(bar_full_a(s), ph);
    // Factors of this tile: q's (per CTA except in block mode), dO's (block layout). kPrefetch: the producer loaded
    // them with the tile (its stage's two words, after the full barrier); kFactorsEarly: read here, before the GEMMs'
    // issue and the held reduce-adds (read after them, the load queued behind the reduce-adds and ptxas put the R2UR
    // waiting for it between dP^T's wgmmas); else under the GEMMs.
    float qs, dos;
    if constexpr (kFactorsEarly) {
      qs = __uint_as_float(ld_shared_u32(bar + 224u + 8u * s));
      dos = __uint_as_float(ld_shared_u32(bar + 228u + 8u * s));
    }
    float acc_s[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
      wgmma_m64n64k32_ss_e4m3(acc_s, desc_k32(make_desc_kmajor(opaque(sK + kr0 * D), D), kk),
                              desc_k32(make_desc_kmajor(opaque(stage_a(s)), D), kk), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
    if constexpr (kRedNext) {  // the held reduce-adds of dQ of tile i - 3 (late part of iteration i - 1)
      if (i > 2) dq_pend_flush();
      wgmma_fence();  // (their source registers may be dP^T's accumulators)
    }
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
      wgmma_m64n64k32_ss_e4m3(acc_dp, desc_k32(make_desc_kmajor(opaque(sV + kr0 * D), D), kk),
                              desc_k32(make_desc_kmajor(opaque(stage_a(s)) + C::kQBytes, D), kk), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
    if constexpr (kLateFence) late_flush(i);
    if constexpr (kFactorsEarly) {
    } else if constexpr (kPrefetch) {
      qs = __uint_as_float(ld_shared_u32(bar + 224u + 8u * s));
      dos = __uint_as_float(ld_shared_u32(bar + 228u + 8u * s));
    } else {
      const int64_t blk_cols_q = p.total_q / 128 + p.batch;
      qs = fp8_descale(f.q_descale, f.descale_mode, b, h, p.heads, blk_cols_q, sq.q_start, m0 / 128);
      dos = fp8_descale(f.do_descale, kFp8Block, b, h, p.heads, blk_cols_q, sq.q_start, m0 / 128);
    }
    if constexpr (kLean) {  // dQ's factor u k_s / q_s as u (k_s / q_s): divided where q_s changes, off the late part
      if (qs != qs_kq) {
        kq = ks / qs;
        qs_kq = qs;
      }
    }
    // Mask bits of this thread's 32 elements (bit e: key jrow + 8 ((e % 4) / 2), query qcol + 8 (e / 4) + (e % 2)):
    // all set on tiles every (query, key) of which is allowed, else from SeqMask::allowed.
    const int j_w0 = n0 + kr0;
    const int jrow = j_w0 + 16 * warp + lane / 4;
    const int qcol = m0 + 2 * (lane % 4);
    uint32_t ok_bits = 0xffffffffu;
    // (uniform per warpgroup: the pointwise passes below take their copy without selects on such tiles;
    // kFullNext: decided in the previous iteration)
    const bool full_tile = kFullNext ? full_next : tile_is_full(m0);
    if (!full_tile) {
      ok_bits = 0;
      // kMaskFast: no contexts, no targets, no left window (causal, none, right windows): allowed(r, j) is r < lk,
      // j < lk and (wr < 0 or j <= r + wr), so each element takes a few compares instead of allowed()'s rule.
      if (kMaskFast && sq.mask.ctx == 0 && sq.mask.hist >= sq.mask.lk && sq.mask.wl < 0) {
        const int lq = sq.lq, off = sq.mask.offset, mlk = sq.mask.lk, wr = sq.mask.wr;
        const int jmax = min(sq.lk, mlk);                    // keys j < jmax
        const int qmax = min(lq, mlk - off);                 // queries qi < qmax (r = qi + off < lk)
        const int dq_min = wr < 0 ? INT_MIN / 2 : -off - wr;  // j <= qi + off + wr: qi - j >= -off - wr
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          const int j = jrow + 8 * ((e % 4) / 2);
          const int qi = qcol + 8 * (e / 4) + (e % 2);
          if (qi < qmax && j < jmax && qi - j >= dq_min) ok_bits |= 1u << e;
        }
      } else {
#pragma unroll 4
        for (int e = 0; e < 32; ++e) {
          const int j = jrow + 8 * ((e % 4) / 2);
          const int qi = qcol + 8 * (e / 4) + (e % 2);
          if (qi < sq.lq && j < sq.lk && sq.mask.allowed(qi + sq.mask.offset, j)) ok_bits |= 1u << e;
        }
      }
    }
    // S^T done (dP^T may still run): P^T = SiLU(S) masked by select, packed per k-step of dV into its A fragments,
    // and dS's factor SiLU'(S) ds_scale kept in acc_s (the pointwise pass's tanh part under the dP^T GEMM). With
    // h = S / 2 (alpha q_s k_s folded in), t = tanh(h): SiLU(S) = h (1 + t), SiLU'(S) = (1 + t) / 2 (1 + h (1 - t)),
    // so SiLU'(S) ds_scale = c (1 + t) (1 + a) with c = ds_scale / 2, a = h (1 - t): four FMAs per element after the
    // tanh (seven operations and one more multiply in the dS pass before). kFull: the copy for tiles every element
    // of which is allowed (no selects: ptxas kept the 32 mask bits as predicates rebuilt from a register, ~3 logic
    // ops per element and pass).
    wgmma_wait<1>();
    pin_all(acc_s);
    const float h_scale = 0.5f * p.alpha * qs * ks;
    // kSpecQ: dS' / ug (ug = u now, i.e. two tiles before this one: exact, a power of two), so the quantization
    // needs no multiply unless u grew since (late: ug_x).
    const float ug = kGuessU && u > 0.f ? u : 1.f;
    const float c_ds0 = 0.5f * dos * vs * p.inv_scaling * p.alpha * qs;  // dS' = dP^T SiLU'(S) (2 c_ds)
    // (kLean: times 1 / ug, exact: ug = u = pow2ceil(amax / 448) of a finite amax, in [2^-126, 2^120])
    const float c_ds = !kGuessU ? c_ds0 : kLean ? c_ds0 * (u > 0.f ? fp8_pow2_rcp(u) : 1.f) : c_ds0 / ug;
    auto p_part = [&](auto kFull) {
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // the 4 elements of one e4m3 x4 A register: e, e + 1, e + 4, e + 5
          const int e0 = 16 * kk + 8 * (q >> 1) + 2 * (q & 1);
          float pv[4];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int e = e0 + (c & 1) + 4 * (c >> 1);
            const bool ok = decltype(kFull)::value || ((ok_bits >> e) & 1u);
            const float hx = acc_s[e] * h_scale;
            if constexpr ((kDiag & kFp8BwdDiagNoPointwise) != 0) {
              pv[c] = acc_s[e];
            } else if constexpr ((kDiag & kFp8BwdDiagNoSilu) != 0) {
              pv[c] = ok ? hx : 0.f;
              acc_s[e] = c_ds;
            } else {
              const float t = tanh_fast(hx);
              pv[c] = ok ? fmaf(hx, t, hx) : 0.f;
              const float a = fmaf(-hx, t, hx);
              const float ct = fmaf(c_ds, t, c_ds);
              acc_s[e] = fmaf(a, ct, ct);  // SiLU'(S) ds_scale (the dS select below masks)
            }
          }
          pa[kk][q] = cvt_e4m3x4(pv[0], pv[1], pv[2], pv[3]);
        }
      }
    };
    if (full_tile) {
      p_part(std::true_type{});
    } else {
      p_part(std::false_type{});
    }
    if (dos != do_cur) {
      if (do_cur != 0.f) {
        const float r = do_cur / dos;
#pragma unroll
        for (int k = 0; k < D / 2; ++k) acc_dv[k] *= r;
      }
      do_cur = dos;
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      fp8_bwd_wgmma_rs<D>(acc_dv, pa[kk],
                               desc_k32(make_desc_kmajor(opaque(stage_a(s)) + 2 * C::kQBytes, 64), kk), 1);
    }
    wgmma_commit();
    if constexpr (kFullNext) full_next = i + 1 < n && tile_is_full(tile_m0(i + 1));  // (under dP^T and dV)
    // dP^T done (dV may still run): dS'^T = dP^T dO_s v_s / N SiLU'(S) alpha q_s (into acc_dp), masked by select;
    // the tile's amax.
    wgmma_wait<1>();
    pin_all(acc_dp);
    float amax = 0.f;
    if constexpr ((kDiag & kFp8BwdDiagNoPointwise) != 0) {
#pragma unroll
      for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(acc_dp[e]));
    } else if (kAmaxTree) {  // (four independent maxima, then two steps: the same maximum, a 10-deep chain)
      float am[4] = {0.f, 0.f, 0.f, 0.f};
      if (full_tile) {
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          acc_dp[e] *= acc_s[e];
          am[e & 3] = fmaxf(am[e & 3], fabsf(acc_dp[e]));
        }
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          const bool ok = (ok_bits >> e) & 1u;
          acc_dp[e] = ok ? acc_dp[e] * acc_s[e] : 0.f;
          am[e & 3] = fmaxf(am[e & 3], fabsf(acc_dp[e]));
        }
      }
      amax = fmaxf(fmaxf(am[0], am[1]), fmaxf(am[2], am[3]));
    } else if (full_tile) {
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        acc_dp[e] *= acc_s[e];
        amax = fmaxf(amax, fabsf(acc_dp[e]));
      }
    } else {
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        const bool ok = (ok_bits >> e) & 1u;
        acc_dp[e] = ok ? acc_dp[e] * acc_s[e] : 0.f;
        amax = fmaxf(amax, fabsf(acc_dp[e]));
      }
    }
    // The warp's maximum in one instruction (amax is a non-negative float: fmaxf drops NaN; its bits order as
    // unsigned integers), posted for both warpgroups (slot i % 4: rewritten in tile i + 4, when the other has
    // passed tile i + 2's amax wait, so long after its read of this slot in tile i + 1).
    amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(amax)));
    // kSpecQ: dS' of this tile quantized now with ug (kept in registers until the next iteration's late part),
    // or, where this warp's dS' / ug exceeds 448 or u = 0 (rare), with its own factor ugw = pow2ceil(amax / 448)
    // (<= the tile's u: rescaled there)
    float ugw = ug;
    if constexpr (kSpecQ) {
      if (u == 0.f || amax > 448.f) {
        ugw = kLean ? fp8_pow2_ceil_div448(amax * ug) : fp8_pow2_ceil(__fdiv_rn(amax * ug, 448.f));
        const float r = ugw > 0.f ? ug / ugw : 0.f;
#pragma unroll
        for (int e = 0; e < 32; ++e) acc_dp[e] *= r;
      }
    }
    if constexpr (kGuessU) amax *= ug;  // (exact)
    if (lane == 0) st_shared_u32(sRed + 32 * (i & 3) + 4 * (4 * wg + warp), __float_as_uint(amax));
    named_barrier_arrive(bar_amax(wg, i), 256);
    // dS' of tile i - 1 back from shared memory, tile i's in its place (each thread its own slot).
    float acc_x[32];
    if constexpr (kSpecQ) {
      uint32_t da_new[2][4];
      fp8_pack_a64(acc_dp, da_new);
      late(i, acc_x, pa, kLean ? kq : qs, true, s, ug_prev, da_keep);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
#pragma unroll
        for (int q = 0; q < 4; ++q) da_keep[k][q] = da_new[k][q];
      }
    } else {
      if constexpr ((kDiag & kFp8BwdDiagNoPark) != 0) {
#pragma unroll
        for (int e = 0; e < 32; ++e) acc_x[e] = acc_dp[e];
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          ld_shared_v4_f32(dsf_addr(k), acc_x[4 * k], acc_x[4 * k + 1], acc_x[4 * k + 2], acc_x[4 * k + 3]);
          st_shared_v4_f32(dsf_addr(k), acc_dp[4 * k], acc_dp[4 * k + 1], acc_dp[4 * k + 2], acc_dp[4 * k + 3]);
        }
      }
      late(i, acc_x, pa, kLean ? kq : qs, true, s, ug_prev, da_keep);
    }
    ug_prev = ugw;
  }
  if (n > 0) {  // the last tile's late part, then its dQ
    if constexpr (kLateFence) late_flush(n);
    if constexpr (kRedNext) {
      if (n > 2) dq_pend_flush();
    }
    float acc_x[32];
    if constexpr (!kSpecQ) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        ld_shared_v4_f32(dsf_addr(k), acc_x[4 * k], acc_x[4 * k + 1], acc_x[4 * k + 2], acc_x[4 * k + 3]);
      }
    }
    uint32_t pa[2][4] = {};
    late(n, acc_x, pa, 0.f, false, 0, ug_prev, da_keep);
    float acc_dq[D / 4];
    dq_issue(acc_dq, n - 1);
    wgmma_wait<0>();
    pin_all(acc_dq);
    dq_stage(acc_dq, n - 1, dq_scale1, true, false);
  }
  if constexpr (kDqStaged) {
    if (lane == 0) bulk_wait_read0();  // the staged panels are read before the CTA's shared memory goes
  }
  // Epilogue: every key row of the block inside the sequence (0 where no query sees it).
  const int j_first = kr0 + n0 + 16 * warp + lane / 4;
  if constexpr ((kDiag & kFp8BwdEpiV4) != 0) {
    fp8_bwd_store_rows_v4<D>(acc_dk, u, p.dk, p.dk_row_stride, p.dk_head_stride, h, sq.k_start, j_first, sq.lk_alloc,
                          f.out_half, lane);
    fp8_bwd_store_rows_v4<D>(acc_dv, do_cur * p.inv_scaling, p.dv, p.dv_row_stride, p.dv_head_stride, h, sq.k_start,
                          j_first, sq.lk_alloc, f.out_half, lane);
  } else {
    fp8_bwd_store_rows<D>(acc_dk, u, p.dk, p.dk_row_stride, p.dk_head_stride, h, sq.k_start, j_first, sq.lk_alloc,
                       f.out_half, lane);
    fp8_bwd_store_rows<D>(acc_dv, do_cur * p.inv_scaling, p.dv, p.dv_row_stride, p.dv_head_stride, h, sq.k_start,
                       j_first, sq.lk_alloc, f.out_half, lane);
  }
}

}  // namespace sm90
}  // namespace hstu
