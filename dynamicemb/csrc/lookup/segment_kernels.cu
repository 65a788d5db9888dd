// Backward fused with the optimizer as a segmented reduction (no atomics on the hot path).
//
// The dedup gave every id occurrence its unique index (inverse). A stable sort by unique builds the CSR
// unique -> occurrences on the device (capture-safe, no host sync, no atomics: hot ids would serialize a
// counting sort's per-unique atomics):
//   keys     key = unique of each occurrence (or n: reserved id; pooled: outside every bag), value = its index
//   sort     radix sort of (key, index) pairs over the bits of n (stable: a segment lists its occurrences in
//            id order, so the sums below do not depend on scheduling): cub's onesweep passes launched by hand
//            after our keys + histogram pass (below), or cub::DeviceRadixSort::SortPairs
//   bounds   start[u] / end[u] where the sorted keys change, the number of valid entries, and per entry
//            (unique, gradient row: bag (pooled) or id (sequence)) and, with per-sample weights or mean
//            pooling, its scale
// Then one warp reduces C consecutive CSR entries (a fixed share of the work, whatever the segment lengths):
// it gathers the bag gradient of every entry (K rows in flight per lane, the rows of the run ends loaded
// alongside) and sums a run of equal uniques in registers. A run that is its unique's whole segment (every
// segment that does not cross a warp's boundary: all but at most two per warp) applies the optimizer to
// [embedding | state] once, with plain loads and stores. A segment cut by warp boundaries (hot ids) is summed
// in pieces: plain fp32 SGD adds -lr * piece straight into the row (16-byte vector atomics, a few per hot row),
// other optimizers add the piece into the unique's fp32 sum, and the piece that completes the segment (a
// per-unique counter of summed occurrences) applies the optimizer and re-zeroes the sum and the counter.
// The CSR is in unique order, and the dedup numbers uniques in (roughly) the order of their first occurrence,
// so concurrent warps read the bag gradients of nearby bags (L2 reuse; singletons read them in stream order).
// Results are deterministic except for the rows of segments cut by warp boundaries into 3+ pieces, or into 2
// by plain fp32 SGD (their pieces add in arrival order; the dedup's numbering, and so the cuts, is the same in
// every run). launch_segment_csr (keys, sort, bounds) needs only the dedup's output, so the training forward
// runs it on a side stream (op lookup_step, fork_segment_csr); a sequence step forks the sort earlier, after the
// dedup's count pass, keyed by claimer position (the same order: fork_segment_sort), and the bounds after the
// dedup (fork_segment_bounds); launch_segmented_backward runs the apply kernel. The kernel's L2 traffic
// (bag-gradient gathers and row read-modify-writes, ~5-7 GB per step of the benchmark) bounds it, so fp32 rows
// are read and written evict-first (ld/st.global.cs; Adam's past L1 without the hint: run_segmented) and plain
// fp32 SGD adds -lr * sum into a whole segment's row with one vector reduction per lane (no row load). The forms
// (K, blocks per SM, row hint) are chosen per optimizer by A/B on an H200 (benchmarks/RESULTS.md).
#include <atomic>
#include <mutex>
#include <type_traits>
#include <vector>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "dynamicemb/csrc/lookup/optimizer.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kSegBlock = 256;

__device__ __forceinline__ int64_t seg_clamp(int64_t v, int64_t n) { return v < 0 ? 0 : (v > n ? n : v); }

// ---------------------------------------------------------------- the CSR's sort, dispatched by hand
// cub's onesweep kernels launched directly, with our own keys pass in front: seg_keys_hist_kernel writes the
// (key, position) pairs and counts every pass's digits (a shared-memory histogram per block, then one global
// add per bin), and its last block turns the counts into each pass's exclusive digit offsets (what cub's
// histogram and exclusive-sum kernels compute). The counters, bins and per-pass look-back words start at zero:
// the step's dedup clear pass zeroes them (DedupParams::zero), else one memset. Against
// cub::DeviceRadixSort::SortPairs: 4 launches instead of 11 (no memsets, no histogram / exclusive-sum kernels),
// no per-call occupancy and attribute queries (H200, NVIDIA preset: host issue ~-60-110 us per step, device time
// unchanged). 8-bit digits and cub's tile by default; 10-bit digits (2 passes for ~1M ids) are a lab variant: a
// 10-bit pass costs ~1.8x an 8-bit one (256-thread blocks to fit the ranking's per-warp counters in 48 KB).
// Same stable order as cub's own dispatch (same kernels; an LSD radix sort is stable for any digit width).
template <int RB, int THREADS, int IPT>
struct SortCfg {
  static constexpr int kBits = RB, kDigits = 1 << RB, kThreads = THREADS, kTile = THREADS * IPT;
  struct Policy : cub::ChainedPolicy<500, Policy, Policy> {
    using OnesweepPolicy =
        cub::AgentRadixSortOnesweepPolicy<THREADS, IPT, uint32_t, 1, cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY,
                                          cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT, RB>;
  };
  static_assert(Policy::OnesweepPolicy::BLOCK_THREADS == THREADS && Policy::OnesweepPolicy::ITEMS_PER_THREAD == IPT,
                "onesweep policy: 4-byte keys keep the nominal tile");
};
using SortHand8 = SortCfg<8, 384, 21>;    // cub's own sm80 / sm90 onesweep tile, 8-bit digits
using SortHand10 = SortCfg<10, 256, 16>;  // 10-bit digits, 4,096-key tiles
using SortHand10W = SortCfg<10, 256, 24>; // 10-bit digits, 6,144-key tiles
struct SortHand8Match : SortHand8 {};    // lab: SortHand8 with the warp-aggregated histogram (kMatch)

