"""``python scripts/plot.py ARGS`` is ``her-wrap plot ARGS`` (see ``her-wrap plot -h``)."""

import sys

from her_wrap.runs.cli import main

if __name__ == "__main__":
    sys.exit(main(["plot", *sys.argv[1:]]))
