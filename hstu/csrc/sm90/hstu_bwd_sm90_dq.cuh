// Hopper HSTU backward: the fp32 dq workspace. Reductions into it (bulk tensor reduce-adds, the split-D kernel's
// tiled red.global adds), its self-zeroing protocol, the conversion into dq behind the main loop, and the kernels that
// zero or convert it around the main kernel.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_sm90_work_list.cuh"
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_schedule.cuh"
#include "hstu/csrc/sm90/hstu_bwd_sm90_traits.cuh"

namespace hstu {
namespace sm90 {

// D = 256: the fp32 dq workspace in 16-row groups (hstu_bwd_sm90_dq_accum_floats), one per warp of a 64-row query
// tile: rows 16 g' .. 16 g' + 15 of sequence b are group (cu_seqlens_q[b] + 16 b) / 16 + g' (the padding keeps every
// sequence's groups its own: at most total_q / 16 + B + 1 groups). A group of head h holds 4 blocks of 64 columns,
// each in the register order of a warp's part of an m64n64 fp32 wgmma accumulator: float4 j of lane l (its
// registers 4 j .. 4 j + 3: rows l / 4 and l / 4 + 8 of the group, columns 8 j + 2 (l % 4), + 1) at float4 index
// 32 j + l. Each warp's red.global.add.v4.f32 then covers 512 contiguous bytes, with no staging in shared memory;
// hstu_dq_convert_tiled_sm90_kernel puts the rows back. The last query tile's warps past the sequence's rows add
// exact zeros (their Q / dO rows are zeroed in smem, so dS = 0) into the next groups, which changes nothing.
__device__ __forceinline__ int64_t dq_group_index(int q_start, int b, int row0) {
  return ((static_cast<int64_t>(q_start) + 16 * static_cast<int64_t>(b)) >> 4) + (row0 >> 4);
}
// One m64n64 block of a warpgroup's dQ tile (query rows m0 .. m0 + 63, columns 64 blk .. 64 blk + 63) for thread wtid.
__device__ __forceinline__ void dq_red_tiled_block(float* acc, int q_start, int b, int m0, int heads, int h, int blk,
                                                   int wtid, const float (&q)[32]) {
  const int64_t g = dq_group_index(q_start, b, m0) + wtid / 32;
  float* a = acc + ((g * heads + h) * 4 + blk) * 1024 + 4 * (wtid % 32);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(a + 128 * j), "f"(q[4 * j]), "f"(q[4 * j + 1]),
                 "f"(q[4 * j + 2]), "f"(q[4 * j + 3])
                 : "memory");
  }
}

// Bulk tensor reduction shared -> global (dst += src, fp32 add), tracked by the issuing thread's bulk groups.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The same with an L2 cache policy (createpolicy) for the reduced lines.
__device__ __forceinline__ void tma_reduce_add_3d_hint(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2,
                                                       uint64_t policy) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group.L2::cache_hint"
      " [%0, {%2, %3, %4}], [%1], %5;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk groups are complete (their writes performed).
