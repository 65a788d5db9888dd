// Device staging of caching tables over the uva store (stage_common.h has the algorithm, shared with the CPU
// twin): the probe (stamping hits); the misses listed by cache bucket, each with its store slot (stage_list_kernel),
// and a warp per bucket giving them their slots in position order, without a cache lock (stage_owner_kernel); the
// locked pass (a group of kStageLanes lanes per missing id for stage_one) over the misses the owners did not list;
// the order of the row copies by store address (a one-block scan of the bins' counts, a scatter of the records),
// the victims' rows of the first records into the HBM stash, one pass of kMoveLanes threads per copy over both
// directions in store-address order, then the stored rows of the records without a stash row (in one launch with
// unplace_one, one thread per id), and the report of the first failure. Ten launches per step whatever the number
// of tables; a step without misses returns from the last nine at once (every thread reads its found flag, its
// bin's count, the rest count or the record count, and exits).
#include "dynamicemb/csrc/lookup/lookup_common.cuh"
#include "dynamicemb/csrc/lookup/stage_common.h"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {
namespace detail {

constexpr int kStageBlock = 256;

// Device policy of the move passes, and the base of the staging pass's (DeviceGroupStage: the bucket spin locks, the
// tables' eviction locks: no other kernel runs on these tables meanwhile): key, score and stamp reads from L2
// (another SM may have written them under the same lock), keys published after a fence. Host branches are never
// called (the host twin uses HostStageAtomics).
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
  // before their stores (a host row is ~1 us away); 2-byte words when the row is not 16-byte aligned. kWide (lab,
  // variant 7): the loads hinted to fetch 256 bytes into the L2 (ld.global.cg.L2::256B): whether host rows read as
  // fewer, larger requests cross the link faster.
  template <bool kWide = false>
  __host__ __device__ static void copy_row_as(void* dst, const void* src, int64_t bytes, int lane, int lanes) {
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
          if (b + k * lanes < n4) r[k] = load16<kWide>(s4 + b + k * lanes);
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
  __host__ __device__ static void copy_row(void* dst, const void* src, int64_t bytes, int lane, int lanes) {
    copy_row_as<false>(dst, src, bytes, lane, lanes);
  }
#if defined(__CUDA_ARCH__)
  template <bool kWide>
  __device__ static uint4 load16(const uint4* a) {
    if (!kWide) return __ldcg(a);
    uint4 r;
    asm volatile("ld.global.cg.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(a));
    return r;
  }
#endif
};

// Lab (variant 7): the move passes' row copies with kWide loads.
struct DeviceStageAtomicsWide : DeviceStageAtomics {
  __host__ __device__ static void copy_row(void* dst, const void* src, int64_t bytes, int lane, int lanes) {
    copy_row_as<true>(dst, src, bytes, lane, lanes);
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
// kLight (the default): the locks' fences acquire / release (fence.acq_rel.gpu) instead of sequentially consistent
// (__threadfence), and no fence before a key published under a lock (the lock's release orders it: every reader
// of a key of this launch holds that lock or only tests the key's presence); -6 % of the pass (H200, cold 25 %
// step). kLate: the stored row's store slot turns pending after the cache lock is released (stage_one). kTtas: a
// waiter polls the lock with loads and backs off (32 -> 512 ns) instead of a CAS every 64 ns (less atomic traffic
// at the L2 while ~30 % of the acquisitions wait).
template <int G, bool kLight = true, bool kLateLeave = false, bool kTtas = false, bool kFusedFind = false,
          bool kEarly = false>
struct DeviceGroupStage : DeviceStageAtomics {
  static_assert(G == 8 || G == 16 || G == 32, "DeviceGroupStage: 8, 16 or 32 lanes per id");
  static constexpr bool kLate = kLateLeave;
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
  // (every publish_key of stage_one is under a lock)
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
      if (kTtas) {
        unsigned ns = 32;
        while (__ldcg(l) != 0 || atomicCAS(l, 0, 1) != 0) {
          __nanosleep(ns);
          ns = ns < 512 ? 2 * ns : 512;
        }
      } else {
        while (atomicCAS(l, 0, 1) != 0) __nanosleep(64);
      }
      fence();  // (acquire)
    }
    sync();
#endif
  }
  __host__ __device__ static void unlock(int32_t* l) {
#if defined(__CUDA_ARCH__)
    fence();  // (release) every lane's writes (settle_pending's row copies) before the lock is free
    __syncwarp(mask());
    if (lane() == 0) atomicExch(l, 0);
#endif
  }
  __host__ __device__ static int64_t claim_index(int64_t* count) {
    unsigned long long r = 0;
    if (lane() == 0) r = static_cast<unsigned long long>(DeviceStageAtomics::claim_index(count));
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
      if (kEarly) {  // (lab) the rounds cover increasing slots: a match in this one is the lowest
        const int b = warp_min(best);
        if (b != kNone) return base + b;
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
  // stage_one's first look: true when `key` is in its cache bucket already (a duplicate staged it), else its store
  // slot in *at (-1: none). The cache's scan first, the store's only on a miss; kFusedFind (lab): both buckets' key
  // loads in the same rounds (4 round trips instead of 8 at 128 slots and 8 lanes).
  __host__ __device__ static bool find_first(const uint64_t* ck, int64_t cbase, int ccap, const uint64_t* sk,
                                             int64_t sbase, int scap, uint64_t key, int64_t* at) {
    if (!kFusedFind) {
      if (find(ck, cbase, ccap, key) >= 0) return true;
      *at = find(sk, sbase, scap, key);
      return false;
    }
    int hc = kNone, hs = kNone;
    const int cap = ccap > scap ? ccap : scap;
    for (int j0 = 0; j0 < cap; j0 += 4 * G) {
      uint64_t a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r * G + lane();
        a[r] = j < ccap ? DeviceStageAtomics::ld(ck + cbase + j) : key + 1;
        b[r] = j < scap ? DeviceStageAtomics::ld(sk + sbase + j) : key + 1;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = j0 + r * G + lane();
        if (a[r] == key && j < hc) hc = j;
        if (b[r] == key && j < hs) hs = j;
      }
    }
    hc = warp_min(hc);
    hs = warp_min(hs);
    *at = hs == kNone ? -1 : sbase + hs;
    return hc != kNone;
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
// against 0.82 with a warp per id, so the misses in flight are not what bounds the pass; neither is the one record
// counter (a record per id position instead: no gain); light fences -6 % (docs/dynamicemb_storage_notes.md, "The
// cold step kernel by kernel").
constexpr int kStageMinBlocks = 4;
constexpr int kStageLanes = 8;
// kSpread (lab): the warps take their 32-id chunks in the order chunk = c P mod chunks (P a prime that does not
// divide the chunk count: a bijection) instead of c: the misses in flight at once spread over every table's cache
// buckets instead of the ~1.3 tables a sweep of the grid covers (whether the buckets' lock convoys and the tables'
// counters bound the pass).
// kEarly (lab): a find / find_room scan stops after the first round that matched.
// kRest: only the misses the bucket owners left (place[i] == kUnlisted; `rest` counts them).
constexpr int64_t kUnlisted = -2;
template <int kLanes, bool kLight, bool kLate, bool kTtas, bool kSpread = false, bool kFused = false,
          bool kEarly = false, bool kRest = false>
__global__ void __launch_bounds__(kStageBlock, kStageMinBlocks) stage_kernel(StageParams p,
                                                                             const int32_t* rest = nullptr) {
  if (p.gate != nullptr && *p.gate == 0) return;
  if (kRest && *rest == 0) return;
  constexpr int kGroups = 32 / kLanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) >> 5;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kStageBlock / 32);
  const int64_t chunks = (p.n + 31) / 32;
  const int64_t prime = chunks % 1000003 != 0 ? 1000003 : 1000033;
  const int lane = static_cast<int>(threadIdx.x & 31u), group = lane / kLanes;
  for (int64_t c = warp; c < chunks; c += warps) {
    const int64_t base = 32 * (kSpread ? c * prime % chunks : c);
    const int64_t i = base + lane;
    const unsigned miss = __ballot_sync(0xffffffffu, i < p.n && !p.found[i] && (!kRest || p.place[i] == kUnlisted));
    const int m = __popc(miss);
    for (int k0 = 0; k0 < m; k0 += kGroups) {
      const int k = k0 + group;
      if (k >= m) continue;
      unsigned rest = miss;  // (the k-th set bit)
      for (int j = 0; j < k; ++j) rest &= rest - 1u;
      stage_one<DeviceGroupStage<kLanes, kLight, kLate, kTtas, kFused, kEarly>>(p, base + __ffs(rest) - 1);
    }
  }
}

// The staging pass by bucket owners, no cache lock (the default; docs/dynamicemb_storage_notes.md, "The staging
// pass's serial chain"). The locked pass alone runs ~6.5 misses one after another on each of its ~17K groups, each
// a chain of ~31-35 dependent round trips (~0.75 ms a cold step, H200). Here:
// 1. stage_list_kernel (a thread per id): a miss looks its key up in its store bucket (8-bit digests first: 64-128
//    bytes instead of 1 KB of keys) and is appended to its bin's list (bins of move_bin's shape: bins_per_table
//    per table, one cache bucket per bin when the table has at most that many), its store slot in place[i];
//    misses beyond a bin's kOwnList entries, or of tables with buckets over kOwnCap slots, are marked kUnlisted;
// 2. stage_owner_kernel (a warp per bin, a lane per listed id; the bucket's only writer: no cache lock): the ids'
//    duplicates (the first position stages; a refusal counts the repeats too, as the locked pass does), the
//    bucket's keys, scores and stamps once (4 slots a lane), the slots in the ids' position order (free slots in
//    slot order, then the unguarded rows of lowest (score, slot): stage_one's choice id by id, the CPU twin's),
//    the victims' store slots a lane each (an empty slot claimed by a compare-and-swap of its key: no store lock),
//    then one record claim, the records, the pending store slots (after a fence) and the cache slots. An id whose
//    victim finds no empty store slot, and every later one of its bucket, go one at a time (a pending store slot
//    of an earlier id, settled first as settle_pending does, or a refusal); so do the ids after a full bucket;
// 3. the locked pass (stage_kernel<kRest>) stages what the owners did not list; it returns at once when nothing.
constexpr int kOwnCap = 128;
constexpr int kOwnLanes = 32;  // (kOwnList ids a bin: one a lane)
static_assert(kOwnList == kOwnLanes, "stage_owner_kernel: one listed id per lane");

struct OwnerScratch {
  int32_t* cnt;   // (bins) ids listed per bin (zeroed)
  int32_t* rest;  // (1) misses left to the locked pass (zeroed, after cnt)
  int32_t* list;  // (bins kOwnList) the ids' positions
  int64_t bins;
};

__device__ __forceinline__ bool owner_table_ok(const TableMeta& c, const StageTable& s) {
  return c.bucket_capacity <= kOwnCap && s.bucket_capacity <= kOwnCap && s.bucket_capacity % 16 == 0 &&
         s.digests % 16 == 0;
}

// The byte positions (bit 8 b + 7) of `word`'s bytes equal to the byte replicated in `rep`.
__device__ __forceinline__ unsigned owner_bytes_eq(unsigned word, unsigned rep) { return __vcmpeq4(word, rep) & 0x80808080u; }

// The first slot j (in slot order) of the store bucket at `base` whose digest is `dg` and for which hit(j) holds
// (the bucket's digests read 64 bytes at a time), or -1.
template <class Hit>
__device__ int owner_digest_first(const StageTable& s, int64_t base, uint8_t dg, Hit hit) {
  const int cap = static_cast<int>(s.bucket_capacity);
  const uint4* d4 = reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(s.digests) + base);
  const unsigned rep = 0x01010101u * dg;
  for (int h0 = 0; h0 < cap; h0 += 64) {
    uint4 w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (h0 + 16 * q < cap) w[q] = __ldcg(d4 + h0 / 16 + q);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (h0 + 16 * q >= cap) break;
      const unsigned part[4] = {w[q].x, w[q].y, w[q].z, w[q].w};
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        unsigned m = owner_bytes_eq(part[b], rep);
        while (m != 0) {
          const int j = h0 + 16 * q + 4 * b + ((__ffs(m) - 1) >> 3);
          m &= m - 1u;
          if (hit(j)) return j;
        }
      }
    }
  }
  return -1;
}

