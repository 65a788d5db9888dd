// The FP8 backward's device pre-pass (hstu_fp8_bwd_prepass.h says what it writes and why). Plain CUDA (no sm_90a
// instructions): compiled for every arch of the build; the conversions use cuda_fp8.h (round to nearest even,
// saturated to +-448, NaN kept), bit-equal to torch's `.clamp(-448, 448).to(torch.float8_e4m3fn)`.
#include "hstu/csrc/fp8/hstu_fp8_bwd_prepass.h"

#include "common/device_info.h"
#include "hstu/csrc/common/hstu_validate_block.cuh"  // check_scales_block

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <type_traits>

namespace hstu {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

__device__ __forceinline__ uint8_t to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// The slot (within its group of 32) of row r under hstu_fp8_key_perm (its inverse: key_perm(slot) == r).
__device__ __forceinline__ int quant_slot_of_row(int r) {
  // key_perm(s) = hi + 2 t + (i & 1) + 8 (i >> 1) with hi = s & 16, t = (s & 15) >> 2, i = s & 3
  const int hi = r & 16, lo8 = r & 15;
  const int i = (lo8 & 1) | ((lo8 >> 3) << 1), t = (lo8 & 7) >> 1;
  return hi + 4 * t + i;
}

// Block (col, h): dO's block column col of head h (quantize_fp8's "block" layout: sequence b's block m is column
// cu_q[b] / 128 + b + m). amax over the block's used rows (NaN propagates, as torch.amax), descale = amax / 448
// (IEEE division; at least FLT_MIN; 1.0 for a zero, NaN or empty block, as torch.where(amax > 0, ...)), rows
// x / descale in e4m3, unused rows 0. Block col == do_cols zeroes the rows of no sequence.
// The same block writes dO^T's columns of its rows (no second read of do8): its 128 rows' e4m3 bytes go to a shared
// tile by destination slot (slot s of the block's columns holds row (s & ~31) + hstu_fp8_key_perm(s & 31); rows past
// the sequence 0), then per row d of the copy 16-byte column groups of the block's column range (quant_dot_cols:
// the last block of a sequence also zeroes the columns up to the next sequence's first; the extra block the columns
// before sequence 0's).
// The pre-pass may run before the validation's verdict (the op launches it first): it reads every offset clamped to
// [0, total] and bounds every row / column it touches by the tensors' extents, so bad int32 vectors cost no memory
// fault (the kernel then sees the validation's empty sequences and ignores what was written); valid vectors read as
// they are (the clamps change no value).
__device__ __forceinline__ int clamped_offset(const int* cu, int i, int64_t total) {
  return static_cast<int>(min(max(int64_t{cu[i]}, int64_t{0}), total));
}

// kCheck (p.check_claim set): block 0 of the grid's x runs the descale factors' check (check_scales_block) beside the
// quantization's blocks, which start from x = 1 (its index unsigned as blockIdx.x: a 64-bit one costs 8 registers).
template <typename T, bool kCheck>
__global__ void __launch_bounds__(kThreads) fp8_quant_do_kernel(const HstuFp8BwdPrepassParams p) {
  __shared__ float red[kThreads / 32];
  __shared__ int nan_seen;
  extern __shared__ __align__(16) uint8_t qtile[];  // 128 slots x (D + 16) bytes (dO^T's rows of this block)
  if constexpr (kCheck) {
    if (blockIdx.x == 0) {
      __shared__ unsigned long long s_first;
      if (blockIdx.y == 0) validate::check_scales_block(p.check, p.check_claim, &s_first, threadIdx.x, kThreads);
      return;
    }
  }
  const unsigned bx = blockIdx.x - (kCheck ? 1u : 0u);
  // (a 1-D grid, the head fastest: the blocks running together read whole rows of dout and write whole rows of do8;
  // else (past 2^31 blocks) the grid (column, head))
  const bool flat = gridDim.y == 1;
  const int h = flat ? static_cast<int>(bx % p.heads) : static_cast<int>(blockIdx.y);
  const int D = p.head_dim, vecs = D / 8;
  const int64_t col = flat ? bx / p.heads : bx;
  const T* dout = static_cast<const T*>(p.dout) + static_cast<int64_t>(h) * p.do_head_stride;
  uint8_t* do8 = p.do8 + static_cast<int64_t>(h) * D;
  const int64_t out_row = static_cast<int64_t>(p.heads) * D;
  const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
  uint8_t* dot = p.dot + static_cast<int64_t>(h) * D * p.q_cols;  // this head's dO^T (D rows of q_cols bytes)
  const int* cu = p.cu_seqlens_q;
  const int64_t tq = p.total_q;
  if (col == p.do_cols) {  // rows past cu_q[batch]; dO^T's columns before sequence 0's first
    const int64_t c0 = min(hstu_fp8_vt_start(clamped_offset(cu, 0, tq), 0), p.q_cols);
    for (int64_t i = threadIdx.x; i < D * (c0 / 16); i += kThreads) {
      *reinterpret_cast<uint4*>(dot + (i / (c0 / 16)) * p.q_cols + 16 * (i % (c0 / 16))) = make_uint4(0, 0, 0, 0);
    }
    for (int64_t r = clamped_offset(cu, p.batch, tq) + threadIdx.x / vecs; r < tq; r += kThreads / vecs) {
      if (threadIdx.x < (kThreads / vecs) * vecs) {
        *reinterpret_cast<uint2*>(do8 + r * out_row + (threadIdx.x % vecs) * 8) = make_uint2(0, 0);
      }
    }
    if (p.dq_zero != nullptr && !p.dq_tiled) {  // dq_accum's rows outside every sequence (head h)
      const int64_t lo = clamped_offset(cu, 0, tq), hi = max(int64_t{clamped_offset(cu, p.batch, tq)}, lo);
      const int64_t n4 = (lo + p.total_q - hi) * (D / 4);
      for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
        const int64_t r = i / (D / 4) < lo ? i / (D / 4) : i / (D / 4) - lo + hi;
        reinterpret_cast<float4*>(p.dq_zero + (r * p.heads + h) * D)[i % (D / 4)] = zero4;
      }
    }
    return;
  }
  int lo = 0, hi = p.batch;  // the largest b with cu_q[b] / 128 + b <= col (strictly increasing in b)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (clamped_offset(cu, mid, tq) / 128 + mid <= col) lo = mid; else hi = mid;
  }
  // (start + len <= total_q and m >= -start / 128: rows r0 .. r0 + n - 1 lie in [0, total_q) for any values)
  const int start = clamped_offset(cu, lo, tq), len = max(clamped_offset(cu, lo + 1, tq) - start, 0);
  const int64_t m = col - (start / 128 + lo);
  const int su = p.seqused_q != nullptr ? p.seqused_q[lo] : len;
  const int used = max(min(su, len), 0);  // (hstu_fp8_used_rows on the clamped offsets)
  const int n = static_cast<int>(max(int64_t{0}, min(int64_t{128}, len - 128 * m)));    // rows of the block
  const int nu = static_cast<int>(max(int64_t{0}, min(int64_t{128}, used - 128 * m)));  // of them used
  const int64_t r0 = start + 128 * m;
  if (threadIdx.x == 0) nan_seen = 0;
  float amax = 0.f;
  bool nan = false;
  for (int i = threadIdx.x; i < nu * vecs; i += kThreads) {
    const int r = i / vecs, c = (i % vecs) * 8;
    const uint4 raw = *reinterpret_cast<const uint4*>(dout + (r0 + r) * p.do_row_stride + c);
    const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float v = fabsf(to_float(x[e]));
      nan |= v != v;
      amax = fmaxf(amax, v);
    }
  }
  __syncthreads();
  if (nan) nan_seen = 1;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, red[w]);
  const float descale = !nan_seen && amax > 0.f ? fmaxf(__fdiv_rn(amax, 448.f), FLT_MIN) : 1.f;
  if (threadIdx.x == 0 && n > 0) p.do_descale[static_cast<int64_t>(h) * p.do_cols + col] = descale;
  if (threadIdx.x == 0 && n == 0) p.do_descale[static_cast<int64_t>(h) * p.do_cols + col] = 1.f;
  if (p.dq_zero != nullptr) {  // the block's rows of the dq workspace (head h)
    if (p.dq_tiled) {  // its 16-row groups (cu_q + 16 b) / 16 + 8 m + k: 16 D contiguous floats per group and head
      const int64_t g0 = (static_cast<int64_t>(start) + 16 * lo) / 16 + 8 * m;
      const int per = p.dq_bf16 ? 2 * D : 4 * D;  // float4 per group and head (bf16 groups: half)
      for (int i = threadIdx.x; i < (n + 15) / 16 * per; i += kThreads) {
        reinterpret_cast<float4*>(p.dq_zero + ((g0 + i / per) * p.heads + h) * 4 * per)[i % per] = zero4;
      }
    } else {
      for (int i = threadIdx.x; i < n * (D / 4); i += kThreads) {
        reinterpret_cast<float4*>(p.dq_zero + ((r0 + i / (D / 4)) * p.heads + h) * D)[i % (D / 4)] = zero4;
      }
    }
  }
  // the tile: slot s's D bytes at s (D + 16), 16-byte chunk k at k ^ (s / 16 & swz) (conflict-free reads of one d
  // across the 16-column groups where D / 16 is a power of two; unswizzled otherwise)
  const int tile_row = D + 16, swz = (D & (D - 1)) == 0 ? min(D / 16 - 1, 7) : 0;
  for (int i = threadIdx.x; i < 128 * vecs; i += kThreads) {
    const int r = i / vecs, c = (i % vecs) * 8;
    uint32_t w[2] = {0, 0};
    if (r < nu) {
      const uint4 raw = *reinterpret_cast<const uint4*>(dout + (r0 + r) * p.do_row_stride + c);
      const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int e = 0; e < 8; ++e) w[e / 4] |= static_cast<uint32_t>(to_e4m3(__fdiv_rn(to_float(x[e]), descale)))
                                              << (8 * (e % 4));
    }
    if (r < n) *reinterpret_cast<uint2*>(do8 + (r0 + r) * out_row + c) = make_uint2(w[0], w[1]);
    const int slot = (r & ~31) + quant_slot_of_row(r & 31);  // (rows past n: zeros, for their columns)
    *reinterpret_cast<uint2*>(qtile + slot * tile_row + (((c >> 4) ^ ((slot >> 4) & swz)) << 4) + (c & 15)) =
        make_uint2(w[0], w[1]);
  }
  // dO^T: columns [c_begin, c_end) of this block (16-byte aligned), slot = column - c_begin (>= 128: zero)
  const int64_t first = hstu_fp8_vt_start(start, lo);
  const int64_t seq_end =
      min(lo + 1 < p.batch ? hstu_fp8_vt_start(clamped_offset(cu, lo + 1, tq), lo + 1) : p.q_cols, p.q_cols);
  const int64_t c_begin = first + 128 * m;
  const int64_t c_end = 128 * (m + 1) >= len ? seq_end : min(c_begin + 128, seq_end);
  __syncthreads();
  const int groups = c_end > c_begin ? static_cast<int>(min((c_end - c_begin) / 16, int64_t{INT_MAX / 256})) : 0;
  for (int idx = threadIdx.x; idx < D * groups; idx += kThreads) {
    const int d = idx / groups, g = idx % groups;
    uint32_t wd[4] = {0, 0, 0, 0};
    if (g < 8) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint8_t* t = qtile + (16 * g + 4 * q) * tile_row + (((d >> 4) ^ (g & swz)) << 4) + (d & 15);
        wd[q] = static_cast<uint32_t>(t[0]) | static_cast<uint32_t>(t[tile_row]) << 8 |
                static_cast<uint32_t>(t[2 * tile_row]) << 16 | static_cast<uint32_t>(t[3 * tile_row]) << 24;
      }
    }
    *reinterpret_cast<uint4*>(dot + d * p.q_cols + c_begin + 16 * g) = make_uint4(wd[0], wd[1], wd[2], wd[3]);
  }
}