__device__ __forceinline__ void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// All but this thread's newest N bulk groups are complete.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// dst (global) <- src (shared), `bytes` contiguous (non-tensor bulk copy, this thread's bulk group).
__device__ __forceinline__ void bulk_store(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
// dst (shared) <- src (global), `bytes` contiguous, completing `bytes` of transactions on mbarrier bar.
__device__ __forceinline__ void bulk_load(uint32_t dst, const float* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// The bulk groups of this thread have finished reading shared memory (the source may be overwritten).
__device__ __forceinline__ void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

__device__ __forceinline__ void st_shared_zero16(uint32_t a) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
}

// Rows [used, used + nrows) of two smem tiles a + off and b + off (kPanels column panels of kPanelBytes, 128-byte
// rows) set to zero by the 256 consumer threads (ctid), made visible to the async proxy, then the consumers meet
// (barrier 1).
template <int kPanels, int kPanelBytes>
__device__ __forceinline__ void zero_rows_sm90(uint32_t a, uint32_t b, uint32_t off, int used, int nrows, int ctid) {
  const int total = 2 * kPanels * nrows * 8;
  for (int idx = ctid; idx < total; idx += 256) {
    const int chunk = idx % 8;
    const int rr = (idx / 8) % nrows;
    const int rest = idx / (8 * nrows);
    const int pn = rest % kPanels;
    const uint32_t t = (rest / kPanels == 0 ? a : b) + off;
    st_shared_zero16(t + pn * kPanelBytes + (used + rr) * 128 + chunk * 16);
  }
  fence_proxy_async_smem();
  named_barrier_sync(1, 256);
}

// Self-zeroing dq workspace (p.dq_zero_flags: the D = 64 / 128 kernels, hstu_bwd_sm90_dq_zero_words). The workspace is
// cut into chunks of 128 query rows x D columns of one (batch, head) pair; pair P's chunks are zeroed by the CTAs of
// pair P - gp (a group earlier in the grid's order; the launcher zeroes the first group's) and flagged:
// 0 untouched, 1 claimed (being zeroed), 2 zero. Whoever needs a chunk and finds it untouched claims and zeroes it
// itself, so no CTA ever waits for one that has not started (deadlock-free in any dispatch order).
// Flag of chunk qb of pair P (>= gp): dq_zero_flags[(P - gp) * bwd_dq_chunks(p) + qb].
// Chunks per pair (a longer sequence than max_seqlen_q breaks the op's contract: its extra rows are left alone rather
// than flags overrun).
__device__ __forceinline__ int bwd_dq_chunks(const HstuParams& p) { return (p.max_seqlen_q + 127) / 128; }
// 0 -> 1 (claim); returns the old value.
__device__ __forceinline__ uint32_t atom_claim_u32(uint32_t* ptr) {
  uint32_t old;
  asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], 0, 1;\n" : "=r"(old) : "l"(ptr) : "memory");
  return old;
}
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
// Chunk qb of pair (b, h): rows [128 qb, min(128 qb + 128, the sequence's rows)), 16-byte zero stores by n threads
// (this one is t of them), flat over the chunk's rows x float4 columns with 32-bit offsets (few live registers: a
// producer warp runs it with 24); then the caller's proxy fence and the flag's release.
template <int D>
__device__ __forceinline__ void bwd_dq_zero_chunk(float* acc, int heads, int q_start, int lq_alloc, int h, int qb,
                                                  int t, int n) {
  constexpr int kC4 = D / 4;  // float4 columns per row (a power of 2)
  const int end = min(128, lq_alloc - 128 * qb) * kC4;
  const uint32_t rs4 = static_cast<uint32_t>(heads) * kC4;  // < 2^22: offsets below 128 rows stay under 2^31
  float4* base = reinterpret_cast<float4*>(acc + (static_cast<int64_t>(q_start) + 128 * qb) * heads * D +
                                           static_cast<int64_t>(h) * D);
#pragma unroll 1
  for (int e = t; e < end; e += n) {
    st_global_v4(base + (static_cast<uint32_t>(e) / kC4) * rs4 + (static_cast<uint32_t>(e) % kC4),
                 make_uint4(0u, 0u, 0u, 0u));
  }
}
// The zeroing share of CTA (pair P, key block n) of either grid (the kSkipWg kernel's 1-D longest-first one or the
// (key block, head, batch) one; decoded again here so that nothing is live into the 24-register producer): chunks
// qb = n, n + nblk_k, ... of pair P + gp, by one warp, each claimed (skipped if someone else has), zeroed and
// released.
template <int D, int BN, int kLptPairs, int kLptCtas, bool kLpt>
__device__ __forceinline__ void bwd_dq_zero_ahead(const HstuParams& p, int lane) {
  const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
  const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
  int pair, n_block;
  if constexpr (kLpt) {
    bwd_lpt_decode<BN, kLptPairs, kLptCtas>(p, static_cast<int>(blockIdx.x), pair, n_block);
  } else {  // the (key block, head, batch) grid: CTAs dispatched in the order of n_block + nblk_k * pair
    pair = static_cast<int>(blockIdx.z) * p.heads + static_cast<int>(blockIdx.y);
    n_block = static_cast<int>(blockIdx.x);
  }
  const int target = pair + gp;
  if (target >= p.batch * p.heads) return;
  const int b = target / p.heads;
  const int q_start = p.cu_seqlens_q[b];
  const int lq_alloc = p.cu_seqlens_q[b + 1] - q_start;
  const int nq = bwd_dq_chunks(p);
  uint32_t* flags = p.dq_zero_flags + static_cast<int64_t>(pair) * nq;
  for (int qb = n_block; 128 * qb < lq_alloc && qb < nq; qb += nblk_k) {
    uint32_t old = 0;
    if (lane == 0) old = atom_claim_u32(flags + qb);
    old = __shfl_sync(0xffffffffu, old, 0);
    if (old != 0) continue;
    bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, q_start, lq_alloc, target - b * p.heads, qb, lane, 32);
    fence_proxy_async_global();
    fence_acq_rel_gpu();
    __syncwarp();
    if (lane == 0) st_release_gpu(flags + qb, 2u);
  }
}
// Before the first reduce-add into chunk qb (flag f) of the pair (rows from q_start, head h): wait until it is zero,
// zeroing it alone if nobody has claimed it.
template <int D>
__device__ __forceinline__ void bwd_dq_zero_wait(const HstuParams& p, uint32_t* f, int q_start, int lq_alloc, int h,
                                                 int qb) {
  uint32_t v = ld_acquire_gpu(f);
  if (v == 0 && atom_claim_u32(f) == 0u) {
    bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, q_start, lq_alloc, h, qb, 0, 1);
    fence_proxy_async_global();
    st_release_gpu(f, 2u);
    v = 2;
  }
  while (v != 2) v = ld_acquire_gpu(f);
  fence_proxy_async_global();  // the zeros (generic proxy) before this CTA's bulk reduce-adds (async proxy)
}

