"""Drawing stored transitions and choosing where their new goals come from, in O(batch) time.

Neither function scans the buffer: transitions are drawn uniformly over the filled rows of the ring and
the few draws that land on a row holding no transition (an episode's final observation, the newest
observation of an episode in progress, the remains of an overwritten episode) are drawn again.
"""

from __future__ import annotations

import numpy as np

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
            + (" in a finished episode (offline relabeling samples only ended episodes)" if finished_only else "")
            + "; add transitions first (SB3: set learning_starts >= one episode)."
        )
    filled = storage.filled_rows()
    cumulative = np.cumsum(filled)
    total = int(cumulative[-1])
    rings = np.empty(n, dtype=np.int64)
    columns = np.empty(n, dtype=np.int64)
    missing = np.arange(n)
    for _ in range(_MAX_REJECTION_ROUNDS):
        flat = rng.integers(0, total, size=missing.size)
        # Flat positions over the concatenated filled rows of every column (columns may differ in fill).
        column = np.searchsorted(cumulative, flat, side="right")
        ring = flat - (cumulative[column] - filled[column])
        keep = storage.is_transition(ring, column, finished_only=finished_only)
        rings[missing[keep]] = ring[keep]
        columns[missing[keep]] = column[keep]
        missing = missing[~keep]
        if missing.size == 0:
            return rings, columns
    # Almost every filled row is empty of transitions: draw from the exact list instead.
    all_rings, all_columns = np.nonzero(
        storage.step_index[: storage.n_rows] >= 0  # candidate rows, then the exact validity test
    )
    valid = storage.is_transition(all_rings, all_columns, finished_only=finished_only)
    all_rings, all_columns = all_rings[valid], all_columns[valid]
    pick = rng.integers(0, all_rings.size, size=missing.size)
    rings[missing] = all_rings[pick]
    columns[missing] = all_columns[pick]
    return rings, columns


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
    start, last = storage.episode_bounds(rings, columns)
    if strategy is GoalSelectionStrategy.FINAL:
        step_abs = last
    else:
        low = storage.absolute_rows(rings, columns) if strategy is GoalSelectionStrategy.FUTURE else start
        # rng.integers with array bounds draws each j uniformly in [low, last] (high is exclusive).
        step_abs = rng.integers(low, last + 1)
    return (step_abs + 1) % storage.n_rows, columns
