// Work lists of the jagged Hopper kernels (the forward's query tiles, the D = 256 backward's key blocks), written
// by hstu_sm90_plan_kernel into a workspace the op allocates (layout hstu_sm90_sched_layout) and read by the kernel
// launched behind it. A unit is a (sequence b, block u) pair with a range [lo, hi) of n = hi - lo inner tiles (the
// forward: KV tiles of query tile u; the backward: the query tiles of key block u's work). Item = two int4: {b, u,
// lo, hi}, {split id or -1, chunk, chunks, first part (grid order, header word 1 = 1: the head)}. Up to a few waves
// the items are sorted by decreasing tile count, CTA x running item x / H of head x % H, so the hardware's in-order
// dispatch is a longest-first list schedule; a unit with more tiles than the planner's cap C is split into k
// balanced chunks of its range: each chunk leaves its fp32 partial (the forward's O, the backward's dK / dV) in parts
// [(first part + chunk) * H + h]; the forward's chunks may sum them together when the list fits on the SMs (header
// word 2), else the last of the k to count itself on counters[split id * H + h] adds the others' and runs the normal
// epilogue (hstu_fwd_sm90_split.cuh; the backward: the latter). Counters end at zero, so a list serves several
// launches. Past that, the units keep the kernel's grid order
// (sched_cta_item).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "common/pdl.cuh"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"

namespace hstu {
namespace sm90 {

struct SchedArgs {
  int* count;  // header: number of items, their kind (sched_cta_item)
  int4* items;  // capacity x H items at most
  int* counters;
  float* parts;
  int capacity;  // units + chunks; the grid has capacity x H CTAs
  int max_parts;
  int lpt_ctas;     // longest-first order only up to this many CTAs (units x H), or when a unit is split
  int heads_inner;  // grid order: the heads of a unit side by side (else each head's units of a sequence in a row)
  float4* zero;     // zeroed by the planner's other CTAs while it plans (the backward's dq workspace), or nullptr
  int64_t zero_n4;
  // Header word 2 = 1 when a longest-first list has at most this many CTAs (items x H): the forward's chunks of a
  // split unit may then sum their partials together (hstu_fwd_sm90_split.cuh). 0: never (the backward).
  int together_ctas;
};

// The item and head of this CTA of a work-list kernel (after its griddepcontrol.wait); false: none. Header word 1
// = 0: CTA x runs item x / H of head x % H (longest-first lists; grid order with the heads side by side); 1: item x,
// its head in the item's word 7 (grid order, a sequence's units of head 0, then of head 1, ...).
__device__ __forceinline__ bool sched_cta_item(const SchedArgs& s, int heads, int& idx, int& h) {
  const int2 hdr = *reinterpret_cast<const int2*>(s.count);
  const int x = static_cast<int>(blockIdx.x);
  if (hdr.y == 0) {
    idx = x / heads;
    h = x - idx * heads;
    return idx < hdr.x;
  }
  idx = x;
  if (x >= hdr.x) return false;
  h = s.items[2 * x + 1].w;
  return true;
}

// The CTA's item {b, u, lo, hi} and head, once the planner's list is complete and visible (griddepcontrol.wait:
// the kernel runs behind the planner); false: none. launch_dependents: then let the next kernel launch (a
// programmatic dependent launch behind this one may start its CTAs; hstu_fwd_sm90_kernel.cuh, pk.pdl).
// kEarly (the bf16 / fp16 forward): the header and the item of either kind in one round trip instead of two (the
// item's slots do not depend on the header: x / H for longest-first lists, x for grid-order ones; all exist, as
// the grid has at most capacity x H CTAs); also the item's split word and the header's "together" word (for
// fwd_split_started without more loads). wait = false: neither the wait nor the launch (the caller does both
// later; only where the list was complete before the kernel before this one started: Sm90PagedKV::pdl = 2).
template <bool kEarly = false>
__device__ __forceinline__ bool sched_cta_work(const SchedArgs& s, int heads, int4& item, int& h,
                                               bool launch_dependents = false, int4* split = nullptr,
                                               int* together = nullptr, bool wait = true) {
  if (wait) {
    accel::griddep_wait();
    if (launch_dependents) accel::griddep_launch_dependents();
  }
  if constexpr (kEarly) {
    const int x = static_cast<int>(blockIdx.x);
    const int4 hdr = *reinterpret_cast<const int4*>(s.count);  // (16-byte header)
    const int4 by_head = s.items[2 * (x / heads)];
    const int4 by_head_split = s.items[2 * (x / heads) + 1];
    const int4 own = s.items[2 * x];
    const int4 own_split = s.items[2 * x + 1];
    *together = hdr.z;
    if (hdr.y == 0) {
      h = x % heads;
      item = by_head;
      *split = by_head_split;
      return x / heads < hdr.x;
    }
    h = own_split.w;
    item = own;
    *split = own_split;
    return x < hdr.x;
  }
  int idx;
  if (!sched_cta_item(s, heads, idx, h)) return false;
  item = s.items[2 * idx];
  return true;
}

constexpr int kPlanThreads = 1024;
constexpr int kPlanBuckets = 4096;  // 4 per thread (block scan)
static_assert(kPlanBuckets == 4 * kPlanThreads, "the bucket scan takes 4 buckets per thread");
// Dynamic shared memory of the planner: the sequences of a round (a thread per sequence) and their units' prefix.
constexpr int kPlanSmem = kPlanThreads * static_cast<int>(sizeof(SeqInfo)) + (kPlanThreads + 1) * 4;

// Exclusive prefix sum of v over the CTA's kPlanThreads threads (all must call it); *total: the sum. Uses s_warp
// (32 ints) and two block barriers.
__device__ __forceinline__ int plan_block_scan(int v, int* s_warp, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int x = v;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, x, off);
    if (lane >= off) x += y;
  }
  if (lane == 31) s_warp[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int t = s_warp[lane];
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, t, off);
      if (lane >= off) t += y;
    }
    s_warp[lane] = t;
  }
  __syncthreads();
  *total = s_warp[31];
  return x - v + (warp > 0 ? s_warp[warp - 1] : 0);
}

