"""A VecEnv wrapper that flattens goal dict observations for policies that take flat vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, unwrap_vec_normalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from her_wrap.envs.goal_wrapper import GoalObservationLayout, flat_observation_space


class VecGoalFlattenWrapper(VecEnvWrapper):
    """Flatten the dict goal observations of a VecEnv (``terminal_observation`` in infos included).

    Under a ``VecNormalize`` the ``terminal_observation`` stays a dict: SB3's ``_store_transition``
    un-normalizes it with that ``VecNormalize`` and pairs it with ``get_original_obs()``, both dicts.

    The VecEnv counterpart of :class:`~her_wrap.HERGoalEnvWrapper`, for VecEnvs built from dict goal
    envs (``SubprocVecEnv``, ``VecNormalize``...) whose learner uses ``MlpPolicy``.

    :param venv: VecEnv with a ``spaces.Dict`` goal observation space
    """

    def __init__(self, venv: VecEnv) -> None:
        if not isinstance(venv.observation_space, spaces.Dict):
            raise TypeError(
                f"VecGoalFlattenWrapper needs dict goal observations, got {venv.observation_space}; "
                "pass the VecEnv of the goal envs themselves (not already flattened)."
            )
        self.layout = GoalObservationLayout.from_space(venv.observation_space)
        self.flatten_terminal = unwrap_vec_normalize(venv) is None
        flat_space = flat_observation_space(venv.observation_space)
        super().__init__(venv, observation_space=flat_space)

    def reset(self) -> VecEnvObs:
        return self.layout.flatten(self.venv.reset())  # type: ignore[arg-type]

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        for info in infos if self.flatten_terminal else ():
            terminal = info.get("terminal_observation")
            if isinstance(terminal, dict):
                info["terminal_observation"] = self.layout.flatten(terminal)
        return self.layout.flatten(observations), rewards, dones, infos  # type: ignore[arg-type]

    def convert_dict_to_obs(self, obs_dict: dict[str, Any]) -> np.ndarray:
        """Flatten one dict observation or a batch of them."""
        return self.layout.flatten(obs_dict)