// One transposed copy: source bytes (rows, H, D), destination (H, D, cols), slot -> row permutation in groups of
// `group` (32: hstu_fp8_key_perm, 16: hstu_fp8_pair_perm).
struct TransposeJob {
  const uint8_t* src;
  int64_t row_stride, head_stride, cols;
  uint8_t* dst;
  const int* cu;
  const int* seqused;
  int group;
};

// Block (x, h, z): columns [kCols x, kCols x + kCols) of head h of job z (qt, dot, kt): the source rows' D bytes
// into shared memory (every load issued before the first store; 16-byte chunk c of column col at chunk
// c ^ (col / 16 % 8), so that the eight 16-column groups a warp reads for one d sit in eight different banks), then
// per row d of the copy kCols contiguous bytes. kRow: a column's bytes in the tile (D + 16 at most; the swizzled
// chunk indices stay below D / 16 rounded up to 8): 272 for D = 256; 144 for D <= 128 (19 KB and 32 registers: 8
// blocks an SM, where the 272-byte tile's 55 registers let 4). Source rows outside [0, rows) read as zero columns
// (bad int32 vectors: the pre-pass may run before the validation's verdict).
constexpr int kCols = 128;
template <int kRow>
__global__ void __launch_bounds__(kThreads) fp8_transpose_kernel(const HstuFp8BwdPrepassParams p) {
  __shared__ __align__(16) uint8_t tile[kCols][kRow];
  __shared__ int64_t src_row[kCols];
  // (selected field by field: an indexed array would live in local memory; dO^T: the quantization's blocks)
  const bool kz = blockIdx.z == 1;
  TransposeJob j;
  j.src = kz ? p.k8 : p.q8;
  j.row_stride = kz ? p.k_row_stride : p.q_row_stride;
  j.head_stride = kz ? p.k_head_stride : p.q_head_stride;
  j.cols = kz ? p.k_cols : p.q_cols;
  j.dst = kz ? p.kt : p.qt;
  j.cu = kz ? p.cu_seqlens_k : p.cu_seqlens_q;
  j.seqused = kz ? p.seqused_k : p.seqused_q;
  j.group = kz ? 16 : 32;
  const bool flat = gridDim.y == 1;  // (the head fastest in x, as the quantization's grid)
  const int h = flat ? static_cast<int>(blockIdx.x % p.heads) : static_cast<int>(blockIdx.y);
  const int D = p.head_dim;
  const int64_t c0 = static_cast<int64_t>(flat ? blockIdx.x / p.heads : blockIdx.x) * kCols;
  if (c0 >= j.cols) return;
  if (threadIdx.x < kCols) {
    const int64_t r = hstu_fp8_col_src_row(j.cu, j.seqused, p.batch, c0 + threadIdx.x, j.group);
    src_row[threadIdx.x] = r < (kz ? p.total_k : p.total_q) ? r : -1;
  }
  __syncthreads();
  const int chunks = D / 16;
  const uint8_t* src = j.src + static_cast<int64_t>(h) * j.head_stride;
  constexpr int kLoads = kCols * ((kRow - 16) / 16) / kThreads;  // (16-byte chunks of D <= kRow - 16)
  uint4 x[kLoads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int idx = threadIdx.x + k * kThreads;
    x[k] = make_uint4(0, 0, 0, 0);
    if (idx < kCols * chunks) {
      const int64_t r = src_row[idx / chunks];
      if (r >= 0) x[k] = *reinterpret_cast<const uint4*>(src + r * j.row_stride + (idx % chunks) * 16);
    }
  }
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int idx = threadIdx.x + k * kThreads;
    const int col = idx / chunks;
    if (idx < kCols * chunks) *reinterpret_cast<uint4*>(&tile[col][((idx % chunks) ^ ((col >> 4) & 7)) * 16]) = x[k];
  }
  __syncthreads();
  uint8_t* dst = j.dst + static_cast<int64_t>(h) * D * j.cols;
  constexpr int kGroups = kCols / 16;  // 16-byte column groups per row of the copy
  for (int idx = threadIdx.x; idx < D * kGroups; idx += kThreads) {
    const int d = idx / kGroups, g = idx % kGroups;
    const int64_t c = c0 + 16 * g;
    if (c >= j.cols) continue;
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint8_t* t = &tile[16 * g + 4 * q][(((d >> 4) ^ (g & 7)) << 4) | (d & 15)];
      w[q] = static_cast<uint32_t>(t[0]) | static_cast<uint32_t>(t[kRow]) << 8 |
             static_cast<uint32_t>(t[2 * kRow]) << 16 | static_cast<uint32_t>(t[3 * kRow]) << 24;
    }
    *reinterpret_cast<uint4*>(dst + d * j.cols + c) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// 8 fp32 -> 8 bf16 / fp16 (round to nearest even, as torch's .to()).
