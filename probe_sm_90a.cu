#include "hstu/csrc/sm80/hstu_fwd_sm80_kernel.cuh"
namespace hstu {
template __global__ void hstu_fwd_kernel<__nv_bfloat16,128,128,64,64,8,2,2,0>(const HstuParams p);
template __global__ void hstu_fwd_kernel<__nv_bfloat16,128,128,64,64,8,2,2,1>(const HstuParams p);
}
