// The paged forward's step plan in one block (hstu_paged_step_plan.h says what and why).
#include "hstu/csrc/paged/hstu_paged_step_plan.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#ifndef ACCEL_NO_DEVICE_CODE
#include "hstu/csrc/common/hstu_launch.h"
#include "hstu/csrc/common/hstu_validate_block.cuh"
#include "hstu/csrc/sm90/hstu_fwd_sm90_launch.cuh"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"
#endif

namespace hstu {

#ifdef ACCEL_NO_DEVICE_CODE
cudaError_t hstu_paged_step_plan(const HstuValidateParams&, const HstuParams&, bool, bool, cudaStream_t) {
  return cudaErrorNotSupported;
}
#else
namespace sm90 {
namespace {

// Sum and max over warp 0's lanes (every lane gets both).
__device__ __forceinline__ void warp_sum_max(unsigned long long& w, int& m) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    w += __shfl_xor_sync(0xffffffffu, w, off);
    m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  }
}

// hstu_sm90_plan_one_pass's list made by warp 0 alone, for at most 32 units (launch_step_plan's bound) and a cap
// other than kPlanCapWave: the same cap, chunks and bucket order from warp shuffles instead of the block's
// barriers (ties among equal chunk sizes in another order, as between the planner's two paths). Lane b < batch
// holds sequence b (si, nu: its units, 0 after a violation); s_key, *s_split, *s_part_next are zeroed.
template <class Units>
__device__ __forceinline__ void plan_one_warp(const HstuParams& p, const SchedArgs& a, int num_sms, int split_pct,
                                              int fixed_cap, SeqInfo* s_seq, int* s_key, int* s_split,
                                              int* s_part_next, const SeqInfo& si, int nu) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x, H = p.heads, nb = p.batch;
  if (lane < nb) s_seq[lane] = si;
  int x = nu;  // inclusive prefix of the sequences' units
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int y = __shfl_up_sync(full, x, off);
    if (lane >= off) x += y;
  }
  const int total = __shfl_sync(full, x, 31);
  const int pre = x - nu;
  __syncwarp();  // s_seq
  // This lane's unit f = lane: the last sequence whose units' prefix is <= f (plan_unit_seq).
  int seq = 0;
  for (int b = 1; b < nb; ++b) {
    if (__shfl_sync(full, pre, b) <= lane) seq = b;
  }
  const int seq_pre = __shfl_sync(full, pre, seq), seq_nu = __shfl_sync(full, nu, seq);
  const bool has = lane < total;
  int4 t = make_int4(0, 0, 0, 0);
  int n = 0;
  if (has) {
    const int u = lane - seq_pre;
    int r0, r1;
    Units::range(s_seq[seq], u, r0, r1);
    t = make_int4(seq, u, r0, r1);
    n = r1 - r0;
  }
  unsigned long long w = has ? static_cast<unsigned long long>(n + 1) : 0ull;
  int maxn = n;
  warp_sum_max(w, maxn);
  int cap = plan_initial_cap(w, H, num_sms, split_pct, fixed_cap);
  if (cap >= maxn && static_cast<long long>(total) * H > a.lpt_ctas) {  // grid order
    const int units_c = plan_grid_header(a, H, total);
    const int first = lane - t.y;
    if (has && first + seq_nu <= units_c) {
      plan_grid_item(a, H, first, Units::kHeavyLast ? seq_nu - 1 - t.y : t.y, seq_nu, t);
    }
    return;
  }
  while (cap < maxn) {  // uniform over the lanes
    unsigned long long parts = has && n > cap ? static_cast<unsigned long long>((n + cap - 1) / cap) : 0ull;
    int unused = 0;
    warp_sum_max(parts, unused);
    if (static_cast<long long>(parts) * H <= a.max_parts) break;
    cap += cap / 2 + 1;
  }
  const int top = min(cap, maxn);  // largest chunk size
  const int nkeys = min(top, kPlanBuckets - 1) + 1;
  auto key_of = [&](int size) { return min(kPlanBuckets - 1, top - size); };
  if (has) plan_count_chunks(s_key, key_of, cap, n, 1);
  __syncwarp();
  int all = 0;  // exclusive scan of the buckets into their offsets (plan_bucket_offsets), 32 at a time
  for (int k0 = 0; k0 < nkeys; k0 += 32) {
    const int v = k0 + lane < nkeys ? s_key[k0 + lane] : 0;
    int c = v;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(full, c, off);
      if (lane >= off) c += y;
    }
    if (k0 + lane < nkeys) s_key[k0 + lane] = all + c - v;
    all += __shfl_sync(full, c, 31);
  }
  if (lane == 0) {
    a.count[0] = min(all, a.capacity);
    a.count[1] = 0;
    a.count[2] = static_cast<long long>(min(all, a.capacity)) * H <= a.together_ctas ? 1 : 0;
  }
  __syncwarp();
  if (has) plan_scatter_unit(a, H, cap, t, s_key, key_of, s_split, s_part_next);
}