// dq converted behind (the kLpt kernel with the self-zeroing workspace): pair P's workspace rows are converted to dq
// by the CTAs of pair P + 2 gp, two groups later in the grid (CTA (P + 2 gp, n): chunk n of pair P), while they are
// still in L2, by their otherwise idle producer warps 2 and 3 (one 64-row half each), and then dropped from L2
// (`discard.global.L2`: converted lines are never written back to HBM). Two groups, not one: a group later the pair
// is often not finished yet, and the converters' wait for it cost more than it saved (docs/archive/hstu_sm90_log.md).
// What they do not convert goes to the launcher's pass (hstu_dq_convert_rest_sm90_kernel): the last 2 gp pairs (no
// CTA two groups later), and the rows the main kernel lists (the rest of a 64-row half from a multiple of 16 rows
// on): those of a converter that stopped (its CTA's consumers finished first), of chunks nblk_k, ...
// (max_seqlen_q > max_seqlen_k), and of CTAs that exit at once (keys past their sequence). Words behind the zero
// flags ((pairs - gp) x nq): done[pairs], each pair's arrivals (one per consumer warp once its reduce-adds are
// complete: 8 x nblk_k when the pair is done), then the list: its length, then (pairs - gp) x nq x 8 entries
// (pair P x 8 nq + row / 16).
constexpr int kBwdConvBehindGroups = 2;
// The op asked for it (the kernel converts only where kConvBehind; the launcher runs the rest pass after it).
__host__ __device__ __forceinline__ bool bwd_dq_conv_behind(const HstuParams& p) {
  return p.dq_zero_flags != nullptr && p.dq_conv_behind != 0;
}
__device__ __forceinline__ uint32_t* bwd_dq_done_words(const HstuParams& p, int gp, int nq) {
  return p.dq_zero_flags + static_cast<int64_t>(p.batch * p.heads - gp) * nq;
}
__device__ __forceinline__ uint32_t* bwd_dq_list_words(const HstuParams& p, int gp, int nq) {
  return bwd_dq_done_words(p, gp, nq) + p.batch * p.heads;
}
// Lists rows [r, end of r's 64-row half) of pair src (r a multiple of 16) for the launcher's pass: one entry,
// pair x 8 nq + r / 16.
__device__ __forceinline__ void bwd_dq_list_rows(const HstuParams& p, int gp, int nq, int src, int r) {
  // (a cold path inside the converters' loops: its address is not hoisted out of them, opaque())
  uint32_t* list = bwd_dq_list_words(p, static_cast<int>(opaque(static_cast<uint32_t>(gp))), nq);
  const uint32_t i = atomicAdd(list, 1u);
  list[1 + i] = static_cast<uint32_t>(src) * 8u * nq + r / 16;
}
// The converters' shared memory (kConvBehind kernels only: a static __shared__ object, so that its addresses are
// constants and cost the 24-register warps no register): the consumers' mbarrier (one arrive per consumer warp at
// its end), each converter warp's buffer (16 rows of fp32, 128B-swizzled bulk tensor loads: 1024-byte aligned), its
// mbarrier and its parked words.
template <int D>
struct alignas(1024) BwdConvSmem {
  float buf[2][16 * D];
  uint64_t cdone;
  uint64_t bar[2];
  uint32_t park[2][8];
};
template <int D>
__device__ __forceinline__ BwdConvSmem<D>& bwd_conv_smem() {
  __shared__ BwdConvSmem<D> s;
  return s;
}
// Rows [r0, r0 + rows) of head h from the sequence's first row q_start: dq (T) <- the fp32 workspace, thread t of
// N, 8 elements per step (two 16-byte L2 loads, one 16-byte store).
template <typename T, int D, int N>
__device__ __forceinline__ void bwd_dq_convert_rows(const HstuParams& p, int q_start, int h, int r0, int rows, int t) {
  constexpr int kC8 = D / 8;       // 8-element groups per row (a power of 2, <= N)
  constexpr int kRows = N / kC8;   // rows per step
  static_assert(N % kC8 == 0, "whole rows per step");
  const int64_t row0 = static_cast<int64_t>(q_start) + r0 + t / kC8;
  const int c = t % kC8;
  const float* src = p.dq_accum + (row0 * p.heads + h) * D + c * 8;
  T* dst = static_cast<T*>(p.dq) + row0 * p.dq_row_stride + static_cast<int64_t>(h) * p.dq_head_stride + c * 8;
#pragma unroll 1
  for (int r = t / kC8; r < rows; r += kRows) {
    float4 a, b;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w)
                 : "l"(src));
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(b.x), "=f"(b.y), "=f"(b.z), "=f"(b.w)
                 : "l"(src + 4));
    st_global_v4(dst, make_uint4(pack2<T>(a.x, a.y), pack2<T>(a.z, a.w), pack2<T>(b.x, b.y),
                                 pack2<T>(b.z, b.w)));
    src += static_cast<int64_t>(kRows) * p.heads * D;
    dst += kRows * p.dq_row_stride;
  }
}
// Producer warp 2 + half of CTA (pair P, key block n) of the kLpt grid: half `half` (64 rows) of chunk n of pair
// P - 2 gp, once all of that pair's reduce-adds are complete (and the chunk is zeroed: one no CTA of the pair added
// into may still wait for its zeroing CTA; then it is listed). Stops, listing what is left for the launcher's pass,
// as soon as this CTA's consumers are done (mbarrier cdone), so that no CTA waits on one that may not have started
// and none outlives its consumers by more than a round. Lists chunks n + nblk_k, ... too. Rounds of 16 rows: D / 32
// bulk tensor loads through the dq workspace's map (16 rows x 32 columns, 128B-swizzled) into the warp's buffer
// (mbarrier bar[half]), the lines dropped from L2 once copied, then rounded stores to dq. The warp runs with 24
// registers: the pair, block and sizes are parked in shared memory and re-read where used, and `half` is a template
// argument (the addresses it selects are constants).
template <typename T, int D, int BN, int kLptPairs, int kLptCtas, int half>
__device__ __forceinline__ void bwd_dq_convert_behind(const HstuParams& p, const CUtensorMap* tm_dq, int lane) {
  BwdConvSmem<D>& cs = bwd_conv_smem<D>();
  const uint32_t bar_cdone = smem_addr(&cs.cdone);
  const uint32_t park = smem_addr(&cs.park[half][0]);
  {
    const int nblk_k = (p.max_seqlen_k + BN - 1) / BN;
    const int gp = bwd_lpt_group_pairs<BN, kLptPairs, kLptCtas>(p);
    const int nq = bwd_dq_chunks(p);
    int src, n;
    bwd_lpt_decode<BN, kLptPairs, kLptCtas>(p, static_cast<int>(blockIdx.x), src, n);
    src -= kBwdConvBehindGroups * gp;
    if (src < 0) return;
    if (lane == 0) {
      st_shared_u32(park, static_cast<uint32_t>(src));
      st_shared_u32(park + 4, static_cast<uint32_t>(n));
      st_shared_u32(park + 8, static_cast<uint32_t>(gp));
      st_shared_u32(park + 12, static_cast<uint32_t>(nq));
#pragma unroll 1
      for (int q2 = n + nblk_k; q2 < nq; q2 += nblk_k) bwd_dq_list_rows(p, gp, nq, src, 128 * q2 + 64 * half);
    }
    __syncwarp();
    if (n >= nq) return;
  }
  // (from here on the pair, block and sizes are re-read from `park` where used)
  auto src_p = [&]() { return static_cast<int>(ld_shared_u32(park)); };
  auto qb_p = [&]() { return static_cast<int>(ld_shared_u32(park + 4)); };
  auto gp_p = [&]() { return static_cast<int>(ld_shared_u32(park + 8)); };
  auto nq_p = [&]() { return static_cast<int>(ld_shared_u32(park + 12)); };
  {
    const uint32_t* done = bwd_dq_done_words(p, gp_p(), nq_p()) + src_p();
    const uint32_t want = 8u * static_cast<uint32_t>((p.max_seqlen_k + BN - 1) / BN);
    bool stop = false;
    while (true) {
      const uint32_t v = ld_relaxed_gpu(done);  // (in flight during the timed wait on the consumers)
      stop = mbar_try_wait_ns(bar_cdone, 0, 2000u);
      if (v >= want || stop) break;
    }
    if (stop) {
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), src_p(), 128 * qb_p() + 64 * half);
      return;
    }
  }
  // (the fence before the first round's loads orders them after both relaxed reads: the count and the zero flag)
  // Round it: rows 16 it of this warp's half. Lane: 4-element group c = lane % (D / 4) (16-byte chunk c % 8 of panel
  // c / 8) of rows lane / (D / 4) + k 128 / D.
  constexpr int kC4 = D / 4;
  constexpr int kStep = 32 / kC4;  // rows per step
