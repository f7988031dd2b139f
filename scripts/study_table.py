"""A markdown table of an ``her-wrap optimize`` study, best trial first: ``lab/study_table.py``."""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.study_table import main

if __name__ == "__main__":
    main()
