"""check_goal_env, check_vectorized_reward and make_vectorized_reward: what HER asks of an env."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from her_wrap.envs import (
    BitFlippingEnv,
    GoalEnvError,
    check_goal_env,
    check_goal_space,
    check_vectorized_reward,
    make_vectorized_reward,
)


class SpaceOnlyEnv(gymnasium.Env[Any, Any]):
    """Just enough of an env for the checks: an observation space, and optionally a compute_reward."""

    def __init__(self, observation_space: spaces.Space, with_compute_reward: bool = True) -> None:
        self.observation_space = observation_space
        self.action_space = spaces.Discrete(2)
        if with_compute_reward:
            self.compute_reward = lambda achieved_goal, desired_goal, info: np.zeros(len(achieved_goal))


def goal_dict(**overrides: spaces.Space) -> spaces.Dict:
    bits = spaces.Box(0, 1, (3,), np.float32)
    return spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits, **overrides})


def single_goal_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> float:
    """A compute_reward written for one goal: ``float()`` of a batch's ``(B,)`` distances raises."""
    return -float(np.linalg.norm(achieved_goal - desired_goal, axis=-1) > 0.5)


ACHIEVED = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 1], [0, 0, 1]], dtype=np.float32)
DESIRED = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=np.float32)
EXPECTED_REWARDS = [0.0, -1.0, 0.0, -1.0]


# ---------------------------------------------------------------- check_goal_env


def test_valid_goal_env_passes() -> None:
    check_goal_env(BitFlippingEnv(n_bits=3))


def test_wrapped_goal_env_passes() -> None:
    check_goal_env(gymnasium.make("BitFlipping-v0"))


def test_observation_space_that_is_not_a_dict_is_rejected_naming_the_fix() -> None:
    with pytest.raises(TypeError, match=r"must be a spaces.Dict, got Box\. Fix: return dict observations"):
        check_goal_env(SpaceOnlyEnv(spaces.Box(0, 1, (3,))))


def test_missing_keys_are_named_along_with_the_keys_present() -> None:
    space = spaces.Dict({"observation": spaces.Box(0, 1, (3,)), "goal": spaces.Box(0, 1, (3,))})
    with pytest.raises(
        ValueError,
        match=r"lacks the keys \['achieved_goal', 'desired_goal'\]; it has \['goal', 'observation'\]",
    ):
        check_goal_env(SpaceOnlyEnv(space))


def test_goals_of_different_shapes_are_rejected_naming_the_fix() -> None:
    space = goal_dict(desired_goal=spaces.Box(0, 1, (2,), np.float32))
    with pytest.raises(
        ValueError, match=r"\(3,\) but desired_goal has shape \(2,\).*Fix: give both keys the same space"
    ):
        check_goal_env(SpaceOnlyEnv(space))


def test_env_without_compute_reward_is_rejected_naming_the_fix() -> None:
    with pytest.raises(TypeError, match=r"has no compute_reward.*Fix: define compute_reward\(achieved_goal"):
        check_goal_env(SpaceOnlyEnv(goal_dict(), with_compute_reward=False))


# ---------------------------------------------------------------- check_vectorized_reward


def test_vectorized_compute_reward_of_an_env_is_recognized() -> None:
    assert check_vectorized_reward(BitFlippingEnv(n_bits=3), ACHIEVED, DESIRED) is True


def test_compute_reward_that_raises_on_a_batch_is_not_vectorized() -> None:
    assert check_vectorized_reward(single_goal_reward, ACHIEVED, DESIRED) is False


