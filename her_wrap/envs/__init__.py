"""Goal envs for HER: the bit-flipping task, the env registry, the dict <-> flat observation wrapper, the
grasped start of pick-and-place episodes, faster joint reads of gymnasium-robotics' MuJoCo envs,
deterministic runs on panda-gym's envs, and env checks.

Importing this package registers her_wrap's gymnasium ids (once; importing again changes nothing):

- ``BitFlipping-v0``: :class:`BitFlippingEnv` with discrete actions (``n_bits=10`` unless given);
- ``BitFlippingContinuous-v0``: the same with continuous actions.

Neither id sets ``max_episode_steps``: the env truncates itself after ``max_steps`` steps, so
``gymnasium.make`` adds no second ``TimeLimit``. :func:`make_goal_env` makes these ids, the robotics
extra's (Fetch, Panda...) and any other gymnasium id (see :mod:`her_wrap.envs.registry`).
"""

from her_wrap.envs.bit_flipping import BitFlippingEnv
from her_wrap.envs.checks import (
    GOAL_KEYS,
    BatchedGoalFunction,
    GoalEnvError,
    check_goal_env,
    check_goal_space,
    check_vectorized_reward,
    make_vectorized_reward,
)
from her_wrap.envs.goal_wrapper import GoalKeyLayout, GoalObservationLayout, HERGoalEnvWrapper
from her_wrap.envs.grasp_start import GraspStartWrapper
from her_wrap.envs.registry import (
    EnvRegistryError,
    MissingExtraError,
    UnknownEnvError,
    ensure_registered,
    make_goal_env,
    register_envs,
)
from her_wrap.envs.robot_envs import RobotJointReader, make_panda_deterministic, speed_up_robot_observations

__all__ = [
    "GOAL_KEYS",
    "BatchedGoalFunction",
    "BitFlippingEnv",
    "EnvRegistryError",
    "GoalEnvError",
    "GoalKeyLayout",
    "GoalObservationLayout",
    "GraspStartWrapper",
    "HERGoalEnvWrapper",
    "MissingExtraError",
    "RobotJointReader",
    "UnknownEnvError",
    "check_goal_env",
    "check_goal_space",
    "check_vectorized_reward",
    "ensure_registered",
    "make_goal_env",
    "make_panda_deterministic",
    "make_vectorized_reward",
    "register_envs",
    "speed_up_robot_observations",
]

register_envs()
