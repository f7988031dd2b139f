"""The stable-baselines3 layer: the HER model class, the hindsight replay buffer, weighted train steps."""

from her_wrap.sb3.goal_functions import GoalFunctions
from her_wrap.sb3.her import HER, make_goal_env
from her_wrap.sb3.replay_wrapper import HindsightBatch, HindsightExperienceReplayWrapper
from her_wrap.sb3.vec_flatten import VecGoalFlattenWrapper

__all__ = [
    "HER",
    "GoalFunctions",
    "HindsightBatch",
    "HindsightExperienceReplayWrapper",
    "VecGoalFlattenWrapper",
    "make_goal_env",
]