constexpr int kSortHeader = 8;  // scratch words: [0, 4) the passes' tile counters, [7] the keys pass's ticket
constexpr int kKeysBlock = 1024, kKeysPer = 8;

template <typename C>
constexpr int sort_max_passes() { return (31 + C::kBits - 1) / C::kBits; }

// Scratch words (int32) the hand sort uses and needs zeroed: header, bins of every pass, look-back of every pass.
template <typename C>
int64_t sort_words(int64_t n, int bits) {
  const int passes = (bits + C::kBits - 1) / C::kBits;
  const int64_t blocks = (n + C::kTile - 1) / C::kTile;
  return kSortHeader + static_cast<int64_t>(sort_max_passes<C>()) * C::kDigits + passes * blocks * C::kDigits;
}

// Keys (the unique of occurrence i, or n: contributes nothing) and values (i) into the first pass's input
// buffer, and the digit counts of every pass; the last block to finish writes the passes' exclusive offsets.
// kMatch (lab): one shared add per distinct digit of a warp (__match_any_sync) instead of one per key; slower on
// the H200 (docs/dynamicemb.md, "The CSR's sort by hand").
template <int RB, bool kMatch = false>
__global__ void __launch_bounds__(kKeysBlock) seg_keys_hist_kernel(BackwardParams p, uint32_t* keys, int32_t* vals,
                                                                  int32_t* sc, int passes) {
  constexpr int D = 1 << RB;
  constexpr int kMaxPasses = (31 + RB - 1) / RB;
  __shared__ int hist[kMaxPasses * D];
  __shared__ bool last;
  for (int k = threadIdx.x; k < passes * D; k += kKeysBlock) hist[k] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) p.seg_start[p.n] = 0;  // the valid entries' total (seg_bounds sets it)
  int64_t lo = 0, hi = p.n;
  if (p.pooling != kPoolNone) {
    lo = seg_clamp(p.offsets[0], p.n);
    hi = seg_clamp(p.offsets[p.num_bags], p.n);
  }
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (kKeysBlock * kKeysPer) + threadIdx.x;
  int32_t u[kKeysPer];
#pragma unroll
  for (int r = 0; r < kKeysPer; ++r) {
    const int64_t i = base + r * kKeysBlock;
    u[r] = i < p.n ? (p.keys_by_claimer ? static_cast<int32_t>(keys[i]) : p.inverse[i]) : -1;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kKeysPer; ++r) {
    const int64_t i = base + r * kKeysBlock;
    const bool live = i < p.n;
    const uint32_t key = live && u[r] >= 0 && i >= lo && i < hi ? static_cast<uint32_t>(u[r]) : static_cast<uint32_t>(p.n);
    if (live) {
      if (!p.keys_by_claimer) keys[i] = key;
      vals[i] = static_cast<int32_t>(i);
    }
    for (int q = 0; q < passes; ++q) {
      const int dig = static_cast<int>((key >> (q * RB)) & (D - 1));
      if constexpr (kMatch) {
        const unsigned act = __ballot_sync(0xffffffffu, live);
        const unsigned peers = __match_any_sync(0xffffffffu, live ? dig : -1);
        if (live && (peers & ((1u << lane) - 1u) & act) == 0) atomicAdd(hist + q * D + dig, __popc(peers));
      } else if (live) {
        atomicAdd(hist + q * D + dig, 1);
      }
    }
  }
  __syncthreads();
  int32_t* bins = sc + kSortHeader;
  for (int k = threadIdx.x; k < passes * D; k += kKeysBlock)
    if (hist[k] != 0) atomicAdd(bins + k, hist[k]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(sc + 7, 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  using Scan = cub::BlockScan<int, kKeysBlock>;
  __shared__ typename Scan::TempStorage tmp;
  static_assert(D <= kKeysBlock, "one bin per thread");
  for (int q = 0; q < passes; ++q) {
    const int v = threadIdx.x < D ? __ldcg(bins + q * D + threadIdx.x) : 0;
    int ex = 0;
    Scan(tmp).ExclusiveSum(v, ex);
    if (threadIdx.x < D) bins[q * D + threadIdx.x] = ex;
    __syncthreads();
  }
}

// Sort keys: the unique of occurrence i, or n when it contributes nothing (reserved id; pooled: outside every
// bag), so the valid entries sort first.
__global__ void __launch_bounds__(kSegBlock) seg_keys_kernel(BackwardParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kSegBlock + threadIdx.x;
  if (i == 0) p.seg_start[p.n] = 0;  // the valid entries' total (seg_bounds sets it when there are any)
  if (i >= p.n) return;
  p.seg_vals[i] = static_cast<int32_t>(i);
  if (p.keys_by_claimer) return;  // (a sequence's keys, written by the dedup's count pass)
  int32_t u = p.inverse[i];
  if (p.pooling != kPoolNone) {
    const int64_t lo = seg_clamp(p.offsets[0], p.n), hi = seg_clamp(p.offsets[p.num_bags], p.n);
    if (i < lo || i >= hi) u = -1;
  }
  p.seg_keys[i] = u >= 0 ? u : static_cast<int32_t>(p.n);
}

// One thread per sorted entry r: segment bounds where the key changes, the total, and the CSR entry.
__global__ void __launch_bounds__(kSegBlock) seg_bounds_kernel(BackwardParams p) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kSegBlock + threadIdx.x;
  if (r >= p.n) return;
  const int32_t* keys = p.seg_keys + p.n;  // sorted
  const int32_t k = keys[r];
  if (k >= p.n) return;
  const int32_t u = p.keys_by_claimer ? p.inverse[k] : k;  // (a claimer's position -> its unique)
  const int32_t nx = r + 1 < p.n ? keys[r + 1] : static_cast<int32_t>(p.n);
  if (r == 0 || keys[r - 1] != k) p.seg_start[u] = static_cast<int32_t>(r);
  if (nx != k) p.seg_end[u] = static_cast<int32_t>(r + 1);
  if (nx >= p.n) p.seg_start[p.n] = static_cast<int32_t>(r + 1);  // valid entries in total
  const int32_t i = p.seg_vals[p.n + r];
  const int32_t b = p.pooling == kPoolNone ? 0 : p.bag[i];  // a sequence's dedup may write no bags
  reinterpret_cast<int2*>(p.seg_occ)[r] = make_int2(u, p.pooling == kPoolNone ? i : b);
  if (p.seg_scale != nullptr) {
    float sc = p.psw ? p.psw[i] : 1.f;
    if (p.pooling == kPoolMean) {
      const int64_t len = seg_clamp(p.offsets[b + 1], p.n) - seg_clamp(p.offsets[b], p.n);
      sc = sc / static_cast<float>(len > 1 ? len : 1);
    }
    p.seg_scale[r] = sc;
  }
}

