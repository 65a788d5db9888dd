"""pytest plugin: `-p upsert_options_plugin --upsert-options N` runs the table tests with the CUDA upsert's private
kernel options N (ScoredHashTable._upsert_options; table_kernels.cuh kUpsertOpt*). Put this folder on PYTHONPATH."""


def pytest_addoption(parser):
    parser.addoption("--upsert-options", type=int, default=0, help="ScoredHashTable._upsert_options")


def pytest_configure(config):
    from dynamicemb._table import ScoredHashTable

    ScoredHashTable._upsert_options = config.getoption("--upsert-options")
