// Does compute-sanitizer racecheck model the ordering that named barriers give between warpgroups?
// (Background: the sm90 backward hands shared-memory tiles between warpgroups with bar.arrive on one side and
// bar.sync on the other; docs/archive/hstu_sm90_log.md "racecheck and named barriers".)
// A producer group of 4 warps and a consumer group of 4 warps share 128 ints of shared memory; barrier 1 / 2 have
// 256 participants. Modes (one per process: racecheck reports carry no mode):
//   0  RAW: producer (warps 0-3) writes, bar.arrive 1; consumer (warps 4-7) bar.sync 1, reads
//   1  RAW, bar.sync on both sides (control)
//   2  no barrier at all (a real race: must be flagged)
//   3  as 0 with the roles of the warps swapped (producer 4-7, consumer 0-3)
//   4  as 0 in a 384-thread block whose warps 0-3 exit at once (producer 4-7, consumer 8-11)
//   5  as 4 with producer 8-11, consumer 4-7 (the backward's warpgroup 1 -> warpgroup 0 direction)
//   6  WAR over 4 rounds: the consumer reads, bar.arrive 2; the producer bar.sync 2, then overwrites (as 5)
//   7  WAW: the producer writes, bar.arrive 1; the consumer bar.sync 1, then writes the same words (as 5)
//   8  as 7 with bar.sync on both sides (control)
// Every mode computes the same values as a sequential run (printed), so any racecheck report for 0, 1, 3-8 is
// about the tool's model: PTX says bar.arrive and bar.sync both make the thread's prior memory accesses (reads
// included) "performed" relative to the participants when the barrier completes.
// Build and run on a Hopper machine (sm_90a; any CUDA 12.x / 13.x):
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o /tmp/rcnb tools/hstu_dev/racecheck_named_barrier.cu
//   for m in 0 1 2 3 4 5 6 7 8; do compute-sanitizer --tool racecheck /tmp/rcnb $m | grep -E "mode|SUMMARY"; done
#include <cstdio>
#include <cstdlib>

__global__ void probe(int mode, int* out) {
  __shared__ int buf[128];
  const int t = threadIdx.x;
  int pbase = 0, cbase = 128;
  if (mode == 3) pbase = 128, cbase = 0;
  if (mode == 4) pbase = 128, cbase = 256;
  if (mode >= 5) pbase = 256, cbase = 128;
  if (mode >= 4 && t < 128) return;
  const bool prod = t >= pbase && t < pbase + 128, cons = t >= cbase && t < cbase + 128;
  const int rounds = mode == 6 ? 4 : 1;
  int acc = 0;
  for (int r = 0; r < rounds; ++r) {
    if (prod) {
      if (mode == 6 && r > 0) asm volatile("bar.sync 2, 256;" ::: "memory");
      buf[t - pbase] = (t - pbase) * 3 + 1 + r;
      if (mode == 1 || mode == 8) asm volatile("bar.sync 1, 256;" ::: "memory");
      else if (mode != 2) asm volatile("bar.arrive 1, 256;" ::: "memory");
    } else if (cons) {
      if (mode != 2) asm volatile("bar.sync 1, 256;" ::: "memory");
      if (mode == 7 || mode == 8) {
        buf[(t - cbase) ^ 5] = -1;
      } else {
        acc += buf[(t - cbase) ^ 5];
      }
      if (mode == 6 && r + 1 < rounds) asm volatile("bar.arrive 2, 256;" ::: "memory");
    }
  }
  __syncthreads();
  if (cons) out[t - cbase] = mode == 7 || mode == 8 ? buf[t - cbase] : acc;
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;
  int* out;
  if (cudaMalloc(&out, 128 * sizeof(int)) != cudaSuccess) return 1;
  for (int mode = 0; mode <= 8; ++mode) {
    if (only >= 0 && mode != only) continue;
    probe<<<1, mode >= 4 ? 384 : 256>>>(mode, out);
    int h[128];
    cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
    const int want = mode == 6 ? 16 + 17 + 18 + 19 : (mode >= 7 ? -1 : 16);
    printf("mode %d: out[0] = %d (sequential: %d), %s\n", mode, h[0], want, cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}
