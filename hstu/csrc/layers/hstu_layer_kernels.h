// Fused element-wise / row-wise steps of HSTULayer (hstu/_layers.py): host-side declarations, no torch headers.
//
// - LayerNorm(x) * u with an affine weight / bias (the attention output's norm times the u gate), forward and
//   backward (dx, du, dweight, dbias); fp32 statistics and accumulation.
// - SiLU of the uvqk projection fused with its split into four contiguous (rows, width) tensors u, v, q, k, and
//   the backward of both (one pass instead of silu + split + three .contiguous() copies, and cat + silu backward).
// Activations are float32 / float16 / bfloat16; the norm's weight and bias any of these (fp32 parameters with
// bf16 activations under autocast). The torch composition in hstu/_fused.py is the reference and the CPU path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hstu {
namespace layers {

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

struct LayerNormMulFwdParams {
  const void* x;       // (rows, cols), dtype
  const void* u;       // (rows, cols), dtype
  const void* weight;  // (cols), wdtype
  const void* bias;    // (cols), wdtype
  void* out;           // (rows, cols), dtype: ((x - mean) * rstd * weight + bias) * u
  float* mean;         // (rows)
  float* rstd;         // (rows): 1 / sqrt(var + eps), biased variance
  int64_t rows, cols;
  float eps;
  DType dtype, wdtype;
};

struct LayerNormMulBwdParams {
  const void* dout;    // (rows, cols), dtype
  const void* x;       // (rows, cols), dtype
  const void* u;       // (rows, cols), dtype
  const void* weight;  // (cols), wdtype
  const void* bias;    // (cols), wdtype
  const float* mean;   // (rows)
  const float* rstd;   // (rows)
  void* dx;            // (rows, cols), dtype
  void* du;            // (rows, cols), dtype
  float* partial;      // (2, chunks, cols) workspace: per row chunk, the sums of dweight and dbias
  void* dweight;       // (cols), wdtype
  void* dbias;         // (cols), wdtype
  int64_t rows, cols;
  int chunks;          // layer_norm_mul_bwd_chunks(rows, cols, device)
  DType dtype, wdtype;
};

struct SiluSplitParams {
  const void* x;  // (rows, 4 * width): the projection before SiLU
  void* out[4];   // forward: (rows, width) each, silu(x[:, i*width:(i+1)*width]) contiguous
  const void* dout[4];  // backward: (rows, width) each, the gradients of out
  void* dx;             // backward: (rows, 4 * width)
  int64_t rows, width;
  DType dtype;
};

// Row chunks of the dweight / dbias reduction (the workspace holds 2 * chunks * cols floats); >= 1.
int layer_norm_mul_bwd_chunks(int64_t rows, int64_t cols, int device);

// Each enqueues its kernels on `stream` (no synchronization; CUDA-graph capturable).
cudaError_t launch_layer_norm_mul_fwd(const LayerNormMulFwdParams& p, cudaStream_t stream);
cudaError_t launch_layer_norm_mul_bwd(const LayerNormMulBwdParams& p, cudaStream_t stream);
cudaError_t launch_silu_split_fwd(const SiluSplitParams& p, cudaStream_t stream);
cudaError_t launch_silu_split_bwd(const SiluSplitParams& p, cudaStream_t stream);

}  // namespace layers
}  // namespace hstu
