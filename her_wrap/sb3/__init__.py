"""The stable-baselines3 layer: the HER model class, the hindsight replay buffers, weighted train steps.

Names are imported on first use: :mod:`her_wrap.sb3.learners` (the learner table) can be read without
importing torch and stable-baselines3.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "HER": "her_wrap.sb3.her",
    "make_goal_env": "her_wrap.envs.registry",
    "GoalFunctions": "her_wrap.sb3.goal_functions",
    "HindsightBatch": "her_wrap.sb3.samples",
    "HindsightExperienceReplayWrapper": "her_wrap.sb3.replay_wrapper",
    "HerReplayBuffer": "her_wrap.sb3.her_replay_buffer",
    "VecGoalFlattenWrapper": "her_wrap.sb3.vec_flatten",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'her_wrap.sb3' has no attribute {name!r}")


__all__ = [
    "HER",
    "GoalFunctions",
    "HerReplayBuffer",
    "HindsightBatch",
    "HindsightExperienceReplayWrapper",
    "VecGoalFlattenWrapper",
    "make_goal_env",
]
