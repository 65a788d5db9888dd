// Row kernels of the sharded module's CUDA step (rows_types.h): gather_rows moves whole rows with the widest
// vector the row size and the addresses allow (16-byte loads for fp32 rows of a multiple of 4 columns), many rows
// per block, or converts them element by element (half rows off the wire widened to fp32 outputs); pool_rows and
// segment_sum_rows give one warp to one output row (a bag, a unique), its lanes over the columns (float4 when the
// columns allow; half rows read and stored four at a time), and add the entries' rows in entry order in fp32, four
// rows in flight: fixed order, so the results do not depend on scheduling. segment_sum_rows first builds the CSR
// unique -> entries: a stable cub radix sort of (unique, entry) pairs over the bits of num_unique, then the segment
// starts. Its sums give each warp a fixed chunk of kSegChunk sorted entries (hot ids would serialize a warp per
// unique: a power-law batch's hottest id has ~10 k entries): a run of one unique inside a chunk that is its whole
// segment is stored to the output; the pieces of a segment cut by chunk boundaries go to two per-chunk slots (0: the
// chunk's first run when its segment began before; 1: its last run when its segment goes on), which a second kernel
// adds in chunk order. Fixed order everywhere: no atomics, the same bits run to run.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/rows_types.h"
#include "dynamicemb/csrc/table/value_kind_dispatch.h"
#include "dynamicemb/csrc/table/value_types.cuh"

