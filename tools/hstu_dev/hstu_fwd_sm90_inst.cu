// Explicit instantiations of the sm90 HSTU forward for the development library (sm_90a only).
// HSTU_SM90_DTYPE / HSTU_SM90_HDIM select one instantiation per translation unit (the wheel's generator will do
// the same, one file per dtype x head dim); without them this file instantiates bf16 and fp16 at D = 128.
#include "hstu/csrc/sm90/hstu_fwd_sm90_launch.cuh"

namespace hstu {
#if defined(HSTU_SM90_DTYPE) && defined(HSTU_SM90_HDIM)
template cudaError_t run_hstu_fwd_sm90<HSTU_SM90_DTYPE, HSTU_SM90_HDIM>(const HstuParams&, int64_t, cudaStream_t, int);
#else
template cudaError_t run_hstu_fwd_sm90<__nv_bfloat16, 128>(const HstuParams&, int64_t, cudaStream_t, int);
template cudaError_t run_hstu_fwd_sm90<__half, 128>(const HstuParams&, int64_t, cudaStream_t, int);
#endif
}  // namespace hstu
