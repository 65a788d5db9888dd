// dynamicemb::hash_keys(Tensor keys) -> Tensor
// The scored hash table's key hash (dynamicemb/csrc/table/hash.cuh) as an op, CPU and CUDA, for int64 and
// uint64 keys. The output has the keys' dtype and holds the 64 hash bits.
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"
#include "dynamicemb/csrc/table/hash.cuh"

namespace dynamicemb {
namespace {

using torch::stable::Tensor;

void check_keys(const Tensor& keys) {
  ACCEL_CHECK(keys.scalar_type() == accel::ScalarType::Long || keys.scalar_type() == accel::ScalarType::UInt64,
              "keys: expected dtype int64 or uint64, got ", accel::dtype_name(keys.scalar_type()));
  accel::check_dim(keys, "keys", 1);
  accel::check_contiguous(keys, "keys");
}

Tensor hash_keys_cpu(Tensor keys) {
  check_keys(keys);
  ACCEL_CHECK(keys.is_cpu(), "keys: expected a CPU tensor for the CPU kernel, got ", accel::device_name(keys));
  Tensor out = torch::stable::empty_like(keys);
  const auto* in = static_cast<const uint64_t*>(keys.data_ptr());
  auto* o = static_cast<uint64_t*>(out.data_ptr());
  for (int64_t i = 0, n = keys.numel(); i < n; ++i) o[i] = accel_hash_key(in[i]);
  return out;
}

Tensor hash_keys_cuda(Tensor keys) {
  check_keys(keys);
  ACCEL_CHECK(keys.is_cuda(), "keys: expected a CUDA tensor, got ", accel::device_name(keys));
  torch::stable::accelerator::DeviceGuard guard(keys.get_device_index());
  Tensor out = torch::stable::empty_like(keys);
  launch_hash_keys(static_cast<const uint64_t*>(keys.data_ptr()), static_cast<uint64_t*>(out.data_ptr()),
                   keys.numel(), accel::current_cuda_stream(keys.get_device_index()));
  cudaError_t err = cudaGetLastError();
  ACCEL_CHECK(err == cudaSuccess, "hash_keys: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

}  // namespace
}  // namespace dynamicemb

STABLE_TORCH_LIBRARY(dynamicemb, m) {
  m.def("hash_keys(Tensor keys) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CPU, m) {
  m.impl("hash_keys", TORCH_BOX(&dynamicemb::hash_keys_cpu));
}

STABLE_TORCH_LIBRARY_IMPL(dynamicemb, CUDA, m) {
  m.impl("hash_keys", TORCH_BOX(&dynamicemb::hash_keys_cuda));
}
