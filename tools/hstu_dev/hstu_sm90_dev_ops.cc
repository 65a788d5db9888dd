// Development ops for the Hopper HSTU kernels: `hstu_attn_sm90_dev::fwd`, same schema as `hstu_attn::fwd` plus
// `int variant` (-1: default; see run_hstu_fwd_sm90 for the experimental configurations), and
// `hstu_attn_sm90_dev::bwd` -> (dq, dk, dv) (no rab/drab, non-deterministic dq_accum path; variant: see
// run_hstu_bwd_sm90). Torch stable ABI, its own shared library, so the
// sm90 kernel can be built and checked by hand without touching the wheel's hstu_attn::fwd (see docs/archive/hstu_sm90_log.md).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "hstu/csrc/hstu_params.h"
#include "hstu/csrc/ops/hstu_op_params.h"
#include "hstu/csrc/sm90/hstu_sm90_launch.h"

namespace hstu {
namespace sm90_dev {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

using op_params::check_qkv;

template <typename T>
cudaError_t dispatch(const HstuParams& p, int64_t total_k, cudaStream_t s, int variant) {
  switch (p.head_dim) {
#ifdef HSTU_SM90_WITH_D64
    case 64: return run_hstu_fwd_sm90<T, 64>(p, total_k, s, variant);
#endif
#ifdef HSTU_SM90_WITH_D256
    case 256: return run_hstu_fwd_sm90<T, 256>(p, total_k, s, variant);
#endif
    default: return run_hstu_fwd_sm90<T, 128>(p, total_k, s, variant);
  }
}

// The product's parameters (hstu/csrc/ops/hstu_op_params.h), after this library's own limits: the head dims it
// was built with, no rab.
HstuParams make_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens_q,
                       const Tensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                       const std::optional<Tensor>& num_contexts, const std::optional<Tensor>& num_targets,
                       int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha,
                       const std::optional<Tensor>& rab, double scaling_seqlen,
                       const std::optional<Tensor>& seqused_q, const std::optional<Tensor>& seqused_k) {
  const int64_t d = q.dim() == 3 ? q.size(2) : 0;
  bool d_ok = d == 128;
#ifdef HSTU_SM90_WITH_D64
  d_ok = d_ok || d == 64;
#endif
#ifdef HSTU_SM90_WITH_D256
  d_ok = d_ok || d == 256;
#endif
  ACCEL_CHECK(d_ok, "q: head dim ", d, " is not compiled into this sm90 development library");
  ACCEL_CHECK(!rab.has_value(), "rab: not supported by the sm90 development ops (use hstu_attn::fwd / bwd)");
  return op_params::make_params(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                                num_targets, target_group_size, window_left, window_right, alpha, rab,
                                scaling_seqlen, seqused_q, seqused_k);
}

Tensor fwd_cuda(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int64_t max_seqlen_q,
                int64_t max_seqlen_k, std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
                int64_t target_group_size, int64_t window_left, int64_t window_right, double alpha,
                std::optional<Tensor> rab, double scaling_seqlen, std::optional<Tensor> seqused_q,
                std::optional<Tensor> seqused_k, int64_t variant) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  HstuParams p = make_params(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                             num_targets, target_group_size, window_left, window_right, alpha, rab, scaling_seqlen,
                             seqused_q, seqused_k);
  if (k.size(0) == 0) {  // no keys at all: every used row is empty, outputs are zeros (nothing is launched)
    return torch::stable::new_zeros(q, {q.size(0), q.size(1), q.size(2)});
  }
  Tensor out = torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)});
  p.out = out.data_ptr();
  p.o_row_stride = out.stride(0);
  p.o_head_stride = out.stride(1);
  cudaStream_t s =
      static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(q.get_device())));
  const int var = static_cast<int>(variant);
  // Jagged work list workspace (used by variant -1 and variants >= 100).
  std::optional<Tensor> sched;
  const int64_t sched_bytes = hstu_fwd_sm90_sched_layout(p, k.size(0)).bytes;
  if (sched_bytes > 0) {
    sched = torch::stable::new_empty(q, {sched_bytes}, ScalarType::Byte);
    p.fwd_sched = sched->data_ptr();
    p.fwd_sched_bytes = sched_bytes;
  }
  const cudaError_t err = q.scalar_type() == ScalarType::Half ? dispatch<__half>(p, k.size(0), s, var)
                                                               : dispatch<__nv_bfloat16>(p, k.size(0), s, var);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn_sm90_dev::fwd: CUDA error ", cudaGetErrorString(err));
  return out;
}

