"""The HSTU kernel instantiation matrix (hstu/kernel_matrix.bzl) is small, complete and consistently named.

Reads the same .bzl the BUILD file reads (it is valid Python), and checks the template it feeds.
"""

import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MATRIX = os.path.join(ROOT, "hstu", "kernel_matrix.bzl")
TEMPLATE = os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_sm80_instance.cu.tmpl")
TEMPLATE_SM90 = os.path.join(ROOT, "hstu", "csrc", "sm90", "hstu_sm90_instance.cu.tmpl")

pytestmark = pytest.mark.skipif(not os.path.exists(MATRIX), reason="hstu/kernel_matrix.bzl is not in this tree")


def _matrix():
    ns = {}
    with open(MATRIX) as f:
        exec(compile(f.read(), MATRIX, "exec"), ns)
    return ns


def test_matrix_is_dtype_x_hdim_x_direction():
    m = _matrix()
    inst = m["HSTU_INSTANCES"]
    assert len(inst) == len(m["HSTU_DTYPES"]) * len(m["HSTU_HDIMS"]) * len(m["HSTU_DIRECTIONS"]) == 16
    for direction in ("fwd", "bwd"):
        for dtype in ("fp16", "bf16"):
            for hdim in (32, 64, 128, 256):
                assert m["hstu_instance_name"](direction, "sm80", dtype, hdim) in inst


def test_names_spell_parameters_in_fixed_order():
    m = _matrix()
    for stem, params in m["HSTU_INSTANCES"].items():
        assert re.fullmatch(r"hstu_(fwd|bwd)_sm80_(fp16|bf16)_hdim(32|64|128|256)", stem), stem
        assert stem == "hstu_%s_%s_%s_hdim%s" % (params["DIRECTION"], params["ARCH"], params["DTYPE"], params["HDIM"])
        assert params["NAME"] == stem
        assert params["CTYPE"] == m["HSTU_DTYPES"][params["DTYPE"]]
        assert all(isinstance(v, str) for v in params.values()), "cuda_instances takes a string_dict"


@pytest.mark.parametrize("template,instances", [(TEMPLATE, "HSTU_INSTANCES"), (TEMPLATE_SM90, "HSTU_SM90_INSTANCES")])
def test_template_uses_exactly_the_matrix_keys(template, instances):
    m = _matrix()
    with open(template) as f:
        used = set(re.findall(r"\{\{(\w+)\}\}", f.read()))
    for params in m[instances].values():
        assert used == set(params), (sorted(used), sorted(params))


def test_masks_are_not_template_parameters():
    m = _matrix()
    keys = set().union(*(set(p) for p in m["HSTU_INSTANCES"].values()))
    assert not keys & {"CAUSAL", "LOCAL", "CONTEXT", "TARGET", "RAB", "DELTA_Q"}


def test_sm90_matrix_is_small_and_consistently_named():
    m = _matrix()
    inst = m["HSTU_SM90_INSTANCES"]
    assert len(inst) == len(m["HSTU_DTYPES"]) * sum(len(m["HSTU_SM90_HDIMS"][d]) for d in m["HSTU_SM90_DIRECTIONS"])
    assert len(inst) <= 16
    assert not set(inst) & set(m["HSTU_INSTANCES"]), "sm90 and sm80 units must not share a file name"
    for stem, params in inst.items():
        assert re.fullmatch(r"hstu_(fwd|bwd)_sm90_(fp16|bf16)_hdim(32|64|128|256)", stem), stem
        assert params["ARCH"] == "sm90" and params["NAME"] == stem
        assert stem == "hstu_%s_%s_%s_hdim%s" % (params["DIRECTION"], params["ARCH"], params["DTYPE"], params["HDIM"])
        assert not set(params) & {"CAUSAL", "LOCAL", "CONTEXT", "TARGET", "RAB", "DELTA_Q"}

