// Byte-bound probe for the two big kernels of the dynamicemb training step at NVIDIA's config (issue 35): the same
// ids (10 tables x 104,857 ids of one id per sample, power law 1.05 over 1,677,721 ids, D128 fp32 rows, 1M slots
// per table), moved by the simplest kernels that read and write the same bytes in the same order, next to plain
// sequential streams of the same sizes. The step's sequence_kernel and seg_apply_kernel are judged against these
// (docs/dynamicemb.md, "Byte bound of the two big kernels").
//   forward   out[i] = row of id i's unique: random 512-byte rows (a unique's first read from DRAM, repeats from
//             L2 when close) + 537 MB written in order; "compact" reads the uniques' rows from a buffer in
//             first-occurrence order (a near-sequential read of the same bytes)
//   backward  the gradient rows read in the CSR's order (unique by unique, each segment's positions ascending) and
//             the uniques' rows read and written once at their slots; each part timed alone, and in position order
//             (sequential) for the floor; Adam's 1,536-byte [w | m | v] rows the same way, and in address order
// Thread per 16-byte chunk, IT independent chunks per thread (enough bytes in flight), grid-stride.
// Build and run (GPU): nvcc -O3 -std=c++17 -arch=sm_90 -o step_bound_probe tools/dynamicemb_dev/step_bound_probe.cu
//                      ./step_bound_probe [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <vector>

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

constexpr int kD4 = 32;  // 16-byte chunks per 128-wide fp32 row
constexpr int kIt = 4;   // independent chunks per thread

// Sequential copy, read and write of n 16-byte chunks.
__global__ void copy_k(const float4* __restrict__ a, float4* __restrict__ b, int64_t n) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += s) b[i] = a[i];
}

__global__ void write_k(float4* __restrict__ b, int64_t n, float v) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += s)
    b[i] = make_float4(v, v, v, v);
}

// Reads chunk (idx[t / 32], t % 32) of src for t < n (idx null: row t / 32); the sum is stored only when it equals
// a value it cannot take, so the loads stay live.
__global__ void read_rows_k(const int32_t* __restrict__ idx, const float4* __restrict__ src, int64_t n,
                            float* __restrict__ sink) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float acc = 0.f;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < n; b += s * kIt) {
    int64_t r[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t t = b + k * s;
      r[k] = t < n ? (idx ? static_cast<int64_t>(idx[t >> 5]) : (t >> 5)) * kD4 + (t & 31) : -1;
    }
    float4 v[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) v[k] = r[k] >= 0 ? src[r[k]] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kIt; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  if (acc == -1.2345e-30f) sink[0] = acc;
}

// Forward: out[t] = chunk t % 32 of row slot[inverse[t / 32]] (slot: global row index in rows).
__global__ void gather_k(const int32_t* __restrict__ inverse, const int64_t* __restrict__ slot,
                         const float4* __restrict__ rows, float4* __restrict__ out, int64_t n) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < n; b += s * kIt) {
    int64_t r[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t t = b + k * s;
      r[k] = t < n ? slot[inverse[t >> 5]] * kD4 + (t & 31) : -1;
    }
    float4 v[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) v[k] = r[k] >= 0 ? rows[r[k]] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t t = b + k * s;
      if (t < n) out[t] = v[k];
    }
  }
}

// Backward's row update alone: row slot[u] -= lr (load and store of every unique's row once). W: 16-byte chunks
// of a row (32: a D128 fp32 row; 96: Adam's [w | m | v]).
template <int W = kD4>
__global__ void row_update_k(const int64_t* __restrict__ slot, float4* __restrict__ rows, int64_t n, float lr) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < n; b += s * kIt) {
    int64_t r[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t t = b + k * s;
      r[k] = t < n ? slot[t / W] * W + (t % W) : -1;
    }
    float4 v[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) v[k] = r[k] >= 0 ? rows[r[k]] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kIt; ++k)
      if (r[k] >= 0) rows[r[k]] = make_float4(v[k].x - lr, v[k].y - lr, v[k].z - lr, v[k].w - lr);
  }
}

