// Launcher declarations for the Hopper (sm_90a) HSTU kernels (host side; no torch headers).
//
// run_hstu_fwd_sm90<T, D> is defined in hstu_fwd_sm90_launch.cuh and explicitly instantiated once per (dtype, head
// dim) by a .cu file compiled for sm_90a only (see NOTES.md). Same HstuParams as the sm80 kernels, plus the number
// of key/value rows (total_k, the row extent of the K/V tensor maps), which HstuParams does not carry.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hstu/csrc/hstu_params.h"

namespace hstu {

// Forward on the caller's stream. Requirements (validated by the op): q/k/v last dim contiguous, data pointers
// 16-byte aligned, row/head strides multiples of 8 elements, D in {64, 128, 256}
// (instantiated ones), p.total_q = rows of q. `variant` selects a pipeline configuration for experiments
// (hstu_fwd_sm90_launch.cuh); -1 = the default.
template <typename T, int D>
cudaError_t run_hstu_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream, int variant = -1);

// Backward (dq, dk, dv) on the caller's stream, defined in hstu_bwd_sm90_launch.cuh. Same requirements as the
// forward plus dout/dq/dk/dv set in p; p.dq_accum: fp32 (total_q, H, D) contiguous workspace, zeroed by the caller
// (the launcher converts it into p.dq for all total_q rows); with rab, drab into p.drab when set (a shared rab with
// H > 1 through p.drab_accum, fp32, zeroed by the caller, converted by the launcher). Returns
// cudaErrorNotSupported (fall back to the sm80-class backward) when p.dq_accum == nullptr or p.drab_heads is set
// (deterministic mode), for D not in {64, 128, 256}, or with rab at D = 256.
template <typename T, int D>
cudaError_t run_hstu_bwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream, int variant = -1);

}  // namespace hstu
