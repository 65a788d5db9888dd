// Key hash of the scored hash table: the 64-bit finalizer of MurmurHash3 (fmix64).
// A bijection on 64-bit values with full avalanche, so bucket index and digest taken from different bits of
// the same hash are independent enough for probing. Keys are hashed by their bit pattern, so int64 and uint64
// keys with the same bits hash alike.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ACCEL_HD __host__ __device__ __forceinline__
#else
#define ACCEL_HD inline
#endif

namespace dynamicemb {

ACCEL_HD uint64_t accel_hash_key(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Launcher (hash_kernel.cu): out[i] = accel_hash_key(keys[i]) on `stream`.
void launch_hash_keys(const uint64_t* keys,  // (n)
                      uint64_t* out,         // (n)
                      int64_t n, void* stream);

}  // namespace dynamicemb
