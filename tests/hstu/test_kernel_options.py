"""The kernels' comparison switches: one encoding in C++ (hstu/csrc/ops/hstu_plan.h) and Python (kernel_options), no
environment variable choosing a kernel, and the switches leave the CPU path's results alone."""

import os
import re

import pytest
import torch

import hstu_attn
from hstu_attn import _ops

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAN = os.path.join(ROOT, "hstu", "csrc", "ops", "hstu_plan.h")
NAMES = {"kOptNoSm90": "sm90", "kOptNoFwdWorkList": "fwd_work_list", "kOptNoFwdPersist": "fwd_persist",
         "kOptNoBwdWorkList": "bwd_work_list", "kOptNoDqSelfZero": "dq_self_zero",
         "kOptNoDqConvBehind": "dq_conv_behind", "kOptBwdSm80Pair": "bwd_sm80_pair",
         "kOptNoBwdSm80Pair2Stage": "bwd_sm80_pair_2stage", "kOptNoFp8Kernel": "fp8_kernel", "kOptPdl": "pdl",
         "kOptFp8Sched": "fp8_sched", "kOptNoFp8EarlyPack": "fp8_early_pack", "kOptFp8Bn192": "fp8_bn192",
         "kOptFwdTrace": "fwd_trace", "kOptFp8Bwd": "fp8_bwd"}


