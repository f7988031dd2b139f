"""``python scripts/enjoy.py ARGS`` is ``her-wrap enjoy ARGS`` (see ``her-wrap enjoy -h``)."""

import sys

from her_wrap.runs.cli import main

if __name__ == "__main__":
    sys.exit(main(["enjoy", *sys.argv[1:]]))