// The same row update by fp32 vector reductions in L2 (the SGD kernel's red.global.add.v4.f32: no load by the SM).
__global__ void row_red_k(const int64_t* __restrict__ slot, float4* __restrict__ rows, int64_t n, float lr) {
  const int64_t s = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < n; b += s * kIt) {
    int64_t r[kIt];
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      const int64_t t = b + k * s;
      r[k] = t < n ? slot[t >> 5] * kD4 + (t & 31) : -1;
    }
#pragma unroll
    for (int k = 0; k < kIt; ++k) {
      if (r[k] < 0) continue;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(rows + r[k], make_float4(-lr, -lr, -lr, -lr));
#else
      float* p = reinterpret_cast<float*>(rows + r[k]);
      for (int e = 0; e < 4; ++e) atomicAdd(p + e, -lr);
#endif
    }
  }
}

// Adam's update fused as the segmented kernel does it, one warp per unique of the list ul (a lane: 16 bytes of each
// of the unique's gradient rows, summed, and of its [w | m | v] row, read, updated, written): the same uniques in
// unique order or in row-address order show what a CSR sorted by row address would give the real kernel.
__global__ void adam_fused_k(const int32_t* __restrict__ ul, int64_t L, const int64_t* __restrict__ start,
                             const int32_t* __restrict__ csr, const int64_t* __restrict__ slot,
                             const float4* __restrict__ grad, float4* __restrict__ rows) {
  const int lane = threadIdx.x & 31;
  const int64_t nw = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; q < L; q += nw) {
    const int32_t u = ul[q];
    float4* r = rows + slot[u] * (3 * kD4);
    float4 w = __ldcg(r + lane), m = __ldcg(r + kD4 + lane), v = __ldcg(r + 2 * kD4 + lane);
    float4 g = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int64_t k = start[u]; k < start[u + 1]; ++k) {
      const float4 x = grad[static_cast<int64_t>(csr[k]) * kD4 + lane];
      g.x += x.x; g.y += x.y; g.z += x.z; g.w += x.w;
    }
    m.x += 0.1f * (g.x - m.x); m.y += 0.1f * (g.y - m.y); m.z += 0.1f * (g.z - m.z); m.w += 0.1f * (g.w - m.w);
    v.x += 1e-3f * (g.x * g.x - v.x); v.y += 1e-3f * (g.y * g.y - v.y);
    v.z += 1e-3f * (g.z * g.z - v.z); v.w += 1e-3f * (g.w * g.w - v.w);
    w.x -= 1e-3f * m.x / (sqrtf(v.x) + 1e-8f); w.y -= 1e-3f * m.y / (sqrtf(v.y) + 1e-8f);
    w.z -= 1e-3f * m.z / (sqrtf(v.z) + 1e-8f); w.w -= 1e-3f * m.w / (sqrtf(v.w) + 1e-8f);
    r[lane] = w; r[kD4 + lane] = m; r[2 * kD4 + lane] = v;
  }
}