@pytest.mark.skipif(not os.path.exists(PLAN), reason="hstu/csrc/ops/hstu_plan.h is not in this tree")
def test_bits_match_the_plan_header():
    text = open(PLAN).read()
    bits = {m.group(1): 1 << int(m.group(2)) for m in re.finditer(r"(kOpt\w+) = 1 << (\d+),", text)}
    assert {NAMES[k]: v for k, v in bits.items()} == _ops.OPTION_BITS
    assert int(re.search(r"kOptBwdGridShift = (\d+),", text).group(1)) == _ops.BWD_GRID_SHIFT
    assert int(re.search(r"kOptBwdSm80CfgShift = (\d+),", text).group(1)) == _ops.BWD_SM80_CFG_SHIFT
    known = int(re.search(r"kOptKnownMask = (0x[0-9a-f]+),", text).group(1), 16)
    assert int(re.search(r"kOptFwdSplitShift = (\d+),", text).group(1)) == _ops.FWD_SPLIT_SHIFT
    assert int(re.search(r"kOptFwdSm80CfgShift = (\d+),", text).group(1)) == _ops.FWD_SM80_CFG_SHIFT
    assert known == (sum(_ops.OPTION_BITS.values()) | (3 << _ops.BWD_GRID_SHIFT) | (255 << _ops.FWD_SPLIT_SHIFT)
                     | (15 << _ops.BWD_SM80_CFG_SHIFT) | (7 << _ops.FWD_SM80_CFG_SHIFT))
    # the sm80-class forward's cfg: bits 29-31 and, for its values 8-15, bit 41 (kOptFwdSm80CfgHi)
    assert re.search(r"\(bits >> kOptFwdSm80CfgShift\) & 7\) \| \(\(bits & kOptFwdSm80CfgHi\) \? 8 : 0\)", text)
    assert int(re.search(r"kOptFwdSm80CfgHi = int64_t\{1\} << (\d+),", text).group(1)) == 41
    assert _ops.FWD_SM80_CFG_HI_BIT == 1 << 41
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_fwd_sm80_split.h")) as f:
        split_h = f.read()
    assert int(re.search(r"constexpr int kFwdSm80CfgRabMain = (\d+);", split_h).group(1)) == _ops.FWD_SM80_CFG_RAB_MAIN
    assert int(re.search(r"constexpr int kFwdSm80CfgRabLoadMain = (\d+);", split_h).group(1)) == (
        _ops.FWD_SM80_CFG_RAB_LOAD_MAIN)
    assert int(re.search(r"constexpr int kFwdSm80CfgRabTile64 = (\d+);", split_h).group(1)) == (
        _ops.FWD_SM80_CFG_RAB_TILE64)
    assert int(re.search(r"constexpr int kFwdSm80CfgRabCopyMain = (\d+);", split_h).group(1)) == (
        _ops.FWD_SM80_CFG_RAB_COPY_MAIN)
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_limits.h")) as f:
        limits_h = f.read()
    assert int(re.search(r"constexpr int kFwdSm80CfgDrabMain = (\d+);", limits_h).group(1)) == (
        _ops.FWD_SM80_CFG_DRAB_MAIN)
    assert int(re.search(r"constexpr int kFwdSm80CfgDrabLsu = (\d+);", limits_h).group(1)) == _ops.FWD_SM80_CFG_DRAB_LSU
    # (their word bits: one bit each, none of the forward's values in hstu_fwd_sm80_split.h)
    drab_bit = int(re.search(r"constexpr int kBwdSm80DrabZeroed = (\d+);", limits_h).group(1))
    lsu_bit = int(re.search(r"constexpr int kBwdSm80DrabLsu = (\d+);", limits_h).group(1))
    fwd_values = [int(x) for x in re.findall(r"constexpr int kFwdSm80\w+ = (\d+);", split_h)]
    for bit in (drab_bit, lsu_bit):
        assert bit & (bit - 1) == 0 and bit not in fwd_values
    assert lsu_bit != drab_bit
    # the backward's split (fwd_sm80_cfg=14): its word bit, none of those
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_walk_split.h")) as f:
        walk_h = f.read()
    assert int(re.search(r"constexpr int kFwdSm80CfgBwdSplit = (\d+);", walk_h).group(1)) == _ops.FWD_SM80_CFG_BWD_SPLIT
    split_bit = int(re.search(r"constexpr int kBwdSm80SplitWalk = (\d+);", walk_h).group(1))
    assert split_bit & (split_bit - 1) == 0 and split_bit not in fwd_values + [drab_bit, lsu_bit]
    # the FP8 forward's timing-only variants: two bits above the semantic flags
    assert int(re.search(r"kOptFp8FwdDiagShift = (\d+),", text).group(1)) == _ops.FP8_FWD_DIAG_SHIFT
    assert re.search(r"kOptFp8FwdDiagMask = int64_t\{3\} << kOptFp8FwdDiagShift,", text)
    assert re.search(r"\(bits >> kOptFp8FwdDiagShift\) & 3\)", text)
    # the FP8 forward's SiLU forms: the two bits above those
    assert int(re.search(r"kOptFp8SiluShift = (\d+),", text).group(1)) == _ops.FP8_SILU_SHIFT
    assert re.search(r"kOptFp8SiluMask = int64_t\{3\} << kOptFp8SiluShift,", text)
    assert re.search(r"\(bits >> kOptFp8SiluShift\) & 3\)", text)
    # the FP8 forward's variants: the four bits above those, the values of Fp8FwdVar
    assert int(re.search(r"kOptFp8FwdVarShift = (\d+),", text).group(1)) == _ops.FP8_FWD_VAR_SHIFT
    assert re.search(r"kOptFp8FwdVarMask = int64_t\{15\} << kOptFp8FwdVarShift,", text)
    assert re.search(r"\(bits >> kOptFp8FwdVarShift\) & 15\)", text)
    # the sm80-class forward's Q scale (opt-out): one bit above bit 60
    assert int(re.search(r"kOptNoFwdSm80Qscale = int64_t\{1\} << (\d+),", text).group(1)) == 61
    assert _ops.FWD_SM80_NO_QSCALE_BIT == 1 << 61
    # the sm80-class forward's split as it was (for comparisons): bit 62
    assert int(re.search(r"kOptFwdSm80SplitMain = int64_t\{1\} << (\d+),", text).group(1)) == 62
    assert _ops.FWD_SM80_SPLIT_MAIN_BIT == 1 << 62
    # the sm80-class forward's interleaved groups (opt-out): bit 58
    assert int(re.search(r"kOptNoFwdSm80Ilv = int64_t\{1\} << (\d+),", text).group(1)) == 58
    assert _ops.FWD_SM80_NO_ILV_BIT == 1 << 58
    # the sm80-class forward's split in 64-row query tiles (for comparisons): bits 46-47
    assert int(re.search(r"kOptFwdSm80Bm64Shift = (\d+),", text).group(1)) == _ops.FWD_SM80_BM64_SHIFT == 46
    assert re.search(r"kOptFwdSm80Bm64Mask = int64_t\{3\} << kOptFwdSm80Bm64Shift,", text)
    assert re.search(r"\(bits >> kOptFwdSm80Bm64Shift\) & 3\)", text)
    # the sm80-class forward's split synchronized as main has it (for comparisons): bit 45
    assert int(re.search(r"kOptFwdSm80SplitPlain = int64_t\{1\} << (\d+),", text).group(1)) == 45
    assert _ops.FWD_SM80_SPLIT_PLAIN_BIT == 1 << 45
    # the sm80-class backward's split never (for comparisons; by default its rule): bit 57
    assert int(re.search(r"kOptNoBwdSm80Split = int64_t\{1\} << (\d+),", text).group(1)) == 57
    assert re.search(r"o\.bwd_sm80_split = !\(bits & kOptNoBwdSm80Split\);", text)
    assert _ops.BWD_SM80_NO_SPLIT_BIT == 1 << 57
    # the sm80-class forward's evict-first rab copies (opt-in): bit 40
    assert int(re.search(r"kOptFwdSm80RabEvict = int64_t\{1\} << (\d+),", text).group(1)) == 40
    assert _ops.FWD_SM80_RAB_EVICT_BIT == 1 << 40
    with open(os.path.join(ROOT, "hstu", "csrc", "sm90", "hstu_fwd_fp8_sm90_kernel.cuh")) as f:
        enum = re.search(r"enum Fp8FwdVar : int \{([^}]*)\}", f.read()).group(1)
    assert tuple(sorted(int(v) for v in re.findall(r"= (\d+)", enum))) == _ops.FP8_FWD_VARS
    # The forward's candidates: one launcher case each (hstu_fwd_sm80_kernel.cuh kFwdSm80Candidates).
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_fwd_sm80_kernel.cuh")) as f:
        n = int(re.search(r"constexpr int kFwdSm80Candidates = (\d+);", f.read()).group(1))
    assert n == max(_ops.FWD_SM80_CFGS) and n < _ops.FWD_SM80_CFG_OLD
    # The field holds the comparison cfgs and the old layouts' value, the last one (hstu_bwd_sm80_kernel.cuh
    # kBwdSm80OldCfg, kBwdSm80LastCfg; the launcher's cases).
    assert re.search(r"\(bits >> kOptBwdSm80CfgShift\) & 15\)", text)
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_kernel.cuh")) as f:
        kernel = f.read()
    old = int(re.search(r"constexpr int kBwdSm80OldCfg = (\d+);", kernel).group(1))
    last = int(re.search(r"constexpr int kBwdSm80LastCfg = (\d+);", kernel).group(1))
    assert old == _ops.BWD_SM80_CFG_OLD and last == _ops.BWD_SM80_CFG_LAST == max(_ops.BWD_SM80_CFGS) and last < 16
    loop_cfgs = [int(re.search(rf"constexpr int {n} = (\d+);", kernel).group(1))
               for n in ("kBwdSm80TwoBarCfg", "kBwdSm80JoinedCopiesCfg", "kBwdSm80OtherOrderCfg", "kBwdSm80MbarCfg",
                         "kBwdSm80TailCfg", "kBwdSm80SmemEpiCfg", "kBwdSm80StsmCfg",
                         "kBwdSm80PtrCfg", "kBwdSm80PtrOnlyCfg", "kBwdSm80RunPtrCfg", "kBwdSm80LaneOnceCfg",
                         "kBwdSm80ThreeStageCfg")]
    assert sorted(loop_cfgs + [0, 4, 5, old]) == list(_ops.BWD_SM80_CFGS)