namespace dynamicemb {
namespace lookup {
namespace {

constexpr int kRowsBlock = 256;
constexpr int64_t kSegChunk = 64;  // sorted entries per warp in segment_sum_rows

template <int V> struct Chunk;
template <> struct Chunk<16> { using T = int4; };
template <> struct Chunk<8> { using T = int2; };
template <> struct Chunk<4> { using T = int; };
template <> struct Chunk<2> { using T = short; };
template <> struct Chunk<1> { using T = char; };

__device__ __forceinline__ int64_t load_index(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// One thread per V-byte chunk of an output row (I: the chunk counter's type; 32-bit when the chunks fit).
template <int V, typename I>
__global__ void __launch_bounds__(kRowsBlock) gather_rows_kernel(GatherRowsParams p) {
  using T = typename Chunk<V>::T;
  const I cpr = static_cast<I>(p.row_bytes / V);
  const I total = static_cast<I>(p.n) * cpr;
  const I stride = static_cast<I>(gridDim.x) * kRowsBlock;
  for (I t = static_cast<I>(blockIdx.x) * kRowsBlock + threadIdx.x; t < total; t += stride) {
    const I i = t / cpr, c = t - i * cpr;
    const int64_t r = load_index(p.index, p.index64, i);
    T v{};
    if (r >= 0 && r < p.m) v = __ldg(reinterpret_cast<const T*>(p.src + r * p.row_bytes) + c);
    reinterpret_cast<T*>(p.out + static_cast<int64_t>(i) * p.row_bytes)[c] = v;
  }
}

// Elements of kind K (table_types.h ValueKind) at element offset `off` of `base`, as fp32: one, or four (off a
// multiple of 4, base aligned to four elements); stores round to nearest.
template <int K>
__device__ __forceinline__ float load1(const void* base, int64_t off) {
  using V = table::Val<K>;
  if constexpr (K == table::kValueFp32) return __ldg(static_cast<const float*>(base) + off);
  return V::to_f(static_cast<const typename V::T*>(base)[off]);
}
template <int K>
__device__ __forceinline__ void store1(void* base, int64_t off, float v) {
  using V = table::Val<K>;
  static_cast<typename V::T*>(base)[off] = V::from_f(v);
}
template <int K>
__device__ __forceinline__ float4 load4(const void* base, int64_t off) {
  if constexpr (K == table::kValueFp32) {
    return __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(base) + off));
  } else {
    using T = typename table::Val<K>::T;
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(static_cast<const T*>(base) + off));
    const T* h = reinterpret_cast<const T*>(&raw);
    return make_float4(table::Val<K>::to_f(h[0]), table::Val<K>::to_f(h[1]), table::Val<K>::to_f(h[2]),
                       table::Val<K>::to_f(h[3]));
  }
}
template <int K>
__device__ __forceinline__ void store4(void* base, int64_t off, const float4& v) {
  if constexpr (K == table::kValueFp32) {
    *reinterpret_cast<float4*>(static_cast<float*>(base) + off) = v;
  } else {
    using V = table::Val<K>;
    uint2 raw;
    typename V::T* h = reinterpret_cast<typename V::T*>(&raw);
    h[0] = V::from_f(v.x);
    h[1] = V::from_f(v.y);
    h[2] = V::from_f(v.z);
    h[3] = V::from_f(v.w);
    *reinterpret_cast<uint2*>(static_cast<typename V::T*>(base) + off) = raw;
  }
}

template <bool VEC4>
struct Cols;
template <>
struct Cols<true> {
  using T = float4;
  static constexpr int kWidth = 4;
  __device__ static T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  template <int K> __device__ static T load(const void* p, int64_t off) { return load4<K>(p, off); }
  __device__ static void fma(T& a, float w, const T& v) {
    a.x = fmaf(w, v.x, a.x); a.y = fmaf(w, v.y, a.y); a.z = fmaf(w, v.z, a.z); a.w = fmaf(w, v.w, a.w);
  }
  __device__ static void div(T& a, float s) { a.x /= s; a.y /= s; a.z /= s; a.w /= s; }
  template <int K> __device__ static void store(void* p, int64_t off, const T& v) { store4<K>(p, off, v); }
};
template <>
struct Cols<false> {
  using T = float;
  static constexpr int kWidth = 1;
  __device__ static T zero() { return 0.f; }
  template <int K> __device__ static T load(const void* p, int64_t off) { return load1<K>(p, off); }
  __device__ static void fma(T& a, float w, const T& v) { a = fmaf(w, v, a); }
  __device__ static void div(T& a, float s) { a /= s; }
  template <int K> __device__ static void store(void* p, int64_t off, const T& v) { store1<K>(p, off, v); }
};

constexpr int kF32 = table::kValueFp32;

// W (8, 4 or 1) elements of kind K at element offset off as fp32 (W = 8: base and off * size 16-byte aligned).
template <int K, int W>
__device__ __forceinline__ void load_w(const void* base, int64_t off, float (&f)[W]) {
  if constexpr (W == 1) {
    f[0] = load1<K>(base, off);
  } else if constexpr (W == 4 || K == table::kValueFp32) {
#pragma unroll
    for (int q = 0; q < W; q += 4) {
      const float4 v = load4<K>(base, off + q);
      f[q] = v.x; f[q + 1] = v.y; f[q + 2] = v.z; f[q + 3] = v.w;
    }
  } else {  // eight half elements: one 16-byte load
    using T = typename table::Val<K>::T;
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(base) + off));
    const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int q = 0; q < 8; ++q) f[q] = table::Val<K>::to_f(h[q]);
  }
}
template <int K, int W>
__device__ __forceinline__ void store_w(void* base, int64_t off, const float (&f)[W]) {
  if constexpr (W == 1) {
    store1<K>(base, off, f[0]);
  } else if constexpr (W == 4 || K == table::kValueFp32) {
#pragma unroll
    for (int q = 0; q < W; q += 4) store4<K>(base, off + q, make_float4(f[q], f[q + 1], f[q + 2], f[q + 3]));
  } else {
    using V = table::Val<K>;
    uint4 raw;
    typename V::T* h = reinterpret_cast<typename V::T*>(&raw);
#pragma unroll
    for (int q = 0; q < 8; ++q) h[q] = V::from_f(f[q]);
    *reinterpret_cast<uint4*>(static_cast<typename V::T*>(base) + off) = raw;
  }
}

