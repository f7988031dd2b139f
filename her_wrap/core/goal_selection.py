"""Drawing stored transitions and choosing where their new goals come from, in O(batch) time.

Neither function scans the buffer: transitions are drawn uniformly over the filled rows of the ring and
the few draws that land on a row holding no transition (an episode's final observation, the newest
observation of an episode in progress, the remains of an overwritten episode) are drawn again.
"""

from __future__ import annotations

import numpy as np

from her_wrap.core.settings import GoalSource
from her_wrap.core.storage import EpisodeStorage
from her_wrap.core.strategies import GoalSelectionStrategy

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
    sources: tuple[tuple[GoalSource, float], ...],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Choose each transition's new goal from a mix of sources (:attr:`HindsightSettings.goal_sources`).

    Every transition draws its source independently with the given shares. Sources that are strategies
    go through :func:`select_goal_rows` (an observation row whose *achieved* goal is the new goal);
    ``desired`` picks a stored transition of any episode uniformly, and its row's *desired* goal is the
    new goal.

    :return: ring rows and columns of the goals' rows, and a mask of the rows whose goal is the desired
        goal there (None when no row is: every goal is an achieved goal)
    """
    if len(sources) == 1 and sources[0][0].strategy is not None:
        strategy = sources[0][0].strategy
        return (*select_goal_rows(storage, rings, columns, strategy, rng), None)
    chosen = rng.choice(len(sources), size=rings.size, p=[share for _, share in sources])
    goal_rings = np.empty(rings.size, dtype=np.int64)
    goal_columns = np.empty(rings.size, dtype=np.int64)
    from_desired = np.zeros(rings.size, dtype=bool)
    for index, (source, _) in enumerate(sources):
        rows = np.flatnonzero(chosen == index)
        if rows.size == 0:
            continue
        if source.strategy is None:
            goal_rings[rows], goal_columns[rows] = sample_transitions(storage, rows.size, rng)
            from_desired[rows] = True
        else:
            goal_rings[rows], goal_columns[rows] = select_goal_rows(
                storage, rings[rows], columns[rows], source.strategy, rng
            )
    return goal_rings, goal_columns, (from_desired if from_desired.any() else None)
