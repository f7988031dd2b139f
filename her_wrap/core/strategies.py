"""Goal selection strategies for hindsight relabeling.

Every strategy picks, for a stored transition ``t`` of an episode, a step ``j`` and uses the achieved
goal of the observation that *followed* step ``j`` (``next_achieved_goal[j]``) as the new desired goal.

- ``future``: ``j`` uniform in ``[t, T_end]``, inclusive of ``t`` (as stable-baselines3): the goal of
  step ``t`` itself can be drawn, which makes the transition a success by construction.
- ``final``: ``j = T_end``, the last step stored for the episode so far.
- ``episode``: ``j`` uniform over every stored step of the same episode.
- ``random``: any stored step of any stored episode, in any env column (stable-baselines v2 and cpprb had
  it; stable-baselines3 dropped it).

``T_end`` is the last step of the episode, or the last step stored so far when the episode is still
in progress.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

_Member = TypeVar("_Member", bound=Enum)


def member_named(enum_class: type[_Member], value: Any, prefix: str = "") -> _Member | None:
    """The member of a string enum that ``value`` names, or None.

    ``value`` may be a member, a member of another enum with the same names (stable-baselines3's
    ``GoalSelectionStrategy.FUTURE``, whose values are integers), or a name in any case, with ``prefix``
    (in any case) allowed before it.
    """
    if isinstance(value, enum_class):
        return value
    if isinstance(value, Enum):
        value = value.name
    if not isinstance(value, str):
        return None
    name = value.strip().lower().removeprefix(prefix)
    return next((member for member in enum_class if member.value == name), None)


class GoalSelectionStrategy(str, Enum):
    """How the new goal of a relabeled transition is chosen (see the module docstring)."""

    FUTURE = "future"
    FINAL = "final"
    EPISODE = "episode"
    RANDOM = "random"

    @classmethod
    def parse(cls, value: str | Enum) -> GoalSelectionStrategy:
        """Accept a member, its name in any case (``"future"``, ``"FUTURE"``), or a member of another
        enum with the same names (stable-baselines3's ``GoalSelectionStrategy.FUTURE``, whose values are
        integers), so code moving from SB3 passes its own members unchanged.

        :param value: strategy name or member
        :return: the member
        :raises ValueError: for an unknown name, listing the valid ones
        """
        member = member_named(cls, value)
        if member is not None:
            return member
        valid = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"Unknown goal_selection_strategy {value!r}; use one of {valid} (case-insensitive).")


# stable-baselines v2 exported this mapping; code ported from it keeps working.
KEY_TO_GOAL_STRATEGY = {member.value: member for member in GoalSelectionStrategy}