def test_compute_reward_that_returns_a_scalar_for_a_batch_is_not_vectorized() -> None:
    def norm_of_the_whole_batch(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> float:
        # no axis: the norm of the whole batch, silently one number
        return -float(np.linalg.norm(achieved_goal - desired_goal) > 0.5)

    assert check_vectorized_reward(norm_of_the_whole_batch, ACHIEVED, DESIRED) is False


def test_compute_reward_that_returns_a_column_for_a_batch_is_not_vectorized() -> None:
    def column(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return np.zeros((len(achieved_goal), 1))

    assert check_vectorized_reward(column, ACHIEVED, DESIRED) is False


def test_check_needs_at_least_two_goals() -> None:
    with pytest.raises(ValueError, match="at least 2 goals"):
        check_vectorized_reward(BitFlippingEnv(n_bits=3), ACHIEVED[:1], DESIRED[:1])


def test_something_without_compute_reward_is_rejected() -> None:
    with pytest.raises(TypeError, match="expected a compute_reward function or a goal env"):
        check_vectorized_reward(SpaceOnlyEnv(goal_dict(), with_compute_reward=False), ACHIEVED, DESIRED)


# ---------------------------------------------------------------- make_vectorized_reward


def test_vectorized_compute_reward_is_used_natively_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batched = make_vectorized_reward(BitFlippingEnv(n_bits=3), ACHIEVED, DESIRED)
    assert batched.vectorized is True


def test_native_call_gives_the_envs_rewards() -> None:
    batched = make_vectorized_reward(BitFlippingEnv(n_bits=3), ACHIEVED[:2], DESIRED[:2])
    assert batched(ACHIEVED, DESIRED, None).tolist() == EXPECTED_REWARDS


def test_fallback_warns_naming_the_fix() -> None:
    with pytest.warns(UserWarning, match="make compute_reward accept batched goals"):
        make_vectorized_reward(single_goal_reward, ACHIEVED, DESIRED)


def test_fallback_gives_one_reward_per_row() -> None:
    with pytest.warns(UserWarning):
        batched = make_vectorized_reward(single_goal_reward, ACHIEVED, DESIRED)
    assert batched(ACHIEVED, DESIRED, None).tolist() == EXPECTED_REWARDS


def test_fallback_warns_once_not_at_every_call() -> None:
    with pytest.warns(UserWarning) as caught:
        batched = make_vectorized_reward(single_goal_reward, ACHIEVED, DESIRED)
        for _ in range(3):
            batched(ACHIEVED, DESIRED, None)
    assert len(caught) == 1


def test_fallback_passes_each_row_its_own_info() -> None:
    def reward_from_info(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: dict) -> float:
        return float(info["bonus"])

    with pytest.warns(UserWarning):
        batched = make_vectorized_reward(
            reward_from_info, ACHIEVED[:2], DESIRED[:2], [{"bonus": 0}, {"bonus": 0}]
        )
    infos = np.array([{"bonus": row} for row in range(4)])
    assert batched(ACHIEVED, DESIRED, infos).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_batched_reward_of_an_env_survives_pickling() -> None:
    batched = make_vectorized_reward(BitFlippingEnv(n_bits=3), ACHIEVED, DESIRED)
    assert pickle.loads(pickle.dumps(batched))(ACHIEVED, DESIRED, None).tolist() == EXPECTED_REWARDS


# ---------------------------------------------------------------- one goal check, one error type

NOT_GOAL_ENVS = {
    "flat observations": SpaceOnlyEnv(spaces.Box(0, 1, (3,))),
    "missing goal keys": SpaceOnlyEnv(spaces.Dict({"observation": spaces.Box(0, 1, (3,))})),
    "goals of two shapes": SpaceOnlyEnv(goal_dict(desired_goal=spaces.Box(0, 1, (2,), np.float32))),
    "no compute_reward": SpaceOnlyEnv(goal_dict(), with_compute_reward=False),
}


@pytest.mark.parametrize("env", NOT_GOAL_ENVS.values(), ids=NOT_GOAL_ENVS.keys())
@pytest.mark.parametrize("caught_as", [GoalEnvError, TypeError, ValueError])
def test_every_goal_check_failure_is_a_goal_env_error_that_old_except_clauses_catch(env, caught_as) -> None:
    with pytest.raises(caught_as) as caught:
        check_goal_env(env)
    assert type(caught.value) is GoalEnvError


def test_the_space_check_and_the_env_check_give_one_message() -> None:
    flat = spaces.Box(0, 1, (3,))
    with pytest.raises(GoalEnvError) as from_space:
        check_goal_space(flat)
    with pytest.raises(GoalEnvError) as from_env:
        check_goal_env(SpaceOnlyEnv(flat))
    assert str(from_space.value) == str(from_env.value)


def test_the_registry_still_exports_the_space_check() -> None:
    from her_wrap.envs import registry

    assert registry.check_goal_space is check_goal_space
