"""Deprecated: goal selection strategies live in :mod:`her_wrap.core.goal_selection`."""

from her_wrap.core.goal_selection import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy, member_named
from her_wrap.core.moved import warn_module_moved

warn_module_moved(__name__, "her_wrap.core.goal_selection")

__all__ = ["KEY_TO_GOAL_STRATEGY", "GoalSelectionStrategy", "member_named"]
