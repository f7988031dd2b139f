"""Callbacks given to ``HER.learn`` see HER as their model, so stable-baselines3's own callbacks work.

SB3's learner hands each callback itself as ``callback.model``. Under HER that learner takes what its
policy takes: flat vectors (``MlpPolicy``) and, when HER normalizes, normalized observations. An
``EvalCallback`` given the env's own dict observations then fails in the learner's ``predict``, or, with
a ``MultiInputPolicy`` learner, judges the policy on observations it never sees normalized.

:func:`as_her_callback` wraps the callbacks a user gives ``HER.learn`` so that their ``model`` is a
:class:`CallbackModel`: HER's ``predict`` (dict observations as the env returns them, normalized and
flattened as the learner needs) and ``save`` (a HER zip, loadable with ``HER.load``), and the env as it
was given to HER. Every other attribute is HER's, else the learner's (``model.actor``, ``model.critic``,
...), so callbacks written for the learner keep working; one that tests ``isinstance(model, SAC)``
should test ``model.model`` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

from her_wrap.envs.checks import check_finite_step
from her_wrap.sb3.vec_flatten import VecGoalFlattenWrapper

if TYPE_CHECKING:
    from her_wrap.sb3.her import HER


class CallbackModel:
    """The model a callback of ``HER.learn`` sees: ``HER``, with the env as it was given to HER.

    :param her: the HER model being trained
    """

    def __init__(self, her: HER) -> None:
        object.__setattr__(self, "her", her)

    def __getattr__(self, name: str) -> Any:
        her = object.__getattribute__(self, "her")
        try:
            return getattr(her, name)
        except AttributeError:
            return getattr(her.model, name)

    def __setattr__(self, name: str, value: Any) -> None:
        her = self.her
        setattr(her if hasattr(her, name) else her.model, name, value)

    def __repr__(self) -> str:
        return f"CallbackModel({self.her!r})"

    def get_env(self) -> VecEnv | None:
        """The learner's env without HER's own layers: dict observations, raw unless the env given was a
        ``VecNormalize`` (then it is there, for ``EvalCallback`` to copy its statistics)."""
        env = self.her.model.get_env()
        while True:
            if isinstance(env, VecGoalFlattenWrapper):
                env = env.venv
            elif (
                isinstance(env, VecNormalize)
                and self.her.normalizes_observations
                and env is self.her.normalizer
            ):
                env = env.venv
            else:
                return env

    def get_vec_normalize_env(self) -> VecNormalize | None:
        """The ``VecNormalize`` of the env given to HER, or None (HER's own statistics apply in ``predict``)."""
        env = self.get_env()
        return unwrap_vec_normalize(env) if env is not None else None


class HERCallback(BaseCallback):
    """Run ``callback`` with a :class:`CallbackModel` of ``her`` as its model.

    :param callback: the user's callback
    :param her: the HER model being trained
    """

    def __init__(self, callback: BaseCallback, her: HER) -> None:
        super().__init__(callback.verbose)
        self.callback = callback
        self.her_model = CallbackModel(her)

    def init_callback(self, model: Any) -> None:
        super().init_callback(model)
        self.callback.init_callback(self.her_model)  # type: ignore[arg-type]

    def _on_training_start(self) -> None:
        self.callback.on_training_start(self.locals, self.globals)

    def _on_rollout_start(self) -> None:
        self.callback.on_rollout_start()

    def _on_step(self) -> bool:
        return self.callback.on_step()

    def _on_rollout_end(self) -> None:
        self.callback.on_rollout_end()

    def _on_training_end(self) -> None:
        self.callback.on_training_end()

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        self.callback.update_locals(locals_)


class RefuseNonFinite(BaseCallback):
    """Refuse an env step whose observations, goals or rewards hold a NaN or an infinity.

    The learner calls its callbacks after each env step and before it stores the step and asks its policy
    for the next action: so the step is refused before any of it is stored or reaches the policy, with
    the env column, the step and the field named (:func:`~her_wrap.envs.checks.check_finite_step`). It
    reads the raw observations when the learner normalizes them (normalization would clip an infinity).
    """

    def _on_step(self) -> bool:
        rewards = self.locals.get("rewards")
        observations = self.locals.get("new_obs")
        if rewards is None or observations is None:
            return True
        normalizer = self.model.get_vec_normalize_env()
        if normalizer is not None:
            observations = normalizer.get_original_obs()
        check_finite_step(observations, rewards, self.num_timesteps // len(rewards) - 1)
        return True


def as_her_callback(callback: MaybeCallback, her: HER) -> BaseCallback | None:
    """The callbacks given to ``HER.learn`` (one, a list, or a function), run with HER as their model,
    after :class:`RefuseNonFinite` unless HER was built with ``check_finite=False``."""
    checks: list[BaseCallback] = [RefuseNonFinite()] if her.check_finite else []
    if callback is None:
        return CallbackList(checks) if checks else None
    if isinstance(callback, list):
        callback = CallbackList(callback)
    elif not isinstance(callback, BaseCallback):
        callback = ConvertCallback(callback)
    return CallbackList([*checks, HERCallback(callback, her)]) if checks else HERCallback(callback, her)
