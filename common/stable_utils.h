// Shared helpers for ops built on the torch stable ABI (no libtorch C++ symbols).
//
// - ACCEL_CHECK(cond, msg...): throws std::runtime_error (surfaces in Python as RuntimeError).
// - ACCEL_CUDA_CHECK(expr): checks a cudaError_t.
// - accel::current_cuda_stream(device_index): the caller's current torch CUDA stream, resolved at run
//   time from libtorch_cuda.so (dlopen RTLD_NOLOAD + dlsym), so this library also loads on CPU-only torch.
// - accel::check_*: argument validation with messages that name the argument, the expected and the actual value.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#define ACCEL_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) {                                               \
      std::ostringstream accel_oss_;                             \
      ::accel::detail::stream_all(accel_oss_, __VA_ARGS__);      \
      throw std::runtime_error(accel_oss_.str());                \
    }                                                            \
  } while (0)

#ifdef __CUDACC__
#define ACCEL_CUDA_CHECK(expr)                                                           \
  do {                                                                                   \
    cudaError_t accel_err_ = (expr);                                                     \
    ACCEL_CHECK(accel_err_ == cudaSuccess, "CUDA error ", cudaGetErrorString(accel_err_), \
                " at ", __FILE__, ":", __LINE__, " in ", #expr);                         \
  } while (0)
#endif

namespace accel {
namespace detail {
inline void stream_all(std::ostringstream&) {}
template <typename T, typename... Rest>
inline void stream_all(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  stream_all(os, rest...);
}
}  // namespace detail

using ScalarType = torch::headeronly::ScalarType;

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Half: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::UInt64: return "uint64";
    case ScalarType::Bool: return "bool";
    case ScalarType::Byte: return "uint8";
    default: return "other";
  }
}

inline std::string device_name(const torch::stable::Tensor& t) {
  if (t.is_cpu()) return "cpu";
  if (t.is_cuda()) return "cuda:" + std::to_string(static_cast<int>(t.get_device()));
  return "other";
}

inline std::string shape_str(const torch::stable::Tensor& t) {
  std::ostringstream os;
  os << "(";
  for (int64_t i = 0; i < t.dim(); ++i) os << (i ? ", " : "") << t.size(i);
  os << (t.dim() == 1 ? ",)" : ")");
  return os.str();
}

inline void check_dtype(const torch::stable::Tensor& t, const char* arg, ScalarType expected) {
  ACCEL_CHECK(t.scalar_type() == expected, arg, ": expected dtype ", dtype_name(expected), ", got ",
              dtype_name(t.scalar_type()));
}

inline void check_same_device(const torch::stable::Tensor& t, const char* arg,
                              const torch::stable::Tensor& ref, const char* ref_arg) {
  ACCEL_CHECK(t.is_cuda() == ref.is_cuda() && t.get_device() == ref.get_device(), arg,
              ": expected a tensor on ", device_name(ref), " (the device of ", ref_arg, "), got ",
              device_name(t));
}

inline void check_contiguous(const torch::stable::Tensor& t, const char* arg) {
  ACCEL_CHECK(t.is_contiguous(), arg, ": expected a contiguous tensor, got shape ", shape_str(t),
              " with non-contiguous strides");
}

inline void check_dim(const torch::stable::Tensor& t, const char* arg, int64_t expected) {
  ACCEL_CHECK(t.dim() == expected, arg, ": expected a ", expected, "-d tensor, got shape ",
              shape_str(t));
}

// The current torch CUDA stream of `device_index`, as a void* (a cudaStream_t).
// aoti_torch_get_current_cuda_stream lives in libtorch_cuda.so, which CPU-only torch lacks; resolving it
// lazily keeps this library loadable everywhere.
inline void* current_cuda_stream(int32_t device_index) {
  using Fn = int32_t (*)(int32_t, void**);
  static Fn fn = []() -> Fn {
    void* handle = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) return nullptr;
    return reinterpret_cast<Fn>(dlsym(handle, "aoti_torch_get_current_cuda_stream"));
  }();
  ACCEL_CHECK(fn != nullptr,
              "accelerated_modules: CUDA tensors need a CUDA build of torch (libtorch_cuda.so is not loaded)");
  void* stream = nullptr;
  ACCEL_CHECK(fn(device_index, &stream) == 0, "aoti_torch_get_current_cuda_stream failed for device ",
              device_index);
  return stream;
}

}  // namespace accel
