"""pytest plugin: runs the dynamicemb tests with the lab op _lookup_lab_dedup set to --dedup-lab N (DedupFlags,
dynamicemb/csrc/lookup/lookup_types.h) for every dedup: the plain dedup op and every step's. It fails at start when
the build takes no such value.

    PYTHONPATH=SITE:tools/dynamicemb_dev python3 -m pytest -p dedup_lab_plugin --dedup-lab 561 tests/dynamicemb/...
"""


def pytest_addoption(parser):
    parser.addoption("--dedup-lab", type=int, default=None, help="DedupFlags of _lookup_lab_dedup for every dedup")


def pytest_configure(config):
    v = config.getoption("--dedup-lab")
    if v is None:
        return
    import torch

    import dynamicemb  # noqa: F401  (loads the ops)

    lab = torch.ops.dynamicemb._lookup_lab_dedup
    lab(v)
    got = lab(-1)
    assert got == v, f"this build has no _lookup_lab_dedup value {v} (reads {got})"
    print(f"dedup_lab_plugin: _lookup_lab_dedup = {got}")
