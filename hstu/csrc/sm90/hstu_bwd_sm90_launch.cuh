// Host launcher of the sm90 HSTU backward: TMA tensor maps for Q, K, V, dO, the dK/dV/dQ-accumulate kernel, then
// the dq_accum (fp32) -> dq conversion.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_bwd_sm90_kernel.cuh"
#include "hstu/csrc/sm90/hstu_fwd_sm90_launch.cuh"  // make_qkv_map (tensor maps through the driver entry point)
#include "hstu/csrc/sm90/hstu_sm90_launch.h"

namespace hstu {
namespace sm90 {

static_assert(BwdSm90Traits<128>::kLptPairs == kBwdSm90LptPairs && BwdSm90Traits<128>::kLptCtas == kBwdSm90LptCtas &&
                  BwdSm90Traits<64>::kLptPairs == kBwdSm90LptPairs && BwdSm90Traits<64>::kLptCtas == kBwdSm90LptCtas &&
                  BwdSm90Traits<256>::kLptPairs == kBwdSm90LptPairs &&
                  BwdSm90Traits<256>::kLptCtas == kBwdSm90LptCtas && BwdSm90Traits<64>::kBlockN == 128 &&
                  BwdSm90Traits<128>::kBlockN == 128 && BwdSm90Traits<256>::kBlockN == 64 &&
                  BwdSm90Traits<128>::kBlockM == 64,
              "hstu_bwd_sm90_dq_zero_words mirrors the kernels' groups and tiles");

// Tensor map over dq_accum (total_q, H, D) fp32 contiguous: box 32 columns (128 bytes, SWIZZLE_128B) x 1 x box_rows.
inline cudaError_t make_dq_accum_map(CUtensorMap* map, float* ptr, int64_t rows, int heads, int d, int box_rows) {
  TensorMapEncodeTiledFn enc = tensor_map_encoder();
  if (enc == nullptr) return cudaErrorNotSupported;
  cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(d) * 4, static_cast<cuuint64_t>(heads) * d * 4};
  cuuint32_t box[3] = {32, 1, static_cast<cuuint32_t>(box_rows)};
  cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, ptr, dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Split cap of the D = 256 backward's work list in percent of the average work per SM (hstu_sm90_plan_kernel;
// measured on the Zipf(1.2) batch's main kernel: 60 % 124 us, 100 % 122.7 us, 200 % 135.3 us, no split 137 us).
constexpr int kBwdSplitPct = 100;

// Grid cap of the grid-stride convert kernels (dQ, drab): 16 blocks per SM of an H100 / H200.
constexpr int kConvertBlocksCap = 16 * accel::kSmsIfUnknown;

// Launches the backward kernel of configuration Config (BwdSm90Plain / BwdSm90SkipWg / BwdSm90Rab) in the grid or
// work-list order it takes.
template <typename T, int D, class Config>
cudaError_t launch_bwd(const HstuParams& p, int64_t total_k, cudaStream_t stream) {
  using C = BwdSm90Traits<D>;
  constexpr bool kRab = Config::kRab;
  if (p.max_seqlen_k <= 0 || p.max_seqlen_q <= 0 || p.total_q <= 0 || total_k <= 0) return cudaSuccess;
  if (p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidConfiguration;
  CUtensorMap tq, tk, tv, tdo;
  cudaError_t err = bind_device_context();
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tq, p.q, p.total_q, p.heads, D, p.q_row_stride, p.q_head_stride, C::kBlockM);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tdo, p.dout, p.total_q, p.heads, D, p.do_row_stride, p.do_head_stride, C::kBlockM);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tk, p.k, total_k, p.heads, D, p.k_row_stride, p.k_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tv, p.v, total_k, p.heads, D, p.v_row_stride, p.v_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  CUtensorMap tdq{};  // dq_accum's bulk reduce-adds; the split-D kernel adds dQ without it (dq_red_tiled_block)
  if constexpr (!C::kSplitD) {
    err = make_dq_accum_map(&tdq, p.dq_accum, p.total_q, p.heads, D, 16);
    if (err != cudaSuccess) return err;
  }
  // dK / dV stores of whole 64-key warpgroup blocks (box 64 columns x 64 rows, the staging's layout).
  CUtensorMap tdk, tdv;
  err = make_qkv_map<T>(&tdk, p.dk, total_k, p.heads, D, p.dk_row_stride, p.dk_head_stride, 64);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tdv, p.dv, total_k, p.heads, D, p.dv_row_stride, p.dv_head_stride, 64);
  if (err != cudaSuccess) return err;
  if ((p.rab != nullptr) != kRab) return cudaErrorInvalidValue;
  const SchedArgs sa{};  // (the grids' kernels take no work list)
  constexpr auto kernel = hstu_bwd_sm90_kernel<T, D, Config>;
  err = set_max_dynamic_smem<kernel>(C::kSmem);
  if (err != cudaSuccess) return err;
  const int nblk = (p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN;
  if (p.dq_zero_flags != nullptr) {  // the workspace is not zeroed: the first group's rows, the rest, the flags
    const int64_t words = hstu_bwd_sm90_dq_zero_words(p);
    const int gp = hstu_bwd_sm90_lpt_pairs(p.max_seqlen_k, C::kBlockN);
    if (words <= 0 || C::kSplitD) return cudaErrorInvalidValue;  // (kBlockN: static_assert above)
    hstu_dq_zero_first_sm90_kernel<D><<<dim3(32, gp + 2), 256, 0, stream>>>(p, gp, words);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if constexpr (Config::kSkipWg) {  // 1-D grid: the kernel decodes key block, head, batch (its kLpt)
    const int64_t n = static_cast<int64_t>(nblk) * p.heads * p.batch;
    if (n > 0x7fffffff) return cudaErrorInvalidConfiguration;
    kernel<<<dim3(static_cast<unsigned>(n)), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, tdo, tdq, tdk, tdv, p, sa);
    return cudaGetLastError();
  }
  // Split D without rab, jagged lengths: the work list (hstu_sm90_work_list.cuh: longest first with split key
  // blocks, or the grid's order less its empty CTAs) when the op gave its workspace; the kernel starts behind the
  // planner (programmatic dependent launch), whose other CTAs zero the dq workspace meanwhile (then uninitialized).
  if constexpr (C::kSplitD && !kRab) {
    const Sm90SchedLayout l = hstu_bwd_sm90_sched_layout(p, total_k);
    if (p.bwd_sched != nullptr && l.bytes > 0 && p.bwd_sched_bytes >= l.bytes) {
      const int sms = accel::current_device_sms();
      SchedArgs la = sched_args(p.bwd_sched, l, sms);
      la.heads_inner = hstu_bwd_sm90_heads_first(p) ? 1 : 0;  // (the grid's order, where the list keeps it)
      la.zero = reinterpret_cast<float4*>(p.dq_accum);        // (uninitialized: the op gave the list's workspace)
      la.zero_n4 = hstu_bwd_sm90_dq_accum_floats(p) / 4;
      err = launch_plan<BwdPlanUnits>(p, la, sms, kBwdSplitPct, stream);
      if (err != cudaSuccess) return err;
      constexpr auto lk = hstu_bwd_sm90_kernel<T, D, Config, kBwdGridList>;
      err = set_max_dynamic_smem<lk>(C::kSmem);
      if (err != cudaSuccess) return err;
      return launch_behind_plan(lk, l.capacity * p.heads, C::kThreads, C::kSmem, stream, tq, tk, tv, tdo, tdq, tdk,
                                tdv, p, la);
    }
  }
  if (p.bwd_sched != nullptr) {  // (not reached from the op) the list's uninitialized dq workspace, for the grid
    err = cudaMemsetAsync(p.dq_accum, 0, static_cast<size_t>(hstu_bwd_sm90_dq_accum_floats(p)) * sizeof(float), stream);
    if (err != cudaSuccess) return err;
  }
  // Split D: the (head, key block, batch) grid where hstu_bwd_sm90_heads_first says so (its own kernel: the grid
  // order is a template flag, a run-time one made the kernel spill).
  if constexpr (C::kSplitD) {
    if (hstu_bwd_sm90_heads_first(p)) {
      constexpr auto hf = hstu_bwd_sm90_kernel<T, D, Config, kBwdGridHKB>;
      err = set_max_dynamic_smem<hf>(C::kSmem);
      if (err != cudaSuccess) return err;
      hf<<<dim3(p.heads, nblk, p.batch), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, tdo, tdq, tdk, tdv, p, sa);
      return cudaGetLastError();
    }
  }
  kernel<<<dim3(nblk, p.heads, p.batch), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, tdo, tdq, tdk, tdv, p, sa);
  return cudaGetLastError();
}

