// Device staging of caching tables over the uva store (stage_common.h has the algorithm, shared with the CPU
// twin): the probe (stamping hits), a group of kStageLanes lanes per missing id for stage_one, the order of the row copies by store
// address (a one-block scan of the bins' counts, a scatter of the records), the victims' rows of the first records
// into the HBM stash, one pass of kMoveLanes threads per copy over both directions in store-address order, then the
// stored rows of the records without a stash row (in one launch with unplace_one, one thread per id), and the report
// of the first failure. Eight launches per step whatever the number of tables; a step without misses returns from
// the last seven at once (every thread reads its found flag, or the record count, and exits).
#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/stage_common.h"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kStageBlock = 256;

// Device policy: bucket spin locks (the tables' eviction locks: no other kernel runs on these tables meanwhile),
// key, score and stamp reads from L2 (another SM may have written them under the same lock), keys published after
// a fence. Host branches are never called (the host twin uses HostStageAtomics).
struct DeviceStageAtomics {
  __host__ __device__ static uint64_t ld(const uint64_t* a) {
#if defined(__CUDA_ARCH__)
    return __ldcg(reinterpret_cast<const unsigned long long*>(a));
#else
    return *a;
#endif
  }
  __host__ __device__ static void add(int64_t* a, int64_t v) {
#if defined(__CUDA_ARCH__)
    atomicAdd(reinterpret_cast<unsigned long long*>(a), static_cast<unsigned long long>(v));
#endif
  }
  __host__ __device__ static bool claim(int32_t* f) {
#if defined(__CUDA_ARCH__)
    return atomicCAS(f, 0, 1) == 0;
#else
    return false;
#endif
  }
  __host__ __device__ static void publish(int64_t* rec, int32_t rule) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    *reinterpret_cast<volatile int64_t*>(rec) = rule;
#endif
  }
  __host__ __device__ static void publish_key(uint64_t* a, uint64_t k) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    *reinterpret_cast<volatile unsigned long long*>(a) = k;
#endif
  }
  __host__ __device__ static void lock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    while (atomicCAS(l, 0, 1) != 0) __nanosleep(64);
    __threadfence();
#endif
  }
  __host__ __device__ static void unlock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    __threadfence();
    atomicExch(l, 0);
#endif
  }
  __host__ __device__ static int64_t claim_index(int64_t* count) {
#if defined(__CUDA_ARCH__)
    return static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(count), 1ull));
#else
    return 0;
#endif
  }
  // A record's copies counted into their bins (stage_one; the scan and the scatter order them).
  __host__ __device__ static void count_move(const StageParams& p, int t, int64_t out, int64_t in) {
#if defined(__CUDA_ARCH__)
    if (out >= 0) atomicAdd(p.move_bins + 2 * move_bin(p, t, out), 1);
    if (in >= 0) atomicAdd(p.move_bins + 2 * move_bin(p, t, in) + 1, 1);
#endif
  }
  // Lane `lane` of `lanes` copies its part of a row: 16-byte words lane, lane + lanes, ..., 4 loads in flight
  // before their stores (a host row is ~1 us away); 2-byte words when the row is not 16-byte aligned.
  __host__ __device__ static void copy_row(void* dst, const void* src, int64_t bytes, int lane, int lanes) {
#if defined(__CUDA_ARCH__)
    const uintptr_t al = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
    if ((al & 15) == 0 && (bytes & 15) == 0) {
      const uint4* s4 = static_cast<const uint4*>(src);
      uint4* d4 = static_cast<uint4*>(dst);
      const int64_t n4 = bytes >> 4;
      for (int64_t b = lane; b < n4; b += 4 * lanes) {
        uint4 r[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (b + k * lanes < n4) r[k] = __ldcg(s4 + b + k * lanes);
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (b + k * lanes < n4) d4[b + k * lanes] = r[k];
      }
    } else {
      for (int64_t b = 2 * lane; b < bytes; b += 2 * lanes)
        *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(dst) + b) =
            *reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(src) + b);
    }
#endif
  }
};