// One thread per W elements of an output row (I: the counter's type, 32-bit when the chunks fit): src rows of
// kind S converted to kind O.
template <int S, int O, int W, typename I>
__global__ void __launch_bounds__(kRowsBlock) gather_convert_kernel(GatherRowsParams p) {
  const I cpr = static_cast<I>(p.d / W), total = static_cast<I>(p.n) * cpr;
  const I stride = static_cast<I>(gridDim.x) * kRowsBlock;
  for (I t = static_cast<I>(blockIdx.x) * kRowsBlock + threadIdx.x; t < total; t += stride) {
    const I i = t / cpr, c = (t - i * cpr) * W;
    const int64_t r = load_index(p.index, p.index64, i);
    float f[W];
    if (r >= 0 && r < p.m) {
      load_w<S, W>(p.src, r * p.d + c, f);
    } else {
#pragma unroll
      for (int q = 0; q < W; ++q) f[q] = 0.f;
    }
    store_w<O, W>(p.out, static_cast<int64_t>(i) * p.d + c, f);
  }
}

// f(std::integral_constant<int, K>) for a row kind K (fp16, bf16, fp32)
template <typename F>
void with_kind(int kind, const F& f) {
  if (!table::with_value_kind(kind, f))
    throw std::runtime_error("dynamicemb rows: unknown value kind " + std::to_string(kind));
}

// One warp: out_row = sum over entries j in [s, e), in order, of w_j * src[r_j] (entry(j, r, w) gives the row and
// the weight; a row outside [0, m) adds nothing), divided by `div` when it is nonzero. src rows of kind K, the
// row stored as kind O at element offset out_off of out.
template <bool VEC4, int K, int O, typename Entry>
__device__ __forceinline__ void warp_row_sum(const void* src, int64_t m, int64_t d, int64_t s, int64_t e,
                                             const Entry& entry, float div, void* out, int64_t out_off) {
  using C = Cols<VEC4>;
  const int lane = threadIdx.x & 31;
  for (int64_t c = lane * C::kWidth; c < d; c += 32 * C::kWidth) {
    typename C::T acc = C::zero();
    int64_t j = s;
    for (; j + 4 <= e; j += 4) {  // four rows in flight, added in entry order
      int64_t r[4];
      float w[4];
      typename C::T v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) entry(j + k, r[k], w[k]);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        v[k] = (r[k] >= 0 && r[k] < m) ? C::template load<K>(src, r[k] * d + c) : C::zero();
#pragma unroll
      for (int k = 0; k < 4; ++k) C::fma(acc, w[k], v[k]);
    }
    for (; j < e; ++j) {
      int64_t r;
      float w;
      entry(j, r, w);
      if (r >= 0 && r < m) C::fma(acc, w, C::template load<K>(src, r * d + c));
    }
    if (div != 0.f) C::div(acc, div);
    C::template store<O>(out, out_off + c, acc);
  }
}

template <bool VEC4, int K>
__global__ void __launch_bounds__(kRowsBlock) pool_rows_kernel(PoolRowsParams p) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kRowsBlock / 32);
  for (int64_t b = (static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x) / 32; b < p.num_bags; b += warps) {
    const int64_t s = clamp_off(p.offsets[b], p.n);
    const int64_t e1 = clamp_off(p.offsets[b + 1], p.n), e = e1 < s ? s : e1;
    auto entry = [&](int64_t j, int64_t& r, float& w) {
      r = load_index(p.index, p.index64, j);
      w = p.weight ? p.weight[j] : 1.f;
    };
    const int64_t row = p.batch > 0 ? (b % p.batch) * (p.num_bags / p.batch) + b / p.batch : b;
    warp_row_sum<VEC4, K, kF32>(p.src, p.m, p.d, s, e, entry, p.mean && e > s ? static_cast<float>(e - s) : 0.f,
                                p.out, row * p.d);
  }
}

struct SegScratch {
  int32_t *keys, *keys_sorted, *vals, *vals_sorted, *start;
  float* pieces;  // (2 * chunks, d)
  void* sort_temp;
  size_t sort_bytes, total;
};

int sort_bits(int64_t num_unique) {  // keys 0 .. num_unique (num_unique: the entries to skip)
  int bits = 1;
  while ((int64_t(1) << bits) <= num_unique) ++bits;
  return bits;
}

