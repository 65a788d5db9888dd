// Definitions for the glibc symbols of GLIBC_REPLACED (glibc.bzl): they have no version <= 2.28.
#include <stdint.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

// libstdc++'s inline atomics skip locking when this is nonzero; 0 (always lock) is correct everywhere.
HIDDEN char __wrap___libc_single_threaded = 0;

// getentropy (GLIBC_2.25) gives the same kernel randomness arc4random would.
HIDDEN uint32_t __wrap_arc4random(void) {
  uint32_t r;
  while (getentropy(&r, sizeof r) != 0) {
  }
  return r;
}
