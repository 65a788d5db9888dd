// HierarchicalKV's own hash-table benchmark with a selectable slice of its pure-HBM grid.
//
// Compiled by tools/peer/build_hkv_benchmark.sh against an HKV checkout (-I HKV/include -I HKV/benchmark): HKV's
// benchmark/merlin_hashtable_benchmark.cc.cu is included unchanged (its main renamed), so the timing, the fill and
// the key streams are HKV's own (test_one_api / test_main). Why a driver: HKV's main always runs all three dims, ten
// ops and then the hybrid tables (minutes on an H200); benchmarks/hash_table.py --peer-hkv needs one dim and the
// five ops it compares inside a device call of ~1 minute.
//
//   merlin_hashtable_benchmark                          HKV's main, unchanged (the whole grid, hybrid included)
//   merlin_hashtable_benchmark --dims 32 [--lambdas 0.5,1.0] [--apis find_or_insert,find]
//                                                       the pure-HBM tables of those dims (HKV's capacity and HBM
//                                                       budget per dim), those load factors and ops in the order
//                                                       given, printed in HKV's format (benchmarks/hkv_peer.py
//                                                       parses both): one table per op (its rows the loads), so
//                                                       that each figure is printed as soon as it is measured
//
// Cost (H200, dim 32, 128M slots): ~2.4 s per op at load 0.5, ~15-20 s at load 1.0 (each of HKV's two runs per
// figure clears and refills the table from the host): a device call of ~1 minute measures a slice, the ops that
// matter first (docs/dynamicemb.md, "HierarchicalKV's own benchmark beside ours").
#include <assert.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "benchmark_util.cuh"
#include "merlin_hashtable.cuh"

#define main hkv_benchmark_main
#include "merlin_hashtable_benchmark.cc.cu"
#undef main

namespace {

struct GridDim {
  size_t dim, capacity, hbm_gb;  // HKV's pure-HBM grid (its main): 8 -> 128M / 4 GB, 32 -> 128M / 16, 64 -> 64M / 16
};
const GridDim kGrid[] = {{8, 128UL << 20, 4}, {32, 128UL << 20, 16}, {64, 64UL << 20, 16}};

struct ApiName {
  const char* name;  // HKV's column heading
  API_Select api;
};
// HKV's column order (print_title_a, then print_title_b).
const ApiName kApis[] = {
    {"insert_or_assign", API_Select::insert_or_assign}, {"find", API_Select::find},
    {"find_or_insert", API_Select::find_or_insert},     {"assign", API_Select::assign},
    {"find*", API_Select::find_ptr},                    {"find_or_insert*", API_Select::find_or_insert_ptr},
    {"insert_and_evict", API_Select::insert_and_evict}, {"export_batch", API_Select::export_batch},
    {"export_batch_if", API_Select::export_batch_if},   {"contains", API_Select::contains},
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int usage(const char* why) {
  std::cerr << "hkv_benchmark_grid: " << why << "\nusage: merlin_hashtable_benchmark [--dims 8,32,64] "
            << "[--lambdas 0.5,0.75,1.0] [--apis insert_or_assign,find,find_or_insert,assign,insert_and_evict]\n"
            << "(no arguments: HierarchicalKV's own main, the whole grid)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) return hkv_benchmark_main();
  std::vector<size_t> dims = {8, 32, 64};
  std::vector<float> lambdas = {0.50f, 0.75f, 1.00f};
  std::vector<std::string> api_names = {"insert_or_assign", "find", "find_or_insert", "assign",
                                        "insert_and_evict"};
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage(("no value after " + a).c_str());
    std::vector<std::string> vals = split(argv[++i]);
    if (vals.empty()) return usage(("empty list after " + a).c_str());
    try {
      if (a == "--dims") {
        dims.clear();
        for (auto& v : vals) dims.push_back(std::stoul(v));
      } else if (a == "--lambdas") {
        lambdas.clear();
        for (auto& v : vals) lambdas.push_back(std::stof(v));
      } else if (a == "--apis") {
        api_names = vals;
      } else {
        return usage(("unknown option " + a).c_str());
      }
    } catch (const std::exception&) {
      return usage(("bad number in " + a + " " + argv[i]).c_str());
    }
  }
  for (float l : lambdas) {
    if (!(l > 0.0f && l <= 1.0f)) return usage("a load factor must be in (0, 1]");
  }
  std::vector<const ApiName*> apis;  // in the order given
  for (auto& n : api_names) {
    const ApiName* found = nullptr;
    for (const ApiName& an : kApis) found = n == an.name ? &an : found;
    if (found == nullptr) return usage(("unknown op " + n).c_str());
    apis.push_back(found);
  }
  std::vector<GridDim> grid;
  for (size_t d : dims) {
    const GridDim* g = nullptr;
    for (const GridDim& c : kGrid) g = c.dim == d ? &c : g;
    if (g == nullptr) return usage("a dim of HKV's grid: 8, 32 or 64");
    grid.push_back(*g);
  }

  cudaDeviceProp props;
  CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  // HKV's heading lines (the parser reads the GPU line), then one table per dim.
  cout << "\n## Benchmark (HierarchicalKV's, a slice of its grid)\n\n* GPU: 1 x " << props.name << ": "
       << props.major << "." << props.minor << "\n* Key Type = uint64_t\n* Value Type = float32 * {dim}\n"
       << "* Key-Values per OP = " << (1UL << 20) << "\n* Evict strategy: LRU\n"
       << "* ***Throughput Unit: Billion-KV/second***\n\n### On pure HBM mode: " << endl;
  test_mode = Test_Mode::pure_hbm;
  try {
    for (const GridDim& g : grid) {
      cout << "\n* dim = " << g.dim << ", capacity = " << (g.capacity >> 20) << " Million-KV, HBM = " << g.hbm_gb
           << " GB, HMEM = 0 GB" << endl;
      for (const ApiName* an : apis) {
        // HKV's test_main for one op: its own table, per load a clear and the best of two test_one_api runs.
        cout << "\n|    \u03BB | " << an->name << " |\n|-----:|-------:|" << endl;
        std::vector<API_Select> one{an->api};
        test_main(one, g.dim, g.capacity, 1UL << 20, g.hbm_gb, 1.0f, false, lambdas);
        cout.flush();
      }
    }
  } catch (const nv::merlin::CudaException& e) {
    cerr << e.what() << endl;
    return 1;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
