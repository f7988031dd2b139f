"""The env a learner sees, made from the goal env given to ``HER``.

A goal env (or its id, or a VecEnv of goal envs) is checked, wrapped in ``VecNormalize`` when HER
normalizes, and flattened for ``MlpPolicy``; relabeling keeps reading ``compute_reward`` from the goal
env itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecNormalize, unwrap_vec_normalize

from her_wrap.envs.checks import check_goal_env, check_goal_space
from her_wrap.envs.goal_wrapper import GoalObservationLayout, HERGoalEnvWrapper
from her_wrap.sb3.persistence import detached_normalizer
from her_wrap.sb3.vec_flatten import VecGoalFlattenWrapper

#: ``VecNormalize`` settings of ``normalize=True``: observations and goals, not rewards, clipped at 5
#: standard deviations as the HER paper's DDPG did. A ``normalize`` dict overrides them key by key.
DEFAULT_NORMALIZE_KWARGS: dict[str, Any] = {"norm_obs": True, "norm_reward": False, "clip_obs": 5.0}


@dataclass(frozen=True)
class LearnerEnv:
    """A goal env prepared for a learner.

    :param learner_env: what the learner steps (flat for ``MlpPolicy``, normalized when asked)
    :param goal_env: the goal env (or VecEnv of them, normalized when asked) relabeling takes
        ``compute_reward`` from
    :param layout: key layout of the flat vectors, or None for dict observations
    :param normalizer: the ``VecNormalize`` in the stack, or None
    :param normalizes_observations: whether ``HER.predict`` must normalize the env's raw dict observations
        (HER added the normalizer; a ``VecNormalize`` given by the user returns normalized observations)
    """

    learner_env: Any
    goal_env: Any
    layout: GoalObservationLayout | None
    normalizer: VecNormalize | None
    normalizes_observations: bool


def prepare_learner_env(
    env: Any,
    *,
    flat: bool,
    normalize_kwargs: dict[str, Any] | None,
    normalizer: VecNormalize | None,
) -> LearnerEnv:
    """Check a goal env and give the learner the observations its policy takes (normalized when asked).

    :param env: a goal env, a :class:`~her_wrap.HERGoalEnvWrapper`, or a VecEnv of goal envs
    :param flat: the learner's policy takes flat vectors (``MlpPolicy``)
    :param normalize_kwargs: ``VecNormalize`` arguments when HER normalizes with new statistics
    :param normalizer: statistics to keep normalizing with (a loaded model's), or None
    :raises ValueError: for an env that is not a goal env, or two normalizations asked for
    """
    given_normalizer = unwrap_vec_normalize(env) if isinstance(env, VecEnv) else None
    if given_normalizer is None and (normalize_kwargs is not None or normalizer is not None):
        env = _normalized(env, normalize_kwargs, normalizer)
    elif given_normalizer is not None and normalizer is None and normalize_kwargs is not None:
        raise ValueError(
            "The env is already a VecNormalize and normalize= asks HER for another one: pass the VecEnv "
            "without VecNormalize, or leave normalize False."
        )
    in_stack = unwrap_vec_normalize(env) if isinstance(env, VecEnv) else None
    # Observations reach predict as the env given here returns them: raw unless it normalizes itself.
    normalizes_observations = in_stack is not None and given_normalizer is None

    def prepared(learner_env: Any, goal_env: Any, layout: GoalObservationLayout | None) -> LearnerEnv:
        return LearnerEnv(learner_env, goal_env, layout, in_stack, normalizes_observations)

    if isinstance(env, VecEnv):
        check_goal_space(env.observation_space)
        if flat:
            flat_env = VecGoalFlattenWrapper(env)
            return prepared(flat_env, env, flat_env.layout)
        return prepared(env, env, None)
    if isinstance(env, HERGoalEnvWrapper):
        if flat:
            return prepared(env, env, env.layout)
        env = env.env
    check_goal_env(env)
    if flat:
        wrapped = HERGoalEnvWrapper(env)
        return prepared(wrapped, env, wrapped.layout)
    return prepared(env, env, None)


def _normalized(
    env: Any, normalize_kwargs: dict[str, Any] | None, normalizer: VecNormalize | None
) -> VecNormalize:
    """``env`` (a goal env or a VecEnv of them) under ``VecNormalize``: a new one from ``normalize_kwargs``,
    or a copy of ``normalizer`` carrying its statistics."""
    if isinstance(env, VecEnv):
        check_goal_space(env.observation_space)
        venv = env
    else:
        if isinstance(env, HERGoalEnvWrapper):
            env = env.env
        check_goal_env(env)
        monitored = env if is_wrapped(env, Monitor) else Monitor(env)  # as SB3 wraps a plain env
        venv = DummyVecEnv([lambda: monitored])
    if normalizer is None:
        assert normalize_kwargs is not None
        return VecNormalize(venv, **normalize_kwargs)
    restored = detached_normalizer(normalizer)
    restored.set_venv(venv)
    return restored


def normalize_kwargs_of(normalize: bool | dict[str, Any], gamma: float | None) -> dict[str, Any] | None:
    """``VecNormalize`` arguments for HER's ``normalize=``, or None for no normalization."""
    if normalize is False or normalize is None:
        return None
    if normalize is True:
        normalize = {}
    if not isinstance(normalize, dict):
        raise TypeError(
            f"normalize must be True, False or a dict of VecNormalize arguments, got {normalize!r}."
        )
    for key in ("venv", "training"):
        if key in normalize:
            raise ValueError(
                f"normalize sets no {key!r}: HER builds the VecNormalize around its env and trains it."
            )
    kwargs = {**DEFAULT_NORMALIZE_KWARGS, **normalize}
    if gamma is not None:
        kwargs.setdefault("gamma", gamma)  # discount of the return whose scale norm_reward divides by
    return kwargs
