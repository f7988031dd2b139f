"""The sampler objects: one interface (draw / after_add / update / clear), chosen once from the settings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from core_trajectories import TRAJECTORIES, TRAJECTORY_IDS, Trajectory, fed_replay

from her_wrap import HindsightSettings
from her_wrap.core.samplers import (
    Draw,
    MovementSampler,
    PrioritizedSampler,
    Sampler,
    UniformSampler,
    make_sampler,
)

SAMPLERS = {
    "uniform": ({}, UniformSampler),
    "laber-draws-its-large-batch-uniformly": ({"laber": "mean"}, UniformSampler),
    "prioritized": ({"prioritized": True}, PrioritizedSampler),
    "movement": ({"movement_clip": 1.0}, MovementSampler),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_settings_choose_the_sampler(name: str) -> None:
    options, expected = SAMPLERS[name]
    replay, _ = fed_replay(TRAJECTORIES[1], **options)
    assert type(replay.sampler) is expected


@pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
def test_a_draw_holds_only_sampleable_transitions_and_their_slots(
    trajectory: Trajectory, name: str, online: bool
) -> None:
    options = {**SAMPLERS[name][0], "online": online}
    replay, _ = fed_replay(trajectory, **options)
    sampler: Sampler = replay.sampler
    if len(sampler) == 0:
        with pytest.raises(ValueError, match="Cannot sample"):
            sampler.draw(8, replay.rng, 0.4)
        return
    draw = sampler.draw(64, replay.rng, 0.4)
    assert isinstance(draw, Draw)
    storage = replay.storage
    assert np.array_equal(draw.indexes, draw.rings * storage.n_envs + draw.columns)
    assert storage.is_transition(draw.rings, draw.columns, finished_only=not online).all()


@pytest.mark.parametrize("name", SAMPLERS)
def test_only_prioritized_draws_carry_importance_weights(name: str) -> None:
    replay, _ = fed_replay(TRAJECTORIES[2], **SAMPLERS[name][0])
    weights = replay.sampler.draw(32, replay.rng, 0.4).weights
    if name == "prioritized":
        assert weights is not None and weights.dtype == np.float32 and 0 < weights.min() <= weights.max() == 1
    else:
        assert weights is None


@pytest.mark.parametrize("name", ["uniform", "movement"])
def test_only_the_prioritized_sampler_takes_priorities(name: str) -> None:
    replay, _ = fed_replay(TRAJECTORIES[2], **SAMPLERS[name][0])
    draw = replay.sampler.draw(4, replay.rng, 0.4)
    with pytest.raises(ValueError, match="pass prioritized=True"):
        replay.sampler.update(draw.indexes, np.ones(4))


def test_prioritized_update_moves_the_draws_to_the_high_priority_slot() -> None:
    replay, _ = fed_replay(TRAJECTORIES[5], prioritized=True, alpha=1.0)
    sampler = replay.sampler
    slots = sampler.draw(256, replay.rng, 0.4).indexes
    hot = slots[0]
    sampler.update(slots, np.where(slots == hot, 1000.0, 0.0))
    assert (sampler.draw(256, replay.rng, 0.4).indexes == hot).mean() > 0.9


@pytest.mark.parametrize("name", ["uniform", "prioritized", "movement"])
def test_clear_leaves_nothing_to_draw(name: str) -> None:
    replay, _ = fed_replay(TRAJECTORIES[2], **SAMPLERS[name][0])
    replay.clear()
    with pytest.raises(ValueError, match="Cannot sample"):
        replay.sampler.draw(4, replay.rng, 0.4)


def test_make_sampler_reads_the_settings_alone() -> None:
    replay, _ = fed_replay(TRAJECTORIES[2])
    sampler = make_sampler(
        HindsightSettings(prioritized=True, alpha=0.3),
        replay.storage,
        eps=1e-3,
        achieved_goal_key="achieved_goal",
    )
    assert isinstance(sampler, PrioritizedSampler)
    assert (sampler.prioritizer.alpha, sampler.prioritizer.eps) == (0.3, 1e-3)


def prioritized_weights(settings_beta: float, **sample: Any) -> np.ndarray:
    """Weights of one sample after the same feed, priorities and seed; only beta's source differs."""
    replay, _ = fed_replay(TRAJECTORIES[5], prioritized=True, beta=settings_beta)
    slots = np.arange(replay.storage.n_rows * replay.storage.n_envs)
    alive = slots[replay.storage.is_transition(*np.divmod(slots, replay.storage.n_envs))]
    replay.update_priorities(alive, np.random.default_rng(1).random(alive.size) * 10)
    return replay.sample(64, **sample)["weights"]


def test_sample_without_beta_uses_the_settings_beta() -> None:
    np.testing.assert_array_equal(prioritized_weights(1.0), prioritized_weights(0.4, beta=1.0))


def test_an_explicit_beta_overrides_the_settings_beta() -> None:
    assert not np.array_equal(prioritized_weights(1.0), prioritized_weights(1.0, beta=0.0))
