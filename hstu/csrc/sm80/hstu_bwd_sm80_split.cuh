// The sm80-class backward's split of long key-block walks (kernel_options(fwd_sm80_cfg=14); the workspace's layout
// and the why: hstu_bwd_sm80_walk_split.h): the list kernel that builds the work list on the device, and the merge of
// a split block's fp32 dK / dV partials. The backward's body reads its item with the BODY flag kPdsSplitWalk
// (hstu_bwd_sm80_pds_kernel.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "hstu/csrc/common/hstu_common.cuh"
#include "hstu/csrc/sm80/hstu_bwd_sm80_walk_split.h"

namespace hstu {

// The header's words (the workspace's first 256 bytes): the items' count, the chunk L, the slots used (int32), then
// the byte offsets of the counters, the slots and the list (int64, from byte 16).
struct BwdSplitHeader {
  int count, chunk, slots_used, pad;
  int64_t counters, slots, list;
};

// Weight buckets of the list's order (an item's query tiles, the last bucket for longer ones).
constexpr int kBwdSplitBuckets = 64;

// One CTA of 1,024 threads: warp w takes sequences w, w + 32, ..., its lanes the sequence's key blocks (lk_alloc
// rows: the blocks the backward writes). Pass 1 sums the walks' query tiles (bwd_work_tiles, as the body counts
// them: BM, BN and SKIPGAP its own) into W; L = ceil(W x heads / ctas) (a CTA slot's mean share; `forced` > 0 that
// many tiles instead), at least kBwdSplitMinChunk and W x heads / (2 ctas) (the list's bound, BwdSplitLayout);
// a walk of n > L tiles is cut into nc = ceil(n / L) chunks of ceil(n / nc). Pass 2 counts the items by their
// chunk's tiles, pass 3 writes them heaviest first (a counting sort; the order inside a bucket is the atomics') and
// gives each split block nc slots. Then the split blocks' counters are zeroed and the header written.
template <int BM, int BN, bool SKIPGAP>
__global__ void __launch_bounds__(1024) hstu_bwd_split_list_kernel(const HstuParams p, const int cap,
                                                                   const int slot_cap, const int ctas,
                                                                   const int forced, const BwdSplitHeader off) {
  __shared__ int s_cnt[kBwdSplitBuckets];
  __shared__ unsigned long long s_work;
  __shared__ int s_slot, s_chunk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (tid < kBwdSplitBuckets) s_cnt[tid] = 0;
  if (tid == 0) {
    s_work = 0;
    s_slot = 0;
  }
  __syncthreads();
  // Every (sequence, key block) of the call, f(b, n_block, n_mt).
  auto each_block = [&](auto&& f) {
    for (int b = warp; b < p.batch; b += 32) {
      const SeqInfo si = seq_info(p, b);
      const int nb = (si.lk_alloc + BN - 1) / BN;
      for (int nbk = lane; nbk < nb; nbk += 32) {
        int mb_begin, n_a, gap, n_mt;
        bwd_work_tiles<BM, BN, SKIPGAP>(si, nbk * BN, mb_begin, n_a, gap, n_mt);
        f(b, nbk, n_mt);
      }
    }
  };
  unsigned long long work = 0;
  each_block([&](int, int, int n_mt) { work += n_mt; });
  if (work > 0) atomicAdd(&s_work, work);
  __syncthreads();
  if (tid == 0) {
    const long long w = static_cast<long long>(s_work) * p.heads;
    long long L = forced > 0 ? forced : max(static_cast<long long>(kBwdSplitMinChunk), (w + ctas - 1) / ctas);
    L = max(L, (w + 2LL * ctas - 1) / (2LL * ctas));
    s_chunk = static_cast<int>(min(L, 1LL << 30));
  }
  __syncthreads();
  const int L = s_chunk;
  auto chunks = [&](const int n_mt) { return n_mt > L ? (n_mt + L - 1) / L : 1; };
  auto bucket = [&](const int n_mt, const int nc) {
    return min((n_mt + nc - 1) / nc, kBwdSplitBuckets - 1);
  };
  each_block([&](int, int, int n_mt) {
    const int nc = chunks(n_mt);
    atomicAdd(&s_cnt[bucket(n_mt, nc)], nc);
  });
  __syncthreads();
  __shared__ int s_total;
  if (tid == 0) {  // bucket starts, heaviest first
    int at = 0;
    for (int w = kBwdSplitBuckets - 1; w >= 0; --w) {
      const int n = s_cnt[w];
      s_cnt[w] = at;
      at += n;
    }
    s_total = at;
  }
  __syncthreads();
  char* const ws = static_cast<char*>(p.bwd_sched);
  int4* const list = reinterpret_cast<int4*>(ws + off.list);
  each_block([&](int b, int nbk, int n_mt) {
    int nc = chunks(n_mt);
    const int pos = atomicAdd(&s_cnt[bucket(n_mt, nc)], nc);
    int slot = 0;
    if (nc > 1) {
      slot = atomicAdd(&s_slot, nc);
      if (slot + nc > slot_cap) nc = -nc;  // (past the bound: not reachable with valid lengths; the CTAs skip it)
    }
    for (int c = 0; c < (nc < 0 ? -nc : nc); ++c)
      if (pos + c < cap) list[pos + c] = make_int4(b, nbk, nc < 0 ? -1 : (c | nc << 16), slot);
  });
  __syncthreads();
  int* const counters = reinterpret_cast<int*>(ws + off.counters);
  const int used = min(s_slot, slot_cap);
  for (int i = tid; i < used * p.heads; i += blockDim.x) counters[i] = 0;
  if (tid == 0) {
    BwdSplitHeader hd = off;
    hd.count = min(s_total, cap);
    hd.chunk = L;
    hd.slots_used = used;
    *reinterpret_cast<BwdSplitHeader*>(ws) = hd;
  }
}

// The CTA's item of the split (blockIdx.y; the grid's heads in blockIdx.x): false past the list's count (the CTA
// exits), else b, the key block and the chunk word (chunk | chunks << 16; -1: skip).
__device__ __forceinline__ int4 bwd_split_item(const HstuParams& p) {
  const char* ws = static_cast<const char*>(p.bwd_sched);
  const BwdSplitHeader* hd = reinterpret_cast<const BwdSplitHeader*>(ws);
  if (static_cast<int>(blockIdx.y) >= hd->count) return make_int4(-1, 0, -1, 0);
  return reinterpret_cast<const int4*>(ws + hd->list)[blockIdx.y];
}
// The item again at the end of the walk (not kept in registers across the loop): an L2 read.
__device__ __forceinline__ int4 bwd_split_item_again(const HstuParams& p) {
  const char* ws = static_cast<const char*>(p.bwd_sched);
  const int64_t list = *reinterpret_cast<const volatile int64_t*>(ws + offsetof(BwdSplitHeader, list));
  int4 it;
  asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(it.x), "=r"(it.y), "=r"(it.z), "=r"(it.w)
               : "l"(ws + list + 16 * static_cast<int64_t>(blockIdx.y)));
  return it;
}

