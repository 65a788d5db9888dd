// Fixture op library for tests/build (registered in its own namespace, never shipped).
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include "common/stable_utils.h"

namespace probe {
int64_t probe_answer() { return 42; }
}  // namespace probe

STABLE_TORCH_LIBRARY(accel_probe, m) { m.def("answer() -> int"); }

STABLE_TORCH_LIBRARY_IMPL(accel_probe, CompositeExplicitAutograd, m) {
  m.impl("answer", TORCH_BOX(&probe::probe_answer));
}
