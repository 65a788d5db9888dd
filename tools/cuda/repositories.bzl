"""`local_cuda`: the CUDA toolkit installed on this machine, as a repository.

Finds the toolkit from $CUDA_HOME / $CUDA_PATH, else the directory of the real `nvcc` on PATH (resolving
wrapper scripts like /usr/local/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc), else /usr/local/cuda.
Exposes:
  @local_cuda//:cuda_headers    cuda_runtime.h & co. for host C++ (ops layer)
  @local_cuda//:cudart_static   the static CUDA runtime (wheels must not depend on a system libcudart)
  @local_cuda//:defs.bzl        NVCC (absolute path) and CUDA_VERSION, used by //tools/cuda:cuda.bzl
"""

def _find_cuda_root(rctx):
    for var in ["CUDA_HOME", "CUDA_PATH"]:
        v = rctx.os.environ.get(var, "")
        if v and rctx.path(v + "/bin/nvcc").exists:
            return v
    nvcc = rctx.which("nvcc")
    if nvcc:
        # nvcc on PATH may be a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`): ask bash.
        res = rctx.execute(["bash", "-c", "readlink -f \"$(dirname \"$(readlink -f '%s')\")\"" % nvcc])
        cand = res.stdout.strip()
        if cand.endswith("/bin") and rctx.path(cand[:-4] + "/include/cuda_runtime.h").exists:
            return cand[:-4]
        res = rctx.execute(["grep", "-o", "/[^ \"]*/bin/nvcc", str(nvcc)])
        for line in res.stdout.splitlines():
            root = line.strip()[:-len("/bin/nvcc")]
            if rctx.path(root + "/include/cuda_runtime.h").exists:
                return root
    if rctx.path("/usr/local/cuda/bin/nvcc").exists:
        return "/usr/local/cuda"
    fail("local_cuda: no CUDA toolkit found (set CUDA_HOME)")

def _local_cuda_impl(rctx):
    root = str(rctx.path(_find_cuda_root(rctx)).realpath)
    rctx.symlink(root + "/include", "include")
    lib = root + "/lib64/libcudart_static.a"
    if not rctx.path(lib).exists:
        lib = root + "/targets/x86_64-linux/lib/libcudart_static.a"
    rctx.symlink(lib, "lib/libcudart_static.a")
    res = rctx.execute([root + "/bin/nvcc", "--version"])
    version = "unknown"
    for line in res.stdout.splitlines():
        if "release" in line:
            version = line.split("release")[1].split(",")[0].strip()
    rctx.file("defs.bzl", "NVCC = %r\nCUDA_ROOT = %r\nCUDA_VERSION = %r\n" % (root + "/bin/nvcc", root, version))
    rctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

exports_files(["defs.bzl"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/*.h", "include/*.hpp", "include/crt/**", "include/nv/**"]),
    includes = ["include"],
)

cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lpthread", "-lrt"],
)
""")

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    environ = ["CUDA_HOME", "CUDA_PATH", "PATH"],
    local = True,
)