// N elements of a row that is read once and written back: fp32 4-wide loads bypass L1 (ld.global.cg), so rows
// do not evict the bag gradients that neighbouring entries read again.
// H != 0: fp32 4-wide rows are loaded and stored evict-first in L2 (ld/st.global.cs), so the row traffic
// (each row read and written once) does not displace the bag gradients that other CSR entries gather again.
template <int V, int N, int H = 0>
__device__ __forceinline__ void load_once(const typename Val<V>::T* p, float (&x)[N]) {
  if constexpr (V == kValueFp32 && N == 4) {
    const float4 v = H ? __ldcs(reinterpret_cast<const float4*>(p)) : __ldcg(reinterpret_cast<const float4*>(p));
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
  } else {
    load_n<V, N>(p, x);
  }
}

template <int V, int N, int H = 0>
__device__ __forceinline__ void store_row_n(typename Val<V>::T* p, const float (&x)[N]) {
  if constexpr (V == kValueFp32 && N == 4 && H != 0) {
    __stcs(reinterpret_cast<float4*>(p), make_float4(x[0], x[1], x[2], x[3]));
  } else {
    store_n<V, N>(p, x);
  }
}

// Adam's bf16 moments (S != 0) stay packed in the registers of the K entries in flight until their row is applied:
// with N = 4, s1[0..1] hold m and s2[0..1] v as bf16 pairs (half the registers of fp32 moments; the kernel's K
// entries of fp32 moments made it spill); other N hold fp32 values.
template <int N>
__device__ __forceinline__ void load_moments_packed(const float* row, int d, int c, float (&s1)[N], float (&s2)[N]) {
  if constexpr (N == 4) {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(row + d);
    const uint2 x = __ldcg(reinterpret_cast<const uint2*>(s + c));
    const uint2 y = __ldcg(reinterpret_cast<const uint2*>(s + d + c));
    s1[0] = __uint_as_float(x.x);
    s1[1] = __uint_as_float(x.y);
    s2[0] = __uint_as_float(y.x);
    s2[1] = __uint_as_float(y.y);
  } else {
    load_moments_bf16<N>(row, d, c, s1, s2);
  }
}
// load_moments_packed's moments as fp32 values, in place.
template <int N>
__device__ __forceinline__ void unpack_moments(float (&s1)[N], float (&s2)[N]) {
  if constexpr (N == 4) {
    const uint32_t m0 = __float_as_uint(s1[0]), m1 = __float_as_uint(s1[1]);
    const uint32_t v0 = __float_as_uint(s2[0]), v1 = __float_as_uint(s2[1]);
    s1[0] = __uint_as_float(m0 << 16);
    s1[1] = __uint_as_float(m0 & 0xffff0000u);
    s1[2] = __uint_as_float(m1 << 16);
    s1[3] = __uint_as_float(m1 & 0xffff0000u);
    s2[0] = __uint_as_float(v0 << 16);
    s2[1] = __uint_as_float(v0 & 0xffff0000u);
    s2[2] = __uint_as_float(v1 << 16);
    s2[3] = __uint_as_float(v1 & 0xffff0000u);
  }
}

// The row's state columns the optimizer reads (Adagrad: d, Adam: 2 d, or d words of bf16 m and v with S != 0
// (fp32 rows, optimizer.cuh; packed, above); RowWiseAdagrad: one scalar).
template <int V, int N, int OPT, int H = 0, int S = 0>
__device__ __forceinline__ void load_row(const typename Val<V>::T* row, int d, int c, float (&w)[N],
                                         float (&s1)[N], float (&s2)[N], float& rs) {
  if (c < d) {
    load_once<V, N, H>(row + c, w);
    if constexpr (S != 0) {
      load_moments_packed<N>(reinterpret_cast<const float*>(row), d, c, s1, s2);
    } else {
      if constexpr (OPT == kAdagrad || OPT == kAdam) load_once<V, N, H>(row + d + c, s1);
      if constexpr (OPT == kAdam) load_once<V, N, H>(row + 2 * d + c, s2);
    }
  }
  if constexpr (OPT == kRowWiseAdagrad) rs = Val<V>::to_f(row[d]);
}

