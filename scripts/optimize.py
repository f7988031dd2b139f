"""``python scripts/optimize.py ARGS`` is ``her-wrap optimize ARGS`` (see ``her-wrap optimize -h``)."""

import sys

from her_wrap.runs.cli import main

if __name__ == "__main__":
    sys.exit(main(["optimize", *sys.argv[1:]]))
