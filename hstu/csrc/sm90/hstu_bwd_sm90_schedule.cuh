// Hopper HSTU backward: which work a CTA does. The kSkipWg kernel's longest-first 1-D grid (groups of (batch, head)
// pairs), the split-D kernel's grid orders, and the units of its jagged work list (hstu_sm90_work_list.cuh).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"

namespace hstu {
namespace sm90 {

// The kSkipWg kernel's 1-D grid (kLpt): groups of gp (batch, head) pairs, about one wave of CTAs each (so that a
// group's Q / dO stay in L2: 16 pairs at S = 1K, 1 at S >= 16K); inside a group key block 0 of every pair, then
// block 1, ... (host twin: hstu_bwd_sm90_lpt_pairs).
template <int BN, int kLptPairs, int kLptCtas>
__device__ __forceinline__ int bwd_lpt_group_pairs(const HstuParams& p) {
  return max(1, min(kLptPairs, kLptCtas / ((p.max_seqlen_k + BN - 1) / BN)));
}
// CTA lin of that grid -> its (batch, head) pair (b * H + h) and key block.
template <int BN, int kLptPairs, int kLptCtas>
__device__ __forceinline__ void bwd_lpt_decode(const HstuParams& p, int lin, int& pair, int& n_block) {
  const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
  const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
  const int g = lin / (gp * nblk_k);
  const int gpairs = min(gp, p.batch * p.heads - g * gp);
  const int r = lin - g * gp * nblk_k;
  pair = g * gp + r % gpairs;
  n_block = r / gpairs;
}

// The split-D kernel's grids (kGrid): the (key block, head, batch) grid, the (head, key block, batch) one
// (hstu_bwd_sm90_heads_first), or the jagged work list (hstu_sm90_work_list.cuh, BwdPlanUnits; the CTA's item and head:
// sched_cta_item).
constexpr int kBwdGridKHB = 0;
constexpr int kBwdGridHKB = 1;
constexpr int kBwdGridList = 2;
// Key block, head and batch of the CTA. The split-D kernel re-reads them where it uses them (not kept live through
// its loops): from %ctaid, or (work list) from the words its prologue parked in shared memory at `park`.
template <int kAxis>  // %ctaid.x / y / z
__device__ __forceinline__ uint32_t ctaid_reg() {
  uint32_t v;
  if constexpr (kAxis == 0) {
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  } else if constexpr (kAxis == 1) {
    asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(v));
  } else {
    asm volatile("mov.u32 %0, %%ctaid.z;\n" : "=r"(v));
  }
  return v;
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_key_block(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park);
  return ctaid_reg<kGrid == kBwdGridHKB ? 1 : 0>();
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_head(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park + 4);
  return ctaid_reg<kGrid == kBwdGridHKB ? 0 : 1>();
}
template <int kGrid>
__device__ __forceinline__ uint32_t bwd_cta_batch(uint32_t park) {
  if constexpr (kGrid == kBwdGridList) return ld_shared_u32(park + 8);
  return ctaid_reg<2>();
}

// The D = 256 backward's work-list units (hstu_sm90_work_list.cuh): key blocks of 64 keys, their work's query tiles (the
// no-rab kernel's, gaps skipped).
struct BwdPlanUnits {
  static constexpr bool kHeavyLast = false;  // (causal: key block 0 sees the most queries)
  static __device__ __forceinline__ int count(const HstuParams& p, const SeqInfo& si) {
    return min((p.max_seqlen_k + 63) / 64, (si.lk_alloc + 63) / 64);
  }
  static __device__ __forceinline__ void range(const SeqInfo& si, int u, int& lo, int& hi) {
    int mb_begin, n_a, gap;
    lo = 0;
    bwd_work_tiles<64, 64, true>(si, u * 64, mb_begin, n_a, gap, hi);
  }
};

}  // namespace sm90
}  // namespace hstu