// Clip and apply the optimizer (optimizer.cuh) to one row: the unique's summed gradient g, then store
// [embedding | state]. Whole warp (row-wise: a warp sum).
template <int V, int N, int OPT, int H = 0, int S = 0>
__device__ __forceinline__ void apply_row(const BackwardParams& p, const OptConst& oc, typename Val<V>::T* row,
                                          int d, int c, float (&g)[N], float (&w)[N], float (&s1)[N],
                                          float (&s2)[N], float rs) {
  const bool on = c < d;
  float sq = 0.f;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float v = clip_grad(g[e], p.max_grad_value, 1.f);
    g[e] = v;
    if (on) sq += v * v;
  }
  if constexpr (OPT == kRowWiseAdagrad) {
    if (p.weight_decay != 0.f) {
      sq = 0.f;
      if (on) decayed_sq<N>(g, w, p.weight_decay, sq);
    }
    rs = rowwise_state(rs, warp_sum(sq), d);
    if ((threadIdx.x & 31) == 0) row[d] = Val<V>::from_f(rs);
  }
  if constexpr (S != 0) unpack_moments<N>(s1, s2);
  opt_update<N>(OPT, p, oc, g, w, s1, s2, rs);
  if (on) {
    if constexpr (S != 0) {
      store_moments_bf16<N>(reinterpret_cast<float*>(row), d, c, s1, s2, oc.step);
    } else {
      if constexpr (OPT == kAdagrad || OPT == kAdam) store_row_n<V, N, H>(row + d + c, s1);
      if constexpr (OPT == kAdam) store_row_n<V, N, H>(row + 2 * d + c, s2);
    }
    store_row_n<V, N, H>(row + c, w);
  }
}

// The non-finite policy of a whole row's summed gradient g (warp-uniform call): true when the row is to be
// skipped (counted once).
template <int N>
__device__ __forceinline__ bool skip_nonfinite(const BackwardParams& p, const float (&g)[N], bool on) {
  if (p.nonfinite == kNonFinitePropagate || row_finite<N>(g, on)) return false;
  count_skipped_row(p.nonfinite_count, threadIdx.x & 31);
  return true;
}

// A piece of a segment cut by warp boundaries (warp-uniform call). Plain fp32 SGD that propagates non-finite
// gradients: row += -lr * piece (atomic). Else the piece goes into the segment's fp32 sum (the gsum row of the
// warp the segment starts in: at most one cut segment starts in a warp); the piece that completes the segment
// checks the sum (non-finite policy), applies the optimizer and re-zeroes the sum and the counter.
template <int V, int N, int OPT, int S = 0>
__device__ __forceinline__ void cut_piece(const BackwardParams& p, const OptConst& oc, int32_t u,
                                          typename Val<V>::T* row, int d, int c, int piece, float (&acc)[N]) {
  if (p.direct && p.nonfinite == kNonFinitePropagate) {
    if (c < d) {
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = -oc.lr * acc[e];
      red_n<N>(reinterpret_cast<float*>(row) + c, acc);
    }
    return;
  }
  float* gs = p.gsum + static_cast<int64_t>(p.seg_start[u] / p.seg_chunk) * p.gsum_stride;
  if (c < d) red_n<N>(gs + c, acc);
  __threadfence();
  __syncwarp();
  int32_t old = 0;
  if ((threadIdx.x & 31) == 0) old = atomicAdd(p.seg_done + u, piece);
  old = __shfl_sync(0xffffffffu, old, 0);
  if (old + piece != p.seg_end[u] - p.seg_start[u]) return;
  __threadfence();  // the last piece: every other piece's sum is in L2
  float g[N], w[N], s1[N], s2[N], rs = 0.f;
#pragma unroll
  for (int e = 0; e < N; ++e) g[e] = w[e] = s1[e] = s2[e] = 0.f;
  if (c < d) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      g[e] = __ldcg(gs + c + e);
      __stcg(gs + c + e, 0.f);
    }
  }
  if ((threadIdx.x & 31) == 0) p.seg_done[u] = 0;
  if (skip_nonfinite<N>(p, g, c < d)) return;
  load_row<V, N, OPT, 0, S>(row, d, c, w, s1, s2, rs);
  apply_row<V, N, OPT, 0, S>(p, oc, row, d, c, g, w, s1, s2, rs);
}

// The step counter advanced inside the update (p.step_bump: no add kernel and no launch gap before it). A block's
// first thread reads the step before this update into shared memory (the block's threads read it there after the
// barrier), then counts the block in p.seg_done[p.n]; the block that counts last writes step + 1 and re-zeroes the
// counter. Each block's read has returned before its count, so no block reads the step after it changes. Returns
// where the block holds the step count this update applies (step + 1, what the tensor add before the update gave;
// opt_const reads it). Whole block, before any thread leaves; only the first warp waits for the count.
__device__ __forceinline__ const float* bump_step_last_block(const BackwardParams& p) {
  __shared__ float now;
  if (threadIdx.x == 0) now = __ldcg(p.step_bump) + 1.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    int* ctr = p.seg_done + p.n;
    if (atomicAdd(ctr, 1) == static_cast<int>(gridDim.x) - 1) {
      __threadfence();
      *ctr = 0;
      *p.step_bump = now;
    }
  }
  return &now;
}

