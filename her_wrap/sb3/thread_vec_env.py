"""A ``VecEnv`` whose envs step in threads of this process.

MuJoCo lets go of Python's global interpreter lock while it integrates (``mj_step``), and a Fetch or
Panda step is mostly integration (20 substeps), so two envs stepped in two threads run their physics at
once on two cores, without the pickling and pipes of ``SubprocVecEnv``. Each env keeps its own model,
data and random generator, so the steps, resets and infos are those of ``DummyVecEnv``, bit for bit.
Envs whose step holds the lock throughout (pure Python ones, such as bit flipping) gain nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from typing import Any

import gymnasium
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn


class ThreadVecEnv(DummyVecEnv):
    """``DummyVecEnv`` with each env's step (and its reset at an episode's end) run in a thread pool.

    :param env_fns: functions that each build one env
    :param n_threads: threads of the pool (default: one per env)
    """

    def __init__(self, env_fns: list[Callable[[], gymnasium.Env]], n_threads: int | None = None) -> None:
        super().__init__(env_fns)
        self._pool = ThreadPoolExecutor(max_workers=n_threads or self.num_envs, thread_name_prefix="env")

    def _step_one(self, env_idx: int) -> tuple[Any, float, bool, dict[str, Any], dict[str, Any] | None]:
        obs, reward, terminated, truncated, info = self.envs[env_idx].step(self.actions[env_idx])
        done = bool(terminated or truncated)
        info["TimeLimit.truncated"] = truncated and not terminated
        reset_info = None
        if done:
            info["terminal_observation"] = obs
            obs, reset_info = self.envs[env_idx].reset()
        return obs, float(reward), done, info, reset_info

    def step_wait(self) -> VecEnvStepReturn:
        for env_idx, (obs, reward, done, info, reset_info) in enumerate(
            self._pool.map(self._step_one, range(self.num_envs))
        ):
            self.buf_rews[env_idx] = reward
            self.buf_dones[env_idx] = done
            self.buf_infos[env_idx] = info
            if reset_info is not None:
                self.reset_infos[env_idx] = reset_info
            self._save_obs(env_idx, obs)
        return (
            self._obs_from_buf(),
            np.copy(self.buf_rews),
            np.copy(self.buf_dones),
            deepcopy(self.buf_infos),
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        super().close()
