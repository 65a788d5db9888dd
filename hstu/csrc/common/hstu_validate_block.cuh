// The device validation's block (hstu_validate.h says what and why): shared by the validation kernel
// (hstu_validate.cu) and the paged step plan's kernel (hstu/csrc/paged), which validates and plans in one block;
// the FP8 descale factors' check likewise (hstu_validate.cu's kernel and a block of the FP8 backward's pre-pass).
// Kept out of the attention kernels' inputs (hstu/BUILD.bazel, _VALIDATE_HDRS).
#pragma once

#include <cstdint>

#include "common/device_errors.cuh"
#include "hstu/csrc/common/hstu_validate.h"

namespace hstu {
namespace validate {

constexpr uint64_t kNoViolation = ~uint64_t{0};

// Priority of a violation, smallest first: the order in which the host check (hstu/_checks.py, check_values)
// finds them, so both report the same one: cu_seqlens_q's rules, then cu_seqlens_k's (each rule over its index),
// then per sequence b: seqused_q, seqused_k, delta-q, targets, contexts.
__device__ __forceinline__ uint64_t cu_key(int which, int rule_order, int64_t index) {
  return (static_cast<uint64_t>(which * 4 + rule_order) << 32) | static_cast<uint64_t>(index);
}
__device__ __forceinline__ uint64_t seq_key(int b, int rule_order) {
  return (uint64_t{8} << 32) | (static_cast<uint64_t>(b) * 8 + rule_order);
}

struct Violation {
  uint64_t key = kNoViolation;
  int32_t arg = 0, rule = 0;
  int64_t index = 0, value = 0, bound = 0;

