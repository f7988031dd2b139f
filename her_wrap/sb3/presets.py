"""Learner settings that are known to work, for examples, tests and benchmarks."""

from __future__ import annotations

from typing import Any

# The HER paper's bit-flipping setup (Andrychowicz et al. 2017): one hidden layer of 256, Adam 1e-3,
# batch 128, gamma 0.98; 16 episodes collected, then 40 gradient steps. The target network is copied
# once per cycle of 16 episodes of 15 steps.
BIT_FLIPPING_DQN: dict[str, Any] = {
    "learning_rate": 1e-3,
    "batch_size": 128,
    "gamma": 0.98,
    "buffer_size": 1_000_000,
    "learning_starts": 1_000,
    "train_freq": (16, "episode"),
    "gradient_steps": 40,
    "target_update_interval": 240,
    "exploration_fraction": 0.2,
    "exploration_final_eps": 0.05,
    "policy_kwargs": {"net_arch": [256]},
}
