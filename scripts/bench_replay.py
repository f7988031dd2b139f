"""Replay buffers side by side: her_wrap against SB3's HerReplayBuffer and cpprb (add, sample, memory).

What is measured and the options: ``lab/benchmarks/replay.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.replay import main

if __name__ == "__main__":
    main()
