"""Bit flipping: HER(DQN) against SB3's DQN + HerReplayBuffer, success and time per env step.

What is measured and the options: ``lab/benchmarks/learning.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.learning import main

if __name__ == "__main__":
    main()
