// Host launcher of the sm90 HSTU forward: builds the TMA tensor maps and launches hstu_fwd_sm90_kernel.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

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

template <typename T, int D, bool kOverlap, bool kPingpong, int kStages, bool kRab = false>
cudaError_t launch_fwd(const HstuParams& p, int64_t total_k, cudaStream_t stream, bool head_major) {
  using C = FwdSm90Traits<D, kStages>;
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || total_k <= 0) return cudaSuccess;
  if ((p.rab != nullptr) != kRab) return cudaErrorInvalidValue;
  const int m_blocks = (p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM;
  if (p.batch > 65535 || p.heads > 65535 || (!head_major && m_blocks > 65535)) return cudaErrorInvalidConfiguration;
  CUtensorMap tq, tk, tv;
  cudaError_t err = make_qkv_map<T>(&tq, p.q, p.total_q, p.heads, D, p.q_row_stride, p.q_head_stride, C::kBlockM);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tk, p.k, total_k, p.heads, D, p.k_row_stride, p.k_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tv, p.v, total_k, p.heads, D, p.v_row_stride, p.v_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  auto kernel = hstu_fwd_sm90_kernel<T, D, kOverlap, kPingpong, kStages, kRab>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (err != cudaSuccess) return err;
  const dim3 grid = head_major ? dim3(m_blocks, p.heads, p.batch)
                               : dim3(static_cast<unsigned>(p.batch) * static_cast<unsigned>(p.heads), m_blocks);
  kernel<<<grid, C::kThreads, C::kSmem, stream>>>(tq, tk, tv, p, head_major ? 1 : 0);
  return cudaGetLastError();
}

}  // namespace sm90

// The default configuration (measured best on an H200, NOTES.md): overlapped SiLU / P V, pingpong consumer
// warpgroups, 3 K/V stages where they fit (D <= 128, else 2), head-major grid. With HSTU_SM90_ALL_VARIANTS (the dev
// library) `variant` selects an experimental configuration: variant = 10 * head_major + cfg, cfg: 0 serial 2-stage,
// 1 overlapped 2-stage, 2 overlapped 3-stage, 3 overlapped + pingpong 2-stage, 4 overlapped + pingpong 3-stage;
// variant < 0 is the default. Without it (the wheel) only the default is compiled and `variant` is ignored.
// With rab the default configuration's kRab kernel runs, whatever `variant` says.
template <typename T, int D>
cudaError_t run_hstu_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream, int variant) {
  constexpr int kDeep = D <= 128 ? 3 : 2;
  if (p.rab != nullptr) return sm90::launch_fwd<T, D, true, true, kDeep, true>(p, total_k, stream, true);
#ifdef HSTU_SM90_ALL_VARIANTS
  if (variant >= 0) {
    const bool hm = variant / 10 == 1;
    switch (variant % 10) {
      case 0: return sm90::launch_fwd<T, D, false, false, 2>(p, total_k, stream, hm);
      case 1: return sm90::launch_fwd<T, D, true, false, 2>(p, total_k, stream, hm);
      case 2: return sm90::launch_fwd<T, D, true, false, kDeep>(p, total_k, stream, hm);
      case 3: return sm90::launch_fwd<T, D, true, true, 2>(p, total_k, stream, hm);
      default: return sm90::launch_fwd<T, D, true, true, kDeep>(p, total_k, stream, hm);
    }
  }
#else
  (void)variant;
#endif
  return sm90::launch_fwd<T, D, true, true, kDeep>(p, total_k, stream, /*head_major=*/true);
}

}  // namespace hstu
