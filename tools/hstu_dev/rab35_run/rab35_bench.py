"""rab35_bench.py: tools/hstu_dev/sm80_case_bench.py with the per-case lines tagged rab35 (its command line and
case grammar; see that file)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # sm80_case_bench.py: carried beside this file, or in the tree

from sm80_case_bench import main  # noqa: E402

if __name__ == "__main__":
    main(tag="rab35")
