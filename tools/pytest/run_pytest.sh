#!/bin/bash
# Launcher of pytest_test (tools/pytest/pytest.bzl): run the project venv's python on pytest_main.py.
set -euo pipefail
python="$1"; shift
exec "$python" "$@"
