// Backward fused with the optimizer. launch_backward runs the per-sample-weight gradient, then the segmented
// reduction of segment_kernels.cu when the op chose it (seg_chunk > 0); otherwise the atomic scatter below
// (global-norm clipping, rows wider than one 32 x N chunk). A scatter pass streams the ids in order (one warp
// per 32 bags, or per 32 ids for sequences), reads each bag's output gradient once and adds every id's gradient
// to its target with 16-byte vector atomics: the row itself (-lr g) for plain fp32 SGD, else the unique's fp32
// sum, which a warp-per-unique pass then clips and applies with the optimizer to [embedding | state] in place
// (re-zeroing the sum). With `aggregate`, the 32 ids of a round are sorted by target in registers first, so
// repeated (hot) ids add once per round. lr and step are read from device memory (CUDA graphs replay with new
// values).
#include "dynamicemb/csrc/lookup/optimizer.cuh"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kBwdBlock = 256;
constexpr int kChunks = 4;

// Gradient source row of occurrence i (bag b) and its scale (1 / bag length for mean, times the weight).
struct Occ {
  const float* src;
  float len;      // bag length for mean (>= 1), 0: no mean
  float w;        // per-sample weight (1 without)
};

__device__ __forceinline__ Occ occurrence(const BackwardParams& p, int64_t i) {
  Occ o;
  const int64_t b = p.bag[i];
  int64_t f = b / p.batch;
  if (f >= p.num_features) f = p.num_features - 1;
  if (p.pooling == kPoolNone) {
    o.src = p.grad + i * p.out_stride;
  } else {
    o.src = p.grad + (b - f * p.batch) * p.out_stride + p.feature_col[f];
  }
  o.len = 0.f;
  if (p.pooling == kPoolMean) {
    const int64_t len = p.offsets[b + 1] - p.offsets[b];
    o.len = static_cast<float>(len > 1 ? len : 1);
  }
  o.w = p.psw ? p.psw[i] : 1.f;
  return o;
}

constexpr int kUnroll = 8;
constexpr int kScatterBlock = 128;  // ~110 registers (8 gradient rows in flight): 4 blocks per SM

