"""Greedy success rate of a goal-conditioned policy on fresh episodes."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def success_rate(
    model: Any,
    env: gym.Env,
    n_episodes: int = 100,
    *,
    seed: int | None = None,
    deterministic: bool = True,
) -> float:
    """Share of ``n_episodes`` fresh episodes that end with ``info["is_success"]`` true.

    :param model: anything with ``predict(dict_observation, deterministic=...)``: a :class:`~her_wrap.HER`,
        or an SB3 model whose policy takes the env's dict observations
    :param env: a goal env (dict observations), not vectorized
    :param n_episodes: episodes to run
    :param seed: seed of the first reset (the next resets continue its random stream)
    :param deterministic: greedy actions (the default) or sampled ones
    :return: success rate in [0, 1]
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}.")
    successes = 0
    observation, info = env.reset(seed=seed)
    for _ in range(n_episodes):
        done = False
        while not done:
            action, _ = model.predict(observation, deterministic=deterministic)
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += bool(np.asarray(info.get("is_success", False)))
        observation, info = env.reset()
    return successes / n_episodes