template <typename T>
__device__ __forceinline__ uint4 round8(float4 a, float4 b);
template <>
__device__ __forceinline__ uint4 round8<__nv_bfloat16>(float4 a, float4 b) {
  const __nv_bfloat162 r[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                               __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
  return *reinterpret_cast<const uint4*>(r);
}
template <>
__device__ __forceinline__ uint4 round8<__half>(float4 a, float4 b) {
  const __half2 r[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w), __floats2half2_rn(b.x, b.y),
                        __floats2half2_rn(b.z, b.w)};
  return *reinterpret_cast<const uint4*>(r);
}

// Grid-stride over groups of 8 elements: dq's groups first, then those of the dk / dv rows outside every sequence.
template <typename T>
__global__ void __launch_bounds__(kThreads) fp8_bwd_finish_kernel(const HstuFp8BwdFinishParams p) {
  const int64_t per_row = static_cast<int64_t>(p.heads) * p.head_dim / 8;
  const int64_t n_dq = p.total_q * per_row;
  const int64_t lo = clamped_offset(p.cu_seqlens_k, 0, p.total_k);
  const int64_t hi = max(int64_t{clamped_offset(p.cu_seqlens_k, p.batch, p.total_k)}, lo);
  const int64_t n_out = (lo + p.total_k - hi) * per_row;  // groups outside, in dk (then the same in dv)
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  const float4* acc = reinterpret_cast<const float4*>(p.dq_accum);
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; g < n_dq + 2 * n_out; g += step) {
    if (g < n_dq) {
      reinterpret_cast<uint4*>(p.dq)[g] = round8<T>(__ldcs(acc + 2 * g), __ldcs(acc + 2 * g + 1));
    } else {
      const int64_t o = (g - n_dq) % n_out;
      const int64_t row = o / per_row < lo ? o / per_row : o / per_row - lo + hi;
      uint4* dst = reinterpret_cast<uint4*>(g - n_dq < n_out ? p.dk : p.dv);
      dst[row * per_row + o % per_row] = make_uint4(0, 0, 0, 0);
    }
  }
}

