// Fused steps of HSTULayer: LayerNorm(x) * u (forward, backward) and SiLU + split of the uvqk projection.
//
// Row kernels: one warp per row (rows stride over the grid), V consecutive columns per lane and access (16-byte
// vectors when every row starts 16-byte aligned, else V = 1); statistics and sums in fp32, the row re-read from
// L1/L2 instead of held in registers, so any width works. dweight / dbias are column sums over all rows: a second
// kernel sums fixed row chunks per column into a workspace and a third adds the chunks in order (deterministic,
// no atomics). The element-wise SiLU kernels map each vector of the projection to its part and row.
#include "hstu/csrc/layers/hstu_layer_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/device_info.h"

namespace hstu {
namespace layers {
namespace detail {

constexpr int kRowWarps = 4;  // rows in flight per block of the row kernels (one per warp)
constexpr int kColRows = 8;   // row groups (threadIdx.y) of the column-sum kernel
constexpr int kEltThreads = 256;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void load(const T* p, float (&f)[V]) {
  const Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = to_f(a.v[i]);
}

template <typename T, int V>
__device__ __forceinline__ void store(T* p, const float (&f)[V]) {
  Vec<T, V> a;
#pragma unroll
  for (int i = 0; i < V; ++i) a.v[i] = from_f<T>(f[i]);
  *reinterpret_cast<Vec<T, V>*>(p) = a;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  return v;
}

__device__ __forceinline__ float sigmoid(float z) { return 1.f / (1.f + expf(-z)); }

// a[i] with constant indices only (a dynamic index into the kernel's parameter array copies it to the stack).
template <typename P>
__device__ __forceinline__ P pick(const P (&a)[4], int i) {
  return i == 0 ? a[0] : i == 1 ? a[1] : i == 2 ? a[2] : a[3];
}

template <typename T, typename W, int V>
__global__ void __launch_bounds__(32 * kRowWarps) layer_norm_mul_fwd_kernel(LayerNormMulFwdParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t C = p.cols;
  const float inv_c = 1.f / static_cast<float>(C);
  const W* w = static_cast<const W*>(p.weight);
  const W* b = static_cast<const W*>(p.bias);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); r < p.rows;
       r += static_cast<int64_t>(gridDim.x) * kRowWarps) {
    const T* x = static_cast<const T*>(p.x) + r * C;
    const T* u = static_cast<const T*>(p.u) + r * C;
    T* out = static_cast<T*>(p.out) + r * C;
    float s = 0.f;
    for (int64_t c = lane * V; c < C; c += 32 * V) {
      float f[V];
      load<T, V>(x + c, f);
#pragma unroll
      for (int i = 0; i < V; ++i) s += f[i];
    }
    const float mean = warp_sum(s) * inv_c;
    float q = 0.f;  // two passes: the variance of x - mean (no cancellation)
    for (int64_t c = lane * V; c < C; c += 32 * V) {
      float f[V];
      load<T, V>(x + c, f);
#pragma unroll
      for (int i = 0; i < V; ++i) q += (f[i] - mean) * (f[i] - mean);
    }
    const float rstd = rsqrtf(warp_sum(q) * inv_c + p.eps);
    for (int64_t c = lane * V; c < C; c += 32 * V) {
      float f[V], g[V];
      load<T, V>(x + c, f);
      load<T, V>(u + c, g);
#pragma unroll
      for (int i = 0; i < V; ++i) f[i] = ((f[i] - mean) * rstd * to_f(w[c + i]) + to_f(b[c + i])) * g[i];
      store<T, V>(out + c, f);
    }
    if (lane == 0) {
      p.mean[r] = mean;
      p.rstd[r] = rstd;
    }
  }
}

// dx and du per row: n = xhat * w + b, du = dy * n, g = dy * u * w, dx = rstd * (g - mean(g) - xhat * mean(g xhat)).
template <typename T, typename W, int V>
__global__ void __launch_bounds__(32 * kRowWarps) layer_norm_mul_bwd_rows_kernel(LayerNormMulBwdParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t C = p.cols;
  const float inv_c = 1.f / static_cast<float>(C);
  const W* w = static_cast<const W*>(p.weight);
  const W* b = static_cast<const W*>(p.bias);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); r < p.rows;
       r += static_cast<int64_t>(gridDim.x) * kRowWarps) {
    const int64_t off = r * C;
    const T* dy = static_cast<const T*>(p.dout) + off;
    const T* x = static_cast<const T*>(p.x) + off;
    const T* u = static_cast<const T*>(p.u) + off;
    const float mean = p.mean[r], rstd = p.rstd[r];
    float s1 = 0.f, s2 = 0.f;
    for (int64_t c = lane * V; c < C; c += 32 * V) {
      float fy[V], fx[V], fu[V];
      load<T, V>(dy + c, fy);
      load<T, V>(x + c, fx);
      load<T, V>(u + c, fu);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float g = __fmul_rn(__fmul_rn(fy[i], fu[i]), to_f(w[c + i]));
        s1 += g;
        s2 += g * (fx[i] - mean) * rstd;
      }
    }
    s1 = warp_sum(s1) * inv_c;
    s2 = warp_sum(s2) * inv_c;
    for (int64_t c = lane * V; c < C; c += 32 * V) {
      float fy[V], fx[V], fu[V];
      load<T, V>(dy + c, fy);
      load<T, V>(x + c, fx);
      load<T, V>(u + c, fu);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float wi = to_f(w[c + i]);
        const float xh = (fx[i] - mean) * rstd;
        // g rounded exactly as in the first pass (no FMA contraction into g - s1): a one-column row gives dx = 0
        const float g = __fmul_rn(__fmul_rn(fy[i], fu[i]), wi);
        fu[i] = fy[i] * (xh * wi + to_f(b[c + i]));
        fx[i] = rstd * (g - s1 - xh * s2);
      }
      store<T, V>(static_cast<T*>(p.dx) + off + c, fx);
      store<T, V>(static_cast<T*>(p.du) + off + c, fu);
    }
  }
}