// The store slot of `key` in the store bucket at `base` (the keys whose digest is `dg`), or -1.
__device__ int64_t owner_store_find(const StageTable& s, int64_t base, uint64_t key, uint8_t dg) {
  const unsigned long long* sk = reinterpret_cast<const unsigned long long*>(s.keys) + base;
  const int j = owner_digest_first(s, base, dg, [&](int x) { return __ldcg(sk + x) == key; });
  return j < 0 ? -1 : base + j;
}

// A victim's store slot in the store bucket at `base`: the first empty slot (the empty digests' slots, then every
// key), claimed by a compare-and-swap of its key to `vk`; with `pending`, else the first pending slot, claimed the
// same way (*took_pending set: the caller settles its record first). -1 when none.
__device__ int64_t owner_claim_room(const StageTable& s, int64_t base, uint64_t vk, bool pending, bool* took_pending) {
  const int cap = static_cast<int>(s.bucket_capacity);
  unsigned long long* sk = reinterpret_cast<unsigned long long*>(s.keys) + base;
  *took_pending = false;
  const int e = owner_digest_first(s, base, table::empty_digest(), [&](int x) {
    return atomicCAS(sk + x, table::kEmptyKey, vk) == table::kEmptyKey;
  });
  if (e >= 0) return base + e;
  for (int j = 0; j < cap; ++j)  // (an empty slot whose digest is not the empty one: none expected)
    if (__ldcg(sk + j) == table::kEmptyKey && atomicCAS(sk + j, table::kEmptyKey, vk) == table::kEmptyKey)
      return base + j;
  if (pending)
    for (int j = 0; j < cap; ++j)
      if (__ldcg(sk + j) == kPendingKey && atomicCAS(sk + j, kPendingKey, vk) == kPendingKey) {
        *took_pending = true;
        return base + j;
      }
  return -1;
}

