// Launcher declarations for the generated HSTU instantiations (host side; no torch headers).
//
// run_hstu_fwd<T, D> / run_hstu_bwd<T, D> are defined in hstu_{fwd,bwd}_kernel.cuh and explicitly instantiated
// once each by the files generated from hstu/kernel_matrix.bzl. Each generated file also records its name and
// target archs in `compiled_instances()` at load time, which the `compiled_kernels` op reports.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "hstu/csrc/common/hstu_params.h"

namespace hstu {

template <typename T, int D>
cudaError_t run_hstu_fwd(const HstuParams& p, cudaStream_t stream);

template <typename T, int D>
cudaError_t run_hstu_bwd(const HstuParams& p, cudaStream_t stream);

struct InstanceRecord {
  std::string name;   // e.g. hstu_fwd_sm80_bf16_hdim128
  std::string archs;  // e.g. sm_80,sm_90a, or "unknown"
};

inline std::vector<InstanceRecord>& compiled_instances() {
  static std::vector<InstanceRecord> records;
  return records;
}

inline bool register_instance(const char* name, const char* archs) {
  compiled_instances().push_back({name, archs});
  return true;
}

}  // namespace hstu