// The staging pass's policy: a group of G lanes of a warp (G = 8, 16 or 32; 32 / G groups per warp, each on its own
// id) stages one id together (stage_one runs on every lane of the group, with the same control flow). The bucket
// scans are split over the group's lanes (slot j on lane j % G: 4 loads per lane and array in flight per 4 G
// slots) and reduced with shuffles to what the host's slot-by-slot scan gives (the lowest slot of a match; the
// victim of lowest score, ties lowest slot). The group's lane 0 alone takes the locks, runs the atomics and writes
// (the other lanes wait at __syncwarp of the group's mask); reads that steer the control flow are lane 0's value,
// broadcast. settle_pending's row copies use every lane, fenced by every lane before a lock is released. Groups of
// one warp on ids of one cache bucket wait for each other's lock as warps do (independent thread scheduling).
// kLight: the locks' fences acquire / release (fence.acq_rel) instead of sequentially consistent, and no fence
// before a key published under a lock (the lock's release orders it: every reader of a key of this launch either
// holds that lock or only tests the key's presence). kPos: the record of id i is record i (claim_index: no shared
// counter; the kernel marks every miss kNoRecord first).
template <int G, bool kLight = false, bool kPos = false>
struct DeviceGroupStage : DeviceStageAtomics {
  static_assert(G == 8 || G == 16 || G == 32, "DeviceGroupStage: 8, 16 or 32 lanes per id");
  static constexpr unsigned kFull = 0xffffffffu;
  static constexpr int kNone = 0x7fffffff;  // (no slot: above every slot of a bucket)
  // (host branches: never called; the host twin uses HostStageAtomics)
  __host__ __device__ static int lane() {
#if defined(__CUDA_ARCH__)
    return static_cast<int>(threadIdx.x & static_cast<unsigned>(G - 1));
#else
    return 0;
#endif
  }
  // The group's lanes in its warp.
  __host__ __device__ static unsigned mask() {
#if defined(__CUDA_ARCH__)
    return G == 32 ? kFull : ((1u << (G & 31)) - 1u) << (threadIdx.x & 31u & ~static_cast<unsigned>(G - 1));
#else
    return kFull;
#endif
  }
  __host__ __device__ static void sync() {
#if defined(__CUDA_ARCH__)
    __syncwarp(mask());
#endif
  }
  template <class T>
  __host__ __device__ static T from_lane0(T v) {
#if defined(__CUDA_ARCH__)
    return __shfl_sync(mask(), v, 0, G);
#else
    return v;
#endif
  }
  __host__ __device__ static int warp_min(int v) {
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1) v = min(v, __shfl_xor_sync(mask(), v, d, G));
#endif
    return v;
  }
  __host__ __device__ static uint64_t ld(const uint64_t* a) {
    unsigned long long v = 0;
    if (lane() == 0) v = DeviceStageAtomics::ld(a);
    return from_lane0(v);
  }
  __host__ __device__ static void add(int64_t* a, int64_t v) {
    if (lane() == 0) DeviceStageAtomics::add(a, v);
  }
  __host__ __device__ static bool claim(int32_t* f) {
    int won = 0;
    if (lane() == 0) won = DeviceStageAtomics::claim(f) ? 1 : 0;
    return from_lane0(won) != 0;
  }
  __host__ __device__ static void publish(int64_t* rec, int32_t rule) {
    if (lane() == 0) DeviceStageAtomics::publish(rec, rule);
  }
  __host__ __device__ static void fence() {
#if defined(__CUDA_ARCH__)
    if (kLight) {
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
    } else {
      __threadfence();
    }
#endif
  }
  __host__ __device__ static void publish_key(uint64_t* a, uint64_t k) {
#if defined(__CUDA_ARCH__)
    if (lane() == 0) {
      if (!kLight) __threadfence();
      *reinterpret_cast<volatile unsigned long long*>(a) = k;
    }
#endif
  }
  template <class T, class U>
  __host__ __device__ static void st(T* a, U v) {
    if (lane() == 0) *a = static_cast<T>(v);
  }
  __host__ __device__ static void lock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    sync();
    if (lane() == 0) {
      while (atomicCAS(l, 0, 1) != 0) __nanosleep(64);
      fence();
    }
    sync();
#endif
  }
  __host__ __device__ static void unlock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    fence();  // every lane's writes (settle_pending's row copies) before the release
    __syncwarp(mask());
    if (lane() == 0) atomicExch(l, 0);
