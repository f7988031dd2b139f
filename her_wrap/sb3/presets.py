"""Learner settings that are known to work, as keyword arguments of ``HER(...)``, for code and scripts.

The tuned robotics settings live in ``configs/her.yml`` (what ``her-wrap train`` reads); the robotics
presets here are the same entries as Python values, and ``tests/test_presets.py`` keeps them equal. The
bit-flipping presets are the HER paper's settings (and their 50-bit variant) used by the demo, the tests
and the learning benchmark, which run outside the config files.
"""

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

# Bit flipping at n = 50 (the HER paper's headline): >= 0.9 greedy success after 200k-250k env steps (seeds
# 0, 1, 2), about 4 minutes on one core. Use it with BIT_FLIPPING_DQN_LARGE_N_ENVS envs stepping in lockstep
# (a DummyVecEnv: one batched forward pass per step of all envs; train_freq counts those steps). Against
# BIT_FLIPPING_DQN: two hidden layers of 256 (one layer of 256 stalls near 0.8 at 1M steps); epsilon down to
# 0.3, not 0.05 (with 0.05 the greedy policy's loops keep the achieved goals near the start state and
# nothing is learned at n = 50 in 250k steps); 40 gradient steps of batch 256 every 200 env steps (50 steps
# of the 4 envs); the target network copied every 800 env steps. scripts/bench_learning.py --headline
# measures it (docs/bench_learning.md).
BIT_FLIPPING_DQN_LARGE_N_ENVS = 4
BIT_FLIPPING_DQN_LARGE: dict[str, Any] = {
    "learning_rate": 1e-3,
    "batch_size": 256,
    "gamma": 0.98,
    "buffer_size": 1_000_000,
    "learning_starts": 1_000,
    "train_freq": (50, "step"),
    "gradient_steps": 40,
    "target_update_interval": 800,
    "exploration_fraction": 0.05,
    "exploration_final_eps": 0.3,
    "policy_kwargs": {"net_arch": [256, 256]},
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
    **FETCH_REACH_SAC,
    "action_noise": NormalActionNoise(mean=np.zeros(4), sigma=0.2 * np.ones(4)),
}

PANDA_REACH_SAC: dict[str, Any] = dict(FETCH_REACH_SAC)

# Manipulation (FetchPush, FetchPickAndPlace, FetchSlide, PandaPush, PandaPickAndPlace): HER(DDPG) in the
# regime of the original HER code, configs/her.yml's FetchPush-v4 entry. Use it with
# MANIPULATION_DDPG_N_ENVS envs stepping in lockstep (train_freq counts steps of all of them: 20 gradient
# steps of batch 2048 every 500 env steps). Exploration noise is added for the env's action dimensions by
# manipulation_ddpg(n_actions), and the update runs fastest on MANIPULATION_DDPG_NUM_THREADS torch threads
# (torch.set_num_threads). docs/robotics.md has the FetchPush results, docs/manipulation.md the recipe.
MANIPULATION_DDPG_N_ENVS = 2
MANIPULATION_DDPG_NUM_THREADS = 2
MANIPULATION_DDPG_NOISE_STD = 0.2
MANIPULATION_DDPG: dict[str, Any] = {
    "n_sampled_goal": 4,
    "goal_selection_strategy": "future",
    "clip_target": True,
    "action_l2": 1.0,
    "random_action_prob": 0.3,
    "target_update_per_cycle": True,
    "normalize": True,
    "buffer_size": 1_000_000,
    "batch_size": 2048,
    "learning_rate": 1e-3,
    "gamma": 0.98,
    "tau": 0.05,
    "learning_starts": 1_000,
    "train_freq": (250, "step"),
    "gradient_steps": 20,
    "policy_kwargs": {"net_arch": [256, 256, 256]},
}


def manipulation_ddpg(n_actions: int) -> dict[str, Any]:
    """:data:`MANIPULATION_DDPG` with its Gaussian exploration noise for ``n_actions`` action dimensions."""
    sigma = MANIPULATION_DDPG_NOISE_STD * np.ones(n_actions)
    return {**MANIPULATION_DDPG, "action_noise": NormalActionNoise(mean=np.zeros(n_actions), sigma=sigma)}


# HER(SAC) on continuous bit flipping (``BitFlippingEnv(n_bits=6, continuous=True)``: every bit whose action
# component is > 0 flips, so one step can solve an episode): greedy success 1.0 after 4k env steps for
# seeds 0, 1 and 2 (about 20 s on one core). SAC's defaults otherwise (train_freq 1, automatic entropy).
CONTINUOUS_BIT_FLIPPING_SAC: dict[str, Any] = {
    "learning_rate": 1e-3,
    "batch_size": 128,
    "gamma": 0.95,
    "learning_starts": 300,
    "policy_kwargs": {"net_arch": [64, 64]},
}