// One warp per 32 bags (pooled) or 32 ids (sequence). Per round of up to 32 ids, lane l holds id base + l: its
// target (row address or gsum row, 0: none), gradient source element, dim, bag length (mean) and weight.
template <int N>
__global__ void __launch_bounds__(kScatterBlock, 1) scatter_kernel(BackwardParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * kScatterBlock + threadIdx.x) >> 5;
  const bool pooled = p.pooling != kPoolNone;
  const bool mean = p.pooling == kPoolMean;
  int64_t k0, k1;
  int nb = 0;
  int64_t bend = 0, bsrc = 0;
  int bdim = 0;
  float blen = 0.f;
  if (pooled) {
    const int64_t b0 = w * 32;
    if (b0 >= p.num_bags) return;
    nb = static_cast<int>(p.num_bags - b0 < 32 ? p.num_bags - b0 : 32);
    k0 = clamp_off(p.offsets[b0], p.n);
    if (lane < nb) {
      const int64_t b = b0 + lane;
      const int64_t lo = clamp_off(p.offsets[b], p.n);
      bend = clamp_off(p.offsets[b + 1], p.n);
      int64_t f = b / p.batch;
      if (f >= p.num_features) f = p.num_features - 1;
      bdim = static_cast<int>(p.meta[p.feature_table[f]].dim);
      bsrc = (b - f * p.batch) * p.out_stride + p.feature_col[f];
      blen = static_cast<float>(bend - lo > 1 ? bend - lo : 1);
    }
    k1 = __shfl_sync(0xffffffffu, bend, nb - 1);
    if (k1 < k0) k1 = k0;
  } else {
    k0 = w * 32;
    if (k0 >= p.n) return;
    k1 = k0 + 32 < p.n ? k0 + 32 : p.n;
  }
  const float nlr = p.direct ? -*p.lr : 1.f;
  for (int64_t base = k0; base < k1; base += 32) {
    const int cnt = static_cast<int>(k1 - base < 32 ? k1 - base : 32);
    const int64_t i = base + lane;
    uint64_t tgt = 0;
    int64_t src = 0;
    int dim = 0;
    float len = 0.f, wt = 1.f;
    if (lane < cnt) {
      if (p.direct) {
        tgt = p.rowp[i];
      } else {
        const int32_t u = p.inverse[i];
        if (u >= 0) tgt = reinterpret_cast<uint64_t>(p.gsum + u * p.gsum_stride);
      }
      if (p.psw) wt = p.psw[i];
    }
    if (pooled) {  // bag of id i: first lane m with bend_m > i
      const int lo = warp_bag_of(bend, nb, i);
      src = __shfl_sync(0xffffffffu, bsrc, lo);
      dim = __shfl_sync(0xffffffffu, bdim, lo);
      len = mean ? __shfl_sync(0xffffffffu, blen, lo) : 0.f;
    } else {
      src = i * p.out_stride;
      dim = p.max_dim;
    }
    // sort the round by target (bitonic over the lanes; no target sorts last) so equal targets are adjacent
    uint64_t key = tgt != 0 ? tgt : ~0ull;
    int from = lane;
    if (p.aggregate) {
#pragma unroll
      for (int k = 2; k <= 32; k <<= 1) {
#pragma unroll
        for (int jx = k >> 1; jx > 0; jx >>= 1) {
          const uint64_t ok = __shfl_xor_sync(0xffffffffu, key, jx);
          const int of = __shfl_xor_sync(0xffffffffu, from, jx);
          const bool up = (lane & k) == 0, low = (lane & jx) == 0;
          if (low == up ? ok < key : ok > key) {
            key = ok;
            from = of;
          }
        }
      }
    }
    float sum[N];
#pragma unroll
    for (int e = 0; e < N; ++e) sum[e] = 0.f;
    for (int c0 = 0; c0 < p.max_dim; c0 += 32 * N) {
      const int c = c0 + lane * N;
      for (int q0 = 0; q0 < cnt; q0 += kUnroll) {
        float g[kUnroll][N];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = q0 + u;
          const uint64_t kq = __shfl_sync(0xffffffffu, key, q & 31);
          const int fq = __shfl_sync(0xffffffffu, from, q & 31);
          const int64_t sq = __shfl_sync(0xffffffffu, src, fq);
          const int dq = __shfl_sync(0xffffffffu, dim, fq);
#pragma unroll
          for (int e = 0; e < N; ++e) g[u][e] = 0.f;
          if (q < cnt && kq != ~0ull && c < dq) load_n<kValueFp32, N>(p.grad + sq + c, g[u]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = q0 + u;
          if (q >= cnt) break;
          const uint64_t kq = __shfl_sync(0xffffffffu, key, q);
          const uint64_t kn = __shfl_sync(0xffffffffu, key, (q + 1) & 31);
          const int fq = __shfl_sync(0xffffffffu, from, q);
          const float lq = __shfl_sync(0xffffffffu, len, fq);
          const float wq = __shfl_sync(0xffffffffu, wt, fq);
          const int dq = __shfl_sync(0xffffffffu, dim, fq);
          if (kq == ~0ull) continue;  // warp-uniform
#pragma unroll
          for (int e = 0; e < N; ++e) {
            float v = g[u][e];
            if (lq != 0.f) v = v / lq;
            if (p.psw) v = v * wq;
            sum[e] += v;
          }
          if (!p.aggregate || q + 1 >= cnt || kn != kq) {
            if (c < dq) {
#pragma unroll
              for (int e = 0; e < N; ++e) sum[e] *= nlr;
              red_n<N>(reinterpret_cast<float*>(kq) + c, sum);
            }
#pragma unroll
            for (int e = 0; e < N; ++e) sum[e] = 0.f;
          }
        }
      }
    }
  }
}

