// The fused HSTULayer steps on the torch stable ABI (CUDA): hstu_attn::layer_norm_mul_fwd / _bwd and
// hstu_attn::silu_split_fwd / _bwd (schemas, argument checks, output allocation, launch on the caller's current
// stream). Kept apart from hstu_ops.cc (its own library fragment). The CPU path (the torch composition), the
// autograd wrappers and the fake (meta) implementations are in hstu/_fused.py.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <tuple>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "hstu/csrc/layers/hstu_layer_kernels.h"

namespace hstu {
namespace layer_op {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using layers::DType;

DType float_dtype(const Tensor& t, const char* arg) {
  switch (t.scalar_type()) {
    case ScalarType::Float: return DType::kFloat32;
    case ScalarType::Half: return DType::kFloat16;
    case ScalarType::BFloat16: return DType::kBFloat16;
    default:
      ACCEL_CHECK(false, arg, ": expected dtype float32, float16 or bfloat16, got ",
                  accel::dtype_name(t.scalar_type()));
  }
  return DType::kFloat32;
}

// A contiguous CUDA tensor on ref's device with ref's dtype and the given shape.
void check_like(const Tensor& t, const char* arg, const Tensor& ref, const char* ref_arg, int64_t rows,
                int64_t cols) {
  ACCEL_CHECK(t.is_cuda(), arg, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, arg, ref, ref_arg);
  ACCEL_CHECK(t.scalar_type() == ref.scalar_type(), arg, ": expected dtype ", accel::dtype_name(ref.scalar_type()),
              " (the dtype of ", ref_arg, "), got ", accel::dtype_name(t.scalar_type()));
  accel::check_contiguous(t, arg);
  if (rows < 0) {
    ACCEL_CHECK(t.dim() == 1 && t.size(0) == cols, arg, ": expected shape (", cols, ",), got ", accel::shape_str(t));
  } else {
    ACCEL_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == cols, arg, ": expected shape (", rows, ", ", cols,
                "), got ", accel::shape_str(t));
  }
}

void check_stats(const Tensor& t, const char* arg, const Tensor& x, int64_t rows) {
  ACCEL_CHECK(t.is_cuda(), arg, ": expected a CUDA tensor, got ", accel::device_name(t));
  accel::check_same_device(t, arg, x, "x");
  accel::check_dtype(t, arg, ScalarType::Float);
  accel::check_contiguous(t, arg);
  ACCEL_CHECK(t.dim() == 1 && t.size(0) == rows, arg, ": expected shape (", rows, ",), got ", accel::shape_str(t));
}

cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(accel::current_cuda_stream(static_cast<int32_t>(t.get_device())));
}

void check_x(const Tensor& x) {
  ACCEL_CHECK(x.is_cuda(), "x: expected a CUDA tensor, got ", accel::device_name(x));
  accel::check_dim(x, "x", 2);
  ACCEL_CHECK(x.size(1) >= 1, "x: expected at least one column, got shape ", accel::shape_str(x));
  accel::check_contiguous(x, "x");
  float_dtype(x, "x");
}

// x, u, weight and bias of the LayerNorm * u ops: returns the weight dtype (it may differ from x's).
DType check_norm_args(const Tensor& x, const Tensor& u, const Tensor& weight, const Tensor& bias) {
  const int64_t rows = x.size(0), cols = x.size(1);
  check_like(u, "u", x, "x", rows, cols);
  const DType wdtype = float_dtype(weight, "weight");
  check_like(weight, "weight", weight, "weight", -1, cols);
  accel::check_same_device(weight, "weight", x, "x");
  check_like(bias, "bias", weight, "weight", -1, cols);
  return wdtype;
}

