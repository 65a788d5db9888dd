// The Hopper FP8 backward's self-zeroing dq workspace (HstuFp8BwdParams::dq_zero_flags; the bf16 16-row groups of
// kFp8BwdDqBf16 in the 1-D grid of kFp8BwdLptGroups). One flag word per chunk of 128 query rows of a (batch, head)
// pair: 0 untouched, 1 claimed (being zeroed), 2 zero. The pre-pass zeroes the first kFp8ZeroAhead chunks of every
// pair (its quantization blocks are chunks) and writes the flags (2 for those, else 0); in the kernel the producer
// warpgroup's idle warps do the rest, where the stores cost no time of their own and land in L2 shortly before the
// first reduce-add (a copy zeroed by the pre-pass goes to DRAM and is read back by the first reduce-adds): warp 2
// of key block n zeroes chunk n + kFp8ZeroAhead of its own pair (on causal masks the diagonal chunk of the key
// block kFp8ZeroAhead later, dispatched a few CTAs later), claimed by CAS (skipped if someone has); warp 1 walks
// its CTA's chunks in tile order a few tiles ahead of the producer thread (paced by its published tile index) and
// makes sure of each (awaited until zero, or claimed and zeroed if untouched: nobody waits for a CTA that has not
// started, deadlock-free in any dispatch order; the protocol of the bf16 backward's hstu_bwd_sm90_dq.cuh), then
// publishes its index in shared memory; the producer thread hands a tile to the consumers only once the chunk it
// needs is published, and their reduce-adds follow the full barrier's arrive (release) and wait (acquire). Chunks
// nobody zeroed (no tile reached them) have flag 0: the finishing pass writes zeros for them
// (HstuFp8BwdFinishParams::dq_zero_flags). Words: pairs x hstu_fp8_bwd_dq_zero_chunks, the flag of chunk c of pair
// P = b H + h at P chunks + c. (Measured variants, docs/hstu_kernel_notes.md, session 33: zeroing a group of pairs
// ahead -- the zeros evicted and read back --, and just in time by the first CTA to reach a chunk -- the diagonal key
// block's start stalled on it.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hstu/csrc/common/hstu_params.h"
#include "hstu/csrc/sm90/hstu_bwd_fp8_sm90.h"
#include "hstu/csrc/sm90/hstu_bwd_sm90_dq.cuh"  // dq_group_index, ld_acquire_u32, atom_claim_u32, st_release_u32
#include "hstu/csrc/sm90/hstu_sm90_utils.cuh"   // st_global_v4, mbar_wait