// The rows outside every sequence (dq's, then dk's and dv's) zeroed, grid-stride over `blocks` blocks from `b`.
__device__ __forceinline__ void zero_rows_outside(const HstuFp8BwdFinishParams& p, int64_t b, int64_t blocks) {
  const int64_t per_row = static_cast<int64_t>(p.heads) * p.head_dim / 8;  // 8-element groups per row
  const int64_t lo_q = clamped_offset(p.cu_seqlens_q, 0, p.total_q);
  const int64_t hi_q = max(int64_t{clamped_offset(p.cu_seqlens_q, p.batch, p.total_q)}, lo_q);
  const int64_t lo_k = clamped_offset(p.cu_seqlens_k, 0, p.total_k);
  const int64_t hi_k = max(int64_t{clamped_offset(p.cu_seqlens_k, p.batch, p.total_k)}, lo_k);
  const int64_t n_q = (lo_q + p.total_q - hi_q) * per_row, n_k = (lo_k + p.total_k - hi_k) * per_row;
  for (int64_t g = b * kThreads + threadIdx.x; g < n_q + 2 * n_k; g += blocks * kThreads) {
    uint4* dst;
    int64_t o, lo, hi;
    if (g < n_q) {
      dst = reinterpret_cast<uint4*>(p.dq), o = g, lo = lo_q, hi = hi_q;
    } else {
      dst = reinterpret_cast<uint4*>(g - n_q < n_k ? p.dk : p.dv), o = (g - n_q) % n_k, lo = lo_k, hi = hi_k;
    }
    const int64_t row = o / per_row < lo ? o / per_row : o / per_row - lo + hi;
    dst[row * per_row + o % per_row] = make_uint4(0, 0, 0, 0);
  }
}

