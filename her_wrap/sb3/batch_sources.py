"""Where HER's train step gets its batches: the :class:`BatchSource` protocol and its sources.

:func:`~her_wrap.sb3.train_steps.train_from_source` asks a source for each gradient step's batch and
weights (``draw``) and tells it the batch's |TD error| afterwards (``report``). The sources, the only code
of the train step that talks to the replay buffer:

- :class:`UniformSource`: uniform batches, unweighted (what stock ``train()`` does);
- :class:`PrioritizedSource`: proportional prioritized replay over relabeled samples;
- :class:`LaBERSource`: Large Batch Experience Replay (Lahire et al. 2021) over relabeled samples.

:func:`make_batch_source` picks LaBER's or prioritized replay's source when a
:class:`~her_wrap.HindsightSettings` asks for one. :func:`select_rows` picks rows of a batch (LaBER's
sub-sample, the shuffled order of :func:`~her_wrap.sb3.jax_learners.shuffled_rows`).
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
    """Where :func:`~her_wrap.sb3.train_steps.train_from_source` gets its batches from (uniform, LaBER, PER).

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

    :param buffer: the hindsight buffer, built with ``prioritized=True``
    :param beta: PER's importance exponent at the start of ``learn``
    """

    def __init__(self, buffer: HerReplayBuffer, beta: float) -> None:
        self.buffer = buffer
        self.beta0 = beta
        self._indexes: np.ndarray | None = None

    def beta(self, model: Any) -> float:
        """PER's importance exponent now: ``beta`` at the start of ``learn``, 1 at its end.

        :param model: the learner (its ``_current_progress_remaining``)
        """
        progress = 1.0 - float(model._current_progress_remaining)
        return min(1.0, self.beta0 + (1.0 - self.beta0) * progress)

    def draw(self, model: Any, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Draw ``batch_size`` relabeled samples in proportion to their priorities, with PER's weights.

        :param model: the learner (normalization and training progress)
        :param batch_size: number of samples
        """
        batch = self.buffer.sample_batch(batch_size, model.get_vec_normalize_env(), beta=self.beta(model))
        self._indexes = batch.indexes
        return batch.samples, batch.weights

    def report(self, td_abs: np.ndarray) -> None:
        """Set the priorities of the last batch's transitions from their |TD|.

        :param td_abs: |TD| of each sample of the last ``draw``
        """
        if self._indexes is not None:
            self.buffer.update_priorities(self._indexes, td_abs)


class LaBERSource:
    """LaBER (Lahire et al. 2021): ``m * B`` relabeled samples, |TD| under the current critic, ``B`` kept.

    The ``B`` samples are drawn with probability proportional to |TD| and carry LaBER's weights.

    :param buffer: the hindsight buffer to draw the large batches from
    :param variant: LaBER's weighting (mean, lazy or max)
    :param m: how many times ``B`` each large batch holds
    :param seed: seed of the sub-sampling draws
    """

    def __init__(self, buffer: HerReplayBuffer, variant: LaBERVariant, m: int, seed: int | None) -> None:
        self.buffer = buffer
        self.variant = LABER_VARIANTS[variant]
        self.m = int(m)
        self.rng = np.random.default_rng(seed)
        self._functors: dict[int, LaBER] = {}

    def draw(self, model: Any, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Draw ``m * batch_size`` relabeled samples, score them with the critic, keep ``batch_size``.

        :param model: the learner whose critic scores the large batch (:func:`td_abs`)
        :param batch_size: number of samples kept
        :return: the kept samples and LaBER's weights of them
        """
        functor = self._functors.get(batch_size)
        if functor is None:
            functor = self._functors[batch_size] = self.variant(batch_size, self.m, seed=self.rng)
        large = self.buffer.sample_batch(batch_size * self.m, model.get_vec_normalize_env()).samples
        priorities = td_abs(model, large)
        picked = functor(priorities=priorities)
        index = th.as_tensor(picked["indexes"], device=model.device)
        weights = th.as_tensor(picked["weights"], device=model.device)
        return select_rows(large, index), weights

    def report(self, td_abs: np.ndarray) -> None:
        """Ignore the |TD|: LaBER scores each large batch afresh and keeps no priorities.

        :param td_abs: |TD| of each sample of the last batch
        """


def select_rows(samples: Samples, index: th.Tensor) -> Samples:
    """Rows ``index`` of SB3 samples, in that order, for every field (dict observations included).

    :param samples: SB3 samples (flat or dict observations; ``discounts`` may be None)
    :param index: row numbers, an integer tensor on the samples' device; a row may repeat
    :return: samples of the same type, ``len(index)`` rows
    """

    def pick(field: Any) -> Any:
        if field is None:
            return None
        if isinstance(field, dict):
            return {key: value[index] for key, value in field.items()}
        return field[index]

    return type(samples)(*(pick(field) for field in samples))


def make_batch_source(
    buffer: HerReplayBuffer, settings: HindsightSettings
) -> PrioritizedSource | LaBERSource | None:
    """LaBER's or prioritized replay's source when the settings ask for one, else None.

    None means uniform batches: ``HER`` then gives its learner a :class:`UniformSource` over the same buffer.

    :param buffer: the hindsight buffer the source draws from
    :param settings: the hindsight settings (``laber``, ``laber_m``, ``prioritized``, ``beta``)
    """
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
