// The fused optimizers on the device, written once for both backward paths: the per-unique update pass after the
// atomic scatter (update_kernels.cu) and the segmented apply (segment_kernels.cu). A warp holds one row; each lane
// N consecutive columns of the embedding `w` and of its state by optimizer (s1: Adagrad's sum / Adam's m; s2:
// Adam's v; RowWiseAdagrad keeps one scalar per row). Here is the arithmetic only: the callers load and store
// the row and decide which rows are skipped. The torch path (_optimizers.py) computes the same.
#pragma once

#include <cmath>

#include "dynamicemb/csrc/lookup/lookup_common.cuh"

namespace dynamicemb {
namespace lookup {

// Constants of a step, read once per thread (the kernels write neither lr nor step). updates: false for a pass
// that only sums norms (no Adam step size needed).
struct OptConst {
  float lr, step_size, one_m_b1, one_m_b2;
  uint32_t step;  // Adam: the step count this update applies (the bf16 moments' rounding key)
};
__device__ __forceinline__ OptConst opt_const(const BackwardParams& p, bool updates = true) {
  OptConst o;
  o.lr = *p.lr;
  o.step_size = 0.f;
  o.step = 0;
  if (p.opt == kAdam && updates) {
    const double t = static_cast<double>(*p.step);
    o.step = static_cast<uint32_t>(t);
    const double bc1 = 1.0 - pow(p.beta1, t);
    const double bc2 = 1.0 - pow(p.beta2, t);
    o.step_size = static_cast<float>(static_cast<double>(o.lr) * sqrt(bc2) / bc1);
  }
  o.one_m_b1 = static_cast<float>(1.0 - p.beta1);
  o.one_m_b2 = static_cast<float>(1.0 - p.beta2);
  return o;
}

// Clipping of one element of a row's summed gradient: by value (max_value > 0), then times `scale` (global-norm
// clipping; 1 without). The non-finite policy judges the gradient before clipping.
__device__ __forceinline__ float clip_grad(float v, float max_value, float scale) {
  if (max_value > 0.f) v = fminf(fmaxf(v, -max_value), max_value);
  return v * scale;
}

// Whether every lane's N elements (those with `on`) are finite (warp-uniform call).
template <int N>
__device__ __forceinline__ bool row_finite(const float (&g)[N], bool on) {
  bool ok = true;
  if (on) {
#pragma unroll
    for (int e = 0; e < N; ++e) ok = ok && isfinite(g[e]);
  }
  return __all_sync(0xffffffffu, ok);
}

// A row skipped by the non-finite policy is counted once (nonfinite_count[0], by lane 0).
__device__ __forceinline__ void count_skipped_row(int64_t* nonfinite_count, int lane) {
  if (lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(nonfinite_count), 1ull);
}

// RowWiseAdagrad with weight decay: the row-wise state sees the decayed gradient (as the dense optimizer), so the
// lane's squares are taken of g + wd w (added to `sq`).
template <int N>
__device__ __forceinline__ void decayed_sq(const float (&g)[N], const float (&w)[N], float wd, float& sq) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float gv = g[e] + wd * w[e];
    sq += gv * gv;
  }
}

// RowWiseAdagrad's state after this step: the old state plus the mean square of the row's gradient (row_sq: the
// warp's sum of squares over the row's d columns).
__device__ __forceinline__ float rowwise_state(float old, float row_sq, int d) {
  return old + row_sq / static_cast<float>(d);
}

// The update of one lane's N columns by optimizer `opt` (OptKind; pass a constant, or a value known inside the
// caller's branch, so the other branches fold away): w, s1 and s2 in place. rs: RowWiseAdagrad's state after this
// step (rowwise_state).
template <int N>
__device__ __forceinline__ void opt_update(int opt, const BackwardParams& p, const OptConst& oc, const float (&g)[N],
                                           float (&w)[N], float (&s1)[N], float (&s2)[N], float rs) {
  const float lr = oc.lr;
  if (opt == kSgd) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      float gv = g[e];
      if (p.weight_decay != 0.f) gv = gv + p.weight_decay * w[e];
      w[e] = w[e] - lr * gv;
    }
  } else if (opt == kAdagrad || opt == kRowWiseAdagrad) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      float gv = g[e];
      if (p.weight_decay != 0.f) gv = gv + p.weight_decay * w[e];
      float acc;
      if (opt == kAdagrad) {
        s1[e] = s1[e] + gv * gv;
        acc = s1[e];
      } else {
        acc = rs;
      }
      w[e] = w[e] - lr * gv / (sqrtf(acc) + p.eps);
    }
  } else {  // Adam
#pragma unroll
    for (int e = 0; e < N; ++e) {
      float gv = g[e];
      if (p.decoupled_weight_decay) {
        if (p.weight_decay != 0.f) w[e] = w[e] * (1.f - lr * p.weight_decay);
      } else if (p.weight_decay != 0.f) {
        gv = gv + p.weight_decay * w[e];
      }
      s1[e] = s1[e] + (gv - s1[e]) * oc.one_m_b1;
      s2[e] = s2[e] + (gv * gv - s2[e]) * oc.one_m_b2;
      w[e] = w[e] - oc.step_size * (s1[e] / (sqrtf(s2[e]) + p.eps));
    }
  }
}

