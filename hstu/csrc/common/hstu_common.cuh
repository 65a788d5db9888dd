// Device helpers shared by the HSTU forward and backward kernels: mma.sync / ldmatrix / cp.async wrappers,
// the swizzled shared-memory tile layout, and the mask (one definition, used per element and per tile).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

// ---------------------------------------------------------------------------------------------------------------
// Tensor-core and copy primitives (sm80+).

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16-byte async copy global -> shared of the first src_bytes (0-16) at gptr; the rest of the 16 bytes zero-filled.
__device__ __forceinline__ void cp_async_16_n(uint32_t smem_addr, const void* gptr, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gptr), "r"(src_bytes));
}
// 16-byte async copy global -> shared; zero-fills the destination when `pred` is false.
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gptr, bool pred) {
  cp_async_16_n(smem_addr, gptr, pred ? 16 : 0);
}
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gptr) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr), "l"(gptr));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// 32-bit / 128-bit shared loads, volatile (kept in order with the other volatile asm, e.g. after a cp.async wait;
// no memory clobber, so ordinary loads and stores may move around them).
__device__ __forceinline__ uint32_t lds_b32(uint32_t addr) {
  uint32_t x;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x) : "r"(addr));
  return x;
}
__device__ __forceinline__ uint4 lds_b128(uint32_t addr) {
  uint4 x;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(addr));
  return x;
}

// Returns x unchanged, but hides it from the optimizer: applied to smem base addresses at the top of a main-loop
// iteration, it stops loop-invariant code motion from hoisting dozens of per-thread ldmatrix addresses out of the
// loop into registers (which otherwise spills at D = 128).
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  uint32_t y;
  asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// GPU-scope ordered 32-bit global accesses between CTAs or grids (flags, counters); the int forms are the same
// instructions on the word's bits.
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_relaxed_gpu(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(uint32_t* ptr, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(ptr), "r"(v) : "memory");
}
__device__ __forceinline__ void red_release_add_gpu(uint32_t* ptr, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(ptr), "r"(v) : "memory");
}
// atom.add with acquire and release semantics; returns the old value.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* ptr, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(ptr), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ int ld_acquire_gpu(const int* ptr) {
  return static_cast<int>(ld_acquire_gpu(reinterpret_cast<const uint32_t*>(ptr)));
}
__device__ __forceinline__ int ld_relaxed_gpu(const int* ptr) {
  return static_cast<int>(ld_relaxed_gpu(reinterpret_cast<const uint32_t*>(ptr)));
}
__device__ __forceinline__ void st_release_gpu(int* ptr, int v) {
  st_release_gpu(reinterpret_cast<uint32_t*>(ptr), static_cast<uint32_t>(v));
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}
// pack2's inverse: the low / high 16-bit half of a packed pair as a float (exact)
template <typename T>
__device__ __forceinline__ float unpack_lo(uint32_t v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xffffu)));
  } else {
    return __uint_as_float(v << 16);
  }
}
template <typename T>
__device__ __forceinline__ float unpack_hi(uint32_t v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
  } else {
    return __uint_as_float(v & 0xffff0000u);
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return __bfloat162float(x);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

// sigmoid with the fast exp and an approximate reciprocal (2 MUFU ops); exact enough for fp16/bf16 outputs.
__device__ __forceinline__ float fast_sigmoid(float s) { return __fdividef(1.0f, 1.0f + __expf(-s)); }

// tanh on the MUFU pipe: ONE special-function op (sm75+), max relative error ~2^-11.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// SiLU(s) from h = s / 2: sigmoid(s) = (1 + tanh(h)) / 2, so s * sigmoid(s) = h + h * tanh(h) (1 MUFU + 1 FMA).
__device__ __forceinline__ float silu_from_half(float h) { return fmaf(h, tanh_approx(h), h); }

// if (pred) dq_accum[addr .. addr+1] += (x, y): one vector reduction on sm90, two scalar ones elsewhere; the
// predicate goes into the instruction (no divergent branch around each reduction).
__device__ __forceinline__ void atomic_add_f2(float* addr, float x, float y, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p red.global.add.v2.f32 [%0], {%1, %2};\n}\n" ::"l"(addr),
      "f"(x), "f"(y), "r"(static_cast<int>(pred))
      : "memory");
