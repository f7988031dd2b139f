"""HER reads like an SB3 model where users reach for it: the policy network, verbosity, learning rate..."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from stable_baselines3 import DQN, SAC
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.policies import BasePolicy

from her_wrap import HER, BitFlippingEnv

READ_ONLY_ATTRIBUTES = (
    "policy_class",
    "num_timesteps",
    "gamma",
    "batch_size",
    "seed",
    "device",
    "n_envs",
    "observation_space",
    "action_space",
    "ep_info_buffer",
    "ep_success_buffer",
)


@pytest.fixture(scope="module")
def trained() -> HER:
    model = HER(
        "MlpPolicy",
        BitFlippingEnv(n_bits=4),
        DQN,
        seed=1,
        verbose=0,
        learning_starts=50,
        batch_size=16,
        policy_kwargs={"net_arch": [16]},
    )
    return model.learn(120)


def test_policy_is_the_learners_network_not_the_name(trained: HER):
    assert isinstance(trained.policy, BasePolicy) and trained.policy is trained.model.policy


def test_policy_argument_keeps_the_name_given(trained: HER):
    assert trained.policy_argument == "MlpPolicy"


@pytest.mark.parametrize("name", READ_ONLY_ATTRIBUTES)
def test_attribute_is_the_learners(trained: HER, name: str):
    assert getattr(trained, name) is getattr(trained.model, name)


def test_logger_is_the_learners_after_learn(trained: HER):
    assert trained.logger is trained.model.logger


def test_training_episodes_are_recorded_where_sb3_users_read_them(trained: HER):
    assert len(trained.ep_success_buffer) > 0 and len(trained.ep_info_buffer) > 0


def test_setting_verbose_reaches_the_learner(trained: HER):
    trained.verbose = 2
    assert trained.model.verbose == 2
    trained.verbose = 0


def test_setting_the_learning_rate_changes_the_next_gradient_steps():
    model = HER(
        "MlpPolicy", BitFlippingEnv(n_bits=3), DQN, seed=0, learning_starts=20, batch_size=8, train_freq=1
    )
    model.learn(30)
    model.learning_rate = 0.0123
    model.learn(10, reset_num_timesteps=False)
    assert model.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(0.0123)


def test_setting_action_noise_reaches_the_learner():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3, continuous=True), SAC, seed=0)
    noise = NormalActionNoise(mean=np.zeros(3), sigma=0.1 * np.ones(3))
    model.action_noise = noise
    assert model.model.action_noise is noise and model.action_noise is noise


def test_an_unknown_attribute_is_an_error_not_a_silent_lookup(trained: HER):
    with pytest.raises(AttributeError):
        _ = trained.exploration_rate_typo  # type: ignore[attr-defined]


def test_device_is_a_torch_device(trained: HER):
    assert isinstance(trained.device, th.device)