// A split block's chunk c of nc (slots slot .. slot + nc - 1, head h): writes its dK / dV accumulators (each
// thread's registers in place, float4 by float4, thread-fastest) into slot + c, then counts itself done; the last
// chunk's CTA sums every slot in chunk order (its own read back too: the same sums whichever CTA is last) into its
// accumulators and returns true (it stores dK / dV); the others return false. (One loop over the slots around
// unrolled loads: a loop per accumulator made the loops above spill ~200 B at D = 128.)
template <int NT, int KMT, int KNT>
__device__ __forceinline__ bool bwd_split_merge(const HstuParams& p, const int h, const int c, const int nc,
                                                const int slot, float (&dk)[KMT][KNT][4], float (&dv)[KMT][KNT][4]) {
  constexpr int KE = KMT * KNT;  // float4s of dK (then as many of dV) a thread
  char* const ws = static_cast<char*>(p.bwd_sched);
  const BwdSplitHeader* hd = reinterpret_cast<const BwdSplitHeader*>(ws);
  const int tid = threadIdx.x;
  const int64_t slot_step = (int64_t)p.heads * 2 * KE * NT;  // float4s from one slot to the next (same head)
  float4* const s0 = reinterpret_cast<float4*>(ws + hd->slots) + (int64_t)h * 2 * KE * NT + tid + slot * slot_step;
  {
    float4* const s = s0 + c * slot_step;
#pragma unroll
    for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
      for (int i = 0; i < KNT; ++i) {
        __stcg(s + (mt * KNT + i) * NT, make_float4(dk[mt][i][0], dk[mt][i][1], dk[mt][i][2], dk[mt][i][3]));
        __stcg(s + (KE + mt * KNT + i) * NT, make_float4(dv[mt][i][0], dv[mt][i][1], dv[mt][i][2], dv[mt][i][3]));
      }
  }
  __threadfence();
  __syncthreads();
  __shared__ int s_last;
  if (tid == 0) {
    int* const counter = reinterpret_cast<int*>(ws + hd->counters) + (int64_t)slot * p.heads + h;
    s_last = atomicAdd(counter, 1) == nc - 1;
  }
  __syncthreads();
  if (!s_last) return false;
  __threadfence();
#pragma unroll
  for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
    for (int i = 0; i < KNT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        dk[mt][i][e] = 0.f;
        dv[mt][i][e] = 0.f;
      }
  for (int k = 0; k < nc; ++k) {
    const float4* const s = s0 + k * slot_step;
#pragma unroll
    for (int mt = 0; mt < KMT; ++mt)
#pragma unroll
      for (int i = 0; i < KNT; ++i) {
        const float4 x = __ldcg(s + (mt * KNT + i) * NT), y = __ldcg(s + (KE + mt * KNT + i) * NT);
        dk[mt][i][0] += x.x;
        dk[mt][i][1] += x.y;
        dk[mt][i][2] += x.z;
        dk[mt][i][3] += x.w;
        dv[mt][i][0] += y.x;
        dv[mt][i][1] += y.y;
        dv[mt][i][2] += y.z;
        dv[mt][i][3] += y.w;
      }
  }
  return true;
}

}  // namespace hstu
