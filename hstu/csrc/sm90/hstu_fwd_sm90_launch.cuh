// Host launcher of the sm90 HSTU forward: builds the TMA tensor maps and launches hstu_fwd_sm90_kernel.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "hstu/csrc/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_kernel.cuh"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"

namespace hstu {
namespace sm90 {

using TensorMapEncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                            const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                            CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                            CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda needed).
inline TensorMapEncodeTiledFn tensor_map_encoder() {
  static TensorMapEncodeTiledFn fn = []() -> TensorMapEncodeTiledFn {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult qres;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &qres) !=
            cudaSuccess ||
        qres != cudaDriverEntryPointSuccess) {
      return nullptr;
    }
    return reinterpret_cast<TensorMapEncodeTiledFn>(ptr);
  }();
  return fn;
}

// cuTensorMapEncodeTiled needs the device's context current on the calling thread, and a thread whose first CUDA
// call this is has none (e.g. the autograd engine's thread when the op allocated its outputs without a kernel:
// CUDA_ERROR_INVALID_CONTEXT). cudaSetDevice makes the current device's primary context current (CUDA >= 12).
inline cudaError_t bind_device_context() {
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  return err != cudaSuccess ? err : cudaSetDevice(dev);
}

// Tensor map over a (rows, heads, D) 16-bit tensor, box = 64 columns (128 bytes, SWIZZLE_128B) x 1 head x box_rows.
template <typename T>
cudaError_t make_qkv_map(CUtensorMap* map, const void* ptr, int64_t rows, int heads, int d, int64_t row_stride,
                         int64_t head_stride, int box_rows) {
  TensorMapEncodeTiledFn enc = tensor_map_encoder();
  if (enc == nullptr) return cudaErrorNotSupported;
  const CUtensorMapDataType dt =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const int64_t hs = heads > 1 ? head_stride : d;  // any valid stride when there is one head
  cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(hs) * 2, static_cast<cuuint64_t>(row_stride) * 2};
  cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = enc(map, dt, 3, const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

inline int sm_count() {
  static int cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (cache[dev] == 0) {
    int n = 0;
    cache[dev] = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 132;
  }
  return cache[dev];
}

// sched: use the jagged work list in p.fwd_sched when the op provided a large enough workspace.
// Split cap of the work list in percent of the average work per SM (hstu_sm90_plan_kernel).
constexpr int kFwdSplitPct = 120;

// sched_mode (dev variants only): 1 = with split KV ranges (the default), 2 = work list without splits,
// 3 = the planner alone (timing; no output written), 4 / 5 = split cap 85 / 200 % of the average.
// kPersistStages > 0: grids of more than one wave (head-major order, no work list) run as persistent CTAs, one per
// SM, with two Q buffers and this many K / V stages (p.fwd_tile_counter must be set).
template <typename T, int D, bool kOverlap, bool kPingpong, int kStages, bool kRab = false, int kPersistStages = 0>
cudaError_t launch_fwd(const HstuParams& p, int64_t total_k, cudaStream_t stream, bool head_major, bool sched = true,
                       int sched_mode = 1) {
  using C = FwdSm90Traits<D, kStages>;
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || total_k <= 0) return cudaSuccess;
  if ((p.rab != nullptr) != kRab) return cudaErrorInvalidValue;
  const int m_blocks = (p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM;
  if (p.batch > 65535 || p.heads > 65535 || (!head_major && m_blocks > 65535)) return cudaErrorInvalidConfiguration;
  SchedArgs sa{};
  int64_t sched_ctas = 0;
  // D = 128 with rab keeps the grid order: its work-list kernel spilled inside the main loop (ptxas), see
  // docs/archive/hstu_sm90_log.md.
  constexpr bool kSchedOk = !(kRab && D == 128);
  if (kSchedOk && sched && p.fwd_sched != nullptr) {
    const Sm90SchedLayout l = hstu_fwd_sm90_sched_layout(p, total_k);
    if (l.bytes > 0 && p.fwd_sched_bytes >= l.bytes) {
      sa = sched_args(p.fwd_sched, l, sm_count());
      sched_ctas = l.capacity * p.heads;
    }
  }
  CUtensorMap tq, tk, tv;
  cudaError_t err = bind_device_context();
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tq, p.q, p.total_q, p.heads, D, p.q_row_stride, p.q_head_stride, C::kBlockM);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tk, p.k, total_k, p.heads, D, p.k_row_stride, p.k_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tv, p.v, total_k, p.heads, D, p.v_row_stride, p.v_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  const int64_t tiles = int64_t{m_blocks} * p.heads * p.batch;
  if constexpr (kPersistStages > 0) {
    if (sa.items == nullptr && head_major && p.fwd_tile_counter != nullptr && tiles > sm_count() &&
        tiles < (int64_t{1} << 30)) {  // grid order, persistent CTAs
      using CP = FwdSm90Traits<D, kPersistStages, 2>;
      constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, kOverlap, kPingpong, kPersistStages, kRab, false, 2>;
      err = set_max_dynamic_smem<kernel>(CP::kSmem);
      if (err != cudaSuccess) return err;
      err = cudaMemsetAsync(p.fwd_tile_counter, 0, sizeof(int), stream);
      if (err != cudaSuccess) return err;
      kernel<<<sm_count(), CP::kThreads, CP::kSmem, stream>>>(tq, tk, tv, p, 1, sa);
      return cudaGetLastError();
    }
  }
  if (sa.items == nullptr) {  // grid order: the kSched = false kernel (no work list code at all)
    constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, kOverlap, kPingpong, kStages, kRab, false>;
    err = set_max_dynamic_smem<kernel>(C::kSmem);
    if (err != cudaSuccess) return err;
    const dim3 grid = head_major ? dim3(m_blocks, p.heads, p.batch)
                                 : dim3(static_cast<unsigned>(p.batch) * static_cast<unsigned>(p.heads), m_blocks);
    kernel<<<grid, C::kThreads, C::kSmem, stream>>>(tq, tk, tv, p, head_major ? 1 : 0, sa);
    return cudaGetLastError();
  }
  if constexpr (!kSchedOk) {
    return cudaErrorNotSupported;  // not reached (sa.items stays null)
  } else {
  constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, kOverlap, kPingpong, kStages, kRab, true>;
  err = set_max_dynamic_smem<kernel>(C::kSmem);
  if (err != cudaSuccess) return err;
  const int split_pct = sched_mode == 2 ? 0 : sched_mode == 4 ? 85 : sched_mode == 5 ? 200 : kFwdSplitPct;
  err = launch_plan<FwdPlanUnits<C::kBlockM, C::kBlockN>>(p, sa, sm_count(), split_pct, stream);
  if (err != cudaSuccess || sched_mode == 3) return err;
  const int hm = head_major ? 1 : 0;
  return launch_behind_plan(kernel, sched_ctas, C::kThreads, C::kSmem, stream, tq, tk, tv, p, hm, sa);
  }
}

}  // namespace sm90

