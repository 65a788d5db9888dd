// Plain parameter struct shared by the HSTU attention kernels and their launchers (no torch headers).
//
// Layout conventions: q, k, v, out, dout, dq, dk, dv are (total_tokens, H, D) with the last dim contiguous; the
// row (token) and head strides are given in elements. cu_seqlens_* are (B + 1) int32 prefix sums. Rows of batch b
// live in [cu_seqlens[b], cu_seqlens[b + 1]); seqused_* (B), when given, says how many of them take part.
// rab is (B, 1 or H, max_seqlen_k, max_seqlen_k), indexed by (absolute query position, key position), where the
// absolute query position of query row i is i + (Lk - Lq) (delta-q: the queries are the last Lq positions).
#pragma once

#include <cstdint>

namespace hstu {

struct HstuParams {
  // Inputs.
  const void* q;  // (total_q, H, D)
  const void* k;  // (total_k, H, D)
  const void* v;  // (total_k, H, D)
  int64_t q_row_stride, q_head_stride;
  int64_t k_row_stride, k_head_stride;
  int64_t v_row_stride, v_head_stride;

  const int32_t* cu_seqlens_q;  // (B + 1)
  const int32_t* cu_seqlens_k;  // (B + 1)
  const int32_t* seqused_q;     // (B) or nullptr
  const int32_t* seqused_k;     // (B) or nullptr
  const int32_t* num_contexts;  // (B) or nullptr
  const int32_t* num_targets;   // (B) or nullptr

  int batch;
  int heads;
  int head_dim;
  int max_seqlen_q;
  int max_seqlen_k;
  int target_group_size;  // >= 1
  int window_left;        // -1: unlimited
  int window_right;       // -1: unlimited; causal is (-1, 0)
  float alpha;
  float inv_scaling;  // 1 / scaling_seqlen

  const void* rab;  // (B, 1 or H, max_seqlen_k, max_seqlen_k) or nullptr
  int64_t rab_batch_stride, rab_head_stride, rab_row_stride;  // rab_head_stride == 0: shared by all heads

  // Forward output.
  void* out;  // (total_q, H, D)
  int64_t o_row_stride, o_head_stride;
  // Hopper forward only: workspace of the jagged work list (hstu_fwd_sm90_sched_layout in
  // sm90/hstu_sm90_launch.h; any contents, the forward initializes what it uses), or nullptr: grid order.
  void* fwd_sched;
  int64_t fwd_sched_bytes;
  // Hopper forward only: one int of any contents (the launcher zeroes it), the tile counter of the persistent
  // grid-order kernel (sm90/hstu_fwd_sm90_kernel.cuh), or nullptr: one CTA per query tile.
  int* fwd_tile_counter;
  // Hopper forward work list only (hstu_sm90_plan_kernel's cap): 0 = the planner's rule, -1 = no unit split, -2 = the
  // smallest cap whose list fits the SMs at once (plan_wave_cap), n > 0 = chunks of at most n KV tiles (for
  // comparisons: kernel_options(fwd_split_tiles=...)).
  int fwd_split_tiles;
  // sm80-class forward: one of issue 39's candidate tile configurations (FwdSm80Candidate in
  // hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh, 1-4, bf16, where the head dim has it); 0 = the default.
  int fwd_sm80_cfg;

  // Backward.
  const void* dout;  // (total_q, H, D)
  int64_t do_row_stride, do_head_stride;
  void* dq;  // (total_q, H, D)
  void* dk;  // (total_k, H, D)
  void* dv;  // (total_k, H, D)
  int64_t dq_row_stride, dq_head_stride;
  int64_t dk_row_stride, dk_head_stride;
  int64_t dv_row_stride, dv_head_stride;
  // (total_q, H, D) fp32, zero-initialized workspace; nullptr: deterministic (separate dQ kernel). The Hopper
  // backward's size and layout: hstu_bwd_sm90_dq_accum_floats (sm90/hstu_sm90_launch.h; tiled at D = 256).
  float* dq_accum;
  // Hopper D = 64 / 128 backward only (hstu_bwd_sm90_dq_zero_words in sm90/hstu_sm90_launch.h): when set,
  // dq_accum is NOT zeroed by the caller; these (uninitialized) words are the zeroing flags of its 128-row chunks,
  // and the backward zeroes the workspace itself (the launcher the first group's rows, every CTA later ones).
  uint32_t* dq_zero_flags;
  // With dq_zero_flags, the Hopper D = 128 causal / local backward: 1 = its CTAs convert the workspace into dq two
  // groups behind (hstu_bwd_sm90_kernel.cuh, bwd_dq_convert_behind), 0 = a separate conversion pass afterwards.
  int dq_conv_behind;
  int64_t total_q;
  // Grid of the Hopper D = 256 backward: 0 = its launcher decides (hstu_bwd_sm90_heads_first),
  // 1 = (key block, head, batch), 2 = (head, key block, batch): each batch's key block 0 of every head first, then
  // block 1, ... (under a causal mask the longest works first). Jagged lengths (no rab) run on a work list instead
  // when the op gives bwd_sched (at the end of the struct).
  int bwd_grid;
  // sm80-class backward D = 256: the warp-pair kernel (BwdSm80PairConfig: one pass over D, S and dP summed by warp
  // pairs) with up to this many Q / dO stages where its shared memory fits the device (2 or 1); 0 = the two column
  // chunks (BwdSm80Config).
  int bwd_sm80_pair;
  // sm80-class backward: kernel_options(bwd_sm80_cfg=n), a comparison kernel where it applies (kBwdSm80*Cfg in
  // hstu/csrc/sm80/hstu_bwd_sm80_kernel.cuh); 0 = the default.
  int bwd_sm80_cfg;

  // drab (only when has_drab): per-head rab gets its gradient written directly into `drab` (dtype of q);
  // a shared rab (one head) is accumulated over heads with fp32 atomics into `drab_accum`, then converted.
  void* drab;         // (B, 1 or H, max_seqlen_k, max_seqlen_k), zero-initialized, or nullptr
  float* drab_accum;  // same shape, fp32, zero-initialized; only for a shared rab
  int64_t drab_batch_stride, drab_head_stride, drab_row_stride;
  int64_t drab_numel;
  // Deterministic mode with a shared rab and H > 1: per-head fp32 slices (B, H, R, C) (row stride
  // drab_row_stride), zero-initialized, written without atomics and summed over heads in order into drab.
  float* drab_heads;  // or nullptr
  int64_t drab_heads_batch_stride, drab_heads_head_stride;

  // Hopper D = 256 backward only: workspace of the jagged work list (hstu_bwd_sm90_sched_layout in
  // sm90/hstu_sm90_launch.h; any contents, the planner initializes what it uses), or nullptr: the grid. When set,
  // dq_accum is uninitialized (the launcher zeroes it).
  void* bwd_sched;
  int64_t bwd_sched_bytes;

  // Mask convention (last, so the other fields keep their offsets): 0 = NVIDIA's (hstu_mask "nvidia"), 1 = Meta
  // GR's ("meta_gr": local-window distances with the num_contexts positions collapsed into one; SeqMask).
  int mask_gr;
};

}  // namespace hstu