#else
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p red.global.add.f32 [%0], %1;\n @p red.global.add.f32 [%0+4], %2;\n}\n" ::"l"(
          addr),
      "f"(x), "f"(y), "r"(static_cast<int>(pred))
      : "memory");
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Shared-memory tile of ROWS x D 16-bit elements, stored in 16-byte chunks with an XOR swizzle so that ldmatrix
// (8 rows x 16 bytes at the same logical chunk) and cp.async stores hit distinct banks.
template <int D>
struct SmemLayout {
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static_assert(kChunks >= 4, "head dim must be >= 32");
  // Byte offset of element (r, col) (col a multiple of 8 or inside one chunk). The swizzle XORs the chunk index
  // with bits of the row, so it is linear over XOR: swz(r1 ^ r2, c1 ^ c2) == swz(r1, c1) ^ swz(r2, c2) when the
  // parts are disjoint bit fields. Addresses are formed as base + (per_thread ^ compile_time_constant).
  __host__ __device__ __forceinline__ static constexpr uint32_t swz(int r, int col) {
    const uint32_t lin = static_cast<uint32_t>(r * D + col);
    const uint32_t rbits = static_cast<uint32_t>(r);
    const uint32_t x = kChunks >= 8 ? (rbits & 7u) : ((rbits >> 1) & 3u);
    return (lin ^ (x << 3)) * 2u;
  }
  __device__ __forceinline__ static uint32_t offset(int r, int c) { return swz(r, c * 8); }

  // t ^ swz(r, col) for a compile-time (r, col), written as (t ^ lo) + hi: only the low chunk bits that the
  // swizzle touches need the XOR, the rest is an add that folds into the ldmatrix immediate offset (one LOP3
  // per distinct `lo` instead of one per address). Valid when t (a per-thread address from swz) has no bits in
  // `hi`: r a multiple of 16 above t's row bits, and t's column inside the first 8 chunks (64 elements).
  static constexpr uint32_t kLoMask = (kChunks >= 8 ? 7u : 3u) << 4;
  __device__ __forceinline__ static uint32_t xadd(uint32_t t, int r, int col) {
    const uint32_t c = swz(r, col);
    return (t ^ (c & kLoMask)) + (c & ~kLoMask);
  }
};