size_t sort_bytes(int64_t n, int64_t num_unique) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<int>(n), 0, sort_bits(num_unique));
  return bytes;
}

__host__ __device__ inline int64_t seg_chunks(int64_t n) { return (n + kSegChunk - 1) / kSegChunk; }

SegScratch seg_scratch(char* temp, int64_t n, int64_t num_unique, int64_t d) {
  SegScratch s{};
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    char* q = temp ? temp + off : nullptr;
    off += up256(bytes);
    return q;
  };
  s.keys = reinterpret_cast<int32_t*>(take(4 * n));
  s.keys_sorted = reinterpret_cast<int32_t*>(take(4 * n));
  s.vals = reinterpret_cast<int32_t*>(take(4 * n));
  s.vals_sorted = reinterpret_cast<int32_t*>(take(4 * n));
  s.start = reinterpret_cast<int32_t*>(take(4 * (num_unique + 1)));
  s.pieces = reinterpret_cast<float*>(take(4 * 2 * seg_chunks(n) * d));
  s.sort_bytes = sort_bytes(n, num_unique);
  s.sort_temp = take(static_cast<int64_t>(s.sort_bytes) + 1);
  s.total = static_cast<size_t>(off);
  return s;
}

__global__ void seg_keys_kernel(SegmentSumParams p, int32_t* keys, int32_t* vals) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * kRowsBlock) {
    const int64_t u = load_index(p.inverse, p.inverse64, i);
    keys[i] = (u >= 0 && u < p.num_unique) ? static_cast<int32_t>(u) : static_cast<int32_t>(p.num_unique);
    vals[i] = static_cast<int32_t>(i);
  }
}

// start[u] (u in [0, num_unique]): the first sorted entry whose key is >= u (n when none is).
__global__ void seg_start_kernel(const int32_t* sk, int64_t n, int64_t num_unique, int32_t* start) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kRowsBlock) {
    const int64_t k = sk[i];
    const int64_t kp = i > 0 ? sk[i - 1] : -1;
    for (int64_t u = kp + 1; u <= k; ++u) start[u] = static_cast<int32_t>(i);
    if (i == n - 1)
      for (int64_t u = k + 1; u <= num_unique; ++u) start[u] = static_cast<int32_t>(n);
  }
}

// One warp per chunk of kSegChunk sorted entries: the runs of equal uniques summed in entry order (four entries'
// rows in flight); a run that is its unique's whole segment goes to the output, a piece of a longer segment to the
// chunk's slot (see the top of the file). Entries of key num_unique (skipped ids) are dropped.
template <bool VEC4, int O>
__global__ void __launch_bounds__(kRowsBlock) seg_chunk_kernel(SegmentSumParams p, const int32_t* keys,
                                                               const int32_t* pos, float* pieces) {
  using C = Cols<VEC4>;
  const int lane = threadIdx.x & 31;
  const int64_t chunks = seg_chunks(p.n), warps = static_cast<int64_t>(gridDim.x) * (kRowsBlock / 32);
  for (int64_t c = (static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x) / 32; c < chunks; c += warps) {
    const int64_t b = c * kSegChunk, e = b + kSegChunk < p.n ? b + kSegChunk : p.n;
    const int32_t before = b > 0 ? keys[b - 1] : -1, after = e < p.n ? keys[e] : -1;
    for (int64_t col = lane * C::kWidth; col < p.d; col += 32 * C::kWidth) {
      auto flush = [&](int32_t u, int64_t run_begin, int64_t run_end, const typename C::T& acc) {
        if (u >= p.num_unique) return;
        const bool began = run_begin == b && before == u, goes_on = run_end == e && after == u;
        if (!began && !goes_on)
          C::template store<O>(p.out, u * p.d + col, acc);
        else
          C::template store<kF32>(pieces, (2 * c + (began ? 0 : 1)) * p.d + col, acc);
      };
      typename C::T acc = C::zero();
      int32_t cur = keys[b];
      int64_t run_begin = b;
      for (int64_t j = b; j < e; j += 4) {
        int32_t k[4];
        float w[4];
        typename C::T v[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          int64_t r = -1;
          w[q] = 0.f;
          k[q] = -1;
          if (j + q < e) {
            k[q] = keys[j + q];
            const int64_t i = pos[j + q];
            r = p.row_of ? load_index(p.row_of, p.row_of64, i) : i;
            w[q] = p.weight ? p.weight[i] : 1.f;
          }
          v[q] = (r >= 0 && r < p.grad_rows) ? C::template load<kF32>(p.grad, r * p.d + col) : C::zero();
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (j + q >= e) break;
          if (k[q] != cur) {
            flush(cur, run_begin, j + q, acc);
            acc = C::zero();
            cur = k[q];
            run_begin = j + q;
          }
          C::fma(acc, w[q], v[q]);
        }
      }
      flush(cur, run_begin, e, acc);
    }
  }
}