#pragma unroll 1
  for (int it = 0; it < 4; ++it) {
    // (opaque: loop invariants hoisted out of this loop cost registers across it)
    const int heads = static_cast<int>(opaque(static_cast<uint32_t>(p.heads)));
    const int sp = src_p();
    const int qb = qb_p();
    const int b = sp / heads;
    const int q_start = p.cu_seqlens_q[b];
    const int rows = p.cu_seqlens_q[b + 1] - q_start;
    const int r = 128 * qb + 64 * half + 16 * it;
    if (r >= rows) break;
    // (the launcher zeroes the first group's chunks; later ones may still wait for their zeroing CTA: listed)
    if (it == 0 && sp >= gp_p() &&
        ld_relaxed_gpu(p.dq_zero_flags + static_cast<int64_t>(sp - gp_p()) * nq_p() + qb) != 2u) {
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), sp, r);
      break;
    }
    if (mbar_test(bar_cdone, 0)) {  // the consumers are done: the rest is the launcher's
      if (lane == 0) bwd_dq_list_rows(p, gp_p(), nq_p(), sp, r);
      break;
    }
    const int h = sp - b * heads;
    if (it == 0) {
      fence_acq_rel_gpu();
      fence_proxy_async_global();  // (the bulk loads below read what the pair's reduce-adds wrote)
    }
    const uint32_t buf = smem_addr(&cs.buf[half][0]);
    const uint32_t bar_buf = smem_addr(&cs.bar[half]);
    if (lane == 0) {
      mbar_arrive_expect_tx(bar_buf, 16 * D * 4);  // whole boxes (rows past the tensor: zero-filled, counted)
#pragma unroll
      for (int pn = 0; pn < D / 32; ++pn) tma_load_3d(buf + pn * 2048, tm_dq, bar_buf, 32 * pn, h, q_start + r);
    }
    mbar_wait(bar_buf, it & 1);
    const int nr = min(16, rows - r);
    const int c = lane % kC4;
    const int64_t row = static_cast<int64_t>(q_start) + r;
    T* out = static_cast<T*>(p.dq) + row * p.dq_row_stride + static_cast<int64_t>(h) * p.dq_head_stride + c * 4;
    const float* ws = p.dq_accum + (row * heads + h) * D + c * 4;
    const uint32_t pa = buf + (c / 8) * 2048;  // panel: row j's chunk k at j * 128 + ((k ^ j % 8) << 4)
    // 32-bit offsets of row j (the op turns the conversion off where 16 rows could pass 2^31 elements)
