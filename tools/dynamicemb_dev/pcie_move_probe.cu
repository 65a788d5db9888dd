// The cold caching step's row moves (issue 32: ~110K rows of 512 bytes each way per step) by every mover the
// device offers, alone and beside an HBM-bound kernel (docs/dynamicemb_storage_notes.md, "Every byte by the copy
// engines"): SM loads / stores through UVA (the move pass's way, rows in store-address order, 8 lanes a row, at
// 2 blocks per SM and at fewer blocks), the copy engines on one contiguous range (one cudaMemcpyAsync; a log store's
// write-back, or a read-in gathered on the host first), cudaMemcpyBatchAsync of one 512-byte copy per row (the copy
// engines on scattered rows), and the host's own gather / scatter of the rows by T threads (what a copy-engine read-in
// or a write-back into fixed store slots needs beside the contiguous copy).
// The store: 4 GB of pinned host rows (cudaHostAlloc); the victim: a 1.05M-row gather of D128 fp32 rows from a
// 1.3 GB HBM table (the forward's shape) on a high-priority stream, launched right after the mover.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o pcie_move_probe tools/dynamicemb_dev/pcie_move_probe.cu -lpthread
// Run:   ./pcie_move_probe [reps] [rows] [batch]   (markdown tables: ms, GB/s; the victim's ms beside each mover;
//        "batch": also cudaMemcpyBatchAsync, ~126 ms a call at 110K rows)
//        ./pcie_move_probe load T [rows]   (the host's gather + scatter as a background load until SIGTERM)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

static void ck(cudaError_t e, int line) {
  if (e == cudaSuccess) return;
  std::printf("cuda error %s at line %d\n", cudaGetErrorString(e), line);
  std::exit(1);
}
#define CK(x) ck((x), __LINE__)

constexpr int64_t kRow = 512, kVec = kRow / 16, kLanes = 8;
constexpr int64_t kStoreRows = int64_t(8) << 20;  // 4 GB of host rows
constexpr int64_t kGatherRows = 1050000, kTableRows = 2600000;

// rows[r]'s host row <-> HBM row r; kLanes lanes a row, kVec / kLanes 16-byte words each, all loads first.
template <bool kIn>
__global__ void move_rows(uint4* host, uint4* dev, const int64_t* rows, int64_t n) {
  const int lane = threadIdx.x % kLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x / kLanes;
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes; r < n; r += stride) {
    uint4* src = kIn ? host + rows[r] * kVec : dev + r * kVec;
    uint4* dst = kIn ? dev + r * kVec : host + rows[r] * kVec;
    uint4 v[kVec / kLanes];
#pragma unroll
    for (int j = 0; j < kVec / kLanes; ++j) v[j] = src[lane + j * kLanes];
#pragma unroll
    for (int j = 0; j < kVec / kLanes; ++j) dst[lane + j * kLanes] = v[j];
  }
}

