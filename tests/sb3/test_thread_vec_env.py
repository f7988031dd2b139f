"""``ThreadVecEnv`` (``--vec-env thread``): envs stepped in threads give ``DummyVecEnv``'s data, bit for bit."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from robotics_extra import ROBOTICS
from stable_baselines3.common.vec_env import DummyVecEnv

from her_wrap.envs.registry import make_goal_env
from her_wrap.runs.env_factory import make_vec_goal_env
from her_wrap.runs.errors import UsageError
from her_wrap.sb3.thread_vec_env import ThreadVecEnv


def rollout(vec_env: Any, steps: int, seed: int) -> list[tuple[Any, ...]]:
    """Every step's observations, rewards, dones and end-of-episode data under seeded random actions."""
    vec_env.seed(seed)
    vec_env.action_space.seed(seed)
    record: list[tuple[Any, ...]] = [tuple(np.copy(v) for v in vec_env.reset().values())]
    for _ in range(steps):
        actions = np.stack([vec_env.action_space.sample() for _ in range(vec_env.num_envs)])
        obs, rewards, dones, infos = vec_env.step(actions)
        ends = [
            (info["TimeLimit.truncated"], *info["terminal_observation"].values()) if done else ()
            for done, info in zip(dones, infos, strict=True)
        ]
        record.append((*obs.values(), rewards, dones, repr(ends)))
    vec_env.close()
    return record


def assert_same(first: list[tuple[Any, ...]], second: list[tuple[Any, ...]]) -> None:
    assert len(first) == len(second)
    for step_a, step_b in zip(first, second, strict=True):
        for a, b in zip(step_a, step_b, strict=True):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
            else:
                assert a == b


@pytest.mark.parametrize("n_envs", [1, 3])
def test_bit_flipping_in_threads_gives_the_dummy_vec_envs_steps(n_envs: int) -> None:
    make = functools.partial(make_goal_env, "BitFlipping-v0", n_bits=4, max_steps=4)
    threaded = rollout(ThreadVecEnv([make] * n_envs), 40, seed=3)
    plain = rollout(DummyVecEnv([make] * n_envs), 40, seed=3)
    assert_same(threaded, plain)
    assert any(step[-2].any() for step in plain[1:])  # episodes ended, so resets were compared too


@pytest.mark.parametrize("env_id", ["FetchReach-v4", "FetchPush-v4"])
@pytest.mark.parametrize("robotics", [pytest.param(None, marks=ROBOTICS)])
def test_fetch_in_threads_gives_the_dummy_vec_envs_steps(env_id: str, robotics: None) -> None:
    make = functools.partial(make_goal_env, env_id, max_episode_steps=20)
    threaded = rollout(ThreadVecEnv([make, make]), 50, seed=7)
    plain = rollout(DummyVecEnv([make, make]), 50, seed=7)
    assert_same(threaded, plain)
    assert any(step[-2].any() for step in plain[1:])


def test_make_vec_goal_env_builds_threads_and_refuses_an_unknown_kind() -> None:
    vec_env = make_vec_goal_env("BitFlipping-v0", {"n_bits": 4}, 2, seed=0, vec_env="thread")
    assert isinstance(vec_env, ThreadVecEnv) and vec_env.num_envs == 2
    vec_env.close()
    with pytest.raises(UsageError, match="--vec-env must be one of dummy, subproc, thread, got 'fork'"):
        make_vec_goal_env("BitFlipping-v0", {"n_bits": 4}, 2, seed=0, vec_env="fork")