#endif
  }
  __host__ __device__ static int64_t claim_index(const StageParams& p, int64_t i) {
    if (kPos) return i;
    unsigned long long r = 0;
    if (lane() == 0) r = static_cast<unsigned long long>(DeviceStageAtomics::claim_index(p.move_count));
    return static_cast<int64_t>(from_lane0(r));
  }
  __host__ __device__ static void count_move(const StageParams& p, int t, int64_t out, int64_t in) {
    if (lane() == 0) DeviceStageAtomics::count_move(p, t, out, in);
  }
  __host__ __device__ static void copy_rows(void* dst, const void* src, int64_t bytes) {
    sync();  // (a copy may read what the previous one wrote, on other lanes)
    DeviceStageAtomics::copy_row(dst, src, bytes, lane(), G);
    sync();
  }
  // The lowest slot of [base, base + cap) whose key is `key` (kRoom: the lowest empty slot, else the lowest
  // pending one: stage_find_room's choice), or -1.
  template <bool kRoom>
  __host__ __device__ static int64_t first_of(const uint64_t* keys, int64_t base, int cap, uint64_t key) {
    int best = kNone, pend = kNone;
    for (int j0 = 0; j0 < cap; j0 += 4 * G) {
      uint64_t k[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r * G + lane();
        k[r] = j < cap ? DeviceStageAtomics::ld(keys + base + j) : key + 1;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r * G + lane();
        const bool m = kRoom ? (j < cap && k[r] == table::kEmptyKey) : k[r] == key;
        if (m && j < best) best = j;
        if (kRoom && j < cap && k[r] == kPendingKey && j < pend) pend = j;
      }
    }
    best = warp_min(best);
    if (kRoom && best == kNone) best = warp_min(pend);
    return best == kNone ? -1 : base + best;
  }
  __host__ __device__ static int64_t find(const uint64_t* keys, int64_t base, int cap, uint64_t key) {
    return first_of<false>(keys, base, cap, key);
  }
  __host__ __device__ static int64_t find_room(const uint64_t* keys, int64_t base, int cap) {
    return first_of<true>(keys, base, cap, 0);
  }
  __host__ __device__ static BucketScan scan_bucket(const uint64_t* ck, const uint64_t* cs, const int64_t* stamps,
                                                    int64_t base, int cap, uint64_t key, int64_t min_live) {
    int hit = kNone, fr = kNone, vj = kNone;
    unsigned long long vs = ~0ull;
    for (int j0 = 0; j0 < cap; j0 += 4 * G) {
      uint64_t k[4], sc[4], st[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r * G + lane();
        const bool in = j < cap;
        k[r] = in ? DeviceStageAtomics::ld(ck + base + j) : table::kEmptyKey;
        sc[r] = in ? DeviceStageAtomics::ld(cs + base + j) : 0;
        st[r] = in ? DeviceStageAtomics::ld(reinterpret_cast<const uint64_t*>(stamps + base + j)) : 0;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // this lane's slots in increasing order: `<` keeps the lowest on ties
        const int j = j0 + r * G + lane();
        if (j >= cap) continue;
        if (k[r] == key && j < hit) hit = j;
        if (k[r] == table::kEmptyKey) {
          if (j < fr) fr = j;
        } else if (!table::is_reserved_key(k[r]) && sc[r] != ~0ull && static_cast<int64_t>(st[r]) < min_live &&
                   sc[r] < vs) {
          vs = sc[r];
          vj = j;
        }
      }
    }
    hit = warp_min(hit);
    fr = warp_min(fr);
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1) {  // (lowest score, then lowest slot); a lane without one: (~0, none)
      const unsigned long long os = __shfl_xor_sync(mask(), vs, d, G);
      const int oj = __shfl_xor_sync(mask(), vj, d, G);
      if (os < vs || (os == vs && oj < vj)) {
        vs = os;
        vj = oj;
      }
    }
#endif
    BucketScan b;
    b.hit = hit == kNone ? -1 : base + hit;
    b.free_slot = fr == kNone ? -1 : base + fr;
    b.victim = vj == kNone ? -1 : base + vj;
    b.vscore = vj == kNone ? 0 : vs;
    return b;
  }
};