__global__ void __launch_bounds__(kStageBlock) stage_list_kernel(StageParams p, OwnerScratch o) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x; i < p.n; i += stride) {
    if (p.found[i]) continue;
    int64_t mark = -1;
    const uint64_t key = p.ids[i];
    if (!table::is_reserved_key(key)) {
      const int t = p.feature_table[stage_feature_of(p.offsets, p.n, p.num_bags, p.batch, p.num_features, i)];
      if (p.table_mask[t]) {
        const TableMeta& c = p.meta[t];
        const StageTable& s = p.stage[t];
        mark = kUnlisted;
        if (owner_table_ok(c, s)) {
          const uint64_t h = accel_hash_key(key);
          const int64_t nb = c.num_buckets;
          const int64_t cb = static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(nb)));
          const int64_t bin = static_cast<int64_t>(t) * p.bins_per_table + cb * p.bins_per_table / nb;
          const int pos = atomicAdd(o.cnt + bin, 1);
          if (pos < kOwnList) {
            o.list[bin * kOwnList + pos] = static_cast<int32_t>(i);
            const int64_t sb = static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(s.num_buckets)));
            mark = owner_store_find(s, sb * s.bucket_capacity, key, table::digest_of_hash(h));  // (its store slot)
          }
        }
        if (mark == kUnlisted) atomicAdd(o.rest, 1);
      }
    }
    p.place[i] = mark;
  }
}

// One thread's staging policy (settle_pending's reads, writes and row copies).
struct DeviceLaneStage : DeviceStageAtomics {
  template <class T, class U>
  __device__ static void st(T* a, U v) {
    *a = static_cast<T>(v);
  }
  __device__ static void copy_rows(void* dst, const void* src, int64_t bytes) { copy_row(dst, src, bytes, 0, 1); }
};

__device__ void owner_fail(const StageParams& p, int32_t rule, int t, uint64_t key, int64_t bound, int times) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p.counts + 3 * t + 2), static_cast<unsigned long long>(times));
  if (atomicCAS(p.failed, 0, 1) == 0) {
    p.first_fail[1] = t;
    p.first_fail[2] = static_cast<int64_t>(key);
    p.first_fail[3] = bound;
    __threadfence();
    *reinterpret_cast<volatile int64_t*>(p.first_fail) = rule;
  }
}

// An id's staging once its slot (and its victim's store slot `out`, -1 when none or settled) are decided: record r
// (when r >= 0: [slot, out, at, t]), its stored row's store slot turned pending after the record, the victim's store
// slot's score and digest (its key was claimed), the cache slot. Returns the cache counter's change.
__device__ int owner_finish(const StageParams& p, const TableMeta& c, const StageTable& s, int t, int64_t i,
                            uint64_t key, uint64_t h, int64_t slot, bool vic, uint64_t vk, uint64_t vs, int64_t out,
                            int64_t vslot, int64_t at, uint64_t at_score, int64_t r) {
  uint64_t* sk = reinterpret_cast<uint64_t*>(s.keys);
  uint64_t* ss = reinterpret_cast<uint64_t*>(s.scores);
  uint8_t* sd = reinterpret_cast<uint8_t*>(s.digests);
  if (vic) {
    ss[vslot] = vs;
    sd[vslot] = table::digest_of_hash(accel_hash_key(vk));
  }
  if (r >= 0) {
    int64_t* rp = p.moves + kMoveWords * r;
    rp[0] = slot;
    rp[1] = out;
    rp[2] = at;
    rp[3] = t;
    DeviceStageAtomics::count_move(p, t, out, at);
    if (at >= 0) {  // (the record complete before its slot turns pending)
      sd[at] = table::empty_digest();
      ss[at] = static_cast<uint64_t>(r);
      __threadfence();
      *reinterpret_cast<volatile unsigned long long*>(sk + at) = kPendingKey;
    }
  }
  p.place[i] = at < 0 ? slot : -1;
  reinterpret_cast<uint64_t*>(c.scores)[slot] = at >= 0 ? at_score : 0;
  reinterpret_cast<uint8_t*>(c.digests)[slot] = table::digest_of_hash(h);
  reinterpret_cast<int64_t*>(s.stamps)[slot] = p.cur;
  *reinterpret_cast<volatile unsigned long long*>(reinterpret_cast<uint64_t*>(c.keys) + slot) = key;
  return vic ? 0 : 1;
}

