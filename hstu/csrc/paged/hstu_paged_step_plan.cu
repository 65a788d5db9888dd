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
cudaError_t hstu_paged_step_plan(const HstuValidateParams&, const HstuParams&, cudaStream_t, const int32_t*) {
  return cudaErrorNotSupported;
}
#else
namespace sm90 {
namespace {

// Behind the wait for the kernel before this one (begin_step's lengths and page table): the validation block
// (validate::validate_block), then hstu_sm90_plan_kernel's one-pass path. p's vectors are the call's inputs: each
// sequence's lengths are loaded beside the validation's loads (nothing waits for the sanitized copies); after a
// violation every sequence counts no units, the list the sanitized copies (all empty) give. The layer's forward
// behind this grid may start its CTAs at once; they wait for its completion.
// ready (begin_step's ready word, or nullptr): thread 0 spins on it (an acquire at GPU scope; the barrier in
// validate_block passes the order on) instead of the wait, so the block runs beside the rest of begin_step, and
// exits once the word is 2 (begin_step's step tensors written: an acquire, then the block's completion carries the
// order to the kernels behind it). Its other inputs (cu_seqlens_q, the masks' vectors) must be complete when
// begin_step starts.
template <class Units>
__global__ void __launch_bounds__(kPlanThreads, 1)
    hstu_paged_step_plan_kernel(const HstuValidateParams v, int* claim, const HstuParams p, const SchedArgs a,
                                const int num_sms, const int split_pct, const int fixed_cap, const int32_t* ready) {
  accel::griddep_launch_dependents();
  __shared__ int s_key[kPlanBuckets];
  __shared__ int s_warp[32];
  __shared__ int s_split, s_part_next;
  __shared__ unsigned long long s_first;
  extern __shared__ int4 step_plan_smem[];  // kPlanSmem bytes
  SeqInfo* s_seq = reinterpret_cast<SeqInfo*>(step_plan_smem);
  int* s_pre = reinterpret_cast<int*>(s_seq + kPlanThreads);
  const int tid = threadIdx.x;
  if (tid == 0) {
    s_split = 0;
    s_part_next = 0;
  }
  for (int i = tid; i < kPlanBuckets; i += kPlanThreads) s_key[i] = 0;
  if (ready == nullptr) {
    accel::griddep_wait();
  } else {
    if (tid == 0) {
      while (ld_acquire_gpu(ready) == 0) {
      }
    }
    __syncthreads();
  }
  SeqInfo si{};
  int nu = 0;
  if (tid < p.batch) {  // (indices inside the vectors; the values count only if valid)
    si = seq_info(p, tid);
    nu = Units::count(p, si);
  }
  validate::validate_block(v, claim, &s_first, tid, kPlanThreads);  // (s_first final after its barrier)
  if (s_first != validate::kNoViolation) nu = 0;
  if (tid < p.batch) s_seq[tid] = si;
  int total;
  const int pre = plan_block_scan(nu, s_warp, &total);  // (its barriers also publish s_seq)
  // (total <= kPlanThreads: launch_step_plan's bound)
  hstu_sm90_plan_one_pass<Units>(p, a, num_sms, split_pct, fixed_cap, s_seq, s_pre, s_key, s_warp, &s_split,
                                 &s_part_next, pre, total);
  if (ready == nullptr) return;
  if (tid == 0) {
    while (ld_acquire_gpu(ready) < 2) {
    }
  }
}

template <int D>
cudaError_t launch_step_plan(const HstuValidateParams& v, int* claim, const HstuParams& p, cudaStream_t stream,
                             const int32_t* ready) {
  using C = FwdSm90Traits<D, FwdSm90Tile::stages(D)>;
  using Units = FwdPlanUnits<C::kBlockM, C::kBlockN>;
  if (p.rab != nullptr || p.fwd_sched == nullptr || p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 ||
      p.total_q <= 0 || claim == nullptr) {
    return cudaErrorNotSupported;
  }
  // At most this many units (FwdPlanUnits::count): one pass of one block.
  if (static_cast<int64_t>(p.batch) * ((p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM) > kPlanThreads) {
    return cudaErrorNotSupported;
  }
  const Sm90SchedLayout l = hstu_fwd_sm90_sched_layout(p, p.total_q);
  if (l.bytes <= 0 || p.fwd_sched_bytes < l.bytes) return cudaErrorInvalidValue;
  const int sms = accel::current_device_sms();
  SchedArgs sa = sched_args(p.fwd_sched, l, sms);
  sa.together_ctas = sms;
  constexpr auto kernel = hstu_paged_step_plan_kernel<Units>;
  const cudaError_t err = set_max_dynamic_smem<kernel>(kPlanSmem);
  if (err != cudaSuccess) return err;
  return accel::launch_pdl(kernel, dim3(1), kPlanThreads, kPlanSmem, stream, true, v, claim, p, sa, sms,
                           fwd_split_pct(p), fwd_split_cap(p), ready);
}

}  // namespace
}  // namespace sm90

cudaError_t hstu_paged_step_plan(const HstuValidateParams& v, const HstuParams& p, cudaStream_t stream,
                                 const int32_t* ready) {
  int* claim = hstu_error_claim_word(stream);
  switch (p.head_dim) {
    case 64:
      return sm90::launch_step_plan<64>(v, claim, p, stream, ready);
    case 128:
      return sm90::launch_step_plan<128>(v, claim, p, stream, ready);
    case 256:
      return sm90::launch_step_plan<256>(v, claim, p, stream, ready);
    default:
      return cudaErrorNotSupported;
  }
}
#endif

}  // namespace hstu
