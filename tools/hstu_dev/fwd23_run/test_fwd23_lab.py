"""fwd23 run 1's lab check (carried into tests/hstu/ of the carry tree; not a product test): the measuring wheel's
fwd_sm80_cfg=6 at D = 256 (the 128 x 32 warp-pair variant, FwdSm80Lab256Rows128) meets the error rule against the
fp32 reference and agrees with the default, on test_sm80_forward_candidates' cases. (Needs the wheel of fwd23 e7073eb:
the variant was removed after run 1; run 1 ran out of its test slot before this file.)"""

import os
import sys
import zlib

import pytest
import torch

from hstu_attn import hstu_attn_varlen_func

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hstu_kernel_checks as kg  # noqa: E402
from hstu_kernel_checks import _no_tf32, kernel_opts  # noqa: E402, F401  (the fixtures)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mask,delta_q,rab_heads,seqused", [
    ("causal", False, 0, False), ("causal", True, 2, True), ("local_causal", False, 1, False),
    ("context_target_group", True, 0, False), ("local_context_target", False, 2, True), ("none", False, 0, False)])
@pytest.mark.parametrize("lens", ["jagged", "dense"])
def test_fwd23_lab_rows128(lens, mask, delta_q, rab_heads, seqused, kernel_opts):
    D = 256
    lk = [300, 0, 1, 129, 128, 77, 64, 33, 700] if lens == "jagged" else [384] * 3
    case = kg.make_case(zlib.crc32(repr(("fwd", D, lens, mask, rab_heads)).encode()), lk, 2, D, torch.bfloat16, mask,
                        rab_heads, delta_q=delta_q, seqused=seqused)
    outs = {}
    for cfg in (0, 6):
        kernel_opts(sm90=False, fwd_sm80_cfg=cfg, fwd_split_tiles=0)
        kg.check_case(case, 0.5, backward=False)
        kg.poison_allocator(4 * case["q"].numel() * case["q"].element_size())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            outs[cfg] = hstu_attn_varlen_func(case["q"], case["k"], case["v"], alpha=0.5, rab=case["rab"],
                                              **kg._varlen_kwargs(case))
            torch.cuda.synchronize()
        names = {e.name for e in prof.events() if "hstu_fwd_kernel<" in e.name}
        if cfg == 6:
            assert any("256, 128, 32, 32, 8, 1, 2, 0, 2>" in n for n in names), names
    kg.assert_agree(("out",), (outs[6],), (outs[0],), "fwd_sm80_cfg=6 (lab) vs the default")