// Per (column tile, row chunk): the sums of dy * u * xhat (dweight) and dy * u (dbias) over the chunk's rows.
template <typename T, int V>
__global__ void __launch_bounds__(32 * kColRows) layer_norm_mul_bwd_cols_kernel(LayerNormMulBwdParams p) {
  __shared__ float sw[kColRows][32 * V];
  __shared__ float sb[kColRows][32 * V];
  const int64_t C = p.cols;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * V;
  const int64_t per = (p.rows + p.chunks - 1) / p.chunks;
  const int64_t r0 = blockIdx.y * per, r1 = min(p.rows, r0 + per);
  float dw[V], db[V];
#pragma unroll
  for (int i = 0; i < V; ++i) dw[i] = db[i] = 0.f;
  if (c0 < C) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColRows) {
      const float mean = p.mean[r], rstd = p.rstd[r];
      float fy[V], fx[V], fu[V];
      load<T, V>(static_cast<const T*>(p.dout) + r * C + c0, fy);
      load<T, V>(static_cast<const T*>(p.x) + r * C + c0, fx);
      load<T, V>(static_cast<const T*>(p.u) + r * C + c0, fu);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float dn = fy[i] * fu[i];
        db[i] += dn;
        dw[i] += dn * (fx[i] - mean) * rstd;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    sw[threadIdx.y][threadIdx.x * V + i] = dw[i];
    sb[threadIdx.y][threadIdx.x * V + i] = db[i];
  }
  __syncthreads();
  if (threadIdx.y == 0 && c0 < C) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float a = 0.f, s = 0.f;
      for (int y = 0; y < kColRows; ++y) {
        a += sw[y][threadIdx.x * V + i];
        s += sb[y][threadIdx.x * V + i];
      }
      p.partial[static_cast<int64_t>(blockIdx.y) * C + c0 + i] = a;
      p.partial[static_cast<int64_t>(p.chunks + blockIdx.y) * C + c0 + i] = s;
    }
  }
}

template <typename W>
__global__ void layer_norm_mul_bwd_reduce_kernel(LayerNormMulBwdParams p) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= p.cols) return;
  float a = 0.f, s = 0.f;
  for (int k = 0; k < p.chunks; ++k) {
    a += p.partial[static_cast<int64_t>(k) * p.cols + c];
    s += p.partial[static_cast<int64_t>(p.chunks + k) * p.cols + c];
  }
  static_cast<W*>(p.dweight)[c] = from_f<W>(a);
  static_cast<W*>(p.dbias)[c] = from_f<W>(s);
}

// Vector i of x (rows, 4 * width) -> part (i / wv) % 4, row i / (4 wv), vector i % wv of that row.
template <typename T, int V, bool kBackward>
__global__ void __launch_bounds__(kEltThreads) silu_split_kernel(SiluSplitParams p) {
  const int64_t wv = p.width / V;
  const int64_t total = p.rows * 4 * wv;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / (4 * wv), rem = i - r * 4 * wv;
    const int part = static_cast<int>(rem / wv);
    const int64_t o = (r * wv + (rem - part * wv)) * V;  // offset in the part's (rows, width)
    float z[V];
    load<T, V>(static_cast<const T*>(p.x) + i * V, z);
    if constexpr (kBackward) {
      float g[V];
      load<T, V>(static_cast<const T*>(pick(p.dout, part)) + o, g);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float s = sigmoid(z[k]);
        z[k] = g[k] * s * (1.f + z[k] * (1.f - s));
      }
      store<T, V>(static_cast<T*>(p.dx) + i * V, z);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) z[k] = z[k] * sigmoid(z[k]);
      store<T, V>(static_cast<T*>(pick(p.out, part)) + o, z);
    }
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Calls f(T*, W*) with the element types of (dtype, wdtype) as null pointers.
template <typename F>
cudaError_t with_type(DType d, F&& f) {
  switch (d) {
    case DType::kFloat32: return f(static_cast<float*>(nullptr));
    case DType::kFloat16: return f(static_cast<__half*>(nullptr));
    case DType::kBFloat16: return f(static_cast<__nv_bfloat16*>(nullptr));
  }
  return cudaErrorInvalidValue;
}

