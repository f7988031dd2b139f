"""Bad input to HER: each mistake gets an error that says what is wrong and how to fix it."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from her_wrap import HER, BitFlippingEnv

BITS = spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)


class FlatObservationEnv(gym.Env):
    """An env with a plain Box observation: no goals to relabel."""

    observation_space = BITS
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, dtype=np.float32), {}


class GoalEnvWithSpace(BitFlippingEnv):
    """3-bit flipping that declares another observation space."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        super().__init__(n_bits=3)
        self.observation_space = observation_space


class PerGoalRewardEnv(BitFlippingEnv):
    """3-bit flipping whose compute_reward takes one goal at a time (it fails on a batch)."""

    def compute_reward(self, achieved_goal, desired_goal, info):
        if np.ndim(achieved_goal) != 1:
            raise ValueError("one goal at a time")
        return 0.0 if np.array_equal(achieved_goal, desired_goal) else -1.0


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_env_without_dict_goal_observations_is_refused(policy):
    with pytest.raises(TypeError, match=r"must be a spaces\.Dict"):
        HER(policy, FlatObservationEnv(), DQN)


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_vec_env_without_dict_goal_observations_is_refused(policy):
    with pytest.raises(ValueError, match="Build the VecEnv from the goal envs themselves"):
        HER(policy, DummyVecEnv([FlatObservationEnv]), DQN)


def test_env_missing_a_goal_key_is_refused():
    env = GoalEnvWithSpace(spaces.Dict({"observation": BITS, "achieved_goal": BITS}))
    with pytest.raises(ValueError, match=r"lacks the keys \['desired_goal'\]"):
        HER("MultiInputPolicy", env, DQN)


def test_goals_of_different_shapes_are_refused():
    other = spaces.Box(0.0, 1.0, shape=(4,), dtype=np.float32)
    env = GoalEnvWithSpace(spaces.Dict({"observation": BITS, "achieved_goal": BITS, "desired_goal": other}))
    with pytest.raises(ValueError, match="Fix: give both keys the same space"):
        HER("MlpPolicy", env, DQN)


@pytest.mark.parametrize("model_class", [PPO, A2C])
def test_on_policy_model_class_is_refused(model_class):
    with pytest.raises(TypeError, match="HER needs an off-policy learner"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), model_class)


def test_replay_buffer_class_is_refused():
    with pytest.raises(
        ValueError, match="HER supplies the learner's replay buffer: remove replay_buffer_class="
    ):
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN, replay_buffer_class=object)


def test_unknown_goal_selection_strategy_is_refused():
    with pytest.raises(ValueError, match="use one of 'future', 'final', 'episode', 'random'"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN, goal_selection_strategy="past")


def test_compute_reward_for_single_goals_is_called_row_by_row_with_a_warning():
    with pytest.warns(UserWarning, match="falling back to one call per row"):
        model = HER("MlpPolicy", PerGoalRewardEnv(n_bits=3), DQN)
    achieved = np.array([[0, 0, 1], [1, 1, 1], [0, 1, 0]], dtype=np.float32)
    desired = np.array([[0, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=np.float32)
    rewards = model.replay_buffer.replay.reward_fn(achieved, desired, None)
    np.testing.assert_array_equal(rewards, [0.0, -1.0, 0.0])


def test_vectorized_compute_reward_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN)


# ---------------------------------------------------------------------- loading
def test_loading_a_plain_sb3_model_names_its_own_class(tmp_path):
    path = tmp_path / "dqn.zip"
    DQN("MlpPolicy", "CartPole-v1", buffer_size=100).save(path)
    with pytest.raises(
        ValueError, match=r"not a her_wrap model .*load plain SB3 models with their own class"
    ):
        HER.load(path)


def test_loading_a_text_file_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a model")
    with pytest.raises(ValueError, match=r"not a zip file\): pass a file written by HER\.save"):
        HER.load(path)


def test_loading_a_missing_path_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"does not exist: pass the path given to HER\.save"):
        HER.load(tmp_path / "nothing_here")


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_loading_with_an_env_of_other_spaces_is_refused(tmp_path, policy):
    HER(policy, BitFlippingEnv(n_bits=4), DQN).save(tmp_path / "four_bits")
    with pytest.raises(ValueError, match="pass an env of the task the model was trained on"):
        HER.load(tmp_path / "four_bits", env=BitFlippingEnv(n_bits=5))


# ---------------------------------------------------------------------- LaBER and prioritized replay
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"laber": "median"}, r"Unknown laber='median'; use one of \['lazy', 'max', 'mean'\] or None"),
        ({"laber": "mean", "laber_m": 0}, "laber_m must be an integer >= 1"),
        ({"prioritized": True, "alpha": -1}, r"alpha must be >= 0"),
        ({"prioritized": True, "beta": 2}, r"beta must lie in \[0, 1\]"),
        ({"laber": "mean", "prioritized": True}, "Choose one of laber and prioritized"),
    ],
    ids=["laber-median", "laber_m-0", "alpha-negative", "beta-above-1", "laber-and-prioritized"],
)
def test_bad_sampling_option_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN, **options)
