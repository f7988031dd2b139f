"""Deprecated: the old name of :mod:`her_wrap.runs.model_classes`.

It shared its name with :mod:`her_wrap.sb3.learners`. Importing it warns and gives the same functions;
import :mod:`her_wrap.runs.model_classes` instead.
"""

from __future__ import annotations

import warnings

from her_wrap.runs.model_classes import canonical_learner_name, learner_parameters

warnings.warn(
    "her_wrap.runs.learners is deprecated; import her_wrap.runs.model_classes instead",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["canonical_learner_name", "learner_parameters"]
