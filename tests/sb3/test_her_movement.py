"""``movement_clip`` through the learners: HER's option, and SB3's own learners with the drop-in buffer."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3 import DQN

from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3 import HerReplayBuffer


def expected_probabilities(replay, clip: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Every stored transition's draw probability when each bit flip moves the achieved goal by 1."""
    storage = replay.storage
    slots = np.arange(storage.n_rows * storage.n_envs)
    rings, columns = np.divmod(slots, storage.n_envs)
    slots = slots[storage.is_transition(rings, columns)]
    steps = storage.step_index.reshape(-1)[slots]
    lengths = storage.episode_length.reshape(-1)[slots]
    path = np.where(lengths > 0, lengths, steps + 1)  # an episode in progress: its path so far
    weights = floor + np.minimum(path, clip)
    return slots, weights / weights.sum()


def test_sb3_learners_draw_by_movement_through_the_drop_in_buffer():
    model = DQN(
        "MultiInputPolicy",
        BitFlippingEnv(n_bits=6),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"movement_clip": 2.5, "movement_floor": 0.5},
        learning_starts=40,
        seed=0,
    )
    model.learn(80)
    replay = model.replay_buffer.replay
    slots, expected = expected_probabilities(replay, clip=2.5, floor=0.5)
    assert len(set(expected.round(6))) > 1  # episodes of several lengths: the weights differ
    assert replay.prioritizer.probabilities(slots) == pytest.approx(expected)


def test_her_keeps_movement_settings_through_save_and_load(tmp_path):
    env = BitFlippingEnv(n_bits=4)
    model = HER("MlpPolicy", env, "dqn", movement_clip=2.0, movement_floor=0.25, learning_starts=20)
    model.learn(40)
    slots, expected = expected_probabilities(model.replay_buffer.replay, clip=2.0, floor=0.25)
    assert model.replay_buffer.replay.prioritizer.probabilities(slots) == pytest.approx(expected)
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=env)
    assert (loaded.settings.movement_clip, loaded.settings.movement_floor) == (2.0, 0.25)
    assert loaded.replay_buffer.replay.movement is not None


def test_her_refuses_movement_with_prioritized_replay():
    with pytest.raises(ValueError, match="Choose one of movement_clip and prioritized"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4), "dqn", movement_clip=1.0, prioritized=True)
