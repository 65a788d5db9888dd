// Why hybrid lookups reach ~16 % of the PCIe bound (issue 32): random 256-byte rows read from / written to pinned
// host memory by SM loads through UVA, for host buffers of several sizes, allocated three ways, and with three
// thread shapes per row. If the rate falls with the buffer size and rises with the mapping's page size, the GPU's
// address translation of host pages (TLB reach) is the limit, not the bytes in flight. The "sorted" shapes read
// the same rows in address order (what a sort of the host slots before the copy buys; HierarchicalKV's hybrid
// mode sorts its value addresses): on the H200 host, 16 GB, 30 -> 150-170 M rows/s (RESULTS.md, session 8).
//
//   allocations: "hostalloc" cudaHostAlloc (what torch's pin_memory does); "thp" mmap + madvise(MADV_HUGEPAGE) +
//   cudaHostRegister; "vmm" cuMemCreate on host NUMA node 0 at the driver's recommended (large) granularity,
//   mapped into one reserved range with device access (CUDA >= 12.2 drivers).
//   shapes: "4/row" 4 threads per row (the table kernels' tile, 16-byte accesses, 4 per lane), "16/row" one
//   16-byte access per thread, "1/row" one thread loads a whole row (16 loads in flight per thread).
//
// Build: nvcc -O3 -arch=sm_90 -o uva_probe benchmarks/uva_probe.cu   (driver calls through the runtime's entry
//        points: no libcuda needed at link time)
// Run:   ./uva_probe [GB ...]   (default 2 16); prints a markdown table (M rows/s, GB/s).
//        ./uva_probe sparse       sorted passes of few rows over a large buffer (branch hyb10, issue 32): does a
//        pass cost per row, per host region touched, or a floor per pass? One pass of mixed reads and writes vs a
//        write pass then a read pass (find_or_insert's old shape); the sorted rows dealt to K interleaved chunks
//        (more distant host regions in flight at once); cudaHostAlloc vs cuMemCreate (2 MB) buffers.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e = (x);                                                                        \
    if (e != cudaSuccess) {                                                                     \
      std::printf("cuda error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__);      \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

constexpr int kRow = 256;  // bytes per row (dim 64 fp32)
constexpr int kVec = kRow / 16;

template <int TPR, bool kWrite>
__global__ void gather(uint4* host, uint4* dev, const int64_t* idx, int64_t n) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = t / TPR;
  const int lane = static_cast<int>(t % TPR);
  if (r >= n) return;
  uint4* h = host + idx[r] * kVec;
  uint4* d = dev + r * kVec;
  constexpr int kPer = kVec / TPR;
  uint4 v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) v[j] = kWrite ? d[lane + j * TPR] : h[lane + j * TPR];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (kWrite) h[lane + j * TPR] = v[j];
    else d[lane + j * TPR] = v[j];
  }
}

