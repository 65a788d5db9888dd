"""Stand-in for rules_python: forwards to Bazel 4.2.3's native Python rules (the project itself runs Python
through its own rules in tools/, so nothing here is used by our targets)."""

def py_binary(**kwargs):
    native.py_binary(**kwargs)

def py_library(**kwargs):
    native.py_library(**kwargs)

def py_runtime(**kwargs):
    native.py_runtime(**kwargs)

def py_runtime_pair(**kwargs):
    native.py_runtime_pair(**kwargs)

def py_test(**kwargs):
    native.py_test(**kwargs)
