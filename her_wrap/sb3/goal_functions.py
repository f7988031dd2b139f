"""``compute_reward`` / ``compute_terminated`` of a goal env, callable in this process.

Relabeling calls them once per batch. Under ``SubprocVecEnv`` the envs live in other processes, and
calling into them per batch (what SB3's ``env_method("compute_reward")`` does) costs an inter-process
round trip each time; here a local instance of the env is built from its spec instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from her_wrap.envs.checks import make_vectorized_reward

GoalFunction = Callable[[np.ndarray, np.ndarray, Any], Any]


@dataclass
class GoalFunctions:
    """The reward and termination functions used for relabeled transitions.

    :param compute_reward: ``(achieved_goal, desired_goal, infos) -> rewards``
    :param compute_terminated: ``(achieved_goal, desired_goal, infos) -> bool``; None: relabeled
        transitions never terminate (the bootstrap always continues)
    """

    compute_reward: GoalFunction
    compute_terminated: GoalFunction | None = None

    @classmethod
    def from_env(cls, env: Any) -> GoalFunctions:
        """Find the goal functions of a gymnasium env or VecEnv (built locally for ``SubprocVecEnv``).

        :param env: gymnasium env (wrapped or not), or an SB3 VecEnv (wrapped or not) of goal envs
        :raises TypeError: when no ``compute_reward`` can be found, naming the fix
        """
        local = _local_env(env)
        unwrapped = getattr(local, "unwrapped", local)
        compute_reward = getattr(unwrapped, "compute_reward", None)
        if compute_reward is None:
            raise TypeError(
                f"{type(unwrapped).__name__} has no compute_reward(achieved_goal, desired_goal, info): HER "
                "needs it to reward relabeled goals. Give the env that method (gymnasium-robotics GoalEnv API)."
            )
        return cls(compute_reward, getattr(unwrapped, "compute_terminated", None))

    def vectorized(self, achieved_goal_batch: np.ndarray, desired_goal_batch: np.ndarray) -> GoalFunctions:
        """Both functions made to take batches (natively, or one call per row with a warning).

        ``compute_terminated`` returning one constant for a whole batch (gymnasium-robotics' ``False``)
        is broadcast to every row. Sample goals: at least 2 rows; row 0 is made a success (achieved equal
        to desired) so a per-row function shows it is one.
        """
        achieved = np.array(achieved_goal_batch, copy=True)
        desired = np.array(desired_goal_batch, copy=True)
        desired[0] = achieved[0]
        reward = make_vectorized_reward(self.compute_reward, achieved, desired)
        terminated = self.compute_terminated
        if terminated is not None:
            terminated = _vectorized_terminated(terminated, achieved, desired)
        return GoalFunctions(reward, terminated)


@dataclass
class _Broadcast:
    """A function that returns one value for any batch, broadcast over its rows."""

    value: Any

    def __call__(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any = None) -> np.ndarray:
        return np.full(len(achieved_goal), self.value)


def _vectorized_terminated(function: GoalFunction, achieved: np.ndarray, desired: np.ndarray) -> GoalFunction:
    batch = np.asarray(function(achieved, desired, None))
    if batch.shape == (len(achieved),):
        return function
    rows = [np.asarray(function(achieved[i], desired[i], None)).item() for i in range(len(achieved))]
    if batch.size == 1 and all(row == batch.item() for row in rows):
        return _Broadcast(batch.item())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_vectorized_reward(function, achieved, desired)


def _local_env(env: Any) -> Any:
    """An env object living in this process that has the goal functions of ``env``."""
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if isinstance(env, DummyVecEnv):
        return env.envs[0]
    if isinstance(env, VecEnv):
        spec = env.get_attr("spec", indices=[0])[0]
        if spec is None:
            raise TypeError(
                "The VecEnv's envs run in other processes and have no gymnasium spec to build a local copy "
                "from: register the env with gymnasium (gymnasium.register) or use DummyVecEnv."
            )
        return gym.make(spec.id, **spec.kwargs)
    return env
