// The host-row traffic of one hybrid-table op at HierarchicalKV's hybrid config (issue 32;
// docs/dynamicemb_storage_notes.md "The hybrid table's inserting ops"), replayed without the table, for three
// placements of the host rows: bucket-major (the default), slot-major with host slots claimed lowest first
// (HybridTable(_slot_major=True)), and a row pool (not built: new rows bump-allocated, one contiguous range).
// 2^20 buckets of 128 slots, the first 64 in HBM, 256-byte rows, 16 GB of pinned host rows (cudaHostAlloc, as
// torch's pin_memory); the fill: Poisson(64) keys per bucket (load 0.5), HBM slots first; one op of 2^20 keys at
// hit rate 0.6: the hits' host rows (read: find / find_or_insert), the new keys' host rows (written: inserts).
// Each pass copies the rows between host and HBM by 4 lanes per row (the table kernels' tile), in address order
// ("sorted": launch_host_rows' order) or in the keys' order ("claim": the insert pass writes in place).
// Build: nvcc -O3 -arch=sm_90 -o host_pool_probe tools/dynamicemb_dev/host_pool_probe.cu
// Run:   ./host_pool_probe [reps]   (markdown table: ms per pass, distinct 64 KB regions, GB/s)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

static void ck(cudaError_t e, int line) {
  if (e == cudaSuccess) return;
  std::printf("cuda error %s at line %d\n", cudaGetErrorString(e), line);
  std::exit(1);
}
#define CK(x) ck((x), __LINE__)

constexpr int64_t kB = 128, kH = 64, kRowBytes = 256, kVec = kRowBytes / 16, kTpr = 4;
constexpr int64_t kNb = 1 << 20, kKeys = 1 << 20;

// Row r of the op: host row rows[r] <-> HBM scratch row r (write[r]: HBM -> host, else host -> HBM); kTpr lanes
// per row, 16 bytes per access.
__global__ void copy_rows(uint4* host, uint4* dev, const int64_t* rows, const uint8_t* write, int64_t n) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n * kTpr) return;
  const int64_t r = t / kTpr;
  uint4* src = write[r] ? dev + r * kVec : host + rows[r] * kVec;
  uint4* dst = write[r] ? host + rows[r] * kVec : dev + r * kVec;
  uint4 v[kVec / kTpr];
  for (int j = 0; j < kVec / kTpr; ++j) v[j] = src[t % kTpr + j * kTpr];
  for (int j = 0; j < kVec / kTpr; ++j) dst[t % kTpr + j * kTpr] = v[j];
}

struct Pass {
  std::vector<int64_t> rows;
  std::vector<uint8_t> write;
};