static double inverse_cdf(double u, double n, double alpha) {  // benchmarks/embedding.py's power_law_ids
  const double a = 1.0 - alpha;
  double k = std::floor(std::pow((std::pow(n, a) - 1.0) * u + 1.0, 1.0 / a));
  return std::min(std::max(k, 1.0), n);
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  const int T = 10, B = 104857;
  const int64_t N = static_cast<int64_t>(T) * B, slots = 1 << 20;
  // ids and the dedup: uniques numbered by first occurrence (as the step's dedup), each at a random slot
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<int32_t> inverse(N);
  std::vector<int64_t> uslot;
  std::vector<int32_t> ucount;
  for (int t = 0; t < T; ++t) {
    std::unordered_map<int64_t, int32_t> seen;
    seen.reserve(2 * B);
    std::vector<int64_t> perm(slots);
    for (int64_t i = 0; i < slots; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    int64_t local = 0;
    for (int b = 0; b < B; ++b) {
      const int64_t key = static_cast<int64_t>(inverse_cdf(uni(rng), 1677721.0, 1.05));
      auto it = seen.find(key);
      int32_t u;
      if (it == seen.end()) {
        u = static_cast<int32_t>(uslot.size());
        seen.emplace(key, u);
        uslot.push_back(t * slots + perm[local++]);
        ucount.push_back(0);
      } else {
        u = it->second;
      }
      inverse[static_cast<int64_t>(t) * B + b] = u;
      ++ucount[u];
    }
  }
  const int64_t U = static_cast<int64_t>(uslot.size());
  // CSR: positions grouped by unique (unique order, ascending positions within a segment)
  std::vector<int64_t> start(U + 1, 0);
  for (int64_t u = 0; u < U; ++u) start[u + 1] = start[u] + ucount[u];
  std::vector<int32_t> csr(N);
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < N; ++i) csr[fill[inverse[i]]++] = static_cast<int32_t>(i);
  }
  std::vector<int64_t> compact(U);
  for (int64_t u = 0; u < U; ++u) compact[u] = u;
  int32_t maxc = *std::max_element(ucount.begin(), ucount.end());
  int64_t single = std::count(ucount.begin(), ucount.end(), 1);

  fprintf(stderr, "ids %lld, uniques %lld, singletons %lld, largest count %d\n", static_cast<long long>(N),
          static_cast<long long>(U), static_cast<long long>(single), maxc);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t rowB = kD4 * 16;
  float4 *rows, *out, *grad, *cpa, *cpb, *crow;
  int32_t *d_inv, *d_csr;
  int64_t *d_slot, *d_compact;
  float* sink;
  const int64_t copyN = (int64_t(1) << 30) / 16;  // 1 GiB
  CK(cudaMalloc(&rows, T * slots * rowB));
  CK(cudaMalloc(&out, N * rowB));
  CK(cudaMalloc(&grad, N * rowB));
  CK(cudaMalloc(&crow, U * rowB));
  CK(cudaMalloc(&cpa, copyN * 16));
  CK(cudaMalloc(&cpb, copyN * 16));
  CK(cudaMalloc(&d_inv, N * 4));
  CK(cudaMalloc(&d_csr, N * 4));
  CK(cudaMalloc(&d_slot, U * 8));
  CK(cudaMalloc(&d_compact, U * 8));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(d_inv, inverse.data(), N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_csr, csr.data(), N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_slot, uslot.data(), U * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_compact, compact.data(), U * 8, cudaMemcpyHostToDevice));
  const unsigned grid = prop.multiProcessorCount * 8, block = 256;
  write_k<<<grid, block>>>(rows, T * slots * kD4, 0.5f);
  write_k<<<grid, block>>>(grad, N * kD4, 1.f);
  write_k<<<grid, block>>>(crow, U * kD4, 0.5f);
  write_k<<<grid, block>>>(cpa, copyN, 1.f);
  CK(cudaDeviceSynchronize());

  const int64_t flushN = (int64_t(256) << 20) / 16;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto timed = [&](auto&& launch) {  // median ms of reps (2 warm-up launches)
    std::vector<float> ms;
    for (int r = 0; r < reps + 2; ++r) {
      write_k<<<grid, block>>>(cpb, flushN, 0.f);  // 256 MB through L2 first: no rows left from the last launch
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float m = 0.f;
      CK(cudaEventElapsedTime(&m, e0, e1));
      if (r >= 2) ms.push_back(m);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(ms[ms.size() / 2]);
  };
  const double MB = 1e6, rowMB = rowB / MB;
  printf("### step byte-bound probe on %s (%d SMs): %lld ids, %lld uniques (%lld singletons, largest count %d), "
         "D128 fp32 rows of 512 B, median of %d\n\n",
         prop.name, prop.multiProcessorCount, static_cast<long long>(N), static_cast<long long>(U),
         static_cast<long long>(single), maxc, reps);
  printf("| pattern | MB read (ideal) | MB written | ms | TB/s |\n|---|---:|---:|---:|---:|\n");
  auto row = [&](const char* what, double rd, double wr, double ms) {
    printf("| %s | %.1f | %.1f | %.4f | %.2f |\n", what, rd, wr, ms, (rd + wr) / ms / 1e3);  // MB per ms = GB/s
  };
  const double gib = copyN * 16 / MB;
  row("copy 1 GiB (sequential)", gib, gib, timed([&] { copy_k<<<grid, block>>>(cpa, cpb, copyN); }));
  row("write the output's size (sequential)", 0, N * rowMB, timed([&] { write_k<<<grid, block>>>(out, N * kD4, 2.f); }));
  row("read the gradient (sequential)", N * rowMB, 0,
      timed([&] { read_rows_k<<<grid, block>>>(nullptr, grad, N * kD4, sink); }));
  const double fwd_rd = U * rowMB + N * 4 / MB + U * 8 / MB;
  row("forward: gather rows at random slots, write out in order", fwd_rd, N * rowMB,
      timed([&] { gather_k<<<grid, block>>>(d_inv, d_slot, rows, out, N * kD4); }));
  row("forward floor: the uniques' rows compacted in first-occurrence order", fwd_rd, N * rowMB,
      timed([&] { gather_k<<<grid, block>>>(d_inv, d_compact, crow, out, N * kD4); }));
  const double g_csr = timed([&] { read_rows_k<<<grid, block>>>(d_csr, grad, N * kD4, sink); });
  row("backward: gradient rows in CSR order", N * rowMB + N * 4 / MB, 0, g_csr);
  const double r_upd = timed([&] { row_update_k<kD4><<<grid, block>>>(d_slot, rows, U * kD4, 1e-6f); });
  row("backward: uniques' rows load + store at their slots", U * rowMB + U * 8 / MB, U * rowMB, r_upd);
  const double r_red = timed([&] { row_red_k<<<grid, block>>>(d_slot, rows, U * kD4, 1e-6f); });
  row("backward: uniques' rows by L2 vector reductions at their slots", U * rowMB + U * 8 / MB, U * rowMB, r_red);
  const double r_cmp = timed([&] { row_update_k<kD4><<<grid, block>>>(d_compact, crow, U * kD4, 1e-6f); });
  row("backward floor: rows load + store, compacted (sequential)", U * rowMB, U * rowMB, r_cmp);
  // Adam: [w | m | v] rows (1,536 B) read and written once per unique, at the uniques' random slots (unique
  // order, the segmented update's), the same slots visited in address order, and compacted (sequential)
  {
    constexpr int kA = 3 * kD4;
    const int64_t arowB = kA * 16;
    float4* arows;
    int64_t* d_sorted;
    std::vector<int64_t> sorted(uslot);
    std::sort(sorted.begin(), sorted.end());
    CK(cudaFree(rows));  // room for ten tables of Adam rows
    CK(cudaMalloc(&arows, T * slots * arowB));
    CK(cudaMalloc(&d_sorted, U * 8));
    CK(cudaMemcpy(d_sorted, sorted.data(), U * 8, cudaMemcpyHostToDevice));
    write_k<<<grid, block>>>(arows, T * slots * kA, 0.5f);
    CK(cudaDeviceSynchronize());
    const double arowMB = arowB / MB;
    const double a_rnd = timed([&] { row_update_k<kA><<<grid, block>>>(d_slot, arows, U * kA, 1e-6f); });
    row("Adam: [w | m | v] rows load + store at their slots (unique order)", U * arowMB + U * 8 / MB, U * arowMB,
        a_rnd);
    const double a_srt = timed([&] { row_update_k<kA><<<grid, block>>>(d_sorted, arows, U * kA, 1e-6f); });
    row("Adam: [w | m | v] rows load + store at their slots (address order)", U * arowMB + U * 8 / MB, U * arowMB,
        a_srt);
    const double a_cmp = timed([&] { row_update_k<kA><<<grid, block>>>(d_compact, arows, U * kA, 1e-6f); });
    row("Adam floor: [w | m | v] rows load + store, compacted (sequential)", U * arowMB, U * arowMB, a_cmp);
    // the gradient rows in the order of a CSR whose uniques are sorted by row address (each segment's positions
    // still ascending), and the fused update over the uniques with at most 8 occurrences (no warp sums a hot
    // segment alone) in unique order and in row-address order
    std::vector<int32_t> by_addr(U), few_u, few_a;
    for (int64_t u = 0; u < U; ++u) by_addr[u] = static_cast<int32_t>(u);
    std::sort(by_addr.begin(), by_addr.end(), [&](int32_t a, int32_t b) { return uslot[a] < uslot[b]; });
    std::vector<int32_t> csr_a;
    csr_a.reserve(N);
    for (int32_t u : by_addr) csr_a.insert(csr_a.end(), csr.begin() + start[u], csr.begin() + start[u + 1]);
    for (int64_t u = 0; u < U; ++u)
      if (ucount[u] <= 8) few_u.push_back(static_cast<int32_t>(u));
    for (int32_t u : by_addr)
      if (ucount[u] <= 8) few_a.push_back(u);
    int64_t few_ids = 0;
    for (int32_t u : few_u) few_ids += ucount[u];
    const int64_t L = static_cast<int64_t>(few_u.size());
    int32_t *d_csr_a, *d_few_u, *d_few_a;
    int64_t* d_start;
    CK(cudaMalloc(&d_csr_a, N * 4));
    CK(cudaMalloc(&d_few_u, L * 4));
    CK(cudaMalloc(&d_few_a, L * 4));
    CK(cudaMalloc(&d_start, (U + 1) * 8));
    CK(cudaMemcpy(d_csr_a, csr_a.data(), N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_few_u, few_u.data(), L * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_few_a, few_a.data(), L * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_start, start.data(), (U + 1) * 8, cudaMemcpyHostToDevice));
    const double g_addr = timed([&] { read_rows_k<<<grid, block>>>(d_csr_a, grad, N * kD4, sink); });
    row("Adam: gradient rows in the CSR order of uniques sorted by row address", N * rowMB + N * 4 / MB, 0, g_addr);
    const double fr = few_ids * rowMB + L * arowMB, fw = L * arowMB;
    const double f_u = timed([&] { adam_fused_k<<<grid, block>>>(d_few_u, L, d_start, d_csr, d_slot, grad, arows); });
    row("Adam fused, uniques with <= 8 ids, unique order", fr, fw, f_u);
    const double f_a = timed([&] { adam_fused_k<<<grid, block>>>(d_few_a, L, d_start, d_csr, d_slot, grad, arows); });
    row("Adam fused, uniques with <= 8 ids, row-address order", fr, fw, f_a);
    // the same at the segmented kernel's 32 warps per SM (4 blocks of 256 threads per SM, grid-stride)
    const unsigned grid4 = prop.multiProcessorCount * 4;
    const double f_4 = timed([&] { adam_fused_k<<<grid4, block>>>(d_few_u, L, d_start, d_csr, d_slot, grad, arows); });
    row("Adam fused, uniques with <= 8 ids, unique order, 32 warps per SM", fr, fw, f_4);
    printf("\n(%lld uniques with <= 8 ids, %lld ids)\n", static_cast<long long>(L), static_cast<long long>(few_ids));
    printf("\nAdam's update pattern (gradient in CSR order + [w | m | v] rows at their slots, sum of the two "
           "kernels): %.4f ms for %.1f MB\n", g_csr + a_rnd, N * rowMB + 2 * U * arowMB + N * 4 / MB + U * 8 / MB);
  }
  printf("\nbackward pattern (gradient in CSR order + rows by reductions, sum of the two kernels): %.4f ms for "
         "%.1f MB; floor (sequential gradient + compact rows): see the rows above\n",
         g_csr + r_red, N * rowMB + 2 * U * rowMB + N * 4 / MB + U * 8 / MB);
  return 0;
}