// A group of kStageLanes lanes per missing id: a warp reads the found flags of 32 consecutive ids (one ballot; a
// warm step: one load and one ballot per 32 ids) and its groups stage the misses, the k-th miss on group k mod
// (32 / kStageLanes), all groups in the same rounds (one stage_one each per round: they run the same path side by
// side). A miss is a chain of ~20-30 dependent L2 round trips and fences (bucket scans, locks, atomics): 4 groups
// per warp and at least kStageMinBlocks blocks per SM (64 registers; unbounded, ptxas took 114: 2 blocks, 16 warps
// per SM; the few spills hit L1) put more misses in flight. Measured (H200, cold 25 % step, ~106K misses): 0.77 ms
// against 0.82 with a warp per id, so the misses in flight are not what bounds the pass (docs/
// dynamicemb_storage_notes.md: the shared counters and fences are the candidates).
constexpr int kStageMinBlocks = 4;
constexpr int kStageLanes = 8;
template <bool kLight, bool kPos>
__global__ void __launch_bounds__(kStageBlock, kStageMinBlocks) stage_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  constexpr int kGroups = 32 / kStageLanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) >> 5;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / 32) * 32;
  const int lane = static_cast<int>(threadIdx.x & 31u), group = lane / kStageLanes;
  bool any = false;
  for (int64_t base = warp * 32; base < p.n; base += stride) {
    const int64_t i = base + lane;
    const bool mine = i < p.n && !p.found[i];
    if (kPos && mine) p.moves[kMoveWords * i + 3] = kNoRecord;  // (stage_one's record overwrites it)
    const unsigned miss = __ballot_sync(0xffffffffu, mine);
    if (kPos) __syncwarp();  // (the marks before any group's record)
    const int m = __popc(miss);
    any = any || m > 0;
    for (int k0 = 0; k0 < m; k0 += kGroups) {
      const int k = k0 + group;
      if (k >= m) continue;
      unsigned rest = miss;  // (the k-th set bit)
      for (int j = 0; j < k; ++j) rest &= rest - 1u;
      stage_one<DeviceGroupStage<kStageLanes, kLight, kPos>>(p, base + __ffs(rest) - 1);
    }
  }
  if (kPos && any && lane == 0) *reinterpret_cast<volatile int64_t*>(p.move_count) = p.n;  // (records: 0..n)
}

// kMoveLanes threads per move record by default (a 512-byte row: 32 16-byte words, 4 per lane, all in flight).
constexpr int kMoveLanes = 8;
constexpr int kMoveBlocksPerSm = 2;
constexpr int kScanThreads = 1024;

// One block: the bins' counts ((bin, kind) pairs in bin order) become their first positions in move_order (an
// exclusive scan); move_split[1] = all copies, move_split[2] = the stash row pitch (the widest row of the tables,
// 16-byte multiple). Nothing when no record.
__global__ void __launch_bounds__(kScanThreads) move_scan_kernel(StageParams p) {
  const int64_t count = *p.move_count;
  if (count == 0) return;
  if (threadIdx.x == 0) {
    int64_t pitch = 0;
    for (int t = 0; t < p.num_tables; ++t) {
      const int64_t b = p.meta[t].row_stride * p.value_bytes;
      pitch = b > pitch ? b : pitch;
    }
    p.move_split[2] = (pitch + 15) / 16 * 16;
  }
  const int64_t total = 2 * static_cast<int64_t>(p.num_tables) * p.bins_per_table;
  const int64_t per = (total + kScanThreads - 1) / kScanThreads;
  const int64_t b0 = threadIdx.x * per, b1 = b0 + per < total ? b0 + per : total;
  int32_t sum = 0;
  for (int64_t b = b0; b < b1; ++b) sum += p.move_bins[b];
  // block exclusive scan of the per-thread sums: within warps, then over the warps' totals
  __shared__ int32_t warp_total[kScanThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t inc = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += v;
  }
  if (lane == 31) warp_total[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int32_t w = warp_total[lane];  // (kScanThreads / 32 == 32 warps)
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += v;
    }
    warp_total[lane] = w;  // inclusive over the warps
  }
  __syncthreads();
  int32_t run = inc - sum + (warp > 0 ? warp_total[warp - 1] : 0);
  for (int64_t b = b0; b < b1; ++b) {
    const int32_t v = p.move_bins[b];
    p.move_bins[b] = run;
    run += v;
  }
  if (threadIdx.x == kScanThreads - 1) p.move_split[1] = run;
}