// Adam's moments in bf16 (BackwardParams::state_bf16, fp32 rows): a row's dim state words hold m (dim bf16 values),
// then v (dim bf16); 1,024 bytes a row at dim 128 instead of 1,536. The update computes in fp32 and rounds m and v
// stochastically when it stores them: under round-to-nearest a moment that moves by less than half a bf16 ulp per
// step never moves (v with beta2 = 0.999 moves by 0.1 % of itself, half an ulp is 0.2-0.4 %), so a decaying v would
// stay at its old value for good. One hash of a column's two fp32 moments, its column and the step count gives both
// dithers (its low and high 16 bits): the same inputs give the same bits (repeatable), and the torch path
// (_optimizers.py _bf16_moments) computes the same.
__device__ __forceinline__ uint32_t moment_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
// The bf16 bits of fp32 bits b rounded up with probability (the dropped 16 bits) / 2^16 (dither: 16 random bits);
// NaN stays NaN, inf stays inf.
__device__ __forceinline__ uint32_t bf16_dither(uint32_t b, uint32_t dither) {
  if ((b & 0x7f800000u) == 0x7f800000u) return (b & 0x7fffffu) ? ((b >> 16) | 0x40u) : (b >> 16);
  return (b + dither) >> 16;
}
// The bf16 bits of column col's m (the result's low 16 bits) and v (its high 16 bits).
__device__ __forceinline__ uint32_t moments_bf16(float m, float v, uint32_t col, uint32_t step) {
  const uint32_t bm = __float_as_uint(m), bv = __float_as_uint(v);
  const uint32_t h = moment_hash(bm ^ (bv * 0x68e31da4u) ^ (col * 0x9e3779b9u) ^ (step * 0x85ebca6bu));
  return bf16_dither(bm, h & 0xffffu) | (bf16_dither(bv, h >> 16) << 16);
}

// m (s1) and v (s2) of a lane's N columns c.. from a row's bf16 state (after the dim embedding words).
template <int N>
__device__ __forceinline__ void load_moments_bf16(const float* row, int d, int c, float (&s1)[N], float (&s2)[N]) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(row + d);
  uint16_t a[N], b[N];
  if constexpr (N == 4) {
    const uint2 x = __ldcg(reinterpret_cast<const uint2*>(s + c));
    const uint2 y = __ldcg(reinterpret_cast<const uint2*>(s + d + c));
    a[0] = x.x & 0xffffu; a[1] = x.x >> 16; a[2] = x.y & 0xffffu; a[3] = x.y >> 16;
    b[0] = y.x & 0xffffu; b[1] = y.x >> 16; b[2] = y.y & 0xffffu; b[3] = y.y >> 16;
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      a[e] = s[c + e];
      b[e] = s[d + c + e];
    }
  }
#pragma unroll
  for (int e = 0; e < N; ++e) {
    s1[e] = __uint_as_float(static_cast<uint32_t>(a[e]) << 16);
    s2[e] = __uint_as_float(static_cast<uint32_t>(b[e]) << 16);
  }
}

// Stores m (s1) and v (s2) of a lane's N columns c.. into a row's bf16 state, stochastically rounded (above).
template <int N>
__device__ __forceinline__ void store_moments_bf16(float* row, int d, int c, const float (&s1)[N],
                                                   const float (&s2)[N], uint32_t step) {
  uint16_t* s = reinterpret_cast<uint16_t*>(row + d);
  uint32_t mv[N];  // (m | v << 16) bf16 bits per column
#pragma unroll
  for (int e = 0; e < N; ++e) mv[e] = moments_bf16(s1[e], s2[e], static_cast<uint32_t>(c + e), step);
  if constexpr (N == 4) {  // m of columns c..c+3, then v of the same columns
    *reinterpret_cast<uint2*>(s + c) = make_uint2(__byte_perm(mv[0], mv[1], 0x5410), __byte_perm(mv[2], mv[3], 0x5410));
    *reinterpret_cast<uint2*>(s + d + c) =
        make_uint2(__byte_perm(mv[0], mv[1], 0x7632), __byte_perm(mv[2], mv[3], 0x7632));
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      s[c + e] = static_cast<uint16_t>(mv[e] & 0xffffu);
      s[d + c + e] = static_cast<uint16_t>(mv[e] >> 16);
    }
  }
}

}  // namespace lookup
}  // namespace dynamicemb
