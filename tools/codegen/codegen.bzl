"""`cuda_instances`: generated kernel instantiation files, one Bazel unit each.

A kernel family writes its instantiation matrix ONCE, in a `.bzl` file that computes
`{file_stem: {KEY: value}}` (the file names spell every parameter in a fixed order); the BUILD file passes it
here and the tests read the same `.bzl`. Each entry becomes `<file_stem>.cu` (generated at build time from the
template by tools/codegen/instantiate.py) compiled by its own `cuda_library` named `<file_stem>`.
"""

load("//tools/cuda:cuda.bzl", "cuda_library")

def _instance_impl(ctx):
    out = ctx.actions.declare_file(ctx.attr.out)
    args = ctx.actions.args()
    args.add(ctx.file._tool)
    args.add("--template", ctx.file.template)
    args.add("--out", out)
    args.add_all(["%s=%s" % (k, v) for k, v in sorted(ctx.attr.params.items())])
    ctx.actions.run(
        executable = ctx.executable._python,
        arguments = [args],
        inputs = [ctx.file.template, ctx.file._tool],
        outputs = [out],
        mnemonic = "KernelInstance",
        use_default_shell_env = True,
        progress_message = "generating %s" % ctx.attr.out,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

_kernel_instance = rule(
    implementation = _instance_impl,
    attrs = {
        "template": attr.label(allow_single_file = True, mandatory = True),
        "out": attr.string(mandatory = True),
        "params": attr.string_dict(),
        "_tool": attr.label(default = "//tools/codegen:instantiate.py", allow_single_file = True),
        "_python": attr.label(default = "@local_python//:python3", executable = True, cfg = "host", allow_single_file = True),
    },
)

def cuda_instances(name, template, instances, hdrs = [], deps = [], copts = [], only_archs = [], visibility = None):
    """One generated .cu and one cuda_library per matrix entry, plus `name` aggregating them.

    Args:
      name: the aggregate cc_library.
      template: the .cu template with {{KEY}} placeholders.
      instances: {file_stem: {KEY: value}} from the family's matrix .bzl.
      hdrs: headers the template includes.
      deps: header libraries.
      copts: extra nvcc flags.
      only_archs: see cuda_library (e.g. ["sm_90a"] for a Hopper-only family).
      visibility: of the aggregate.
    """
    for stem in sorted(instances.keys()):
        _kernel_instance(
            name = stem + "_src",
            template = template,
            out = stem + ".cu",
            params = instances[stem],
        )
        cuda_library(
            name = stem,
            srcs = [":" + stem + "_src"],
            hdrs = hdrs,
            deps = deps,
            copts = copts,
            only_archs = only_archs,
        )
    native.cc_library(
        name = name,
        deps = [":" + stem for stem in sorted(instances.keys())],
        visibility = visibility,
    )