// The default configuration (measured best on an H200, docs/archive/hstu_sm90_log.md): overlapped SiLU / P V, pingpong
// consumer warpgroups, 3 K/V stages where they fit (D <= 128, else 2), head-major grid; at D <= 128 grids of more than
// one wave run as persistent CTAs with 2 Q buffers and 2 K/V stages (docs/archive/hstu_sm90_log.md; variant -2: one CTA
// per query tile, for comparisons). With HSTU_SM90_ALL_VARIANTS (the dev library) `variant` selects an experimental
// configuration: variant = 10 * head_major + cfg, cfg: 0 serial 2-stage, 1 overlapped 2-stage, 2 overlapped 3-stage, 3
// overlapped + pingpong 2-stage, 4 overlapped + pingpong 3-stage; + 100: with the jagged work list (p.fwd_sched) where
// the op gave one (+ 200: without KV splits, + 300: the planner alone, for timing, + 400 / 500: split cap 85 / 200 %);
// variant < 0 is the default (work list on). Without it (the wheel) only the default is compiled and `variant` is
// ignored but for -2. With rab the default configuration's kRab kernel runs in grid order, whatever `variant` says.
template <typename T, int D>
cudaError_t run_hstu_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream, int variant) {
  constexpr int kDeep = D <= 128 ? 3 : 2;
  if (p.rab != nullptr) return sm90::launch_fwd<T, D, true, true, kDeep, true>(p, total_k, stream, true);
  if constexpr (D <= 128) {
    if (variant == -1) return sm90::launch_fwd<T, D, true, true, kDeep, false, 2>(p, total_k, stream, true);
  }
#ifdef HSTU_SM90_ALL_VARIANTS
  if (variant >= 0) {
    const bool hm = variant % 100 / 10 == 1;
    const bool sched = variant >= 100;  // + 100: the jagged work list (when p.fwd_sched is set)
    const int sm = variant / 100;       // 1 split KV ranges, 2 no splits, 3 planner only, 4/5 other caps
    switch (variant % 10) {
      case 0: return sm90::launch_fwd<T, D, false, false, 2>(p, total_k, stream, hm, sched, sm);
      case 1: return sm90::launch_fwd<T, D, true, false, 2>(p, total_k, stream, hm, sched, sm);
      case 2: return sm90::launch_fwd<T, D, true, false, kDeep>(p, total_k, stream, hm, sched, sm);
      case 3: return sm90::launch_fwd<T, D, true, true, 2>(p, total_k, stream, hm, sched, sm);
      default: return sm90::launch_fwd<T, D, true, true, kDeep>(p, total_k, stream, hm, sched, sm);
    }
  }
#else
  (void)variant;
#endif
  return sm90::launch_fwd<T, D, true, true, kDeep>(p, total_k, stream, /*head_major=*/true);
}

}  // namespace hstu
