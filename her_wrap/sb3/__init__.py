"""The stable-baselines3 layer: the HER model class, the hindsight replay buffers, weighted train steps.

Names are imported on first use: :mod:`her_wrap.sb3.learners` (the learner table) can be read without
importing torch and stable-baselines3.
"""

from __future__ import annotations

from her_wrap.lazy_imports import lazy_getattr

__getattr__ = lazy_getattr(
    __name__,
    {
        "HER": "her_wrap.sb3.her",
        "make_goal_env": "her_wrap.envs.registry",
        "GoalFunctions": "her_wrap.sb3.goal_functions",
        "HindsightBatch": "her_wrap.sb3.samples",
        "HindsightExperienceReplayWrapper": "her_wrap.sb3.replay_wrapper",
        "HerReplayBuffer": "her_wrap.sb3.her_replay_buffer",
        "VecGoalFlattenWrapper": "her_wrap.sb3.vec_flatten",
    },
)


__all__ = [
    "HER",
    "GoalFunctions",
    "HerReplayBuffer",
    "HindsightBatch",
    "HindsightExperienceReplayWrapper",
    "VecGoalFlattenWrapper",
    "make_goal_env",
]
