"""`pytest_test`: runs pytest files against the built wheels.

The wheels are unpacked into the test's temp dir and put first on sys.path, so tests exercise exactly what
ships. pytest's own summary line is printed (use --test_output=all or errors to see it) and its JUnit XML
goes to Bazel's XML_OUTPUT_FILE.
"""

def pytest_test(name, srcs, wheels = [], data = [], size = "medium", tags = [], args = [], **kwargs):
    """A test running pytest on `srcs` with `wheels` importable.

    Args:
      name: test name.
      srcs: test_*.py files.
      wheels: wheel targets to unpack onto sys.path.
      data: extra runtime files (conftest.py files are added automatically).
      size: Bazel test size.
      tags: Bazel tags.
      args: extra pytest arguments.
      **kwargs: passed to sh_test.
    """
    native.sh_test(
        name = name,
        srcs = ["//tools/pytest:run_pytest.sh"],
        args = [
            "$(rootpath @local_python//:python3)",
            "$(rootpath //tools/pytest:pytest_main.py)",
        ] + ["--wheel=$(rootpath %s)" % w for w in wheels] + args + ["$(rootpath %s)" % s for s in srcs],
        data = srcs + wheels + data + [
            "@local_python//:python3",
            "//tools/pytest:pytest_main.py",
            "//tests:conftest",
        ],
        size = size,
        tags = tags,
        **kwargs
    )

def pytest_file_test(src, **kwargs):
    """A pytest_test of the one file `src`, named after it: test_foo.py -> foo_test.

    Args:
      src: the test_*.py file.
      **kwargs: passed to pytest_test (wheels, data, size, tags, args, ...).
    """
    pytest_test(name = src[len("test_"):-len(".py")] + "_test", srcs = [src], **kwargs)

def pytest_test_per_file(data = [], large = [], **kwargs):
    """One pytest_test per test_*.py file of the calling package (no hand-kept lists), named after the file.

    Args:
      data: runtime files of every test; the package's other .py files (test helpers) are added.
      large: the files whose test is of size "large" (the others: "medium").
      **kwargs: passed to pytest_test (wheels, tags, ...).
    """
    helpers = native.glob(["*.py"], exclude = ["test_*.py"])
    for f in native.glob(["test_*.py"]):
        size = "large" if f in large else "medium"
        pytest_test(name = f[:-len(".py")], srcs = [f], data = helpers + data, size = size, **kwargs)
