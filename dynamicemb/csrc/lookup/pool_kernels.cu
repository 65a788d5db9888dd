// Forward: gather + (weighted) pooling. One warp streams the ids of 32 consecutive bags (sum/mean) or 32
// consecutive ids (sequence) in order: lane l loads the row address of id base + l (one coalesced load per 32
// ids), then the warp issues kUnroll row loads at a time (each lane N consecutive columns: N = 4 is one
// 16-byte fp32 / 8-byte fp16/bf16 access) before summing them in id order; the bag of an id is a ballot over the
// lanes' bag ends (each lane finds its id's bag once per round), and a bag is written when the stream passes its
// end (empty bags write zeros). Rows without a slot (address 0) read their fallback value (cold path).
// The sequence kernel (pooling none) takes each id's row address from one of three places (ForwardParams::addr):
// the row-address pass (rowp), the dedup's unique of the id (inverse -> urow, utables: the training step whose
// backward is segmented, so no row-address pass runs), or its own read-only probe of the id's table (eval: no dedup
// and no find pass at all; each lane probes its id's bucket, hot ids re-probe from L2).
#include <type_traits>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/probe_meta.cuh"
#include "dynamicemb/csrc/table/probe.cuh"

namespace dynamicemb {
namespace lookup {

// The training forward's copy of the module's running refusals into their pinned host mirror (declared with
// launch_forward_mirrored in dynamicemb/csrc/ops/forward_mirror.h, the ops' side).
struct RefusalMirror {
  const int64_t* refused_total;  // (num_tables) device: the module's running count
  int64_t* host;                 // (num_tables) pinned host memory (device-mapped: UVA), or null: no stores
  int num_tables;
};

namespace detail {

constexpr int kFwdBlock = 128;  // ~90 registers (8 rows in flight): 5 blocks per SM
constexpr int kUnroll = 8;

// Fallback value of one column (see fallback_value); not inlined, so the initializer's code and registers stay
// off the streaming loop.
__device__ __noinline__ float fallback_at(const TableMeta* m, bool train, uint64_t key, int64_t col) {
  return fallback_value(*m, train, key, col);
}

// The refusal mirror's stores by the first block (dynamicemb/csrc/ops/forward_mirror.h).
__device__ __forceinline__ void store_mirror(const RefusalMirror& m) {
  if (m.host != nullptr && blockIdx.x == 0)
    for (int t = threadIdx.x; t < m.num_tables; t += blockDim.x) m.host[t] = m.refused_total[t];
}

// Writes bag j (its dim, first output element and end are held by lane j) from `acc`, then starts bag j + 1.
template <int O, int N>
__device__ __forceinline__ void emit_bag(typename Val<O>::T* out, int c, bool mean, int bdim, int64_t bout,
                                         int64_t bend, int& j, int64_t& jlo, float (&acc)[N]) {
  const int d = __shfl_sync(0xffffffffu, bdim, j);
  const int64_t o = __shfl_sync(0xffffffffu, bout, j);
  const int64_t hi = __shfl_sync(0xffffffffu, bend, j);
  if (c < d) {
    if (mean) {
      const float len = static_cast<float>(hi - jlo > 1 ? hi - jlo : 1);
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = acc[e] / len;
    }
    store_n<O, N>(out + o + c, acc);
  }
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  jlo = hi > jlo ? hi : jlo;
  ++j;
}

template <int V, int O, int N>
__global__ void __launch_bounds__(kFwdBlock, 1) pooled_kernel(ForwardParams p, RefusalMirror mirror) {
  if (p.pdl) accel::griddep_wait();
  store_mirror(mirror);
  using T = typename Val<V>::T;
  using OT = typename Val<O>::T;
  const int lane = threadIdx.x & 31;
  const int64_t b0 = ((static_cast<int64_t>(blockIdx.x) * kFwdBlock + threadIdx.x) >> 5) * 32;
  if (b0 >= p.num_bags) return;
  const int nb = static_cast<int>(p.num_bags - b0 < 32 ? p.num_bags - b0 : 32);
  // lane l describes bag b0 + l: end, dim, table and first output element
  int64_t bend = 0, bout = 0;
  int bdim = 0, btab = 0;
  if (lane < nb) {
    const int64_t b = b0 + lane;
    bend = clamp_off(p.offsets[b + 1], p.n);
    int64_t f = b / p.batch;
    if (f >= p.num_features) f = p.num_features - 1;
    btab = p.feature_table[f];
    bdim = static_cast<int>(p.meta[btab].dim);
    bout = (b - f * p.batch) * p.out_stride + p.feature_col[f];
  }
  const int64_t k0 = clamp_off(p.offsets[b0], p.n);
  int64_t k1 = __shfl_sync(0xffffffffu, bend, nb - 1);
  if (k1 < k0) k1 = k0;
  OT* out = reinterpret_cast<OT*>(p.out);
  const bool mean = p.pooling == kPoolMean;
  for (int c0 = 0; c0 < p.max_dim; c0 += 32 * N) {
    const int c = c0 + lane * N;
    float acc[N];
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] = 0.f;
    int j = 0;         // bag being summed (warp-uniform)
    int64_t jlo = k0;  // its first id
    for (int64_t base = k0; base < k1; base += 32) {
      const int cnt = static_cast<int>(k1 - base < 32 ? k1 - base : 32);
      uint64_t al = 0;
      float wl = 1.f;
      if (lane < cnt) {
        al = p.rowp[base + lane];
        if (p.psw) wl = p.psw[base + lane];
      }
      if (__ballot_sync(0xffffffffu, lane < cnt && al == 0) != 0) {
        // cold: a round with ids without a row, one id at a time (keeps the initializer call off the hot loop)
        for (int q = 0; q < cnt; ++q) {
          const int jb = __popc(__ballot_sync(0xffffffffu, lane < nb && bend <= base + q));
          while (j < jb) emit_bag<O, N>(out, c, mean, bdim, bout, bend, j, jlo, acc);
          const uint64_t a = __shfl_sync(0xffffffffu, al, q);
          const float wq = __shfl_sync(0xffffffffu, wl, q);
          const int d = __shfl_sync(0xffffffffu, bdim, jb);
          const int t = __shfl_sync(0xffffffffu, btab, jb);
          float x[N];
#pragma unroll
          for (int e = 0; e < N; ++e) x[e] = 0.f;
          if (a != 0) {
            if (c < d) load_n<V, N>(reinterpret_cast<const T*>(a) + c, x);
          } else {
            const uint64_t key = p.ids[base + q];
            for (int e = 0; e < N; ++e) x[e] = c + e < d ? fallback_at(p.meta + t, p.train, key, c + e) : 0.f;
          }
#pragma unroll
          for (int e = 0; e < N; ++e) acc[e] += wq * x[e];
        }
        continue;
      }
      // bag (among the warp's nb) of this lane's id: the first with end > its position (binary search over
      // the lanes' ends; offsets are monotone), and that bag's dim; the loops below only shuffle them
      const int myjb = warp_bag_of(bend, nb, base + lane);
      const int myd = __shfl_sync(0xffffffffu, bdim, myjb);
      for (int q0 = 0; q0 < cnt; q0 += kUnroll) {
        float x[kUnroll][N];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = q0 + u;
          const uint64_t a = __shfl_sync(0xffffffffu, al, q & 31);
          const int d = __shfl_sync(0xffffffffu, myd, q & 31);
#pragma unroll
          for (int e = 0; e < N; ++e) x[u][e] = 0.f;
          if (q < cnt && c < d) load_n<V, N>(reinterpret_cast<const T*>(a) + c, x[u]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = q0 + u;
          if (q >= cnt) break;
          const int jb = __shfl_sync(0xffffffffu, myjb, q);
          while (j < jb) emit_bag<O, N>(out, c, mean, bdim, bout, bend, j, jlo, acc);
          const float wq = p.psw ? __shfl_sync(0xffffffffu, wl, q) : 1.f;
#pragma unroll
          for (int e = 0; e < N; ++e) acc[e] += wq * x[u][e];
        }
      }
    }
    while (j < nb) emit_bag<O, N>(out, c, mean, bdim, bout, bend, j, jlo, acc);
  }
}

// Feature of position i for the probing sequence kernel (probe_meta.cuh: the dedup's function, so a fallback row
// reads the same table as on the dedup path).
__device__ __forceinline__ int feature_at(const ForwardParams& p, int64_t i) {
  return feature_of_pos(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i);
}

// Row address of id i (0: no row) and the table of its feature (ForwardParams::addr; see the file comment).
template <int V, int ADDR>
__device__ __forceinline__ uint64_t id_row(const ForwardParams& p, int64_t i, bool skip, int& table) {
  using T = typename Val<V>::T;
  if constexpr (ADDR == kAddrRowp) {
    return p.rowp[i];
  } else if constexpr (ADDR == kAddrUnique) {
    const int32_t u = p.inverse[i];
    if (u < 0) return 0;
    if (p.uaddr != nullptr) return p.uaddr[u];  // a step over hybrid tables: host rows in HBM scratch
    const int64_t r = p.urow[u];
    return r < 0 ? 0 : reinterpret_cast<uint64_t>(meta_row<T>(p.meta[p.utables[u]], r));
  } else {
    const uint64_t key = p.ids[i];
    table = __ldg(p.feature_table + feature_at(p, i));
    if (skip || table::is_reserved_key(key)) return 0;
    const TableMeta& m = p.meta[table];
    const int64_t s = probe_meta_slot(m, key);
    return s < 0 ? 0 : reinterpret_cast<uint64_t>(meta_row<T>(m, s));
  }
}

template <int V, int O, int N, int ADDR>
__global__ void __launch_bounds__(kFwdBlock, 1) sequence_kernel(ForwardParams p, RefusalMirror mirror) {
  if (p.pdl) accel::griddep_wait();
  store_mirror(mirror);
  using T = typename Val<V>::T;
  using OT = typename Val<O>::T;
  const int lane = threadIdx.x & 31;
  const int64_t base = ((static_cast<int64_t>(blockIdx.x) * kFwdBlock + threadIdx.x) >> 5) * 32;
  if (base >= p.n) return;
  const int cnt = static_cast<int>(p.n - base < 32 ? p.n - base : 32);
  const int dim = p.max_dim;
  uint64_t al = 0;
  float wl = 1.f;
  int tl = 0;  // the table of this lane's id (probing kernel only)
  if (lane < cnt) {
    al = id_row<V, ADDR>(p, base + lane, ADDR == kAddrProbe && p.skip != nullptr && *p.skip != 0, tl);
    if (p.psw) wl = p.psw[base + lane];
  }
  OT* out = reinterpret_cast<OT*>(p.out);
  for (int c0 = 0; c0 < dim; c0 += 32 * N) {
    const int c = c0 + lane * N;
    if (__ballot_sync(0xffffffffu, lane < cnt && al == 0) != 0) {  // cold: ids without a row
      for (int q = 0; q < cnt; ++q) {
        const int64_t i = base + q;
        const uint64_t a = __shfl_sync(0xffffffffu, al, q);
        const float wq = __shfl_sync(0xffffffffu, wl, q);
        const int tq = __shfl_sync(0xffffffffu, tl, q);
        float x[N];
#pragma unroll
        for (int e = 0; e < N; ++e) x[e] = 0.f;
        if (a != 0) {
          if (c < dim) load_n<V, N>(reinterpret_cast<const T*>(a) + c, x);
        } else {
          int t = tq;
          if constexpr (ADDR == kAddrRowp) {  // the table of the id's bag (the dedup's resolve wrote it)
            int64_t f = p.bag[i] / p.batch;
            f = f < 0 ? 0 : (f >= p.num_features ? p.num_features - 1 : f);
            t = p.feature_table[f];
          } else if constexpr (ADDR == kAddrUnique) {  // no bags: the dedup's feature of the position
            t = __ldg(p.feature_table + feature_at(p, i));
          }
          const uint64_t key = p.ids[i];
          for (int e = 0; e < N; ++e) x[e] = c + e < dim ? fallback_at(p.meta + t, p.train, key, c + e) : 0.f;
        }
        if (c < dim) {
#pragma unroll
          for (int e = 0; e < N; ++e) x[e] = wq * x[e];
          store_n<O, N>(out + i * p.out_stride + c, x);
        }
      }
      continue;
    }
    for (int q0 = 0; q0 < cnt; q0 += kUnroll) {
      float x[kUnroll][N];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int q = q0 + u;
        const uint64_t a = __shfl_sync(0xffffffffu, al, q & 31);
#pragma unroll
        for (int e = 0; e < N; ++e) x[u][e] = 0.f;
        if (q < cnt && c < dim) load_n<V, N>(reinterpret_cast<const T*>(a) + c, x[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int q = q0 + u;
        if (q >= cnt) break;
        const float wq = __shfl_sync(0xffffffffu, wl, q);
        if (c < dim) {
#pragma unroll
          for (int e = 0; e < N; ++e) x[u][e] = wq * x[u][e];
          store_n<O, N>(out + (base + q) * p.out_stride + c, x[u]);
        }
      }
    }
  }
}

}  // namespace detail

template <int V, int O>
void launch_forward_mirrored(const ForwardParams& p, bool vec4, const int64_t* refused_total, int64_t* refused_host,
                             int num_tables, void* stream) {
  const RefusalMirror mirror{refused_total, refused_host, num_tables};
  const bool seq = p.pooling == kPoolNone;
  const int64_t items = seq ? p.n : p.num_bags;
  if (items == 0) return;
  const unsigned grid = blocks_for((items + 31) / 32, detail::kFwdBlock / 32);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (seq) {
    auto go = [&](auto addr) {
      constexpr int A = decltype(addr)::value;
      if (vec4) launch_maybe_pdl(p.pdl, detail::sequence_kernel<V, O, 4, A>, grid, detail::kFwdBlock, st, p, mirror);
      else launch_maybe_pdl(p.pdl, detail::sequence_kernel<V, O, 1, A>, grid, detail::kFwdBlock, st, p, mirror);
    };
    if (p.addr == kAddrUnique) go(std::integral_constant<int, kAddrUnique>{});
    else if (p.addr == kAddrProbe) go(std::integral_constant<int, kAddrProbe>{});
    else go(std::integral_constant<int, kAddrRowp>{});
  } else {
    if (vec4) launch_maybe_pdl(p.pdl, detail::pooled_kernel<V, O, 4>, grid, detail::kFwdBlock, st, p, mirror);
    else launch_maybe_pdl(p.pdl, detail::pooled_kernel<V, O, 1>, grid, detail::kFwdBlock, st, p, mirror);
  }
  check_launch("forward");
}

template <int V, int O>
void launch_forward(const ForwardParams& p, bool vec4, void* stream) {
  launch_forward_mirrored<V, O>(p, vec4, nullptr, nullptr, 0, stream);
}

#define DYNAMICEMB_LOOKUP_FWD(V, O)                                             \
  template void launch_forward<V, O>(const ForwardParams&, bool, void*); \
  template void launch_forward_mirrored<V, O>(const ForwardParams&, bool, const int64_t*, int64_t*, int, void*);
DYNAMICEMB_LOOKUP_FWD(kValueFp32, kValueFp32)
DYNAMICEMB_LOOKUP_FWD(kValueFp32, kValueFp16)
DYNAMICEMB_LOOKUP_FWD(kValueFp32, kValueBf16)
DYNAMICEMB_LOOKUP_FWD(kValueFp16, kValueFp32)
DYNAMICEMB_LOOKUP_FWD(kValueFp16, kValueFp16)
DYNAMICEMB_LOOKUP_FWD(kValueFp16, kValueBf16)
DYNAMICEMB_LOOKUP_FWD(kValueBf16, kValueFp32)
DYNAMICEMB_LOOKUP_FWD(kValueBf16, kValueFp16)
DYNAMICEMB_LOOKUP_FWD(kValueBf16, kValueBf16)
#undef DYNAMICEMB_LOOKUP_FWD

}  // namespace lookup
}  // namespace dynamicemb