// The sequence of a round's unit f: the last of its nb sequences whose units' prefix s_pre is <= f (one with units
// when f is below the round's total).
__device__ __forceinline__ int plan_unit_seq(const int* s_pre, int nb, int f) {
  int lo = 0, hi = nb - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (s_pre[mid] <= f) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Sum (64-bit) and max over the CTA's kPlanThreads threads (all must call it; every thread gets both). Two barriers.
__device__ __forceinline__ void plan_block_sum_max(unsigned long long& w, int& m) {
  __shared__ unsigned long long s_slot[32];
  __shared__ int s_mslot[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    w += __shfl_xor_sync(0xffffffffu, w, off);
    m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  }
  if (lane == 0) {
    s_slot[warp] = w;
    s_mslot[warp] = m;
  }
  __syncthreads();
  w = s_slot[lane];
  m = s_mslot[lane];
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    w += __shfl_xor_sync(0xffffffffu, w, off);
    m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  }
  __syncthreads();  // (the slots are reused)
}

// Initial split cap: ceil(split_pct / 100 * W * H / num_sms) for a work sum w, at least 4 (split_pct = 0: no splits);
// fixed_cap > 0: that many tiles instead (kernel_options(fwd_split_tiles=...), for comparisons; kPlanCapWave: see
// plan_wave_cap).
__device__ __forceinline__ int plan_initial_cap(unsigned long long w, int heads, int num_sms, int split_pct,
                                                int fixed_cap) {
  if (fixed_cap > 0 && split_pct > 0) return fixed_cap;
  const unsigned long long wt = w * static_cast<unsigned long long>(heads);
  const unsigned long long c0 = (wt * static_cast<unsigned long long>(split_pct) + 100ull * num_sms - 1) /
                                (100ull * num_sms);
  return split_pct > 0 ? max(static_cast<int>(min(c0, 1ull << 30)), 4) : (1 << 30);
}

