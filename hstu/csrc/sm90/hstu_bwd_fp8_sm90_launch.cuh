// Host launcher of the Hopper FP8 backward (hstu_bwd_fp8_sm90_kernel.cuh): the seven TMA tensor maps (e4m3 as bytes)
// and the grid (128-key block, head, batch; kFp8BwdLpt: head, batch, key block).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90_d256_kernel.cuh"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90_kernel.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_launch.cuh"  // make_dq_accum_map
#include "hstu/csrc/sm90/hstu_fwd_fp8_sm90_launch.cuh"  // make_u8_map, bind_device_context, set_max_dynamic_smem

namespace hstu {
namespace sm90 {

// go(std::integral_constant<int, d>) for the built variant d == diag (hstu_bwd_fp8_sm90.h); cudaErrorInvalidValue
// for any other diag.
template <class Go, int... Ds>
cudaError_t dispatch_diag(Go&& go, int diag, std::integer_sequence<int, Ds...>) {
  cudaError_t e = cudaErrorInvalidValue;
  (void)((diag == Ds ? (e = go(std::integral_constant<int, Ds>{}), true) : false) || ...);
  return e;
}

template <int D>
cudaError_t launch_bwd_fp8(const HstuParams& p, const HstuFp8BwdParams& f, cudaStream_t stream) {
  using C = Fp8BwdTraits<D>;  // (the tiles' sizes; shared memory per variant below)
  if (p.max_seqlen_k <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || f.total_k <= 0) return cudaSuccess;
  if (p.rab != nullptr || p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidValue;
  cudaError_t err = bind_device_context();
  if (err != cudaSuccess) return err;
  const auto u64 = [](int64_t x) { return static_cast<cuuint64_t>(x); };
  // Row-major (rows, H, D) byte tensors: boxes of `rows` rows of D bytes (128-byte swizzle).
  auto rows_map = [&](CUtensorMap* map, const void* ptr, int64_t total, int64_t row_stride, int64_t head_stride,
                      cuuint32_t rows) {
    return make_u8_map(map, ptr, {D, u64(p.heads), u64(total)}, {u64(p.heads > 1 ? head_stride : D), u64(row_stride)},
                       {D, 1, rows});
  };
  // Transposed (H, D, cols) copies: boxes of `cols` columns (bytes) x D rows (swizzle of `cols` bytes).
  auto cols_map = [&](CUtensorMap* map, const void* ptr, int64_t cols, cuuint32_t box) {
    return make_u8_map(map, ptr, {u64(cols), D, u64(p.heads)}, {u64(cols), u64(cols) * D}, {box, D, 1});
  };
  CUtensorMap tq, tk, tv, tdo, tqt, tdot, tkt;
  if ((err = rows_map(&tq, p.q, p.total_q, p.q_row_stride, p.q_head_stride, C::kBlockM)) != cudaSuccess) return err;
  if ((err = rows_map(&tk, p.k, f.total_k, p.k_row_stride, p.k_head_stride, C::kBlockN)) != cudaSuccess) return err;
  if ((err = rows_map(&tv, p.v, f.total_k, p.v_row_stride, p.v_head_stride, C::kBlockN)) != cudaSuccess) return err;
  if ((err = rows_map(&tdo, f.do8, p.total_q, int64_t{p.heads} * D, D, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tqt, f.qt, f.q_cols, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tdot, f.dot, f.q_cols, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tkt, f.kt, f.k_cols, C::kBlockN)) != cudaSuccess) return err;
  CUtensorMap tdq;  // dq_accum's bulk reduce-adds: boxes of 32 columns x 16 rows (one warp's panel)
  if ((err = make_dq_accum_map(&tdq, f.dq_accum, p.total_q, p.heads, D, 16)) != cudaSuccess) return err;
  const int n_blocks = (p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN;
  if (((f.diag ^ kFp8BwdDefault) & kFp8BwdLpt) && n_blocks > 65535) return cudaErrorInvalidValue;
  if (((f.diag ^ kFp8BwdDefault) & kFp8BwdLptGroups) && int64_t{n_blocks} * p.heads * p.batch > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  auto go = [&](auto diag) {  // one launch for every variant
    constexpr int kVariant = decltype(diag)::value ^ kFp8BwdDefault;  // (hstu_bwd_fp8_sm90.h)
    constexpr auto kernel = hstu_bwd_fp8_sm90_kernel<D, kVariant>;
    using CV = Fp8BwdTraits<D, kVariant>;
    const dim3 grid = (kVariant & kFp8BwdLptGroups) ? dim3(static_cast<unsigned>(int64_t{n_blocks} * p.heads * p.batch))
                      : (kVariant & kFp8BwdLpt)     ? dim3(p.heads, p.batch, n_blocks)
                                                    : dim3(n_blocks, p.heads, p.batch);
    cudaError_t e = set_max_dynamic_smem<kernel>(CV::kSmem);
    if (e != cudaSuccess) return e;
    HstuFp8BwdParams g = f;  // the groups' pairs at least 1 (the kernel divides by them)
    g.lpt_pairs = g.lpt_pairs > 0 ? g.lpt_pairs : 1;
    kernel<<<grid, CV::kThreads, CV::kSmem, stream>>>(tq, tk, tv, tdo, tqt, tdot, tkt, tdq, p, g);
    return cudaGetLastError();
  };
  return dispatch_diag(go, f.diag, Fp8BwdDiagBuiltAt<D>{});
}

// D = 256 (hstu_bwd_fp8_sm90_d256_kernel.cuh): grid (64-key block, head, batch); K / V / Q / dO boxes of 128 columns
// (two per tile: 128-byte swizzle spans 128 bytes), the transposed copies' boxes of 64 columns x 256 rows. The
// product variants (Fp8BwdDiagProduct) run the default kernel, kFp8BwdD256Sync the lab one.
inline cudaError_t launch_bwd_fp8_d256(const HstuParams& p, const HstuFp8BwdParams& f, cudaStream_t stream) {
  using C = Fp8BwdD256Traits;
  constexpr int D = C::D;
  if (p.max_seqlen_k <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || f.total_k <= 0) return cudaSuccess;
  if (p.rab != nullptr || p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidValue;
  if (!fp8_bwd_diag_in(f.diag, Fp8BwdDiagBuiltD256{})) return cudaErrorInvalidValue;
  cudaError_t err = bind_device_context();
  if (err != cudaSuccess) return err;
  const auto u64 = [](int64_t x) { return static_cast<cuuint64_t>(x); };
  auto rows_map = [&](CUtensorMap* map, const void* ptr, int64_t total, int64_t row_stride, int64_t head_stride,
                      cuuint32_t rows) {
    return make_u8_map(map, ptr, {D, u64(p.heads), u64(total)}, {u64(p.heads > 1 ? head_stride : D), u64(row_stride)},
                       {C::kPanel, 1, rows});
  };
  auto cols_map = [&](CUtensorMap* map, const void* ptr, int64_t cols, cuuint32_t box) {
    return make_u8_map(map, ptr, {u64(cols), D, u64(p.heads)}, {u64(cols), u64(cols) * D}, {box, D, 1});
  };
  CUtensorMap tq, tk, tv, tdo, tqt, tdot, tkt;
  if ((err = rows_map(&tq, p.q, p.total_q, p.q_row_stride, p.q_head_stride, C::kBlockM)) != cudaSuccess) return err;
  if ((err = rows_map(&tk, p.k, f.total_k, p.k_row_stride, p.k_head_stride, C::kBlockN)) != cudaSuccess) return err;
  if ((err = rows_map(&tv, p.v, f.total_k, p.v_row_stride, p.v_head_stride, C::kBlockN)) != cudaSuccess) return err;
  if ((err = rows_map(&tdo, f.do8, p.total_q, int64_t{p.heads} * D, D, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tqt, f.qt, f.q_cols, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tdot, f.dot, f.q_cols, C::kBlockM)) != cudaSuccess) return err;
  if ((err = cols_map(&tkt, f.kt, f.k_cols, C::kBlockN)) != cudaSuccess) return err;
  const int n_blocks = (p.max_seqlen_k + C::kBlockN - 1) / C::kBlockN;
  auto go = [&](auto split) {
    constexpr auto kernel = hstu_bwd_fp8_sm90_d256_kernel<decltype(split)::value>;
    cudaError_t e = set_max_dynamic_smem<kernel>(C::kSmem);
    if (e != cudaSuccess) return e;
    kernel<<<dim3(n_blocks, p.heads, p.batch), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, tdo, tqt, tdot, tkt, p, f);
    return cudaGetLastError();
  };
  return f.diag == kFp8BwdD256Sync ? go(std::false_type{}) : go(std::true_type{});
}

}  // namespace sm90

template <int D>
cudaError_t run_hstu_bwd_fp8_sm90(const HstuParams& p, const HstuFp8BwdParams& f, cudaStream_t stream) {
  if constexpr (D == 256) {
    return sm90::launch_bwd_fp8_d256(p, f, stream);
  } else {
    return sm90::launch_bwd_fp8<D>(p, f, stream);
  }
}

}  // namespace hstu
