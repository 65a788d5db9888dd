"""The HSTU attention kernel instantiation matrix: the ONE place that lists the generated kernel files.

Read by hstu/BUILD.bazel (cuda_instances) and by tests/hstu/test_generated_matrix.py; valid Starlark and Python.
Masks, delta-q, seqused and rab are run-time parameters, so the matrix is dtype x head dim x direction only.
"""

HSTU_ARCH = "sm80"  # mma.sync-class kernels: valid on sm80, sm86, sm89, sm90

HSTU_DTYPES = {
    "fp16": "__half",
    "bf16": "__nv_bfloat16",
}

HSTU_HDIMS = [32, 64, 128, 256]

HSTU_DIRECTIONS = ["fwd", "bwd"]

def hstu_instance_name(direction, arch, dtype, hdim):
    """File stem of one instantiation; parameters in a fixed order: direction, arch, dtype, head dim."""
    return "hstu_%s_%s_%s_hdim%d" % (direction, arch, dtype, hdim)

def hstu_instance_params(direction, arch, dtype, hdim):
    """Template parameters of one instantiation (the generated file is named by NAME)."""
    return {
        "ARCH": arch,
        "CTYPE": HSTU_DTYPES[dtype],
        "DIRECTION": direction,
        "DTYPE": dtype,
        "HDIM": str(hdim),
        "NAME": hstu_instance_name(direction, arch, dtype, hdim),
    }

HSTU_INSTANCES = {
    hstu_instance_name(direction, HSTU_ARCH, dtype, hdim): hstu_instance_params(direction, HSTU_ARCH, dtype, hdim)
    for direction in HSTU_DIRECTIONS
    for dtype in sorted(HSTU_DTYPES.keys())
    for hdim in HSTU_HDIMS
}

# Hopper (sm_90a: wgmma, TMA, setmaxnreg) kernels, selected at run time on compute capability 9.0. Built only
# when the build targets sm_90a (`--config=sm90`, or the default of both archs); in an sm80-only build each file
# compiles to a host stub and the op keeps the sm80-class kernels. D=32 and the deterministic backward are left
# to the sm80-class kernels; rab / drab run here at every head dim (see hstu_ops.cc use_sm90_fwd/bwd).
HSTU_SM90_ARCH = "sm90"

HSTU_SM90_HDIMS = {
    "fwd": [64, 128, 256],
    "bwd": [64, 128, 256],
}

HSTU_SM90_DIRECTIONS = ["fwd", "bwd"]

HSTU_SM90_INSTANCES = {
    hstu_instance_name(direction, HSTU_SM90_ARCH, dtype, hdim): hstu_instance_params(
        direction,
        HSTU_SM90_ARCH,
        dtype,
        hdim,
    )
    for direction in HSTU_SM90_DIRECTIONS
    for dtype in sorted(HSTU_DTYPES.keys())
    for hdim in HSTU_SM90_HDIMS[direction]
}

# Hopper FP8 (e4m3) forward (issue 36; hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh): one unit per head dim, the
# output dtype (bf16 / fp16) a run-time parameter like the masks; built and registered like the sm90 units above.
HSTU_SM90_FP8_HDIMS = [64, 128, 256]

HSTU_SM90_FP8_INSTANCES = {
    "hstu_fwd_sm90_fp8_hdim%d" % hdim: {"HDIM": str(hdim), "NAME": "hstu_fwd_sm90_fp8_hdim%d" % hdim}
    for hdim in HSTU_SM90_FP8_HDIMS
}

# Hopper FP8 backward (issue 36; hstu/csrc/sm90/hstu_bwd_fp8_sm90_kernel.cuh; private, kernel_options(fp8_bwd=True)):
# D = 64, 128 and 256 (D = 256: its own split-D kernel, hstu/csrc/sm90/hstu_bwd_fp8_sm90_d256_kernel.cuh).
HSTU_SM90_FP8_BWD_HDIMS = [64, 128, 256]

HSTU_SM90_FP8_BWD_INSTANCES = {
    "hstu_bwd_sm90_fp8_hdim%d" % hdim: {"HDIM": str(hdim), "NAME": "hstu_bwd_sm90_fp8_hdim%d" % hdim}
    for hdim in HSTU_SM90_FP8_BWD_HDIMS
}
