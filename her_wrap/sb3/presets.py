"""Learner settings that are known to work, for examples, tests and benchmarks."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.noise import NormalActionNoise

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

# --- Robotics (gymnasium-robotics Fetch, panda-gym Panda): keyword arguments of HER, HER's settings and
# the learner's together, e.g. HER("MultiInputPolicy", "FetchReach-v4", SAC, seed=0, **FETCH_REACH_SAC).
# Tuned for greedy success within few env steps on a 2-core CPU machine; docs/robotics.md has the figures
# and scripts/robotics_results.py reproduces them.

FETCH_REACH_SAC: dict[str, Any] = {
    "n_sampled_goal": 4,
    "normalize": True,
    "buffer_size": 100_000,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "gamma": 0.95,
    "tau": 0.05,
    "learning_starts": 200,
    "train_freq": 1,
    "gradient_steps": 1,
    "policy_kwargs": {"net_arch": [256, 256]},
}

# DDPG explores with Gaussian action noise of std 0.2 (the HER paper's), for Fetch's 4 action dimensions.
FETCH_REACH_DDPG: dict[str, Any] = {
    "action_noise": NormalActionNoise(mean=np.zeros(4), sigma=0.2 * np.ones(4)),
    "n_sampled_goal": 4,
    "normalize": True,
    "buffer_size": 100_000,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "gamma": 0.95,
    "tau": 0.05,
    "learning_starts": 200,
    "train_freq": 1,
    "gradient_steps": 1,
    "policy_kwargs": {"net_arch": [256, 256]},
}

PANDA_REACH_SAC: dict[str, Any] = dict(FETCH_REACH_SAC)

# FetchPush within a wall-time budget of ~35 minutes on 2 shared cores (docs/robotics.md): SAC with the
# reach settings, 1,000 random steps first.
FETCH_PUSH_SAC: dict[str, Any] = {**FETCH_REACH_SAC, "buffer_size": 1_000_000, "learning_starts": 1_000}
