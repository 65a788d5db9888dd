// The Hopper forward's split query tiles (work list, hstu_sm90_work_list.cuh): a unit whose KV range was cut into
// k chunks leaves k fp32 partials of its BM x D output tile; their sum is the tile's accumulator.
//
// Two ways to sum them, both adding the partials in chunk order 0, 1, ..., k - 1 from 0.0f for every element (so
// the output is deterministic, and the same bits either way):
// - together: every chunk stores its partial, arrives on the unit's counter and waits until all k have; then
//   chunk c sums the c-th k-th of the tile's elements over the k partials and stores those outputs itself. The
//   critical path reads one partial's bytes (spread over k SMs) instead of k partials on one SM.
// - alone: the last chunk to arrive sums every partial and goes on to the normal epilogue; the others are done.
// Together only where the planner allows it (header word 2 = 1: every listed CTA fits on the SMs at once, so no
// item waits for an SM a waiting chunk holds) and, per unit, only when all k chunks had started when the first of
// them finished (the first to finish decides for the unit): a chunk then waits only for CTAs that are running and
// wait for nothing, so no wait can deadlock, whatever else runs on the GPU (other streams' kernels included).
// Counters (two words per unit and head, at the unit's first two parts): word 0 = started (low 16 bits) and
// finished (high 16 bits); word 1 = the decision (low 2 bits: 0 undecided, 1 alone, 2 together) and departures
// (high 16 bits). Both end at zero (the last to depart resets them), and so does the plain per-split counter of
// the alone-only path, so a work list serves several launches (one plan for all layers of an inference step,
// hstu_attn::paged_fwd_sm90 with a plan).
#pragma once

#include <cstdint>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_paged.h"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"