// The rows of 16-row dq group x: its owner, the largest b with (cu_q[b] + 16 b) / 16 <= x (strictly increasing in
// b), the sequence's first row `start`, the group's first row in the sequence `first` and its row count (<= 0: x is
// below the first sequence's groups, or padding).
struct DqGroupRows {
  int64_t start, first, rows;
};
__device__ __forceinline__ DqGroupRows dq_group_rows(const HstuFp8BwdFinishParams& p, int64_t x) {
  int lo = 0, hi = p.batch;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if ((static_cast<int64_t>(p.cu_seqlens_q[mid]) + 16 * mid) / 16 <= x) lo = mid; else hi = mid;
  }
  DqGroupRows g;
  g.start = p.cu_seqlens_q[lo];
  g.first = 16 * (x - (g.start + 16 * lo) / 16);
  g.rows = min(int64_t{16}, int64_t{p.cu_seqlens_q[lo + 1]} - g.start - g.first);
  return g;
}

// dq_tiled's fp32 groups (D = 64, 128, 256; the bf16 groups: the quad kernel below): block (x, h) with x < groups puts
// group x of head h (16 rows, two blocks of D / 2 columns in a warp's m64n(D / 2) accumulator order: float4 32 j + l
// holds rows l / 4 and l / 4 + 8, columns 8 j + 2 (l % 4), + 1) back into the rows of the sequence that owns it (the
// largest b with (cu_q[b] + 16 b) / 16 <= x; rows past its length skipped) through shared memory; blocks x >= groups
// (head 0's) zero the dq rows outside every sequence and the dk / dv rows outside every sequence, grid-stride.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) fp8_bwd_finish_tiled_kernel(const HstuFp8BwdFinishParams p,
                                                                        int64_t groups) {
  static_assert(D == 64 || D == 128 || D == 256, "the FP8 backward's head dims");
  constexpr int kRow = D + 4;  // (padded rows: the float2 stores of a warp spread over the banks)
  __shared__ __align__(16) float tile[16 * kRow];
  const int64_t x = blockIdx.x;
  const int h = blockIdx.y, t = threadIdx.x;
  const int64_t per_row = static_cast<int64_t>(p.heads) * D / 8;  // 8-element groups per row
  if (x >= groups) {
    if (h == 0) zero_rows_outside(p, x - groups, static_cast<int64_t>(gridDim.x) - groups);
    return;
  }
  const DqGroupRows g = dq_group_rows(p, x);
  const int64_t start = g.start, first = g.first, rows = g.rows;
  if (first < 0 || rows <= 0) return;  // (x below the first sequence's groups, or padding)
  const float4* src = reinterpret_cast<const float4*>(p.dq_accum) + (x * p.heads + h) * (4 * D);
#pragma unroll
  for (int k = 0; k < D / 64; ++k) {
    const int i = t + 256 * k;  // float4 index in the group's 2 x 2 D
    const int blk = i / (2 * D), j = (i % (2 * D)) / 32, l = i % 32;
    const float4 v = __ldcs(src + i);
    const int c = (D / 2) * blk + 8 * j + 2 * (l % 4);
    *reinterpret_cast<float2*>(&tile[(l / 4) * kRow + c]) = make_float2(v.x, v.y);
    *reinterpret_cast<float2*>(&tile[(l / 4 + 8) * kRow + c]) = make_float2(v.z, v.w);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < (2 * D + 255) / 256; ++k) {  // 16 rows x D / 8 groups of 8 columns
    const int i = t + 256 * k;
    const int r = i / (D / 8), c8 = i % (D / 8);
    if (i < 2 * D && r < rows) {
      const float* a = &tile[r * kRow + 8 * c8];
      reinterpret_cast<uint4*>(p.dq)[(start + first + r) * per_row + h * (D / 8) + c8] =
          round8<T>(*reinterpret_cast<const float4*>(a), *reinterpret_cast<const float4*>(a + 4));
    }
  }
}