namespace hstu {
namespace sm90 {

// Chunk qb of sequence b (rows from q_start, lq_alloc of them), head h: its 16-row groups' 4 KB of head h (256
// 16-byte words each) set to zero by n threads (this one is t of them).
__device__ __forceinline__ void fp8_dq_zero_chunk(float* acc, int heads, int q_start, int b, int lq_alloc, int h,
                                                  int qb, int t, int n) {
  const int words = (min(128, lq_alloc - 128 * qb) + 15) / 16 * 256;
  uint4* g0 = reinterpret_cast<uint4*>(acc) + (dq_group_index(q_start, b, 128 * qb) * heads + h) * 256;
  const uint32_t stride = static_cast<uint32_t>(heads) * 256u;  // 16-byte words per group (every head)
#pragma unroll 1
  for (int e = t; e < words; e += n) st_global_v4(g0 + (e >> 8) * stride + (e & 255), make_uint4(0u, 0u, 0u, 0u));
}

// The share of CTA (pair, n_block) by one warp: chunks n_block + kFp8ZeroAhead, + key blocks, ... of its pair, each
// claimed (skipped if someone has), zeroed, then released.
__device__ __forceinline__ void fp8_dq_zero_ahead(const HstuParams& p, const HstuFp8BwdParams& f, int pair,
                                                  int n_block, int lane) {
  const int b = pair / p.heads;
  const int q_start = p.cu_seqlens_q[b];
  const int lq_alloc = p.cu_seqlens_q[b + 1] - q_start;
  const int nq = hstu_fp8_bwd_dq_zero_chunks(p.max_seqlen_q, p.total_q), nblk_k = (p.max_seqlen_k + 127) / 128;
  uint32_t* flags = f.dq_zero_flags + static_cast<int64_t>(pair) * nq;
#pragma unroll 1
  for (int qb = n_block + kFp8ZeroAhead; 128 * qb < lq_alloc && qb < nq; qb += nblk_k) {
    uint32_t old = 0;
    if (lane == 0) old = atom_claim_u32(flags + qb);
    if (__shfl_sync(0xffffffffu, old, 0) != 0) continue;
    fp8_dq_zero_chunk(f.dq_accum, p.heads, q_start, b, lq_alloc, pair - b * p.heads, qb, lane, 32);
    fence_acq_rel_gpu();
    __syncwarp();
    if (lane == 0) st_release_u32(flags + qb, 2u);
  }
}

// Shared-memory words between the producer warps (release / acquire at CTA scope).
__device__ __forceinline__ void st_release_cta_shared(uint32_t addr, int v) {
  asm volatile("st.release.cta.shared::cta.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire_cta_shared(uint32_t addr) {
  int v;
  asm volatile("ld.acquire.cta.shared::cta.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// Producer warp 1 of CTA (pair b H + h), which walks tiles tile_of(i) = mb_begin + i (+ gap from i = n_a on), i <
// n_mt: the chunks of its tiles in their order, the chunk of tile t once the producer thread has published tile
// t - kFp8ZeroLead (at `progress`), each claimed and zeroed if untouched, else awaited until zero, its index then
// published at `ready` (shared memory, release at CTA scope) for the producer thread (fp8_dq_zero_ready). Chunks
// past max_seqlen_q (the validation empties such sequences) have no flag: published at once.
// (one chunk of fp8_dq_zero_serve: awaited, or claimed and zeroed by the warp, then published)
__device__ __forceinline__ void fp8_dq_zero_serve_chunk(const HstuParams& p, const HstuFp8BwdParams& f, int b, int h,
                                                        int qb, uint32_t ready, int lane) {
  const int nq = hstu_fp8_bwd_dq_zero_chunks(p.max_seqlen_q, p.total_q);
  if (qb < nq) {
    uint32_t* flag = f.dq_zero_flags + static_cast<int64_t>(b * p.heads + h) * nq + qb;
    uint32_t v = 0;
    if (lane == 0) {
      v = ld_acquire_u32(flag);
      if (v == 0) v = atom_claim_u32(flag) == 0u ? 3u : 1u;  // (3: claimed here, zeroed by this warp below)
      while (v == 1) v = ld_acquire_u32(flag);
    }
    if (__shfl_sync(0xffffffffu, v, 0) == 3) {
      const int q_start = p.cu_seqlens_q[b];
      fp8_dq_zero_chunk(f.dq_accum, p.heads, q_start, b, p.cu_seqlens_q[b + 1] - q_start, h, qb, lane, 32);
      fence_acq_rel_gpu();
      __syncwarp();
      if (lane == 0) st_release_u32(flag, 2u);
    }
  }
  __syncwarp();
  if (lane == 0) st_release_cta_shared(ready, qb);
}
// Tiles the producer thread is ahead of warp 1's chunk (fp8_dq_zero_serve): the chunk of tile t is made sure of
// once the producer is at tile t - 2 and needed when it is at t + 2 (t for the last two tiles); the zeros are
// written ~4 tiles (a few us) before the first reduce-add into them.
constexpr int kFp8ZeroLead = 2;
// tmap: the shared-memory address of the CTA's words (int): mb_begin, n_a, gap, n_mt, pair, ready, progress,
// n_block -- re-read from shared memory where used (this warp runs with 24 registers).
__device__ __forceinline__ void fp8_dq_zero_serve(const HstuParams& p, const HstuFp8BwdParams& f, uint32_t tmap,
                                                  int lane) {
  const int n_mt = static_cast<int>(ld_shared_u32(tmap + 12));
  const int pair = static_cast<int>(ld_shared_u32(tmap + 16));
  int last = -1;
#pragma unroll 1
  for (int i = 0; i < n_mt; ++i) {
    const int gap = i >= static_cast<int>(ld_shared_u32(tmap + 4)) ? static_cast<int>(ld_shared_u32(tmap + 8)) : 0;
    const int qb = (static_cast<int>(ld_shared_u32(tmap)) + i + gap) >> 1;  // (64-row tiles, 128-row chunks)
    if (qb == last) continue;
    while (static_cast<int>(ld_shared_u32(tmap + 24)) < i - kFp8ZeroLead) __nanosleep(256);
    fp8_dq_zero_serve_chunk(p, f, pair / p.heads, pair % p.heads, qb, tmap + 20, lane);
    last = qb;
  }
}
// The producer thread, before it hands over a tile of chunk qb: the chunk published by fp8_dq_zero_serve.
__device__ __forceinline__ void fp8_dq_zero_ready(uint32_t ready, int qb) {
  while (ld_acquire_cta_shared(ready) < qb) {
  }
}

}  // namespace sm90
}  // namespace hstu
