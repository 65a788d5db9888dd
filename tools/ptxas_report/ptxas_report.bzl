"""`ptxas_report`: registers, shared memory, stack and spills of every kernel under `deps`.

    bazel build //:ptxas_report --config=sm90   ->  bazel-bin/ptxas_report.csv, bazel-bin/ptxas_report.md

An aspect walks `deps`/`srcs` down to the nvcc actions of //tools/cuda:cuda.bzl and collects their
`--resource-usage` logs; tools/ptxas_report/ptxas_report.py turns them into the two tables.
`fail_on_spill` lists kernel-name globs (demangled) that must not spill: the build fails if one does.
`fail_on_wgmma` lists kernel-name globs that must have no ptxas wgmma diagnostic (`(C75nn)`: wgmma instructions
serialized, warpgroup.arrive / warpgroup.wait injected by the compiler): the build fails if one has.
"""

load("//tools/cuda:cuda.bzl", "PtxasInfo")

_Collected = provider(fields = ["logs"])

def _collect_impl(target, ctx):
    logs = [target[PtxasInfo].logs] if PtxasInfo in target else []
    for attr in ("deps", "srcs"):
        for d in getattr(ctx.rule.attr, attr, []):
            if _Collected in d:
                logs.append(d[_Collected].logs)
    return [_Collected(logs = depset(transitive = logs))]

_collect = aspect(implementation = _collect_impl, attr_aspects = ["deps", "srcs"])

def _ptxas_report_impl(ctx):
    logs = depset(transitive = [d[_Collected].logs for d in ctx.attr.deps]).to_list()
    csv = ctx.actions.declare_file(ctx.label.name + ".csv")
    md = ctx.actions.declare_file(ctx.label.name + ".md")
    args = ctx.actions.args()
    args.add(ctx.file._tool)
    args.add("--csv", csv)
    args.add("--md", md)
    for g in ctx.attr.fail_on_spill:
        args.add("--fail-on-spill", g)
    for g in ctx.attr.fail_on_wgmma:
        args.add("--fail-on-wgmma", g)
    args.add_all(logs)
    ctx.actions.run(
        executable = ctx.executable._python,
        arguments = [args],
        inputs = logs + [ctx.file._tool],
        outputs = [csv, md],
        mnemonic = "PtxasReport",
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([csv, md]), runfiles = ctx.runfiles(files = [csv, md]))]

ptxas_report = rule(
    implementation = _ptxas_report_impl,
    attrs = {
        "deps": attr.label_list(aspects = [_collect]),
        "fail_on_spill": attr.string_list(),
        "fail_on_wgmma": attr.string_list(),
        "_tool": attr.label(default = "//tools/ptxas_report:ptxas_report.py", allow_single_file = True),
        "_python": attr.label(default = "@local_python//:python3", executable = True, cfg = "host", allow_single_file = True),
    },
)
