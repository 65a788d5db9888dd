"""Value checks on CPU: the device error channel (with a fake block), the host check and its messages, the codes
shared with hstu/csrc/common/hstu_validate.h, and the cheap validation path against the full one."""

import ctypes
import os
import re
import struct

import pytest
import torch

import hstu_attn
from hstu_attn import DeviceInputError, _checks, _ops
from hstu_attn._device_errors import _BLOCK_BYTES, _HEADER_BYTES, _RECORD, DeviceErrorChannel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "hstu", "csrc", "common", "hstu_validate.h")


def i32(*vals):
    return torch.tensor(vals, dtype=torch.int32)


# ------------------------------------------------------------------------------------------------ codes
def _snake(camel):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


@pytest.mark.skipif(not os.path.exists(HEADER), reason="hstu/csrc/common/hstu_validate.h is not in this tree")
def test_codes_match_the_header():
    text = open(HEADER).read()
    args = {int(v): _snake(n) for n, v in re.findall(r"\bkArg(\w+) = (\d+)", text)}
    rules = {_snake(n): int(v) for n, v in re.findall(r"\bkRule(\w+) = (\d+)", text)}
    assert args == _checks.ARGS
    py_rules = {n[len("RULE_"):].lower(): getattr(_checks, n) for n in dir(_checks) if n.startswith("RULE_")}
    assert rules == py_rules
    assert sorted(_checks.RULES) == sorted(rules.values())


# ------------------------------------------------------------------------------------------------ channel
class FakeOps:
    """The two error ops over a ctypes buffer standing in for the pinned block."""

    def __init__(self):
        self.buf = ctypes.create_string_buffer(_BLOCK_BYTES)
        self.cleared = []
        self.allocations = 0

    def device_error_block(self):
        self.allocations += 1
        return ctypes.addressof(self.buf)

    def clear_device_error(self, device):
        self.cleared.append(device)

    def record(self, device, arg, rule, index, value, bound):
        """What report_device_error does: the record, then `pending`."""
        _RECORD.pack_into(self.buf, _HEADER_BYTES + device * _RECORD.size, arg, rule, index, value, bound)
        struct.pack_into("<i", self.buf, 0, device + 1)


def make_channel():
    ops = FakeOps()
    ch = DeviceErrorChannel("hstu_attn", ops, _checks.ARGS, _checks.RULES)
    ch.ensure_block()
    return ch, ops


def test_channel_raises_the_record_once_and_clears_it():
    ch, ops = make_channel()
    ch.raise_pending()  # nothing recorded
    ops.record(0, _checks.ARG_CU_SEQLENS_Q, _checks.RULE_OFFSET_DECREASING, 2, 3, 5)
    with pytest.raises(DeviceInputError) as info:
        ch.raise_pending()
    e = info.value
    assert isinstance(e, ValueError)
    assert (e.package, e.arg, e.index, e.value, e.bound, e.device) == ("hstu_attn", "cu_seqlens_q", 2, 3, 5, 0)
    assert str(e).startswith("hstu_attn: cu_seqlens_q: expected non-decreasing offsets, got cu_seqlens_q[1] = 5 > "
                             "cu_seqlens_q[2] = 3 (found on cuda:0"), str(e)
    assert ops.cleared == [0]
    assert bytes(ops.buf) == bytes(_BLOCK_BYTES)  # pending word and record zeroed
    ch.raise_pending()  # cleared: no second raise
    ch.check(synchronize=False)


def test_channel_reports_the_pending_device_first_and_clears_all():
    ch, ops = make_channel()
    ops.record(0, _checks.ARG_NUM_TARGETS, _checks.RULE_TARGETS, 1, 9, 4)
    ops.record(3, _checks.ARG_SEQUSED_K, _checks.RULE_SEQUSED, 0, -1, 7)  # pending now says device 3
    with pytest.raises(DeviceInputError) as info:
        ch.raise_pending()
    assert (info.value.arg, info.value.device) == ("seqused_k", 3)
    assert "seqused_k: expected 0 <= seqused_k[0] <= 7 (its cu_seqlens_k length), got -1" in str(info.value)
    assert sorted(ops.cleared) == [0, 3]
    ch.raise_pending()


def test_channel_without_a_block_never_raises():
    class NoBlock(FakeOps):
        def device_error_block(self):
            return 0

    ch = DeviceErrorChannel("hstu_attn", NoBlock(), _checks.ARGS, _checks.RULES)
    ch.ensure_block()
    ch.raise_pending()
    ch.check(synchronize=False)


def test_channel_allocates_once():
    ch, ops = make_channel()
    ch.ensure_block()
    ch.ensure_block()
    assert ops.allocations == 1