#pragma unroll 1
    for (int j = lane / kC4; j < nr; j += kStep) {
      // copied: the lane holding a line's first 16 bytes drops it from L2 (never written back; measured: no cost)
      if (c % 8 == 0) {
        asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(ws + static_cast<uint32_t>(j * heads * D)) : "memory");
      }
      float4 x;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
                   : "r"(pa + j * 128 + (((c % 8) ^ (j % 8)) << 4)));
      st_global_v2(out + static_cast<uint32_t>(j * static_cast<int>(p.dq_row_stride)), pack2<T>(x.x, x.y),
                   pack2<T>(x.z, x.w));
    }
    __syncwarp();  // every lane has read the buffer before the next round's loads overwrite it
    fence_proxy_async_smem();
  }
}

// Self-zeroing workspace (p.dq_zero_flags), before the backward kernel: what no CTA zeroes. blockIdx.y < gp: the
// rows of pair blockIdx.y (the first group); gp: the rows before cu_seqlens_q[0] and from cu_seqlens_q[B] on (all
// heads); gp + 1: the flag words.
template <int D>
__global__ void hstu_dq_zero_first_sm90_kernel(const HstuParams p, int gp, int64_t nflags) {
  const int y = blockIdx.y;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int n = gridDim.x * blockDim.x;
  if (y < gp) {
    const int b = y / p.heads;
    const int rows = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    for (int qb = 0; 128 * qb < rows; ++qb) {
      bwd_dq_zero_chunk<D>(p.dq_accum, p.heads, p.cu_seqlens_q[b], rows, y % p.heads, qb, t, n);
    }
  } else if (y == gp) {
    const int64_t rs4 = static_cast<int64_t>(p.heads) * D / 4;
    const int64_t head4 = p.cu_seqlens_q[0] * rs4;
    const int64_t tail4 = p.cu_seqlens_q[p.batch] * rs4;
    const int64_t end4 = p.total_q * rs4;
    for (int64_t e = t; e < head4; e += n) st_global_v4(p.dq_accum + 4 * e, make_uint4(0u, 0u, 0u, 0u));
    for (int64_t e = tail4 + t; e < end4; e += n) st_global_v4(p.dq_accum + 4 * e, make_uint4(0u, 0u, 0u, 0u));
  } else {
    for (int64_t e = t; e < nflags; e += n) p.dq_zero_flags[e] = 0u;
  }
}