// The validation block (validate::validate_block), then hstu_sm90_plan_kernel's one-pass path (or plan_one_warp).
// p's vectors are the call's inputs: each sequence's lengths are loaded beside the validation's loads (nothing waits
// for the sanitized copies); after a violation every sequence counts no units, the list the sanitized copies (all
// empty) give. Called by all threads; s_key, *s_split and *s_part_next zeroed.
template <class Units>
__device__ __forceinline__ void step_plan_body(const HstuValidateParams& v, int* claim, const HstuParams& p,
                                               const SchedArgs& a, int num_sms, int split_pct, int fixed_cap,
                                               bool one_warp, SeqInfo* s_seq, int* s_pre, int* s_key, int* s_warp,
                                               int* s_split, int* s_part_next, unsigned long long* s_first) {
  const int tid = threadIdx.x;
  SeqInfo si{};
  int nu = 0;
  if (tid < p.batch) {  // (indices inside the vectors; the values count only if valid)
    si = seq_info(p, tid);
    nu = Units::count(p, si);
  }
  validate::validate_block(v, claim, s_first, tid, kPlanThreads);  // (*s_first final after its barrier)
  if (*s_first != validate::kNoViolation) nu = 0;
  if (one_warp) {  // (uniform) at most 32 units: warp 0 plans
    if (tid < 32) {
      plan_one_warp<Units>(p, a, num_sms, split_pct, fixed_cap, s_seq, s_key, s_split, s_part_next, si, nu);
    }
    return;
  }
  if (tid < p.batch) s_seq[tid] = si;
  int total;
  const int pre = plan_block_scan(nu, s_warp, &total);  // (its barriers also publish s_seq)
  // (total <= kPlanThreads: launch_step_plan's bound)
  hstu_sm90_plan_one_pass<Units>(p, a, num_sms, split_pct, fixed_cap, s_seq, s_pre, s_key, s_warp, s_split,
                                 s_part_next, pre, total);
}

// One pass's arguments in shared memory (kWarm: both passes run the same instructions).
struct StepPlanArgs {
  HstuValidateParams v;
  HstuParams p;
  SchedArgs a;
};

// The dry pass's made-up batch (kWarm): one sequence of at most 4 query tiles over at most 32 KV tiles, one head,
// its vectors, header, counters and copies in shared memory.
constexpr int kDryItems = 64;
constexpr int kDryWords = 128;

// The dry pass's arguments: d = the real ones, pointed at s_dry / s_items (thread 0).
template <int BM, int BN>
__device__ void make_dry_args(StepPlanArgs& d, int* s_dry, int4* s_items) {
  const int nq = min(d.p.max_seqlen_q, 4 * BM), nk = max(min(d.p.max_seqlen_k, 32 * BN), nq);
  s_dry[0] = 0;
  s_dry[1] = nq;
  s_dry[2] = 0;
  s_dry[3] = nk;
  s_dry[4] = min(nq, 8);
  int* nt = d.v.num_targets != nullptr ? s_dry + 4 : nullptr;
  d.v.cu_seqlens_q = d.p.cu_seqlens_q = s_dry;
  d.v.cu_seqlens_k = d.p.cu_seqlens_k = s_dry + 2;
  d.v.num_targets = d.p.num_targets = nt;
  d.v.seqused_q = d.v.seqused_k = d.v.num_contexts = nullptr;
  d.p.seqused_q = d.p.seqused_k = d.p.num_contexts = nullptr;
  d.v.batch = d.p.batch = 1;
  d.p.heads = 1;
  d.v.total_q = nq;
  d.v.total_k = nk;
  d.v.scratch = s_dry + 64;  // (16 words)
  d.v.layout = HstuScratchLayout{};
  d.v.layout.cu_q = 4;
  d.v.layout.cu_k = 8;
  d.v.layout.num_targets = nt != nullptr ? 12 : -1;
  d.v.layout.words = 16;
  d.v.fill = nullptr;
  d.v.errors = nullptr;  // (nothing reported)
  d.a.count = s_dry + 8;
  d.a.items = s_items;
  d.a.counters = s_dry + 16;  // (one head, at most 4 x 8 chunks + 2 counters)
  d.a.parts = nullptr;
  d.a.capacity = kDryItems;
}

