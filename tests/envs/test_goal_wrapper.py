"""HERGoalEnvWrapper and GoalObservationLayout: goal dict <-> one flat Box, single and batched."""

from __future__ import annotations

import json
import pickle
from typing import Any, cast

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from her_wrap.envs import BitFlippingEnv, GoalObservationLayout, HERGoalEnvWrapper


class TinyGoalEnv(gymnasium.Env[dict[str, Any], Any]):
    """A goal env over any sub-spaces: observations are samples of its space, rewards are goal equality."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        self.observation_space: spaces.Dict = observation_space
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        return self.observation_space.sample(), 0.0, False, False, {}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        goal_axes = tuple(range(-len(self.observation_space["desired_goal"].shape or ()), 0))
        differ = np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=goal_axes)
        return np.where(differ, -1.0, 0.0).astype(np.float32)


def goal_space(observation: spaces.Space, goal: spaces.Space) -> spaces.Dict:
    return spaces.Dict({"observation": observation, "achieved_goal": goal, "desired_goal": goal})


# Each case: the dict space and the flat size it should take (Discrete(n) takes n one-hot entries).
SPACES = {
    "box_2x3_box_goals": (
        goal_space(spaces.Box(-2, 3, (2, 3), np.float32), spaces.Box(-1, 1, (2,), np.float32)),
        10,
    ),
    "multi_binary": (goal_space(spaces.MultiBinary(4), spaces.MultiBinary(3)), 10),
    "multi_binary_2x2_goals": (goal_space(spaces.Discrete(3), spaces.MultiBinary((2, 2))), 11),
    "discrete_with_start": (goal_space(spaces.Discrete(5, start=-2), spaces.Discrete(4, start=1)), 13),
    "scalar_boxes": (goal_space(spaces.Box(-1, 1, (), np.float32), spaces.Box(0, 5, (), np.float32)), 3),
    "all_float64": (goal_space(spaces.Box(0, 1, (3,), np.float64), spaces.Box(0, 1, (2,), np.float64)), 7),
    "uint8_images": (
        goal_space(spaces.Box(0, 255, (3, 3), np.uint8), spaces.Box(0, 255, (2, 2), np.uint8)),
        17,
    ),
}


def make_wrapper(case: str) -> HERGoalEnvWrapper:
    return HERGoalEnvWrapper(TinyGoalEnv(SPACES[case][0]))


def sample_batch(space: spaces.Dict, batch_shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    """``batch_shape`` samples of the dict space, stacked per key."""
    space.seed(seed)
    samples = [space.sample() for _ in range(int(np.prod(batch_shape)))]
    stacked = {key: np.stack([np.asarray(sample[key]) for sample in samples]) for key in space}
    return {key: values.reshape(batch_shape + values.shape[1:]) for key, values in stacked.items()}


def dicts_equal(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> bool:
    """Same keys, values, shapes and dtypes."""
    return first.keys() == second.keys() and all(
        np.array_equal(first[key], second[key])
        and np.asarray(first[key]).dtype == np.asarray(second[key]).dtype
        for key in first
    )


# ---------------------------------------------------------------- the flat space


@pytest.mark.parametrize("case", SPACES)
def test_flat_space_is_one_vector_of_the_summed_sizes(case: str) -> None:
    assert make_wrapper(case).observation_space.shape == (SPACES[case][1],)


def test_flat_dtype_is_float32_when_any_part_is_not_float64() -> None:
    assert make_wrapper("multi_binary").observation_space.dtype == np.float32


def test_flat_dtype_is_float64_when_every_part_is_float64() -> None:
    assert make_wrapper("all_float64").observation_space.dtype == np.float64


def test_flat_bounds_are_the_concatenated_part_bounds() -> None:
    space = cast(spaces.Box, make_wrapper("box_2x3_box_goals").observation_space)
    assert (space.low.tolist(), space.high.tolist()) == ([-2.0] * 6 + [-1.0] * 4, [3.0] * 6 + [1.0] * 4)


def test_one_hot_and_binary_parts_are_bounded_by_zero_and_one() -> None:
    space = cast(spaces.Box, make_wrapper("discrete_with_start").observation_space)
    assert (space.low.tolist(), space.high.tolist()) == ([0.0] * 13, [1.0] * 13)


def test_key_order_is_observation_achieved_goal_desired_goal() -> None:
    wrapper = HERGoalEnvWrapper(BitFlippingEnv(n_bits=4))
    assert wrapper.key_slices == {
        "observation": slice(0, 4),
        "achieved_goal": slice(4, 8),
        "desired_goal": slice(8, 12),
    }


def test_flat_observation_concatenates_the_parts_in_key_order() -> None:
    env = BitFlippingEnv(n_bits=4)
    expected = np.concatenate([value for value in env.reset(seed=5)[0].values()])
    flat, _ = HERGoalEnvWrapper(env).reset(seed=5)
    assert np.array_equal(flat, expected)


def test_key_shapes_are_the_shapes_of_the_dict_values() -> None:
    wrapper = make_wrapper("multi_binary_2x2_goals")
    assert wrapper.key_shapes == {"observation": (), "achieved_goal": (2, 2), "desired_goal": (2, 2)}


@pytest.mark.parametrize("case", SPACES)
def test_reset_and_step_return_observations_of_the_flat_space(case: str) -> None:
    wrapper = make_wrapper(case)
    first, _ = wrapper.reset(seed=0)
    second, *_ = wrapper.step(0)
    assert wrapper.observation_space.contains(first) and wrapper.observation_space.contains(second)


def test_discrete_part_is_one_hot_at_value_minus_start() -> None:
    wrapper = make_wrapper("discrete_with_start")
    flat = wrapper.convert_dict_to_obs({"observation": 0, "achieved_goal": 1, "desired_goal": 4})
    assert flat.tolist() == [
        0,
        0,
        1,
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        0,
        1,
    ]  # one-hot: 0 at 2 (start -2); 1 at 0, 4 at 3 (start 1)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("case", SPACES)
@pytest.mark.parametrize("batch_shape", [(), (5,), (2, 3)], ids=["single", "batch", "two_batch_dims"])
@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_dict_to_flat_to_dict_gives_back_the_dict(case: str, batch_shape: tuple[int, ...], seed: int) -> None:
    wrapper = make_wrapper(case)
    observation = sample_batch(SPACES[case][0], batch_shape, seed)
    assert dicts_equal(wrapper.convert_obs_to_dict(wrapper.convert_dict_to_obs(observation)), observation)


@pytest.mark.parametrize("case", SPACES)
def test_flat_batch_has_the_batch_shape_in_front(case: str) -> None:
    wrapper = make_wrapper(case)
    observation = sample_batch(SPACES[case][0], (4,), seed=0)
    assert wrapper.convert_dict_to_obs(observation).shape == (4, SPACES[case][1])


@pytest.mark.parametrize("case", SPACES)
def test_flat_to_dict_to_flat_gives_back_the_flat_batch(case: str) -> None:
    wrapper = make_wrapper(case)
    flat = wrapper.convert_dict_to_obs(sample_batch(SPACES[case][0], (6,), seed=1))
    assert np.array_equal(wrapper.convert_dict_to_obs(wrapper.convert_obs_to_dict(flat)), flat)


# ---------------------------------------------------------------- goal functions


def test_compute_reward_is_the_wrapped_envs() -> None:
    env = BitFlippingEnv(n_bits=3)
    goals = np.array([[0, 0, 1], [1, 1, 1]], dtype=np.float32)
    desired = np.ones((2, 3), dtype=np.float32)
    assert HERGoalEnvWrapper(env).compute_reward(goals, desired, None).tolist() == [-1.0, 0.0]


def test_compute_terminated_is_the_wrapped_envs_when_it_has_one() -> None:
    wrapper = HERGoalEnvWrapper(BitFlippingEnv(n_bits=3))
    assert wrapper.compute_terminated(np.ones(3), np.ones(3), None).item() is True


def test_compute_terminated_is_absent_when_the_env_has_none() -> None:
    assert not hasattr(make_wrapper("multi_binary"), "compute_terminated")


# ---------------------------------------------------------------- the layout as data


@pytest.mark.parametrize("case", SPACES)
def test_layout_survives_a_json_round_trip(case: str) -> None:
    layout = make_wrapper(case).layout
    assert GoalObservationLayout.from_dict(json.loads(json.dumps(layout.to_dict()))) == layout


def test_layout_survives_pickling() -> None:
    layout = make_wrapper("discrete_with_start").layout
    assert pickle.loads(pickle.dumps(layout)) == layout


def test_restored_layout_flattens_like_the_wrapper_without_the_env() -> None:
    wrapper = make_wrapper("multi_binary_2x2_goals")
    restored = GoalObservationLayout.from_dict(json.loads(json.dumps(wrapper.layout.to_dict())))
    observation = sample_batch(SPACES["multi_binary_2x2_goals"][0], (3,), seed=2)
    assert np.array_equal(restored.flatten(observation), wrapper.convert_dict_to_obs(observation))


# ---------------------------------------------------------------- errors


def test_unsupported_sub_space_is_rejected_naming_the_fix() -> None:
    space = goal_space(spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(2))
    with pytest.raises(TypeError, match=r"MultiDiscrete.*Fix: give that key a Box space"):
        HERGoalEnvWrapper(TinyGoalEnv(space))


def test_extra_keys_are_rejected_rather_than_dropped() -> None:
    space = spaces.Dict(
        {**goal_space(spaces.MultiBinary(2), spaces.MultiBinary(2)).spaces, "extra": spaces.Discrete(2)}
    )
    with pytest.raises(ValueError, match=r"keys \['extra'\].*drop them"):
        HERGoalEnvWrapper(TinyGoalEnv(space))


def test_env_that_is_not_a_goal_env_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"spaces\.Dict"):
        HERGoalEnvWrapper(gymnasium.make("CartPole-v1"))


def test_keys_with_different_batch_shapes_are_rejected() -> None:
    observation = {
        "observation": np.zeros((2, 4)),
        "achieved_goal": np.zeros((3, 4)),
        "desired_goal": np.zeros((3, 4)),
    }
    with pytest.raises(ValueError, match="different batch shapes"):
        HERGoalEnvWrapper(BitFlippingEnv(n_bits=4)).convert_dict_to_obs(observation)


def test_value_of_the_wrong_trailing_shape_is_rejected() -> None:
    observation = {"observation": np.zeros(5), "achieved_goal": np.zeros(4), "desired_goal": np.zeros(4)}
    with pytest.raises(ValueError, match=r"observation\['observation'\] has shape \(5,\)"):
        HERGoalEnvWrapper(BitFlippingEnv(n_bits=4)).convert_dict_to_obs(observation)


def test_flat_observation_of_the_wrong_width_is_rejected() -> None:
    with pytest.raises(ValueError, match="last dimension 12"):
        HERGoalEnvWrapper(BitFlippingEnv(n_bits=4)).convert_obs_to_dict(np.zeros(11))


def test_discrete_value_outside_its_range_is_rejected() -> None:
    observation = {"observation": -3, "achieved_goal": 1, "desired_goal": 1}  # Discrete(5, start=-2)
    with pytest.raises(ValueError, match="outside the Discrete range"):
        make_wrapper("discrete_with_start").convert_dict_to_obs(observation)


def test_layout_space_gives_integer_boxes_their_dtype_range_and_float_boxes_no_bounds() -> None:
    from her_wrap.envs.goal_wrapper import layout_space

    space = goal_space(spaces.Box(-1, 1, (2,), np.float32), spaces.Box(0, 255, (2, 2), np.uint8))
    restored = layout_space(HERGoalEnvWrapper(TinyGoalEnv(space)).layout)
    goal = restored["desired_goal"]
    assert isinstance(goal, spaces.Box) and goal.dtype == np.uint8 and goal.shape == (2, 2)
    assert (goal.low == 0).all() and (goal.high == 255).all()
    assert np.isinf(restored["observation"].low).all() and restored["observation"].dtype == np.float32