// Zeros into the dq rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[batch] on), heads
// [h0, h0 + nh), by 16-byte stores: this thread takes elements (outside row, head, 8-column group) first, first + step,
// ... (the conversion kernels' last duty, so that one launch writes all of dq).
template <typename T, int D>
__device__ __forceinline__ void dq_zero_outside_rows(T* dq, const int* cu_seqlens_q, int batch, int64_t total_q,
                                                     int64_t row_stride, int64_t head_stride, int h0, int nh,
                                                     int64_t first, int64_t step) {
  constexpr int kC8 = D / 8;
  const int64_t lo = cu_seqlens_q[0], hi = cu_seqlens_q[batch];
  const int64_t n_out = lo + (total_q - hi);
  const int64_t per_row = static_cast<int64_t>(nh) * kC8;
  for (int64_t e = first; e < n_out * per_row; e += step) {
    const int64_t r = e / per_row;
    const int64_t row = r < lo ? r : hi + (r - lo);
    const int hh = h0 + static_cast<int>((e % per_row) / kC8);
    st_global_v4(dq + row * row_stride + hh * head_stride + (e % kC8) * 8, make_uint4(0u, 0u, 0u, 0u));
  }
}

// After the kLpt kernel with dq converted behind: what it did not convert: the 64-row halves of the last 2 gp pairs,
// then its list (the rest of a half from a multiple of 16 rows on), by 16-row granules: CTA x takes units x,
// x + gridDim.x, ... (one 8-element group per thread at D = 128; the grid is about all resident at once); then
// the grid writes zeros into the dq rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[B] on),
// all heads.
template <typename T, int D>
__global__ void __launch_bounds__(256) hstu_dq_convert_rest_sm90_kernel(const HstuParams p, int gp) {
  const int pairs = p.batch * p.heads;
  const int nq = bwd_dq_chunks(p);
  const int first = max(0, pairs - kBwdConvBehindGroups * gp);
  const int n_last = (pairs - first) * 2 * nq;
  const uint32_t* list = bwd_dq_list_words(p, gp, nq);
  const int n_items = n_last + static_cast<int>(*list);
  // unit u: 16-row granule u % 4 of item u / 4 (granules before the item's first row, or past its half, are empty)
  for (int u = blockIdx.x; u < 4 * n_items; u += gridDim.x) {
    const int i = u / 4;
    const uint32_t w = i < n_last ? static_cast<uint32_t>(first * 8 * nq + 4 * i) : list[1 + i - n_last];
    const int pair = static_cast<int>(w / (8u * nq));
    const int g0 = static_cast<int>(w % (8u * nq));  // the item's first granule
    const int g = (g0 & ~3) + u % 4;                  // this unit's granule of the item's half
    if (g < g0) continue;
    const int b = pair / p.heads;
    const int q_start = p.cu_seqlens_q[b];
    const int rows = min(16, p.cu_seqlens_q[b + 1] - q_start - 16 * g);
    if (rows > 0) bwd_dq_convert_rows<T, D, 256>(p, q_start, pair - b * p.heads, 16 * g, rows, threadIdx.x);
  }
  dq_zero_outside_rows<T, D>(static_cast<T*>(p.dq), p.cu_seqlens_q, p.batch, p.total_q, p.dq_row_stride,
                             p.dq_head_stride, 0, p.heads, static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x,
                             static_cast<int64_t>(gridDim.x) * 256);
}

