// Hopper (sm_90a) device primitives for the HSTU sm90 kernels: mbarriers, TMA tensor loads, wgmma descriptors and
// fences, named barriers, setmaxnreg. Hand-written PTX (no CuTe); the wgmma instructions are in wgmma_sm90.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap (type only; the launcher encodes maps through the runtime's driver entry point)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "hstu/csrc/common/hstu_common.cuh"  // pack2, unpack_lo / unpack_hi
#include "common/pdl.cuh"     // griddep_wait, griddep_launch_dependents
#include "hstu/csrc/sm90/wgmma_sm90.cuh"

namespace hstu {
namespace sm90 {

// Host: cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) once per kernel and device
// (64 devices; beyond them on every call) instead of a driver call on every launch.
template <auto Kernel>
inline cudaError_t set_max_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> done{0};  // bit d: set on device d
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  }
  const uint64_t bit = uint64_t{1} << dev;
  if (done.load(std::memory_order_acquire) & bit) return cudaSuccess;
  const cudaError_t err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return err;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------------------------------
// mbarrier

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive once and add `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Blocks until the phase with the given parity has completed. A fresh barrier counts its (virtual) previous phase,
// parity 1, as completed, so producers wait on parity (use ^ 1) for the first round.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Non-blocking: has the phase with this parity completed?
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// mbarrier.try_wait with a suspend-time hint (ns): true once the phase with this parity has completed; false after
// about the hint.
__device__ __forceinline__ bool mbar_try_wait_ns(uint32_t bar, uint32_t parity, uint32_t ns) {
  uint32_t ok;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity), "r"(ns)
      : "memory");
  return ok != 0;
}

// ---------------------------------------------------------------------------------------------------------------
// TMA: 3-D tiled tensor load global -> shared, completing on an mbarrier (transaction bytes). Out-of-tensor
// elements are zero-filled (and still counted as transferred bytes).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Bulk tensor store shared -> global (bulk_group completion; commit / wait_group by the issuing thread).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---------------------------------------------------------------------------------------------------------------
// wgmma helpers

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins a register value in program order relative to the surrounding volatile asm (wgmma issue / wait), so the
// compiler neither reads an accumulator before its wgmma has completed nor rewrites an A fragment still in flight.
__device__ __forceinline__ void pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
template <typename R, int N>
__device__ __forceinline__ void pin_all(R (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) pin(x[i]);
}
template <int N, int M>
__device__ __forceinline__ void pin_all(uint32_t (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) pin(x[i][j]);
}

// Shared-memory matrix descriptor for a 128-byte-swizzled tile (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes, 16-byte chunk index XOR (row % 8), 1024-byte atoms of 8 rows).
// K-major operand: LBO unused (1), SBO = 1024 (next 8 rows). MN-major operand: LBO = byte stride between 64-element
// column panels, SBO = 1024 (next 8 rows of K).
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t saddr, uint32_t lbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((saddr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>(1024 >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;  // SWIZZLE_128B
  return d;
}

template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 64) {
    if constexpr (kBf16) wgmma_m64n64k16_ss_bf16(d, da, db, scale_d); else wgmma_m64n64k16_ss_f16(d, da, db, scale_d);
  } else if constexpr (N == 128) {
    if constexpr (kBf16) wgmma_m64n128k16_ss_bf16(d, da, db, scale_d); else wgmma_m64n128k16_ss_f16(d, da, db, scale_d);
  } else {
    static_assert(N == 256, "unsupported wgmma N");
    if constexpr (kBf16) wgmma_m64n256k16_ss_bf16(d, da, db, scale_d); else wgmma_m64n256k16_ss_f16(d, da, db, scale_d);
  }
}

template <typename T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 64) {
    if constexpr (kBf16) wgmma_m64n64k16_rs_bf16<TRANS_B>(d, a, db, scale_d);
    else wgmma_m64n64k16_rs_f16<TRANS_B>(d, a, db, scale_d);
  } else if constexpr (N == 128) {
    if constexpr (kBf16) wgmma_m64n128k16_rs_bf16<TRANS_B>(d, a, db, scale_d);
    else wgmma_m64n128k16_rs_f16<TRANS_B>(d, a, db, scale_d);
  } else {
    static_assert(N == 256, "unsupported wgmma N");
    if constexpr (kBf16) wgmma_m64n256k16_rs_bf16<TRANS_B>(d, a, db, scale_d);
    else wgmma_m64n256k16_rs_f16<TRANS_B>(d, a, db, scale_d);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Misc

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Generic-proxy shared-memory writes become visible to the async proxy (wgmma, TMA) after this fence + a barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// rab (B, 1 or H, R, C) element loads (read-only path; asm volatile so they are issued where written, e.g. right
// after a wgmma, and their latency hides under it). Two adjacent 16-bit elements as one 32-bit word.
__device__ __forceinline__ uint32_t ld_nc_u32(const void* ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(ptr));
  return v;
}
// rab pair (j, j + 1) packed in one word: element j if ok0, element j + 1 if ok1, else 0; one 32-bit load when
// both are in range and ptr is 4-byte aligned (`aligned`), else 16-bit loads. One asm, one destination register,
// no branch (branches here cost the forward spills).
__device__ __forceinline__ uint32_t ld_nc_pair_if(const void* ptr, bool ok0, bool ok1, bool aligned) {
  uint32_t v;
  asm volatile(
      "{\n .reg .pred pw, pl, ph;\n .reg .b16 lo, hi;\n .reg .b32 t;\n"
      " setp.ne.b32 pw, %4, 0;\n setp.ne.b32 pl, %2, 0;\n setp.ne.b32 ph, %3, 0;\n"
      " and.pred pw, pw, ph;\n and.pred pl, pl, !pw;\n and.pred ph, ph, !pw;\n"
      " mov.b16 lo, 0;\n mov.b16 hi, 0;\n mov.b32 %0, 0;\n"
      " @pw ld.global.nc.b32 %0, [%1];\n @pl ld.global.nc.b16 lo, [%1];\n @ph ld.global.nc.b16 hi, [%1+2];\n"
      " mov.b32 t, {lo, hi};\n @!pw mov.b32 %0, t;\n}\n"
      : "=r"(v)
      : "l"(ptr), "r"(static_cast<int>(ok0)), "r"(static_cast<int>(ok1)), "r"(static_cast<int>(aligned)));
  return v;
}
// Two 16-bit elements from unrelated addresses packed into one word (lo from pa if pred_a, hi from pb if pred_b,
// else 0): the backward's transposed rab pairs (queries r, r + 1 of one key) held in one register.
__device__ __forceinline__ uint32_t ld_nc_2u16_if(const void* pa, const void* pb, bool pred_a, bool pred_b) {
  uint32_t v;
  asm volatile(
      "{\n .reg .pred p, q;\n .reg .b16 lo, hi;\n setp.ne.b32 p, %3, 0;\n setp.ne.b32 q, %4, 0;\n"
      " mov.b16 lo, 0;\n mov.b16 hi, 0;\n @p ld.global.nc.b16 lo, [%1];\n @q ld.global.nc.b16 hi, [%2];\n"
      " mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(v)
      : "l"(pa), "l"(pb), "r"(static_cast<int>(pred_a)), "r"(static_cast<int>(pred_b)));
  return v;
}
__device__ __forceinline__ uint32_t ld_nc_2u16(const void* pa, const void* pb) {
  uint32_t v;
  asm volatile(
      "{\n .reg .b16 lo, hi;\n ld.global.nc.b16 lo, [%1];\n ld.global.nc.b16 hi, [%2];\n"
      " mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(v)
      : "l"(pa), "l"(pb));
  return v;
}

// 16-byte global store (ptr 16-byte aligned). Written out because nvcc split plain uint4 stores in the unrolled
// epilogue loops into four 4-byte STGs (D = 128 backward: 3 of 4 unrolled copies).
__device__ __forceinline__ void st_global_v4(void* ptr, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
// 8-byte global store (ptr 8-byte aligned).
__device__ __forceinline__ void st_global_v2(void* ptr, uint32_t x, uint32_t y) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(ptr), "r"(x), "r"(y) : "memory");
}
// Global writes of the generic proxy ordered with async-proxy (bulk tensor) operations on global memory around them.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// 32-bit shared memory word by address (volatile: the value is really stored / re-read).
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

}  // namespace sm90
}  // namespace hstu
