"""Goal selection for hindsight relabeling, in one place: the strategies, the goal sources of a goal mix,
and the draws that pick, in O(batch) time, the stored row each new goal comes from.

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

A goal mix (:attr:`~her_wrap.core.settings.HindsightSettings.goal_mix`) draws each relabeled goal from
one of several sources: the four strategies themselves (:class:`GoalSelectionStrategy` members, used as
they are) and ``desired`` (:data:`DesiredGoal.DESIRED`), the desired goal of a stored transition of any
episode: goals the env itself asks for, which achieved goals may never have reached.
:class:`GoalSource` names all five.

No draw scans the buffer: transitions are drawn uniformly over the filled rows of the ring and the few
draws that land on a row holding no transition (an episode's final observation, the newest observation of
an episode in progress, the remains of an overwritten episode) are drawn again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import numpy as np

if TYPE_CHECKING:
    from her_wrap.core.storage import EpisodeStorage

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


class DesiredGoal(str, Enum):
    """The goal source of a goal mix that is not a strategy: the desired goal of a stored transition of
    any episode."""

    DESIRED = "desired"


#: A source of relabeled goals: a strategy (an achieved goal) or ``DesiredGoal.DESIRED``.
GoalSourceMember: TypeAlias = GoalSelectionStrategy | DesiredGoal


class GoalSource:
    """The five sources a goal mix draws from, by name: the strategies themselves and ``DESIRED``.

    ``GoalSource.FUTURE is GoalSelectionStrategy.FUTURE``: a source that is a strategy is that strategy,
    so a goal mix reaches the draws with no conversion.
    """

    FUTURE: Final = GoalSelectionStrategy.FUTURE
    FINAL: Final = GoalSelectionStrategy.FINAL
    EPISODE: Final = GoalSelectionStrategy.EPISODE
    RANDOM: Final = GoalSelectionStrategy.RANDOM
    DESIRED: Final = DesiredGoal.DESIRED

    #: Every source, in the order a goal mix lists them.
    MEMBERS: Final[tuple[GoalSourceMember, ...]] = (*GoalSelectionStrategy, DesiredGoal.DESIRED)

    def __new__(cls, value: str | Enum) -> GoalSourceMember:  # type: ignore[misc]
        """``GoalSource(name)`` is :meth:`parse`, as an enum's lookup by value (pickles of goal mixes made
        when the sources were an enum of their own call it)."""
        return cls.parse(value)

    @classmethod
    def parse(cls, value: str | Enum) -> GoalSourceMember:
        """Accept a strategy, ``DesiredGoal.DESIRED``, or a source's name in any case.

        :raises ValueError: for anything else, listing the valid names
        """
        member = member_named(GoalSelectionStrategy, value) or member_named(DesiredGoal, value)
        if member is not None:
            return member
        valid = ", ".join(repr(member.value) for member in cls.MEMBERS)
        raise ValueError(f"Unknown goal source {value!r} in goal_mix; use {valid}.")


def parse_goal_mix(
    mix: Mapping[Any, float] | Iterable[tuple[Any, float]],
) -> tuple[tuple[GoalSourceMember, float], ...]:
    """Normalized ``(source, share)`` pairs, in :attr:`GoalSource.MEMBERS` order, from a mapping or pairs.

    :raises ValueError: for an unknown source, one named twice, a share below 0 or not finite, or shares
        summing to 0
    """
    try:
        pairs = [(source, share) for source, share in (mix.items() if isinstance(mix, Mapping) else mix)]
    except (TypeError, ValueError):
        raise ValueError(
            f"goal_mix must map goal sources to shares, e.g. {{'future': 0.8, 'desired': 0.2}}; got {mix!r}."
        ) from None
    shares: dict[GoalSourceMember, float] = {}
    for source, share in pairs:
        parsed = GoalSource.parse(source)
        if parsed in shares:
            raise ValueError(f"goal_mix names {parsed.value!r} twice.")
        shares[parsed] = share
    for source, share in shares.items():
        real = not isinstance(share, bool) and isinstance(share, int | float | np.number)
        if not real or not math.isfinite(share) or share < 0:
            raise ValueError(f"goal_mix share of {source.value!r} must be a number >= 0, got {share!r}.")
    total = float(sum(shares.values()))
    if total <= 0:
        raise ValueError(f"goal_mix shares must sum to more than 0, got {mix!r}.")
    return tuple((source, float(shares[source]) / total) for source in GoalSource.MEMBERS if source in shares)


# Rejection rounds before the exact (whole-buffer) fallback; with episodes of T steps a draw is
# rejected with probability about 1 / (T + 1), so this limit is reached only by nearly empty rings.
_MAX_REJECTION_ROUNDS = 32


def sample_transitions(
    storage: EpisodeStorage,
    n: int,
    rng: np.random.Generator,
    *,
    finished_only: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` stored transitions uniformly, with replacement.

    :param storage: the episode storage
    :param n: how many to draw
    :param rng: random generator
    :param finished_only: draw only from episodes that have ended (offline relabeling)
    :return: ring rows and columns of the drawn transitions
    :raises ValueError: when no transition is stored
    """
    available = storage.n_finished_transitions if finished_only else storage.n_transitions
    if available <= 0:
        raise ValueError(
            "Cannot sample: no transition is stored yet"
            + (
                " in a finished episode (offline relabeling samples only ended episodes)"
                if finished_only
                else ""
            )
            + "; add transitions first (SB3: set learning_starts >= one episode)."
        )
    filled = storage.filled_rows()
    # One column: flat positions are ring rows, and no cumulative sum is needed to map them.
    cumulative = filled if storage.n_envs == 1 else np.cumsum(filled)
    total = int(cumulative[-1])
    ring_parts: list[np.ndarray] = []
    column_parts: list[np.ndarray] = []
    needed = n
    # Draw enough in one round that the expected number of valid draws exceeds what is needed (about
    # 2% more draws for 50-step episodes), so one round almost always suffices. The draws are i.i.d.,
    # so the first valid ones are uniform over the stored transitions.
    oversampling = min(total / available, 4.0) * 1.05
    for _ in range(_MAX_REJECTION_ROUNDS):
        # floor(u * total), u uniform in [0, 1): uniform over [0, total), twice as fast as rng.integers.
        flat = (rng.random(int(needed * oversampling) + 8) * total).astype(np.int64)
        # Flat positions over the concatenated filled rows of every column (columns may differ in fill).
        if storage.n_envs == 1:
            ring, column = flat, np.zeros_like(flat)
        else:
            column = np.searchsorted(cumulative, flat, side="right")
            ring = flat - (cumulative[column] - filled[column])
        kept = np.flatnonzero(storage.is_transition(ring, column, finished_only=finished_only))[:needed]
        ring_parts.append(ring[kept])
        column_parts.append(column[kept])
        needed -= kept.size
        if needed == 0:
            if len(ring_parts) == 1:
                return ring_parts[0], column_parts[0]
            return np.concatenate(ring_parts), np.concatenate(column_parts)
    # Almost every filled row is empty of transitions: draw from the exact list instead.
    all_rings, all_columns = np.nonzero(
        storage.step_index[: storage.n_rows] >= 0  # candidate rows, then the exact validity test
    )
    valid = storage.is_transition(all_rings, all_columns, finished_only=finished_only)
    all_rings, all_columns = all_rings[valid], all_columns[valid]
    pick = rng.integers(0, all_rings.size, size=needed)
    ring_parts.append(all_rings[pick])
    column_parts.append(all_columns[pick])
    return np.concatenate(ring_parts), np.concatenate(column_parts)


