"""Which learners HER wraps, and their variants whose train step takes per-sample weights."""

from __future__ import annotations

import importlib
from typing import Any

from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from her_wrap.sb3.weighted import BatchSource, weighted_train

LEARNER_NAMES = {
    "dqn": "stable_baselines3:DQN",
    "sac": "stable_baselines3:SAC",
    "td3": "stable_baselines3:TD3",
    "ddpg": "stable_baselines3:DDPG",
    "tqc": "sb3_contrib:TQC",
    "qrdqn": "sb3_contrib:QRDQN",
}


def resolve_model_class(model_class: type | str) -> type[OffPolicyAlgorithm]:
    """The learner class for a class or a lower-case name (``"sac"``, ``"dqn"``...).

    :raises ValueError: for an unknown name, listing the known ones
    :raises TypeError: for an on-policy or non-SB3 class
    """
    if isinstance(model_class, str):
        target = LEARNER_NAMES.get(model_class.strip().lower())
        if target is None:
            raise ValueError(
                f"Unknown model_class {model_class!r}; use one of {sorted(LEARNER_NAMES)} or a class."
            )
        module, _, name = target.partition(":")
        try:
            model_class = getattr(importlib.import_module(module), name)
        except ImportError as error:
            raise ValueError(
                f"model_class {name} needs {module}: pip install {module.replace('_', '-')}."
            ) from error
    if not isinstance(model_class, type) or not issubclass(model_class, OffPolicyAlgorithm):
        name = getattr(model_class, "__name__", repr(model_class))
        raise TypeError(
            f"HER needs an off-policy learner with a replay buffer (DQN, SAC, TD3, DDPG, TQC, QRDQN); "
            f"{name} is not one (on-policy learners such as PPO and A2C train on fresh rollouts only)."
        )
    return model_class


class WeightedTrainMixin:
    """Makes ``train()`` draw batches from :attr:`batch_source` and weight the critic loss per sample.

    With no source set, ``train()`` is the learner's own.
    """

    batch_source: BatchSource | None = None

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self.batch_source is None:
            super().train(gradient_steps, batch_size)  # type: ignore[misc]
            return
        weighted_train(self, gradient_steps, batch_size, self.batch_source)  # type: ignore[arg-type]

    def _excluded_save_params(self) -> list[str]:
        # The source holds the replay buffer: never pickle it into the model zip.
        return [*super()._excluded_save_params(), "batch_source"]  # type: ignore[misc]


_WEIGHTED_CLASSES: dict[type, type] = {}


def weighted_learner_class(model_class: type[OffPolicyAlgorithm]) -> Any:
    """The subclass of ``model_class`` with :class:`WeightedTrainMixin` (one per learner class)."""
    if model_class not in _WEIGHTED_CLASSES:
        name = f"Weighted{model_class.__name__}"
        _WEIGHTED_CLASSES[model_class] = type(
            name, (WeightedTrainMixin, model_class), {"__module__": __name__}
        )
    return _WEIGHTED_CLASSES[model_class]