// Driver API functions, fetched from the runtime (cudaGetDriverEntryPointByVersion, 12.2 signatures).
#define DRV(name) static decltype(&name) p_##name = nullptr;
DRV(cuMemGetAllocationGranularity)
DRV(cuMemCreate)
DRV(cuMemAddressReserve)
DRV(cuMemMap)
DRV(cuMemSetAccess)
DRV(cuMemUnmap)
DRV(cuMemAddressFree)
DRV(cuMemRelease)
#undef DRV
static bool load_driver() {
  cudaDriverEntryPointQueryResult q;
#define GET(name) \
  if (cudaGetDriverEntryPointByVersion(#name, reinterpret_cast<void**>(&p_##name), 12020, cudaEnableDefault, &q) != \
          cudaSuccess || !p_##name)                                                                             \
    return false;
  GET(cuMemGetAllocationGranularity)
  GET(cuMemCreate)
  GET(cuMemAddressReserve)
  GET(cuMemMap)
  GET(cuMemSetAccess)
  GET(cuMemUnmap)
  GET(cuMemAddressFree)
  GET(cuMemRelease)
#undef GET
  return true;
}

struct Buf {
  void* p = nullptr;
  size_t bytes = 0;
  int kind = 0;  // 0 hostalloc, 1 thp, 2 vmm
  CUmemGenericAllocationHandle h = 0;
};

static bool alloc(Buf& b, int kind, size_t bytes) {
  b.kind = kind;
  b.bytes = bytes;
  if (kind == 0) return cudaHostAlloc(&b.p, bytes, cudaHostAllocMapped) == cudaSuccess;
  if (kind == 1) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    madvise(p, bytes, MADV_HUGEPAGE);
    for (size_t o = 0; o < bytes; o += 4096) static_cast<char*>(p)[o] = 1;  // fault in (huge pages if THP allows)
    if (cudaHostRegister(p, bytes, cudaHostRegisterMapped) != cudaSuccess) {
      munmap(p, bytes);
      return false;
    }
    b.p = p;
    return true;
  }
  if (!load_driver()) return false;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  size_t gran = 0;
  if (p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) return false;
  bytes = (bytes + gran - 1) / gran * gran;
  b.bytes = bytes;
  if (p_cuMemCreate(&b.h, bytes, &prop, 0) != CUDA_SUCCESS) return false;
  CUdeviceptr va = 0;
  if (p_cuMemAddressReserve(&va, bytes, gran, 0, 0) != CUDA_SUCCESS) return false;
  if (p_cuMemMap(va, bytes, 0, b.h, 0) != CUDA_SUCCESS) return false;
  CUmemAccessDesc acc[2] = {};
  acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc[0].location.id = 0;
  acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  acc[1].location.id = 0;
  acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (p_cuMemSetAccess(va, bytes, acc, 2) != CUDA_SUCCESS && p_cuMemSetAccess(va, bytes, acc, 1) != CUDA_SUCCESS)
    return false;
  b.p = reinterpret_cast<void*>(va);
  std::printf("vmm granularity: %zu KB\n", gran >> 10);
  return true;
}

static void release(Buf& b) {
  if (!b.p) return;
  if (b.kind == 0) cudaFreeHost(b.p);
  if (b.kind == 1) {
    cudaHostUnregister(b.p);
    munmap(b.p, b.bytes);
  }
  if (b.kind == 2) {
    p_cuMemUnmap(reinterpret_cast<CUdeviceptr>(b.p), b.bytes);
    p_cuMemAddressFree(reinterpret_cast<CUdeviceptr>(b.p), b.bytes);
    p_cuMemRelease(b.h);
  }
  b.p = nullptr;
}

template <int TPR, bool W>
static float run(uint4* host, uint4* dev, const int64_t* idx, int64_t n) {
  const int block = 256;
  const int64_t threads = n * TPR;
  const int grid = static_cast<int>((threads + block - 1) / block);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  gather<TPR, W><<<grid, block>>>(host, dev, idx, n);  // warm (TLB and caches as in steady use)
  cudaEventRecord(a);
  for (int i = 0; i < 3; ++i) gather<TPR, W><<<grid, block>>>(host, dev, idx, n);
  cudaEventRecord(b);
  CK(cudaEventSynchronize(b));
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 3;
}

// One pass over rows in the given order, 16 lanes per 256-byte row: idx >= 0 reads host row idx into dev row r,
// idx < 0 writes dev row r to host row ~idx (the shape of hybrid_rows.cu's copy kernel).
__global__ void sweep(uint4* host, uint4* dev, const int64_t* idx, int64_t n) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = t / kVec;
  const int lane = static_cast<int>(t % kVec);
  if (r >= n) return;
  const int64_t x = idx[r];
  uint4* h = host + (x < 0 ? ~x : x) * kVec;
  uint4* d = dev + r * kVec;
  if (x < 0) h[lane] = d[lane];
  else d[lane] = __ldcg(h + lane);
}