// dq_bf16's groups (D = 64, 128, 256) back into rows without shared memory: block x < row_blocks puts kQuadPairs
// (group, head) pairs back (pair x kQuadPairs + k kSub + threadIdx.x / 2 D for k < kPer: group / heads, head % heads;
// 2 D uint4 a pair, one per thread (D = 256: two, uint4 t and t + 256), every load issued before the owner's search). uint4 u = t % 2 D of a pair holds
// the bf16 pairs (rows a, a + 8) x (column blocks j, j + 1) of lane l = u % 32 (a = l / 4, j = 2 (u % D / 32),
// columns (D / 2) (u / D) + 8 j + 2 (l % 4)): the quad's 4 x 4 words transposed in two shuffle rounds leave each lane
// 8 consecutive columns of one row (a 16-byte store; a warp's stores fill whole 32-byte sectors). Blocks from
// row_blocks zero the rows outside every sequence.
// kHoist: an owner search per group of the block's pairs (one where kQuadPairs divides the heads: the search then
// runs under the loads, before any store; a search after a store reloads cu_seqlens_q, which may alias dq; 48
// registers, 5 blocks an SM, as main's; D = 256: 4, its 8 uint4 a thread spilled 64 bytes at 5); false (main_path): a
// search per pair.
constexpr int kQuadPairs = 4;
template <typename T, bool kHoist, int D>
__global__ void __launch_bounds__(kThreads, kHoist ? (D == 256 ? 4 : 5) : 0)
    fp8_bwd_finish_quad_kernel(const HstuFp8BwdFinishParams p, int64_t groups, int64_t row_blocks) {
  static_assert(D == 64 || D == 128 || D == 256, "the FP8 backward's head dims");
  constexpr int kSplit = 2 * D > kThreads ? 2 * D / kThreads : 1;  // uint4 of one pair per thread
  constexpr int kSub = kThreads * kSplit / (2 * D);  // pairs side by side in one step of the block
  constexpr int kPer = kQuadPairs / kSub;            // pairs per thread (D = 64: 2, with 4 more registers it spilled)
  if (blockIdx.x >= row_blocks) {
    zero_rows_outside(p, blockIdx.x - row_blocks, gridDim.x - row_blocks);
    return;
  }
  // (kSub == 1: the thread index as is; the remainder / quotient forms cost the D = 128 kernel a 64-byte spill)
  const int t = kSub == 1 ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x % (2 * D));
  const int sub = kSub == 1 ? 0 : static_cast<int>(threadIdx.x / (2 * D));
  const int64_t pairs = groups * p.heads, x0 = static_cast<int64_t>(blockIdx.x) * kQuadPairs + sub;
  const uint4* src = reinterpret_cast<const uint4*>(p.dq_accum);
  uint4 v[kPer * kSplit];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