  __device__ __forceinline__ void note(uint64_t k, int32_t a, int32_t r, int64_t i, int64_t v, int64_t b) {
    if (k < key) {
      key = k;
      arg = a;
      rule = r;
      index = i;
      value = v;
      bound = b;
    }
  }
};

// Fills n 16-bit elements from p (2-byte aligned) with `bits`, 16-byte stores where aligned; thread t of nt.
__device__ inline void fill_u16(uint16_t* p, int64_t n, uint16_t bits, int64_t t, int64_t nt) {
  const int64_t head = min(n, static_cast<int64_t>(((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / 2));
  for (int64_t i = t; i < head; i += nt) p[i] = bits;
  const uint32_t w = static_cast<uint32_t>(bits) | (static_cast<uint32_t>(bits) << 16);
  const uint4 val = make_uint4(w, w, w, w);
  uint4* v = reinterpret_cast<uint4*>(p + head);
  const int64_t n4 = (n - head) / 8;
  for (int64_t i = t; i < n4; i += nt) v[i] = val;
  for (int64_t i = head + n4 * 8 + t; i < n; i += nt) p[i] = bits;
}

// Validates v's vectors with threads tid of nthreads (all of the block's, each calls it once; block barriers inside),
// writes the sanitized copies and the status word, reports the first violation (claim: the library's claim word of
// the device error record) and fills v.fill on one. The copies are visible to the block after its next barrier.
__device__ __forceinline__ void validate_block(const HstuValidateParams& v, int* claim, unsigned long long* s_first,
                                               int tid, int nthreads) {
  if (tid == 0) *s_first = kNoViolation;
  __syncthreads();
  const int B = v.batch;
  Violation mine;
  for (int i = tid; i <= B; i += nthreads) {
    // Offsets: element i of cu_seqlens_q / cu_seqlens_k.
    for (int which = 0; which < 2; ++which) {
      const int32_t* cu = which == 0 ? v.cu_seqlens_q : v.cu_seqlens_k;
      const int32_t arg = which == 0 ? kArgCuSeqlensQ : kArgCuSeqlensK;
      const int64_t c = cu[i];
      if (i == 0 && c < 0) mine.note(cu_key(which, 0, 0), arg, kRuleOffsetNegative, 0, c, 0);
      if (i > 0) {
        const int64_t prev = cu[i - 1];
        if (c < prev) mine.note(cu_key(which, 1, i), arg, kRuleOffsetDecreasing, i, c, prev);
        const int64_t mx = which == 0 ? v.max_seqlen_q : v.max_seqlen_k;
        if (c - prev > mx) mine.note(cu_key(which, 3, i - 1), arg, kRuleSeqTooLong, i - 1, c - prev, mx);
      }
      const int64_t total = which == 0 ? v.total_q : v.total_k;
      if (i == B && c > total) mine.note(cu_key(which, 2, i), arg, kRuleOffsetPastEnd, i, c, total);
    }
    if (i == B) continue;
    // Sequence b = i.
    const int b = i;
    int64_t lq = static_cast<int64_t>(v.cu_seqlens_q[b + 1]) - v.cu_seqlens_q[b];
    int64_t lk = static_cast<int64_t>(v.cu_seqlens_k[b + 1]) - v.cu_seqlens_k[b];
    if (v.seqused_q != nullptr) {
      const int64_t u = v.seqused_q[b];
      if (u < 0 || u > lq) mine.note(seq_key(b, 0), kArgSequsedQ, kRuleSeqused, b, u, lq);
      lq = u;
    }
    if (v.seqused_k != nullptr) {
      const int64_t u = v.seqused_k[b];
      if (u < 0 || u > lk) mine.note(seq_key(b, 1), kArgSequsedK, kRuleSeqused, b, u, lk);
      lk = u;
    }
    if (lq > lk) mine.note(seq_key(b, 2), kArgCuSeqlensQ, kRuleDeltaQ, b, lq, lk);
    int64_t nt = 0;
    if (v.num_targets != nullptr) {
      nt = v.num_targets[b];
      if (nt < 0 || nt > lk) mine.note(seq_key(b, 3), kArgNumTargets, kRuleTargets, b, nt, lk);
    }
    if (v.num_contexts != nullptr) {
      const int64_t nc = v.num_contexts[b];
      if (nc < 0 || nc > lk - nt) mine.note(seq_key(b, 4), kArgNumContexts, kRuleContexts, b, nc, lk - nt);
    }
  }
  if (mine.key != kNoViolation) atomicMin(s_first, static_cast<unsigned long long>(mine.key));
  __syncthreads();
  const bool bad = *s_first != kNoViolation;
  if (bad && mine.key == *s_first) {  // keys are unique: exactly one thread reports
    accel::report_device_error(v.errors, claim, v.device, mine.arg, mine.rule, mine.index, mine.value, mine.bound);
  }

  // Sanitized copies: the inputs, or all zeros (every sequence empty) after a violation.
  const HstuScratchLayout& l = v.layout;
  int32_t* s = v.scratch;
  for (int i = tid; i <= B; i += nthreads) {
    s[l.cu_q + i] = bad ? 0 : v.cu_seqlens_q[i];
    s[l.cu_k + i] = bad ? 0 : v.cu_seqlens_k[i];
    if (i == B) continue;
    if (l.seqused_q >= 0) s[l.seqused_q + i] = bad ? 0 : v.seqused_q[i];
    if (l.seqused_k >= 0) s[l.seqused_k + i] = bad ? 0 : v.seqused_k[i];
    if (l.num_targets >= 0) s[l.num_targets + i] = bad ? 0 : v.num_targets[i];
    if (l.num_contexts >= 0) s[l.num_contexts + i] = bad ? 0 : v.num_contexts[i];
  }
  if (tid == 0) s[0] = bad ? 1 : 0;
  if (bad && v.fill != nullptr) fill_u16(v.fill, v.fill_numel, v.nan_bits, tid, nthreads);
}

// Checks p's descale factors with threads tid of nthreads (all of the block's; two block barriers inside): the
// copies p.out, all NaN after a violation, and the first violation (q before k before v, lowest flat index first)
// reported (claim: the library's claim word of the device error record).
__device__ __forceinline__ void check_scales_block(const HstuScaleCheckParams& p, int* claim,
                                                   unsigned long long* s_first, int tid, int nthreads) {
  if (tid == 0) *s_first = kNoViolation;
  __syncthreads();
  uint64_t mine = kNoViolation;
  float mine_value = 0.f;
  for (int which = 0; which < 3; ++which) {
    for (int64_t i = tid; i < p.n[which]; i += nthreads) {
      const float x = p.in[which][i];
      // NaN fails both comparisons; +inf fails the second.
      if (!(x > 0.f && x <= 3.402823466e38f)) {
        const uint64_t key = (static_cast<uint64_t>(which) << 48) | static_cast<uint64_t>(i);
        if (key < mine) {
          mine = key;
          mine_value = x;
        }
      }
    }
  }
  if (mine != kNoViolation) atomicMin(s_first, static_cast<unsigned long long>(mine));
  __syncthreads();
  const bool bad = *s_first != kNoViolation;
  if (bad && mine == *s_first) {  // keys are unique: exactly one thread reports
    const int which = static_cast<int>(mine >> 48);
    const int64_t index = static_cast<int64_t>(mine & ((uint64_t{1} << 48) - 1));
    accel::report_device_error(p.errors, claim, p.device, kArgQDescale + which, kRuleScale, index,
                               __double_as_longlong(static_cast<double>(mine_value)), 0);
  }
  const float nan = __int_as_float(0x7FC00000);
  for (int which = 0; which < 3; ++which) {
    for (int64_t i = tid; i < p.n[which]; i += nthreads) p.out[which][i] = bad ? nan : p.in[which][i];
  }
}

}  // namespace validate
}  // namespace hstu