// Per unique (not direct): mode 0: update; 1: add the squared norm to p.norm_sq only; 2: scale + update.
// Non-finite policy (lookup_types.h NonFinite; the torch path in _batched_torch.py does the same): a row whose summed
// gradient holds a NaN/inf (checked before clipping) is skipped and counted; in mode 1 (max_grad_norm or skip_step)
// such a row makes the norm NaN unless the policy is propagate, and mode 2 then skips every row (counted once).
//
// The pass is latency bound, not bandwidth bound, unless each warp keeps several independent row accesses in
// flight: a warp takes a tile of 32 consecutive uniques and reads their row, table and metadata with one
// coalesced access per lane (instead of three dependent broadcast loads per unique), then walks the tile K
// uniques at a time, issuing every load of those K uniques (fp32 sums, embedding, optimizer state) before the
// first use. lr and the Adam step size are read once per thread (the kernel writes neither). C: 128-bit column
// chunks a lane covers (1 when max_dim <= 32 N, else kChunks); K: uniques in flight per warp.
template <int V, int N, int C, int K>
__global__ void __launch_bounds__(kBwdBlock, C == 1 ? 3 : 2) update_kernel(BackwardParams p, int mode) {
  using T = typename Val<V>::T;
  const int lane = threadIdx.x & 31;
  const int64_t count = *p.count;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kBwdBlock / 32);
  float norm_part = 0.f;
  float clip_scale = 1.f;
  const bool guard = p.nonfinite != kNonFinitePropagate;
  bool skip_all = false;
  if (mode == 2) {
    const float norm = sqrtf(static_cast<float>(*p.norm_sq));
    if (p.max_grad_norm > 0.f) clip_scale = fminf(p.max_grad_norm / (norm + 1e-6f), 1.f);
    skip_all = guard && !isfinite(norm);
    if (skip_all && blockIdx.x == 0 && threadIdx.x == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.nonfinite_count) + 1, 1ull);
  }
  const OptConst oc = opt_const(p, mode != 1);
  const bool adam = p.opt == kAdam, adagrad = p.opt == kAdagrad, rowwise = p.opt == kRowWiseAdagrad;
  const bool s16 = V == kValueFp32 && adam && p.state_bf16;  // Adam's m and v as bf16 (optimizer.cuh)
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kBwdBlock + threadIdx.x) >> 5;
  for (int64_t base = warp * 32; base < count; base += warps * 32) {
    const int cnt = static_cast<int>(count - base < 32 ? count - base : 32);
    // lane l: unique base + l (row address, 0 without a row, and dim)
    uint64_t my_row = 0;
    int my_dim = 0;
    if (lane < cnt) {
      const int64_t r = p.urow[base + lane];
      const TableMeta& m = p.meta[p.utables[base + lane]];
      my_dim = static_cast<int>(m.dim);
      if (p.uaddr != nullptr) my_row = p.uaddr[base + lane];  // hybrid tables: host rows in HBM scratch
      else if (r >= 0) my_row = reinterpret_cast<uint64_t>(meta_row<T>(m, r));
    }
    for (int j = 0; j < cnt; j += K) {
      float g[K][C][N], w[K][C][N], s1[K][C][N], s2[K][C][N];
      float rstate[K];
      T* row[K];
      int dim[K];
      float* gs[K];
      // ---- every load of the K uniques first
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int q = j + k;
        row[k] = reinterpret_cast<T*>(__shfl_sync(0xffffffffu, my_row, q & 31));
        dim[k] = __shfl_sync(0xffffffffu, my_dim, q & 31);
        if (q >= cnt) {  // warp-uniform
          row[k] = nullptr;
          dim[k] = 0;
        }
        gs[k] = p.gsum + (base + q) * p.gsum_stride;
        rstate[k] = 0.f;
        const bool upd = mode != 1 && row[k] != nullptr;
#pragma unroll
        for (int ch = 0; ch < C; ++ch) {
          const int c = ch * 32 * N + lane * N;
#pragma unroll
          for (int e = 0; e < N; ++e) g[k][ch][e] = w[k][ch][e] = s1[k][ch][e] = s2[k][ch][e] = 0.f;
          if (c < dim[k]) {
            load_n<kValueFp32, N>(gs[k] + c, g[k][ch]);
            if (upd) {
              load_n<V, N>(row[k] + c, w[k][ch]);
              if (s16) {
                load_moments_bf16<N>(reinterpret_cast<const float*>(row[k]), dim[k], c, s1[k][ch], s2[k][ch]);
              } else {
                if (adagrad || adam) load_n<V, N>(row[k] + dim[k] + c, s1[k][ch]);
                if (adam) load_n<V, N>(row[k] + 2 * dim[k] + c, s2[k][ch]);
              }
            }
          }
        }
        if (upd && rowwise) rstate[k] = Val<V>::to_f(row[k][dim[k]]);
      }
      // ---- leave the sums zeroed for the next step (rows without a slot too)
      if (mode != 1) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
#pragma unroll
          for (int ch = 0; ch < C; ++ch) {
            const int c = ch * 32 * N + lane * N;
            if (c < dim[k]) {
              float z[N] = {};
              store_n<kValueFp32, N>(gs[k] + c, z);
            }
          }
        }
      }
      // ---- clip, then the optimizer
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (dim[k] == 0) continue;  // warp-uniform: past the tile
        float sq = 0.f;
        bool finite = true;
