// The training forward with its copy of the module's running refusals into their pinned host mirror
// (lookup_step's `refused_host`): the forward kernel's first block stores them, after the insert and resolve
// passes in stream order, so a step makes no memcpy call (and the device runs no copy) of its own for it.
// Defined in dynamicemb/csrc/lookup/pool_kernels.cu (declared here, beside the ops, so that the lookup kernels'
// shared headers stay as they are).
#pragma once

#include <cstdint>

#include "dynamicemb/csrc/lookup/lookup_types.h"
#include "dynamicemb/csrc/lookup/validate_types.h"

namespace dynamicemb {
namespace lookup {

// launch_forward, plus the mirror's stores: refused_total (num_tables) device, refused_host (num_tables) pinned
// host memory (device-mapped under UVA) or null for none. checks_beside (an eval's sequence probe launched as a
// programmatic dependent): the forward lets the device checks start beside it (launch_validate_beside, then
// launch_eval_verdict) and reads no verdict itself.
template <int V, int O>
void launch_forward_mirrored(const ForwardParams& p, bool vec4, const int64_t* refused_total, int64_t* refused_host,
                             int num_tables, void* stream, bool checks_beside);

// The checks beside an eval's forward launched with checks_beside (validate_kernels.cu): a programmatic dependent of
// the forward that writes p.block_bad (required) and ends after the forward; returns its blocks.
int launch_validate_beside(const ValidateParams& p, void* stream);

// Their verdict (pool_kernels.cu): a programmatic dependent of launch_validate_beside's grid that rewrites every row
// of a failing batch with its fallback value.
template <int V, int O>
void launch_eval_verdict(const ForwardParams& p, const int32_t* check_flags, int check_blocks, void* stream);

}  // namespace lookup
}  // namespace dynamicemb
