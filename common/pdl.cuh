// Programmatic dependent launch (PDL, sm_90+), shared by both packages' kernels.
//
// A kernel launched with programmatic stream serialization may start its CTAs while the kernel before it on the
// stream runs (or once that one's CTAs all ran griddepcontrol.launch_dependents) and must wait in-kernel
// (griddep_wait) before it reads or writes anything an earlier kernel touches. Stream capture records the attribute
// as a programmatic edge of the CUDA graph (CUDA >= 12.3). Both instructions are no-ops before sm_90 and in a kernel
// launched without the attribute.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace accel {

// Wait until the grids before this one on the stream have completed and their writes are visible.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Let the grid behind this one start its CTAs (they wait in turn before reading this one's outputs; a CTA that
// exits counts as having signalled).
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches `kernel` with programmatic stream serialization (pdl) or as a plain launch; returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream, bool pdl,
                       Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace accel
