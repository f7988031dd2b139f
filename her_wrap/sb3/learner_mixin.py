"""The learner classes ``HER`` trains: an SB3 off-policy class with weighted train steps and exploration.

:func:`weighted_learner_class` builds, once per learner class, the subclass whose ``train()`` draws its
batches from a :class:`~her_wrap.sb3.batch_sources.BatchSource` (see
:func:`~her_wrap.sb3.train_steps.weighted_train`) and whose exploration follows
:class:`~her_wrap.sb3.exploration.RandomActionExploration`.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3 import SAC, TD3
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from her_wrap.sb3.batch_sources import BatchSource
from her_wrap.sb3.critic_losses import sb3_contrib
from her_wrap.sb3.exploration import RandomActionExploration
from her_wrap.sb3.train_steps import weighted_train
from her_wrap.sb3.update_options import UpdateOptions


class WeightedTrainMixin(RandomActionExploration):
    """Makes ``train()`` draw batches from :attr:`batch_source`, weight the critic loss per sample and apply
    :attr:`update_options`, and makes exploration take random actions when those options ask for it.

    With no source set, ``train()`` is the learner's own.
    """

    batch_source: BatchSource | None = None
    update_options: UpdateOptions = UpdateOptions()

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self.batch_source is None:
            super().train(gradient_steps, batch_size)  # type: ignore[misc]
            return
        weighted_train(self, gradient_steps, batch_size, self.batch_source)  # type: ignore[arg-type]

    def _excluded_save_params(self) -> list[str]:
        # The source holds the replay buffer: never pickle it into the model zip. The options are saved
        # by HER beside the model.
        return [*super()._excluded_save_params(), "batch_source", "update_options"]


_WEIGHTED_CLASSES: dict[type, type] = {}


def has_leaner_actor_step(model_class: type) -> bool:
    """Whether ``model_class`` trains with the stock ``train()`` of SAC, TQC, TD3 or DDPG.

    :func:`~her_wrap.sb3.train_steps.weighted_train` takes the same steps with uniform batches for about
    a tenth less work (the actor's backward pass skips the critic's weight gradients), so ``HER`` trains
    such learners with it even when no option asks for it. A subclass with a ``train()`` of its own keeps
    it.
    """
    stock = [SAC.train, TD3.train]  # DDPG inherits TD3's
    if sb3_contrib is not None:
        stock.append(sb3_contrib.TQC.train)
    return getattr(model_class, "train", None) in stock


def weighted_learner_class(model_class: type[OffPolicyAlgorithm]) -> Any:
    """The subclass of ``model_class`` with :class:`WeightedTrainMixin` (one per learner class)."""
    if model_class not in _WEIGHTED_CLASSES:
        name = f"Weighted{model_class.__name__}"
        _WEIGHTED_CLASSES[model_class] = type(
            name, (WeightedTrainMixin, model_class), {"__module__": __name__}
        )
    return _WEIGHTED_CLASSES[model_class]
