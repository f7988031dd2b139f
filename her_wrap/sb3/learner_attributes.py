"""The stable-baselines3 model attributes ``HER`` forwards to its learner.

SB3 users reach for ``model.num_timesteps``, ``model.policy``, ``model.verbose``...; ``HER`` builds its
learner by composition (``HER.model``), so each of these names is forwarded to it, one by one, typed and
documented: a typo is an ``AttributeError`` rather than a silent new attribute.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

import gymnasium as gym
import torch as th
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

T = TypeVar("T")


class LearnerAttribute(Generic[T]):
    """A class attribute that reads the attribute of the same name on ``self.model``.

    :param doc: what the attribute is (its docstring)
    :param settable: writes go to the learner too; otherwise a write raises ``AttributeError``
    """

    def __init__(self, doc: str, *, settable: bool = False) -> None:
        self.__doc__ = doc
        self.settable = settable
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> LearnerAttribute[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(instance.model, self.name)

    def __set__(self, instance: Any, value: T) -> None:
        if not self.settable:
            raise AttributeError(
                f"{type(instance).__name__}.{self.name} is the learner's and read-only here: set "
                f"model.model.{self.name} if the learner allows it."
            )
        setattr(instance.model, self.name, value)


class LearnerAttributes:
    """What SB3 users read and set on a model, forwarded to :attr:`model`, the learner."""

    model: OffPolicyAlgorithm

    policy = LearnerAttribute[BasePolicy](
        "The learner's policy network (the policy name or class given to HER is ``policy_argument``)."
    )
    policy_class = LearnerAttribute[type[BasePolicy]]("The learner's policy class.")
    num_timesteps = LearnerAttribute[int]("Env steps taken so far, over every env.")
    verbose = LearnerAttribute[int](
        "The learner's verbosity: 0 quiet, 1 training logs, 2 debug.", settable=True
    )
    action_noise = LearnerAttribute[ActionNoise | None](
        "Exploration noise of continuous-action learners, or None.", settable=True
    )
    gamma = LearnerAttribute[float]("The learner's discount factor.")
    batch_size = LearnerAttribute[int]("Transitions per gradient step.")
    seed = LearnerAttribute[int | None]("The learner's seed (HER's sampler is seeded from it).")
    device = LearnerAttribute[th.device]("The torch device of the learner's networks.")
    n_envs = LearnerAttribute[int]("Envs the learner steps in parallel.")
    observation_space = LearnerAttribute[gym.spaces.Space](
        "The observation space the learner's policy takes (flat for ``MlpPolicy``)."
    )
    action_space = LearnerAttribute[gym.spaces.Space]("The env's action space.")
    logger = LearnerAttribute[Logger]("The learner's logger (set up by ``learn``).")
    ep_info_buffer = LearnerAttribute[Any](
        "Return and length of the latest training episodes (a deque of Monitor infos)."
    )
    ep_success_buffer = LearnerAttribute[Any]("``is_success`` of the latest training episodes (a deque).")

    @property
    def learning_rate(self) -> float | Schedule:
        """The learning rate given to the learner (a number or a schedule of the remaining progress)."""
        return self.model.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float | Schedule) -> None:
        # As in SB3, the schedule is rebuilt from learning_rate when learn() sets the model up: rebuild
        # it now so that the next gradient step uses the new value.
        self.model.learning_rate = value
        self.model._setup_lr_schedule()

    def get_vec_normalize_env(self) -> VecNormalize | None:
        """The ``VecNormalize`` the learner's env goes through, or None."""
        return self.model.get_vec_normalize_env()

    def get_env(self) -> VecEnv | None:
        """The learner's VecEnv."""
        return self.model.get_env()

    def get_parameters(self) -> dict[str, dict]:
        """The learner's parameters (see SB3's ``get_parameters``)."""
        return self.model.get_parameters()

    def set_parameters(self, load_path_or_dict: str | dict[str, Any], exact_match: bool = True) -> None:
        """Load parameters into the learner (see SB3's ``set_parameters``)."""
        self.model.set_parameters(load_path_or_dict, exact_match=exact_match)
