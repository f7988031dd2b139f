"""n-step returns over stored episodes: the window of steps each sample sums, shared by both buffers.

:class:`~her_wrap.core.replay.HindsightReplay` and the cpprb-API
:class:`~her_wrap.HindsightReplayBuffer` each supply a :data:`StepFn` that reads one step's reward and
termination for a sample's own (possibly relabeled) goal; :func:`n_step_window` sums them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from her_wrap.core.storage import EpisodeStorage

StepFn = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]
"""``step(rows, ring_rows, columns) -> (rewards, terminated or None)``: the reward of step ``t + k`` of the
given batch ``rows`` (stored at ``ring_rows, columns``) for each row's own goal, and whether that step ends
the episode."""


def n_step_window(
    storage: EpisodeStorage,
    rings: np.ndarray,
    columns: np.ndarray,
    n_steps: int,
    gamma: float,
    returns: np.ndarray,
    done: np.ndarray,
    step: StepFn,
) -> np.ndarray:
    """Sum the discounted rewards of up to ``n_steps`` steps from each sampled transition, in place.

    A window stops at the episode's last stored step and after a step that terminates: its steps are
    ``t, ..., t + m - 1`` with ``m`` the returned count. ``returns`` (float64, holding ``r_t``) gains
    ``gamma**k * r_{t+k}`` for each later step of the window and ``done`` (bool, holding the sampled step's
    termination) is ORed with theirs. The caller moves the next observation to row ``t + m`` and
    bootstraps with ``gamma**m``.

    :param step: the rewards and terminations of the window's later steps, see :data:`StepFn`
    :return: ``m``, the steps in each sample's window (int64, at least 1)
    """
    _, remaining = storage.steps_to_episode_end(rings, columns)
    horizon = np.minimum(remaining, n_steps)
    taken = np.ones(rings.size, dtype=np.int64)
    alive = ~done
    for k in range(1, n_steps):
        rows = np.flatnonzero(alive & (horizon > k))
        if rows.size == 0:
            break
        rewards, terminated = step(rows, (rings[rows] + k) % storage.n_rows, columns[rows])
        returns[rows] += gamma**k * rewards
        taken[rows] = k + 1
        if terminated is not None:
            done[rows] |= terminated
            alive[rows] &= ~terminated
    return taken
