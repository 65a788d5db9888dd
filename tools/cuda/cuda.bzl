"""CUDA compilation for Bazel 4.2.3 without rules_cuda.

`cuda_library` compiles every `.cu` in its own nvcc action (one cacheable unit per translation unit) for the
archs chosen by the `//tools/cuda:archs` flag (`--config=sm80` -> sm_80, `--config=sm90` -> sm_90a, default
both), and wraps the objects in a `cc_library` so host C++ targets can depend on them. Each action also writes
nvcc's `--resource-usage` report (registers, shared memory, stack, spills), which `//tools/ptxas_report`
collects.
"""

load("@local_cuda//:defs.bzl", "NVCC")

CudaArchsInfo = provider(doc = "CUDA archs to build for", fields = ["archs"])

PtxasInfo = provider(doc = "ptxas resource reports of nvcc actions", fields = ["logs"])

def _cuda_archs_flag_impl(ctx):
    archs = [a.strip() for a in ctx.build_setting_value.split(",") if a.strip()]
    for a in archs:
        if a not in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"):
            fail("//tools/cuda:archs: unsupported arch %r (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)" % a)
    return CudaArchsInfo(archs = archs)

cuda_archs_flag = rule(
    implementation = _cuda_archs_flag_impl,
    build_setting = config.string(flag = True),
    doc = "Comma-separated CUDA archs, e.g. 'sm_80,sm_90a'.",
)

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-DNDEBUG",  # without it ptxas serializes wgmma (warning C7510)
    "-Xcompiler",
    "-fPIC",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-Xcudafe",
    "--diag_suppress=177",  # unused variables in CUTLASS headers
    "--resource-usage",
]

def _gencode(arch):
    cc = arch[len("sm_"):]
    if arch == "sm_80":
        # SASS runs only on its own major version: also embed compute_80 PTX so an sm80-only build still
        # runs (JIT-compiled once by the driver) on sm_90 and newer.
        return "-gencode=arch=compute_80,code=[sm_80,compute_80]"
    return "-gencode=arch=compute_%s,code=sm_%s" % (cc, cc)

def _nvcc_objects_impl(ctx):
    archs = ctx.attr._archs[CudaArchsInfo].archs
    if ctx.attr.only_archs:
        archs = [a for a in archs if a in ctx.attr.only_archs]
    cc_infos = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d]
    headers = depset(ctx.files.hdrs, transitive = [c.compilation_context.headers for c in cc_infos])
    includes = depset(
        [".", ctx.bin_dir.path],
        transitive = [c.compilation_context.includes for c in cc_infos] +
                     [c.compilation_context.quote_includes for c in cc_infos] +
                     [c.compilation_context.system_includes for c in cc_infos],
    )
    defines = depset(transitive = [c.compilation_context.defines for c in cc_infos])
    objs = []
    logs = []
    for src in ctx.files.srcs:
        stem = src.basename[:-len(".cu")]
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, stem))
        log = ctx.actions.declare_file("_cuda_objs/%s/%s.ptxas.txt" % (ctx.label.name, stem))
        args = ctx.actions.args()
        args.add(NVCC)
        args.add_all(NVCC_FLAGS)
        args.add_all([_gencode(a) for a in archs])
        args.add('-DACCEL_CUDA_ARCHS="%s"' % ",".join(archs))
        if not archs:
            # None of the unit's archs is being built: the source compiles its host-side stub only.
            args.add("-DACCEL_NO_DEVICE_CODE=1")
        args.add_all(includes, format_each = "-I%s")
        args.add_all(defines, format_each = "-D%s")
        args.add_all(ctx.attr.copts)
        args.add("-c", src)
        args.add("-o", obj)
        ctx.actions.run_shell(
            inputs = depset([src], transitive = [headers]),
            outputs = [obj, log],
            # The resource report goes to a file; on failure the whole compiler output is shown. nvcc's temporary
            # files get a directory of their own: their names derive from the process id, which is the same (3) for
            # every action in linux-sandbox's PID namespace while /tmp is shared, so two nvcc actions running at once
            # could delete each other's files ("ptxas fatal: Input file '/tmp/tmpxft_00000003_...' could not be
            # opened").
            command = ('log="$1"; shift; t="$(mktemp -d "${TMPDIR:-/tmp}/nvcc.XXXXXXXX")" || exit 1; ' +
                       'TMPDIR="$t" "$@" >"$log" 2>&1; rc=$?; rm -rf "$t"; ' +
                       '[ "$rc" -eq 0 ] || { cat "$log" >&2; exit 1; }'),
            arguments = [log.path, args],
            mnemonic = "NvccCompile",
            use_default_shell_env = True,  # PATH for the host compiler (strict: /bin:/usr/bin:/usr/local/bin)
            progress_message = "nvcc %s (%s)" % (src.short_path, ",".join(archs) or "host stub"),
        )
        objs.append(obj)
        logs.append(log)
    return [
        DefaultInfo(files = depset(objs)),
        OutputGroupInfo(ptxas_logs = depset(logs)),
        PtxasInfo(logs = depset(logs)),
    ]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "only_archs": attr.string_list(),
        "_archs": attr.label(default = "//tools/cuda:archs"),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], only_archs = [], visibility = None, **kwargs):
    """Compiles each .cu of `srcs` in its own nvcc action; usable as a cc dependency.

    Args:
      name: target name (a cc_library).
      srcs: .cu files, one nvcc action each.
      hdrs: headers the sources include (also exported to dependents).
      deps: cc_library targets providing headers (CUTLASS, CUDA and the workspace root are always available).
      copts: extra nvcc flags.
      only_archs: if set, build device code only for these of the selected archs (e.g. ["sm_90a"] for
        wgmma kernels); when none of them is selected, the sources are compiled with ACCEL_NO_DEVICE_CODE
        defined and must then provide host-side stubs.
      visibility: as usual.
      **kwargs: passed to the cc_library (e.g. tags).
    """
    _nvcc_objects(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cutlass//:cutlass", "@local_cuda//:cuda_headers"],
        copts = copts,
        only_archs = only_archs,
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart_static", "@local_cuda//:cuda_headers"],
        alwayslink = 1,
        linkstatic = 1,
        visibility = visibility,
        **kwargs
    )
