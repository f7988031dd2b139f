"""n-step returns over stored episodes: one step of the sample path, after relabeling.

:func:`n_step_window` sums the window of steps of each sample; :class:`~her_wrap.core.replay.HindsightReplay`
calls :func:`add_n_step_returns` (its rewards recomputed by ``reward_fn``) and the cpprb-API
:class:`~her_wrap.HindsightReplayBuffer` supplies its own :data:`StepFn` (cpprb's ``reward_func``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from her_wrap.core.replay import HindsightReplay
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


def add_n_step_returns(
    batch: dict[str, np.ndarray],
    replay: HindsightReplay,
    rings: np.ndarray,
    columns: np.ndarray,
    relabeled: np.ndarray,
) -> None:
    """Turn a batch of one-step samples into n-step ones, for each sample's own (relabeled or original) goal.

    Worked example, ``n_steps = 3``, a relabeled sample at step 4 of an episode of 6 steps (0-5) whose
    goal is reached at step 5: the reward is ``r_4 + gamma * r_5`` (both recomputed for the new goal),
    the sample terminates (reached at step 5), the next observation is ``o_6`` and ``discounts`` is
    ``gamma ** 2``. Original-goal samples use the stored rewards and terminations.

    :param batch: the relabeled batch drawn at ``rings, columns``; changed in place (its arrays are the
        sample's own copies), ``discounts`` added
    :param relabeled: which rows carry a new goal
    :param replay: the buffer the batch was drawn from (its storage, keys, reward and termination
        functions, ``settings.n_steps`` and ``discount``: ``gamma``, None being an error naming the fix)
    """
    if replay.discount is None:
        raise ValueError(
            "n_steps > 1 needs the discount of the returns: pass discount=gamma to HindsightReplay "
            "(HER and the SB3 buffers pass the learner's gamma)."
        )
    gamma, n_rows = float(replay.discount), replay.storage.n_rows
    goals = batch[replay.desired_goal_key]
    returns = batch[replay.reward_key].astype(np.float64)
    stored_terminated = replay.terminated_key if replay.terminated_key in batch else None
    done = (
        batch[stored_terminated].astype(bool) if stored_terminated is not None else np.zeros(rings.size, bool)
    )

    def step(
        rows: np.ndarray, step_rings: np.ndarray, step_columns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        reward = replay.storage.read_field(replay.reward_key, step_rings, step_columns).astype(np.float64)
        terminated = (
            replay.storage.read_field(stored_terminated, step_rings, step_columns).astype(bool)
            if stored_terminated is not None
            else np.zeros(rows.size, bool)
        )
        new_goal = relabeled[rows]
        if new_goal.any():
            achieved = replay.goal_of(
                replay.storage.read_field(
                    replay.achieved_goal_key, (step_rings[new_goal] + 1) % n_rows, step_columns[new_goal]
                )
            )
            infos = (
                None
                if replay.storage.infos is None
                else replay.storage.infos[step_rings[new_goal], step_columns[new_goal]]
            )
            if replay.reward_fn is None:
                raise ValueError("n_steps > 1 sums rewards recomputed for each goal: set reward_fn.")
            step_goals = goals[rows[new_goal]]
            reward[new_goal] = np.asarray(replay.reward_fn(achieved, step_goals, infos)).reshape(-1)
            if replay.terminated_fn is None:
                terminated[new_goal] = False
            else:
                terminated[new_goal] = np.asarray(replay.terminated_fn(achieved, step_goals, infos)).reshape(
                    -1
                )
        return reward, terminated

    taken = n_step_window(replay.storage, rings, columns, replay.settings.n_steps, gamma, returns, done, step)
    moved = np.flatnonzero(taken > 1)
    if moved.size:
        next_rings, next_columns = (rings[moved] + taken[moved]) % n_rows, columns[moved]
        for name in replay.storage.observation_specs:
            if name != replay.desired_goal_key or not replay.goal_in_observation:
                batch["next_" + name][moved] = replay.storage.read_field(name, next_rings, next_columns)
    batch[replay.reward_key] = returns.astype(batch[replay.reward_key].dtype)
    if stored_terminated is not None:
        batch[stored_terminated] = done.astype(batch[stored_terminated].dtype)
    batch["discounts"] = (gamma**taken).astype(np.float32)