__global__ void __launch_bounds__(kStageBlock, 4) stage_owner_kernel(StageParams p, OwnerScratch o) {
  if (p.gate != nullptr && *p.gate == 0) return;
  using ull = unsigned long long;
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kNone = 0x7fffffff;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kStageBlock / 32);
  for (int64_t bin = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) >> 5; bin < o.bins;
       bin += warps) {
    const int k = min(__ldcg(o.cnt + bin), kOwnList);
    if (k == 0) continue;
    const int t = static_cast<int>(bin / p.bins_per_table);
    const TableMeta& c = p.meta[t];
    const StageTable& s = p.stage[t];
    const int ccap = static_cast<int>(c.bucket_capacity), scap = static_cast<int>(s.bucket_capacity);
    const int64_t row_bytes = c.row_stride * p.value_bytes;
    // this lane's id (list position `lane`)
    const bool ev = lane < k;
    const int64_t i = ev ? o.list[bin * kOwnList + lane] : -1;
    const uint64_t key = ev ? p.ids[i] : 0;
    const int64_t at = ev ? __ldcg(reinterpret_cast<const ull*>(p.place + i)) : -1;  // (stage_list_kernel's)
    const uint64_t h = accel_hash_key(key);
    const int64_t cb = ev ? static_cast<int64_t>(table::bucket_of_hash(h, static_cast<uint64_t>(c.num_buckets))) : -1;
    const uint64_t at_score = at >= 0 ? __ldcg(reinterpret_cast<const ull*>(s.scores) + at) : 0;
    // duplicates (the first position stages, counting its repeats), then the ranks of the eligible ids (those with
    // a stored row, or any new id when training) by position within their bucket
    bool dup = false;
    int mult = 1;
    for (int x = 0; x < k; ++x) {
      const uint64_t xk = __shfl_sync(kAll, key, x);
      const int64_t xi = __shfl_sync(kAll, i, x);
      if (ev && x != lane && xk == key) {
        if (xi < i) dup = true;
        else ++mult;
      }
    }
    if (ev && (dup || (at < 0 && !p.insert_new))) p.place[i] = -1;
    const bool elig = ev && !dup && (at >= 0 || p.insert_new);
    int rank = 0;
    for (int x = 0; x < k; ++x) {
      const int64_t xi = __shfl_sync(kAll, i, x);
      const int64_t xcb = __shfl_sync(kAll, cb, x);
      const bool xe = __shfl_sync(kAll, static_cast<int>(elig), x) != 0;
      if (elig && xe && xcb == cb && xi < i) ++rank;
    }
    bool pend_todo = elig;  // (this id still to stage)
    for (;;) {  // bucket by bucket (one per bin unless the table has more buckets than bins)
      long long mcb = pend_todo ? cb : 0x7fffffffffffffffll;
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) mcb = min(mcb, __shfl_xor_sync(kAll, mcb, d));
      if (mcb == 0x7fffffffffffffffll) break;
      const bool mine = pend_todo && cb == mcb;
      const int m = __popc(__ballot_sync(kAll, mine));
      const int64_t base = mcb * ccap;
      // the bucket once: slot j = 32 q + lane
      unsigned freem[4], candm = 0;
      ull bk[4], bs[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int j = 32 * q + lane;
        const bool in = j < ccap;
        bk[q] = in ? __ldcg(reinterpret_cast<const ull*>(c.keys) + base + j) : 0;
        bs[q] = in ? __ldcg(reinterpret_cast<const ull*>(c.scores) + base + j) : 0;
        const long long st = in ? static_cast<long long>(__ldcg(reinterpret_cast<const ull*>(s.stamps) + base + j)) : 0;
        freem[q] = __ballot_sync(kAll, in && bk[q] == table::kEmptyKey);
        if (in && bk[q] != table::kEmptyKey && !table::is_reserved_key(bk[q]) && bs[q] != ~0ull && st < p.min_live)
          candm |= 1u << q;
      }
      // the slots in rank order
      int64_t slot = -1;
      bool vic = false;
      ull vk = 0, vs = 0;
      for (int r = 0; r < m; ++r) {
        int64_t got = -1;
        bool gv = false;
        ull gk = 0, gs = 0;
        int q0 = 0;
        while (q0 < 4 && freem[q0] == 0) ++q0;
        if (q0 < 4) {
          got = base + 32 * q0 + __ffs(freem[q0]) - 1;
          freem[q0] &= freem[q0] - 1u;
        } else {  // the lowest (score, slot) of the candidates
          ull best = ~0ull;
          int bj = kNone;
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (((candm >> q) & 1u) && (bs[q] < best || (bs[q] == best && 32 * q + lane < bj))) {
              best = bs[q];
              bj = 32 * q + lane;
            }
#pragma unroll
          for (int d = 16; d > 0; d >>= 1) {
            const ull ob = __shfl_xor_sync(kAll, best, d);
            const int oj = __shfl_xor_sync(kAll, bj, d);
            if (ob < best || (ob == best && oj < bj)) {
              best = ob;
              bj = oj;
            }
          }
          if (bj != kNone) {
            const int q = bj >> 5;
            ull kq = bk[0];
#pragma unroll
            for (int qq = 1; qq < 4; ++qq)
              if (qq == q) kq = bk[qq];
            gk = __shfl_sync(kAll, kq, bj & 31);
            gs = best;
            gv = true;
            got = base + bj;
            if (lane == (bj & 31)) candm &= ~(1u << q);
          }
        }
        if (mine && rank == r) {
          slot = got;
          vic = gv;
          vk = gk;
          vs = gs;
        }
      }
      // the victims' store slots: empty ones, a lane each
      int64_t vslot = -1;
      bool simple = mine && slot >= 0;
      if (simple && vic) {
        const int64_t vb = static_cast<int64_t>(table::bucket_of_hash(accel_hash_key(vk), static_cast<uint64_t>(s.num_buckets)));
        bool tp = false;
        vslot = owner_claim_room(s, vb * scap, vk, false, &tp);
        simple = vslot >= 0;
      }
      // the ids before the first that is not simple (no slot, or no empty store slot for its victim): together
      int first = mine && !simple ? rank : kNone;
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) first = min(first, __shfl_xor_sync(kAll, first, d));
      const bool now = mine && rank < first;
      const unsigned recm = __ballot_sync(kAll, now && (vic || at >= 0));
      ull r0 = 0;
      if (recm != 0 && lane == 0) r0 = atomicAdd(reinterpret_cast<ull*>(p.move_count), static_cast<ull>(__popc(recm)));
      r0 = __shfl_sync(kAll, r0, 0);
      int cache_add = 0, store_add = 0, wrote = 0, moved_in = 0;
      if (now) {
        const int64_t r = (vic || at >= 0) ? static_cast<int64_t>(r0) + __popc(recm & ((1u << lane) - 1u)) : -1;
        cache_add += owner_finish(p, c, s, t, i, key, h, slot, vic, vk, vs, vslot, vslot, at, at_score, r);
        store_add += (vic ? 1 : 0) - (at >= 0 ? 1 : 0);
        wrote += vic ? 1 : 0;
        moved_in += at >= 0 ? 1 : 0;
      }
      // the rest one at a time, in rank order (rare: a pending store slot, or refusals)
      int fail_rule = 0;
      for (int r = first; r < m; ++r) {
        if (mine && rank == r) {
          if (fail_rule != 0 || slot < 0 || (vic && vslot < 0)) {
            bool tp = false;
            if (fail_rule == 0 && slot >= 0) {  // a victim without an empty store slot: a pending one
              __threadfence();
              const int64_t vb =
                  static_cast<int64_t>(table::bucket_of_hash(accel_hash_key(vk), static_cast<uint64_t>(s.num_buckets)));
              vslot = owner_claim_room(s, vb * scap, vk, true, &tp);
            }
            if (fail_rule == 0 && slot >= 0 && vslot >= 0) {
              if (tp) {  // its record's copies first, then the victim's row there
                __threadfence();
                settle_pending<DeviceLaneStage>(p, c, s, vslot, row_bytes);
                DeviceStageAtomics::copy_row(store_row(s, vslot, row_bytes), cache_row(c, slot, row_bytes), row_bytes,
                                             0, 1);
              }
              const int64_t out = tp ? -1 : vslot;
              const int64_t rr = (out >= 0 || at >= 0)
                                     ? static_cast<int64_t>(atomicAdd(reinterpret_cast<ull*>(p.move_count), 1ull))
                                     : -1;
              cache_add += owner_finish(p, c, s, t, i, key, h, slot, vic, vk, vs, out, vslot, at, at_score, rr);
              store_add += 1 - (at >= 0 ? 1 : 0);
              ++wrote;
              moved_in += at >= 0 ? 1 : 0;
            } else {
              const int rule = fail_rule != 0 ? fail_rule : (slot < 0 ? kRuleCacheFull : kRuleStoreFull);
              if (vic && vslot >= 0) *reinterpret_cast<volatile ull*>(reinterpret_cast<ull*>(s.keys) + vslot) = table::kEmptyKey;
              owner_fail(p, rule, t, key, rule == kRuleCacheFull ? ccap : scap, mult);
              p.place[i] = -1;
              fail_rule = rule;
            }
          } else {  // (after the first that was not simple: its own empty store slot or a free cache slot)
            const int64_t rr = (vic || at >= 0)
                                   ? static_cast<int64_t>(atomicAdd(reinterpret_cast<ull*>(p.move_count), 1ull))
                                   : -1;
            cache_add += owner_finish(p, c, s, t, i, key, h, slot, vic, vk, vs, vslot, vslot, at, at_score, rr);
            store_add += (vic ? 1 : 0) - (at >= 0 ? 1 : 0);
            wrote += vic ? 1 : 0;
            moved_in += at >= 0 ? 1 : 0;
          }
        }
        // (the rank's outcome to every lane: a refusal refuses every later id of the bucket)
        const unsigned who = __ballot_sync(kAll, mine && rank == r);
        fail_rule = __shfl_sync(kAll, fail_rule, who != 0 ? __ffs(who) - 1 : 0);
        __syncwarp();
      }
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) {
        cache_add += __shfl_xor_sync(kAll, cache_add, d);
        store_add += __shfl_xor_sync(kAll, store_add, d);
        wrote += __shfl_xor_sync(kAll, wrote, d);
        moved_in += __shfl_xor_sync(kAll, moved_in, d);
      }
      if (lane == 0) {
        if (cache_add) atomicAdd(reinterpret_cast<ull*>(c.counters) + table::kCounterSize, static_cast<ull>(static_cast<int64_t>(cache_add)));
        if (store_add) atomicAdd(reinterpret_cast<ull*>(s.counters) + table::kCounterSize, static_cast<ull>(static_cast<int64_t>(store_add)));
        if (moved_in) atomicAdd(reinterpret_cast<ull*>(p.counts + 3 * t), static_cast<ull>(moved_in));
        if (wrote) atomicAdd(reinterpret_cast<ull*>(p.counts + 3 * t + 1), static_cast<ull>(wrote));
      }
      if (mine) pend_todo = false;
    }
  }
}