def test_strict_mode_switches():
    ch = _checks.channel
    assert not ch.strict
    with hstu_attn.strict_checks():
        assert ch.strict
        with hstu_attn.strict_checks(False):
            assert not ch.strict
        assert ch.strict
    assert not ch.strict
    hstu_attn.set_strict_checks(True)
    try:
        assert ch.strict
        ch.after_call(torch.device("cpu"))  # CPU: nothing to synchronize or raise
    finally:
        hstu_attn.set_strict_checks(False)
    assert not ch.strict


def test_check_errors_without_cuda_work_returns():
    assert hstu_attn.check_errors() is None


def test_public_names_are_exported():
    for name in ("check_errors", "strict_checks", "set_strict_checks", "DeviceInputError"):
        assert name in hstu_attn.__all__
        assert getattr(hstu_attn, name).__doc__


def test_error_ops_work_without_cuda():
    if not hstu_attn.library_loaded():
        pytest.skip("no op library in this tree")
    if not torch.cuda.is_available():
        assert torch.ops.hstu_attn.device_error_block() == 0
    torch.ops.hstu_attn.clear_device_error(0)  # nothing allocated or recorded: does nothing


# ------------------------------------------------------------------------------------------------ host check
H, D = 2, 8


def _call(cu_q, cu_k, max_q=5, max_k=5, check_values=None, **kw):
    q = torch.randn(int(cu_q[-1]) if int(cu_q[-1]) > 0 else 8, H, D)
    k = torch.randn(int(cu_k[-1]) if int(cu_k[-1]) > 0 else 8, H, D)
    return hstu_attn.hstu_attn_varlen_func(q, k, k, cu_q, cu_k, max_q, max_k, check_values=check_values, **kw)


# name -> (call kwargs, exact message)
MESSAGES = {
    "negative": (dict(cu_q=i32(-1, 3, 8), cu_k=i32(0, 3, 8)),
                 "hstu_attn: cu_seqlens_q: expected non-negative offsets, got cu_seqlens_q[0] = -1"),
    "decreasing": (dict(cu_q=i32(0, 3, 2, 8), cu_k=i32(0, 3, 3, 8)),
                   "hstu_attn: cu_seqlens_q: expected non-decreasing offsets, got cu_seqlens_q[1] = 3 > "
                   "cu_seqlens_q[2] = 2"),
    "too_long": (dict(cu_q=i32(0, 3, 8), cu_k=i32(0, 3, 9), max_q=5, max_k=5),
                 "hstu_attn: cu_seqlens_k: expected sequence lengths <= max_seqlen_k (5), got length 6 for "
                 "sequence 1"),
    "seqused": (dict(cu_q=i32(0, 3, 8), cu_k=i32(0, 3, 8), seqused_q=i32(4, 0)),
                "hstu_attn: seqused_q: expected 0 <= seqused_q[0] <= 3 (its cu_seqlens_q length), got 4"),
    "delta_q": (dict(cu_q=i32(0, 4, 8), cu_k=i32(0, 3, 8)),
                "hstu_attn: cu_seqlens_q: expected query length <= key length (3) for sequence 0 (delta-q), got 4"),
    "targets": (dict(cu_q=i32(0, 3, 8), cu_k=i32(0, 3, 8), num_targets=i32(0, 6), window_size=(-1, 0)),
                "hstu_attn: num_targets: expected 0 <= num_targets[1] <= 5 (the key length of sequence 1), got 6"),
    "contexts": (dict(cu_q=i32(0, 3, 8), cu_k=i32(0, 3, 8), num_targets=i32(2, 0), num_contexts=i32(2, 0),
                      window_size=(-1, 0)),
                 "hstu_attn: num_contexts: expected 0 <= num_contexts[0] <= 1 (key length minus targets of "
                 "sequence 0), got 2"),
}


@pytest.mark.parametrize("check_values", [None, False, True])
@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_cpu_values_are_checked_at_once_with_exact_messages(case, check_values):
    kw, message = MESSAGES[case]
    kw = dict(kw)
    with pytest.raises(ValueError) as info:
        _call(kw.pop("cu_q"), kw.pop("cu_k"), check_values=check_values, **kw)
    assert str(info.value) == message
    assert not isinstance(info.value, DeviceInputError)


def test_past_end_message():
    q = torch.randn(8, H, D)
    with pytest.raises(ValueError) as info:
        hstu_attn.hstu_attn_varlen_func(q, q, q, i32(0, 3, 9), i32(0, 3, 8), 6, 6)
    assert str(info.value) == "hstu_attn: cu_seqlens_q: expected offsets <= 8 (tokens in q), got cu_seqlens_q[2] = 9"


