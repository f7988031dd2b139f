"""Deprecated: goal selection strategies live in :mod:`her_wrap.core.goal_selection`.

Importing this module still works and gives the same objects, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings

from her_wrap.core.goal_selection import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy, member_named

warnings.warn(
    "her_wrap.core.strategies is deprecated: import GoalSelectionStrategy and KEY_TO_GOAL_STRATEGY from "
    "her_wrap.core.goal_selection (or from her_wrap).",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["KEY_TO_GOAL_STRATEGY", "GoalSelectionStrategy", "member_named"]