// kMoveLanes threads per move record (a 512-byte row: 32 16-byte words, 4 per lane, all in flight).
constexpr int kMoveLanes = 8;
constexpr int kMoveBlocksPerSm = 2;
constexpr int kScanThreads = 1024;

// One block: the bins' counts ((bin, kind) pairs in bin order) become their first positions in move_order (an
// exclusive scan, in tiles of kScanPer bins per thread staged in shared memory: coalesced loads and stores, the
// block's scan per tile, a running carry; the per-thread serial pass over a contiguous range it replaces took
// ~55 us for 41K bins, H200); move_split = [records with a stash row, all copies, stash row pitch] (the pitch: the
// widest row of the tables, 16-byte multiple). Nothing when no record.
constexpr int kScanPer = 8;
__global__ void __launch_bounds__(kScanThreads) move_scan_kernel(StageParams p) {
  const int64_t count = *p.move_count;
  if (count == 0) return;
  if (threadIdx.x == 0) {
    int64_t pitch = 0;
    for (int t = 0; t < p.num_tables; ++t) {
      const int64_t b = p.meta[t].row_stride * p.value_bytes;
      pitch = b > pitch ? b : pitch;
    }
    pitch = (pitch + 15) / 16 * 16;
    const int64_t fit = p.stash != nullptr && pitch > 0 ? p.stash_bytes / pitch : 0;
    p.move_split[0] = fit < count ? fit : count;
    p.move_split[2] = pitch;
  }
  constexpr int kTile = kScanThreads * kScanPer;
  __shared__ int32_t tile[kTile];
  __shared__ int32_t warp_total[kScanThreads / 32];
  const int64_t total = 2 * static_cast<int64_t>(p.num_tables) * p.bins_per_table;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t carry = 0;
  for (int64_t t0 = 0; t0 < total; t0 += kTile) {
    for (int j = threadIdx.x; j < kTile; j += kScanThreads) tile[j] = t0 + j < total ? p.move_bins[t0 + j] : 0;
    __syncthreads();
    int32_t v[kScanPer], sum = 0;
#pragma unroll
    for (int k = 0; k < kScanPer; ++k) {
      v[k] = tile[threadIdx.x * kScanPer + k];
      sum += v[k];
    }
    // block exclusive scan of the per-thread sums: within warps, then over the warps' totals
    int32_t inc = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int32_t o = __shfl_up_sync(0xffffffffu, inc, d);
      if (lane >= d) inc += o;
    }
    if (lane == 31) warp_total[warp] = inc;
    __syncthreads();
    if (warp == 0) {
      int32_t w = warp_total[lane];  // (kScanThreads / 32 == 32 warps)
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int32_t o = __shfl_up_sync(0xffffffffu, w, d);
        if (lane >= d) w += o;
      }
      warp_total[lane] = w;  // inclusive over the warps
    }
    __syncthreads();
    int32_t run = carry + inc - sum + (warp > 0 ? warp_total[warp - 1] : 0);
