"""`torch_op_library`: a shared library of torch ops registered through the torch stable ABI.

The result `<name>.so` has no Python or libtorch C++ symbols undefined, links the CUDA runtime statically (its
symbols hidden), and carries `NEEDED libtorch_cpu.so` (the aoti_*/torch_* C functions live there; torch loads
it RTLD_LOCAL, so only a NEEDED entry lets the loader bind them). Built once, it loads on any torch >= 2.10 and
any Python (the wheel is tagged py3-none); glibc symbol versions <= 2.28 and a static, hidden libstdc++
(//tools/manylinux) make it load on any manylinux_2_28 system.
"""

load("//tools/manylinux:glibc.bzl", "MANYLINUX_LINKOPTS")

TORCH_TARGET_VERSION = "0x020a000000000000"  # 2.10: the oldest torch our wheels load on

def torch_op_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None):
    """Builds `<name>.so` from host C++ op registrations and their CUDA dependencies.

    Args:
      name: base name; the shared library target is `<name>.so`.
      srcs: .cc files (STABLE_TORCH_LIBRARY / STABLE_TORCH_LIBRARY_IMPL registrations).
      hdrs: private headers.
      deps: cuda_library / cc_library targets.
      copts: extra host compiler flags.
      visibility: of the .so target.
    """
    native.cc_library(
        name = name + "_ops",
        srcs = srcs,
        hdrs = hdrs,
        copts = ["-DTORCH_TARGET_VERSION=" + TORCH_TARGET_VERSION, "-fvisibility=hidden"] + copts,
        deps = deps + [
            "//common:stable_utils",
            "@local_torch//:headers",
            "@local_cuda//:cuda_headers",
        ],
        alwayslink = 1,
        linkstatic = 1,
        visibility = ["//visibility:private"],
    )
    native.cc_binary(
        name = name + ".so",
        deps = [":" + name + "_ops", "//tools/manylinux:glibc_compat"],
        linkshared = 1,
        linkstatic = 1,
        additional_linker_inputs = ["@local_torch//:libtorch_cpu.so"],
        linkopts = [
            "-Wl,--no-as-needed",
            "$(location @local_torch//:libtorch_cpu.so)",
            "-Wl,--exclude-libs,ALL",  # keep the static cudart's symbols out of our dynamic symbol table
            # No static symbol table: nvcc names each object's FILE symbol after a PID-numbered temp file,
            # which would make the library (and the wheel) differ from build to build.
            "-Wl,--strip-all",
        ] + MANYLINUX_LINKOPTS,
        visibility = visibility,
    )
