"""Sampling options under HER on several seeds: uniform against LaBER, prioritized replay and others.

What is measured and the options: ``lab/benchmarks/laber.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.laber import main

if __name__ == "__main__":
    main()