// One warp per C consecutive CSR entries; rounds of 32 entries (lane l holds entry base + l: unique, gradient
// element offset, scale, dim, row address), K entries at a time: the K gradient rows and the rows of the K
// entries' run ends are loaded before the first use. H: 0 rows past L1 (ld.global.cg); 1 fp32 rows evict-first
// in L2 (ld/st.global.cs). MINB: blocks per SM the registers are fitted to. R (plain fp32 SGD, p.direct): a whole
// segment adds -lr * sum into its row with vector reductions (red.global.add: the row is never read by the SM,
// one 512-byte L2 transfer instead of a load and a store; one add per row, so still deterministic).
// S (Adam over fp32 rows): m and v as bf16 (BackwardParams::state_bf16, optimizer.cuh).
// Launched as a programmatic dependent of the stream's previous kernel (sm90+), it waits for it first.
template <int V, int N, int OPT, int K, int H, int MINB, int R = 0, int S = 0>
__global__ void __launch_bounds__(kSegBlock, MINB) seg_apply_kernel(BackwardParams p) {
  using T = typename Val<V>::T;
  accel::griddep_wait();
  // the step counter (p.step_bump): plain SGD never reads it (the first thread adds 1); Adam's bias corrections
  // read it in every block (bump_step_last_block)
  if (p.step_bump != nullptr) {
    if constexpr (OPT == kAdam) p.step = bump_step_last_block(p);
    else if (blockIdx.x == 0 && threadIdx.x == 0) *p.step_bump += 1.f;
  }
  const int lane = threadIdx.x & 31;
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * kSegBlock + threadIdx.x) >> 5;
  const int64_t total = p.seg_start[p.n];
  const int64_t w0 = w * p.seg_chunk;
  if (w0 >= total) return;
  const int64_t w1 = w0 + p.seg_chunk < total ? w0 + p.seg_chunk : total;
  const int32_t u_first = p.seg_occ[w0].x, u_last = p.seg_occ[w1 - 1].x;
  const bool first_cut = p.seg_start[u_first] < w0;
  const bool last_cut = p.seg_end[u_last] > w1;
  const OptConst oc = opt_const(p);
  const int c = lane * N;
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  int piece = 0;  // entries summed into acc (warp-uniform)
  for (int64_t base = w0; base < w1; base += 32) {
    const int cnt = static_cast<int>(w1 - base < 32 ? w1 - base : 32);
    int32_t u = -1, un = -1;
    int64_t goff = 0;
    float sc = 1.f;
    int dim = 0;
    uint64_t rowa = 0;
    if (lane < cnt) {
      const int2 e = reinterpret_cast<const int2*>(p.seg_occ)[base + lane];
      u = e.x;
      if (p.seg_scale != nullptr) sc = p.seg_scale[base + lane];
      if (p.pooling == kPoolNone) {
        goff = static_cast<int64_t>(e.y) * p.out_stride;
      } else {
        int64_t f = e.y / p.batch;
        if (f >= p.num_features) f = p.num_features - 1;
        goff = (e.y - f * p.batch) * p.out_stride + p.feature_col[f];
      }
      const TableMeta& m = p.meta[p.utables[u]];
      dim = static_cast<int>(m.dim);
      const int64_t r = p.urow[u];
      if (p.uaddr != nullptr) rowa = p.uaddr[u];  // a step over hybrid tables: host rows in HBM scratch
      else if (r >= 0) rowa = reinterpret_cast<uint64_t>(meta_row<T>(m, r));
    }
    un = __shfl_down_sync(0xffffffffu, u, 1);
    if (lane == cnt - 1) un = base + cnt < w1 ? p.seg_occ[base + cnt].x : -1;
    const unsigned ends = __ballot_sync(0xffffffffu, lane < cnt && un != u);
    const bool cut = (u == u_first && first_cut) || (u == u_last && last_cut);
    // run ends whose row is updated here with plain loads and stores
    const unsigned owned = __ballot_sync(0xffffffffu, lane < cnt && un != u && !cut && rowa != 0);
    for (int q0 = 0; q0 < cnt; q0 += K) {
      float g[K][N], wv[K][N], s1[K][N], s2[K][N], rs[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int q = q0 + k;
        const int64_t gq = __shfl_sync(0xffffffffu, goff, q & 31);
        const int dq = __shfl_sync(0xffffffffu, dim, q & 31);
        const T* rq = reinterpret_cast<const T*>(__shfl_sync(0xffffffffu, rowa, q & 31));
        rs[k] = 0.f;
#pragma unroll
        for (int e = 0; e < N; ++e) g[k][e] = wv[k][e] = s1[k][e] = s2[k][e] = 0.f;
        if (q < cnt && c < dq) load_n<kValueFp32, N>(p.grad + gq + c, g[k]);
        if constexpr (R == 0) {
          if (q < cnt && ((owned >> q) & 1u)) load_row<V, N, OPT, H, S>(rq, dq, c, wv[k], s1[k], s2[k], rs[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int q = q0 + k;
        if (q >= cnt) break;
        const float sq = __shfl_sync(0xffffffffu, sc, q);
#pragma unroll
        for (int e = 0; e < N; ++e) acc[e] += g[k][e] * sq;
        ++piece;
        if (((ends >> q) & 1u) == 0) continue;
        if ((owned >> q) & 1u) {
          T* rq = reinterpret_cast<T*>(__shfl_sync(0xffffffffu, rowa, q));
          const int dq = __shfl_sync(0xffffffffu, dim, q);
          if (skip_nonfinite<N>(p, acc, c < dq)) {
            // the row keeps its value (non-finite policy)
          } else if constexpr (R != 0) {
            if (c < dq) {
#pragma unroll
              for (int e = 0; e < N; ++e) acc[e] = -oc.lr * acc[e];
              red_n<N>(reinterpret_cast<float*>(rq) + c, acc);
            }
          } else {
            apply_row<V, N, OPT, H, S>(p, oc, rq, dq, c, acc, wv[k], s1[k], s2[k], rs[k]);
          }
        } else {
          const int32_t uq = __shfl_sync(0xffffffffu, u, q);
          const uint64_t rq = __shfl_sync(0xffffffffu, rowa, q);
          const int dq = __shfl_sync(0xffffffffu, dim, q);
          if (rq != 0)  // warp-uniform; a unique without a row has nothing to update
            cut_piece<V, N, OPT, S>(p, oc, uq, reinterpret_cast<T*>(rq), dq, c, piece, acc);
        }
#pragma unroll
        for (int e = 0; e < N; ++e) acc[e] = 0.f;
        piece = 0;
      }
    }
  }
}

// Lab: the form of the bf16-moment Adam update (4-wide fp32 rows): 0 the fp32 moments' form (2 entries in flight, 4
// blocks per SM), 1 at 3 blocks per SM (no register cap below 85). segment_bf16_form sets it (op
// _lookup_lab_seg_bf16; 0 or 1, other values only read it) and returns the one before.
std::atomic<int> g_bf16_form{0};

// The fp32 4-wide kernel's form per optimizer, picked by A/B on an H200 (NVIDIA's config; benchmarks/RESULTS.md,
// docs/dynamicemb.md): plain SGD adds whole segments with reductions, 8 entries in flight at 3 blocks per SM, rows
// evict-first; Adam 2 entries in flight at 4 blocks per SM, rows past L1 (ld.global.cg, no evict-first hint: each
// row is read and written once, nothing else to keep in L2 with pooling none); Adagrad and row-wise Adagrad as
// listed. Other value types keep the 2-block kernel, rows past L1. With the step's programmatic launches
// (kStepPdl, sm90+) the 4-wide kernel is a programmatic dependent of the pass before it.
template <int V, int N, int OPT>
void run_segmented(const BackwardParams& p, cudaStream_t st) {
  constexpr int K = (OPT == kSgd || OPT == kRowWiseAdagrad) ? 8 : 4;
  const int64_t warps = (p.n + p.seg_chunk - 1) / p.seg_chunk;
  const unsigned grid = blocks_for(warps, kSegBlock / 32);
  if constexpr (V == kValueFp32 && N == 4) {
    const bool pdl = pdl_supported() && (dedup_flags_variant(-1) & (kDedupPdl | kStepPdl)) == (kDedupPdl | kStepPdl);
    if constexpr (OPT == kSgd) {
      if (p.direct) launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 8, 1, 3, 1>, grid, kSegBlock, st, p);
      else launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 4, 1, 3>, grid, kSegBlock, st, p);
    } else if constexpr (OPT == kRowWiseAdagrad) {
      launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, K, 1, 2>, grid, kSegBlock, st, p);
    } else if constexpr (OPT == kAdam) {
      if (!p.state_bf16) launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 2, 0, 4>, grid, kSegBlock, st, p);
      else if (g_bf16_form.load() == 1)
        launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 2, 0, 3, 0, 1>, grid, kSegBlock, st, p);
      else
        launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 2, 0, 4, 0, 1>, grid, kSegBlock, st, p);
    } else {
      launch_maybe_pdl(pdl, seg_apply_kernel<V, N, OPT, 2, 1, 4>, grid, kSegBlock, st, p);
    }
  } else {
    if constexpr (OPT == kAdam && V == kValueFp32) {
      if (p.state_bf16) {
        seg_apply_kernel<V, N, OPT, K, 0, 2, 0, 1><<<grid, kSegBlock, 0, st>>>(p);
        check_launch("segmented update");
        return;
      }
    }
    seg_apply_kernel<V, N, OPT, K, 0, 2><<<grid, kSegBlock, 0, st>>>(p);
  }
  check_launch("segmented update");
}

}  // namespace detail