// x of the SiLU + split ops: four equal column blocks (u, v, q, k); returns their width.
int64_t check_split_x(const Tensor& x) {
  ACCEL_CHECK(x.size(1) % 4 == 0, "x: expected a column count divisible by 4 (u, v, q, k), got shape ",
              accel::shape_str(x));
  return x.size(1) / 4;
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_mul_fwd(Tensor x, Tensor u, Tensor weight, Tensor bias, double eps) {
  check_x(x);
  torch::stable::accelerator::DeviceGuard guard(x.get_device());
  const int64_t rows = x.size(0), cols = x.size(1);
  const DType wdtype = check_norm_args(x, u, weight, bias);
  ACCEL_CHECK(eps > 0, "eps: expected a positive number, got ", eps);
  Tensor out = torch::stable::new_empty(x, {rows, cols});
  Tensor mean = torch::stable::new_empty(x, {rows}, ScalarType::Float);
  Tensor rstd = torch::stable::new_empty(x, {rows}, ScalarType::Float);
  layers::LayerNormMulFwdParams p{};
  p.x = x.data_ptr();
  p.u = u.data_ptr();
  p.weight = weight.data_ptr();
  p.bias = bias.data_ptr();
  p.out = out.data_ptr();
  p.mean = static_cast<float*>(mean.data_ptr());
  p.rstd = static_cast<float*>(rstd.data_ptr());
  p.rows = rows;
  p.cols = cols;
  p.eps = static_cast<float>(eps);
  p.dtype = float_dtype(x, "x");
  p.wdtype = wdtype;
  const cudaError_t err = layers::launch_layer_norm_mul_fwd(p, stream_of(x));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::layer_norm_mul_fwd: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(out, mean, rstd);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> layer_norm_mul_bwd(Tensor dout, Tensor x, Tensor u, Tensor weight,
                                                              Tensor bias, Tensor mean, Tensor rstd) {
  check_x(x);
  torch::stable::accelerator::DeviceGuard guard(x.get_device());
  const int64_t rows = x.size(0), cols = x.size(1);
  check_like(dout, "dout", x, "x", rows, cols);
  const DType wdtype = check_norm_args(x, u, weight, bias);
  check_stats(mean, "mean", x, rows);
  check_stats(rstd, "rstd", x, rows);
  const int chunks = layers::layer_norm_mul_bwd_chunks(rows, cols, static_cast<int>(x.get_device()));
  Tensor dx = torch::stable::new_empty(x, {rows, cols});
  Tensor du = torch::stable::new_empty(x, {rows, cols});
  Tensor dweight = torch::stable::new_empty(weight, {cols});
  Tensor dbias = torch::stable::new_empty(weight, {cols});
  Tensor partial = torch::stable::new_empty(x, {2 * chunks * cols}, ScalarType::Float);
  layers::LayerNormMulBwdParams p{};
  p.dout = dout.data_ptr();
  p.x = x.data_ptr();
  p.u = u.data_ptr();
  p.weight = weight.data_ptr();
  p.bias = bias.data_ptr();
  p.mean = static_cast<const float*>(mean.data_ptr());
  p.rstd = static_cast<const float*>(rstd.data_ptr());
  p.dx = dx.data_ptr();
  p.du = du.data_ptr();
  p.partial = static_cast<float*>(partial.data_ptr());
  p.dweight = dweight.data_ptr();
  p.dbias = dbias.data_ptr();
  p.rows = rows;
  p.cols = cols;
  p.chunks = chunks;
  p.dtype = float_dtype(x, "x");
  p.wdtype = wdtype;
  const cudaError_t err = layers::launch_layer_norm_mul_bwd(p, stream_of(x));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::layer_norm_mul_bwd: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(dx, du, dweight, dbias);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> silu_split_fwd(Tensor x) {
  check_x(x);
  torch::stable::accelerator::DeviceGuard guard(x.get_device());
  const int64_t rows = x.size(0), width = check_split_x(x);
  Tensor out[4] = {torch::stable::new_empty(x, {rows, width}), torch::stable::new_empty(x, {rows, width}),
                   torch::stable::new_empty(x, {rows, width}), torch::stable::new_empty(x, {rows, width})};
  layers::SiluSplitParams p{};
  p.x = x.data_ptr();
  for (int i = 0; i < 4; ++i) p.out[i] = out[i].data_ptr();
  p.rows = rows;
  p.width = width;
  p.dtype = float_dtype(x, "x");
  const cudaError_t err = layers::launch_silu_split_fwd(p, stream_of(x));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::silu_split_fwd: CUDA error ", cudaGetErrorString(err));
  return std::make_tuple(out[0], out[1], out[2], out[3]);
}

Tensor silu_split_bwd(Tensor du, Tensor dv, Tensor dq, Tensor dk, Tensor x) {
  check_x(x);
  torch::stable::accelerator::DeviceGuard guard(x.get_device());
  const int64_t rows = x.size(0), width = check_split_x(x);
  const Tensor* grads[4] = {&du, &dv, &dq, &dk};
  const char* names[4] = {"du", "dv", "dq", "dk"};
  layers::SiluSplitParams p{};
  for (int i = 0; i < 4; ++i) {
    check_like(*grads[i], names[i], x, "x", rows, width);
    p.dout[i] = grads[i]->data_ptr();
  }
  Tensor dx = torch::stable::new_empty(x, {rows, 4 * width});
  p.x = x.data_ptr();
  p.dx = dx.data_ptr();
  p.rows = rows;
  p.width = width;
  p.dtype = float_dtype(x, "x");
  const cudaError_t err = layers::launch_silu_split_bwd(p, stream_of(x));
  ACCEL_CHECK(err == cudaSuccess, "hstu_attn::silu_split_bwd: CUDA error ", cudaGetErrorString(err));
  return dx;
}

}  // namespace layer_op
}  // namespace hstu

// Keep identical to the schemas in hstu/_fused.py (defined there without _C.so).
STABLE_TORCH_LIBRARY_FRAGMENT(hstu_attn, m) {
  m.def("layer_norm_mul_fwd(Tensor x, Tensor u, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor, Tensor)");
  m.def(
      "layer_norm_mul_bwd(Tensor dout, Tensor x, Tensor u, Tensor weight, Tensor bias, Tensor mean, Tensor rstd) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def("silu_split_fwd(Tensor x) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("silu_split_bwd(Tensor du, Tensor dv, Tensor dq, Tensor dk, Tensor x) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(hstu_attn, CUDA, m) {
  m.impl("layer_norm_mul_fwd", TORCH_BOX(&hstu::layer_op::layer_norm_mul_fwd));
  m.impl("layer_norm_mul_bwd", TORCH_BOX(&hstu::layer_op::layer_norm_mul_bwd));
  m.impl("silu_split_fwd", TORCH_BOX(&hstu::layer_op::silu_split_fwd));
  m.impl("silu_split_bwd", TORCH_BOX(&hstu::layer_op::silu_split_bwd));
}
