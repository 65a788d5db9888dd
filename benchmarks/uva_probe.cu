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
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
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

int main(int argc, char** argv) {
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