def test_kernel_options_pack_and_restore():
    assert _ops._current_options() == 0
    with _ops.kernel_options(sm90=False, bwd_grid=2):
        assert _ops._current_options() == _ops.OPTION_BITS["sm90"] | (2 << _ops.BWD_GRID_SHIFT)
        with _ops.kernel_options(fwd_persist=False, dq_conv_behind=False):
            assert _ops._current_options() == _ops.OPTION_BITS["fwd_persist"] | _ops.OPTION_BITS["dq_conv_behind"]
        with _ops.kernel_options(sm90=False, bwd_sm80_pair=True):
            assert _ops._current_options() == _ops.OPTION_BITS["sm90"] | _ops.OPTION_BITS["bwd_sm80_pair"]
        with _ops.kernel_options(bwd_sm80_pair=False, bwd_sm80_pair_2stage=False):
            assert _ops._current_options() == _ops.OPTION_BITS["bwd_sm80_pair_2stage"]
        with _ops.kernel_options(fp8_kernel=False):
            assert _ops._current_options() == _ops.OPTION_BITS["fp8_kernel"]
        with _ops.kernel_options(pdl=True):  # the opt-in switch: its bit set when on
            assert _ops._current_options() == _ops.OPTION_BITS["pdl"] == 1 << 21
        with _ops.kernel_options(pdl=False):
            assert _ops._current_options() == 0
        with _ops.kernel_options(fp8_sched=True, fp8_early_pack=False):  # (fp8_sched: set when on, opt-in)
            assert _ops._current_options() == _ops.OPTION_BITS["fp8_sched"] | _ops.OPTION_BITS["fp8_early_pack"]
        with _ops.kernel_options(fp8_sched=False, fp8_early_pack=True, fp8_bn192=False):
            assert _ops._current_options() == 0
        with _ops.kernel_options(fp8_bn192=True):
            assert _ops._current_options() == _ops.OPTION_BITS["fp8_bn192"]
        with _ops.kernel_options(fp8_fwd_diag=2):  # (private, timing-only)
            assert _ops._current_options() == 2 << _ops.FP8_FWD_DIAG_SHIFT == 2 << 48
        with _ops.kernel_options(fp8_silu=2):  # (for comparisons)
            assert _ops._current_options() == 2 << _ops.FP8_SILU_SHIFT == 2 << 50
        with _ops.kernel_options(fp8_fwd_var=15):  # (private, timing-only)
            assert _ops._current_options() == 15 << _ops.FP8_FWD_VAR_SHIFT == 15 << 52
        with _ops.kernel_options(fwd_sm80_cfg=8):  # (the sm80-class forward's rab path as main had it)
            assert _ops._current_options() == _ops.FWD_SM80_CFG_HI_BIT == 1 << 41
        with _ops.kernel_options(fwd_sm80_qscale=False):  # (for comparisons)
            assert _ops._current_options() == _ops.FWD_SM80_NO_QSCALE_BIT == 1 << 61
        with _ops.kernel_options(fwd_sm80_qscale=True):
            assert _ops._current_options() == 0
        with _ops.kernel_options(fwd_sm80_split_main=True):  # (for comparisons)
            assert _ops._current_options() == _ops.FWD_SM80_SPLIT_MAIN_BIT == 1 << 62
        with _ops.kernel_options(fwd_sm80_interleave=False):  # (for comparisons)
            assert _ops._current_options() == _ops.FWD_SM80_NO_ILV_BIT == 1 << 58
        with _ops.kernel_options(fwd_sm80_interleave=True):
            assert _ops._current_options() == 0
        with _ops.kernel_options(fwd_sm80_split_plain=True):  # (for comparisons)
            assert _ops._current_options() == _ops.FWD_SM80_SPLIT_PLAIN_BIT == 1 << 45
        with _ops.kernel_options(fwd_sm80_split_plain=False):
            assert _ops._current_options() == 0
        with _ops.kernel_options(bwd_sm80_split=False):  # (for comparisons)
            assert _ops._current_options() == _ops.BWD_SM80_NO_SPLIT_BIT == 1 << 57
        with _ops.kernel_options(bwd_sm80_split=True):
            assert _ops._current_options() == 0
        with _ops.kernel_options(fwd_sm80_rab_evict=True):  # (opt-in)
            assert _ops._current_options() == _ops.FWD_SM80_RAB_EVICT_BIT == 1 << 40
        with _ops.kernel_options(fwd_sm80_rab_evict=False):
            assert _ops._current_options() == 0
        for n in (1, 2, 3):  # (for comparisons)
            with _ops.kernel_options(fwd_sm80_bm64=n):
                assert _ops._current_options() == n << 46
        with _ops.kernel_options(fp8_bwd=True):  # (the FP8 backward or an error)
            assert _ops._current_options() == _ops.OPTION_BITS["fp8_bwd"] == 1 << 20
        with _ops.kernel_options(fp8_bwd=False):  # (always the dequantized backward)
            assert _ops._current_options() == _ops.FP8_BWD_DEQUANT_BIT == 1 << 56
        with _ops.kernel_options(fp8_bwd=None):  # (the default routing)
            assert _ops._current_options() == 0
        with _ops.kernel_options(fwd_trace=True):  # (diagnostics: set when on)
            assert _ops._current_options() == _ops.OPTION_BITS["fwd_trace"] == 1 << 19
        assert _ops._current_options() == _ops.OPTION_BITS["sm90"] | (2 << _ops.BWD_GRID_SHIFT)
    assert _ops._current_options() == 0
    for bad in (4, -1, True):
        with pytest.raises(ValueError, match="fp8_fwd_diag: expected 0, 1, 2 or 3"):
            with _ops.kernel_options(fp8_fwd_diag=bad):
                pass
    for bad in (0, 1, "on"):
        with pytest.raises(ValueError, match="fp8_bwd: expected None, True or False"):
            with _ops.kernel_options(fp8_bwd=bad):
                pass
    for bad in (3, 4, -1, True):
        with pytest.raises(ValueError, match="fp8_silu: expected 0, 1 or 2"):
            with _ops.kernel_options(fp8_silu=bad):
                pass
    for bad in (5, 7, 10, 14, 16, -1, True):
        with pytest.raises(ValueError, match=r"fp8_fwd_var: expected one of \(0, 1, 2, 3, 4, 15\)"):
            with _ops.kernel_options(fp8_fwd_var=bad):
                pass
    for bad in (0, 1, None, "on"):
        with pytest.raises(ValueError, match="fwd_sm80_qscale: expected True or False"):
            with _ops.kernel_options(fwd_sm80_qscale=bad):
                pass
    for bad in (0, 1, None, "on"):
        with pytest.raises(ValueError, match="fwd_sm80_split_main: expected True or False"):
            with _ops.kernel_options(fwd_sm80_split_main=bad):
                pass
        with pytest.raises(ValueError, match="fwd_sm80_interleave: expected True or False"):
            with _ops.kernel_options(fwd_sm80_interleave=bad):
                pass
        with pytest.raises(ValueError, match="fwd_sm80_split_plain: expected True or False"):
            with _ops.kernel_options(fwd_sm80_split_plain=bad):
                pass
        with pytest.raises(ValueError, match="bwd_sm80_split: expected True or False"):
            with _ops.kernel_options(bwd_sm80_split=bad):
                pass
        with pytest.raises(ValueError, match="fwd_sm80_rab_evict: expected True or False"):
            with _ops.kernel_options(fwd_sm80_rab_evict=bad):
                pass
    for bad in (4, True, None, "1"):
        with pytest.raises(ValueError, match=r"fwd_sm80_bm64: expected one of \(0, 1, 2, 3\)"):
            with _ops.kernel_options(fwd_sm80_bm64=bad):
                pass
    with pytest.raises(ValueError, match="bwd_grid: expected 0, 1 or 2, got 3"):
        with _ops.kernel_options(bwd_grid=3):
            pass
    # The forward's split: None the planner's rule (0), 0 no splits (255), n chunks of at most n KV tiles.
    for tiles, field in ((None, 0), (0, 255), ("wave", 254), (1, 1), (3, 3), (253, 253)):
        with _ops.kernel_options(fwd_split_tiles=tiles):
            assert _ops._current_options() == field << _ops.FWD_SPLIT_SHIFT
    for bad in (-1, 254, 2.0, True, "auto"):
        with pytest.raises(ValueError, match="fwd_split_tiles: expected None, 'wave' or an int in"):
            with _ops.kernel_options(fwd_split_tiles=bad):
                pass
    for cfg in _ops.BWD_SM80_CFGS[1:]:  # (8: the old layouts, bit 28)
        with _ops.kernel_options(sm90=False, bwd_sm80_cfg=cfg):
            assert _ops._current_options() == _ops.OPTION_BITS["sm90"] | (cfg << _ops.BWD_SM80_CFG_SHIFT)
    for bad in (_ops.BWD_SM80_CFG_LAST + 1, 16, -1, True, 2.0):
        with pytest.raises(ValueError, match=r"bwd_sm80_cfg: expected one of \(0, .*\), got"):
            with _ops.kernel_options(bwd_sm80_cfg=bad):
                pass
    for cfg in _ops.FWD_SM80_CFGS + (_ops.FWD_SM80_CFG_OLD, _ops.FWD_SM80_CFG_SPLIT):  # (bits 29-31)
        with _ops.kernel_options(sm90=False, fwd_sm80_cfg=cfg, bwd_sm80_cfg=8):
            assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | (cfg << _ops.FWD_SM80_CFG_SHIFT)
                                               | (8 << _ops.BWD_SM80_CFG_SHIFT))
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_MAIN):  # (8: bit 41 alone)
        assert _ops._current_options() == _ops.OPTION_BITS["sm90"] | _ops.FWD_SM80_CFG_HI_BIT
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_LOAD_MAIN):  # (9: bit 41 and bit 29)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | _ops.FWD_SM80_CFG_HI_BIT
                                           | (1 << _ops.FWD_SM80_CFG_SHIFT))
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_TILE64):  # (10: bit 41 and bit 30)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | _ops.FWD_SM80_CFG_HI_BIT
                                           | (2 << _ops.FWD_SM80_CFG_SHIFT))
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_RAB_COPY_MAIN):  # (11: bits 41, 29, 30)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | _ops.FWD_SM80_CFG_HI_BIT
                                           | (3 << _ops.FWD_SM80_CFG_SHIFT))
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_DRAB_MAIN):  # (15: bits 29-31 and 41)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | (7 << _ops.FWD_SM80_CFG_SHIFT)
                                           | _ops.FWD_SM80_CFG_HI_BIT)
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_DRAB_LSU):  # (12: bits 29-31 = 4 and 41)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | (4 << _ops.FWD_SM80_CFG_SHIFT)
                                           | _ops.FWD_SM80_CFG_HI_BIT)
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_DQ_CLAIM):  # (13: bits 29 / 31 and 41)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | (5 << _ops.FWD_SM80_CFG_SHIFT)
                                           | _ops.FWD_SM80_CFG_HI_BIT)
    with _ops.kernel_options(sm90=False, fwd_sm80_cfg=_ops.FWD_SM80_CFG_BWD_SPLIT):  # (14: bits 30-31 and 41)
        assert _ops._current_options() == (_ops.OPTION_BITS["sm90"] | (6 << _ops.FWD_SM80_CFG_SHIFT)
                                           | _ops.FWD_SM80_CFG_HI_BIT)
    for bad in (16, -1, True, 1.0):
        with pytest.raises(ValueError, match=r"fwd_sm80_cfg: expected one of \(0, 1, .*, 9, 10, 11, 12, 13, 14, 15\)"):
            with _ops.kernel_options(fwd_sm80_cfg=bad):
                pass


