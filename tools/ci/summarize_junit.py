"""Prints pytest-style totals over every JUnit XML under a Bazel testlogs directory.

    python3 tools/ci/summarize_junit.py bazel-testlogs

Prints one line per test target and, last, `N passed, N failed, N skipped` (what CI reads). Bazel's own
"Executed N out of N tests" counts targets, not tests.
"""

import os
import sys
import xml.etree.ElementTree as ET


def count(path):
    passed = failed = skipped = 0
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        if "failure" in tags or "error" in tags:
            failed += 1
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(argv):
    top = argv[1] if len(argv) > 1 else "bazel-testlogs"
    totals = [0, 0, 0]
    for dirpath, _, files in sorted(os.walk(top, followlinks=True)):
        if "test.xml" not in files:
            continue
        try:
            p, f, s = count(os.path.join(dirpath, "test.xml"))
        except ET.ParseError:
            # Bazel writes its own XML when the runner died before pytest wrote one: count it as a failure.
            p, f, s = 0, 1, 0
        target = "//" + os.path.relpath(dirpath, top).replace(os.sep, "/")
        target = target.rsplit("/", 1)[0] + ":" + target.rsplit("/", 1)[1]
        print(f"{target}: {p} passed, {f} failed, {s} skipped")
        totals = [totals[0] + p, totals[1] + f, totals[2] + s]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
