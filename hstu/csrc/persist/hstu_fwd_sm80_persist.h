// The sm80-class bf16 D = 256 forward as a persistent grid (issue 39; hstu_fwd_sm80_persist.cu): private, for
// comparisons (kernel_options(fwd_sm80_bm64=1) at D = 256, where the 64-row split tiles do not apply).
#pragma once

#include <cuda_runtime_api.h>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

// Runs the persistent pairs kernel where it applies (bf16 inputs, D = 256, no contexts, no split workspace, the
// pairs' 105 KB tile fits); returns cudaErrorNotSupported where it does not (the caller runs the default then).
cudaError_t run_hstu_fwd_sm80_persist_bf16_d256(const HstuParams& p, cudaStream_t stream);

}  // namespace hstu