// Stash rows the HBM stash holds (pitch: move_split[2]).
__device__ __forceinline__ int64_t stash_fit(const StageParams& p) {
  return p.stash != nullptr && p.move_split[2] > 0 ? p.stash_bytes / p.move_split[2] : 0;
}

// Every record's copies into their bins' positions (the order within a bin is the atomics' order); an entry is
// 2 r + kind (0: the victim's row out, 1: the stored row in). Every victim's copy not yet done claims a stash row
// (one atomic per warp), kept in its record's word 3 when the stash holds it. kPos: records 0..n, those of found
// ids and kNoRecord ones skipped.
template <bool kPos>
__global__ void __launch_bounds__(kStageBlock) move_scatter_kernel(StageParams p) {
  const int64_t count = *p.move_count;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  const int64_t fit = stash_fit(p);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * kStageBlock + (threadIdx.x & ~31u); r0 < count; r0 += stride) {
    const int64_t r = r0 + lane;  // (whole warps per iteration: the stash claim's ballot)
    int64_t* rec = p.moves + kMoveWords * r;
    bool live = r < count && !(kPos && p.found[r]);
    int64_t w3 = live ? rec[3] : 0;
    live = live && !(kPos && w3 == kNoRecord);
    const int t = static_cast<int>(w3 & kMoveTableMask);
    const int64_t out = live ? rec[1] : -1, in = live ? rec[2] : -1;
    if (out >= 0) p.move_order[atomicAdd(p.move_bins + 2 * move_bin(p, t, out), 1)] = static_cast<int32_t>(2 * r);
    if (in >= 0) p.move_order[atomicAdd(p.move_bins + 2 * move_bin(p, t, in) + 1, 1)] = static_cast<int32_t>(2 * r + 1);
    const bool want = out >= 0 && !(w3 & kMoveDone);
    const unsigned vote = __ballot_sync(0xffffffffu, want);
    if (vote == 0) continue;
    unsigned long long k0 = 0;
    if (lane == __ffs(vote) - 1) k0 = atomicAdd(reinterpret_cast<unsigned long long*>(p.move_split), __popc(vote));
    k0 = __shfl_sync(0xffffffffu, k0, __ffs(vote) - 1);
    const int64_t k = static_cast<int64_t>(k0) + __popc(vote & ((1u << lane) - 1u));
    if (want && k < fit) rec[3] = w3 | ((k + 1) << kStashShift);
  }
}

// The victims' rows with a stash row into it (HBM to HBM), L threads per row, over the victims' copies in order.
template <int L>
__global__ void __launch_bounds__(kStageBlock) move_stash_kernel(StageParams p) {
  const int64_t end = p.move_split[1];
  const int lane = threadIdx.x % L;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / L);
  for (int64_t k = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / L; k < end; k += stride) {
    const int32_t e = p.move_order[k];
    if ((e & 1) == 0) stash_one<DeviceStageAtomics>(p, e >> 1, lane, L);
  }
}

// One pass over the copies in store-address order, both directions, L threads per copy (consecutive groups on
// consecutive positions of move_order): every victim's row out (from its stash row if it has one, else from its
// cache slot), and the stored rows in of the records whose cache slot is free to overwrite (no victim, or a
// stashed one).
template <int L>
__global__ void __launch_bounds__(kStageBlock) move_out_kernel(StageParams p) {
  const int64_t end = p.move_split[1];
  const int lane = threadIdx.x % L;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / L);
  for (int64_t k = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / L; k < end; k += stride) {
    const int32_t e = p.move_order[k];
    const int64_t r = e >> 1;
    const uint8_t* from = stash_row(p, r);
    if ((e & 1) == 0)
      move_out_one<DeviceStageAtomics>(p, r, lane, L, from);
    else if (from != nullptr || p.moves[kMoveWords * r + 1] < 0)
      move_in_one<DeviceStageAtomics>(p, r, lane, L);
  }
}