// fixed_cap of the "one wave" rule (kernel_options(fwd_split_tiles="wave")): the smallest cap C >= 2 whose list
// (each unit of n > C tiles as ceil(n / C) chunks) has at most `slots` CTAs (items x H; the SMs), so every chunk
// runs at once and the chunks sum together; searched from C = ceil(tiles x H / slots) up (C / 8 + 1 steps). No such
// C up to the longest unit (more units than the SMs take): the planner's rule.
constexpr int kPlanCapWave = -1;

// The one-wave cap for this thread's unit of n tiles (has_unit) among the CTA's (all threads call it: block
// reductions); `rule`: the cap otherwise.
__device__ __forceinline__ int plan_wave_cap(int n, bool has_unit, int heads, int slots, int maxn, int rule) {
  unsigned long long tiles = has_unit ? static_cast<unsigned long long>(n) : 0ull;
  int unused = 0;
  plan_block_sum_max(tiles, unused);
  const unsigned long long lo = (tiles * heads + slots - 1) / max(slots, 1);
  for (int c = static_cast<int>(max(2ull, min(lo, 1ull << 20))); c <= maxn; c += c / 8 + 1) {
    unsigned long long items = has_unit ? static_cast<unsigned long long>(n > c ? (n + c - 1) / c : 1) : 0ull;
    plan_block_sum_max(items, unused);
    if (items * heads <= static_cast<unsigned long long>(slots)) return c;
  }
  return rule;
}

// Grid order's header (sched_cta_item: the item count and kind), written by thread 0; returns the units listed.
__device__ __forceinline__ int plan_grid_header(const SchedArgs& a, int heads, int units) {
  const bool inner = a.heads_inner != 0;
  const int units_c = min(units, a.capacity);
  if (threadIdx.x == 0) {
    a.count[0] = inner ? units_c : units_c * heads;
    a.count[1] = inner ? 0 : 1;
    a.count[2] = 0;
  }
  return units_c;
}

// Grid order: unit t = {b, u, lo, hi} at position uu of its sequence's nu units, the first of which is unit `first`
// (the heads of a unit side by side, or one head's units of the sequence after the other: sched_cta_item).
__device__ __forceinline__ void plan_grid_item(const SchedArgs& a, int heads, int first, int uu, int nu, int4 t) {
  if (a.heads_inner != 0) {
    a.items[2 * (first + uu)] = t;
    a.items[2 * (first + uu) + 1] = make_int4(-1, 0, 1, 0);
    return;
  }
  for (int hh = 0; hh < heads; ++hh) {
    const int i = first * heads + hh * nu + uu;
    a.items[2 * i] = t;
    a.items[2 * i + 1] = make_int4(-1, 0, 1, hh);
  }
}

// Counts the k = ceil(n / cap) chunks (1 when n <= cap) of `count` units of n tiles into their sizes' buckets.
template <class KeyOf>
__device__ __forceinline__ void plan_count_chunks(int* s_key, KeyOf key_of, int cap, int n, int count) {
  const int k = n > cap ? (n + cap - 1) / cap : 1;
  const int q = n / k, r = n % k;  // r chunks of q + 1 tiles, k - r of q
  if (r > 0) atomicAdd(&s_key[key_of(q + 1)], r * count);
  atomicAdd(&s_key[key_of(q)], (k - r) * count);
}

// Exclusive scan of the first nkeys chunk-size buckets into their offsets (4 per thread; all threads call it), and
// the list's header (the chunk count, longest-first kind). Ends with a barrier: the offsets are visible.
__device__ __forceinline__ void plan_bucket_offsets(const SchedArgs& a, int heads, int* s_key, int nkeys,
                                                    int* s_warp) {
  const int tid = threadIdx.x;
  int v[4], sum = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = 4 * tid + j < nkeys ? s_key[4 * tid + j] : 0;
    sum += v[j];
  }
  int all;
  int base = plan_block_scan(sum, s_warp, &all);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (4 * tid + j < nkeys) s_key[4 * tid + j] = base;
    base += v[j];
  }
  if (tid == 0) {
    a.count[0] = min(all, a.capacity);
    a.count[1] = 0;
    a.count[2] = static_cast<long long>(min(all, a.capacity)) * heads <= a.together_ctas ? 1 : 0;
  }
  __syncthreads();
}

