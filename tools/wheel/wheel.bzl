"""`native_wheel`: a deterministic py3-none-manylinux_2_28_x86_64 wheel of Python sources plus prebuilt .so files.

rules_python's py_wheel packs pure-Python wheels only; this rule runs tools/wheel/build_wheel.py, which also
writes `<package>/_build_info.py` (version, CUDA archs and CUDA version of the build) for the doctor and the
device check. The platform tag is earned by the link (tools/python/defs.bzl: glibc <= 2.28 symbol versions,
static libstdc++) and checked by tests/build/test_manylinux.py.
"""

load("//tools/cuda:cuda.bzl", "CudaArchsInfo")
load("@local_cuda//:defs.bzl", "CUDA_VERSION")
load("//:version.bzl", "VERSION")

PLATFORM = "manylinux_2_28_x86_64"

# Placeholder until the project has a public home (no registry host names in metadata).
PROJECT_URL = "https://example.invalid/accelerated_modules"

CLASSIFIERS = [
    "Development Status :: 3 - Alpha",
    "Environment :: GPU :: NVIDIA CUDA",
    "Intended Audience :: Science/Research",
    "License :: OSI Approved :: Apache Software License",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Programming Language :: Python :: 3.14",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
]

def _native_wheel_impl(ctx):
    name = "%s-%s-py3-none-%s.whl" % (ctx.attr.distribution, VERSION, PLATFORM)
    out = ctx.actions.declare_file(name)
    prefix = ctx.attr.strip_prefix + "/" if ctx.attr.strip_prefix else ""
    files = []
    for f in ctx.files.srcs:
        rel = f.short_path
        if not rel.startswith(prefix):
            fail("native_wheel: %s is not under %s" % (rel, prefix))
        files.append("%s/%s=%s" % (ctx.attr.package, rel[len(prefix):], f.path))
    for f in ctx.files.libs:
        files.append("%s/%s=%s" % (ctx.attr.package, f.basename, f.path))
    args = ctx.actions.args()
    args.add(ctx.file._tool)
    args.add("--distribution", ctx.attr.distribution)
    args.add("--version", VERSION)
    args.add("--package", ctx.attr.package)
    args.add("--summary", ctx.attr.summary)
    args.add("--out", out)
    args.add("--platform", PLATFORM)
    args.add("--python-requires", ">=3.10")
    for r in ctx.attr.requires:
        args.add("--requires", r)
    archs = ctx.attr._archs[CudaArchsInfo].archs
    args.add_all(CLASSIFIERS, before_each = "--classifier")
    args.add_all(["cuda", "pytorch"] + archs + (["compute_80"] if "sm_80" in archs else []), before_each = "--keyword")
    args.add("--project-url", "Source, " + PROJECT_URL)
    if ctx.file.readme:
        args.add("--readme", ctx.file.readme)
    args.add("--build-info", "CUDA_ARCHS=" + ",".join(archs))
    args.add("--build-info", "CUDA_VERSION=" + CUDA_VERSION)
    args.add_all(sorted(files))
    ctx.actions.run(
        executable = ctx.executable._python,
        arguments = [args],
        inputs = ctx.files.srcs + ctx.files.libs + [ctx.file._tool] + ctx.files.readme,
        outputs = [out],
        mnemonic = "NativeWheel",
        use_default_shell_env = True,
        progress_message = "wheel %s" % name,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

native_wheel = rule(
    implementation = _native_wheel_impl,
    attrs = {
        "distribution": attr.string(mandatory = True),
        "package": attr.string(mandatory = True, doc = "import name; files go under it"),
        "srcs": attr.label_list(allow_files = [".py"], doc = "Python files of this Bazel package"),
        "libs": attr.label_list(allow_files = [".so"], doc = "shared libraries, placed at <package>/<basename>"),
        "strip_prefix": attr.string(doc = "source dir of the package, stripped from srcs paths"),
        "summary": attr.string(),
        "readme": attr.label(allow_single_file = [".md"], doc = "long description (markdown)"),
        "requires": attr.string_list(),
        "_tool": attr.label(default = "//tools/wheel:build_wheel.py", allow_single_file = True),
        "_python": attr.label(default = "@local_python//:python3", executable = True, cfg = "host", allow_single_file = True),
        "_archs": attr.label(default = "//tools/cuda:archs"),
    },
)