// ms of one pass over idx (host vector, copied to the device), the mean of 3 after a warm one.
static float pass_ms(uint4* host, uint4* dev, int64_t* didx, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  CK(cudaMemcpy(didx, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
  const int grid = static_cast<int>((n * kVec + 255) / 256);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  sweep<<<grid, 256>>>(host, dev, didx, n);
  cudaEventRecord(a);
  for (int i = 0; i < 3; ++i) sweep<<<grid, 256>>>(host, dev, didx, n);
  cudaEventRecord(b);
  CK(cudaEventSynchronize(b));
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 3;
}

static std::vector<int64_t> draw(int64_t n, int64_t rows, uint64_t seed) {
  std::vector<int64_t> v(n);
  for (auto& x : v) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    x = static_cast<int64_t>(seed % rows);
  }
  return v;
}

// The sorted rows dealt to k chunks: launch position j takes chunk j % k's next row.
static std::vector<int64_t> interleave(const std::vector<int64_t>& sorted, int64_t k) {
  const int64_t n = static_cast<int64_t>(sorted.size()), per = (n + k - 1) / k;
  std::vector<int64_t> out;
  out.reserve(n);
  for (int64_t j = 0; j < per; ++j)
    for (int64_t c = 0; c < k; ++c)
      if (c * per + j < n) out.push_back(sorted[c * per + j]);
  return out;
}

static int sparse_main() {
  const int64_t nmax = 1 << 22;
  uint4* dev = nullptr;
  int64_t* didx = nullptr;
  CK(cudaMalloc(&dev, nmax * kRow));
  CK(cudaMalloc(&didx, nmax * sizeof(int64_t)));
  std::printf("| host buffer | GB | case | rows | ms | M rows/s | GB/s |\n|---|---:|---|---:|---:|---:|---:|\n");
  auto row = [](const char* kind, double gb, const char* c, int64_t n, float ms) {
    std::printf("| %s | %.0f | %s | %lld | %.3f | %.1f | %.1f |\n", kind, gb, c, static_cast<long long>(n), ms,
                n / ms / 1e3, n * double(kRow) / ms / 1e6);
    std::fflush(stdout);
  };
  const struct { int kind; double gb; bool full; } runs[] = {{0, 16, true}, {0, 2, false}, {2, 16, false}};
  const char* kinds[] = {"hostalloc", "thp", "vmm"};
  for (const auto& run : runs) {
    Buf b;
    if (!alloc(b, run.kind, static_cast<size_t>(run.gb * (1ull << 30)))) {
      std::printf("| %s | %.0f | unavailable | | | | |\n", kinds[run.kind], run.gb);
      cudaGetLastError();
      release(b);
      continue;
    }
    uint4* hp = static_cast<uint4*>(b.p);
    const int64_t rows = static_cast<int64_t>(run.gb * (1ull << 30)) / kRow;
    for (int64_t n : {int64_t(1) << 16, int64_t(1) << 17, int64_t(1) << 18, int64_t(1) << 19, int64_t(1) << 20,
                      int64_t(1) << 22}) {
      if (!run.full && (n < (1 << 18) || n > (1 << 20))) continue;
      std::vector<int64_t> v = draw(n, rows, 88172645463325252ull + n);
      std::sort(v.begin(), v.end());
      row(kinds[run.kind], run.gb, "sorted reads", n, pass_ms(hp, dev, didx, v));
    }
    if (!run.full) {
      release(b);
      continue;
    }
    // find_or_insert's shape at HKV's hit rate 0.6: 0.3M reads (hits) and 0.2M writes (new rows) over 16 GB.
    std::vector<int64_t> rd = draw(300000, rows, 7), wr = draw(200000, rows, 11);
    std::sort(rd.begin(), rd.end());
    std::sort(wr.begin(), wr.end());
    std::vector<int64_t> wneg(wr.size());
    for (size_t j = 0; j < wr.size(); ++j) wneg[j] = ~wr[j];
    const float t_w = pass_ms(hp, dev, didx, wneg), t_r = pass_ms(hp, dev, didx, rd);
    row(kinds[run.kind], run.gb, "writes pass (0.2M)", 200000, t_w);
    row(kinds[run.kind], run.gb, "reads pass (0.3M)", 300000, t_r);
    row(kinds[run.kind], run.gb, "two passes, sum (find_or_insert before)", 500000, t_w + t_r);
    {
      // one pass in address order, writes marked (the hyb10 kernel's shape)
      std::vector<int64_t> m;
      m.reserve(500000);
      size_t i = 0, j = 0;
      while (i < rd.size() || j < wr.size()) {
        if (j == wr.size() || (i < rd.size() && rd[i] <= wr[j])) m.push_back(rd[i++]);
        else m.push_back(~wr[j++]);
      }
      row(kinds[run.kind], run.gb, "one mixed pass (hyb10)", 500000, pass_ms(hp, dev, didx, m));
    }
    std::vector<int64_t> r5 = draw(1 << 19, rows, 99);
    std::sort(r5.begin(), r5.end());
    for (int64_t k : {4, 32, 256, 2048}) {
      char c[64];
      std::snprintf(c, sizeof c, "sorted reads, %lld chunks interleaved", static_cast<long long>(k));
      row(kinds[run.kind], run.gb, c, r5.size(), pass_ms(hp, dev, didx, interleave(r5, k)));
    }
    std::vector<int64_t> rr = draw(1 << 19, rows, 99);
    row(kinds[run.kind], run.gb, "random-order reads", rr.size(), pass_ms(hp, dev, didx, rr));
    release(b);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "sparse") {
    CK(cudaSetDevice(0));
    return sparse_main();
  }
  std::vector<double> gbs;
  for (int i = 1; i < argc; ++i) gbs.push_back(std::atof(argv[i]));
  if (gbs.empty()) gbs = {2, 16};
  CK(cudaSetDevice(0));
  cudaFree(nullptr);
  const int64_t n = 1 << 22;  // rows per kernel (1 GB)
  uint4* dev = nullptr;
  int64_t* idx = nullptr;
  CK(cudaMalloc(&dev, n * kRow));
  CK(cudaMalloc(&idx, n * sizeof(int64_t)));
  std::vector<int64_t> h(n);
  const char* kinds[] = {"hostalloc", "thp", "vmm"};
  std::printf("| host buffer | GB | shape | op | M rows/s | GB/s |\n|---|---:|---|---|---:|---:|\n");
  for (double gb : gbs) {
    const size_t bytes = static_cast<size_t>(gb * (1ull << 30));
    const int64_t rows = bytes / kRow;
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < n; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      h[i] = static_cast<int64_t>(s % rows);
    }
    std::vector<int64_t> hs(h);
    std::sort(hs.begin(), hs.end());
    int64_t* idx_sorted = nullptr;
    CK(cudaMalloc(&idx_sorted, n * sizeof(int64_t)));
    CK(cudaMemcpy(idx, h.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(idx_sorted, hs.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    for (int k = 0; k < 3; ++k) {
      Buf b;
      if (!alloc(b, k, bytes)) {
        std::printf("| %s | %.0f | - | - | unavailable | |\n", kinds[k], gb);
        cudaGetLastError();
        release(b);
        continue;
      }
      uint4* hp = static_cast<uint4*>(b.p);
      struct R { const char* shape; const char* op; float ms; } res[] = {
          {"4/row", "read", run<4, false>(hp, dev, idx, n)},
          {"16/row", "read", run<16, false>(hp, dev, idx, n)},
          {"1/row", "read", run<1, false>(hp, dev, idx, n)},
          {"4/row", "write", run<4, true>(hp, dev, idx, n)},
          // the same rows in address order: consecutive threads on neighbouring host pages
          {"4/row, sorted", "read", run<4, false>(hp, dev, idx_sorted, n)},
          {"16/row, sorted", "read", run<16, false>(hp, dev, idx_sorted, n)},
          {"4/row, sorted", "write", run<4, true>(hp, dev, idx_sorted, n)},
      };
      CK(cudaGetLastError());
      for (auto& r : res)
        std::printf("| %s | %.0f | %s | %s | %.1f | %.1f |\n", kinds[k], gb, r.shape, r.op, n / r.ms / 1e3,
                    n * double(kRow) / r.ms / 1e6);
      std::fflush(stdout);
      release(b);
    }
    CK(cudaFree(idx_sorted));
  }
  return 0;
}
