"""``python scripts/train.py ARGS`` is ``her-wrap train ARGS`` (see ``her-wrap train -h``)."""

import sys

from her_wrap.runs.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
