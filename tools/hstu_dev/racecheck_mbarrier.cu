// Does compute-sanitizer racecheck model the ordering that an mbarrier gives between a producer's st.shared and
// the consumers' ld.shared? (The Hopper FP8 backward kernels hand each tile's q / dO descale factors this way: the
// producer thread stores them, then mbarrier.arrive.expect_tx on the stage's full barrier; the consumers
// try_wait on it, then load them; they arrive on the stage's empty barrier once done, and the producer waits on it
// before it overwrites the words. racecheck reported hazards between exactly these instructions at D = 256.)
// One producer thread (warp 0), 4 consumer warps (warps 4-7), 2 stages of one float each, 8 rounds. Modes (one per
// process: racecheck's reports carry no mode):
//   0  the kernel's protocol: full (count 1: mbarrier.arrive.expect_tx with 0 bytes) / empty (count 4: lane 0 of
//      each consumer warp after __syncwarp), both with PTX's default .release / .acquire at CTA scope
//   1  as 0 with a __syncthreads after each store and before each overwrite (control: one round per __syncthreads)
//   2  no synchronization at all (a real race: must be flagged)
// Every mode but 2 computes the sequential sum (printed), so a racecheck report for 0 is about the tool's model.
// Build and run on a Hopper machine (sm_90a; CUDA 12.x / 13.x):
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o /tmp/rcmb tools/hstu_dev/racecheck_mbarrier.cu
//   for m in 0 1 2; do compute-sanitizer --tool racecheck /tmp/rcmb $m | grep -E "mode|SUMMARY"; done
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ uint32_t sa(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void init(uint32_t b, uint32_t n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(n) : "memory");
}
__device__ __forceinline__ void arrive_tx(uint32_t b) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 0;" ::"r"(b) : "memory");
}
__device__ __forceinline__ void arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
}
__device__ __forceinline__ void wait(uint32_t b, uint32_t ph) {
  asm volatile("{\n.reg .pred d;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 d, [%0], %1;\n@!d bra W_%=;\n}\n"
               ::"r"(b), "r"(ph) : "memory");
}

constexpr int kRounds = 8, kStages = 2;

__global__ void probe(int mode, float* out) {
  __shared__ alignas(8) uint64_t bars[2 * kStages];
  __shared__ float word[kStages];
  const int t = threadIdx.x;
  const uint32_t full0 = sa(&bars[0]), empty0 = sa(&bars[kStages]);
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) init(full0 + 8 * s, 1), init(empty0 + 8 * s, 4);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  float acc = 0.f;
  for (int i = 0; i < kRounds; ++i) {
    const int s = i % kStages;
    const uint32_t ph = (i / kStages) & 1;
    if (mode == 1) __syncthreads();
    if (t == 0) {
      if (mode == 0) wait(empty0 + 8 * s, ph ^ 1);
      word[s] = 1.5f * i + 1.f;
      if (mode == 0) arrive_tx(full0 + 8 * s);
    }
    if (mode == 1) __syncthreads();
    if (t >= 128) {
      if (mode == 0) wait(full0 + 8 * s, ph);
      acc += word[s];
      __syncwarp();
      if (mode == 0 && t % 32 == 0) arrive(empty0 + 8 * s);
    }
  }
  if (t == 128) *out = acc;
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;
  float* out;
  if (cudaMalloc(&out, sizeof(float)) != cudaSuccess) return 1;
  float want = 0.f;
  for (int i = 0; i < kRounds; ++i) want += 1.5f * i + 1.f;
  for (int mode = 0; mode <= 2; ++mode) {
    if (only >= 0 && mode != only) continue;
    probe<<<1, 256>>>(mode, out);
    float h = 0.f;
    cudaMemcpy(&h, out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("mode %d: sum %.1f (sequential: %.1f), %s\n", mode, h, want, cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}