// The placeholders leave (unplace_one over every id), then the stored rows in of the records whose victim had no
// stash row, in order (their victims left in move_out_kernel; a placeholder's slot receives no row).
template <int L>
__global__ void __launch_bounds__(kStageBlock) move_in_unplace_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = tid; i < p.n; i += stride) unplace_one<DeviceStageAtomics>(p, i);
  const int64_t end = p.move_split[1];
  if (p.move_split[0] <= stash_fit(p)) return;  // (every victim had a stash row: every stored row came in)
  const int lane = threadIdx.x % L;
  for (int64_t k = tid / L; k < end; k += stride / L) {
    const int32_t e = p.move_order[k];
    const int64_t r = e >> 1;
    if ((e & 1) != 0 && p.moves[kMoveWords * r + 1] >= 0 && stash_row(p, r) == nullptr)
      move_in_one<DeviceStageAtomics>(p, r, lane, L);
  }
}

}  // namespace detail

// Lab variants (private op _stage_variant; docs/dynamicemb_storage_notes.md, session 13): bit 0 kLight, bit 1
// kPos (DeviceGroupStage), bits 2-3 the move passes' lanes per row (8, 16, 32, 4), bits 4-5 their blocks per SM
// (2, 1, 4, 8).
namespace {
int g_stage_variant = 3;

template <int L>
void launch_moves(const StageParams& p, unsigned grid, cudaStream_t st) {
  detail::move_stash_kernel<L><<<grid, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move stash");
  detail::move_out_kernel<L><<<grid, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move out");
  detail::move_in_unplace_kernel<L><<<grid, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move in, unplace");
}

template <bool kLight, bool kPos>
void launch_stage_pass(const StageParams& p, unsigned grid, unsigned sgrid, cudaStream_t st) {
  // (the staging pass: the blocks resident at once, one wave of warps striding over the ids)
  static const unsigned stage_cap = static_cast<unsigned>(
      persistent_blocks(resident_per_sm(detail::stage_kernel<kLight, kPos>, detail::kStageBlock)));
  detail::stage_kernel<kLight, kPos><<<grid < stage_cap ? grid : stage_cap, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache stage");
  detail::move_scan_kernel<<<1, detail::kScanThreads, 0, st>>>(p);
  check_launch("cache move scan");
  detail::move_scatter_kernel<kPos><<<sgrid, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move scatter");
}
}  // namespace

int set_stage_variant(int v) {
  const int old = g_stage_variant;
  if (v >= 0) g_stage_variant = v;
  return old;
}

void launch_cache_stage(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  launch_cache_probe(probe, stream);
  if (p.n > 0) {
    const int v = g_stage_variant;
    const unsigned grid = blocks_for(p.n, detail::kStageBlock);
    const unsigned cap = static_cast<unsigned>(persistent_blocks(2048 / detail::kStageBlock));
    const unsigned sgrid = grid < cap ? grid : cap;
    switch (v & 3) {
      case 0: launch_stage_pass<false, false>(p, grid, sgrid, st); break;
      case 1: launch_stage_pass<true, false>(p, grid, sgrid, st); break;
      case 2: launch_stage_pass<false, true>(p, grid, sgrid, st); break;
      default: launch_stage_pass<true, true>(p, grid, sgrid, st); break;
    }
    // The move passes: 2 blocks per SM by default (8.4K rows in flight on 132 SMs, far beyond the link's ~0.5 MB
    // of bytes in flight; the host pages' translations bound them, not the threads: the same ms as 4 blocks per
    // SM, H200), so half of every SM stays free for the step running beside a prefetch's moves.
    static const int kLanes[4] = {detail::kMoveLanes, 16, 32, 4};
    static const int kPerSm[4] = {detail::kMoveBlocksPerSm, 1, 4, 8};
    const int lanes = kLanes[(v >> 2) & 3];
    const unsigned mgrid = blocks_for(p.n * lanes, detail::kStageBlock);
    const unsigned mcap = static_cast<unsigned>(persistent_blocks(kPerSm[(v >> 4) & 3]));
    const unsigned g = mgrid < mcap ? mgrid : mcap;
    switch (lanes) {
      case 16: launch_moves<16>(p, g, st); break;
      case 32: launch_moves<32>(p, g, st); break;
      case 4: launch_moves<4>(p, g, st); break;
      default: launch_moves<detail::kMoveLanes>(p, g, st); break;
    }
  }
  if (report) launch_report_stage(p.first_fail, stream);
}

}  // namespace lookup
}  // namespace dynamicemb