// Longest first: unit t = {b, u, lo, hi} of n = hi - lo tiles as one item (n <= cap) or k = ceil(n / cap) chunks,
// each at the next offset of its size's bucket (s_key, key_of); a split unit takes the next split id (*s_split, its
// counters zeroed) and k partials from *s_part_next.
template <class KeyOf>
__device__ __forceinline__ void plan_scatter_unit(const SchedArgs& a, int heads, int cap, int4 t, int* s_key,
                                                  KeyOf key_of, int* s_split, int* s_part_next) {
  const int n = t.w - t.z;
  if (n <= cap) {
    const int pos = atomicAdd(&s_key[key_of(n)], 1);
    if (pos < a.capacity) {
      a.items[2 * pos] = t;
      a.items[2 * pos + 1] = make_int4(-1, 0, 1, 0);
    }
    return;
  }
  const int k = (n + cap - 1) / cap;
  const int q = n / k, r = n % k;  // r chunks of q + 1 tiles, k - r of q
  const int sid = atomicAdd(s_split, 1);
  const int first = atomicAdd(s_part_next, k);
  for (int hh = 0; hh < heads; ++hh) {  // (the counters of both ways to sum: hstu_fwd_sm90_split.cuh)
    a.counters[sid * heads + hh] = 0;
    a.counters[first * heads + hh] = 0;
    a.counters[(first + 1) * heads + hh] = 0;
  }
  int c_lo = t.z;
  for (int c = 0; c < k; ++c) {
    const int size = q + (c < r ? 1 : 0);
    const int pos = atomicAdd(&s_key[key_of(size)], 1);
    if (pos < a.capacity) {
      a.items[2 * pos] = make_int4(t.x, t.y, c_lo, c_lo + size);
      a.items[2 * pos + 1] = make_int4(sid, c, k, first);
    }
    c_lo += size;
  }
}

// The planner's one-pass path (at most kPlanThreads units, one round; see hstu_sm90_plan_kernel; the only one that
// applies the one-wave rule, kPlanCapWave; the two-pass path takes the planner's rule then): s_seq holds the
// batch's sequences, `pre` this thread's exclusive unit prefix (thread b < B), `total` the units; s_key, *s_split and
// *s_part_next are zeroed. Same cap, splits, chunk ranges and order as the two-pass path (ties among equal chunk
// sizes in another order).
template <class Units>
__device__ __forceinline__ void hstu_sm90_plan_one_pass(const HstuParams& p, const SchedArgs& a, int num_sms,
                                                        int split_pct, int fixed_cap, const SeqInfo* s_seq,
                                                        int* s_pre, int* s_key, int* s_warp, int* s_split,
                                                        int* s_part_next, int pre, int total) {
  const int tid = threadIdx.x;
  const int H = p.heads, nb = p.batch;
  if (tid < nb) s_pre[tid] = pre;
  __syncthreads();
  int4 t = make_int4(0, 0, 0, 0);  // this thread's unit {b, u, lo, hi} (tid < total)
  int n = 0, nu_b = 0;
  if (tid < total) {
    const int lo = plan_unit_seq(s_pre, nb, tid);
    const int u = tid - s_pre[lo];
    int r0, r1;
    Units::range(s_seq[lo], u, r0, r1);
    t = make_int4(lo, u, r0, r1);
    n = r1 - r0;
    nu_b = (lo + 1 < nb ? s_pre[lo + 1] : total) - s_pre[lo];
  }
  unsigned long long w = tid < total ? static_cast<unsigned long long>(n + 1) : 0ull;
  int maxn = n;
  plan_block_sum_max(w, maxn);
  int cap = plan_initial_cap(w, H, num_sms, split_pct, fixed_cap);
  if (fixed_cap == kPlanCapWave && split_pct > 0) cap = plan_wave_cap(n, tid < total, H, num_sms, maxn, cap);
  if (cap >= maxn && static_cast<long long>(total) * H > a.lpt_ctas) {  // grid order
    const int units_c = plan_grid_header(a, H, total);
    const int first = tid - t.y;  // the sequence's first unit
    if (tid < total && first + nu_b <= units_c) {
      plan_grid_item(a, H, first, Units::kHeavyLast ? nu_b - 1 - t.y : t.y, nu_b, t);
    }
    return;
  }
  while (cap < maxn) {  // uniform: every thread sees the same sums
    unsigned long long parts = tid < total && n > cap ? static_cast<unsigned long long>((n + cap - 1) / cap) : 0ull;
    int unused = 0;
    plan_block_sum_max(parts, unused);
    if (static_cast<long long>(parts) * H <= a.max_parts) break;
    cap += cap / 2 + 1;
  }
  const int top = min(cap, maxn);  // largest chunk size
  const int nkeys = min(top, kPlanBuckets - 1) + 1;
  auto key_of = [&](int size) { return min(kPlanBuckets - 1, top - size); };
  if (tid < total) plan_count_chunks(s_key, key_of, cap, n, 1);
  __syncthreads();
  plan_bucket_offsets(a, H, s_key, nkeys, s_warp);
  if (tid < total) plan_scatter_unit(a, H, cap, t, s_key, key_of, s_split, s_part_next);
}

