// Argument checks and HstuParams from the op's tensors (host side, torch stable ABI), used by the op library
// (hstu_ops.cc, fwd / bwd and their with_options twins).
#pragma once

#include <cstdint>
#include <optional>

#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "hstu/csrc/common/hstu_params.h"

namespace hstu {
namespace op_params {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

// align: row/head strides in multiples of this many elements (16 bytes: 8 for 16-bit types, 16 for FP8).
inline void check_qkv(const Tensor& t, const char* arg, const Tensor& q, int64_t align = 8) {
  ACCEL_CHECK(t.is_cuda(), arg, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, arg, q, "q");
  accel::check_dim(t, arg, 3);
  ACCEL_CHECK(t.scalar_type() == q.scalar_type(), arg, ": expected dtype ", accel::dtype_name(q.scalar_type()),
              " (the dtype of q), got ", accel::dtype_name(t.scalar_type()));
  ACCEL_CHECK(t.size(1) == q.size(1) && t.size(2) == q.size(2), arg, ": expected (total, ", q.size(1), ", ",
              q.size(2), ") like q, got shape ", accel::shape_str(t));
  ACCEL_CHECK(t.stride(2) == 1, arg, ": expected a contiguous last dim, got stride ", t.stride(2));
  // The kernels copy 16-byte chunks: rows and heads must start on 16-byte boundaries.
  const auto addr = reinterpret_cast<uintptr_t>(t.data_ptr());
  ACCEL_CHECK(addr % 16 == 0 && t.stride(0) % align == 0 && t.stride(1) % align == 0, arg,
              ": expected a 16-byte aligned data pointer and row/head strides that are multiples of ", align,
              " elements, got strides (", t.stride(0), ", ", t.stride(1), ", 1); call .contiguous() first");
}

inline void check_int_vec(const std::optional<Tensor>& t, const char* arg, const Tensor& q, int64_t len) {
  if (!t.has_value()) return;
  accel::check_same_device(*t, arg, q, "q");
  accel::check_dtype(*t, arg, ScalarType::Int);
  accel::check_dim(*t, arg, 1);
  accel::check_contiguous(*t, arg);
  ACCEL_CHECK(t->size(0) == len, arg, ": expected shape (", len, ",), got ", accel::shape_str(*t));
}

inline const int32_t* int_ptr(const std::optional<Tensor>& t) {
  return t.has_value() ? static_cast<const int32_t*>(t->data_ptr()) : nullptr;
}

// Fills everything but the outputs. fp8: q, k, v float8_e4m3fn (the FP8 forward; no rab).
inline HstuParams make_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens_q,
                       const Tensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                       const std::optional<Tensor>& num_contexts, const std::optional<Tensor>& num_targets,
                       int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha,
                       const std::optional<Tensor>& rab, double scaling_seqlen,
                       const std::optional<Tensor>& seqused_q, const std::optional<Tensor>& seqused_k,
                       bool fp8 = false) {
  ACCEL_CHECK(q.is_cuda(), "q: expected a CUDA tensor, got ", accel::device_name(q));
  if (fp8) {
    ACCEL_CHECK(q.scalar_type() == ScalarType::Float8_e4m3fn, "q: expected dtype float8_e4m3fn, got ",
                accel::dtype_name(q.scalar_type()));
    ACCEL_CHECK(!rab.has_value(), "rab: expected None for the FP8 kernel (hstu_attn::fp8_fwd dequantizes for rab)");
  } else {
    ACCEL_CHECK(q.scalar_type() == ScalarType::Half || q.scalar_type() == ScalarType::BFloat16,
                "q: expected dtype float16 or bfloat16, got ", accel::dtype_name(q.scalar_type()));
  }
  const int64_t align = fp8 ? 16 : 8;
  check_qkv(q, "q", q, align);
  check_qkv(k, "k", q, align);
  check_qkv(v, "v", q, align);
  const int64_t d = q.size(2);
  ACCEL_CHECK(d == 32 || d == 64 || d == 128 || d == 256, "q: expected head dim in {32, 64, 128, 256}, got ", d);
  ACCEL_CHECK(k.size(0) == v.size(0), "v: expected ", k.size(0), " tokens like k, got ", v.size(0));

  accel::check_same_device(cu_seqlens_q, "cu_seqlens_q", q, "q");
  accel::check_same_device(cu_seqlens_k, "cu_seqlens_k", q, "q");
  accel::check_dtype(cu_seqlens_q, "cu_seqlens_q", ScalarType::Int);
  accel::check_dtype(cu_seqlens_k, "cu_seqlens_k", ScalarType::Int);
  accel::check_dim(cu_seqlens_q, "cu_seqlens_q", 1);
  accel::check_contiguous(cu_seqlens_q, "cu_seqlens_q");
  accel::check_contiguous(cu_seqlens_k, "cu_seqlens_k");
  const int64_t batch = cu_seqlens_q.size(0) - 1;
  ACCEL_CHECK(batch >= 0, "cu_seqlens_q: expected shape (B + 1,), got ", accel::shape_str(cu_seqlens_q));
  ACCEL_CHECK(cu_seqlens_k.dim() == 1 && cu_seqlens_k.size(0) == batch + 1, "cu_seqlens_k: expected shape (",
              batch + 1, ",) like cu_seqlens_q, got ", accel::shape_str(cu_seqlens_k));
  ACCEL_CHECK(batch < 65536, "cu_seqlens_q: at most 65535 sequences, got ", batch);
  ACCEL_CHECK(max_seqlen_q >= 0 && max_seqlen_k >= 0 && max_seqlen_q < (1 << 30) && max_seqlen_k < (1 << 30),
              "max_seqlen_q/max_seqlen_k: expected values in [0, 2^30), got ", max_seqlen_q, ", ", max_seqlen_k);
  check_int_vec(num_contexts, "num_contexts", q, batch);
  check_int_vec(num_targets, "num_targets", q, batch);
  check_int_vec(seqused_q, "seqused_q", q, batch);
  check_int_vec(seqused_k, "seqused_k", q, batch);
  ACCEL_CHECK(target_group_size >= 1, "target_group_size: expected >= 1, got ", target_group_size);
  ACCEL_CHECK(window_left >= -1 && window_right >= -1, "window_size: expected values >= -1, got (", window_left,
              ", ", window_right, ")");

  HstuParams p{};
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.q_row_stride = q.stride(0);
  p.q_head_stride = q.stride(1);
  p.k_row_stride = k.stride(0);
  p.k_head_stride = k.stride(1);
  p.v_row_stride = v.stride(0);
  p.v_head_stride = v.stride(1);
  p.cu_seqlens_q = static_cast<const int32_t*>(cu_seqlens_q.data_ptr());
  p.cu_seqlens_k = static_cast<const int32_t*>(cu_seqlens_k.data_ptr());
  p.seqused_q = int_ptr(seqused_q);
  p.seqused_k = int_ptr(seqused_k);
  p.num_contexts = int_ptr(num_contexts);
  p.num_targets = int_ptr(num_targets);
  p.batch = static_cast<int>(batch);
  p.heads = static_cast<int>(q.size(1));
  p.head_dim = static_cast<int>(d);
  p.max_seqlen_q = static_cast<int>(max_seqlen_q);
  p.max_seqlen_k = static_cast<int>(max_seqlen_k);
  p.target_group_size = static_cast<int>(target_group_size);
  p.window_left = static_cast<int>(window_left);
  p.window_right = static_cast<int>(window_right);
  p.alpha = static_cast<float>(alpha);
  const double scaling = scaling_seqlen > 0 ? scaling_seqlen : static_cast<double>(max_seqlen_q);
  p.inv_scaling = scaling > 0 ? static_cast<float>(1.0 / scaling) : 1.0f;
  p.total_q = q.size(0);

  if (rab.has_value()) {
    const Tensor& r = *rab;
    ACCEL_CHECK(r.is_cuda(), "rab: expected a CUDA tensor, got ", accel::device_name(r));
    accel::check_same_device(r, "rab", q, "q");
    ACCEL_CHECK(r.scalar_type() == q.scalar_type(), "rab: expected dtype ", accel::dtype_name(q.scalar_type()),
                " (the dtype of q), got ", accel::dtype_name(r.scalar_type()));
    accel::check_dim(r, "rab", 4);
    ACCEL_CHECK(r.size(0) == batch && (r.size(1) == 1 || r.size(1) == q.size(1)) && r.size(2) >= max_seqlen_k &&
                    r.size(3) >= max_seqlen_k,
                "rab: expected shape (", batch, ", 1 or ", q.size(1), ", ", max_seqlen_k, ", ", max_seqlen_k,
                "), got ", accel::shape_str(r));
    ACCEL_CHECK(r.stride(3) == 1, "rab: expected a contiguous last dim, got stride ", r.stride(3));
    p.rab = r.data_ptr();
    p.rab_batch_stride = r.stride(0);
    p.rab_head_stride = r.size(1) == 1 ? 0 : r.stride(1);
    p.rab_row_stride = r.stride(2);
  }
  return p;
}

}  // namespace op_params
}  // namespace hstu