namespace hstu {
namespace sm90 {

// Diagnostics (pk.trace: kernel_options(fwd_trace=True)): value v into slot `slot` of this CTA's trace row; the
// stamps are %globaltimer (ns) unless noted (hstu_fwd_sm90_paged.h; the work-list kernel at D <= 128 only).
__device__ __forceinline__ uint64_t fwd_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ void fwd_trace_put(unsigned long long* trace, int slot, uint64_t v) {
  if (trace != nullptr && blockIdx.x < kFwdTraceCtas) trace[blockIdx.x * kFwdTraceSlots + slot] = v;
}

// A chunk leaves its unit's counters (ctid 0, where the planner allows summing together; every chunk exactly once,
// after its last access to them): the last of the k to depart resets both words for the next launch over this list.
// Called after the chunk's sum, off the path to its outputs (the departures only serve the reset: the sum reads the
// partials, which nothing resets or rewrites within this launch). Safe: each chunk's arrival, decision read and polls
// precede its departure in program order (the polls are acquire loads, so later operations are not reordered before
// them), so when the last departs no chunk of this launch reads or writes the words again; the next launch over the
// list touches them only after its griddepcontrol.wait, i.e. after this grid completed.
__device__ __forceinline__ void fwd_split_depart(const SchedArgs& sched, int heads, int h, int first_part, int k) {
  int* w0 = sched.counters + static_cast<int64_t>(first_part) * heads + h;
  int* w1 = sched.counters + static_cast<int64_t>(first_part + 1) * heads + h;
  if ((atomicAdd(w1, 1 << 16) >> 16) == k - 1) {
    *w0 = 0;
    *w1 = 0;
  }
}

// A chunk of a split unit counts itself as started (thread 0, at the CTA's start, once its item is known and before
// it finishes: hstu_fwd_sm90_kernel; sp its item's split word, together the list header's word 2), where the
// planner allows summing together.
__device__ __forceinline__ void fwd_split_started(const SchedArgs& sched, int heads, int h, int4 sp, int together) {
  if (together != 0 && sp.x >= 0) atomicAdd(sched.counters + static_cast<int64_t>(sp.w) * heads + h, 1);
}

// The together path's sum and stores: thread ctid takes float4 elements i0 + 256 e (e < E) of [e0, e1) per pass and
// issues the loads of KB partials for all of them before adding any, so one pass costs ceil(k / KB) dependent L2
// round trips (the plain loop kept ~8 loads in flight: 5 round trips at k = 9). Bitwise the same as a plain loop:
// every element is still summed from 0.0f in chunk order 0, 1, ..., k - 1 (batches in order, partials in order
// within a batch); only when the loads are issued changes. float4 (j, t) holds columns 8 j + 2 (lane % 4) + {0, 1}
// of rows r and r + 8, r = 64 (t / 128) + 16 (t % 128 / 32) + (t % 32) / 4; rows past the sequence are not stored.
template <typename T, int E, int KB>
__device__ __forceinline__ void fwd_split_sum_together(const float4* base, int64_t part_stride, int k, int e0, int e1,
                                                       int ctid, T* og, int64_t o_row_stride, int rows, float sc) {
  for (int i0 = e0 + ctid; i0 < e1; i0 += 256 * E) {
    float4 sum[E];
#pragma unroll
    for (int e = 0; e < E; ++e) sum[e] = make_float4(0.f, 0.f, 0.f, 0.f);
    // Unpredicated loads: predicated ones were interleaved with their adds by ptxas (a round trip every ~5 loads;
    // 7 predicate registers), these issue all 16 before the first add (SASS checked). An element past e1 reads
    // element e1 - 1 (summed, never stored); a partial past k - 1 reads partial k - 1 again (not added).
    int ie[E];
#pragma unroll
    for (int e = 0; e < E; ++e) ie[e] = min(i0 + e * 256, e1 - 1);
    for (int c0 = 0; c0 < k; c0 += KB) {
      float4 v[KB][E];
#pragma unroll
      for (int b = 0; b < KB; ++b) {
        const float4* src = base + min(c0 + b, k - 1) * part_stride;
#pragma unroll
        for (int e = 0; e < E; ++e) v[b][e] = __ldcg(src + ie[e]);
      }
#pragma unroll
      for (int b = 0; b < KB; ++b) {
        if (c0 + b < k) {
#pragma unroll
          for (int e = 0; e < E; ++e) {
            sum[e].x += v[b][e].x;
            sum[e].y += v[b][e].y;
            sum[e].z += v[b][e].z;
            sum[e].w += v[b][e].w;
          }
        }
      }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = i0 + e * 256;
      if (i >= e1) continue;
      const int j = i / 256, t = i % 256;
      const int r = 64 * (t / 128) + 16 * ((t % 128) / 32) + (t % 32) / 4;
      const int col = 8 * j + 2 * (t % 4);
      if (r < rows) {
        *reinterpret_cast<uint32_t*>(og + static_cast<int64_t>(r) * o_row_stride + col) =
            pack2<T>(sum[e].x * sc, sum[e].y * sc);
      }
      if (r + 8 < rows) {
        *reinterpret_cast<uint32_t*>(og + static_cast<int64_t>(r + 8) * o_row_stride + col) =
            pack2<T>(sum[e].z * sc, sum[e].w * sc);
      }
    }
  }
}

// Called by the 256 consumer threads (ctid) of a work-list CTA after its main loop, acc_o its chunk's (or whole
// unit's) accumulator in the wgmma layout (thread ctid holds float4 j of rows 64 wg + 16 warp + lane / 4 (+ 8) at
// columns 8 j + 2 (lane % 4) (+ 1)). Returns true when the CTA goes on to the normal epilogue with acc_o the unit's
// sum (an unsplit item, or the last chunk summing alone); false when it is done (the tile's outputs stored by the
// chunks together, or another chunk sums). `flag`: a free shared word. si, m0, h: the tile's sequence, first row
// and head; sc: the output scale. quick: the together path's quick arrival (below).
template <typename T, int BM, int D>
__device__ __forceinline__ bool fwd_split_reduce(const SchedArgs& sched, const HstuParams& p, int h, int ctid,
                                                 uint32_t flag, const SeqInfo& si, int m0, float (&acc_o)[D / 2],
                                                 unsigned long long* trace = nullptr, bool quick = false) {
  static_assert(BM == 128, "two consumer warpgroups of 64 rows");
  int idx, hh;
  sched_cta_item(sched, p.heads, idx, hh);
  const int4 sp = sched.items[2 * idx + 1];  // {split id, chunk, chunks, first part}
  if (sp.x < 0) return true;
  constexpr int kPartF4 = BM * D / 4;  // float4 per partial: (D / 8) x 256 consumer threads
  float4* parts = reinterpret_cast<float4*>(sched.parts);
  float4* own = parts + static_cast<int64_t>((sp.w + sp.y) * p.heads + h) * kPartF4;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    __stcg(own + j * 256 + ctid, make_float4(acc_o[4 * j], acc_o[4 * j + 1], acc_o[4 * j + 2], acc_o[4 * j + 3]));
  }
  // Memory order without a full fence per thread: the barrier orders every consumer thread's partial stores before
  // ctid 0's arrival, whose release (atom.acq_rel.gpu) publishes them at GPU scope (release is cumulative over
  // what precedes it in causality order, barriers included: the pattern of cooperative groups' grid sync). A
  // reader acquires on its own arrival (the last to arrive, through the chain of read-modify-writes on the
  // counter) or on its polls of the finished count (ld.acquire.gpu), then the barrier below passes that order to
  // its other threads before they load the partials. Before: __threadfence() (fence.sc) in all 256 threads, twice.
  named_barrier_sync(6, 256);
  if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 11, fwd_now());
  const int k = sp.z;
  const bool together_ok = sched.count[2] != 0;
  if (ctid == 0) {
    uint32_t mode;  // 0: done, 1: sum alone (then the epilogue), 2: together
    if (!together_ok) {
      int* counter = sched.counters + sp.x * p.heads + h;
      const int old = atom_add_acq_rel_gpu(counter, 1);
      if (old == k - 1) *counter = 0;  // the last user: back to zero for the next launch over this list
      mode = old == k - 1 ? 1u : 0u;
    } else if (quick) {
      // Quick arrival: the decision word is read with the arrival (relaxed, before it: once set it holds until
      // the last departure, which follows this chunk's own), the first to finish takes its own decision without
      // reading it back, and the last to finish (its arrival acquires every other's release through the counter's
      // chain of read-modify-writes) polls nothing: one round trip after the partial's stores where the plain path
      // takes three. The others poll the finished count without sleeping (every chunk is running).
      int* w0 = sched.counters + static_cast<int64_t>(sp.w) * p.heads + h;
      int* w1 = sched.counters + static_cast<int64_t>(sp.w + 1) * p.heads + h;
      int d = ld_relaxed_gpu(w1) & 3;
      const int v = atom_add_acq_rel_gpu(w0, 1 << 16);
      const int fin = v >> 16;  // chunks finished before this one
      if (fin == 0) {
        d = (v & 0xffff) == k ? 2 : 1;  // the first to finish decides
        atomicOr(w1, d);
      }
      while (d == 0) d = ld_acquire_gpu(w1) & 3;  // (the first to finish sets it right away)
      if (d == 2 && fin < k - 1) {
        while ((ld_acquire_gpu(w0) >> 16) < k) {
        }
      }
      mode = d == 2 ? 2u : fin == k - 1 ? 1u : 0u;
    } else {
      int* w0 = sched.counters + static_cast<int64_t>(sp.w) * p.heads + h;
      int* w1 = sched.counters + static_cast<int64_t>(sp.w + 1) * p.heads + h;
      const int v = atom_add_acq_rel_gpu(w0, 1 << 16);
      if ((v >> 16) == 0) atomicOr(w1, (v & 0xffff) == k ? 2 : 1);  // the first to finish decides
      int d;
      while ((d = ld_acquire_gpu(w1) & 3) == 0) __nanosleep(32);  // (the first to finish sets it right away)
      if (d == 2) {
        while ((ld_acquire_gpu(w0) >> 16) < k) __nanosleep(64);  // every chunk is running: all will arrive
      }
      mode = d == 2 ? 2u : (v >> 16) == k - 1 ? 1u : 0u;
    }
    st_shared_u32(flag, mode);
    if (trace != nullptr) fwd_trace_put(trace, 12, fwd_now() | (static_cast<uint64_t>(mode) << 62));
  }
  named_barrier_sync(6, 256);
  const uint32_t mode = ld_shared_u32(flag);
  if (mode == 0) {
    if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 14, fwd_now());
    if (together_ok && ctid == 0) fwd_split_depart(sched, p.heads, h, sp.w, k);
    return false;
  }
  if (mode == 1) {
    // float4 groups in flight per partial: all of a row's (one L2 round trip per chunk) up to D = 128
    constexpr int G = D <= 128 ? D / 8 : 8;
#pragma unroll
    for (int j0 = 0; j0 < D / 8; j0 += G) {
      float4 sum[G];
#pragma unroll
      for (int g = 0; g < G; ++g) sum[g] = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int c = 0; c < k; ++c) {
        const float4* src = parts + static_cast<int64_t>((sp.w + c) * p.heads + h) * kPartF4 + ctid;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float4 v = __ldcg(src + (j0 + g) * 256);
          sum[g].x += v.x;
          sum[g].y += v.y;
          sum[g].z += v.z;
          sum[g].w += v.w;
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        acc_o[4 * (j0 + g)] = sum[g].x;
        acc_o[4 * (j0 + g) + 1] = sum[g].y;
        acc_o[4 * (j0 + g) + 2] = sum[g].z;
        acc_o[4 * (j0 + g) + 3] = sum[g].w;
      }
    }
    if (ctid == 0 && trace != nullptr) fwd_trace_put(trace, 13, fwd_now());
    if (together_ok && ctid == 0) fwd_split_depart(sched, p.heads, h, sp.w, k);
    return true;
  }
  // Chunk c sums float4 elements [e0, e1) of the partials' layout (index i = j * 256 + thread) and stores their
  // outputs (fwd_split_sum_together).
  const int e0 = static_cast<int>(static_cast<int64_t>(kPartF4) * sp.y / k);
  const int e1 = static_cast<int>(static_cast<int64_t>(kPartF4) * (sp.y + 1) / k);
  const float4* base = parts + static_cast<int64_t>(sp.w) * p.heads * kPartF4 + static_cast<int64_t>(h) * kPartF4;
  const int64_t part_stride = static_cast<int64_t>(p.heads) * kPartF4;
  const float sc = p.inv_scaling;
  const int rows = si.lq_alloc - m0;
  T* og = static_cast<T*>(p.out) + static_cast<int64_t>(si.q_start + m0) * p.o_row_stride +
          static_cast<int64_t>(h) * p.o_head_stride;
  // Loads in flight per thread: 16 float4 (8 at D = 256); 32 made ptxas spill. k = 9 (the NVIDIA batch-1 rule's
  // 33-tile units): 18, all 9 partials in one batch (in batches of 8 the second re-read the 9th partial 8 times:
  // 32 loads, 2 round trips). The plain loop's 8 (kPerPass 4 over 2 partials) is kept as the floor at k <= 2.
  if constexpr (D > 128) {
    if (k <= 2) {
      fwd_split_sum_together<T, 4, 2>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
    } else {
      fwd_split_sum_together<T, 2, 4>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
    }
  } else if (k <= 2) {
    fwd_split_sum_together<T, 8, 2>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
  } else if (k <= 4) {
    fwd_split_sum_together<T, 4, 4>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
  } else if (k == 9) {
    fwd_split_sum_together<T, 2, 9>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
  } else {
    fwd_split_sum_together<T, 2, 8>(base, part_stride, k, e0, e1, ctid, og, p.o_row_stride, rows, sc);
  }
  if (ctid == 0 && trace != nullptr) {
    fwd_trace_put(trace, 13, fwd_now());
    fwd_trace_put(trace, 14, fwd_now());
  }
  if (ctid == 0) fwd_split_depart(sched, p.heads, h, sp.w, k);
  return false;
}

}  // namespace sm90
}  // namespace hstu
