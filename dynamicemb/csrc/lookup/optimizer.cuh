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
};
__device__ __forceinline__ OptConst opt_const(const BackwardParams& p, bool updates = true) {
  OptConst o;
  o.lr = *p.lr;
  o.step_size = 0.f;
  if (p.opt == kAdam && updates) {
    const double t = static_cast<double>(*p.step);
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

}  // namespace lookup
}  // namespace dynamicemb