#pragma unroll
        for (int ch = 0; ch < C; ++ch) {
          const int c = ch * 32 * N + lane * N;
          if (c < dim[k]) {
#pragma unroll
            for (int e = 0; e < N; ++e) {
              float v = g[k][ch][e];
              finite = finite && isfinite(v);
              v = clip_grad(v, p.max_grad_value, clip_scale);
              g[k][ch][e] = v;
              sq += v * v;
            }
          }
        }
        finite = __all_sync(0xffffffffu, finite);
        if (mode == 1) {
          norm_part += guard && !finite ? __int_as_float(0x7fc00000) : sq;  // NaN: the step is skipped
          continue;
        }
        if (row[k] == nullptr || skip_all) continue;  // warp-uniform: no row, or the step is skipped
        if (guard && !finite) {
          count_skipped_row(p.nonfinite_count, lane);
          continue;
        }
        const int d = dim[k];
        float rs = 0.f;
        if (rowwise) {
          if (p.weight_decay != 0.f) {
            sq = 0.f;
#pragma unroll
            for (int ch = 0; ch < C; ++ch) {
              if (ch * 32 * N + lane * N < d) decayed_sq<N>(g[k][ch], w[k][ch], p.weight_decay, sq);
            }
          }
          rs = rowwise_state(rstate[k], warp_sum(sq), d);
          if (lane == 0) row[k][d] = Val<V>::from_f(rs);
        }
#pragma unroll
        for (int ch = 0; ch < C; ++ch) {
          const int c = ch * 32 * N + lane * N;
          if (c >= d) continue;
          if (p.opt == kSgd) {
            opt_update<N>(kSgd, p, oc, g[k][ch], w[k][ch], s1[k][ch], s2[k][ch], rs);
          } else if (adagrad || rowwise) {
            opt_update<N>(adagrad ? kAdagrad : kRowWiseAdagrad, p, oc, g[k][ch], w[k][ch], s1[k][ch], s2[k][ch], rs);
            if (adagrad) store_n<V, N>(row[k] + d + c, s1[k][ch]);
          } else {
            opt_update<N>(kAdam, p, oc, g[k][ch], w[k][ch], s1[k][ch], s2[k][ch], rs);
            if (s16) {
              store_moments_bf16<N>(reinterpret_cast<float*>(row[k]), d, c, s1[k][ch], s2[k][ch], oc.step);
            } else {
              store_n<V, N>(row[k] + d + c, s1[k][ch]);
              store_n<V, N>(row[k] + 2 * d + c, s2[k][ch]);
            }
          }
          store_n<V, N>(row[k] + c, w[k][ch]);
        }
      }
    }
  }
  if (mode == 1) {
    norm_part = warp_sum(norm_part);
    if (lane == 0 && norm_part != 0.f) atomicAdd(p.norm_sq, static_cast<double>(norm_part));
  }
}