int segment_bf16_form(int v) {
  const int old = detail::g_bf16_form.load();
  if (v == 0 || v == 1) detail::g_bf16_form.store(v);
  return old;
}

int segment_sort_bits(int64_t n) {
  int bits = 1;
  while ((int64_t(1) << bits) <= n) ++bits;  // keys 0..n
  return bits;
}

namespace {
// The CSR sort's variant (lab: op _lookup_lab_csr_sort; benchmarks compare them in one process). Default: cub's
// DeviceRadixSort; the hand-launched onesweep (kCsrSortHand8) issues ~7 fewer host calls per step, but with the host
// ahead both give the same step time (docs/dynamicemb.md, "The CSR's sort by hand" and "The eval and train steps'
// host issue").
std::atomic<int> g_csr_sort{kCsrSortCub};

// The hand sort runs one onesweep portion (cub splits larger inputs): n up to 2^28 - a tile.
template <typename C>
bool hand_fits(int64_t n) { return n <= ((int64_t(1) << 28) - 1) / C::kTile * C::kTile; }

template <typename F>
void with_sort_cfg(int v, F&& f) {
  switch (v) {
    case kCsrSortHand10: f(detail::SortHand10{}); break;
    case kCsrSortHand10W: f(detail::SortHand10W{}); break;
    case kCsrSortHand8Match: f(detail::SortHand8Match{}); break;
    default: f(detail::SortHand8{}); break;
  }
}
}  // namespace

