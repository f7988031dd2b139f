"""Goal envs for HER: the bit-flipping task, the dict <-> flat observation wrapper, and env checks.

Importing this package registers two gymnasium ids (once; importing again changes nothing):

- ``BitFlipping-v0``: :class:`BitFlippingEnv` with discrete actions (``n_bits=10`` unless given);
- ``BitFlippingContinuous-v0``: the same with continuous actions.

Neither id sets ``max_episode_steps``: the env truncates itself after ``max_steps`` steps, so
``gymnasium.make`` adds no second ``TimeLimit``.
"""

from gymnasium.envs.registration import register, registry

from her_wrap.envs.bit_flipping import BitFlippingEnv
from her_wrap.envs.checks import (
    GOAL_KEYS,
    BatchedGoalFunction,
    check_goal_env,
    check_vectorized_reward,
    make_vectorized_reward,
)
from her_wrap.envs.goal_wrapper import GoalKeyLayout, GoalObservationLayout, HERGoalEnvWrapper

__all__ = [
    "GOAL_KEYS",
    "BatchedGoalFunction",
    "BitFlippingEnv",
    "GoalKeyLayout",
    "GoalObservationLayout",
    "HERGoalEnvWrapper",
    "check_goal_env",
    "check_vectorized_reward",
    "make_vectorized_reward",
    "register_envs",
]

_BIT_FLIPPING_IDS = {
    "BitFlipping-v0": {"continuous": False},
    "BitFlippingContinuous-v0": {"continuous": True},
}


def register_envs() -> None:
    """Register the bit-flipping ids with gymnasium, skipping ids already registered (no override warning)."""
    for env_id, kwargs in _BIT_FLIPPING_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point="her_wrap.envs.bit_flipping:BitFlippingEnv", kwargs=kwargs)


register_envs()
