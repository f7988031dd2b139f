"""Where weighted train steps get their batches: prioritized replay or LaBER over relabeled samples."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th

from her_wrap.core.laber import LABER_VARIANTS, LaBER
from her_wrap.core.settings import HindsightSettings, LaBERVariant
from her_wrap.sb3.replay_wrapper import HindsightExperienceReplayWrapper, Samples
from her_wrap.sb3.weighted import td_abs


class PrioritizedSource:
    """Prioritized batches with importance weights; priorities follow the TD errors trained on.

    ``beta`` is annealed linearly from its start value to 1 over the current ``learn`` call.
    """

    def __init__(self, buffer: HindsightExperienceReplayWrapper, beta: float) -> None:
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

    def __init__(
        self, buffer: HindsightExperienceReplayWrapper, variant: LaBERVariant, m: int, seed: int | None
    ) -> None:
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
    buffer: HindsightExperienceReplayWrapper, settings: HindsightSettings
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
