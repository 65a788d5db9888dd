// The value trait of the device code (table kernels and lookup kernels): storage type of a ValueKind and its
// conversions to and from the fp32 the kernels compute in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dynamicemb/csrc/table/table_types.h"

namespace dynamicemb {
namespace table {

template <int V> struct Val;
template <> struct Val<kValueFp16> {
  using T = __half;
  static __device__ __forceinline__ float to_f(T v) { return __half2float(v); }
  static __device__ __forceinline__ T from_f(float v) { return __float2half_rn(v); }
};
template <> struct Val<kValueBf16> {
  using T = __nv_bfloat16;
  static __device__ __forceinline__ float to_f(T v) { return __bfloat162float(v); }
  static __device__ __forceinline__ T from_f(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Val<kValueFp32> {
  using T = float;
  static __device__ __forceinline__ float to_f(T v) { return v; }
  static __device__ __forceinline__ T from_f(float v) { return v; }
};

}  // namespace table
}  // namespace dynamicemb