int csr_sort_variant(int v) {
  const int old = g_csr_sort.load();
  if (v >= kCsrSortCub && v <= kCsrSortHand8Match) g_csr_sort.store(v);
  return old;
}

size_t segment_scan_bytes(int64_t n) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<int>(n), 0, segment_sort_bits(n));
  const int bits = segment_sort_bits(n);
  for (int v = kCsrSortHand8; v <= kCsrSortHand8Match; ++v)
    with_sort_cfg(v, [&](auto c) {
      using C = decltype(c);
      const size_t b = static_cast<size_t>(detail::sort_words<C>(n, bits)) * 4;
      if (b > bytes) bytes = b;
    });
  return bytes;
}

size_t segment_sort_zero_bytes(int64_t n) {
  const int v = g_csr_sort.load();
  size_t bytes = 0;
  if (v == kCsrSortCub || n == 0) return 0;
  with_sort_cfg(v, [&](auto c) {
    using C = decltype(c);
    if (hand_fits<C>(n)) bytes = (static_cast<size_t>(detail::sort_words<C>(n, segment_sort_bits(n))) * 4 + 15) / 16 * 16;
  });
  return bytes;
}

namespace {
// The keys pass and the sort of launch_segment_csr (the bounds follow: launch_segment_bounds).
void launch_segment_sort(const BackwardParams& p, cudaStream_t st) {
  if (p.n == 0) return;
  auto fail = [](const char* what, cudaError_t e) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string("dynamicemb lookup: ") + what + ": " + cudaGetErrorString(e));
  };
  const int bits = segment_sort_bits(p.n);
  const int v = g_csr_sort.load();
  bool done = false;
  if (v != kCsrSortCub) {
    with_sort_cfg(v, [&](auto c) {
      using C = decltype(c);
      if (!hand_fits<C>(p.n)) return;
      const int passes = (bits + C::kBits - 1) / C::kBits;
      const int64_t words = detail::sort_words<C>(p.n, bits);
      if (static_cast<size_t>(words) * 4 > p.scan_temp_bytes) throw std::runtime_error("dynamicemb lookup: sort scratch");
      int32_t* sc = static_cast<int32_t*>(p.scan_temp);
      if (!p.sort_zeroed) fail("sort scratch memset", cudaMemsetAsync(sc, 0, static_cast<size_t>(words) * 4, st));
      // pass q reads buffer s ^ (q & 1) and writes the other; the last writes buffer 1 (seg_keys + n)
      uint32_t* kb[2] = {reinterpret_cast<uint32_t*>(p.seg_keys), reinterpret_cast<uint32_t*>(p.seg_keys + p.n)};
      int32_t* vb[2] = {p.seg_vals, p.seg_vals + p.n};
      const int s0 = (passes - 1) & 1;
      constexpr bool kMatch = std::is_same_v<C, detail::SortHand8Match>;
      detail::seg_keys_hist_kernel<C::kBits, kMatch><<<blocks_for(p.n, detail::kKeysBlock * detail::kKeysPer),
                                                       detail::kKeysBlock, 0, st>>>(p, kb[s0], vb[s0], sc, passes);
      check_launch("segment keys");
      const int blocks = static_cast<int>((p.n + C::kTile - 1) / C::kTile);
      int32_t* lookback = sc + detail::kSortHeader + detail::sort_max_passes<C>() * C::kDigits;
      for (int q = 0; q < passes; ++q) {
        const int in = s0 ^ (q & 1), bit = q * C::kBits;
        const int nb = bits - bit < C::kBits ? bits - bit : C::kBits;
        cub::detail::radix_sort::DeviceRadixSortOnesweepKernel<typename C::Policy, cub::SortOrder::Ascending, uint32_t,
                                                               int32_t, int32_t, int, int>
            <<<blocks, C::kThreads, 0, st>>>(lookback + static_cast<int64_t>(q) * blocks * C::kDigits, sc + q, nullptr,
                                             sc + detail::kSortHeader + q * C::kDigits, kb[in ^ 1], kb[in], vb[in ^ 1],
                                             vb[in], static_cast<int>(p.n), bit, nb);
        check_launch("segment sort");
      }
      done = true;
    });
  }
  if (!done) {
    detail::seg_keys_kernel<<<blocks_for(p.n, detail::kSegBlock), detail::kSegBlock, 0, st>>>(p);
    check_launch("segment keys");
    size_t bytes = p.scan_temp_bytes;
    fail("segment sort", cub::DeviceRadixSort::SortPairs(p.scan_temp, bytes, p.seg_keys, p.seg_keys + p.n, p.seg_vals,
                                                         p.seg_vals + p.n, static_cast<int>(p.n), 0, bits, st));
  }
}

void launch_segment_bounds(const BackwardParams& p, cudaStream_t st) {
  if (p.n == 0) return;
  detail::seg_bounds_kernel<<<blocks_for(p.n, detail::kSegBlock), detail::kSegBlock, 0, st>>>(p);
  check_launch("segment bounds");
}
}  // namespace

void launch_segment_csr(const BackwardParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  launch_segment_sort(p, st);
  launch_segment_bounds(p, st);
}

namespace {
void cuda_ok(const char* what, cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("dynamicemb lookup: ") + what + ": " + cudaGetErrorString(e));
}