def test_find_violation_order_is_the_device_order():
    # cu_seqlens_q's rules come before cu_seqlens_k's, offsets before per-sequence rules, sequences in order.
    f = _checks.find_violation
    assert f([0, 3, 2], [-1, 3, 5], 9, 9, 9, 9, None, None, None, None)[:3] == (1, _checks.RULE_OFFSET_DECREASING, 2)
    assert f([0, 3, 5], [-1, 3, 5], 9, 9, 9, 9, None, None, None, None)[:3] == (2, _checks.RULE_OFFSET_NEGATIVE, 0)
    # decreasing before past-end before too-long within one argument
    assert f([0, 9, 8], [0, 1, 2], 8, 8, 2, 2, None, None, None, None)[1] == _checks.RULE_OFFSET_DECREASING
    assert f([0, 9, 10], [0, 1, 2], 8, 8, 2, 2, None, None, None, None)[1] == _checks.RULE_OFFSET_PAST_END
    # per sequence: sequence 0's targets before sequence 1's seqused
    assert f([0, 2, 4], [0, 2, 4], 9, 9, 9, 9, None, [3, 0], [2, 5], None)[:3] == (
        _checks.ARG_NUM_TARGETS, _checks.RULE_TARGETS, 0)
    assert f([0, 2, 4], [0, 2, 4], 9, 9, 9, 9, None, None, None, None) is None


def test_qkvpacked_passes_check_values():
    qkv = torch.randn(8, 3, H, D)
    with pytest.raises(ValueError, match="cu_seqlens: |cu_seqlens_q: "):
        hstu_attn.hstu_attn_qkvpacked_func(qkv, i32(0, 3, 2, 8), 6, check_values=True)


# ------------------------------------------------------------------------------------------------ fast validation
def _args(**over):
    q = torch.randn(8, H, D)
    a = dict(q=q, k=torch.randn(8, H, D), v=torch.randn(8, H, D), cu_q=i32(0, 3, 3, 8), cu_k=i32(0, 3, 3, 8),
             max_q=5, max_k=5, nc=None, nt=None, group=1, window=(-1, -1), alpha=1.0, rab=None, has_drab=False,
             scaling=-1, su_q=None, su_k=None)
    a.update(over)
    return a


VALID = {
    "plain": {},
    "causal_targets_contexts": dict(window=(-1, 0), nt=i32(1, 0, 2), nc=i32(1, 0, 1), group=2),
    "seqused": dict(su_q=i32(2, 0, 4), su_k=i32(3, 0, 5)),
    "rab_shared": dict(rab=torch.randn(3, 1, 5, 5), has_drab=True),
    "rab_per_head_transposed": dict(rab=torch.randn(3, H, 5, 5).transpose(2, 3)),
    "same_offsets": "same",
    "alpha_int_scaling_float": dict(alpha=2, scaling=3.5),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_fast_validation_matches_full(case):
    over = VALID[case]
    a = _args(**({} if over == "same" else over))
    if over == "same":
        a["cu_k"] = a["cu_q"]
    args = tuple(a.values())
    fast = _ops._validate_fast(*args)
    full = _ops._validate(*args)
    assert fast is not None, "the common call must take the cheap path"
    assert fast[0] == full[0]
    for x, y in zip(fast[1:], full[1:]):
        assert (x is None and y is None) or torch.equal(x, y)
        assert x is None or x.is_contiguous()


@pytest.mark.parametrize("over", [
    dict(window=[-1, 0]),  # a list: the full path accepts it
    dict(cu_k=torch.tensor([0, 0, 3, 0, 3, 0, 8], dtype=torch.int32)[::2]),  # non-contiguous: made contiguous
    dict(window=(-1, 0), nc=torch.tensor([1, 0, 0, 0, 2, 0], dtype=torch.int32)[::2]),
])
def test_unusual_valid_calls_agree(over):
    """Valid calls the cheap path declines go through the full one, with the same result."""
    a = _args(**over)
    out = hstu_attn.hstu_attn_varlen_func(a["q"], a["k"], a["v"], a["cu_q"], a["cu_k"], a["max_q"], a["max_k"],
                                          num_contexts=a["nc"], window_size=a["window"])
    ref = hstu_attn.hstu_attn_varlen_func(a["q"], a["k"], a["v"], a["cu_q"].contiguous(), a["cu_k"].contiguous(),
                                          a["max_q"], a["max_k"], num_contexts=a["nc"],
                                          window_size=tuple(a["window"]))
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("over", [
    dict(q=torch.randn(8, H, D).double()),       # k/v dtype differ
    dict(k=torch.randn(8, H + 1, D)),
    dict(window=(-1, 2), nt=i32(1, 0, 1)),
    dict(max_q=6),
    dict(group=0),
    dict(has_drab=True),
    dict(scaling=0),
    dict(alpha=True),
    dict(cu_q=i32(0, 3, 3, 8).long()),
    dict(nt=i32(1, 0), window=(-1, 0)),
    dict(rab=torch.randn(3, 1, 5, 4)),
    dict(q=torch.randn(8, H, 2 * D)[..., ::2]),
])
def test_fast_validation_declines_what_full_rejects(over):
    args = tuple(_args(**over).values())
    assert _ops._validate_fast(*args) is None
    with pytest.raises((TypeError, ValueError)):
        _ops._validate(*args)