#pragma unroll
    for (int sp = 0; sp < kSplit; ++sp) {
      if (x0 + k * kSub < pairs) v[kSplit * k + sp] = __ldcs(src + (x0 + k * kSub) * (2 * D) + t + kThreads * sp);
    }
  }
  const int l = t % 32, qd = l % 4;
  const int r = l / 4 + 8 * (qd & 1);
  const int64_t per_row = static_cast<int64_t>(p.heads) * D / 8;
  int64_t x_seen = -1;
  DqGroupRows g{};
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    if (x0 + k * kSub >= pairs) break;  // (uniform over the warp)
    const int64_t x = (x0 + k * kSub) / p.heads;
    const int h = static_cast<int>((x0 + k * kSub) % p.heads);
    if (!kHoist || x != x_seen) g = dq_group_rows(p, x);
    x_seen = x;
    const int64_t start = g.start, first = g.first, rows = g.rows;
#pragma unroll
    for (int sp = 0; sp < kSplit; ++sp) {
      const int tu = t + kThreads * sp;  // (the pair's uint4)
      const int c8 = (D / 16) * (tu / D) + 2 * ((tu % D) / 32) + (qd >> 1);
      const uint4 vk = v[kSplit * k + sp];
      uint32_t w[4] = {vk.x, vk.y, vk.z, vk.w};  // word i: row a + 8 (i & 1), block j + (i >> 1), pair qd
#pragma unroll
      for (int s = 2; s > 0; s >>= 1) {  // lane qd's words i with (i & s) != (qd & s) <- lane qd ^ s's words i ^ s
        const bool up = (qd & s) != 0;
        const uint32_t s0 = up ? w[0] : w[s], s1 = up ? w[s == 2 ? 1 : 2] : w[3];
        const uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, s), r1 = __shfl_xor_sync(0xffffffffu, s1, s);
        if (up) {
          w[0] = r0;
          w[s == 2 ? 1 : 2] = r1;
        } else {
          w[s] = r0;
          w[3] = r1;
        }
      }
      if (first >= 0 && r < rows) {  // (word e: columns 8 c8 + 2 e, + 1 of row r)
        uint4 out = make_uint4(w[0], w[1], w[2], w[3]);
        if constexpr (!std::is_same_v<T, __nv_bfloat16>) {
          float f[8];
#pragma unroll
          for (int e = 0; e < 4; ++e) {  // (bf16 -> fp32: the bits in the high half)
            f[2 * e] = __uint_as_float(w[e] << 16);
            f[2 * e + 1] = __uint_as_float(w[e] & 0xFFFF0000u);
          }
          out = round8<T>(make_float4(f[0], f[1], f[2], f[3]), make_float4(f[4], f[5], f[6], f[7]));
        }
        reinterpret_cast<uint4*>(p.dq)[(start + first + r) * per_row + h * (D / 8) + c8] = out;
      }
    }
  }
}

}  // namespace