def test_options_do_not_change_the_cpu_path():
    gen = torch.Generator().manual_seed(11)
    cu = torch.tensor([0, 7, 7, 19], dtype=torch.int32)
    q, k, v = (torch.randn(19, 2, 16, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    dout = torch.randn(19, 2, 16, generator=gen, dtype=torch.float64)

    def run():
        out = hstu_attn.hstu_attn_varlen_func(q, k, v, cu, cu, 12, 12, window_size=(-1, 0), alpha=0.3)
        return [out] + list(torch.autograd.grad(out, (q, k, v), dout))

    want = run()
    with _ops.kernel_options(sm90=False, fwd_work_list=False, bwd_grid=1, fwd_sm80_cfg=4):
        got = run()
    for w, g in zip(want, got):
        assert torch.equal(w, g)


def test_no_environment_variable_chooses_a_kernel():
    for path in (os.path.join(ROOT, "hstu", "csrc", "ops", "hstu_ops.cc"), os.path.join(ROOT, "hstu", "_ops.py")):
        if os.path.exists(path):
            assert "getenv" not in open(path).read() and "HSTU_ATTN_" not in open(path).read(), path


@pytest.mark.skipif(not os.path.exists(PLAN), reason="hstu/csrc/ops/hstu_plan.h is not in this tree")
def test_flag_bits_match_the_plan_header():
    text = open(PLAN).read()
    flags = {m.group(1): 1 << int(m.group(2)) for m in re.finditer(r"(kFlag\w+) = int64_t\{1\} << (\d+),", text)}
    assert flags == {"kFlagMaskGr": _ops.FLAG_BITS["mask_gr"]}
    assert not _ops.FLAG_BITS["mask_gr"] & (sum(_ops.OPTION_BITS.values()) | (3 << _ops.BWD_GRID_SHIFT))


def _gr_case():
    gen = torch.Generator().manual_seed(5)
    cu = torch.tensor([0, 9, 9, 21, 22], dtype=torch.int32)
    q, k, v = (torch.randn(22, 2, 8, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    dout = torch.randn(22, 2, 8, generator=gen, dtype=torch.float64)
    kw = dict(num_contexts=torch.tensor([3, 0, 4, 1], dtype=torch.int32),
              num_targets=torch.tensor([2, 0, 3, 0], dtype=torch.int32), target_group_size=2, window_size=(2, 0),
              alpha=0.4)
    return cu, (q, k, v), dout, kw


def test_cpu_path_honours_the_gr_convention():
    cu, qkv, dout, kw = _gr_case()

    def run(fn, **extra):
        out = fn(*qkv, cu, cu, 12, 12, **kw, **extra)
        return [out] + list(torch.autograd.grad(out, qkv, dout))

    for conv in ("nvidia", "meta_gr"):
        got = run(hstu_attn.hstu_attn_varlen_func, mask_convention=conv)
        want = run(hstu_attn.hstu_attn_reference, mask_convention=conv)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(run(hstu_attn.hstu_attn_varlen_func, mask_convention="meta_gr")[0],
                              run(hstu_attn.hstu_attn_varlen_func)[0])
    # the packed entry point passes it on
    packed = torch.stack([t.detach() for t in qkv], 1)
    out = hstu_attn.hstu_attn_qkvpacked_func(packed, cu, 12, **kw, mask_convention="meta_gr")
    torch.testing.assert_close(out, run(hstu_attn.hstu_attn_reference, mask_convention="meta_gr")[0])


def test_cpu_ops_read_the_gr_flag():
    cu, (q, k, v), dout, kw = _gr_case()
    args = (q.detach(), k.detach(), v.detach(), cu, cu, 12, 12, kw["num_contexts"], kw["num_targets"], 2, 2, 0, 0.4,
            None, 12.0, None, None)
    ref = {c: hstu_attn.hstu_attn_reference(*args[:3], cu, cu, 12, 12, **kw, mask_convention=c)
           for c in ("nvidia", "meta_gr")}
    bit = _ops.FLAG_BITS["mask_gr"]
    torch.testing.assert_close(torch.ops.hstu_attn.fwd_with_options(*args, bit), ref["meta_gr"])
    torch.testing.assert_close(torch.ops.hstu_attn.fwd_with_options(*args, _ops.OPTION_BITS["sm90"]), ref["nvidia"])
    torch.testing.assert_close(torch.ops.hstu_attn.fwd(*args), ref["nvidia"])
    for n in _ops.FWD_SM80_BM64S:  # (a kernel choice: the CPU path accepts it and computes the same)
        torch.testing.assert_close(torch.ops.hstu_attn.fwd_with_options(*args, n << _ops.FWD_SM80_BM64_SHIFT),
                                   ref["nvidia"])
    bargs = (dout,) + args + (False, False)
    gr = torch.ops.hstu_attn.bwd_with_options(*bargs, bit)
    nv = torch.ops.hstu_attn.bwd(*bargs)
    assert not torch.allclose(gr[0], nv[0])
    with pytest.raises(ValueError, match=r"options: expected bits of \d+, got 8589934592"):
        torch.ops.hstu_attn.fwd_with_options(*args, bit << 1)


def test_mask_convention_is_checked():
    cu, qkv, _, kw = _gr_case()
    with pytest.raises(ValueError, match=r"mask_convention: expected one of \['nvidia', 'meta_gr'\], got 'gr'"):
        hstu_attn.hstu_attn_varlen_func(*qkv, cu, cu, 12, 12, **kw, mask_convention="gr")


@pytest.mark.skipif(not os.path.exists(PLAN), reason="hstu/csrc/ops/hstu_plan.h is not in this tree")
def test_sm80_backward_key_block_limit_matches_the_tiles():
    """The op's bound on max_seqlen_k for the sm80-class backward (hstu_plan.h kBwdSm80MaxSeqlenK: its key blocks
    sit in gridDim.y, at most 65535) assumes the narrowest key block of FA2's layout: every BwdPdsConfig's kBlockN
    is at least kBwdSm80MinBlockN and one is that wide (a narrower tile would need a lower bound). The refusal
    itself runs on the GPU (test_sm80_backward_gpu.py test_sm80_backward_refuses_too_many_key_blocks)."""
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_limits.h")) as f:
        limits = f.read()
    assert int(re.search(r"kBwdSm80MaxKeyBlocks = (\d+);", limits).group(1)) == 65535
    min_bn = int(re.search(r"kBwdSm80MinBlockN = (\d+);", limits).group(1))
    assert "kBwdSm80MaxKeyBlocks * kBwdSm80MinBlockN" in open(PLAN).read()
    with open(os.path.join(ROOT, "hstu", "csrc", "sm80", "hstu_bwd_sm80_pds_kernel.cuh")) as f:
        pds = f.read()
    tiles = [int(n) for n in re.findall(r"struct BwdPdsConfig<\d+, \d+> \{[^}]*kBlockN = (\d+)", pds)]
    assert len(tiles) >= 3 and min(tiles) == min_bn
    assert "static_assert(C::kBlockN >= kBwdSm80MinBlockN," in pds
    assert "/ C::kBlockN > kBwdSm80MaxKeyBlocks)" in pds and "> 65535" not in pds
    with open(os.path.join(ROOT, "hstu", "csrc", "ops", "hstu_ops.cc")) as f:
        assert "p.max_seqlen_k <= kBwdSm80MaxSeqlenK" in f.read()
