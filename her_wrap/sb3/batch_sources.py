"""Where weighted train steps get their batches: the :class:`BatchSource` protocol and its sources.

:func:`~her_wrap.sb3.train_steps.weighted_train` asks a source for each gradient step's batch and weights
(``draw``) and tells it the batch's |TD error| afterwards (``report``). The sources:

- :class:`UniformSource`: uniform batches, unweighted (what stock ``train()`` does);
- :class:`PrioritizedSource`: proportional prioritized replay over relabeled samples;
- :class:`LaBERSource`: Large Batch Experience Replay (Lahire et al. 2021) over relabeled samples.

:func:`make_batch_source` picks the one a :class:`~her_wrap.HindsightSettings` asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from her_wrap.core.laber import LABER_VARIANTS, LaBER
from her_wrap.core.settings import HindsightSettings, LaBERVariant
from her_wrap.sb3.critic_losses import td_abs
from her_wrap.sb3.samples import Samples

if TYPE_CHECKING:
    from her_wrap.sb3.her_replay_buffer import HerReplayBuffer


class BatchSource(Protocol):
    """Where :func:`weighted_train` gets its batches from (uniform replay, LaBER, PER, ...).

    A source may also say ``draws_ahead = True`` when its draws read neither the learner's networks nor
    what ``report`` was told: several workers then draw a step's batch while the previous step's gradient
    all-reduce waits (:func:`~her_wrap.sb3.train_steps.draws_ahead`). Without it, every draw comes after
    the previous step and its report.
    """

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Draw the batch of one gradient step.

        :param model: the learner being trained (for its device, ``_vec_normalize_env`` and, for LaBER,
            its critic: see :func:`~her_wrap.sb3.critic_losses.td_abs`)
        :param batch_size: number of samples to return
        :return: ``ReplayBufferSamples`` / ``DictReplayBufferSamples`` and the per-sample weights,
            shape ``(B,)`` or ``(B, 1)``, float32 on ``model.device``, or ``None`` for unweighted
        """
        ...

    def report(self, td_abs: np.ndarray) -> None:
        """Receive the |TD error| of the batch just trained on; prioritized replay updates priorities.

        :param td_abs: |TD| of each sample of the last ``draw``, shape ``(B,)``, computed with the
            networks *before* that gradient step (the values the step's loss used), no gradient
        """
        ...


class UniformSource:
    """Uniform batches from a stable-baselines3 replay buffer, unweighted: what stock ``train()`` does.

    :param replay_buffer: the buffer to sample, usually ``model.replay_buffer``
    """

    #: Its draws read neither the learner's networks nor the reports, so a train step may draw the next
    #: batch early (while several workers average the current step's gradients).
    draws_ahead = True

    def __init__(self, replay_buffer: ReplayBuffer) -> None:
        self.replay_buffer = replay_buffer

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Sample ``batch_size`` transitions as ``model.train()`` would, with no weights.

        :param model: the learner (its ``_vec_normalize_env`` normalizes the batch, as in ``train()``)
        :param batch_size: number of samples
        :return: the samples and ``None``
        """
        return self.replay_buffer.sample(batch_size, env=model._vec_normalize_env), None

    def report(self, td_abs: np.ndarray) -> None:
        """Ignore the |TD|: uniform sampling has no priorities.

        :param td_abs: |TD| of each sample of the last batch
        """


class PrioritizedSource:
    """Prioritized batches with importance weights; priorities follow the TD errors trained on.

    ``beta`` is annealed linearly from its start value to 1 over the current ``learn`` call.
    """

    def __init__(self, buffer: HerReplayBuffer, beta: float) -> None:
        self.buffer = buffer
        self.beta0 = beta
        self._indexes: np.ndarray | None = None

    def beta(self, model: Any) -> float:
        progress = 1.0 - float(model._current_progress_remaining)
        return min(1.0, self.beta0 + (1.0 - self.beta0) * progress)

    def draw(self, model: Any, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        batch = self.buffer.sample_batch(batch_size, model.get_vec_normalize_env(), beta=self.beta(model))
        self._indexes = batch.indexes
        return batch.samples, batch.weights

    def report(self, td_abs: np.ndarray) -> None:
        if self._indexes is not None:
            self.buffer.update_priorities(self._indexes, td_abs)


class LaBERSource:
    """LaBER (Lahire et al. 2021): ``m * B`` relabeled samples, |TD| under the current critic, ``B`` kept.

    The ``B`` samples are drawn with probability proportional to |TD| and carry LaBER's weights.
    """

    def __init__(self, buffer: HerReplayBuffer, variant: LaBERVariant, m: int, seed: int | None) -> None:
        self.buffer = buffer
        self.variant = LABER_VARIANTS[variant]
        self.m = int(m)
        self.rng = np.random.default_rng(seed)
        self._functors: dict[int, LaBER] = {}

    def draw(self, model: Any, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        functor = self._functors.get(batch_size)
        if functor is None:
            functor = self._functors[batch_size] = self.variant(batch_size, self.m, seed=self.rng)
        large = self.buffer.sample_batch(batch_size * self.m, model.get_vec_normalize_env()).samples
        priorities = td_abs(model, large)
        picked = functor(priorities=priorities)
        index = th.as_tensor(picked["indexes"], device=model.device)
        weights = th.as_tensor(picked["weights"], device=model.device)
        return select_samples(large, index), weights

    def report(self, td_abs: np.ndarray) -> None:
        """LaBER keeps no priorities."""


def select_samples(samples: Samples, index: th.Tensor) -> Samples:
    """Rows ``index`` of SB3 samples (tensors or dicts of tensors)."""

    def pick(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, dict):
            return {key: tensor[index] for key, tensor in value.items()}
        return value[index]

    return type(samples)(*(pick(value) for value in samples))


def make_batch_source(
    buffer: HerReplayBuffer, settings: HindsightSettings
) -> PrioritizedSource | LaBERSource | None:
    """The source the settings ask for; None means the learner's own uniform ``train()``."""
    if settings.laber is not None:
        return LaBERSource(
            buffer,
            settings.laber,
            settings.laber_m,
            seed=int(buffer.replay.rng.integers(2**31)),
        )
    if settings.prioritized:
        return PrioritizedSource(buffer, settings.beta)
    return None
