"""Repositories backed by the project virtualenv (made by ./bazelw at $ACCEL_VENV,
default ~/.cache/accelerated_modules/venv).

The venv lives outside the checkout on purpose: its path appears in the python wrapper, so keeping it the same
for every checkout on a machine keeps action keys, and so remote-cache hits, independent of the checkout path.

  @local_python//:python3      wrapper that runs the venv's interpreter (tools, generators, tests)
  @local_torch//:headers       torch stable-ABI headers (torch/csrc/stable, torch/headeronly, aoti shim)
  @local_torch//:libtorch_cpu.so  a soname stub: linking it gives our op libraries `NEEDED libtorch_cpu.so`,
                               which makes the loader resolve the aoti_* / torch_* C symbols from the
                               libtorch_cpu.so that torch already loaded (RTLD_LOCAL) in the process
  @local_cutlass//:cutlass     CUTLASS + CuTe headers from the nvidia-cutlass wheel
"""

def _venv(rctx):
    v = rctx.os.environ.get("ACCEL_VENV", "")
    if not v:
        v = rctx.os.environ.get("HOME", "/root") + "/.cache/accelerated_modules/venv"
    py = v + "/bin/python3"
    if not rctx.path(py).exists:
        fail("project venv not found at %s: run ./bazelw (it creates it) or set ACCEL_VENV" % v)
    return v, py

def _py(rctx, py, code):
    res = rctx.execute([py, "-c", code])
    if res.return_code != 0:
        fail("venv python failed: %s" % res.stderr)
    return res.stdout.strip()

def _venv_repository_rule(implementation):
    # Re-run when the venv's location (ACCEL_VENV, HOME) changes; local: it reads this machine's venv.
    return repository_rule(implementation = implementation, environ = ["ACCEL_VENV", "HOME"], local = True)

def _local_python_impl(rctx):
    venv, py = _venv(rctx)
    version = _py(rctx, py, "import sys, torch; print('%d.%d.%d torch %s' % (sys.version_info[:3] + (torch.__version__,)))")
    rctx.file("python3", "#!/bin/sh\n# project venv interpreter (Python %s)\nexec %s \"$@\"\n" % (version, py), executable = True)
    rctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

exports_files(["python3"])
""")

local_python = _venv_repository_rule(_local_python_impl)

def _local_torch_impl(rctx):
    venv, py = _venv(rctx)
    torch_dir = _py(rctx, py, "import os, torch; print(os.path.dirname(torch.__file__))")
    rctx.symlink(torch_dir + "/include", "include")
    rctx.file("stub.c", "/* soname stub for libtorch_cpu.so: see tools/python/repositories.bzl */\n")
    res = rctx.execute(["cc", "-shared", "-o", "libtorch_cpu.so", "-Wl,-soname,libtorch_cpu.so", "stub.c"])
    if res.return_code != 0:
        fail("could not build the libtorch_cpu.so stub: " + res.stderr)
    rctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

exports_files(["libtorch_cpu.so"])

cc_library(
    name = "headers",
    hdrs = glob([
        "include/torch/csrc/stable/**",
        "include/torch/headeronly/**",
        "include/torch/csrc/inductor/aoti_torch/c/**",
        "include/c10/macros/**",
        "include/c10/util/**",
        "include/c10/core/**",
        "include/torch/csrc/inductor/aoti_torch/generated/**",
    ]),
    includes = ["include"],
)
""")

local_torch = _venv_repository_rule(_local_torch_impl)

def _local_cutlass_impl(rctx):
    venv, py = _venv(rctx)
    d = _py(rctx, py, "import os, cutlass_library; print(os.path.dirname(cutlass_library.__file__))")
    rctx.symlink(d + "/source/include", "include")
    rctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cutlass",
    hdrs = glob(["include/cutlass/**", "include/cute/**"]),
    includes = ["include"],
)
""")

local_cutlass = _venv_repository_rule(_local_cutlass_impl)