// The victim: out[i] = table[idx[i]] (512-byte rows, HBM only).
__global__ void hbm_gather(const uint4* table, uint4* out, const int32_t* idx, int64_t n) {
  const int lane = threadIdx.x % kLanes;
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
  if (r >= n) return;
  const uint4* src = table + static_cast<int64_t>(idx[r]) * kVec;
  uint4 v[kVec / kLanes];
#pragma unroll
  for (int j = 0; j < kVec / kLanes; ++j) v[j] = src[lane + j * kLanes];
#pragma unroll
  for (int j = 0; j < kVec / kLanes; ++j) out[r * kVec + lane + j * kLanes] = v[j];
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Env {
  int64_t n = 110000;
  uint8_t* store = nullptr;    // pinned host rows
  uint8_t* landing = nullptr;  // pinned contiguous n rows (a log segment / the host's gather target)
  uint8_t* landing2 = nullptr;  // pinned contiguous n rows (the victims' landing buffer of the host's scatter)
  uint8_t* dev = nullptr;      // HBM n rows
  uint8_t* dev2 = nullptr;     // HBM n rows (the other direction)
  int64_t* rows = nullptr;     // device: the rows' store indices, ascending
  std::vector<int64_t> hrows;
  std::vector<void*> bsrc, bdst;
  std::vector<size_t> bsize;
  uint4* table = nullptr;
  uint4* out = nullptr;
  int32_t* idx = nullptr;
  cudaStream_t lo = nullptr, lo2 = nullptr, hi = nullptr;
  int sms = 0;
};

static void sm_move(Env& e, bool in, int blocks, cudaStream_t s) {
  if (in)
    move_rows<true><<<blocks, 256, 0, s>>>(reinterpret_cast<uint4*>(e.store), reinterpret_cast<uint4*>(e.dev), e.rows,
                                           e.n);
  else
    move_rows<false><<<blocks, 256, 0, s>>>(reinterpret_cast<uint4*>(e.store), reinterpret_cast<uint4*>(e.dev2),
                                            e.rows, e.n);
}

static double g_batch_host_ms = 0;
static bool g_batch_ok = true;
static void batch_h2d(Env& e, cudaStream_t s) {
  cudaMemcpyAttributes a{};
  a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  a.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t ai = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const cudaError_t err =
      cudaMemcpyBatchAsync(e.bdst.data(), e.bsrc.data(), e.bsize.data(), e.bsrc.size(), &a, &ai, 1, s);
  g_batch_host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (err != cudaSuccess) {
    if (g_batch_ok) std::printf("cudaMemcpyBatchAsync: %s\n", cudaGetErrorString(err));
    g_batch_ok = false;
    cudaGetLastError();
  }
}

// One mover by name on the low-priority stream(s).
static void mover(Env& e, const std::string& m) {
  const size_t bytes = static_cast<size_t>(e.n * kRow);
  if (m == "sm_in") sm_move(e, true, 2 * e.sms, e.lo);
  else if (m == "sm_in_1") sm_move(e, true, e.sms, e.lo);
  else if (m == "sm_in_32") sm_move(e, true, 32, e.lo);
  else if (m == "sm_in_16") sm_move(e, true, 16, e.lo);
  else if (m == "sm_out") sm_move(e, false, 2 * e.sms, e.lo);
  else if (m == "sm_both") { sm_move(e, true, e.sms, e.lo); sm_move(e, false, e.sms, e.lo2); }
  else if (m == "ce_h2d") CK(cudaMemcpyAsync(e.dev, e.landing, bytes, cudaMemcpyHostToDevice, e.lo));
  else if (m == "ce_d2h") CK(cudaMemcpyAsync(e.landing, e.dev2, bytes, cudaMemcpyDeviceToHost, e.lo));
  else if (m == "ce_both") {
    CK(cudaMemcpyAsync(e.dev, e.landing, bytes / 2 * 2, cudaMemcpyHostToDevice, e.lo));
    CK(cudaMemcpyAsync(e.store, e.dev2, bytes, cudaMemcpyDeviceToHost, e.lo2));
  }
  else if (m == "sm_both_32") { sm_move(e, true, 32, e.lo); sm_move(e, false, 32, e.lo2); }
  else if (m == "sm_in_32+ce_d2h") { sm_move(e, true, 32, e.lo); CK(cudaMemcpyAsync(e.landing, e.dev2, bytes, cudaMemcpyDeviceToHost, e.lo2)); }
  else if (m == "sm_in+ce_d2h") { sm_move(e, true, 2 * e.sms, e.lo); CK(cudaMemcpyAsync(e.landing, e.dev2, bytes, cudaMemcpyDeviceToHost, e.lo2)); }
  else if (m == "batch_h2d") batch_h2d(e, e.lo);
}

static void victim(Env& e, cudaStream_t s) {
  const int64_t threads = kGatherRows * kLanes;
  hbm_gather<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, s>>>(e.table, e.out, e.idx, kGatherRows);
}

// The host's gather (landing[r] = store[rows[r]]) or scatter (store[rows[r]] = landing[r]) by T threads.
static double host_move(Env& e, bool gather, int threads, uint8_t* landing = nullptr, int64_t shift = 0) {
  if (landing == nullptr) landing = e.landing;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  const int64_t per = (e.n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      const int64_t lo = t * per, hi = std::min(e.n, lo + per);
      for (int64_t r = lo; r < hi; ++r) {
        uint8_t* h = e.store + (e.hrows[r] + shift) % kStoreRows * kRow;
        uint8_t* l = landing + r * kRow;
        if (gather) std::memcpy(l, h, kRow);
        else std::memcpy(h, l, kRow);
      }
    });
  for (auto& t : ts) t.join();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// `load T`: the host's side of a copy-engine step as a background load (no GPU): T/2 threads gather n random rows
// of a 2 GB buffer into a landing buffer while T/2 scatter n rows of another into other random rows, over and over,
// until SIGTERM / SIGINT; then one line: iterations, ms per iteration (both directions of one step's rows).
static volatile std::sig_atomic_t g_stop = 0;
static void on_stop(int) { g_stop = 1; }

static int host_load(int threads, int64_t n) {
  std::signal(SIGTERM, on_stop);
  std::signal(SIGINT, on_stop);
  constexpr int64_t kLoadRows = int64_t(4) << 20;  // 2 GB
  std::vector<uint8_t> store(static_cast<size_t>(kLoadRows * kRow), 1), in(n * kRow), out(n * kRow, 2);
  std::mt19937_64 rng(11);
  std::vector<int64_t> ri(n), ro(n);
  for (auto& v : ri) v = static_cast<int64_t>(rng() % kLoadRows);
  for (auto& v : ro) v = static_cast<int64_t>(rng() % kLoadRows);
  std::sort(ri.begin(), ri.end());
  std::sort(ro.begin(), ro.end());
  const int half = threads / 2 > 0 ? threads / 2 : 1;
  int64_t iters = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (!g_stop) {
    std::vector<std::thread> ts;
    const int64_t per = (n + half - 1) / half;
    for (int t = 0; t < half; ++t) {
      ts.emplace_back([&, t] {
        for (int64_t r = t * per; r < std::min(n, (t + 1) * per); ++r)
          std::memcpy(in.data() + r * kRow, store.data() + ri[r] * kRow, kRow);
      });
      ts.emplace_back([&, t] {
        for (int64_t r = t * per; r < std::min(n, (t + 1) * per); ++r)
          std::memcpy(store.data() + ro[r] * kRow, out.data() + r * kRow, kRow);
      });
    }
    for (auto& t : ts) t.join();
    ++iters;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("host load: %d threads, %lld iterations in %.0f ms = %.3f ms per %lld rows gathered + as many "
              "scattered\n", threads, static_cast<long long>(iters), ms, ms / (iters > 0 ? iters : 1),
              static_cast<long long>(n));
  std::fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "load") return host_load(std::atoi(argv[2]), argc > 3 ? std::atoll(argv[3]) : 110000);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  if (reps <= 0) return std::puts("ok") < 0;  // (the binary starts: nothing measured)
  Env e;
  if (argc > 2) e.n = std::atoll(argv[2]);
  CK(cudaDeviceGetAttribute(&e.sms, cudaDevAttrMultiProcessorCount, 0));
  int plo = 0, phi = 0;
  CK(cudaDeviceGetStreamPriorityRange(&plo, &phi));
  CK(cudaStreamCreateWithPriority(&e.lo, cudaStreamNonBlocking, plo));
  CK(cudaStreamCreateWithPriority(&e.lo2, cudaStreamNonBlocking, plo));
  CK(cudaStreamCreateWithPriority(&e.hi, cudaStreamNonBlocking, phi));
  const size_t bytes = static_cast<size_t>(e.n * kRow);
  CK(cudaHostAlloc(&e.store, static_cast<size_t>(kStoreRows * kRow), cudaHostAllocDefault));
  CK(cudaHostAlloc(&e.landing, bytes, cudaHostAllocDefault));
  CK(cudaHostAlloc(&e.landing2, bytes, cudaHostAllocDefault));
  std::memset(e.landing2, 4, bytes);
  std::memset(e.store, 1, static_cast<size_t>(kStoreRows * kRow));
  std::memset(e.landing, 2, bytes);
  CK(cudaMalloc(&e.dev, bytes));
  CK(cudaMalloc(&e.dev2, bytes));
  CK(cudaMemset(e.dev2, 3, bytes));
  std::mt19937_64 rng(7);
  {
    std::vector<int64_t> all(kStoreRows);
    for (int64_t i = 0; i < kStoreRows; ++i) all[i] = i;
    for (int64_t i = 0; i < e.n; ++i) std::swap(all[i], all[i + rng() % (kStoreRows - i)]);
    e.hrows.assign(all.begin(), all.begin() + e.n);
    std::sort(e.hrows.begin(), e.hrows.end());  // the move pass's store-address order
  }
  CK(cudaMalloc(&e.rows, e.n * sizeof(int64_t)));
  CK(cudaMemcpy(e.rows, e.hrows.data(), e.n * sizeof(int64_t), cudaMemcpyHostToDevice));
  for (int64_t r = 0; r < e.n; ++r) {
    e.bsrc.push_back(e.store + e.hrows[r] * kRow);
    e.bdst.push_back(e.dev + r * kRow);
    e.bsize.push_back(kRow);
  }
  CK(cudaMalloc(&e.table, kTableRows * kRow));
  CK(cudaMemset(e.table, 0, kTableRows * kRow));
  CK(cudaMalloc(&e.out, kGatherRows * kRow));
  {
    std::vector<int32_t> idx(kGatherRows);
    for (auto& v : idx) v = static_cast<int32_t>(rng() % kTableRows);
    CK(cudaMalloc(&e.idx, kGatherRows * sizeof(int32_t)));
    CK(cudaMemcpy(e.idx, idx.data(), kGatherRows * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  cudaEvent_t a0, a1, b0, b1;
  CK(cudaEventCreate(&a0));
  CK(cudaEventCreate(&a1));
  CK(cudaEventCreate(&b0));
  CK(cudaEventCreate(&b1));

  // A mover alone: from an event before it on lo to after it on lo and lo2.
  auto alone = [&](const std::string& m) {
    std::vector<double> t, h;
    for (int i = 0; i < reps + 1; ++i) {
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(a0, e.lo));
      CK(cudaStreamWaitEvent(e.lo2, a0, 0));
      mover(e, m);
      CK(cudaEventRecord(b1, e.lo2));
      CK(cudaStreamWaitEvent(e.lo, b1, 0));
      CK(cudaEventRecord(a1, e.lo));
      CK(cudaDeviceSynchronize());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a0, a1));
      if (i > 0) {
        t.push_back(ms);
        h.push_back(g_batch_host_ms);
      }
    }
    return std::make_pair(median(t), median(h));
  };
  auto victim_beside = [&](const std::string& m) {
    std::vector<double> t;
    for (int i = 0; i < reps + 1; ++i) {
      CK(cudaDeviceSynchronize());
      if (!m.empty()) mover(e, m);
      CK(cudaEventRecord(b0, e.hi));
      victim(e, e.hi);
      CK(cudaEventRecord(b1, e.hi));
      CK(cudaDeviceSynchronize());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, b0, b1));
      if (i > 0) t.push_back(ms);
    }
    return median(t);
  };

  const double mb = bytes / 1e6;
  std::printf("\n### pcie_move_probe: %lld rows of %lld B (%.1f MB) a direction, %d SMs, median of %d\n\n",
              static_cast<long long>(e.n), static_cast<long long>(kRow), mb, e.sms, reps);
  std::printf("| mover (alone) | ms | GB/s (bytes moved) | host ms of the call |\n|---|---:|---:|---:|\n");
  const char* movers[] = {"sm_in", "sm_in_1", "sm_in_32", "sm_in_16", "sm_out", "sm_both", "sm_both_32", "ce_h2d",
                          "ce_d2h", "ce_both", "sm_in+ce_d2h", "sm_in_32+ce_d2h", "batch_h2d"};
  // (cudaMemcpyBatchAsync of 110K rows takes ~126 ms: only with a third argument "batch")
  const bool with_batch = argc > 3 && std::string(argv[3]) == "batch";
  for (const char* m : movers) {
    if (std::string(m) == "batch_h2d" && !with_batch) continue;
    const auto r = alone(m);
    const std::string s = m;
    const double moved = (s.find("both") != std::string::npos || s.find('+') != std::string::npos) ? 2 * mb : mb;
    if (s == "batch_h2d" && !g_batch_ok) {
      std::printf("| %s | failed | | |\n", m);
      continue;
    }
    std::printf("| %s | %.3f | %.1f | %s |\n", m, r.first, moved / r.first, s == "batch_h2d" ?
                std::to_string(r.second).c_str() : "");
  }
  std::printf("\n| host threads | gather ms (store rows -> pinned landing) | GB/s | scatter ms (landing -> store rows) | GB/s |\n|---:|---:|---:|---:|---:|\n");
  for (int T : {1, 4, 8, 16}) {
    std::vector<double> g, s;
    for (int i = 0; i < reps; ++i) {
      g.push_back(host_move(e, true, T));
      s.push_back(host_move(e, false, T));
    }
    std::printf("| %d | %.3f | %.1f | %.3f | %.1f |\n", T, median(g), mb / median(g), median(s), mb / median(s));
  }
  // The host-side pipeline of a copy-engine step (R3 + W3): T/2 threads gather the next batch's rows while T/2
  // scatter the last batch's victims, beside both CE copies (the DMA's host-memory traffic included).
  std::printf("\n| host threads (half gather, half scatter) | host ms | beside CE both ways: host ms | CE ms |\n"
              "|---:|---:|---:|---:|\n");
  for (int T : {2, 8, 16}) {
    std::vector<double> h1, h2, c2;
    for (int i = 0; i < reps; ++i) {
      for (int with_ce = 0; with_ce < 2; ++with_ce) {
        CK(cudaDeviceSynchronize());
        if (with_ce) {
          CK(cudaEventRecord(a0, e.lo));
          CK(cudaStreamWaitEvent(e.lo2, a0, 0));
          mover(e, "ce_both");
          CK(cudaEventRecord(b1, e.lo2));
          CK(cudaStreamWaitEvent(e.lo, b1, 0));
          CK(cudaEventRecord(a1, e.lo));
        }
        const auto t0 = std::chrono::steady_clock::now();
        std::thread g([&] { host_move(e, true, T / 2); });
        std::thread sc([&] { host_move(e, false, T / 2, e.landing2, kStoreRows / 2); });
        g.join();
        sc.join();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CK(cudaDeviceSynchronize());
        if (with_ce) {
          float ce = 0;
          CK(cudaEventElapsedTime(&ce, a0, a1));
          h2.push_back(ms);
          c2.push_back(ce);
        } else {
          h1.push_back(ms);
        }
      }
    }
    std::printf("| %d | %.3f | %.3f | %.3f |\n", T, median(h1), median(h2), median(c2));
  }
  const double base = victim_beside("");
  std::printf("\n| victim: HBM gather (%lld rows of 512 B), high priority, beside | ms | x alone |\n|---|---:|---:|\n",
              static_cast<long long>(kGatherRows));
  std::printf("| (alone) | %.3f | 1.00 |\n", base);
  for (const char* m : movers) {
    if (std::string(m) == "batch_h2d" && (!g_batch_ok || !with_batch)) continue;
    const double v = victim_beside(m);
    std::printf("| %s | %.3f | %.2f |\n", m, v, v / base);
  }
  return 0;
}