// drab (T) <- drab_accum (fp32), both (B, 1, R, C) contiguous: a shared rab's gradient summed over heads.
template <typename T>
__global__ void hstu_drab_convert_sm90_kernel(const float* __restrict__ acc, T* __restrict__ drab, int64_t n) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    drab[idx] = from_float<T>(acc[idx]);
  }
}

// dq (total_q, H, D), any row/head strides (multiples of 8 elements) <- the fp32 workspace (total_q, H, D): 8
// elements per thread and step (two streaming 16-byte loads, one 16-byte store), 32-bit index math (the caller
// launches it over row ranges of at most 2^30 groups of 8; 64-bit divisions made it instruction-bound).
template <typename T, int D>
__global__ void hstu_dq_convert_sm90_kernel(const float* __restrict__ acc, T* __restrict__ dq, int rows, int heads,
                                            int64_t row_stride, int64_t head_stride) {
  // Read once: evict_first, which also takes back the evict_last priority of the lines the D = 128 causal / local
  // backward reduced into (the workspace does not stay favoured in L2 after its conversion).
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  const int n8 = rows * heads * (D / 8);
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n8; idx += gridDim.x * blockDim.x) {
    const int d8 = idx % (D / 8);
    const int rh = idx / (D / 8);
    const int hh = rh % heads;
    const int row = rh / heads;
    float4 a, c;
    const float* src = acc + static_cast<int64_t>(idx) * 8;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w)
                 : "l"(src), "l"(pol));
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(c.x), "=f"(c.y), "=f"(c.z), "=f"(c.w)
                 : "l"(src + 4), "l"(pol));
    const uint4 v = {pack2<T>(a.x, a.y), pack2<T>(a.z, a.w), pack2<T>(c.x, c.y), pack2<T>(c.z, c.w)};
    st_global_v4(dq + row * row_stride + hh * head_stride + d8 * 8, v);
  }
}

// The sequence that owns workspace group g (dq_red_tiled_block's layout) and the group's first row in it, or b = -1 when
// g is a padding group or lies before the first sequence. Called by a whole warp (same g): the groups' first
// indices G_b = (cu_seqlens_q[b] + 16 b) / 16 rise strictly with b, and the warp narrows [lo, hi) 32 ways per round
// (one round up to B = 32, two up to 1024), so a CTA pays one or two dependent loads instead of log2(B).
__device__ __forceinline__ void dq_group_owner(const int* cu_seqlens_q, int batch, int64_t g, int& b, int& row0) {
  const int lane = threadIdx.x % 32;
  auto first_group = [&](int i) { return (static_cast<int64_t>(cu_seqlens_q[i]) + 16 * static_cast<int64_t>(i)) >> 4; };
  int lo = 0, hi = batch;  // the owner is the last i in [lo, hi) with G_i <= g
  b = -1;
  while (hi - lo > 0) {
    const int step = (hi - lo + 31) / 32;
    const int i = lo + lane * step;
    const unsigned below = __ballot_sync(0xffffffffu, i < hi && first_group(i) <= g);
    if (below == 0) break;  // (first round only: g before G_0)
    const int k = 31 - __clz(below);
    lo += k * step;
    if (step == 1) {
      b = lo;
      break;
    }
    hi = min(lo + step, hi);
  }
  if (b < 0) return;
  row0 = 16 * static_cast<int>(g - first_group(b));
  if (row0 >= cu_seqlens_q[b + 1] - cu_seqlens_q[b]) b = -1;  // a padding group behind sequence b
}