template <typename T>
using Elem = std::remove_pointer_t<T>;

int row_grid(int64_t rows) {
  const int64_t cap = int64_t{16} * accel::current_device_sms();
  return static_cast<int>(std::min<int64_t>((rows + kRowWarps - 1) / kRowWarps, cap));
}

}  // namespace detail

int layer_norm_mul_bwd_chunks(int64_t rows, int64_t cols, int device) {
  const int64_t tiles = (cols + 255) / 256;  // column tiles at 8 columns per lane
  const int64_t want = (2 * accel::device_sms(device) + tiles - 1) / tiles;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, (rows + 63) / 64, 65535})));
}

cudaError_t launch_layer_norm_mul_fwd(const LayerNormMulFwdParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  return detail::with_type(p.dtype, [&](auto* tp) {
    using T = detail::Elem<decltype(tp)>;
    return detail::with_type(p.wdtype, [&](auto* wp) {
      using W = detail::Elem<decltype(wp)>;
      constexpr int kV = 16 / sizeof(T);
      const bool vec = p.cols % kV == 0 && detail::aligned16(p.x) && detail::aligned16(p.u) &&
                       detail::aligned16(p.out);
      const int grid = detail::row_grid(p.rows);
      if (vec) {
        detail::layer_norm_mul_fwd_kernel<T, W, kV><<<grid, 32 * detail::kRowWarps, 0, stream>>>(p);
      } else {
        detail::layer_norm_mul_fwd_kernel<T, W, 1><<<grid, 32 * detail::kRowWarps, 0, stream>>>(p);
      }
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_layer_norm_mul_bwd(const LayerNormMulBwdParams& p, cudaStream_t stream) {
  return detail::with_type(p.dtype, [&](auto* tp) {
    using T = detail::Elem<decltype(tp)>;
    return detail::with_type(p.wdtype, [&](auto* wp) {
      using W = detail::Elem<decltype(wp)>;
      constexpr int kV = 16 / sizeof(T);
      const bool vec = p.cols % kV == 0 && detail::aligned16(p.dout) && detail::aligned16(p.x) &&
                       detail::aligned16(p.u) && detail::aligned16(p.dx) && detail::aligned16(p.du);
      const int v = vec ? kV : 1;
      if (p.rows > 0) {
        const int grid = detail::row_grid(p.rows);
        if (vec) {
          detail::layer_norm_mul_bwd_rows_kernel<T, W, kV><<<grid, 32 * detail::kRowWarps, 0, stream>>>(p);
        } else {
          detail::layer_norm_mul_bwd_rows_kernel<T, W, 1><<<grid, 32 * detail::kRowWarps, 0, stream>>>(p);
        }
      }
      const dim3 cgrid(static_cast<unsigned>((p.cols + 32 * v - 1) / (32 * v)), static_cast<unsigned>(p.chunks));
      const dim3 cblock(32, detail::kColRows);
      if (vec) {
        detail::layer_norm_mul_bwd_cols_kernel<T, kV><<<cgrid, cblock, 0, stream>>>(p);
      } else {
        detail::layer_norm_mul_bwd_cols_kernel<T, 1><<<cgrid, cblock, 0, stream>>>(p);
      }
      detail::layer_norm_mul_bwd_reduce_kernel<W>
          <<<static_cast<unsigned>((p.cols + 255) / 256), 256, 0, stream>>>(p);
      return cudaGetLastError();
    });
  });
}

namespace {

template <bool kBackward>
cudaError_t launch_silu_split(const SiluSplitParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.width == 0) return cudaSuccess;
  return detail::with_type(p.dtype, [&](auto* tp) {
    using T = detail::Elem<decltype(tp)>;
    constexpr int kV = 16 / sizeof(T);
    bool vec = p.width % kV == 0 && detail::aligned16(p.x);
    for (int i = 0; i < 4; ++i) {
      vec = vec && detail::aligned16(kBackward ? p.dout[i] : p.out[i]);
    }
    vec = vec && (!kBackward || detail::aligned16(p.dx));
    const int v = vec ? kV : 1;
    const int64_t total = p.rows * 4 * (p.width / v);
    const int grid = static_cast<int>(std::min<int64_t>((total + detail::kEltThreads - 1) / detail::kEltThreads,
                                                        int64_t{8} * accel::current_device_sms()));
    if (vec) {
      detail::silu_split_kernel<T, kV, kBackward><<<grid, detail::kEltThreads, 0, stream>>>(p);
    } else {
      detail::silu_split_kernel<T, 1, kBackward><<<grid, detail::kEltThreads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t launch_silu_split_fwd(const SiluSplitParams& p, cudaStream_t stream) {
  return launch_silu_split<false>(p, stream);
}

cudaError_t launch_silu_split_bwd(const SiluSplitParams& p, cudaStream_t stream) {
  return launch_silu_split<true>(p, stream);
}

}  // namespace layers
}  // namespace hstu