static int64_t regions(const std::vector<int64_t>& rows) {
  std::vector<int64_t> g(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) g[i] = rows[i] * kRowBytes >> 16;
  std::sort(g.begin(), g.end());
  return std::unique(g.begin(), g.end()) - g.begin();
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::mt19937_64 rng(1);
  std::poisson_distribution<int> pois(64.0);
  std::vector<int64_t> count(kNb), prefix(kNb + 1, 0), host_start(kNb + 1, 0);
  for (int64_t b = 0; b < kNb; ++b) {
    count[b] = std::min<int64_t>(pois(rng), kB);
    prefix[b + 1] = prefix[b] + count[b];
    host_start[b + 1] = host_start[b] + std::max<int64_t>(count[b] - kH, 0);
  }
  const int64_t stored = prefix[kNb], total_host = host_start[kNb];
  // hits: stored keys drawn uniformly; a host hit when its fill rank is >= 64
  std::vector<int64_t> hb, hr, nb_, nr;
  const int64_t nh = kKeys * 6 / 10;
  std::uniform_int_distribution<int64_t> pick(0, stored - 1), bucket(0, kNb - 1);
  for (int64_t i = 0; i < nh; ++i) {
    const int64_t k = pick(rng);
    const int64_t b = std::upper_bound(prefix.begin(), prefix.end(), k) - prefix.begin() - 1;
    const int64_t r = k - prefix[b];
    if (r >= kH) hb.push_back(b), hr.push_back(r);
  }
  std::vector<int64_t> c = count;
  for (int64_t i = nh; i < kKeys; ++i) {
    const int64_t b = bucket(rng);
    if (c[b] >= kH && c[b] < kB) nb_.push_back(b), nr.push_back(c[b]);
    if (c[b] < kB) ++c[b];
  }
  std::printf("load 0.5: %lld stored keys, %.1f %% in host slots; per op: %zu host hits, %zu new host rows\n\n",
              (long long)stored, 100.0 * total_host / stored, hb.size(), nb_.size());
  auto row_of = [&](int layout, int64_t b, int64_t r, bool is_new, int64_t k) -> int64_t {
    if (layout == 0) return b * (kB - kH) + r - kH;
    if (layout == 1) return (r - kH) * kNb + b;
    return is_new ? total_host + k : host_start[b] + r - kH;
  };
  const char* names[3] = {"bucket-major", "slot-major, first fit", "pool (bump)"};
  const int64_t host_rows = kNb * (kB - kH);
  uint4* host = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&host), host_rows * kRowBytes, cudaHostAllocMapped));
  const int64_t max_rows = hb.size() + nb_.size();
  uint4* dev = nullptr;
  int64_t* drows = nullptr;
  uint8_t* dwrite = nullptr;
  CK(cudaMalloc(&dev, max_rows * kRowBytes));
  CK(cudaMalloc(&drows, max_rows * 8));
  CK(cudaMalloc(&dwrite, max_rows));
  CK(cudaMemset(dev, 1, max_rows * kRowBytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::printf("| placement | pass | order | rows | 64 KB regions | ms | GB/s |\n|---|---|---|---:|---:|---:|---:|\n");
  for (int layout = 0; layout < 3; ++layout) {
    for (int kind = 0; kind < 3; ++kind) {  // 0 hits read (find), 1 new rows written, 2 both (find_or_insert)
      Pass p;
      if (kind != 1)
        for (size_t i = 0; i < hb.size(); ++i) p.rows.push_back(row_of(layout, hb[i], hr[i], false, 0)), p.write.push_back(0);
      if (kind != 0)
        for (size_t i = 0; i < nb_.size(); ++i) p.rows.push_back(row_of(layout, nb_[i], nr[i], true, i)), p.write.push_back(1);
      const char* kname = kind == 0 ? "hits read" : kind == 1 ? "new rows written" : "both (find_or_insert)";
      for (int order = 0; order < 2; ++order) {  // 0 claim order (as generated), 1 sorted by host row
        std::vector<int64_t> idx(p.rows.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        if (order == 0) std::shuffle(idx.begin(), idx.end(), rng);
        else std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return p.rows[a] < p.rows[b]; });
        std::vector<int64_t> rows(idx.size());
        std::vector<uint8_t> wr(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) rows[i] = p.rows[idx[i]], wr[i] = p.write[idx[i]];
        const int64_t n = rows.size();
        CK(cudaMemcpy(drows, rows.data(), n * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dwrite, wr.data(), n, cudaMemcpyHostToDevice));
        const int64_t threads = n * kTpr;
        const int grid = static_cast<int>((threads + 255) / 256);
        copy_rows<<<grid, 256>>>(host, dev, drows, dwrite, n);
        CK(cudaDeviceSynchronize());
        std::vector<float> ms(reps);
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0));
          copy_rows<<<grid, 256>>>(host, dev, drows, dwrite, n);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          CK(cudaEventElapsedTime(&ms[r], e0, e1));
        }
        std::sort(ms.begin(), ms.end());
        const float m = ms[reps / 2];
        std::printf("| %s | %s | %s | %lld | %lld | %.3f | %.1f |\n", names[layout], kname,
                    order ? "sorted" : "claim", (long long)n, (long long)regions(rows), m, n * kRowBytes / m / 1e6);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