// One warp per unique: no entries -> a zero row; a segment cut by chunk boundaries -> its pieces added in chunk
// order (slot 1 of its first chunk, slot 0 of every later one); others were written by seg_chunk_kernel.
template <bool VEC4, int O>
__global__ void __launch_bounds__(kRowsBlock) seg_join_kernel(SegmentSumParams p, const int32_t* start,
                                                              const float* pieces) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kRowsBlock / 32);
  const int64_t slots = 2 * seg_chunks(p.n);
  for (int64_t u = (static_cast<int64_t>(blockIdx.x) * kRowsBlock + threadIdx.x) / 32; u < p.num_unique;
       u += warps) {
    const int64_t s = start[u], e = start[u + 1];
    const int64_t c0 = s / kSegChunk, c1 = e > s ? (e - 1) / kSegChunk : c0;
    if (e > s && c0 == c1) continue;
    auto entry = [&](int64_t j, int64_t& r, float& w) {
      r = j == 0 ? 2 * c0 + 1 : 2 * (c0 + j);
      w = 1.f;
    };
    warp_row_sum<VEC4, kF32, O>(pieces, slots, p.d, 0, e > s ? c1 - c0 + 1 : 0, entry, 0.f, p.out, u * p.d);
  }
}

void cuda_check(const char* what, cudaError_t e) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("dynamicemb rows: ") + what + ": " + cudaGetErrorString(e));
}

unsigned warp_blocks(int64_t rows) { return blocks_for(rows, kRowsBlock / 32); }

}  // namespace

void launch_gather_rows(const GatherRowsParams& p, void* stream) {
  if (p.n == 0 || p.row_bytes == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (p.src_kind != p.out_kind) {
    // eight elements per thread where the rows allow 16-byte accesses on both sides, else four, else one
    auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    const int w = p.vec4 && p.d % 8 == 0 && a16(p.src) && a16(p.out) ? 8 : p.vec4 ? 4 : 1;
    const int64_t total = p.n * (p.d / w);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks_for(total, kRowsBlock), 1 << 20));
    const bool small = total < (int64_t(1) << 31) - int64_t(grid) * kRowsBlock;
    with_kind(p.src_kind, [&](auto s) {
      with_kind(p.out_kind, [&](auto o) {
        constexpr int S = decltype(s)::value, O = decltype(o)::value;
        if constexpr (S != O) {
          auto go = [&](auto wc) {
            constexpr int W = decltype(wc)::value;
            if (small)
              gather_convert_kernel<S, O, W, uint32_t><<<grid, kRowsBlock, 0, st>>>(p);
            else
              gather_convert_kernel<S, O, W, int64_t><<<grid, kRowsBlock, 0, st>>>(p);
          };
          if (w == 8)
            go(std::integral_constant<int, 8>{});
          else if (w == 4)
            go(std::integral_constant<int, 4>{});
          else
            go(std::integral_constant<int, 1>{});
        }
      });
    });
    check_launch("gather_rows convert");
    return;
  }
  const int64_t total = p.n * (p.row_bytes / p.vec);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks_for(total, kRowsBlock), 1 << 20));
  const bool small = total < (int64_t(1) << 31) - int64_t(grid) * kRowsBlock;
  auto go = [&](auto v) {
    constexpr int V = decltype(v)::value;
    if (small)
      gather_rows_kernel<V, uint32_t><<<grid, kRowsBlock, 0, st>>>(p);
    else
      gather_rows_kernel<V, int64_t><<<grid, kRowsBlock, 0, st>>>(p);
  };
  switch (p.vec) {
    case 16: go(std::integral_constant<int, 16>{}); break;
    case 8: go(std::integral_constant<int, 8>{}); break;
    case 4: go(std::integral_constant<int, 4>{}); break;
    case 2: go(std::integral_constant<int, 2>{}); break;
    default: go(std::integral_constant<int, 1>{}); break;
  }
  check_launch("gather_rows");
}

