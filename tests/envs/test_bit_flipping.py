"""BitFlippingEnv: the HER paper's bit-flipping task as a gymnasium goal env."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from hypothesis import given
from hypothesis import strategies as st

from her_wrap.envs import BitFlippingEnv, register_envs


def differing_bits(observation: dict[str, np.ndarray]) -> list[int]:
    """The bit indices where the state differs from the goal: the discrete actions that solve the episode."""
    return [int(i) for i in np.flatnonzero(observation["achieved_goal"] != observation["desired_goal"])]


def solve_all_but_one(env: BitFlippingEnv, seed: int = 0) -> tuple[dict[str, np.ndarray], int]:
    """Reset, flip every wrong bit but one; return the observation and the action that solves the episode."""
    observation, _ = env.reset(seed=seed)
    *first, last = differing_bits(observation)
    for action in first:
        observation, *_ = env.step(action)
    return observation, last


# ---------------------------------------------------------------- spaces


def test_observation_parts_are_float32_boxes_in_unit_interval() -> None:
    env = BitFlippingEnv(n_bits=6)
    expected = spaces.Box(0.0, 1.0, (6,), dtype=np.float32)
    assert all(
        env.observation_space[key] == expected for key in ("observation", "achieved_goal", "desired_goal")
    )


def test_discrete_mode_has_one_action_per_bit() -> None:
    assert BitFlippingEnv(n_bits=6).action_space == spaces.Discrete(6)


def test_continuous_mode_has_a_unit_box_action() -> None:
    assert BitFlippingEnv(n_bits=6, continuous=True).action_space == spaces.Box(-1, 1, (6,), dtype=np.float32)


ENCODINGS = {
    "vector": {},
    "discrete observations": {"discrete_obs_space": True},
    "channel-first images": {"image_obs_space": True},
    "channel-last images": {"image_obs_space": True, "channel_first": False},
}


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("encoding", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_gymnasium_env_checker_passes_without_warnings(continuous: bool, encoding: dict) -> None:
    env = gymnasium.make("BitFlipping-v0", n_bits=5, continuous=continuous, **encoding).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)


def test_stable_baselines3_env_checker_passes() -> None:
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_checker.check_env(BitFlippingEnv(n_bits=5), warn=True)


# ---------------------------------------------------------------- observation encodings


def bits_of(env: BitFlippingEnv, key: str, observation: dict) -> list[int]:
    """The bits an encoded observation part holds, read back by the documented encoding."""
    part = np.asarray(observation[key])
    if env.discrete_obs_space:
        return [(int(part) >> i) & 1 for i in range(env.n_bits)]
    if env.image_obs_space:
        return (part.reshape(-1)[: env.n_bits] // 255).astype(int).tolist()
    return part.astype(int).tolist()


def test_discrete_observations_are_integers_with_bit_i_worth_two_to_the_i() -> None:
    env = BitFlippingEnv(n_bits=6, discrete_obs_space=True)
    observation, _ = env.reset(seed=2)
    expected = sum(int(bit) << i for i, bit in enumerate(env.state))
    assert (observation["achieved_goal"], type(observation["achieved_goal"])) == (expected, np.int64)


def test_discrete_observation_space_has_one_value_per_state() -> None:
    env = BitFlippingEnv(n_bits=6, discrete_obs_space=True)
    assert all(env.observation_space[key] == spaces.Discrete(64) for key in env.observation_space.spaces)


@pytest.mark.parametrize(
    ("channel_first", "shape"), [(True, (1, 36, 36)), (False, (36, 36, 1))], ids=["first", "last"]
)
def test_image_observation_space_is_a_one_channel_36_by_36_uint8_box(
    channel_first: bool, shape: tuple[int, int, int]
) -> None:
    env = BitFlippingEnv(n_bits=6, image_obs_space=True, channel_first=channel_first)
    assert env.observation_space["desired_goal"] == spaces.Box(0, 255, shape, dtype=np.uint8)


def test_image_observations_hold_the_bits_in_their_first_pixels_and_zeros_after() -> None:
    env = BitFlippingEnv(n_bits=6, image_obs_space=True)
    observation, _ = env.reset(seed=2)
    pixels = observation["desired_goal"].reshape(-1)
    assert pixels[:6].tolist() == (env.goal * 255).astype(int).tolist() and not pixels[6:].any()


@pytest.mark.parametrize("encoding", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_every_encoding_holds_the_state_and_the_goal(encoding: dict) -> None:
    env = BitFlippingEnv(n_bits=6, **encoding)
    env.reset(seed=4)
    observation, *_ = env.step(1)
    assert [bits_of(env, key, observation) for key in ("observation", "achieved_goal", "desired_goal")] == [
        env.state.astype(int).tolist(),
        env.state.astype(int).tolist(),
        env.goal.astype(int).tolist(),
    ]


@pytest.mark.parametrize("encoding", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_every_encoding_rewards_a_batch_of_its_goals_as_its_steps(encoding: dict) -> None:
    env = BitFlippingEnv(n_bits=6, **encoding)
    env.reset(seed=1)
    steps = [env.step(action) for action in np.flatnonzero(env.state != env.goal)]
    achieved = np.stack([np.asarray(observation["achieved_goal"]) for observation, *_ in steps])
    desired = np.stack([np.asarray(observation["desired_goal"]) for observation, *_ in steps])
    assert env.compute_reward(achieved, desired, None).tolist() == [reward for _, reward, *_ in steps]


def test_discrete_goals_in_a_replay_buffer_column_are_one_batch() -> None:
    """Replay buffers store a ``Discrete`` part as shape ``(1,)``, so a batch of goals comes as ``(B, 1)``."""
    env = BitFlippingEnv(n_bits=3, discrete_obs_space=True)
    achieved, desired = np.array([[5], [5], [0]]), np.array([[5], [4], [7]])
    assert env.compute_terminated(achieved, desired, None).tolist() == [True, False, False]


def test_discrete_and_image_observations_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        BitFlippingEnv(discrete_obs_space=True, image_obs_space=True)


@pytest.mark.parametrize(
    ("encoding", "n_bits"), [({"discrete_obs_space": True}, 63), ({"image_obs_space": True}, 36 * 36 + 1)]
)
def test_more_bits_than_an_encoding_holds_are_rejected(encoding: dict, n_bits: int) -> None:
    with pytest.raises(ValueError, match="n_bits must be at most"):
        BitFlippingEnv(n_bits=n_bits, **encoding)


def test_image_goals_of_another_shape_are_rejected() -> None:
    env = BitFlippingEnv(n_bits=4, image_obs_space=True)
    with pytest.raises(ValueError, match=r"shape \(1, 36, 36\)"):
        env.compute_reward(np.zeros((2, 36, 36, 1)), np.zeros((2, 36, 36, 1)), None)


# ---------------------------------------------------------------- reset


def test_start_state_never_equals_goal() -> None:
    env = BitFlippingEnv(n_bits=1)  # with one bit a random draw hits the goal half of the time
    observations = [env.reset(seed=seed)[0] for seed in range(50)]
    assert all(differing_bits(observation) for observation in observations)


def test_goal_is_random_by_default() -> None:
    env = BitFlippingEnv(n_bits=8)
    goals = {tuple(env.reset(seed=seed)[0]["desired_goal"]) for seed in range(20)}
    assert len(goals) > 1


def test_fixed_goal_is_all_ones() -> None:
    env = BitFlippingEnv(n_bits=8, fixed_goal=True)
    goals = {tuple(env.reset(seed=seed)[0]["desired_goal"]) for seed in range(20)}
    assert goals == {(1.0,) * 8}


def test_reset_with_the_same_seed_repeats_the_episode_start() -> None:
    env = BitFlippingEnv(n_bits=16)
    first, second = env.reset(seed=7)[0], env.reset(seed=7)[0]
    assert all(np.array_equal(first[key], second[key]) for key in first)


def test_observation_and_achieved_goal_are_the_state() -> None:
    observation, _ = BitFlippingEnv(n_bits=8).reset(seed=3)
    assert np.array_equal(observation["observation"], observation["achieved_goal"])


# ---------------------------------------------------------------- actions


def test_discrete_action_flips_exactly_that_bit() -> None:
    env = BitFlippingEnv(n_bits=8)
    before, _ = env.reset(seed=0)
    after, *_ = env.step(3)
    assert np.flatnonzero(before["achieved_goal"] != after["achieved_goal"]).tolist() == [3]


def test_continuous_action_flips_the_bits_of_positive_components() -> None:
    env = BitFlippingEnv(n_bits=5, continuous=True)
    before, _ = env.reset(seed=0)
    after, *_ = env.step(np.array([0.5, 0.0, -0.3, 1.0, -1.0], dtype=np.float32))
    assert np.flatnonzero(before["achieved_goal"] != after["achieved_goal"]).tolist() == [0, 3]


def test_discrete_action_out_of_range_is_rejected() -> None:
    env = BitFlippingEnv(n_bits=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"discrete action in \[0, 4\)"):
        env.step(4)


def test_continuous_action_of_the_wrong_length_is_rejected() -> None:
    env = BitFlippingEnv(n_bits=4, continuous=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        env.step(np.ones(3, dtype=np.float32))


# ---------------------------------------------------------------- reward, termination, truncation


def test_step_that_misses_the_goal_is_rewarded_minus_one() -> None:
    env = BitFlippingEnv(n_bits=8, fixed_goal=True)
    observation, _ = env.reset(seed=0)
    correct_bit = int(np.flatnonzero(observation["achieved_goal"] == 1.0)[0])  # flipping it moves away
    _, reward, terminated, _, info = env.step(correct_bit)
    assert (reward, terminated, info) == (-1.0, False, {"is_success": False})


def test_step_that_reaches_the_goal_is_rewarded_zero_and_terminates() -> None:
    env = BitFlippingEnv(n_bits=8)
    _, solving_action = solve_all_but_one(env)
    _, reward, terminated, _, info = env.step(solving_action)
    assert (reward, terminated, info) == (0.0, True, {"is_success": True})


def test_episode_is_truncated_after_n_bits_steps_by_default() -> None:
    env = BitFlippingEnv(n_bits=4, fixed_goal=True)
    env.reset(seed=0)
    truncations = [env.step(0)[3] for _ in range(4)]  # flipping one bit back and forth never solves 4 bits
    assert truncations == [False, False, False, True]


def test_max_steps_sets_the_truncation_step() -> None:
    env = BitFlippingEnv(n_bits=4, max_steps=2, fixed_goal=True)
    env.reset(seed=0)
    truncations = [env.step(0)[3] for _ in range(2)]
    assert truncations == [False, True]


def test_registered_id_has_no_time_limit_wrapper() -> None:
    assert gymnasium.make("BitFlipping-v0").spec.max_episode_steps is None  # type: ignore[union-attr]


# ---------------------------------------------------------------- vectorized goal functions


def test_compute_reward_of_one_goal_is_a_float32_scalar_array() -> None:
    env = BitFlippingEnv(n_bits=3)
    reward = env.compute_reward(np.ones(3), np.ones(3), None)
    assert (reward.shape, reward.dtype, float(reward)) == ((), np.float32, 0.0)


def test_compute_reward_of_a_batch_rewards_each_row() -> None:
    env = BitFlippingEnv(n_bits=2)
    achieved = np.array([[0, 0], [0, 1], [1, 1]], dtype=np.float32)
    desired = np.array([[0, 0], [1, 1], [1, 1]], dtype=np.float32)
    infos = [{"is_success": False}] * 3
    assert env.compute_reward(achieved, desired, infos).tolist() == [0.0, -1.0, 0.0]


@given(
    n_bits=st.integers(1, 6),
    batch_size=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_compute_reward_of_a_batch_equals_rewards_of_its_rows(
    n_bits: int, batch_size: int, seed: int
) -> None:
    env = BitFlippingEnv(n_bits=n_bits)
    rng = np.random.default_rng(seed)
    achieved, desired = rng.integers(0, 2, (2, batch_size, n_bits)).astype(np.float32)
    rows = [env.compute_reward(a, d, {}) for a, d in zip(achieved, desired, strict=True)]
    assert np.array_equal(env.compute_reward(achieved, desired, None), np.array(rows))


def test_compute_reward_matches_the_rewards_of_steps() -> None:
    env = BitFlippingEnv(n_bits=6)
    observation, _ = env.reset(seed=1)
    steps = [env.step(action) for action in differing_bits(observation)]
    achieved = np.stack([observation["achieved_goal"] for observation, *_ in steps])
    desired = np.stack([observation["desired_goal"] for observation, *_ in steps])
    assert env.compute_reward(achieved, desired, [info for *_, info in steps]).tolist() == [
        reward for _, reward, *_ in steps
    ]


def test_compute_terminated_is_true_exactly_where_goals_match() -> None:
    env = BitFlippingEnv(n_bits=2)
    achieved = np.array([[0, 0], [0, 1]], dtype=np.float32)
    desired = np.array([[0, 0], [1, 1]], dtype=np.float32)
    assert env.compute_terminated(achieved, desired, None).tolist() == [True, False]


def test_compute_truncated_is_false_for_every_goal() -> None:
    env = BitFlippingEnv(n_bits=2)
    goals = np.array([[0, 0], [1, 1]], dtype=np.float32)
    assert env.compute_truncated(goals, goals, None).tolist() == [False, False]


def test_compute_reward_rejects_goals_of_the_wrong_width() -> None:
    env = BitFlippingEnv(n_bits=4)
    with pytest.raises(ValueError, match=r"shape \(4,\) or \(batch, 4\)"):
        env.compute_reward(np.zeros((2, 3)), np.zeros((2, 3)), None)


# ---------------------------------------------------------------- registration and rendering


def test_registered_discrete_id_makes_the_env_with_the_given_n_bits() -> None:
    env = gymnasium.make("BitFlipping-v0", n_bits=7)
    assert env.action_space == spaces.Discrete(7)


def test_registered_continuous_id_makes_the_continuous_env() -> None:
    env = gymnasium.make("BitFlippingContinuous-v0")
    assert env.action_space == spaces.Box(-1, 1, (10,), dtype=np.float32)


def test_registering_again_neither_warns_nor_fails() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_envs()


def test_ansi_render_shows_state_and_goal_as_bit_strings() -> None:
    env = BitFlippingEnv(n_bits=3, fixed_goal=True, render_mode="ansi")
    observation, _ = env.reset(seed=0)
    state = "".join(str(int(bit)) for bit in observation["achieved_goal"])
    assert env.render() == f"step 0/3 state {state} goal 111"


def test_unknown_render_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="render_mode"):
        BitFlippingEnv(render_mode="rgb")


def test_rgb_array_render_shows_state_on_top_and_goal_below() -> None:
    env = BitFlippingEnv(n_bits=3, render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    expected_top = np.repeat(env.state.astype(np.uint8) * 255, 8)
    assert image.shape == (16, 24, 3) and np.array_equal(image[0, :, 0], expected_top)


def test_make_vec_env_builds_the_registered_id() -> None:
    from stable_baselines3.common.env_util import make_vec_env

    vec_env = make_vec_env("BitFlipping-v0", n_envs=2, env_kwargs={"n_bits": 5})
    assert vec_env.observation_space["desired_goal"].shape == (5,)
