"""The env phase of a training step (env step, exploration action): the stock path against HER's.

What is measured and the options: ``lab/benchmarks/env_phase.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.env_phase import main

if __name__ == "__main__":
    main()
