"""tests/hstu: the HSTU_ATTN_* comparison switches.

The op reads them once per process (hstu/csrc/hstu_ops.cc, EnvSwitches); `hstu_attn::_reload_env_switches`
re-reads them. Here `monkeypatch` is pytest's fixture whose setenv / delenv also make the op re-read the switches,
and which restores them (environment and op) after the test.
"""

import pytest
import torch


def reload_switches() -> None:
    if hasattr(torch.ops.hstu_attn, "_reload_env_switches"):
        torch.ops.hstu_attn._reload_env_switches()


class _SwitchingMonkeyPatch:
    def __init__(self, mp):
        self._mp = mp

    def setenv(self, name, value, prepend=None):
        self._mp.setenv(name, value, prepend)
        reload_switches()

    def delenv(self, name, raising=True):
        self._mp.delenv(name, raising)
        reload_switches()

    def __getattr__(self, name):
        return getattr(self._mp, name)


@pytest.fixture
def monkeypatch(monkeypatch):  # noqa: F811 (wraps pytest's own)
    yield _SwitchingMonkeyPatch(monkeypatch)
    monkeypatch.undo()
    reload_switches()
