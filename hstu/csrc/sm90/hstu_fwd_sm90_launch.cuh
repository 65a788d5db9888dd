// Host launcher of the sm90 HSTU forward: builds the TMA tensor maps and launches hstu_fwd_sm90_kernel.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/device_info.h"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_fwd_sm90_kernel.cuh"
#include "hstu/csrc/sm90/hstu_fwd_sm90_paged.h"
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

// Split cap of the work list in percent of the average work per SM (hstu_sm90_plan_kernel).
constexpr int kFwdSplitPct = 120;
// The default's fixed cap: 0 the percent rule above (floor 4 tiles), kPlanCapWave the one-wave rule (plan_wave_cap;
// docs/hstu_inference.md, the batch-1 sweep).
constexpr int kFwdSplitDefaultCap = 0;
// The planner's split percent and fixed cap for p.fwd_split_tiles (0: the default, -1: no splits, -2: the one-wave
// rule, n: n tiles).
inline int fwd_split_pct(const HstuParams& p) { return p.fwd_split_tiles == -1 ? 0 : kFwdSplitPct; }
inline int fwd_split_cap(const HstuParams& p) {
  return p.fwd_split_tiles > 0 ? p.fwd_split_tiles : p.fwd_split_tiles == -2 ? kPlanCapWave : kFwdSplitDefaultCap;
}

// The work list's arguments over p.fwd_sched where the op gave a large enough workspace for the layout
// (hstu_fwd_sm90_sched_layout with `splits`), and *ctas its kernel's grid; sa.items null: the grid order.
inline SchedArgs fwd_list_args(const HstuParams& p, int64_t total_k, bool splits, int64_t* ctas) {
  SchedArgs sa{};
  *ctas = 0;
  if (p.fwd_sched == nullptr) return sa;
  const Sm90SchedLayout l = hstu_fwd_sm90_sched_layout(p, total_k, splits);
  if (l.bytes > 0 && p.fwd_sched_bytes >= l.bytes) {
    const int sms = accel::current_device_sms();
    sa = sched_args(p.fwd_sched, l, sms);
    sa.together_ctas = sms;
    *ctas = l.capacity * p.heads;
  }
  return sa;
}

// CTAs of a work list's grid (capacity x H), or fewer where the items are bounded tighter: each of the layout's
// units (query tiles) visits at most ceil(max_seqlen_k / BN) KV tiles (the validation holds every length to
// max_seqlen_k) and is cut into chunks of at least the planner's smallest cap (4 under the rule's floor, 2 for the
// one-wave rule, n for fwd_split_tiles = n, whole units without splits; hstu_sm90_plan_kernel only grows the cap).
// The CTAs past the list's items exit at once, but a grid of many of them occupies SMs (one CTA per SM) after the
// working CTAs of a full wave, and the kernel ends with its last CTA (NVIDIA batch 1: 108 CTAs instead of 268).
inline int64_t fwd_list_ctas(const HstuParams& p, int64_t capacity, int block_n) {
  constexpr int64_t BM = 128;
  const int64_t m_blocks = (p.max_seqlen_q + BM - 1) / BM;
  const int64_t units = std::min((p.total_q + BM - 1) / BM + p.batch, int64_t{p.batch} * m_blocks);
  const int64_t tiles = std::max<int64_t>(1, (int64_t{p.max_seqlen_k} + block_n - 1) / block_n);
  const int fixed = fwd_split_cap(p);
  const int64_t cap = fwd_split_pct(p) == 0 ? tiles : fixed > 0 ? fixed : fixed == kPlanCapWave ? 2 : 4;
  return std::min(capacity, units * ((tiles + cap - 1) / cap)) * p.heads;
}

// Persistent CTAs (fwd_persist_produce) for a grid of `tiles` query tiles: the op gave the tile counter and the grid
// is more than one wave.
inline bool fwd_persist_applies(const HstuParams& p, int64_t tiles) {
  const int sms = accel::current_device_sms();
  return p.fwd_tile_counter != nullptr && tiles > sms && tiles < (int64_t{1} << 30);
}

