// The serving step's plan of the paged Hopper forward in one block (hstu_attn::paged_fwd_sm90_plan under kOptPdl).
//
// paged_fwd_sm90_plan validates the int32 vectors (hstu_validate.h) and then plans the work list
// (hstu_sm90_plan_kernel): two single-block kernels, the planner a plain launch behind the validation. Here one
// block does both, launched programmatically behind the step's begin_step: it is resident before begin_step ends,
// validates, and plans from the sanitized copies after a block barrier (the planner's one-pass path), with one
// launch and one grid dependency less on the step's critical path. Same sanitized copies, error record, work list
// and bits as the two kernels.
#pragma once

#include <cuda_runtime_api.h>

#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/common/hstu_validate.h"

namespace hstu {

// Set by hstu/_paged.py on the plan op's options (KVCacheManager._plan_ready, on by default): cu_seqlens_k is
// begin_step's, with its ready word in the int32 after its B + 1 (kv_cache_begin_step's option bit 2). The block
// spins on that word (1: the key offsets written) instead of waiting for begin_step's completion, and exits once it
// says 2 (the step's tensors written) without a wait of its own for begin_step's table updates (read by the next
// step's begin_step only, a plain launch behind every kernel of this step).
constexpr int64_t kOptPlanReadyWord = int64_t{1} << 43;

// v: the validation of p's vectors (the call's inputs: the block plans from them; the forwards read v.scratch's
// copies); p.fwd_sched / fwd_sched_bytes the work list's workspace.
// cudaErrorNotSupported (nothing launched) where the one block does not apply: a build without sm_90a, a head dim
// without the Hopper forward, a batch whose units could exceed one planner block's threads, no work list, the
// error record's claim word not yet known (a first plan inside a capture); the caller then launches the two kernels.
// ready: begin_step's ready word (kOptPlanReadyWord), or nullptr.
cudaError_t hstu_paged_step_plan(const HstuValidateParams& v, const HstuParams& p, cudaStream_t stream,
                                 const int32_t* ready = nullptr);

}  // namespace hstu