template <typename T>
cudaError_t dispatch_bwd(const HstuParams& p, int64_t total_k, cudaStream_t s, int variant) {
  switch (p.head_dim) {
#ifdef HSTU_SM90_WITH_D64
    case 64: return run_hstu_bwd_sm90<T, 64>(p, total_k, s, variant);
#endif
#ifdef HSTU_SM90_WITH_D256
    case 256: return run_hstu_bwd_sm90<T, 256>(p, total_k, s, variant);
#endif
    default: return run_hstu_bwd_sm90<T, 128>(p, total_k, s, variant);
  }
}

// Backward: dq, dk, dv (no rab; dq through the zeroed fp32 workspace, like hstu_attn::bwd non-deterministic).
std::tuple<Tensor, Tensor, Tensor> bwd_cuda(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,
                                            Tensor cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                                            std::optional<Tensor> num_contexts, std::optional<Tensor> num_targets,
                                            int64_t target_group_size, int64_t window_left, int64_t window_right,
                                            double alpha, std::optional<Tensor> rab, double scaling_seqlen,
                                            std::optional<Tensor> seqused_q, std::optional<Tensor> seqused_k,
                                            int64_t variant) {
  torch::stable::accelerator::DeviceGuard guard(q.get_device());
  HstuParams p = make_params(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, num_contexts,
                             num_targets, target_group_size, window_left, window_right, alpha, rab, scaling_seqlen,
                             seqused_q, seqused_k);
  ACCEL_CHECK(p.head_dim == 128
#ifdef HSTU_SM90_WITH_D64
                  || p.head_dim == 64
#endif
#ifdef HSTU_SM90_WITH_D256
                  || p.head_dim == 256
#endif
              , "q: head dim ", p.head_dim, " has no sm90 backward in this development library");
  check_qkv(dout, "dout", q);
  ACCEL_CHECK(dout.size(0) == q.size(0), "dout: expected shape like q ", accel::shape_str(q), ", got ",
              accel::shape_str(dout));
  p.dout = dout.data_ptr();
  p.do_row_stride = dout.stride(0);
  p.do_head_stride = dout.stride(1);
  Tensor dq = torch::stable::new_empty(q, {q.size(0), q.size(1), q.size(2)});
  Tensor dk = torch::stable::new_empty(k, {k.size(0), k.size(1), k.size(2)});
  Tensor dv = torch::stable::new_empty(v, {v.size(0), v.size(1), v.size(2)});
  Tensor dq_accum = torch::stable::new_zeros(q, {hstu_bwd_sm90_dq_accum_floats(p)}, ScalarType::Float);
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  p.dq_row_stride = dq.stride(0);
  p.dq_head_stride = dq.stride(1);
  p.dk_row_stride = dk.stride(0);
  p.dk_head_stride = dk.stride(1);
  p.dv_row_stride = dv.stride(0);
  p.dv_head_stride = dv.stride(1);
  p.dq_accum = static_cast<float*>(dq_accum.data_ptr());
  cudaStream_t s =
      static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(q.get_device())));
  const int var = static_cast<int>(variant);
  const cudaError_t err = q.scalar_type() == ScalarType::Half ? dispatch_bwd<__half>(p, k.size(0), s, var)
                                                               : dispatch_bwd<__nv_bfloat16>(p, k.size(0), s, var);
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn_sm90_dev::bwd: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(dq, dk, dv);
}

}  // namespace sm90_dev
}  // namespace hstu

STABLE_TORCH_LIBRARY(hstu_attn_sm90_dev, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, "
      "int variant=-1) -> Tensor");
  m.def(
      "bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, Tensor? num_contexts, Tensor? num_targets, int target_group_size, int window_left, "
      "int window_right, float alpha, Tensor? rab, float scaling_seqlen, Tensor? seqused_q, Tensor? seqused_k, "
      "int variant=-1) -> (Tensor, Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(hstu_attn_sm90_dev, CUDA, m) {
  m.impl("fwd", TORCH_BOX(&hstu::sm90_dev::fwd_cuda));
  m.impl("bwd", TORCH_BOX(&hstu::sm90_dev::bwd_cuda));
}
