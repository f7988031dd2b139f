"""Learner updates on a CPU: time, floating-point work, and where an env step's time goes.

What is measured and the options: ``lab/benchmarks/updates.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.updates import main

if __name__ == "__main__":
    main()