// One CTA of 1024 threads. The units are visited in rounds of up to 1024 sequences: a thread per sequence loads
// its lengths into shared memory and counts its units, then the round's units are spread evenly over the threads
// (unit f of the round belongs to the sequence whose units' prefix holds f: a binary search). Units: count(p, si)
// units of sequence si, range(si, u, lo, hi) the tiles of unit u. Work of a unit = its tiles n; W = H * sum over
// units of (n + 1). Cap C = ceil(split_pct / 100 * W / num_sms) (at least 4; split_pct = 0: no splits), grown by
// 1.5x until the split units' partials fit in max_parts. A unit with n > C becomes k = ceil(n / C) chunks of n / k
// or n / k + 1 tiles. Items are counting-sorted by chunk size (descending). Two passes over the units: (1) the
// histogram of n (everything up to the bucket offsets follows from it when n < 4096), (2) the scatter (split units
// numbered, their counters zeroed). Many units and none split (more than a.lpt_ctas CTAs: many waves, where the L2
// locality of a sequence's tiles matters more than the tail): the kernel's grid order instead, less its empty CTAs
// (sequences in order, each one's units heaviest first: Units::kHeavyLast reverses u), no sort.
// Batches of at most kPlanThreads units take the one-pass path (hstu_sm90_plan_one_pass) instead of the two visits.
template <class Units>
__global__ void __launch_bounds__(kPlanThreads, 1)
    hstu_sm90_plan_kernel(const HstuParams p, const SchedArgs a, const int num_sms, const int split_pct,
                          const int fixed_cap) {
  // The kernel behind it (launched with programmatic stream serialization) may start its CTAs now; they wait for
  // this grid's completion (griddepcontrol.wait) before reading the list.
  accel::griddep_launch_dependents();
  if (blockIdx.x > 0) {  // a zeroing CTA (launch_plan)
    const int64_t step = static_cast<int64_t>(gridDim.x - 1) * kPlanThreads;
    for (int64_t i = static_cast<int64_t>(blockIdx.x - 1) * kPlanThreads + threadIdx.x; i < a.zero_n4; i += step) {
      a.zero[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    return;
  }
  __shared__ int s_key[kPlanBuckets];   // chunk-size buckets (key = largest size - size), then their offsets
  __shared__ int s_hist[kPlanBuckets];  // units with n tiles (n >= kPlanBuckets - 1 in the last)
  __shared__ int s_warp[32];
  extern __shared__ int4 plan_smem[];  // kPlanSmem bytes
  SeqInfo* s_seq = reinterpret_cast<SeqInfo*>(plan_smem);
  int* s_pre = reinterpret_cast<int*>(s_seq + kPlanThreads);
  __shared__ int s_split, s_part_next;
  const int tid = threadIdx.x;
  const int H = p.heads;
  // The one-pass path's sequence loads go out before the shared-memory setup below.
  const bool one_round = p.batch <= kPlanThreads;
  SeqInfo si0{};
  int nu0 = 0;
  if (one_round && tid < p.batch) {
    si0 = seq_info(p, tid);
    nu0 = Units::count(p, si0);
  }
  if (tid == 0) {
    s_split = 0;
    s_part_next = 0;
  }
  for (int i = tid; i < kPlanBuckets; i += kPlanThreads) {
    s_key[i] = 0;
    s_hist[i] = 0;
  }
  __syncthreads();
  // Visits every unit (b, u): f(b, u, lo, hi, index of (b, u) in the sequence-major order, units of b); returns the
  // number of units. Called by all threads (block barriers inside).
  auto for_units = [&](auto&& f) {
    int base = 0;
    for (int b0 = 0; b0 < p.batch; b0 += kPlanThreads) {
      const int nb = min(kPlanThreads, p.batch - b0);
      int nu = 0;
      if (tid < nb) {
        const SeqInfo si = seq_info(p, b0 + tid);
        s_seq[tid] = si;
        nu = Units::count(p, si);
      }
      int total;
      const int pre = plan_block_scan(nu, s_warp, &total);  // (its barriers also publish s_seq)
      if (tid < nb) s_pre[tid] = pre;
      __syncthreads();
      for (int f0 = tid; f0 < total; f0 += kPlanThreads) {
        const int lo = plan_unit_seq(s_pre, nb, f0);
        const int u = f0 - s_pre[lo];
        int r0, r1;
        Units::range(s_seq[lo], u, r0, r1);
        f(b0 + lo, u, r0, r1, base + f0, (lo + 1 < nb ? s_pre[lo + 1] : total) - s_pre[lo]);
      }
      base += total;
      __syncthreads();  // s_seq, s_pre, s_warp are reused by the next round
    }
    return base;
  };
  // One pass for batches of at most kPlanThreads units (one round): thread f keeps unit f in registers from the
  // first visit to its scatter, so the sequences are loaded, scanned and searched once, the work sum takes per-warp
  // slots, and the bucket scan covers the used chunk sizes only (Zipf(1.2) B32 forward: 6.7 -> 5.5 us on the H200;
  // docs/archive/hstu_sm90_log.md).
  if (one_round) {
    if (tid < p.batch) s_seq[tid] = si0;
    int total;
    const int pre = plan_block_scan(nu0, s_warp, &total);  // (its barriers also publish s_seq)
    if (total <= kPlanThreads) {
      hstu_sm90_plan_one_pass<Units>(p, a, num_sms, split_pct, fixed_cap, s_seq, s_pre, s_key, s_warp, &s_split,
                                     &s_part_next, pre, total);
      return;
    }
    __syncthreads();  // (s_warp is reused)
  }
  unsigned long long w = 0;
  int maxn = 0;
  const int units = for_units([&](int, int, int lo, int hi, int, int) {
    const int n = hi - lo;
    w += static_cast<unsigned long long>(n + 1);
    maxn = max(maxn, n);
    atomicAdd(&s_hist[min(n, kPlanBuckets - 1)], 1);
  });
  plan_block_sum_max(w, maxn);  // (its barriers also publish s_hist)
  const bool exact = maxn < kPlanBuckets - 1;  // s_hist holds every n exactly
  int cap = plan_initial_cap(w, H, num_sms, split_pct, fixed_cap);
  if (cap >= maxn && static_cast<long long>(units) * H > a.lpt_ctas) {  // grid order
    const int units_c = plan_grid_header(a, H, units);
    for_units([&](int b, int u, int lo, int hi, int pos, int nu) {
      const int first = pos - u;  // the sequence's first unit
      if (first + nu > units_c) return;
      plan_grid_item(a, H, first, Units::kHeavyLast ? nu - 1 - u : u, nu, make_int4(b, u, lo, hi));
    });
    return;
  }
  while (cap < maxn) {  // uniform: every thread sees the same sum
    unsigned long long parts = 0;
    const int n_last = exact ? maxn : kPlanBuckets - 1;  // (the buckets past maxn are empty)
    for (int n = min(cap + 1, kPlanBuckets - 1) + tid; n <= n_last; n += kPlanThreads) {
      // The last bucket (inexact) counts ceil(maxn / cap) chunks per unit: an upper bound.
      const int nn = n == kPlanBuckets - 1 ? max(n, maxn) : n;
      parts += static_cast<unsigned long long>(s_hist[n]) * ((nn + cap - 1) / cap);
    }
    int unused = 0;
    plan_block_sum_max(parts, unused);
    if (static_cast<long long>(parts) * H <= a.max_parts) break;
    cap += cap / 2 + 1;
  }
  const int top = min(cap, maxn);  // largest chunk size
  auto key_of = [&](int size) { return min(kPlanBuckets - 1, top - size); };
  auto add_chunks = [&](int n, int count) { plan_count_chunks(s_key, key_of, cap, n, count); };
  if (exact) {
    for (int n = tid; n <= maxn; n += kPlanThreads) {
      if (s_hist[n] > 0) add_chunks(n, s_hist[n]);
    }
  } else {
    for_units([&](int, int, int lo, int hi, int, int) { add_chunks(hi - lo, 1); });
  }
  __syncthreads();
  plan_bucket_offsets(a, H, s_key, kPlanBuckets, s_warp);
  for_units([&](int b, int u, int lo, int hi, int, int) {
    plan_scatter_unit(a, H, cap, make_int4(b, u, lo, hi), s_key, key_of, &s_split, &s_part_next);
  });
}

// Longest-first lists up to this many waves of CTAs (unless a unit is split): the B32 Zipf batches (3-5 waves)
// gain from the order, batches of B64-B512 (8 waves and more) lost 2-45 % (forward) and 30-120 % (backward) to it
// (the L2 locality of a sequence's tiles; docs/archive/hstu_sm90_log.md).
constexpr int kListLptWaves = 8;

// The work-list arguments over the op's workspace `ws` (layout l).
inline SchedArgs sched_args(void* ws, const Sm90SchedLayout& l, int num_sms) {
  char* w = static_cast<char*>(ws);
  SchedArgs a{};
  a.count = reinterpret_cast<int*>(w);
  a.items = reinterpret_cast<int4*>(w + l.items);
  a.counters = reinterpret_cast<int*>(w + l.counters);
  a.parts = reinterpret_cast<float*>(w + l.parts);
  a.capacity = static_cast<int>(l.capacity);
  a.max_parts = static_cast<int>(l.max_parts);
  a.lpt_ctas = kListLptWaves * num_sms;
  return a;
}

// Launches a work-list kernel (ctas = capacity x H) behind the planner: with programmatic stream serialization
// its CTAs start while the planner runs and wait for it in-kernel (griddepcontrol.wait).
template <typename... Params, typename... Args>
cudaError_t launch_behind_plan(void (*kernel)(Params...), int64_t ctas, int threads, int smem, cudaStream_t stream,
                               Args&&... args) {
  return accel::launch_pdl(kernel, dim3(static_cast<unsigned>(ctas)), threads, smem, stream, true,
                           std::forward<Args>(args)...);
}

// Launches the planner on `stream` (a CTA with kPlanSmem bytes of dynamic shared memory; with a.zero, up to
// num_sms - 1 more that zero a.zero meanwhile, 16 float4 per thread or more).
template <class Units>
cudaError_t launch_plan(const HstuParams& p, const SchedArgs& a, int num_sms, int split_pct, cudaStream_t stream,
                        int fixed_cap = 0) {
  constexpr auto kernel = hstu_sm90_plan_kernel<Units>;
  const cudaError_t err = set_max_dynamic_smem<kernel>(kPlanSmem);
  if (err != cudaSuccess) return err;
  const int64_t want = a.zero != nullptr ? (a.zero_n4 + 16 * kPlanThreads - 1) / (16 * kPlanThreads) : 0;
  const int zero_ctas = static_cast<int>(std::min<int64_t>(want, std::max(1, num_sms - 1)));
  kernel<<<1 + zero_ctas, kPlanThreads, kPlanSmem, stream>>>(p, a, num_sms, split_pct, fixed_cap);
  return cudaGetLastError();
}

}  // namespace sm90
}  // namespace hstu
