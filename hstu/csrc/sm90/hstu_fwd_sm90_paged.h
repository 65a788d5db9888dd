// Paged K/V for the Hopper forward (inference, hstu_attn_paged_func): host-side declarations, no torch headers.
//
// Key position j of sequence b is, for j < cached_lens[b], row j % page_size of page
// page_ids[page_offsets[b] + j / page_size] of `pool` (K at [page][0], V at [page][1]); else the new token
// q_start + j - cached_lens[b] of p.k / p.v (the step's new tokens, total_q rows like q). cu_seqlens_k holds the
// cached + new lengths. The producer warpgroup copies such tiles with cp.async into the layout TMA writes, so the
// consumers and every mask are those of the contiguous forward (hstu_fwd_sm90_kernel.cuh).
//
// The paged launcher is reached through a table filled by the forward's instance files (one slot per dtype x head
// dim; hstu_fwd_sm90_launch.cuh registers the slot of each run_hstu_fwd_sm90 it instantiates), so the shared
// instance template and the backward units stay as they are. An empty slot: not compiled (no sm_90a device code).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

struct Sm90PagedKV {
  const void* pool = nullptr;                // (num_pages, 2, page_size, H, D) contiguous, q's dtype
  const int32_t* page_offsets = nullptr;     // (B + 1) into page_ids
  const int32_t* page_ids = nullptr;         // (n_entries)
  const int32_t* cached_lens = nullptr;      // (B) cached tokens per sequence (<= its key length)
  int n_entries = 0;                         // length of page_ids (>= 1)
  int num_pages = 0;                         // pages of pool (>= 1)
  int page_shift = 0;                        // page_size = 1 << page_shift
  int box_shift = 0;                         // set by the launcher: TMA box rows = 1 << box_shift (<= the tile)
  // A plan made before (paged_plan_sm90): p.fwd_sched holds its work list (or none: grid order) and p's int32
  // vectors its validated copies; the planner does not run again and `status` is the validation's status word
  // (after a violation every CTA fills out with NaN). 0 / nullptr: the launcher plans (the op validated).
  int planned = 0;
  const int32_t* status = nullptr;
  // 1: launched with programmatic stream serialization (kernel_options(pdl=True)): each CTA starts (and at
  // D <= 128 prefetches its tensor maps, kernel arguments only) while the previous kernel on the stream still runs,
  // waits for it (griddepcontrol.wait) before its first global read, then lets the next kernel launch. 2 (a
  // serving step's layer whose plan an earlier layer's launch waited for; D <= 128): the work item and the
  // sequence's lengths read before the wait.
  int pdl = 0;
  // 1: a split unit's chunks that sum together arrive in one round trip where they can (fwd_split_reduce's quick
  // arrival; hstu/csrc/ops/hstu_plan.h kOptPagedSplitArrive, set by KVCacheManager's serving step by default).
  int split_arrive = 0;
  // Diagnostics (kernel_options(fwd_trace=True)): the work-list CTAs write %globaltimer at their phases into
  // trace[blockIdx.x * kFwdTraceSlots + slot] (CTAs below kFwdTraceCtas; hstu_fwd_sm90_kernel.cuh fwd_stamp), read
  // back by hstu_attn::paged_fwd_trace. nullptr: nothing is written.
  unsigned long long* trace = nullptr;
};

constexpr int kFwdTraceSlots = 32;
constexpr int kFwdTraceCtas = 2048;

// Forward on `stream` with K/V as `pk` says (requirements of run_hstu_fwd_sm90; p.k / p.v the new tokens, total_q
// rows; no rab). Persistent CTAs do not apply; the work list does where the plan gave its workspace.
using PagedFwdSm90Fn = cudaError_t (*)(const HstuParams& p, const Sm90PagedKV& pk, cudaStream_t stream);

// Only the work list of that forward (the planner kernel) into p.fwd_sched, for launches with pk.planned (one plan
// for every layer of an inference step); nothing when p.fwd_sched is null (grid order).
using PagedPlanSm90Fn = cudaError_t (*)(const HstuParams& p, cudaStream_t stream);

// The slot of (dtype, D): half = fp16 (else bf16), D in {64, 128, 256}; nullptr for other D.
inline PagedFwdSm90Fn* paged_fwd_sm90_slot(bool half, int head_dim) {
  static PagedFwdSm90Fn table[2][3] = {};
  const int di = head_dim == 64 ? 0 : head_dim == 128 ? 1 : head_dim == 256 ? 2 : -1;
  return di < 0 ? nullptr : &table[half ? 1 : 0][di];
}
inline PagedPlanSm90Fn* paged_plan_sm90_slot(bool half, int head_dim) {
  static PagedPlanSm90Fn table[2][3] = {};
  const int di = head_dim == 64 ? 0 : head_dim == 128 ? 1 : head_dim == 256 ? 2 : -1;
  return di < 0 ? nullptr : &table[half ? 1 : 0][di];
}

}  // namespace hstu
