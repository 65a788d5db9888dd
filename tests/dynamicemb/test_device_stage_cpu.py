"""Op cache_stage's host path on CPU modules (its CPU twin; the Python code is the one that runs on CUDA): the
per-step checks are kept between steps and follow what changes (a replaced table tensor, a live step staged by
the Python path, device_staging switched off); the running totals are accumulated by the op; a prefetch over
device-staged tables is queued (no thread) and its step takes the job's stamp and runs the op gated by the job's
failed flag (nothing staged when the job staged the batch)."""

import os
import sys

import pytest
import torch

from dynamicemb import _device_stage, _prefetch
from dynamicemb._caching import StepPins
from dynamicemb._load import load_library
from dynamicemb._uva_store import UvaStoreSpec

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import BC, assert_same, hot_stamps, make_t, step, t_batches  # noqa: E402

pytestmark = [pytest.mark.skipif(not load_library(), reason="dynamicemb/_C.so not built"),
              pytest.mark.filterwarnings("ignore:dynamicemb. table")]

UVA = UvaStoreSpec()
WORDS = 12  # lookup_types.h StageTable


def _module(T=3):
    m = make_t("caching", T, slots=16 * BC, store=UVA)
    m.device_staging = True
    return m


def test_stage_meta_follows_replaced_tensors():
    """The stage records are rebuilt exactly when a table tensor is replaced (any table's: the state epoch), and
    then point at the new tensors; between steps they are the same tensor (no rebuild, no pointer read)."""
    m = _module()
    data = list(t_batches(3, 3, seed=1, hi=1500))
    step(m, *data[0])
    meta = _device_stage.stage_meta(m)
    assert _device_stage.stage_meta(m) is meta
    st = m.tables[1].store.table
    assert int(meta[WORDS + 0]) == st.keys.data_ptr() and int(meta[WORDS + 2]) == st.scores.data_ptr()
    assert int(meta[WORDS + 10]) == m.tables[1]._stamps.data_ptr()
    st.keys = st.keys.clone()  # a replaced tensor (same contents): the records follow it
    meta2 = _device_stage.stage_meta(m)
    assert meta2 is not meta and int(meta2[WORDS + 0]) == st.keys.data_ptr() != int(meta[WORDS + 0])
    assert torch.equal(meta2[:WORDS], meta[:WORDS]) and torch.equal(meta2[2 * WORDS:], meta[2 * WORDS:])
    ref = make_t("hbm", 3)
    for d in data:
        step(ref, *d)
    step(m, *data[1]), step(m, *data[2])
    assert_same(ref, m)


def test_serves_follows_pins_and_switch():
    """serves() is kept per (tables, device) but still sees what changes per step: a live step staged by the Python
    path (pins without a stamp: the guard would miss its rows) turns the op off until that step's pins die; so do
    device_staging = False and a table whose store is not device-indexed."""
    m = _module()
    ids, off, w = next(t_batches(3, 1, seed=2, hi=1500))
    cached = m._cached
    assert _device_stage.serves(m, ids, cached)
    pins = StepPins({0: ids[:4]}, m.tables)  # a Python-staged step in flight (no stamp)
    assert not _device_stage.serves(m, ids, cached) and _device_stage.serves(m, ids, [1, 2])
    pins.stamp = _device_stage.next_stamp()
    assert _device_stage.serves(m, ids, cached)
    pins.stamp = None
    del pins
    assert _device_stage.serves(m, ids, cached)
    assert not _device_stage.serves(m, ids, cached, [StepPins({}, m.tables, [])])
    m.device_staging = False
    assert not _device_stage.serves(m, ids, cached)
    m.device_staging = True
    host = make_t("caching", 3, slots=16 * BC)  # host stores: not device-indexed
    host.device_staging = True
    assert not _device_stage.serves(host, ids, host._cached)


def test_totals_accumulate_in_the_op():
    """The op adds each staging's moved / written-back rows to the module's running totals (no per-step add):
    after a run that misses and evicts every step, the totals equal the per-table sums of what moved."""
    T = 3
    m = make_t("caching", T, slots=8 * BC, store=UVA)
    m.device_staging = True
    for ids, off, w in t_batches(T, 8, seed=4, hi=2000):
        step(m, ids, off, w)
    tot = m._stage_totals
    assert tot.shape == (T, 3) and int(tot[:, 0].sum()) > 0 and int(tot[:, 1].sum()) > 0
    assert int(tot[:, 2].sum()) == 0
    for i, t in enumerate(m.tables):
        assert t.rows_moved == [int(tot[i, 0]), int(tot[i, 1])]  # every staging went through the op


def test_prefetch_queued_step_takes_its_flag():
    """A prefetch over device-staged tables is the op queued (here at once: CPU), no job thread; the batch's step
    takes the job's stamp (its pins carry it) and runs one op gated by the job's failed flag, which stages nothing
    (the job staged the whole batch: no rows move); training stays bit-identical to all-HBM with the previous step
    in flight while the job stages."""
    T = 3
    ref, m = make_t("hbm", T), _module(T)
    data = list(t_batches(T, 8, seed=6, hi=2000))
    calls = []
    real = _device_stage.stage
    takes = []
    take = _prefetch.take

    def counting_stage(*a, **k):
        calls.append(k.get("gate"))
        return real(*a, **k)

    def recording_take(*a, **k):
        r = take(*a, **k)
        takes.append(r)
        return r

    _device_stage.stage, _prefetch.take = counting_stage, recording_take
    try:
        for i, (ids, off, w) in enumerate(data):
            o_ref = step(ref, ids, off, w)
            n0, moved0 = len(calls), m._stage_totals.clone() if i > 0 else None
            out = m(ids, off)
            if i > 0:
                counts, bounds, stamp, skip = takes[-1]
                assert skip is not None and int(skip[0]) == 0 and stamp is not None
                assert len(calls) == n0 + 1 and calls[-1] is skip, f"step {i}: one op call, gated by the job's flag"
                assert torch.equal(m._stage_totals, moved0), f"step {i} staged rows after its prefetch"
            if i + 1 < len(data):
                job = _prefetch.submit(m, data[i + 1][0], data[i + 1][1], None, None)
                assert job.future is None and job.error is None and job.skip is not None and job.missed >= 0
            (out * w).sum().backward()
            assert torch.equal(o_ref, out), f"step {i}"
    finally:
        _device_stage.stage, _prefetch.take = real, take
    assert len(calls) == 2 * len(data) - 1  # the first step; then per later batch its job and its gated step
    assert_same(ref, m)
    assert int(m._stage_totals[:, 0].sum()) > 0  # the jobs moved rows


def test_probe_stamps_hot_slots():
    """The probe's stamps (CPU twin; test_cache_probe_gpu.py runs the kernel): hot slots get the step's stamp, the
    rest keep theirs, none decreases."""
    assert hot_stamps("cpu") > 0