// After the kLpt kernel with the self-zeroing workspace (dq converted behind, hstu_bwd_sm90_kernel.cuh): the rows it
// did not convert, and zeros in the rows outside the sequences.
template <typename T, int D>
cudaError_t convert_dq_rest(const HstuParams& p, cudaStream_t stream) {
  if (p.total_q <= 0 || p.heads <= 0) return cudaSuccess;
  const int gp = hstu_bwd_sm90_lpt_pairs(p.max_seqlen_k, BwdSm90Traits<D>::kBlockN);
  const int sms = accel::current_device_sms();
  hstu_dq_convert_rest_sm90_kernel<T, D><<<8 * sms, 256, 0, stream>>>(p, gp);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t convert_dq(const HstuParams& p, cudaStream_t stream) {
  if (p.total_q <= 0 || p.heads <= 0) return cudaSuccess;
  if constexpr (D == 256) {  // the tiled workspace (dq_red_tiled): one CTA per 4 groups of 16 rows and head,
    // and past them 16 CTAs per head for the rows outside the sequences (none in the usual call: they exit at once)
    const int64_t groups = p.total_q / 16 + std::max(p.batch, 0) + 1;  // (hstu_bwd_sm90_dq_accum_floats' bound)
    const int64_t quads = p.batch > 0 ? (groups + 3) / 4 : 0;
    if (quads + 16 > 0x7fffffff || p.heads > 65535) return cudaErrorInvalidConfiguration;
    hstu_dq_convert_tiled_sm90_kernel<T><<<dim3(static_cast<unsigned>(quads + 16), p.heads), 256, 0, stream>>>(
        p.dq_accum, static_cast<T*>(p.dq), p.cu_seqlens_q, p.batch, p.heads, p.total_q, p.dq_row_stride,
        p.dq_head_stride, static_cast<int>(quads));
    return cudaGetLastError();
  } else {
    // The kernel indexes with 32-bit math: launches over row ranges of at most 2^30 groups of 8 elements.
    const int64_t per_row = static_cast<int64_t>(p.heads) * (D / 8);
    const int64_t rows_per_launch = std::max<int64_t>(1, (int64_t{1} << 30) / per_row);
    for (int64_t r0 = 0; r0 < p.total_q; r0 += rows_per_launch) {
      const int64_t rows = std::min(rows_per_launch, p.total_q - r0);
      const int64_t want = (rows * per_row + 255) / 256;
      const int blocks = static_cast<int>(want < kConvertBlocksCap ? want : kConvertBlocksCap);
      hstu_dq_convert_sm90_kernel<T, D><<<blocks, 256, 0, stream>>>(
          p.dq_accum + r0 * per_row * 8, static_cast<T*>(p.dq) + r0 * p.dq_row_stride, static_cast<int>(rows),
          p.heads, p.dq_row_stride, p.dq_head_stride);
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }
}

// A shared rab's drab: the fp32 sum over heads -> drab (dtype T).
template <typename T>
cudaError_t convert_drab(const HstuParams& p, cudaStream_t stream) {
  if (p.drab == nullptr || p.drab_accum == nullptr || p.drab_numel <= 0) return cudaSuccess;
  const int64_t want = (p.drab_numel + 255) / 256;
  const int blocks = static_cast<int>(want < kConvertBlocksCap ? want : kConvertBlocksCap);
  hstu_drab_convert_sm90_kernel<T><<<blocks, 256, 0, stream>>>(p.drab_accum, static_cast<T*>(p.drab), p.drab_numel);
  return cudaGetLastError();
}

}  // namespace sm90

// Backward on the caller's stream: dk, dv written for every row of every sequence (cu_seqlens_k), dq converted
// from p.dq_accum (fp32 (total_q, H, D) contiguous, zeroed by the caller) for all total_q rows.
// With rab: drab written when p.drab is set (direct stores for a per-head rab or H = 1; a shared rab with H > 1
// through p.drab_accum, fp32 (B, 1, R, C) zeroed by the caller, converted here), as the sm80-class backward.
// cudaErrorNotSupported (the caller falls back to the sm80-class backward): deterministic mode (dq_accum ==
// nullptr, or p.drab_heads set), head dim other than 64 / 128 / 256.
// Configurations (measured best on an H200, docs/archive/hstu_sm90_log.md): BwdSm90Rab with rab; else
// BwdSm90SkipWg at D = 128 under a right window (window_right >= 0: causal, local, where some warpgroup tiles see no
// key; full windows measured 2-3 % slower with it at S = 16K, D = 64 5-10 %), else BwdSm90Plain. D = 256 is the
// split-D kernel (S^T / dP^T computed once per tile and exchanged through smem, dQ's column blocks split 1 | 3
// between the warpgroups).
template <typename T, int D>
cudaError_t run_hstu_bwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream) {
  if constexpr (D != 64 && D != 128 && D != 256) {
    (void)p;
    (void)total_k;
    (void)stream;
    return cudaErrorNotSupported;
  } else {
    if (p.dq_accum == nullptr || p.drab_heads != nullptr) return cudaErrorNotSupported;
    if (p.batch <= 0 || p.heads <= 0) return cudaSuccess;
    cudaError_t err;
    if (p.rab != nullptr) {
      err = sm90::launch_bwd<T, D, sm90::BwdSm90Rab>(p, total_k, stream);
      if (err != cudaSuccess) return err;
      err = sm90::convert_drab<T>(p, stream);
      if (err != cudaSuccess) return err;
      return sm90::convert_dq<T, D>(p, stream);
    }
    // The BwdSm90SkipWg kernel (1-D longest-first grid) with the self-zeroing workspace converts most of dq itself.
    bool rest = false;
    if constexpr (D == 128) {
      if (p.window_right >= 0) {
        rest = sm90::bwd_dq_conv_behind(p);
        err = sm90::launch_bwd<T, D, sm90::BwdSm90SkipWg>(p, total_k, stream);
      } else {
        err = sm90::launch_bwd<T, D, sm90::BwdSm90Plain>(p, total_k, stream);
      }
    } else {
      err = sm90::launch_bwd<T, D, sm90::BwdSm90Plain>(p, total_k, stream);
    }
    if (err != cudaSuccess) return err;
    return rest ? sm90::convert_dq_rest<T, D>(p, stream) : sm90::convert_dq<T, D>(p, stream);
  }
}

}  // namespace hstu
