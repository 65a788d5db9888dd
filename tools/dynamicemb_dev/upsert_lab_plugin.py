"""pytest plugin: runs the dynamicemb table tests with the private option ScoredHashTable._upsert_lab forced to the
bits given by --upsert-lab (e.g. 1: the upsert's kernels as programmatic dependent launches).

    PYTHONPATH=SITE:tools/dynamicemb_dev python3 -m pytest -p upsert_lab_plugin --upsert-lab 1 tests/dynamicemb/...
"""


def pytest_addoption(parser):
    parser.addoption("--upsert-lab", type=int, default=None,
                     help="bits of ScoredHashTable._upsert_lab for every table (default: the class's own)")


def pytest_configure(config):
    from dynamicemb._table import ScoredHashTable

    if config.getoption("--upsert-lab") is not None:
        ScoredHashTable._upsert_lab = config.getoption("--upsert-lab")
    print(f"upsert_lab_plugin: ScoredHashTable._upsert_lab = {ScoredHashTable._upsert_lab}")