// One non-blocking, highest-priority side stream per device, made on first use and kept for the process.
cudaStream_t side_stream(int device) {
  static std::mutex mu;
  static std::vector<cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(streams.size()) <= device) streams.resize(device + 1, nullptr);
  if (!streams[device]) {
    int lo = 0, hi = 0;
    cuda_ok("stream priorities", cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cuda_ok("side stream", cudaStreamCreateWithPriority(&streams[device], cudaStreamNonBlocking, hi));
  }
  return streams[device];
}

// The fork's two events of this thread on `device` (ready: the dedup is done; done: the CSR is built), made once
// and re-recorded every step: a wait takes the event's state when it is enqueued, and a thread joins its fork in
// the same op before it forks again, so no step waits on another's record (per thread: threads may step at once).
struct ForkEvents {
  cudaEvent_t ready = nullptr, done = nullptr, numbered = nullptr;  // numbered: fork_segment_bounds's
};
struct ThreadForkEvents {  // destroyed with the thread (errors ignored: the runtime may be gone at exit)
  std::vector<ForkEvents> per_device;
  ~ThreadForkEvents() {
    for (ForkEvents& e : per_device)
      if (e.ready) {
        cudaEventDestroy(e.ready);
        cudaEventDestroy(e.done);
        cudaEventDestroy(e.numbered);
      }
  }
};
ForkEvents& fork_events(int device) {
  thread_local ThreadForkEvents events;
  std::vector<ForkEvents>& v = events.per_device;
  if (static_cast<int>(v.size()) <= device) v.resize(device + 1);
  ForkEvents& e = v[device];
  if (!e.ready) {
    cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < 3; ++k) {
      const cudaError_t err = cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming);
      if (err != cudaSuccess)
        for (int j = 0; j < k; ++j) cudaEventDestroy(ev[j]);
      cuda_ok("event", err);
    }
    e.ready = ev[0];
    e.done = ev[1];
    e.numbered = ev[2];
  }
  return e;
}
}  // namespace

namespace {
// launch(side) on the device's side stream after the work queued on `stream` so far (through the event `mark`),
// then the side stream's done event, which the caller joins (join_side_stream).
template <typename F>
void* on_side_stream(void* stream, cudaEvent_t ForkEvents::*mark, F&& launch) {
  int dev = 0;
  cuda_ok("device", cudaGetDevice(&dev));
  cudaStream_t side = side_stream(dev);
  ForkEvents& ev = fork_events(dev);
  cuda_ok("event record", cudaEventRecord(ev.*mark, static_cast<cudaStream_t>(stream)));
  cuda_ok("stream wait", cudaStreamWaitEvent(side, ev.*mark, 0));
  launch(side);
  cuda_ok("event record", cudaEventRecord(ev.done, side));
  return ev.done;
}

bool capturing(void* stream) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  cuda_ok("capture status", cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &cap));
  return cap != cudaStreamCaptureStatusNone;
}
}  // namespace

void* fork_segment_csr(const BackwardParams& p, void* stream) {
  if (p.n == 0 || capturing(stream)) {  // nothing to overlap, or a capture: stay on `stream`
    launch_segment_csr(p, stream);
    return nullptr;
  }
  return on_side_stream(stream, &ForkEvents::ready, [&](cudaStream_t side) { launch_segment_csr(p, side); });
}

int32_t* segment_csr_first_keys(const BackwardParams& p, void* stream) {
  if (p.n == 0 || capturing(stream)) return nullptr;
  int32_t* first = p.seg_keys;  // cub's dispatch: seg_keys_kernel's output
  const int v = g_csr_sort.load();
  if (v != kCsrSortCub)
    with_sort_cfg(v, [&](auto c) {
      using C = decltype(c);
      if (!hand_fits<C>(p.n)) return;
      const int passes = (segment_sort_bits(p.n) + C::kBits - 1) / C::kBits;
      first = ((passes - 1) & 1) ? p.seg_keys + p.n : p.seg_keys;  // launch_segment_sort's kb[s0]
    });
  return first;
}

void* fork_segment_sort(const BackwardParams& p, void* stream) {
  return on_side_stream(stream, &ForkEvents::ready, [&](cudaStream_t side) { launch_segment_sort(p, side); });
}

void* fork_segment_bounds(const BackwardParams& p, void* stream) {
  return on_side_stream(stream, &ForkEvents::numbered, [&](cudaStream_t side) { launch_segment_bounds(p, side); });
}

void join_side_stream(void* token, void* stream) {
  if (!token) return;
  cuda_ok("stream join", cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(token), 0));
}

void zero_async(void* ptr, size_t bytes, void* stream) {
  cuda_ok("memset", cudaMemsetAsync(ptr, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  cuda_ok("copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

template <int V>
void launch_segmented_backward(const BackwardParams& p, bool vec4, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (p.n == 0) return;
  auto go = [&](auto n_tag) {
    constexpr int N = decltype(n_tag)::value;
    switch (p.opt) {
      case kSgd: detail::run_segmented<V, N, kSgd>(p, st); break;
      case kAdagrad: detail::run_segmented<V, N, kAdagrad>(p, st); break;
      case kRowWiseAdagrad: detail::run_segmented<V, N, kRowWiseAdagrad>(p, st); break;
      default: detail::run_segmented<V, N, kAdam>(p, st); break;
    }
  };
  if (vec4) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 1>{});
}

template void launch_segmented_backward<kValueFp16>(const BackwardParams&, bool, void*);
template void launch_segmented_backward<kValueBf16>(const BackwardParams&, bool, void*);
template void launch_segmented_backward<kValueFp32>(const BackwardParams&, bool, void*);

}  // namespace lookup
}  // namespace dynamicemb