def select_goal_rows(
    storage: EpisodeStorage,
    rings: np.ndarray,
    columns: np.ndarray,
    strategy: GoalSelectionStrategy,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Choose, for each given transition ``t``, the observation row whose achieved goal becomes its goal.

    The chosen row is ``j + 1`` for a step ``j`` picked by ``strategy`` (``next_achieved_goal[j]``):
    ``future``: ``j`` uniform in ``[t, T_end]`` (inclusive of ``t``); ``final``: ``j = T_end``;
    ``episode``: ``j`` uniform over the episode's stored steps; ``random``: any stored transition of any
    episode and column. For an episode in progress ``T_end`` is the newest step stored so far.

    :return: ring rows and columns of the observation rows holding the new goals
    """
    if strategy is GoalSelectionStrategy.RANDOM:
        goal_rings, goal_columns = sample_transitions(storage, rings.size, rng)
        return (goal_rings + 1) % storage.n_rows, goal_columns
    # Offsets j - t from the transition's own row; rows of an episode are consecutive in the ring.
    # Example: t = 2 of an episode of T = 5 steps: remaining = T_end - t + 1 = 3, so future draws
    # j - t in {0, 1, 2}, final takes 2, episode draws j - t in {-2, ..., 2}.
    step, remaining = storage.steps_to_episode_end(rings, columns)
    if strategy is GoalSelectionStrategy.FINAL:
        offset = remaining - 1
    else:
        low, span = (0, remaining) if strategy is GoalSelectionStrategy.FUTURE else (-step, step + remaining)
        # Uniform in [low, low + span): floor(u * span) with u uniform in [0, 1) is below span (exact for
        # spans far below 2**52) and three times faster than rng.integers with array bounds.
        offset = low + (rng.random(rings.size) * span).astype(np.int64)
    # The goal is next_achieved_goal[j], the observation row after step j.
    return (rings + offset + 1) % storage.n_rows, columns


def select_goals_from_sources(
    storage: EpisodeStorage,
    rings: np.ndarray,
    columns: np.ndarray,
    sources: tuple[tuple[GoalSourceMember, float], ...],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Choose each transition's new goal from a mix of sources (:attr:`HindsightSettings.goal_sources`).

    Every transition draws its source independently with the given shares. A strategy goes through
    :func:`select_goal_rows` (an observation row whose *achieved* goal is the new goal); ``desired`` picks
    a stored transition of any episode uniformly, and its row's *desired* goal is the new goal.

    :return: ring rows and columns of the goals' rows, and a mask of the rows whose goal is the desired
        goal there (None when no row is: every goal is an achieved goal)
    """
    if len(sources) == 1 and isinstance(sources[0][0], GoalSelectionStrategy):
        return (*select_goal_rows(storage, rings, columns, sources[0][0], rng), None)
    chosen = rng.choice(len(sources), size=rings.size, p=[share for _, share in sources])
    goal_rings = np.empty(rings.size, dtype=np.int64)
    goal_columns = np.empty(rings.size, dtype=np.int64)
    from_desired = np.zeros(rings.size, dtype=bool)
    for index, (source, _) in enumerate(sources):
        rows = np.flatnonzero(chosen == index)
        if rows.size == 0:
            continue
        if isinstance(source, GoalSelectionStrategy):
            goal_rings[rows], goal_columns[rows] = select_goal_rows(
                storage, rings[rows], columns[rows], source, rng
            )
        else:
            goal_rings[rows], goal_columns[rows] = sample_transitions(storage, rows.size, rng)
            from_desired[rows] = True
    return goal_rings, goal_columns, (from_desired if from_desired.any() else None)
