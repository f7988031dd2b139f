"""What a hindsight buffer hands a learner: core batches as stable-baselines3 samples, on its device."""

from __future__ import annotations

import functools
from typing import NamedTuple, TypeAlias

import numpy as np
import torch as th
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from her_wrap.envs.goal_wrapper import GoalObservationLayout

Samples: TypeAlias = ReplayBufferSamples | DictReplayBufferSamples
"""A batch as stable-baselines3 buffers return it (``discounts`` is set by n-step buffers)."""


class HindsightBatch(NamedTuple):
    """A sample with what weighted train steps need besides the SB3 samples."""

    samples: Samples
    """SB3 samples (dict or flat observations, as the learner's policy expects)."""
    weights: th.Tensor | None
    """Importance weights (prioritized replay), shape ``(B,)``, or None."""
    indexes: np.ndarray
    """Flat storage slots of the samples, for priority updates."""


def to_tensor(array: np.ndarray, device: th.device) -> th.Tensor:
    """``array`` as a tensor on ``device``; on the CPU it shares the array's memory (no copy)."""
    if device.type == "cpu":
        return th.from_numpy(array)
    return th.as_tensor(array, device=device)


def to_samples(
    batch: dict[str, np.ndarray],
    keys: tuple[str, ...],
    device: th.device,
    layout: GoalObservationLayout | None = None,
    env: VecNormalize | None = None,
) -> Samples:
    """Turn a core batch into SB3 samples: normalize, flatten when the policy is flat, to tensors.

    The batch's arrays are new (the core never hands out views of its storage), so on the CPU they
    become tensors without a copy.

    :param batch: a batch of :meth:`her_wrap.core.replay.HindsightReplay.sample` (``key`` and
        ``next_key`` for each observation key, ``action``, ``reward``, ``terminated``, maybe
        ``discounts``)
    :param keys: the observation keys, in the order of the dict space
    :param device: torch device of the samples
    :param layout: key layout of the learner's flat observations; None gives dict observations
    :param env: ``VecNormalize`` whose statistics normalize observations and rewards, or None
    """
    # Picked once per batch: the samples' nine tensors are made on the hot path of every gradient step.
    tensor = th.from_numpy if device.type == "cpu" else functools.partial(th.as_tensor, device=device)
    observations = {key: batch[key] for key in keys}
    next_observations = {key: batch["next_" + key] for key in keys}
    rewards = batch["reward"].reshape(-1, 1)
    if env is not None:
        observations = env.normalize_obs(observations)  # type: ignore[assignment]
        next_observations = env.normalize_obs(next_observations)  # type: ignore[assignment]
        rewards = env.normalize_reward(rewards).astype(np.float32)
    dones = batch["terminated"].astype(np.float32).reshape(-1, 1)
    # n-step samples: gamma ** steps of each, which SB3's train() uses in place of gamma.
    discounts = tensor(batch["discounts"].reshape(-1, 1)) if "discounts" in batch else None
    actions = tensor(batch["action"])
    if layout is not None:
        return ReplayBufferSamples(
            observations=tensor(layout.flatten(observations)),
            actions=actions,
            next_observations=tensor(layout.flatten(next_observations)),
            dones=tensor(dones),
            rewards=tensor(rewards),
            discounts=discounts,
        )
    return DictReplayBufferSamples(
        observations={key: tensor(value) for key, value in observations.items()},
        actions=actions,
        next_observations={key: tensor(value) for key, value in next_observations.items()},
        dones=tensor(dones),
        rewards=tensor(rewards),
        discounts=discounts,
    )