void launch_pool_rows(const PoolRowsParams& p, void* stream) {
  if (p.num_bags == 0 || p.d == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const unsigned grid = std::min<unsigned>(warp_blocks(p.num_bags), 1u << 20);
  with_kind(p.src_kind, [&](auto k) {
    constexpr int K = decltype(k)::value;
    if (p.vec4)
      pool_rows_kernel<true, K><<<grid, kRowsBlock, 0, st>>>(p);
    else
      pool_rows_kernel<false, K><<<grid, kRowsBlock, 0, st>>>(p);
  });
  check_launch("pool_rows");
}

size_t segment_sum_temp_bytes(int64_t n, int64_t num_unique, int64_t d) {
  return seg_scratch(nullptr, n, num_unique, d).total;
}

void launch_segment_sum_rows(const SegmentSumParams& p, void* stream) {
  if (p.num_unique == 0 || p.d == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (p.n == 0) {  // (zero bits are a zero in every kind)
    const size_t esize = p.out_kind == table::kValueFp32 ? 4 : 2;
    cuda_check("segment_sum_rows zero", cudaMemsetAsync(p.out, 0, esize * p.num_unique * p.d, st));
    return;
  }
  SegScratch s = seg_scratch(p.temp, p.n, p.num_unique, p.d);
  const unsigned grid = std::min<unsigned>(blocks_for(p.n, kRowsBlock), 1u << 20);
  seg_keys_kernel<<<grid, kRowsBlock, 0, st>>>(p, s.keys, s.vals);
  check_launch("segment_sum_rows keys");
  size_t bytes = s.sort_bytes;
  cuda_check("segment_sum_rows sort",
             cub::DeviceRadixSort::SortPairs(s.sort_temp, bytes, s.keys, s.keys_sorted, s.vals, s.vals_sorted,
                                             static_cast<int>(p.n), 0, sort_bits(p.num_unique), st));
  seg_start_kernel<<<grid, kRowsBlock, 0, st>>>(s.keys_sorted, p.n, p.num_unique, s.start);
  check_launch("segment_sum_rows starts");
  const unsigned cgrid = std::min<unsigned>(warp_blocks(seg_chunks(p.n)), 1u << 20);
  const unsigned ugrid = std::min<unsigned>(warp_blocks(p.num_unique), 1u << 20);
  with_kind(p.out_kind, [&](auto o) {
    constexpr int O = decltype(o)::value;
    if (p.vec4) {
      seg_chunk_kernel<true, O><<<cgrid, kRowsBlock, 0, st>>>(p, s.keys_sorted, s.vals_sorted, s.pieces);
      seg_join_kernel<true, O><<<ugrid, kRowsBlock, 0, st>>>(p, s.start, s.pieces);
    } else {
      seg_chunk_kernel<false, O><<<cgrid, kRowsBlock, 0, st>>>(p, s.keys_sorted, s.vals_sorted, s.pieces);
      seg_join_kernel<false, O><<<ugrid, kRowsBlock, 0, st>>>(p, s.start, s.pieces);
    }
  });
  check_launch("segment_sum_rows sums");
}

}  // namespace lookup
}  // namespace dynamicemb