// d out / d psw[i] = dot(bag gradient, unweighted row of id i), computed before the update changes the rows.
template <int V, int N>
__global__ void __launch_bounds__(kBwdBlock, 1) psw_grad_kernel(BackwardParams p, bool train) {
  using T = typename Val<V>::T;
  const int lane = threadIdx.x & 31;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kBwdBlock + threadIdx.x) >> 5;
  if (i >= p.n) return;
  const Occ o = occurrence(p, i);
  const int64_t b = p.bag[i];
  int64_t f = b / p.batch;
  if (f >= p.num_features) f = p.num_features - 1;
  const TableMeta& m = p.meta[p.feature_table[f]];
  const uint64_t a = p.rowp[i];
  const uint64_t key = p.ids[i];
  float dot = 0.f;
  for (int64_t c = lane * N; c < m.dim; c += 32 * N) {
    float x[N], e[N];
    load_n<kValueFp32, N>(o.src + c, x);
    if (a != 0) {
      load_n<V, N>(reinterpret_cast<const T*>(a) + c, e);
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) e[k] = fallback_value(m, train, key, c + k);
    }
#pragma unroll
    for (int k = 0; k < N; ++k) dot += x[k] * e[k];
  }
  dot = warp_sum(dot);
  if (lane == 0) p.grad_psw[i] = dot;
}

__global__ void zero_norm_kernel(double* norm_sq) { *norm_sq = 0.0; }

template <int V, int N, int C, int K>
void run_update(const BackwardParams& p, cudaStream_t st) {
  const int64_t need = (p.n + kBwdBlock - 1) / kBwdBlock;  // 8 tiles of 32 uniques per block at most
  const int64_t cap = persistent_blocks(C == 1 ? 3 : 2);   // one resident wave (launch bounds)
  const unsigned grid = static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
  if (p.max_grad_norm > 0.f || p.nonfinite == kNonFiniteSkipStep) {
    zero_norm_kernel<<<1, 1, 0, st>>>(p.norm_sq);
    update_kernel<V, N, C, K><<<grid, kBwdBlock, 0, st>>>(p, 1);
    check_launch("grad norm");
    update_kernel<V, N, C, K><<<grid, kBwdBlock, 0, st>>>(p, 2);
  } else {
    update_kernel<V, N, C, K><<<grid, kBwdBlock, 0, st>>>(p, 0);
  }
  check_launch("update");
}

template <int V, int N>
void run_backward(const BackwardParams& p, cudaStream_t st) {
  if (p.grad_psw && p.n > 0) {
    psw_grad_kernel<V, N><<<blocks_for(p.n, kBwdBlock / 32), kBwdBlock, 0, st>>>(p, true);
    check_launch("psw grad");
  }
  if (p.n == 0) return;
  if (p.seg_chunk > 0) {
    launch_segmented_backward<V>(p, N == 4, st);
    return;
  }
  const int64_t items = p.pooling == kPoolNone ? p.n : p.num_bags;
  scatter_kernel<N><<<blocks_for((items + 31) / 32, kScatterBlock / 32), kScatterBlock, 0, st>>>(p);
  check_launch("gradient scatter");
  if (p.direct) return;
  // C = 1 (one 32 N-column chunk per lane, two uniques in flight per warp) for rows up to 32 N columns
  if (p.max_dim <= 32 * N) run_update<V, N, 1, 2>(p, st);
  else run_update<V, N, kChunks, 1>(p, st);
}

}  // namespace detail

template <int V>
void launch_backward(const BackwardParams& p, bool vec4, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (vec4) detail::run_backward<V, 4>(p, st);
  else detail::run_backward<V, 1>(p, st);
}

template void launch_backward<kValueFp16>(const BackwardParams&, bool, void*);
template void launch_backward<kValueBf16>(const BackwardParams&, bool, void*);
template void launch_backward<kValueFp32>(const BackwardParams&, bool, void*);

}  // namespace lookup
}  // namespace dynamicemb
