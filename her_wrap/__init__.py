"""her_wrap: Hindsight Experience Replay for any off-policy learner.

- ``HER``: wraps stable-baselines3's DQN, SAC, TD3, DDPG (and sb3-contrib's TQC, QRDQN).
- ``HindsightReplayBuffer``: a numpy-only, cpprb-compatible buffer for any framework.
- ``LaBERmean`` / ``LaBERlazy`` / ``LaBERmax``: Large Batch Experience Replay functors.

The stable-baselines3 names are imported on first use, so the numpy core works without torch.
"""

from __future__ import annotations

from typing import Any

from her_wrap.core import (
    KEY_TO_GOAL_STRATEGY,
    GoalSelectionStrategy,
    HindsightReplay,
    HindsightSettings,
    LaBERlazy,
    LaBERmax,
    LaBERmean,
)

__version__ = "0.1.0"

_LAZY = {
    "HindsightReplayBuffer": "her_wrap.core.hindsight_replay_buffer",
    "BitFlippingEnv": "her_wrap.envs",
    "HERGoalEnvWrapper": "her_wrap.envs",
    "HER": "her_wrap.sb3",
    "HindsightExperienceReplayWrapper": "her_wrap.sb3",
}


def __getattr__(name: str) -> Any:
    # Importing gymnasium, torch and SB3 takes seconds: only users of those names pay for them.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'her_wrap' has no attribute {name!r}")


__all__ = [
    "HER",
    "KEY_TO_GOAL_STRATEGY",
    "BitFlippingEnv",
    "GoalSelectionStrategy",
    "HERGoalEnvWrapper",
    "HindsightExperienceReplayWrapper",
    "HindsightReplay",
    "HindsightReplayBuffer",
    "HindsightSettings",
    "LaBERlazy",
    "LaBERmax",
    "LaBERmean",
]