// D = 256: dq (total_q, H, 256), any row / head strides (multiples of 8 elements) <- the tiled fp32 workspace
// (dq_red_tiled_block). CTA (x, h) converts workspace groups 4 x .. 4 x + 3 of head h: the grid covers the groups that
// can exist (total_q / 16 + B + 1), not B x the longest sequence's tiles, which for a jagged batch were mostly empty
// CTAs. Each thread issues its 16 coalesced float4 loads first (padding groups are read too, and dropped), and warp
// w < 4 finds the owner of group 4 x + w (dq_group_owner) under their latency; the values are rounded to T into a
// padded shared tile (rows of 132 words: the 8 rows a warp's stores touch land in 8 different bank groups), then
// stored as 16-byte row pieces, rows past a sequence's cu_seqlens length skipped. The CTAs past the groups (x >=
// quads) write zeros into head h of the rows outside every sequence (before cu_seqlens_q[0], from cu_seqlens_q[B]
// on), so one launch writes all of dq.
template <typename T>
__global__ void __launch_bounds__(256) hstu_dq_convert_tiled_sm90_kernel(const float* __restrict__ acc,
                                                                         T* __restrict__ dq, const int* cu_seqlens_q,
                                                                         int batch, int heads, int64_t total_q,
                                                                         int64_t row_stride, int64_t head_stride,
                                                                         int quads) {
  constexpr int kRowWords = 132;
  __shared__ __align__(16) uint32_t tile[64 * kRowWords];
  __shared__ int64_t s_row[4];  // output row of each group's first row, or -1
  __shared__ int s_rows[4];     // rows of the group inside its sequence (0: skip)
  const int x = blockIdx.x, h = blockIdx.y;
  const int t = threadIdx.x, warp = t / 32;
  if (x >= quads) {
    dq_zero_outside_rows<T, 256>(dq, cu_seqlens_q, batch, total_q, row_stride, head_stride, h, 1,
                                 static_cast<int64_t>(x - quads) * 256 + t,
                                 static_cast<int64_t>(gridDim.x - quads) * 256);
    return;
  }
  const int64_t g0 = 4 * static_cast<int64_t>(x);
  // All 16 loads first (every group < 4 quads lies inside the workspace, padding groups too), so that their
  // latency covers the owner search.
  uint64_t pol;  // read once
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  const float* src = acc + (g0 * heads + h) * 4096 + 4 * t;
  const int64_t group_floats = static_cast<int64_t>(heads) * 4096;
  float4 v[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // float4 f = 256 k + t of the 4 groups: group k / 4, float4 f % 1024 of it
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(v[k].x), "=f"(v[k].y), "=f"(v[k].z), "=f"(v[k].w)
                 : "l"(src + (k / 4) * group_floats + 1024 * (k % 4)), "l"(pol));
  }
  if (warp < 4) {
    int b, row0 = 0;
    dq_group_owner(cu_seqlens_q, batch, g0 + warp, b, row0);
    if (t % 32 == 0) {
      s_rows[warp] = b < 0 ? 0 : min(16, cu_seqlens_q[b + 1] - cu_seqlens_q[b] - row0);
      s_row[warp] = b < 0 ? -1 : static_cast<int64_t>(cu_seqlens_q[b]) + row0;
    }
  }
  // float4 f: block (f / 256) % 4, j = (f / 32) % 8, lane f % 32 (rows ln / 4 and ln / 4 + 8 of the group)
  const int ln = t % 32;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int r = 16 * (k / 4) + ln / 4;
    const int w = 32 * (k % 4) + 4 * (t / 32) + ln % 4;  // word (column pair) in the row
    tile[r * kRowWords + w] = pack2<T>(v[k].x, v[k].y);
    tile[(r + 8) * kRowWords + w] = pack2<T>(v[k].z, v[k].w);
  }
  __syncthreads();
  T* out = dq + h * head_stride;
#pragma unroll 4
  for (int k = 0; k < 8; ++k) {
    const int e = 256 * k + t;  // 16-byte chunk e % 32 of row e / 32
    const int r = e / 32;
    const int gr = r / 16;
    if (r % 16 < s_rows[gr]) {
      const uint4 o = lds_b128(smem_addr(tile + r * kRowWords + 4 * (e % 32)));
      st_global_v4(out + (s_row[gr] + r % 16) * row_stride + (e % 32) * 8, o);
    }
  }
}

}  // namespace sm90
}  // namespace hstu