#pragma unroll
    for (int k = 0; k < kScanPer; ++k) {
      tile[threadIdx.x * kScanPer + k] = run;
      run += v[k];
    }
    carry += warp_total[31];
    __syncthreads();
    for (int j = threadIdx.x; j < kTile; j += kScanThreads)
      if (t0 + j < total) p.move_bins[t0 + j] = tile[j];
    __syncthreads();  // (tile and warp_total are rewritten by the next tile)
  }
  if (threadIdx.x == 0) p.move_split[1] = carry;
}

// Every record's copies into their bins' positions (the order within a bin is the atomics' order); an entry is
// 2 r + kind (0: the victim's row out, 1: the stored row in).
__global__ void __launch_bounds__(kStageBlock) move_scatter_kernel(StageParams p) {
  const int64_t count = *p.move_count;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x; r < count; r += stride) {
    const int64_t* rec = p.moves + kMoveWords * r;
    const int t = static_cast<int>(rec[3] & (kMoveDone - 1));
    if (rec[1] >= 0)
      p.move_order[atomicAdd(p.move_bins + 2 * move_bin(p, t, rec[1]), 1)] = static_cast<int32_t>(2 * r);
    if (rec[2] >= 0)
      p.move_order[atomicAdd(p.move_bins + 2 * move_bin(p, t, rec[2]) + 1, 1)] = static_cast<int32_t>(2 * r + 1);
  }
}

// The victims' rows of records [0, move_split[0]) into their stash rows (HBM to HBM), kMoveLanes threads per row.
__global__ void __launch_bounds__(kStageBlock) move_stash_kernel(StageParams p) {
  const int64_t end = p.move_split[0];
  const int lane = threadIdx.x % kMoveLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / kMoveLanes);
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / kMoveLanes; r < end; r += stride)
    stash_one<DeviceStageAtomics>(p, r, lane, kMoveLanes);
}

// One pass over the copies in store-address order, both directions, kMoveLanes threads per copy (consecutive
// groups on consecutive positions of move_order): every victim's row out (from its stash row if it has one, else
// from its cache slot), and the stored rows in of the records with a stash row (their cache slots' victims are
// in the stash).
template <class A = DeviceStageAtomics>
__global__ void __launch_bounds__(kStageBlock) move_out_kernel(StageParams p) {
  const int64_t end = p.move_split[1];
  const int lane = threadIdx.x % kMoveLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kStageBlock / kMoveLanes);
  for (int64_t k = (static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x) / kMoveLanes; k < end;
       k += stride) {
    const int32_t e = p.move_order[k];
    const int64_t r = e >> 1;
    const uint8_t* from = stash_row(p, r);
    if ((e & 1) == 0)
      move_out_one<A>(p, r, lane, kMoveLanes, from);
    else if (from != nullptr)
      move_in_one<A>(p, r, lane, kMoveLanes);
  }
}

// Lab (variant 8): the mixed pass by the bulk copy engine (TMA, sm_90): blocks of one warp whose lane 0 runs a
// ring of kBulkRing row buffers in shared memory, each copy a bulk load (global -> shared, completion on its
// buffer's mbarrier) issued up to kBulkRing - 2 copies ahead of its bulk store (shared -> global): larger requests
// and many rows in flight with no SM thread per row. Rows wider than kBulkRow, or not 16-byte aligned, and builds
// for older GPUs: copied by the thread itself. The same copies as move_out_kernel.
constexpr int kBulkRing = 8;
constexpr int kBulkRow = 2048;
constexpr int kBulkBlocksPerSm = 8;

struct BulkCopy {
  uint8_t* dst;
  const uint8_t* src;
  int bytes;  // 0: nothing to copy
};

// Copy k of move_order (move_out_kernel's choice); an in-copy's store slot turns empty (read by later kernels only).
__device__ BulkCopy bulk_copy_of(const StageParams& p, int64_t k) {
  const int32_t e = p.move_order[k];
  const int64_t r = e >> 1;
  const int64_t* rec = p.moves + kMoveWords * r;
  BulkCopy c{nullptr, nullptr, 0};
  if (rec[3] & kMoveDone) return c;
  const int t = static_cast<int>(rec[3]);
  const int64_t row_bytes = p.meta[t].row_stride * p.value_bytes;
  const uint8_t* from = stash_row(p, r);
  if ((e & 1) == 0) {
    if (rec[1] < 0) return c;
    c.dst = store_row(p.stage[t], rec[1], row_bytes);
    c.src = from != nullptr ? from : cache_row(p.meta[t], rec[0], row_bytes);
  } else {
    if (from == nullptr || rec[2] < 0) return c;
    const StageTable& s = p.stage[t];
    c.dst = cache_row(p.meta[t], rec[0], row_bytes);
    c.src = store_row(s, rec[2], row_bytes);
    reinterpret_cast<uint64_t*>(s.scores)[rec[2]] = 0;
    reinterpret_cast<uint64_t*>(s.keys)[rec[2]] = table::kEmptyKey;
  }
  c.bytes = static_cast<int>(row_bytes);
  return c;
}

__device__ __forceinline__ uint32_t smem_addr(const void* a) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(a));
}