cudaError_t hstu_fp8_bwd_finish(const HstuFp8BwdFinishParams& p, cudaStream_t stream) {
  if (p.heads <= 0 || p.head_dim % 8 != 0 || p.batch <= 0) return cudaErrorInvalidValue;
  const int64_t groups = (p.total_q + p.total_k) * p.heads * (p.head_dim / 8);
  if (groups <= 0) return cudaSuccess;
  const int sms = accel::current_device_sms();
  if (p.dq_tiled) {
    const int D = p.head_dim;
    if ((D != 64 && D != 128 && D != 256) || p.heads > 65535) return cudaErrorInvalidValue;
    const int64_t ng = p.total_q / 16 + p.batch + 1;  // groups that hold rows (hstu_fp8_bwd_dq_tiled_groups - 3)
    if (p.dq_bf16) {
      const int64_t row_blocks = (ng * p.heads + kQuadPairs - 1) / kQuadPairs;
      const dim3 grid(static_cast<unsigned>(row_blocks + 2 * sms));
      auto quad = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(p, ng, row_blocks); };
      auto quad_d = [&](auto t, auto hoist) {
        using T = decltype(t);
        constexpr bool kH = decltype(hoist)::value;
        D == 64    ? quad(fp8_bwd_finish_quad_kernel<T, kH, 64>)
        : D == 128 ? quad(fp8_bwd_finish_quad_kernel<T, kH, 128>)
                   : quad(fp8_bwd_finish_quad_kernel<T, kH, 256>);
      };
      auto quad_t = [&](auto t) {
        p.main_path ? quad_d(t, std::false_type{}) : quad_d(t, std::true_type{});
      };
      p.out_half ? quad_t(__half{}) : quad_t(__nv_bfloat16{});
      return cudaGetLastError();
    }
    const dim3 grid(static_cast<unsigned>(ng + 2 * sms), p.heads);
    auto tiled = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(p, ng); };
    auto tiled_t = [&](auto t) {
      using T = decltype(t);
      D == 64    ? tiled(fp8_bwd_finish_tiled_kernel<T, 64>)
      : D == 128 ? tiled(fp8_bwd_finish_tiled_kernel<T, 128>)
                 : tiled(fp8_bwd_finish_tiled_kernel<T, 256>);
    };
    p.out_half ? tiled_t(__half{}) : tiled_t(__nv_bfloat16{});
    return cudaGetLastError();
  }
  const int64_t want = (groups + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 8 * sms ? want : 8 * sms);
  if (p.out_half) {
    fp8_bwd_finish_kernel<__half><<<blocks, kThreads, 0, stream>>>(p);
  } else {
    fp8_bwd_finish_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

cudaError_t hstu_fp8_bwd_prepass(const HstuFp8BwdPrepassParams& p, cudaStream_t stream) {
  if (p.heads <= 0 || p.head_dim % 16 != 0 || p.head_dim > 256 || p.batch <= 0) return cudaErrorInvalidValue;
  if (p.heads > 65535 || p.do_cols + 2 > INT32_MAX) return cudaErrorInvalidValue;
  const size_t qsmem = 128 * static_cast<size_t>(p.head_dim + 16);  // dO^T's tile (<= 34.8 KB)
  const int64_t check = p.check_claim != nullptr ? 1 : 0;  // (block 0: the descale factors' check)
  const bool qflat = (p.do_cols + 1) * p.heads + check <= INT32_MAX;
  const dim3 qgrid = qflat ? dim3(static_cast<unsigned>((p.do_cols + 1) * p.heads + check))
                           : dim3(static_cast<unsigned>(p.do_cols + 1 + check), p.heads);
  auto quant = [&](auto kernel) { kernel<<<qgrid, kThreads, qsmem, stream>>>(p); };
  if (p.dout_half) {
    check ? quant(fp8_quant_do_kernel<__half, true>) : quant(fp8_quant_do_kernel<__half, false>);
  } else {
    check ? quant(fp8_quant_do_kernel<__nv_bfloat16, true>) : quant(fp8_quant_do_kernel<__nv_bfloat16, false>);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const int64_t cols = p.q_cols > p.k_cols ? p.q_cols : p.k_cols;
  const int64_t chunks = (cols + kCols - 1) / kCols;
  const bool tflat = chunks * p.heads <= INT32_MAX;
  const dim3 tgrid = tflat ? dim3(static_cast<unsigned>(chunks * p.heads), 1, 2)
                           : dim3(static_cast<unsigned>(chunks), p.heads, 2);
  if (p.head_dim <= 128) {
    fp8_transpose_kernel<128 + 16><<<tgrid, kThreads, 0, stream>>>(p);
  } else {
    fp8_transpose_kernel<256 + 16><<<tgrid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace hstu