// Copy rows [0, ROWS) x D of a (rows, row_stride) global tile into a swizzled smem tile; rows >= valid_rows are
// zero-filled. All NTHREADS threads take part; thread t copies chunk t % C of rows t / C + i * (NTHREADS / C).
// kSplitInterior: interior tiles (valid_rows >= ROWS, uniform) take a copy path without per-row predicates
// (forward K/V: -4% time at D = 128); off where the extra code path costs registers (backward: spills on sm_80).
template <int ROWS, int D, int NTHREADS, bool kSplitInterior = false, typename T>
__device__ __forceinline__ void load_tile_async(uint32_t smem_base, const T* gbase, int64_t row_stride,
                                                int valid_rows, uint32_t tid) {
  constexpr int kChunks = D / 8;
  static_assert(NTHREADS % kChunks == 0, "threads must cover whole rows");
  constexpr int kRowsPerIter = NTHREADS / kChunks;
  static_assert(ROWS % kRowsPerIter == 0, "rows must be a multiple of the rows per iteration");
  const int r_t = static_cast<int>(tid) / kChunks;
  const int c_t = static_cast<int>(tid) % kChunks;
  const uint32_t s_t = SmemLayout<D>::swz(r_t, c_t * 8);
  const T* g_t = gbase + r_t * row_stride + c_t * 8;
  const int64_t g_step = kRowsPerIter * row_stride;
  if (kSplitInterior && valid_rows >= ROWS) {  // interior tile (uniform): no per-row predicates
#pragma unroll
    for (int it = 0; it < ROWS / kRowsPerIter; ++it) {
      cp_async_16(smem_base + (s_t ^ SmemLayout<D>::swz(it * kRowsPerIter, 0)), g_t + it * g_step);
    }
  } else {
#pragma unroll
    for (int it = 0; it < ROWS / kRowsPerIter; ++it) {
      const bool pred = r_t + it * kRowsPerIter < valid_rows;
      cp_async_16(smem_base + (s_t ^ SmemLayout<D>::swz(it * kRowsPerIter, 0)), pred ? g_t + it * g_step : gbase,
                  pred);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The mask of one sequence, exactly the rules of `hstu_mask` in hstu/_reference.py (the normative definition).
// Positions are key positions: query row i sits at r = i + (Lk - Lq). With hist = Lk - num_targets, a key position
// x >= hist is a target of group (x - hist) / g, and its time position is tpos(x) = hist + (x - hist) % g
// (tpos(x) = x for history). allowed(r, j) = (window(tpos(r), tpos(j)) and (j < hist or r, j in one target
// group)) or (r < num_contexts and j < hist).
// gr (mask_convention="meta_gr"): the window compares time positions clamped below at ctx - 1, i.e. the ctx context
// positions collapsed into one (hstu_mask's wpos, shifted by ctx - 1); with contexts inside the history only the
// left test changes. The GR mask contains the NVIDIA one, so the full-tile tests below stay valid; key_range /
// row_range widen for it.
struct SeqMask {
  int lk;      // keys used
  int offset;  // Lk - Lq
  int hist;    // Lk - num_targets
  int ctx;     // num_contexts
  int group;   // target_group_size
  int wl, wr;  // window, -1 = unlimited
  int gr;      // HstuParams::mask_gr: 1 = Meta GR's window rule

  // The GR rule can differ from the NVIDIA one here (contexts and a left window; contexts are validated to lie in
  // the history and need wr == 0): the kernels' no-target fast paths, which encode the NVIDIA rule, take allowed().
  __device__ __forceinline__ bool gr_window() const { return gr && ctx > 0 && wl >= 0; }

  __device__ __forceinline__ bool allowed(int r, int j) const {
    if (j >= lk || r >= lk) return false;
    if (r < ctx && j < hist) return true;
    const bool jt = j >= hist;
    const bool rt = r >= hist;
    if (jt && (!rt || (r - hist) / group != (j - hist) / group)) return false;
    const int ti = rt ? hist + (r - hist) % group : r;
    const int tj = jt ? hist + (j - hist) % group : j;
    // GR: max(tj, ctx - 1) >= max(ti, ctx - 1) - wl, i.e. also every key when ti - wl <= ctx - 1; its right test
    // is the NVIDIA one for contexts inside the history (validated): rows at ti < ctx - 1 are context rows.
    return (wl < 0 || tj >= ti - wl || (gr && ti - wl < ctx)) && (wr < 0 || tj <= ti + wr);
  }

  // The keys row position r sees, as two intervals: allowed(r, j) == (hlo <= j < hhi || tlo <= j < thi) for every
  // key j >= 0 (positions and window sizes below 2^30): its history keys [hlo, hhi) (hhi <= hist) and its target
  // group's keys [tlo, thi) (empty for a history row). The element rule's divisions by the group size once per row
  // instead of per element. For a target row, tpos(j) - tpos(r) = j - r inside its group, so the window is j - r.
  __device__ __forceinline__ void row_keys(int r, int& hlo, int& hhi, int& tlo, int& thi) const {
    hlo = hhi = tlo = thi = 0;
    if (r >= lk) return;
    const bool rt = r >= hist;
    const int g_off = rt ? (r - hist) % group : 0;  // r's place in its target group
    const int ti = rt ? hist + g_off : r;  // tpos(r)
    const bool open_left = wl < 0 || (gr && ti - wl < ctx);
    const int kend = min(hist, lk);
    if (r < ctx) {
      hlo = INT_MIN;
      hhi = kend;
    } else {
      hlo = open_left ? INT_MIN : ti - wl;
      hhi = (wr < 0 || wr >= kend - ti) ? kend : ti + wr + 1;
    }
    if (rt) {
      const int g0 = r - g_off;  // r's group: keys [g0, g0 + group)
      tlo = open_left ? g0 : max(g0, r - wl);
      thi = group >= lk - g0 ? lk : g0 + group;
      if (wr >= 0 && wr < thi - r) thi = r + wr + 1;
    }
  }

  // The two parts of the keys that rows with positions [r0, r1) (r1 <= lk) can possibly see (conservative): history
  // keys [hb, he) (contexts, window) and target keys [tb, te) (the groups of the target rows); a part is empty when
  // its end is <= its begin. Between them lie the other groups' targets, masked for every row.
  __device__ __forceinline__ void key_parts(int r0, int r1, int& hb, int& he, int& tb, int& te) const {
    // History keys: time positions of the rows lie in [tmin, tmax] (tpos(x) <= x).
    const int tmin = r0 < hist ? r0 : hist;
    const int tmax = r1 - 1 < hist ? r1 - 1 : min(r1 - 1, hist + group - 1);
    hb = (wl < 0) ? 0 : max(0, tmin - wl);
    if (gr && tmin - wl < ctx) hb = 0;  // GR: tmin - wl <= ctx - 1 reaches the collapsed contexts: from key 0
    he = (wr < 0) ? hist : min(hist, tmax + wr + 1);
    if (r0 < ctx) {
      hb = 0;
      he = hist;
    }
    // Target keys: the groups of the target rows.
    tb = lk;
    te = hist;
    if (r1 > hist) {
      const int rfirst = max(r0, hist);
      tb = hist + ((rfirst - hist) / group) * group;
      te = min(lk, hist + ((r1 - 1 - hist) / group + 1) * group);
    }
  }

  // Key range [begin, end) that rows with positions [r0, r1) (r1 <= lk) can possibly see (conservative): the hull
  // of key_parts.
  __device__ __forceinline__ void key_range(int r0, int r1, int& begin, int& end) const {
    int hb, he, tb, te;
    key_parts(r0, r1, hb, he, tb, te);
    if (he <= hb) {
      begin = tb;
      end = te;
    } else if (te <= tb) {
      begin = hb;
      end = he;
    } else {
      begin = min(hb, tb);
      end = max(he, te);
    }
  }

  // Key tiles [nb_begin, nb_end) of bn keys that `rows` rows starting at position r0 must visit: key_range clipped
  // to the used keys [0, lk); (0, 0) when rows <= 0 or every key is masked.
  __device__ __forceinline__ void key_tiles(int r0, int rows, int bn, int& nb_begin, int& nb_end) const {
    nb_begin = 0;
    nb_end = 0;
    if (rows <= 0) return;
    int kb, ke;
    key_range(r0, r0 + rows, kb, ke);
    kb = max(kb, 0);
    ke = min(ke, lk);
    if (ke > kb) {
      nb_begin = kb / bn;
      nb_end = (ke + bn - 1) / bn;
    }
  }

  // key_tiles less the gap between the two parts of key_parts: the tiles [gap_begin, gap_end) lie wholly between
  // the history part and the target part, every key in them masked for every row (a tile of candidates would walk
  // the other groups' targets); gap_begin == gap_end: none. When not empty, tiles of both parts lie on either side
  // (nb_begin < gap_begin < gap_end < nb_end).
  __device__ __forceinline__ void key_tiles(int r0, int rows, int bn, int& nb_begin, int& nb_end, int& gap_begin,
                                            int& gap_end) const {
    key_tiles(r0, rows, bn, nb_begin, nb_end);
    gap_begin = 0;
    gap_end = 0;
    if (rows <= 0) return;
    int hb, he, tb, te;
    key_parts(r0, r0 + rows, hb, he, tb, te);
    if (he > hb && te > tb && tb > he) {  // (te <= lk, he <= hist: both parts lie inside [0, lk))
      const int g0 = (he + bn - 1) / bn, g1 = tb / bn;
      if (g1 > g0) {
        gap_begin = g0;
        gap_end = g1;
      }
    }
  }

  // Row positions [begin, end) that can possibly see keys [j0, j1) (conservative). ctx_rows = false leaves out the
  // rows that see the keys only as context rows (bwd_work_tiles' gap; the GR window still counts the contexts).
  __device__ __forceinline__ void row_range(int j0, int j1, int& begin, int& end, bool ctx_rows = true) const {
    begin = lk;
    end = 0;
    if (j0 < hist) {  // history keys
      int jh1 = min(j1, hist);
      if (gr) jh1 = max(jh1, ctx);  // GR: keys below ctx sit at ctx - 1 for the window (the rows' left bound)
      int rb = (wr < 0) ? 0 : max(0, j0 - wr);
      int re = (wl < 0) ? lk : min(lk, jh1 + wl);
      if (hist < lk && (wl < 0 || jh1 - 1 + wl >= hist)) re = lk;  // target rows sit at tpos >= hist
      if (ctx_rows && ctx > 0) {
        rb = 0;
        re = max(re, min(ctx, lk));
      }
      begin = min(begin, rb);
      end = max(end, re);
    }
    if (j1 > hist) {  // target keys: rows of the same groups
      const int jt0 = max(j0, hist);
      begin = min(begin, hist + ((jt0 - hist) / group) * group);
      end = max(end, min(lk, hist + ((j1 - 1 - hist) / group + 1) * group));
    }
  }

  // tile_full, and also true for target rows inside the used keys and history keys when no left window can hide
  // one (target rows' time positions are >= hist, so a right window never does): with targets, the tiles of the
  // target rows against the history would otherwise take the per-element group rule. Used where registers allow
  // (the Hopper kernels at D <= 128; at D = 256 the extra live fields spill).
  __device__ __forceinline__ bool tile_full_targets(int r0, int r1, int j0, int j1) const {
    if (j1 <= hist && r1 > hist) return r0 >= hist && r1 <= lk && wl < 0;
    return tile_full(r0, r1, j0, j1);
  }

  // Tiles [j0, j0 + bn) with lo <= j0 <= hi are exactly those for which tile_full(r0, r1, j0, j0 + bn) holds
  // (an empty range is lo > hi): two integers replace the mask fields inside the main loops.
  __device__ __forceinline__ void full_tiles(int r0, int r1, int bn, int& lo, int& hi) const {
    lo = 1;
    hi = 0;
    if (r1 > hist) return;
    if (r1 <= ctx) {
      lo = INT_MIN;
      hi = hist - bn;
      return;
    }
    if (r0 < ctx) return;
    lo = wl < 0 ? INT_MIN : r1 - 1 - wl;
    hi = min(hist - bn, wr < 0 ? INT_MAX : r0 + wr - bn + 1);
  }

  // True when every (r, j) with r in [r0, r1), j in [j0, j1) is allowed (then the per-element mask is skipped).
  __device__ __forceinline__ bool tile_full(int r0, int r1, int j0, int j1) const {
    if (j1 > hist || r1 > hist) return false;  // targets, or positions past the keys: use the element mask
    if (r1 <= ctx) return true;
    if (r0 < ctx) return false;
    if (wl >= 0 && j0 < r1 - 1 - wl) return false;
    if (wr >= 0 && j1 - 1 > r0 + wr) return false;
    return true;
  }
};

// The forwards' target path (Hopper fwd_silu_mask, hstu_fwd_sm90_tiles.cuh; sm80-class hstu_fwd_kernel): sets bit
// e % 32 of bits[e / 32] for this thread's accumulator elements e = 4 c + 2 half + odd (row `half`, key jj + 8 c +
// odd, c < BN / 8; jj = n0 + 2 (lane % 4): the m16n8 / wgmma accumulator layout) whose key lies in [lo, hi) (any
// ints); with SeqMask::row_keys' two intervals per row, the bits of allowed(r, j).
template <int BN>
__device__ __forceinline__ void fwd_key_interval_bits(uint32_t (&bits)[(BN + 63) / 64], int jj, int half, int lo,
                                                      int hi) {
  lo = max(lo, jj);  // (then lo - jj >= 0 and hi - jj <= BN: no overflow below)
  hi = min(hi, jj + BN);
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) {
    // keys jj + 8 c + odd in [lo, hi): c in [cb, ce) (ceil(x / 8) = (x + 7) >> 3, an arithmetic shift)
    const int cb = min((lo - jj - odd + 7) >> 3, BN / 8);
    const int ce = max(cb, (hi - jj - odd + 7) >> 3);
#pragma unroll
    for (int w = 0; w < (BN + 63) / 64; ++w) {  // word w holds c in [8 w, 8 w + 8), 4 bits each
      const int b0 = 4 * min(max(cb - 8 * w, 0), 8), b1 = 4 * min(max(ce - 8 * w, 0), 8);
      const uint32_t span = static_cast<uint32_t>((1ull << b1) - (1ull << b0));
      bits[w] |= span & (0x11111111u << (2 * half + odd));
    }
  }
}

struct SeqInfo {
  int q_start, k_start;  // first token of the sequence
  int lq_alloc, lk_alloc;  // rows present in the tensors (cu_seqlens)
  int lq, lk;              // rows used (seqused, else cu_seqlens)
  SeqMask mask;
};

__device__ __forceinline__ SeqInfo seq_info(const HstuParams& p, int b) {
  SeqInfo s;
  s.q_start = p.cu_seqlens_q[b];
  s.k_start = p.cu_seqlens_k[b];
  s.lq_alloc = p.cu_seqlens_q[b + 1] - s.q_start;
  s.lk_alloc = p.cu_seqlens_k[b + 1] - s.k_start;
  s.lq = p.seqused_q ? min(p.seqused_q[b], s.lq_alloc) : s.lq_alloc;
  s.lk = p.seqused_k ? min(p.seqused_k[b], s.lk_alloc) : s.lk_alloc;
  const int nt = p.num_targets ? p.num_targets[b] : 0;
  s.mask.lk = s.lk;
  s.mask.offset = s.lk - s.lq;
  s.mask.hist = s.lk - nt;
  s.mask.ctx = p.num_contexts ? p.num_contexts[b] : 0;
  s.mask.group = p.target_group_size > 0 ? p.target_group_size : 1;
  s.mask.wl = p.window_left;
  s.mask.wr = p.window_right;
  s.mask.gr = p.mask_gr;
  return s;
}

// Query tiles of the work of key block n0 (BN keys from n0) of sequence si: [mb_begin, mb_begin + n_a) then
// [mb_begin + n_a + gap, ...), n_mt tiles in all (0: no query sees the keys). Contexts: context rows see every
// history key, so row_range starts at the first query tile for every history key block, and the tiles between the
// context rows and the rows the keys reach without them are fully masked: they are skipped with kSkipGap (the
// Hopper backward but for D = 256 with rab, where the skip made the kernel spill more: it walks them). Shared by
// the backward kernels and the Hopper work list's planner (BwdPlanUnits).
template <int BM, int BN, bool kSkipGap>
__device__ __forceinline__ void bwd_work_tiles(const SeqInfo& si, int n0, int& mb_begin, int& n_a, int& gap,
                                               int& n_mt) {
  const SeqMask& mk = si.mask;
  const int keys_used = max(0, min(BN, si.lk - n0));
  mb_begin = 0;
  int mb_end = 0;
  if (keys_used > 0 && si.lq > 0) {
    int rb, re;
    mk.row_range(n0, n0 + keys_used, rb, re);
    const int ib = max(0, rb - mk.offset);
    const int ie = min(si.lq, re - mk.offset);
    if (ie > ib) {
      mb_begin = ib / BM;
      mb_end = (ie + BM - 1) / BM;
    }
  }
  int a_end = mb_end;
  gap = 0;
  if constexpr (kSkipGap) {
    if (mk.ctx > 0 && mb_end > mb_begin) {
      int rb, re;
      mk.row_range(n0, n0 + keys_used, rb, re, /*ctx_rows=*/false);
      const int ic = min(si.lq, mk.ctx - mk.offset);  // context rows: query indices below ic
      const int t_ctx = ic > 0 ? (ic + BM - 1) / BM : 0;  // tiles holding context rows end here
      const int t_b = re > rb ? min(mb_end, max(0, rb - mk.offset) / BM) : mb_end;
      if (t_ctx > mb_begin && t_b > t_ctx) {
        a_end = t_ctx;
        gap = t_b - t_ctx;
      }
    }
  }
  n_mt = mb_end - mb_begin - gap;
  n_a = a_end - mb_begin;
}

}  // namespace hstu