// Launches the forward of configuration Config with or without rab, in the head-major grid order. The jagged work
// list in p.fwd_sched runs where the op gave a large enough workspace (FwdSm90Tile's kernel with kSched);
// FwdSm90Persistent runs persistent CTAs where the grid order is kept and the grid is more than one wave
// (p.fwd_tile_counter must be set), else FwdSm90Tile's kernel. Paged K/V (pk.pool set): never persistent; the K / V
// tensor maps (unused then) span the new tokens.
template <typename T, int D, class Config, bool kRab>
cudaError_t launch_fwd(const HstuParams& p, int64_t total_k, cudaStream_t stream, Sm90PagedKV pk = {}) {
  using C = FwdSm90Traits<D, FwdSm90Tile::stages(D)>;
  if (p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0 || total_k <= 0) return cudaSuccess;
  if ((p.rab != nullptr) != kRab) return cudaErrorInvalidValue;
  const int m_blocks = (p.max_seqlen_q + C::kBlockM - 1) / C::kBlockM;
  if (p.batch > 65535 || p.heads > 65535) return cudaErrorInvalidConfiguration;
  SchedArgs sa{};
  int64_t sched_ctas = 0;
  // D = 128 with rab keeps the grid order: its work-list kernel spilled inside the main loop (ptxas), see
  // docs/archive/hstu_sm90_log.md.
  constexpr bool kSchedOk = !(kRab && D == 128);
  if (kSchedOk) sa = fwd_list_args(p, total_k, /*splits=*/true, &sched_ctas);
  CUtensorMap tq, tk, tv;
  cudaError_t err = bind_device_context();
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tq, p.q, p.total_q, p.heads, D, p.q_row_stride, p.q_head_stride, C::kBlockM);
  if (err != cudaSuccess) return err;
  const int64_t kv_rows = pk.pool != nullptr ? p.total_q : total_k;
  err = make_qkv_map<T>(&tk, p.k, kv_rows, p.heads, D, p.k_row_stride, p.k_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  err = make_qkv_map<T>(&tv, p.v, kv_rows, p.heads, D, p.v_row_stride, p.v_head_stride, C::kBlockN);
  if (err != cudaSuccess) return err;
  // Paged: a map over the pool's rows (num_pages * 2 * page_size, H, D), boxes of min(page_size, BN) rows.
  CUtensorMap tpool = tq;
  if (pk.pool != nullptr) {
    pk.box_shift = std::min(pk.page_shift, C::kBlockN == 128 ? 7 : 6);
    if ((1 << pk.box_shift) < 8) return cudaErrorInvalidValue;  // (a box is whole 8-row swizzle atoms)
    err = make_qkv_map<T>(&tpool, pk.pool, (int64_t{pk.num_pages} * 2) << pk.page_shift, p.heads, D,
                          int64_t{p.heads} * D, D, 1 << pk.box_shift);
    if (err != cudaSuccess) return err;
  }
  const int64_t tiles = int64_t{m_blocks} * p.heads * p.batch;
  if constexpr (Config::kPersistent) {
    static_assert(!kRab && D <= 128, "persistent CTAs: D <= 128 without rab");
    if (sa.items == nullptr && pk.pool == nullptr && fwd_persist_applies(p, tiles)) {
      using CP = FwdSm90Traits<D, FwdSm90Persistent::stages(D), 2>;
      constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, FwdSm90Persistent, false, false>;
      err = set_max_dynamic_smem<kernel>(CP::kSmem);
      if (err != cudaSuccess) return err;
      err = cudaMemsetAsync(p.fwd_tile_counter, 0, sizeof(int), stream);
      if (err != cudaSuccess) return err;
      const int sms = accel::current_device_sms();
      kernel<<<sms, CP::kThreads, CP::kSmem, stream>>>(tq, tk, tv, p, 1, sa, Sm90PagedKV{}, tq);
      return cudaGetLastError();
    }
  }
  // Paged with pk.pdl (kernel_options(pdl=True)): programmatic dependent launches (hstu_fwd_sm90_kernel.cuh).
  const bool pdl = pk.pool != nullptr && pk.pdl != 0;
  if (sa.items == nullptr) {  // grid order: the kSched = false kernel (no work list code at all)
    constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, FwdSm90Tile, kRab, false>;
    err = set_max_dynamic_smem<kernel>(C::kSmem);
    if (err != cudaSuccess) return err;
    if (pdl) {
      return accel::launch_pdl(kernel, dim3(m_blocks, p.heads, p.batch), C::kThreads, C::kSmem, stream, true, tq, tk,
                               tv, p, 1, sa, pk, tpool);
    }
    kernel<<<dim3(m_blocks, p.heads, p.batch), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, p, 1, sa, pk,
                                                                                   tpool);
    return cudaGetLastError();
  }
  if constexpr (!kSchedOk) {
    return cudaErrorNotSupported;  // not reached (sa.items stays null)
  } else {
    constexpr auto kernel = hstu_fwd_sm90_kernel<T, D, FwdSm90Tile, kRab, true>;
    err = set_max_dynamic_smem<kernel>(C::kSmem);
    if (err != cudaSuccess) return err;
    sched_ctas = fwd_list_ctas(p, sched_ctas / p.heads, C::kBlockN);
    if (pk.planned != 0) {  // the list of a plan made before (paged_plan_sm90): a plain launch, or pdl
      if (pdl) {
        return accel::launch_pdl(kernel, dim3(static_cast<unsigned>(sched_ctas)), C::kThreads, C::kSmem, stream,
                                 true, tq, tk, tv, p, 1, sa, pk, tpool);
      }
      kernel<<<static_cast<unsigned>(sched_ctas), C::kThreads, C::kSmem, stream>>>(tq, tk, tv, p, 1, sa, pk, tpool);
      return cudaGetLastError();
    }
    const int sms = accel::current_device_sms();
    err = launch_plan<FwdPlanUnits<C::kBlockM, C::kBlockN>>(p, sa, sms, fwd_split_pct(p), stream, fwd_split_cap(p));
    if (err != cudaSuccess) return err;
    return launch_behind_plan(kernel, sched_ctas, C::kThreads, C::kSmem, stream, tq, tk, tv, p, 1, sa, pk, tpool);
  }
}