// step_plan_body behind the wait for the kernel before this one (begin_step's lengths and page table). The
// layer's forward behind this grid may start its CTAs at once; they wait for its completion.
// kWarm (private, for comparisons): first a dry pass over a made-up batch in shared memory (no global writes)
// while the kernel before this one still runs, so that the real pass after the wait finds its code in the SM's
// caches; the arguments of both passes from shared memory.
template <int BM, int BN, bool kWarm>
__global__ void __launch_bounds__(kPlanThreads, 1)
    hstu_paged_step_plan_kernel(const HstuValidateParams v, int* claim, const HstuParams p, const SchedArgs a,
                                const int num_sms, const int split_pct, const int fixed_cap, const bool one_warp) {
  using Units = FwdPlanUnits<BM, BN>;
  griddep_launch_dependents();
  __shared__ int s_key[kPlanBuckets];
  __shared__ int s_warp[32];
  __shared__ int s_split, s_part_next;
  __shared__ unsigned long long s_first;
  extern __shared__ int4 step_plan_smem[];  // kPlanSmem bytes
  SeqInfo* s_seq = reinterpret_cast<SeqInfo*>(step_plan_smem);
  int* s_pre = reinterpret_cast<int*>(s_seq + kPlanThreads);
  const int tid = threadIdx.x;
  if constexpr (!kWarm) {
    if (tid == 0) {
      s_split = 0;
      s_part_next = 0;
    }
    for (int i = tid; i < kPlanBuckets; i += kPlanThreads) s_key[i] = 0;
    griddep_wait();
    step_plan_body<Units>(v, claim, p, a, num_sms, split_pct, fixed_cap, one_warp, s_seq, s_pre, s_key, s_warp,
                          &s_split, &s_part_next, &s_first);
  } else {
    __shared__ StepPlanArgs s_args[2];  // [0] the dry pass's, [1] the real one's
    __shared__ int s_dry[kDryWords];
    __shared__ int4 s_items[2 * kDryItems];
    if (tid == 0) {
      s_args[1] = StepPlanArgs{v, p, a};
      StepPlanArgs d{v, p, a};
      make_dry_args<BM, BN>(d, s_dry, s_items);
      s_args[0] = d;
    }
#pragma unroll 1
    for (int pass = 0; pass < 2; ++pass) {
      if (tid == 0) {
        s_split = 0;
        s_part_next = 0;
      }
      for (int i = tid; i < kPlanBuckets; i += kPlanThreads) s_key[i] = 0;
      if (pass == 1) griddep_wait();
      __syncthreads();  // (s_args; the dry pass done)
      const StepPlanArgs& g = s_args[pass];
      step_plan_body<Units>(g.v, claim, g.p, g.a, num_sms, split_pct, fixed_cap, one_warp, s_seq, s_pre, s_key,
                            s_warp, &s_split, &s_part_next, &s_first);
      __syncthreads();
    }
  }
}

// Launches Kernel as one programmatic dependent block of kPlanThreads threads and kPlanSmem bytes.
template <auto Kernel, typename... Args>
cudaError_t launch_one_block(cudaStream_t stream, const Args&... args) {
  const cudaError_t err = set_max_dynamic_smem<Kernel>(kPlanSmem);
  if (err != cudaSuccess) return err;
  return launch_ex(Kernel, dim3(1), kPlanThreads, kPlanSmem, stream, true, args...);
}

template <int D>
cudaError_t launch_step_plan(const HstuValidateParams& v, int* claim, const HstuParams& p, bool one_warp,
                             bool warm, cudaStream_t stream) {
  using C = FwdSm90Traits<D, FwdSm90Tile::stages(D)>;
  if (p.rab != nullptr || p.fwd_sched == nullptr || p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 ||
      p.total_q <= 0 || claim == nullptr) {
    return cudaErrorNotSupported;
  }
  // At most this many units (FwdPlanUnits::count): one pass of one block.
  const int64_t max_units = static_cast<int64_t>(p.batch) * ((p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM);
  if (max_units > kPlanThreads) return cudaErrorNotSupported;
  one_warp = one_warp && max_units <= 32 && fwd_split_cap(p) != kPlanCapWave;
  warm = warm && fwd_split_cap(p) == 0;  // (the dry batch's counters: the planner's rule, at most 4 x 8 chunks)
  const Sm90SchedLayout l = hstu_fwd_sm90_sched_layout(p, p.total_q);
  if (l.bytes <= 0 || p.fwd_sched_bytes < l.bytes) return cudaErrorInvalidValue;
  SchedArgs sa = sched_args(p.fwd_sched, l, sm_count());
  sa.together_ctas = sm_count();
  const int sms = sm_count(), pct = fwd_split_pct(p), cap = fwd_split_cap(p);
  return warm ? launch_one_block<hstu_paged_step_plan_kernel<C::kBlockM, C::kBlockN, true>>(
                    stream, v, claim, p, sa, sms, pct, cap, one_warp)
              : launch_one_block<hstu_paged_step_plan_kernel<C::kBlockM, C::kBlockN, false>>(
                    stream, v, claim, p, sa, sms, pct, cap, one_warp);
}

}  // namespace
}  // namespace sm90

cudaError_t hstu_paged_step_plan(const HstuValidateParams& v, const HstuParams& p, bool one_warp, bool warm,
                                 cudaStream_t stream) {
  int* claim = hstu_error_claim_word(stream);
  switch (p.head_dim) {
    case 64:
      return sm90::launch_step_plan<64>(v, claim, p, one_warp, warm, stream);
    case 128:
      return sm90::launch_step_plan<128>(v, claim, p, one_warp, warm, stream);
    case 256:
      return sm90::launch_step_plan<256>(v, claim, p, one_warp, warm, stream);
    default:
      return cudaErrorNotSupported;
  }
}
#endif

}  // namespace hstu
