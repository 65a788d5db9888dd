// Host declarations of the Hopper (sm_90a) FP8 (e4m3) HSTU forward (issue 36; no torch headers).
//
// The kernel (hstu_fwd_fp8_sm90_kernel.cuh) computes S = Q8 K8^T and O += P8 Vt8 with e4m3 wgmma and fp32
// accumulators. FP8 wgmma reads both shared-memory operands K-major, so P V needs V transposed: a pre-pass writes
// Vt, (H, D, vt_cols) e4m3 with the keys contiguous, where the keys of sequence b start at column hstu_fp8_vt_start
// (16-byte aligned: TMA needs the innermost coordinate of a box 16-byte aligned, an unaligned one is an illegal
// instruction on the H200; each sequence padded to whole groups of 32 keys, so a tile at a multiple of 32 keys from
// a sequence's start never meets another sequence's permuted group), and inside each group of 32 the keys are
// permuted (hstu_fp8_key_perm) so that P goes from the S accumulator registers into the FP8 A-operand registers
// without a shuffle between threads. Columns of no used key hold 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

// Descale granularity (hstu/_fp8.py DESCALE_MODES): one factor per tensor, head, (sequence, head) or (head, 128-row
// block of a sequence). Factors are float32, checked on the device before the kernel (fp8_check_scales).
enum Fp8DescaleMode : int { kFp8Tensor = 0, kFp8Head = 1, kFp8BatchHead = 2, kFp8Block = 3 };

struct HstuFp8FwdParams {
  void* vt;         // (H, D, vt_cols) e4m3, written by the pre-pass (any contents before)
  int64_t vt_cols;  // hstu_fp8_vt_cols(total_k, batch)
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  int descale_mode;  // Fp8DescaleMode
  int out_half;      // 1: p.out is float16, 0: bfloat16
  int64_t total_k;   // rows of k / v (block mode: the column count total_k / 128 + B of k_descale / v_descale)
  int late_pack;     // 1: P packed to e4m3 after the P V wait (kernel_options(fp8_early_pack=False)), 0: the default
  int bn192;         // 1: 192-key tiles at D = 128 where they apply (kernel_options(fp8_bn192=True)), 0: the default
  int diag;          // 0; else timing-only variants, WRONG outputs (kFp8FwdDiag* bits in hstu_fwd_fp8_sm90_kernel.cuh;
                     // kernel_options(fp8_fwd_diag=...), private)
  int silu;          // 0: the default SiLU form (fp8_silu_default); 1 + an Fp8Silu value: that form, in grid order
                     // (hstu_fwd_fp8_sm90_kernel.cuh; kernel_options(fp8_silu=...), for comparisons)
  int var;           // 0; else a variant for comparisons (Fp8FwdVar in hstu_fwd_fp8_sm90_kernel.cuh;
                     // kernel_options(fp8_fwd_var=...), private)
};

// First Vt column of sequence b (keys from cu_seqlens_k[b] = k_start): 16-byte aligned, and strictly increasing in b
// with room for the sequence's keys rounded up to 32 (at most k_start + 15 + 48 b + len + 31 < the next start).
__host__ __device__ inline int64_t hstu_fp8_vt_start(int64_t k_start, int64_t b) {
  return (k_start + 15) / 16 * 16 + 48 * b;
}
// The sequence whose transposed columns hold column c: the largest b < batch with hstu_fp8_vt_start(cu[b], b) <= c
// (binary search; the starts strictly increase in b). 0 when c lies before sequence 0's first column.
__host__ __device__ inline int hstu_fp8_vt_seq(const int* cu, int batch, int64_t c) {
  int lo = 0, hi = batch;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (hstu_fp8_vt_start(cu[mid], mid) <= c) lo = mid; else hi = mid;
  }
  return lo;
}
// Vt columns (a multiple of 16: the TMA row stride): hstu_fp8_vt_start(total_k, batch).
inline int64_t hstu_fp8_vt_cols(int64_t total_k, int64_t batch) { return hstu_fp8_vt_start(total_k, batch); }

// Key (within its group of 32) held at Vt column s of the group: the S accumulator of a thread holds keys
// 2 (lane % 4) + {0, 1} + 8 c, the FP8 A operand wants k = 4 (lane % 4) + {0 .. 3} (+ 16), so slot 4 t + i holds
// key 2 t + (i & 1) + 8 (i >> 1) (+ 16 for the second half).
__host__ __device__ inline int hstu_fp8_key_perm(int s) {
  const int hi = s & 16, t = (s & 15) >> 2, i = s & 3;
  return hi + 2 * t + (i & 1) + 8 * (i >> 1);
}

// Key (within its group of 16) held at K^T slot s (the FP8 backward's K^T, hstu/csrc/fp8/hstu_fp8_bwd_prepass.h): slot
// 2 i + h holds key i + 8 h (the byte pairs of dS that one thread's S^T accumulators hold for one query: keys j and
// j + 8).
__host__ __device__ inline int hstu_fp8_pair_perm(int s) { return ((s & 15) >> 1) + 8 * (s & 1) + (s & ~15); }

// Rows of sequence b that hold data: seqused[b] capped at the sequence's length (all of them without seqused), at
// least 0. The one used-row rule of the FP8 pre-passes (the transposed copies here, dO's quantization).
__host__ __device__ inline int hstu_fp8_used_rows(const int* cu, const int* seqused, int b) {
  const int len = cu[b + 1] - cu[b];
  const int used = seqused != nullptr && seqused[b] < len ? seqused[b] : len;
  return used > 0 ? used : 0;
}

// The source row of transposed column c (Vt, and the FP8 backward's Q^T / dO^T / K^T): the sequence holding c
// (hstu_fp8_vt_seq), its slot l = c - hstu_fp8_vt_start(cu[b], b), the row of slot l under the group permutation
// (group 32: hstu_fp8_key_perm, 16: hstu_fp8_pair_perm), cu[b] + row if row < hstu_fp8_used_rows(cu, seqused, b),
// else -1 (a zero column: padding, gaps, unused rows).
__host__ __device__ inline int64_t hstu_fp8_col_src_row(const int* cu, const int* seqused, int batch, int64_t c,
                                                        int group) {
  if (batch <= 0) return -1;
  const int b = hstu_fp8_vt_seq(cu, batch, c);
  const int start = cu[b];
  const int64_t first = hstu_fp8_vt_start(start, b);
  if (c < first) return -1;
  const int64_t l = c - first;
  const int64_t row = group == 32 ? (l & ~int64_t{31}) + hstu_fp8_key_perm(static_cast<int>(l & 31))
                                  : (l & ~int64_t{15}) + hstu_fp8_pair_perm(static_cast<int>(l & 15));
  return row < hstu_fp8_used_rows(cu, seqused, b) ? start + row : -1;
}

// Runs the Vt pre-pass and the FP8 forward on `stream`. p: the op's HstuParams with q/k/v pointing at e4m3 data
// (strides in elements = bytes; contiguous (rows, H, D)), p.out bf16 or fp16 per f.out_half, no rab, sanitized int32
// vectors. D in {64, 128, 256}; cudaErrorNotSupported in builds without sm_90a device code.
template <int D>
cudaError_t run_hstu_fwd_fp8_sm90(const HstuParams& p, const HstuFp8FwdParams& f, cudaStream_t stream);

}  // namespace hstu