__global__ void __launch_bounds__(32) move_bulk_kernel(StageParams p) {
  if (threadIdx.x != 0) return;
  const int64_t end = p.move_split[1];
  const int64_t stride = gridDim.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ alignas(128) uint8_t buf[kBulkRing][kBulkRow];
  __shared__ alignas(8) uint64_t bar[kBulkRing];
  for (int b = 0; b < kBulkRing; ++b)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[b])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  uint8_t* dst[kBulkRing];
  int bytes[kBulkRing];
  uint32_t phase = 0;
  int64_t k = blockIdx.x, issued = 0, retired = 0;
  for (;;) {
    while (issued - retired < kBulkRing - 2 && k < end) {  // loads ahead
      const BulkCopy c = bulk_copy_of(p, k);
      k += stride;
      if (c.bytes == 0) continue;
      if (c.bytes > kBulkRow || ((reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) |
                                  static_cast<uintptr_t>(c.bytes)) & 15) != 0) {
        DeviceStageAtomics::copy_row(c.dst, c.src, c.bytes, 0, 1);
        continue;
      }
      const int b = static_cast<int>(issued % kBulkRing);
      // every store but the newest has read its buffer (the newest is not b's: at most kBulkRing - 2 ahead)
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bar[b])), "r"(c.bytes)
                   : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_addr(buf[b])),
                   "l"(c.src), "r"(c.bytes), "r"(smem_addr(&bar[b]))
                   : "memory");
      dst[b] = c.dst;
      bytes[b] = c.bytes;
      ++issued;
    }
    if (issued == retired) break;
    const int b = static_cast<int>(retired % kBulkRing);  // the oldest: wait for its load, store it
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred P; mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2; selp.u32 %0, 1, 0, P; }"
          : "=r"(done)
          : "r"(smem_addr(&bar[b])), "r"((phase >> b) & 1u)
          : "memory");
    phase ^= 1u << b;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst[b]), "r"(smem_addr(buf[b])),
                 "r"(bytes[b])
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    ++retired;
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#else
  for (int64_t k = blockIdx.x; k < end; k += stride) {
    const BulkCopy c = bulk_copy_of(p, k);
    if (c.bytes != 0) DeviceStageAtomics::copy_row(c.dst, c.src, c.bytes, 0, 1);
  }
#endif
}

// The placeholders leave (unplace_one over every id), then the stored rows in of the records without a stash row,
// in order (their victims left in move_out_kernel; a placeholder's slot receives no row).
__global__ void __launch_bounds__(kStageBlock) move_in_unplace_kernel(StageParams p) {
  if (p.gate != nullptr && *p.gate == 0) return;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kStageBlock + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kStageBlock;
  for (int64_t i = tid; i < p.n; i += stride) unplace_one<DeviceStageAtomics>(p, i);
  const int64_t stashed = p.move_split[0], end = p.move_split[1];
  if (stashed == *p.move_count) return;  // (every record's stored row came in with the mixed pass)
  const int lane = threadIdx.x % kMoveLanes;
  for (int64_t k = tid / kMoveLanes; k < end; k += stride / kMoveLanes) {
    const int32_t e = p.move_order[k];
    if ((e & 1) != 0 && (e >> 1) >= stashed) move_in_one<DeviceStageAtomics>(p, e >> 1, lane, kMoveLanes);
  }
}

}  // namespace detail

// Lab variants of the staging (private op _lookup_lab_stage, docs/dynamicemb_storage_notes.md, "The cold step
// kernel by kernel" and "The move pass by the bulk copy engine"): 0 the default (8 lanes per id, light fences), 1
// sequentially consistent fences, 2 the default with kLate, 3 / 4 kLate with 16 / 32 lanes per id, 5 the default
// with kTtas, 6 with kLate and kTtas; the mixed move pass: 7 its loads hinted L2::256B, 8 by bulk copies (TMA);
// 9 the locked pass with kSpread, 10 with kFusedFind, 11 the locked pass alone (the staging before the bucket owners),
// 12 with kEarly; dev builds: 13-15 (timing what-ifs) a prefetch job's moves beside its step
// (launch_cache_stage_split), 14 / 15 the mixed pass in 32 / 16 blocks. Variants 1-12 stage with the locked pass
// alone; 0, the default, lists the misses by bucket first (stage_list_kernel, stage_owner_kernel) and runs the
// locked pass only over what the owners did not list.
namespace {
int g_stage_variant = 0;

template <int kLanes, bool kLight, bool kLate, bool kTtas = false, bool kSpread = false, bool kFused = false,
          bool kEarly = false, bool kRest = false>
void launch_stage_pass(const StageParams& p, unsigned grid, cudaStream_t st, const int32_t* rest = nullptr) {
  // (the blocks resident at once, one wave of warps striding over the ids)
  static const unsigned cap = static_cast<unsigned>(persistent_blocks(resident_per_sm(
      detail::stage_kernel<kLanes, kLight, kLate, kTtas, kSpread, kFused, kEarly, kRest>, detail::kStageBlock)));
  detail::stage_kernel<kLanes, kLight, kLate, kTtas, kSpread, kFused, kEarly, kRest>
      <<<grid < cap ? grid : cap, detail::kStageBlock, 0, st>>>(p, rest);
}

// The default staging pass: the misses listed by cache bucket, the bucket owners, then the locked pass over what they
// left (the owners' scratch: StageParams own_cnt / own_list; without it, the locked pass alone).
void launch_owner_pass(const StageParams& p, unsigned grid, cudaStream_t st) {
  if (p.own_cnt == nullptr || p.own_list == nullptr || p.n >= (int64_t(1) << 31)) {
    launch_stage_pass<detail::kStageLanes, true, false>(p, grid, st);
    return;
  }
  detail::OwnerScratch o{};
  o.bins = static_cast<int64_t>(p.num_tables) * p.bins_per_table;
  o.cnt = p.own_cnt;
  o.rest = p.own_cnt + o.bins;
  o.list = p.own_list;
  const unsigned lcap = static_cast<unsigned>(persistent_blocks(2048 / detail::kStageBlock));
  detail::stage_list_kernel<<<grid < lcap ? grid : lcap, detail::kStageBlock, 0, st>>>(p, o);
  detail::stage_owner_kernel<<<blocks_for(o.bins * 32, detail::kStageBlock), detail::kStageBlock, 0, st>>>(p, o);
  launch_stage_pass<detail::kStageLanes, true, false, false, false, false, false, true>(p, grid, st, o.rest);
}

}  // namespace

int lab_stage_variants();

int set_stage_variant(int v) {
  const int old = g_stage_variant;
  if (v >= 0 && v < lab_stage_variants()) g_stage_variant = v;
  return old;
}

