"""The shipped hyperparameter files: ``her.yml`` is what ``her-wrap train`` reads without ``-c``."""
