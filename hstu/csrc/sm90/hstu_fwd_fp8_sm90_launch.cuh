// Host launcher of the Hopper FP8 forward: the Vt pre-pass, the TMA tensor maps (e4m3 as bytes), the work list's
// planner where it runs, and the kernel (grid, work list or persistent CTAs: Fp8FwdMode).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh"
#include "hstu/csrc/sm90/hstu_fwd_sm90_launch.cuh"  // tensor_map_encoder, bind_device_context, fwd_list_args

namespace hstu {
namespace sm90 {

// 3-D byte tensor map, box (box0 bytes, box1, box2), swizzle of box0 bytes (128, 64 or 32).
inline cudaError_t make_u8_map(CUtensorMap* map, const void* ptr, const cuuint64_t (&dims)[3],
                               const cuuint64_t (&strides)[2], const cuuint32_t (&box)[3]) {
  TensorMapEncodeTiledFn enc = tensor_map_encoder();
  if (enc == nullptr) return cudaErrorNotSupported;
  cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(ptr), dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE,
                         box[0] == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                         : box[0] == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                        : CU_TENSOR_MAP_SWIZZLE_32B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// One grid-order launch of kernel (m_blocks, H, B) with kSmem bytes of dynamic shared memory (tvt2: Vt's second
// panel on the 192-key tiles, else tvt).
template <auto kernel, int kSmem>
cudaError_t launch_fwd_fp8_grid(int m_blocks, const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tvt,
                                const CUtensorMap& tvt2, const HstuParams& p, const HstuFp8FwdParams& f,
                                const SchedArgs& sa, cudaStream_t stream) {
  const cudaError_t err = set_max_dynamic_smem<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  kernel<<<dim3(m_blocks, p.heads, p.batch), 384, kSmem, stream>>>(tq, tk, tvt, tvt2, p, f, sa);
  return cudaGetLastError();
}

// kDiag (the timing-only kFp8FwdDiag* variants, with kEarlyPack) and a kSilu other than fp8_silu_default (the SiLU
// forms for comparisons): grid order only.
template <int D, bool kEarlyPack, int kDiag = 0, int kSilu = fp8_silu_default(D, kEarlyPack)>
cudaError_t launch_fwd_fp8(const HstuParams& p, const HstuFp8FwdParams& f, cudaStream_t stream) {
  using C = Fp8FwdTraits<D>;
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || f.total_k <= 0) return cudaSuccess;
  if (p.rab != nullptr || p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidValue;
  // Vt pre-pass (D x vt_cols bytes per head written, total_k x D read).
  const dim3 vt_grid(static_cast<unsigned>((f.vt_cols + 63) / 64), p.heads);
  if (f.var == kFp8VarMainVt) {
    hstu_fp8_vt_main_kernel<D><<<vt_grid, 256, 0, stream>>>(p, f);
  } else {  // (a 1-D grid, the head fastest)
    hstu_fp8_vt_kernel<D><<<vt_grid.x * vt_grid.y, kVtThreads, 0, stream>>>(p, f);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  CUtensorMap tq, tk, tvt;
  err = bind_device_context();
  if (err != cudaSuccess) return err;
  const int64_t hs_q = p.heads > 1 ? p.q_head_stride : D, hs_k = p.heads > 1 ? p.k_head_stride : D;
  err = make_u8_map(&tq, p.q, {D, static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(p.total_q)},
                    {static_cast<cuuint64_t>(hs_q), static_cast<cuuint64_t>(p.q_row_stride)},
                    {C::kRowBytes, 1, C::kBlockM});
  if (err != cudaSuccess) return err;
  err = make_u8_map(&tk, p.k, {D, static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(f.total_k)},
                    {static_cast<cuuint64_t>(hs_k), static_cast<cuuint64_t>(p.k_row_stride)},
                    {C::kRowBytes, 1, C::kBlockN});
  if (err != cudaSuccess) return err;
  auto vt_map = [&](CUtensorMap* map, cuuint32_t box_keys) {
    return make_u8_map(map, f.vt, {static_cast<cuuint64_t>(f.vt_cols), D, static_cast<cuuint64_t>(p.heads)},
                       {static_cast<cuuint64_t>(f.vt_cols), static_cast<cuuint64_t>(f.vt_cols) * D},
                       {box_keys, D, 1});
  };
  err = vt_map(&tvt, C::kBlockN);
  if (err != cudaSuccess) return err;
  const int m_blocks = (p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM;
  constexpr bool kVariant = kDiag != 0 || kSilu != fp8_silu_default(D, kEarlyPack);
  // 192-key tiles (fp8_wide_tiles: batches of >= 4K keys per sequence on average, or kernel_options(fp8_bn192=True)):
  // D = 128, grid order (no work list / persistent CTAs planned), one descale factor per CTA (not block mode: its k / v
  // factors change every 128 keys). Its K map's box has 192 rows; Vt: two maps, boxes of 128 keys (128-byte swizzle)
  // and 64 keys (64-byte swizzle). Their SiLU form: fp8_silu_default's for 192 keys.
  if constexpr (D == 128 && !kVariant) {
    if (fp8_wide_tiles(f.bn192, f.total_k, p.batch) && f.descale_mode != kFp8Block && p.fwd_sched == nullptr &&
        p.fwd_tile_counter == nullptr) {
      using CW = Fp8FwdTraits<D, 1, 192>;
      CUtensorMap tkw, tvt2;
      err = make_u8_map(&tkw, p.k, {D, static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(f.total_k)},
                        {static_cast<cuuint64_t>(hs_k), static_cast<cuuint64_t>(p.k_row_stride)},
                        {CW::kRowBytes, 1, CW::kBlockN});
      if (err != cudaSuccess) return err;
      err = vt_map(&tvt2, 64);
      if (err != cudaSuccess) return err;
      constexpr int kWide = fp8_silu_default(D, kEarlyPack, 192);
      // The 192-key kernel with kDiag bits kBits (kDiag's or a variant's).
      auto wide = [&](auto bits) {
        constexpr int kBits = decltype(bits)::value;
        return launch_fwd_fp8_grid<hstu_fwd_fp8_sm90_kernel<D, kFp8Grid, kEarlyPack, 192, kBits, kWide>, CW::kSmem>(
            m_blocks, tq, tkw, tvt, tvt2, p, f, SchedArgs{}, stream);
      };
      using std::integral_constant;
#ifdef HSTU_DEV_VARIANTS
      if constexpr (kEarlyPack) {  // (timing-only: kernel_options(fp8_fwd_var=15); dev builds)
        if (f.var == kFp8VarTrace) return wide(integral_constant<int, kFp8FwdDiagTrace>{});
      }
#endif
      if constexpr (kEarlyPack) {  // (kernel_options(fp8_fwd_var=1 / 2 / 3), for comparisons)
        if (f.var == kFp8VarMainLoop) return wide(integral_constant<int, kFp8FwdMainLoop>{});
        if (f.var == kFp8VarTailCopy) return wide(integral_constant<int, kFp8FwdTailCopy>{});
        if (f.var == kFp8VarTileTest) return wide(integral_constant<int, kFp8FwdTileTest>{});
      }
      return wide(integral_constant<int, kDiag>{});
    }
  }
  // The bf16 forward's schedules (launch_fwd), where the op asked for them (plan_fwd_fp8: kernel_options(fp8_sched=
  // True); the grid by default): the jagged work list where the op gave its workspace (planned without splits), else
  // persistent CTAs at D <= 128 where the op gave the tile counter and the grid is more than one wave, else the grid.
  int64_t list_ctas = 0;
  const SchedArgs sa = kVariant ? SchedArgs{} : fwd_list_args(p, f.total_k, /*splits=*/false, &list_ctas);
  if constexpr (!kVariant) {  // (the timing-only variants and the SiLU forms: grid order)
    if (sa.items != nullptr) {
      constexpr auto kernel = hstu_fwd_fp8_sm90_kernel<D, kFp8List, kEarlyPack>;
      err = set_max_dynamic_smem<kernel>(C::kSmem);
      if (err != cudaSuccess) return err;
      const int sms = accel::current_device_sms();
      err = launch_plan<FwdPlanUnits<C::kBlockM, C::kBlockN>>(p, sa, sms, /*split_pct=*/0, stream);
      if (err != cudaSuccess) return err;
      return launch_behind_plan(kernel, list_ctas, C::kThreads, C::kSmem, stream, tq, tk, tvt, tvt, p, f, sa);
    }
    if constexpr (D <= 128) {
      if (fwd_persist_applies(p, int64_t{m_blocks} * p.heads * p.batch)) {
        using CP = Fp8FwdTraits<D, 2>;
        constexpr auto kernel = hstu_fwd_fp8_sm90_kernel<D, kFp8Persist, kEarlyPack>;
        err = set_max_dynamic_smem<kernel>(CP::kSmem);
        if (err != cudaSuccess) return err;
        err = cudaMemsetAsync(p.fwd_tile_counter, 0, sizeof(int), stream);
        if (err != cudaSuccess) return err;
        const int sms = accel::current_device_sms();
        kernel<<<sms, CP::kThreads, CP::kSmem, stream>>>(tq, tk, tvt, tvt, p, f, sa);
        return cudaGetLastError();
      }
    }
  }
  constexpr int BN = D == 256 ? 64 : 128;
  // The grid-order kernel with kDiag bits kBits (kDiag's or a variant's) and early pack kPack.
  auto grid = [&](auto bits, auto pack) {
    return launch_fwd_fp8_grid<hstu_fwd_fp8_sm90_kernel<D, kFp8Grid, decltype(pack)::value, BN,
                                                        decltype(bits)::value, kSilu>, C::kSmem>(
        m_blocks, tq, tk, tvt, tvt, p, f, sa, stream);
  };
  using std::integral_constant;
  // (kernel_options(fp8_fwd_var=1 / 2): main's loop; the copy of P at the loop's tail, for comparisons)
  if constexpr (kDiag == 0 && kEarlyPack && kSilu == fp8_silu_default(D, kEarlyPack)) {
    if (f.var == kFp8VarMainLoop) return grid(integral_constant<int, kFp8FwdMainLoop>{}, std::true_type{});
    if (f.var == kFp8VarTailCopy) return grid(integral_constant<int, kFp8FwdTailCopy>{}, std::true_type{});
  }
  return grid(integral_constant<int, kDiag>{}, integral_constant<bool, kEarlyPack>{});
}

}  // namespace sm90

template <int D>
cudaError_t run_hstu_fwd_fp8_sm90(const HstuParams& p, const HstuFp8FwdParams& f, cudaStream_t stream) {
  if (f.late_pack) return sm90::launch_fwd_fp8<D, false>(p, f, stream);
  constexpr int kTanh = sm90::kFp8SiluTanh;
#ifdef HSTU_DEV_VARIANTS  // (timing-only variants: fp8_fwd_diag, fp8_fwd_var=15; the op refuses them elsewhere)
  constexpr int kNoMufu = sm90::kFp8FwdDiagNoMufu, kNoCvt = sm90::kFp8FwdDiagNoCvt;
  if (f.diag == kNoMufu) return sm90::launch_fwd_fp8<D, true, kNoMufu, kTanh>(p, f, stream);
  if (f.diag == kNoCvt) return sm90::launch_fwd_fp8<D, true, kNoCvt, kTanh>(p, f, stream);
  if (f.diag == (kNoMufu | kNoCvt)) return sm90::launch_fwd_fp8<D, true, kNoMufu | kNoCvt, kTanh>(p, f, stream);
  if constexpr (D == 256) {  // (the grid kernel with clock stamps)
    if (f.var == sm90::kFp8VarTrace) return sm90::launch_fwd_fp8<D, true, sm90::kFp8FwdDiagTrace, kTanh>(p, f, stream);
  }
#endif
  // f.silu (kernel_options(fp8_silu=...)): 0 the default form, 1 + an Fp8Silu value that form.
  const int silu = f.silu == 0 ? sm90::fp8_silu_default(D) : f.silu - 1;
  if (silu == sm90::fp8_silu_default(D)) return sm90::launch_fwd_fp8<D, true>(p, f, stream);
  if (silu == kTanh) return sm90::launch_fwd_fp8<D, true, 0, kTanh>(p, f, stream);
  return sm90::launch_fwd_fp8<D, true, 0, sm90::kFp8SiluMixed>(p, f, stream);
}

}  // namespace hstu
