"""FetchReach-v4 end to end: HER(SAC) against SB3's SAC + HerReplayBuffer, time and success.

What is measured and the options: ``lab/benchmarks/end_to_end.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.end_to_end import main

if __name__ == "__main__":
    main()
