"""Build targets of the scored hash table, called from dynamicemb/BUILD.bazel as `table_targets()`.

Produces:
  - the 18 generated instantiation units from the ONE
    matrix in table_matrix.bzl (one cuda_library per unit, named by the matrix), aggregated as
    `//dynamicemb:table_kernels`;
  - `TABLE_OP_SRCS` / `TABLE_OP_HDRS`: the op registrations (CPU twin + CUDA dispatch) for the package's
    torch_op_library `_C`, which must also depend on `:table_kernels`.
"""

load("//tools/codegen:codegen.bzl", "cuda_instances")
load("//dynamicemb:table_matrix.bzl", "table_instances")

TABLE_OP_SRCS = ["csrc/ops/table_ops.cc"]

TABLE_OP_HDRS = [
    "csrc/table/table_cpu.h",
    "csrc/table/table_types.h",
]

TABLE_KERNEL_HDRS = [
    "//common:headers",
    "//common:pdl",
    "csrc/table/hash.cuh",
    "csrc/table/probe.cuh",
    "csrc/table/table_kernels.cuh",
    "csrc/table/table_types.h",
    "csrc/table/value_types.cuh",
]

def table_targets():
    cuda_instances(
        name = "table_kernels",
        template = "csrc/table/table_instance.cu.tpl",
        instances = table_instances(),
        hdrs = TABLE_KERNEL_HDRS,
        visibility = ["//visibility:public"],
    )
