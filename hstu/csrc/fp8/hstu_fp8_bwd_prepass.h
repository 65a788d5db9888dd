// Host declarations of the FP8 backward's device pre-pass (issue 36; hstu/_fp8.py `fp8_bwd_prepass_reference` is
// its CPU definition, the tests hold the two bit-equal; no torch headers).
//
// The Hopper FP8 backward (docs/hstu_attn.md, "The Hopper FP8 backward") runs five GEMMs per (64-key, 64-query)
// tile: S^T = K Q^T, dP^T = V dO^T (both reduce over D: operands as stored), dV += P^T dO^T', dK += dS^T Q^T'
// (reduce over queries) and dQ = dS K^T' (reduces over keys). FP8 wgmma reads shared-memory operands K-major only,
// so the last three need copies with the reduced axis contiguous. This pre-pass writes, on the call's stream and
// without a host sync:
//   do8, do_descale: dO quantized to e4m3 with one factor per (head, 128-row block of a sequence) -- the "block"
//     descale layout of the forward (quantize_fp8(..., "block")), rows past seqused_q and of no sequence 0;
//   qt, dot: (H, D, hstu_fp8_vt_cols(total_q, B)) bytes, the queries of sequence b from column
//     hstu_fp8_vt_start(cu_q[b], b), permuted inside each group of 32 by hstu_fp8_key_perm (as the forward's Vt):
//     then P^T / dS^T go from the S^T accumulator registers straight into the FP8 A-operand registers;
//   kt: (H, D, hstu_fp8_vt_cols(total_k, B)), keys of sequence b from hstu_fp8_vt_start(cu_k[b], b), permuted inside
//     each group of 16 by hstu_fp8_pair_perm: dS is stored to shared memory as (queries x keys) by stmatrix.trans of
//     16-bit pairs (key j, key j + 8) of one query, so K^T's key order must pair them the same way.
// Columns of no used row (past seqused, padding, gaps between sequences) hold 0: masked P / dS (0) never meet a
// non-finite operand in the GEMMs that reduce over rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_validate.h"  // HstuScaleCheckParams
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"  // hstu_fp8_vt_cols, hstu_fp8_col_src_row (the column -> row map)

namespace hstu {

struct HstuFp8BwdPrepassParams {
  const void* dout;  // (total_q, H, D) bfloat16 or float16 (dout_half), strides in elements
  int dout_half;
  int64_t do_row_stride, do_head_stride;
  const uint8_t* q8;  // (total_q, H, D) e4m3, strides in bytes
  int64_t q_row_stride, q_head_stride;
  const uint8_t* k8;  // (total_k, H, D) e4m3
  int64_t k_row_stride, k_head_stride;
  uint8_t* do8;        // (total_q, H, D) e4m3, contiguous
  float* do_descale;   // (H, do_cols)
  int64_t do_cols;     // total_q / 128 + batch
  uint8_t* qt;         // (H, D, q_cols)
  uint8_t* dot;        // (H, D, q_cols)
  int64_t q_cols;      // hstu_fp8_vt_cols(total_q, batch)
  uint8_t* kt;         // (H, D, k_cols)
  int64_t k_cols;      // hstu_fp8_vt_cols(total_k, batch)
  const int* cu_seqlens_q;  // (batch + 1), validated
  const int* cu_seqlens_k;
  const int* seqused_q;  // (batch) or nullptr
  const int* seqused_k;
  int batch, heads, head_dim;  // head_dim a multiple of 16, at most 256
  int64_t total_q, total_k;
  // Optional (nullptr: none): the FP8 backward's fp32 dq workspace, zeroed by the quantization's blocks (each its
  // own rows, no fill pass): (total_q, H, D) with every row, or dq_tiled (D = 128) the fragment-ordered groups of
  // hstu_fp8_bwd_dq_tiled_floats that hold the sequences' rows (the rest is never read).
  float* dq_zero;
  int dq_tiled;
  int dq_bf16;  // with dq_tiled: the groups in bf16 (kFp8BwdDqBf16: half the bytes per group and head)
  // Optional (check_claim nullptr: none): the FP8 descale factors' check (hstu_validate.h hstu_check_fp8_scales)
  // run by the quantization grid's first block, concurrent with the quantization, instead of a one-block launch of
  // its own that has the GPU to itself (check_claim: hstu_error_claim_word's device address).
  HstuScaleCheckParams check;
  int* check_claim;
};

// Launches the two pre-pass kernels (dO quantization with dO^T, then Q^T and K^T) on `stream`.
cudaError_t hstu_fp8_bwd_prepass(const HstuFp8BwdPrepassParams& p, cudaStream_t stream);

// After the Hopper FP8 backward kernel (one launch): dq = dq_accum rounded to the output dtype (every row), and zeros
// in the dk / dv rows outside every sequence (before cu_seqlens_k[0], from cu_seqlens_k[batch] on), which no CTA
// writes; the kernel writes every other row, so dk / dv need no zero fill before it. dq_tiled (D = 128): dq_accum
// in the fragment-ordered 16-row groups of hstu_fp8_bwd_dq_tiled_floats (hstu_bwd_fp8_sm90.h), put back into rows
// (the dq rows outside every sequence: zeros).
struct HstuFp8BwdFinishParams {
  const float* dq_accum;  // (total_q, H, D) fp32, contiguous; or dq_tiled's groups
  void* dq;               // (total_q, H, D) contiguous, out_half ? float16 : bfloat16
  void* dk;               // (total_k, H, D) contiguous, likewise
  void* dv;
  const int* cu_seqlens_k;  // (batch + 1), the validated copy
  const int* cu_seqlens_q;  // (batch + 1), the validated copy (dq_tiled)
  int batch, heads, head_dim, out_half, dq_tiled;
  int dq_bf16;  // with dq_tiled: dq_accum's groups in bf16 (kFp8BwdDqBf16), uint4 i of a group and head holding the
                // values of the fp32 layout's float4 2 (i % 128 / 32) 32 + i % 32 and the next 32 (block i / 128)
  int64_t total_q, total_k;
  int main_path;  // private A/B (kOptFp8BwdMainPath): dq_bf16's groups with an owner search per pair in the loop
};
cudaError_t hstu_fp8_bwd_finish(const HstuFp8BwdFinishParams& p, cudaStream_t stream);

}  // namespace hstu