// The paged forward (hstu_fwd_sm90_paged.h): FwdSm90Tile's kernel without rab (grid order or work list).
template <typename T, int D>
cudaError_t run_paged_fwd(const HstuParams& p, const Sm90PagedKV& pk, cudaStream_t stream) {
  if (p.rab != nullptr || pk.pool == nullptr || pk.page_offsets == nullptr || pk.page_ids == nullptr ||
      pk.cached_lens == nullptr || pk.n_entries < 1 || pk.num_pages < 1 || pk.page_shift < 0 || pk.page_shift > 16) {
    return cudaErrorInvalidValue;
  }
  // (total_k: the key rows the plan and tensor maps see; the keys live in the pages and the new tokens)
  return launch_fwd<T, D, FwdSm90Tile, false>(p, p.total_q, stream, pk);
}

// The planner of run_paged_fwd's work list alone (its layout and arguments as launch_fwd computes them).
template <typename T, int D>
cudaError_t run_paged_plan(const HstuParams& p, cudaStream_t stream) {
  using C = FwdSm90Traits<D, FwdSm90Tile::stages(D)>;
  if (p.rab != nullptr) return cudaErrorInvalidValue;
  if (p.fwd_sched == nullptr || p.max_seqlen_q <= 0 || p.batch <= 0 || p.heads <= 0 || p.total_q <= 0) {
    return cudaSuccess;
  }
  const Sm90SchedLayout l = hstu_fwd_sm90_sched_layout(p, p.total_q);
  if (l.bytes <= 0 || p.fwd_sched_bytes < l.bytes) return cudaErrorInvalidValue;
  const int sms = accel::current_device_sms();
  SchedArgs sa = sched_args(p.fwd_sched, l, sms);
  sa.together_ctas = sms;
  return launch_plan<FwdPlanUnits<C::kBlockM, C::kBlockN>>(p, sa, sms, fwd_split_pct(p), stream,
                                                          fwd_split_cap(p));
}

// Fills the table slots of (T, D) when the instance file's run_hstu_fwd_sm90<T, D> is instantiated (below).
template <typename T, int D>
struct PagedFwdRegistrar {
  static const bool registered;
};
template <typename T, int D>
const bool PagedFwdRegistrar<T, D>::registered = [] {
  *paged_fwd_sm90_slot(std::is_same_v<T, __half>, D) = &run_paged_fwd<T, D>;
  *paged_plan_sm90_slot(std::is_same_v<T, __half>, D) = &run_paged_plan<T, D>;
  return true;
}();

}  // namespace sm90

// The forward on the caller's stream (measured best on an H200, docs/archive/hstu_sm90_log.md): with rab
// FwdSm90Tile's kRab kernel; else FwdSm90Persistent at D <= 128 (which runs FwdSm90Tile's kernel where
// p.fwd_tile_counter is null, the grid is one wave or the work list runs), FwdSm90Tile at D = 256.
template <typename T, int D>
cudaError_t run_hstu_fwd_sm90(const HstuParams& p, int64_t total_k, cudaStream_t stream) {
  (void)sm90::PagedFwdRegistrar<T, D>::registered;  // (odr-use: the instance file registers its paged launcher)
  if (p.rab != nullptr) return sm90::launch_fwd<T, D, sm90::FwdSm90Tile, true>(p, total_k, stream);
  if constexpr (D <= 128) return sm90::launch_fwd<T, D, sm90::FwdSm90Persistent, false>(p, total_k, stream);
  return sm90::launch_fwd<T, D, sm90::FwdSm90Tile, false>(p, total_k, stream);
}

}  // namespace hstu
