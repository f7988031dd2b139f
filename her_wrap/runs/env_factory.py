"""Env ids to vectorized goal envs for runs: checks, monitors, one-line errors.

Which ids exist and how they get registered (her_wrap's own, the robotics extra's) is the env registry's
job (:mod:`her_wrap.envs.registry`); this module turns its errors into the command line's one-line
:class:`~her_wrap.runs.errors.UsageError`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium

from her_wrap.envs import GraspStartWrapper, check_goal_env, registry
from her_wrap.runs.arguments import VEC_ENVS
from her_wrap.runs.errors import UsageError

if TYPE_CHECKING:
    from her_wrap.runs.run_config import RunConfig

#: What the training monitor records beside return, length and time (the zoo's ``info_keywords``).
MONITOR_INFO_KEYWORDS = ("is_success",)


def ensure_registered(env_id: str) -> None:
    """Make ``env_id`` known to gymnasium (:func:`her_wrap.envs.registry.ensure_registered`).

    :raises UsageError: when the id needs the robotics extra and it is missing, or when no package knows
        the id (with the closest registered ids as a suggestion)
    """
    try:
        registry.ensure_registered(env_id)
    except registry.EnvRegistryError as error:
        raise UsageError(str(error)) from None


def check_env_id(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make one env in this process to check that the id, the kwargs and the spaces suit HER.

    Errors in ``SubprocVecEnv`` workers surface as broken pipes; this check turns them into one line first.

    :raises UsageError: unknown id, kwargs the env rejects, or an env that is not a goal env
    """
    try:
        env = registry.make_goal_env(env_id, **env_kwargs)
    except registry.EnvRegistryError as error:
        raise UsageError(str(error)) from None
    except (TypeError, ValueError, gymnasium.error.Error) as error:
        raise UsageError(f"cannot make {env_id} with env_kwargs {env_kwargs}: {error}") from None
    try:
        check_goal_env(env)
    except (TypeError, ValueError) as error:
        raise UsageError(f"{env_id} cannot be used with HER: {error}") from None
    finally:
        env.close()


def make_vec_goal_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    n_envs: int,
    seed: int | None,
    *,
    vec_env: str = "dummy",
    monitor_dir: Path | None = None,
    grasp_start: float | None = None,
) -> Any:
    """A ``VecEnv`` of ``n_envs`` monitored copies of a goal env.

    :param env_id: registered (or registrable) id
    :param env_kwargs: keyword arguments of ``gymnasium.make``
    :param n_envs: number of copies
    :param seed: copy ``i`` is seeded ``seed + i``
    :param vec_env: ``"dummy"`` (one process), ``"subproc"`` (one process per copy) or ``"thread"`` (one
        process, each copy stepped in a thread: :class:`~her_wrap.sb3.thread_vec_env.ThreadVecEnv`)
    :param monitor_dir: where the monitors write ``{i}.monitor.csv`` (return, length, time and
        ``is_success`` of every episode); ``None`` for monitors that keep no file (evaluation)
    :param grasp_start: share of episodes started with the object in the gripper
        (:class:`~her_wrap.envs.GraspStartWrapper`), or ``None``
    :raises UsageError: for an unknown ``vec_env``, or ``grasp_start`` on an env it does not support
    """
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from her_wrap.sb3.thread_vec_env import ThreadVecEnv

    classes: dict[str, type[DummyVecEnv] | type[SubprocVecEnv]] = {
        "dummy": DummyVecEnv,
        "subproc": SubprocVecEnv,
        "thread": ThreadVecEnv,
    }
    if vec_env not in classes:
        raise UsageError(f"--vec-env must be one of {', '.join(VEC_ENVS)}, got {vec_env!r}")
    if grasp_start is not None:
        _check_grasp_start(env_id, env_kwargs, grasp_start)
    return make_vec_env(
        functools.partial(registry.make_goal_env, env_id),
        n_envs=n_envs,
        seed=seed,
        monitor_dir=None if monitor_dir is None else str(monitor_dir),
        env_kwargs=env_kwargs,
        vec_env_cls=classes[vec_env],
        monitor_kwargs={"info_keywords": MONITOR_INFO_KEYWORDS},
        wrapper_class=None if grasp_start is None else GraspStartWrapper,
        wrapper_kwargs=None if grasp_start is None else {"share": grasp_start},
    )


def _check_grasp_start(env_id: str, env_kwargs: dict[str, Any], share: float) -> None:
    """Refuse ``grasp_start`` in this process, as one line, before any env process starts."""
    env = registry.make_goal_env(env_id, **env_kwargs)
    try:
        GraspStartWrapper(env, share)
    except ValueError as error:
        raise UsageError(f"{env_id}: {error}") from None
    finally:
        env.close()


#: Seed offset of the evaluation env, so its episodes differ from the training envs'.
EVAL_SEED_OFFSET = 10_000


@dataclass
class TrainingEnvs:
    """The envs of a training run: ``train`` for the learner, ``evaluate`` for greedy evaluations.

    Both return the goal env's raw dict observations; a normalizing agent normalizes inside (HER's
    ``normalize``), for its learner and in ``predict``.
    """

    train: Any
    evaluate: Any

    def close(self) -> None:
        self.train.close()
        self.evaluate.close()


def make_training_envs(
    config: RunConfig, seed: int, *, vec_env: str = "dummy", monitor_dir: Path | None = None
) -> TrainingEnvs:
    """Training envs (``config.n_envs`` copies) and a one-env evaluation env.

    :param config: the run's config (env id, env kwargs, n_envs)
    :param seed: training env ``i`` is seeded ``seed + i``, the evaluation env ``seed + EVAL_SEED_OFFSET``
    :param vec_env: ``dummy``, ``subproc`` or ``thread`` (:data:`~her_wrap.runs.arguments.VEC_ENVS`)
    :param monitor_dir: where the training monitors write their CSVs, or ``None``
    """
    train_env = make_vec_goal_env(
        config.env_id,
        config.env_kwargs,
        config.n_envs,
        seed,
        vec_env=vec_env,
        monitor_dir=monitor_dir,
        grasp_start=config.grasp_start,
    )
    return TrainingEnvs(
        train_env, make_vec_goal_env(config.env_id, config.env_kwargs, 1, seed + EVAL_SEED_OFFSET)
    )
