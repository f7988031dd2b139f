"""``compute_reward`` / ``compute_terminated`` of a goal env, callable in this process.

Relabeling calls them once per batch. Under ``SubprocVecEnv`` the envs live in other processes, and
calling into them per batch (what SB3's ``env_method("compute_reward")`` does) costs an inter-process
round trip each time; here a local copy of the env is used instead: built from its gymnasium spec when
that spec can be made, else a pickled copy of the remote env itself (``get_attr``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from her_wrap.envs.checks import BatchedGoalFunction

GoalFunction = Callable[[Any, Any, Any], Any]


@dataclass
class GoalFunctions:
    """The reward and termination functions used for relabeled transitions.

    :param compute_reward: ``(achieved_goal, desired_goal, infos) -> rewards``
    :param compute_terminated: ``(achieved_goal, desired_goal, infos) -> bool``; None: relabeled
        transitions never terminate (the bootstrap always continues)
    :param from_copy: the functions belong to a copy of an env that lives in another process; a copy
        taken before that env was reset may lack state its ``compute_reward`` reads, and can be taken again
    """

    compute_reward: GoalFunction
    compute_terminated: GoalFunction | None = None
    from_copy: bool = False

    @classmethod
    def from_env(cls, env: Any) -> GoalFunctions:
        """Find the goal functions of a gymnasium env or VecEnv (a local copy for ``SubprocVecEnv``).

        :param env: gymnasium env (wrapped or not), or an SB3 VecEnv (wrapped or not) of goal envs
        :raises TypeError: when no ``compute_reward`` can be found, or no local copy of a remote env can
            be made, naming the fix
        """
        local, from_copy = _local_env(env)
        unwrapped = getattr(local, "unwrapped", local)
        compute_reward = getattr(unwrapped, "compute_reward", None)
        if compute_reward is None:
            raise TypeError(
                f"{type(unwrapped).__name__} has no compute_reward(achieved_goal, desired_goal, info): HER "
                "needs it to reward relabeled goals. Give the env that method (gymnasium-robotics GoalEnv API)."
            )
        return cls(compute_reward, getattr(unwrapped, "compute_terminated", None), from_copy)

    def batched(
        self, sample_achieved: np.ndarray | None = None, sample_desired: np.ndarray | None = None
    ) -> GoalFunctions:
        """Both functions made to take batches, natively or one call per row (with a warning).

        With sample goals (at least 2 rows), the choice is made now when they leave no doubt (see
        :meth:`~her_wrap.envs.checks.BatchedGoalFunction.decide_if_clear`): a ``compute_reward`` for single
        goals is reported at once. Otherwise it is made at the first real batch of two rows or more.
        ``compute_terminated`` returning one constant for a whole batch (gymnasium-robotics' ``False``) is
        broadcast to every row.
        """
        reward = BatchedGoalFunction(self.compute_reward)
        terminated = self.compute_terminated
        batched_terminated = (
            None if terminated is None else BatchedGoalFunction(terminated, broadcast_scalar=True)
        )
        if sample_achieved is not None and sample_desired is not None:
            achieved, desired = np.array(sample_achieved, copy=True), np.array(sample_desired, copy=True)
            # Row 0 a success: a function computing one value over the whole batch then differs from its rows.
            desired[0] = achieved[0]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if batched_terminated is not None:
                    batched_terminated.decide_if_clear(achieved, desired)
            reward.decide_if_clear(achieved, desired)
        return GoalFunctions(reward, batched_terminated, self.from_copy)


def _local_env(env: Any) -> tuple[Any, bool]:
    """An env object living in this process that has the goal functions of ``env``, and whether it is a
    copy of one living in another process."""
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if isinstance(env, DummyVecEnv):
        return env.envs[0], False
    if not isinstance(env, VecEnv):
        return env, False
    spec = env.get_attr("spec", indices=[0])[0]
    if spec is not None:
        try:
            local = gym.make(spec.id, **spec.kwargs)
        except Exception:  # a placeholder spec (an id never registered here) or one that needs its module
            local = None
        if local is not None:
            try:
                local.reset(seed=0)  # some compute_reward read state that exists only after a reset
            except Exception:
                pass
            return local, True
    try:
        return env.get_attr("unwrapped", indices=[0])[0], True
    except Exception as error:
        raise TypeError(
            f"Relabeling needs compute_reward in this process, but the envs of this {type(env).__name__} run "
            "in other processes, their gymnasium spec cannot be made here"
            + ("" if spec is None else f" ({spec.id!r})")
            + f" and a copy of the env could not be fetched ({type(error).__name__}: {error}). Fix: register "
            "the env with gymnasium.register (and import its module here), make the env picklable, or use "
            "DummyVecEnv."
        ) from error
