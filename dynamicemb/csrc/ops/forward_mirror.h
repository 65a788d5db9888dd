// The training forward with its copy of the module's running refusals into their pinned host mirror
// (lookup_step's `refused_host`): the forward kernel's first block stores them, after the insert and resolve
// passes in stream order, so a step makes no memcpy call (and the device runs no copy) of its own for it.
// Defined in dynamicemb/csrc/lookup/pool_kernels.cu (declared here, beside the ops, so that the lookup kernels'
// shared headers stay as they are).
#pragma once

#include <cstdint>

#include "dynamicemb/csrc/lookup/lookup_types.h"

namespace dynamicemb {
namespace lookup {

// launch_forward, plus the mirror's stores: refused_total (num_tables) device, refused_host (num_tables) pinned
// host memory (device-mapped under UVA) or null for none.
template <int V, int O>
void launch_forward_mirrored(const ForwardParams& p, bool vec4, const int64_t* refused_total, int64_t* refused_host,
                             int num_tables, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
