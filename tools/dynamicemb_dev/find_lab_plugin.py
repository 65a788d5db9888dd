"""pytest plugin: runs the dynamicemb tests with the lab op _lookup_lab_find_later set to --find-lab N for every
step (where a training step finds its uniques: 0 the dedup's number pass, 1 its own kernel after the CSR fork, 2 the
dedup's insert; session 23's 3-5, a probe of every id on the side stream, were removed: docs/dynamicemb.md). It
fails at start when the build has no such variant.

    PYTHONPATH=SITE:tools/dynamicemb_dev python3 -m pytest -p find_lab_plugin --find-lab 1 tests/dynamicemb/...
"""


def pytest_addoption(parser):
    parser.addoption("--find-lab", type=int, default=None, help="variant of _lookup_lab_find_later for every step")


def pytest_configure(config):
    v = config.getoption("--find-lab")
    if v is None:
        return
    import torch

    import dynamicemb  # noqa: F401  (loads the ops)

    if not torch.cuda.is_available():
        return
    lab = torch.ops.dynamicemb._lookup_lab_find_later
    lab(v)
    got = lab(-1)
    assert got == v, f"this build has no _lookup_lab_find_later variant {v} (reads {got})"
    print(f"find_lab_plugin: _lookup_lab_find_later = {got}")
