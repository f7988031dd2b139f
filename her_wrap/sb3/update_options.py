"""Options of HER's learner updates and exploration, from the HER paper's DDPG and its successors.

Each is off by default. Setting any of them makes HER train its learner with
:func:`~her_wrap.sb3.train_steps.train_from_source` (uniform batches when neither LaBER nor PER is asked
for), which applies the update options, and explore with
:class:`~her_wrap.sb3.exploration.RandomActionExploration`, which applies ``random_action_prob``.
SBX (JAX) learners refuse them. Importing this module imports neither torch nor stable-baselines3.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from her_wrap.core.settings import is_real


@dataclass(frozen=True)
class UpdateOptions:
    """How HER's learner updates and exploration differ from stock stable-baselines3 (not at all, by default).

    :param clip_target: clip the critic's TD target to ``(low, high)``, the range the returns can take.
        For the -1 / 0 rewards of the goal envs (gymnasium-robotics, panda-gym, bit flipping) that is
        ``(-1 / (1 - gamma), 0)`` (Andrychowicz et al. 2017); :meth:`sparse_reward_bounds` gives it. Applies
        to every learner, to the Q values (DQN, SAC, TD3, DDPG) and to every quantile (QRDQN, TQC).
    :param action_l2: weight of an L2 penalty on the actor's actions (in the policy's [-1, 1] scale),
        added to the actor loss: ``action_l2 * mean(action ** 2)`` (SAC, TQC, TD3, DDPG)
    :param random_action_prob: exploration: with this probability per env step, a uniformly random
        action replaces the learner's (noisy) one (continuous-action learners; the HER paper's
        ``random_eps``). The draws come from a generator seeded with the learner's seed.
    :param target_update_per_cycle: move the target networks once per ``train()`` call (a cycle of
        ``gradient_steps`` updates) instead of after every gradient step (the HER paper's DDPG); the
        Polyak coefficient ``tau`` is applied once per cycle (SAC, TQC, TD3, DDPG)
    :raises ValueError: for values out of range
    """

    clip_target: tuple[float, float] | None = None
    action_l2: float = 0.0
    random_action_prob: float = 0.0
    target_update_per_cycle: bool = False

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # a frozen dataclass normalizes its own fields only here
        if self.clip_target is not None:
            try:
                low, high = (float(bound) for bound in self.clip_target)
            except (TypeError, ValueError):
                raise ValueError(
                    f"clip_target must be a pair (low, high) or None, got {self.clip_target!r}."
                ) from None
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(
                    f"clip_target must satisfy low < high, both finite; got {self.clip_target!r}."
                )
            set_field(self, "clip_target", (low, high))
        if not is_real(self.action_l2) or not self.action_l2 >= 0:
            raise ValueError(f"action_l2 must be a number >= 0, got {self.action_l2!r}.")
        if not is_real(self.random_action_prob) or not 0 <= self.random_action_prob <= 1:
            raise ValueError(f"random_action_prob must lie in [0, 1], got {self.random_action_prob!r}.")
        if not isinstance(self.target_update_per_cycle, bool | np.bool_):
            raise ValueError(
                f"target_update_per_cycle must be True or False, got {self.target_update_per_cycle!r}."
            )
        set_field(self, "action_l2", float(self.action_l2))
        set_field(self, "random_action_prob", float(self.random_action_prob))
        set_field(self, "target_update_per_cycle", bool(self.target_update_per_cycle))

    @staticmethod
    def sparse_reward_bounds(gamma: float) -> tuple[float, float]:
        """``(-1 / (1 - gamma), 0)``: the returns of -1 / 0 rewards discounted by ``gamma``."""
        return (-1.0 / (1.0 - gamma), 0.0)

    @property
    def is_default(self) -> bool:
        """True when every option is off: the updates and exploration are stock stable-baselines3's.

        The gradient steps are then those of stock ``train()``, whichever code takes them: HER still runs
        SAC, TQC, TD3 and DDPG through :func:`~her_wrap.sb3.train_steps.train_from_source`, which takes the
        same steps for less work (:func:`~her_wrap.sb3.train_steps.has_stock_actor_critic_train`).
        """
        return self == UpdateOptions()

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON and YAML."""
        values = {name: getattr(self, name) for name in UPDATE_OPTION_NAMES}
        if self.clip_target is not None:
            values["clip_target"] = list(self.clip_target)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> UpdateOptions:
        """Options from plain values (:meth:`to_dict`'s, or a config file's).

        :raises ValueError: for an unknown key or a bad value
        """
        unknown = sorted(set(values) - set(UPDATE_OPTION_NAMES))
        if unknown:
            raise ValueError(
                f"Unknown update option {unknown}; the options are {', '.join(UPDATE_OPTION_NAMES)}."
            )
        return cls(**values)

    def replace(self, **changes: Any) -> UpdateOptions:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)


#: Names of the options, in the constructor's order.
UPDATE_OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(UpdateOptions))