namespace {
// The copies' order and the move passes (stash, mixed, in + unplace) on `st`; `mixed_cap` > 0 caps the mixed
// pass's grid (lab 14 / 15).
void launch_moves(const StageParams& p, cudaStream_t st, unsigned mixed_cap) {
  const unsigned grid = blocks_for(p.n, detail::kStageBlock);
  const unsigned cap = static_cast<unsigned>(persistent_blocks(2048 / detail::kStageBlock));
  const unsigned sgrid = grid < cap ? grid : cap;
  detail::move_scan_kernel<<<1, detail::kScanThreads, 0, st>>>(p);
  check_launch("cache move scan");
  detail::move_scatter_kernel<<<sgrid, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move scatter");
  // The move passes: 2 blocks per SM (8.4K rows in flight on 132 SMs, far beyond the link's ~0.5 MB of bytes in
  // flight; the host pages' translations bound them, not the threads: the same ms as 1, 4 or 8 blocks per SM
  // and 4-32 lanes per row, H200), so half of every SM stays free for the step running beside a prefetch's moves.
  const unsigned mgrid = blocks_for(p.n * detail::kMoveLanes, detail::kStageBlock);
  const unsigned mcap = static_cast<unsigned>(persistent_blocks(detail::kMoveBlocksPerSm));
  const unsigned mg = mgrid < mcap ? mgrid : mcap;
  detail::move_stash_kernel<<<mg, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move stash");
  if (g_stage_variant == 7) {
    detail::move_out_kernel<detail::DeviceStageAtomicsWide><<<mg, detail::kStageBlock, 0, st>>>(p);
  } else if (g_stage_variant == 8) {
    static const unsigned bcap = static_cast<unsigned>(persistent_blocks(detail::kBulkBlocksPerSm));
    const unsigned bgrid = blocks_for(2 * p.n, 1);
    detail::move_bulk_kernel<<<bgrid < bcap ? bgrid : bcap, 32, 0, st>>>(p);
  } else {
    const unsigned og = mixed_cap > 0 && mixed_cap < mg ? mixed_cap : mg;
    detail::move_out_kernel<<<og, detail::kStageBlock, 0, st>>>(p);
  }
  check_launch("cache move out");
  detail::move_in_unplace_kernel<<<mg, detail::kStageBlock, 0, st>>>(p);
  check_launch("cache move in, unplace");
}

void launch_stage_only(const CacheProbeParams& probe, const StageParams& p, cudaStream_t st) {
  launch_cache_probe(probe, st);
  if (p.n <= 0) return;
  const unsigned grid = blocks_for(p.n, detail::kStageBlock);
  switch (g_stage_variant) {
    case 1: launch_stage_pass<detail::kStageLanes, false, false>(p, grid, st); break;
    case 2: launch_stage_pass<detail::kStageLanes, true, true>(p, grid, st); break;
    case 3: launch_stage_pass<16, true, true>(p, grid, st); break;
    case 4: launch_stage_pass<32, true, true>(p, grid, st); break;
    case 5: launch_stage_pass<detail::kStageLanes, true, false, true>(p, grid, st); break;
    case 6: launch_stage_pass<detail::kStageLanes, true, true, true>(p, grid, st); break;
    case 9: launch_stage_pass<detail::kStageLanes, true, false, false, true>(p, grid, st); break;
    case 10: launch_stage_pass<detail::kStageLanes, true, false, false, false, true>(p, grid, st); break;
    case 11: launch_stage_pass<detail::kStageLanes, true, false>(p, grid, st); break;
    case 12: launch_stage_pass<detail::kStageLanes, true, false, false, false, false, true>(p, grid, st); break;
    default: launch_owner_pass(p, grid, st); break;
  }
  check_launch("cache stage");
}

#ifdef HSTU_DEV_VARIANTS
// Lab 13-15 (dev builds, `--define hstu_dev=1`; timing what-ifs, docs/dynamicemb_storage_notes.md "Issue 32
// against the code, and the moves beside the step"): a prefetch job's moves on a stream of their own, so that the
// job ends (for its step) with its staging and the step runs beside its moves; the next split job waits for them.
// The step reads its rows before they arrive: rows are lost. 14 / 15: the mixed pass in 32 / 16 blocks.
struct LabSplit {
  cudaStream_t ms = nullptr;
  cudaEvent_t staged = nullptr, moved = nullptr;
  bool any = false;
};
bool g_lab_split_any = false;  // a split job ran in this process (its moves may be in flight)
LabSplit& lab_split() {
  static LabSplit* s = [] {
    auto* x = new LabSplit;
    cudaStreamCreateWithFlags(&x->ms, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&x->staged, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&x->moved, cudaEventDisableTiming);
    return x;
  }();
  return *s;
}
constexpr int kLabSplitVariants = 3;
#else
constexpr int kLabSplitVariants = 0;
#endif

}  // namespace

int lab_stage_variants() { return kStageVariants + kLabSplitVariants; }

#ifdef HSTU_DEV_VARIANTS
bool lab_split_moves() { return g_stage_variant >= 13 && g_stage_variant <= 15; }

void launch_cache_stage_split(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  LabSplit& s = lab_split();
  if (s.any) cudaStreamWaitEvent(st, s.moved, 0);
  launch_stage_only(probe, p, st);
  if (p.n > 0) {
    cudaEventRecord(s.staged, st);
    cudaStreamWaitEvent(s.ms, s.staged, 0);
    launch_moves(p, s.ms, g_stage_variant == 14 ? 32u : (g_stage_variant == 15 ? 16u : 0u));
    cudaEventRecord(s.moved, s.ms);
    s.any = g_lab_split_any = true;
  }
  if (report) launch_report_stage(p.first_fail, stream);
}
#endif

void launch_cache_stage(const CacheProbeParams& probe, const StageParams& p, bool report, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
#ifdef HSTU_DEV_VARIANTS
  // (lab: after a switch back from 13-15, no staging beside the last split job's moves)
  if (g_lab_split_any && !lab_split_moves()) cudaStreamWaitEvent(st, lab_split().moved, 0);
#endif
  launch_stage_only(probe, p, st);
  if (p.n > 0) launch_moves(p, st, 0);
  if (report) launch_report_stage(p.first_fail, stream);
}

}  // namespace lookup
}  // namespace dynamicemb
