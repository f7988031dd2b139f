"""The lean exploration forward of DDPG's and TD3's actors (her_wrap.sb3.exploration)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import DDPG, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.td3.policies import TD3Policy

from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3.exploration import actor_plan, exploration_actions


class OffsetGoalEnv(gym.Env):
    """A goal env with float64 observations of several shapes and actions bounded away from [-1, 1]."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-10.0, 10.0, (2, 3), np.float64),
                "achieved_goal": spaces.Box(-10.0, 10.0, (2,), np.float64),
                "desired_goal": spaces.Box(-10.0, 10.0, (2,), np.float64),
            }
        )
        self.action_space = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32))
        self.rng = np.random.default_rng(0)

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            key: self.rng.normal(0.0, 3.0, space.shape)
            for key, space in self.observation_space.spaces.items()
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return self._observation(), -1.0, False, self.rng.random() < 0.1, {}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return -(np.linalg.norm(achieved_goal - desired_goal, axis=-1) > 0.5).astype(np.float32)


def train_model(
    model_class: type, policy: str = "MultiInputPolicy", n_envs: int = 3, **policy_kwargs: Any
) -> HER:
    """A learner whose weights have moved away from their initial values."""
    env = make_vec_env(OffsetGoalEnv, n_envs=n_envs)
    model = HER(
        policy,
        env,
        model_class,
        seed=0,
        learning_starts=30,
        batch_size=16,
        policy_kwargs={"net_arch": [16, 16], **policy_kwargs},
    )
    return model.learn(120)


#: One trained model per setting for the tests that leave it as they found it (monkeypatch undoes itself).
trained = functools.cache(train_model)


def random_observation(model: HER, rows: int, seed: int = 1) -> Any:
    rng = np.random.default_rng(seed)
    space = model.model.observation_space
    if isinstance(space, spaces.Dict):
        return {key: rng.normal(0.0, 5.0, (rows, *part.shape)) for key, part in space.spaces.items()}
    return rng.normal(0.0, 5.0, (rows, *space.shape))


def count_policy_predictions(model: HER, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that grows by one at every call of the learner's ``policy.predict``."""
    calls: list[bool] = []
    predict = model.model.policy.predict

    def counting_predict(*args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        return predict(*args, **kwargs)

    monkeypatch.setattr(model.model.policy, "predict", counting_predict)
    return calls


@pytest.mark.parametrize("model_class", [DDPG, TD3])
@pytest.mark.parametrize("policy", ["MultiInputPolicy", "MlpPolicy"])
def test_lean_forward_gives_sb3s_actions_bit_for_bit(model_class, policy):
    model = trained(model_class, policy)
    learner_policy = model.model.policy
    assert actor_plan(learner_policy) is not None
    for rows in (1, 2, 7):
        observation = random_observation(model, rows)
        lean = exploration_actions(learner_policy, observation)
        expected, _ = learner_policy.predict(observation, deterministic=False)
        assert lean is not None and lean.dtype == expected.dtype and lean.shape == (rows, 2)
        np.testing.assert_array_equal(lean, expected)
    # In the action space's bounds, not the network's [-1, 1].
    assert (lean >= model.model.action_space.low).all() and (lean <= model.model.action_space.high).all()


@pytest.mark.parametrize("policy", ["MultiInputPolicy", "MlpPolicy"])
def test_lean_forward_follows_layer_norm_networks_bit_for_bit(policy):
    model = train_model(DDPG, policy, layer_norm=True)  # its own: the test changes the norms
    learner_policy = model.model.policy
    norms = [module for module in learner_policy.actor.mu if isinstance(module, th.nn.LayerNorm)]
    assert len(norms) == 2
    with th.no_grad():  # scales and shifts away from their initial 1 and 0
        for norm in norms:
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    assert actor_plan(learner_policy) is not None
    observation = random_observation(model, 5)
    lean = exploration_actions(learner_policy, observation)
    np.testing.assert_array_equal(lean, learner_policy.predict(observation, deterministic=False)[0])


def test_lean_forward_covers_bfloat16_networks_below_their_autocast_batch():
    from her_wrap.sb3.policies import AUTOCAST_MIN_ROWS

    model = train_model(DDPG, layer_norm=True, hidden_dtype="bfloat16")
    learner_policy = model.model.policy
    plan = actor_plan(learner_policy)
    assert plan is not None and plan.float32_below == AUTOCAST_MIN_ROWS
    small = random_observation(model, 3)  # float32, as the network runs a batch this small
    np.testing.assert_array_equal(
        exploration_actions(learner_policy, small), learner_policy.predict(small, deterministic=False)[0]
    )
    assert exploration_actions(learner_policy, random_observation(model, AUTOCAST_MIN_ROWS)) is None
    float32_plan = actor_plan(trained(DDPG, "MultiInputPolicy").model.policy)
    assert float32_plan is not None and float32_plan.float32_below is None


def test_a_layer_norm_out_of_place_is_left_to_sb3():
    model = train_model(DDPG, layer_norm=True)
    policy = model.model.policy
    modules = list(policy.actor.mu)  # Linear, LayerNorm, ReLU, ...: move the first norm after its ReLU
    policy.actor.mu = th.nn.Sequential(modules[0], modules[2], modules[1], *modules[3:])
    assert actor_plan(policy) is None
    policy.actor.mu = th.nn.Sequential(modules[0], modules[1], copy.deepcopy(modules[1]), *modules[2:])
    assert actor_plan(policy) is None
    policy.actor.mu = th.nn.Sequential(*modules)
    assert actor_plan(policy) is not None


def test_lean_forward_follows_a_tanh_network():
    model = trained(TD3, activation_fn=th.nn.Tanh)
    observation = random_observation(model, 4)
    np.testing.assert_array_equal(
        exploration_actions(model.model.policy, observation), model.model.policy.predict(observation)[0]
    )


@pytest.mark.parametrize("model_class", [DDPG, TD3])
def test_exploration_takes_the_lean_forward_with_the_same_actions(model_class, monkeypatch):
    model = trained(model_class)
    learner = model.model
    # The stock exploration step of SB3 (no her_wrap mixin), predicting through policy.predict.
    expected_actions, expected_buffer = model_class._sample_action(learner, 0, None, 3)

    def no_predict(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("policy.predict was called")

    monkeypatch.setattr(learner.policy, "predict", no_predict)
    actions, buffer_actions = learner._sample_action(0, None, 3)
    np.testing.assert_array_equal(actions, expected_actions)
    np.testing.assert_array_equal(buffer_actions, expected_buffer)
    assert learner._exploring is False


def test_prediction_outside_exploration_keeps_sb3s_path(monkeypatch):
    model = trained(DDPG)
    calls = count_policy_predictions(model, monkeypatch)
    model.model.predict(random_observation(model, 3))
    assert calls == [True]


def test_sac_explores_through_its_own_predict(monkeypatch):
    model = trained(SAC)
    assert actor_plan(model.model.policy) is None
    calls = count_policy_predictions(model, monkeypatch)
    model.model._sample_action(0, None, 3)
    assert calls == [True]


class OwnPredictPolicy(TD3Policy):
    def _predict(self, observation: Any, deterministic: bool = False) -> th.Tensor:
        return -super()._predict(observation, deterministic)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: trained(DDPG, activation_fn=th.nn.LeakyReLU), id="another activation"),
        pytest.param(
            lambda: HER(
                "MultiInputPolicy", BitFlippingEnv(n_bits=4, continuous=True, image_obs_space=True), TD3
            ),
            id="image observations",
        ),
        pytest.param(
            lambda: HER(OwnPredictPolicy, BitFlippingEnv(n_bits=4, continuous=True), TD3), id="own _predict"
        ),
    ],
)
def test_actors_the_lean_forward_does_not_cover_keep_sb3s_path(build):
    model = build()
    assert actor_plan(model.model.policy) is None
    assert exploration_actions(model.model.policy, random_observation(model, 2)) is None


def test_an_observation_that_is_not_one_row_per_env_is_left_to_sb3():
    model = trained(DDPG)
    policy = model.model.policy
    single = {key: value[0] for key, value in random_observation(model, 1).items()}
    assert exploration_actions(policy, single) is None
    missing = random_observation(model, 2)
    del missing["desired_goal"]
    assert exploration_actions(policy, missing) is None
    assert exploration_actions(policy, random_observation(model, 2)["observation"]) is None


def test_the_plan_follows_a_replaced_network_and_new_weights():
    model = train_model(DDPG)  # its own: the test changes the network
    policy = model.model.policy
    observation = random_observation(model, 3)
    assert actor_plan(policy) is actor_plan(policy)  # made once
    with th.no_grad():  # weights changed in place (an optimizer step, load_state_dict)
        for parameter in policy.actor.mu.parameters():
            parameter.mul_(1.5)
    np.testing.assert_array_equal(exploration_actions(policy, observation), policy.predict(observation)[0])
    replaced = copy.deepcopy(policy.actor.mu)
    with th.no_grad():
        replaced[0].bias.add_(1.0)
    policy.actor.mu = replaced
    np.testing.assert_array_equal(exploration_actions(policy, observation), policy.predict(observation)[0])
    policy.actor.mu = th.nn.Sequential(replaced[0], th.nn.LeakyReLU(), *list(replaced)[2:])
    assert actor_plan(policy) is None


def test_a_forward_hook_on_the_actor_keeps_sb3s_path():
    model = trained(TD3)
    policy = model.model.policy
    observation = random_observation(model, 2)
    calls: list[int] = []
    handle = policy.actor.mu[2].register_forward_hook(lambda *args: calls.append(1))
    try:
        assert exploration_actions(policy, observation) is None
        model.model._sample_action(0, None, 3)
        assert calls == [1]  # the exploration step went through the module, so the hook saw it
    finally:
        handle.remove()
    assert exploration_actions(policy, observation) is not None
    handle = th.nn.modules.module.register_module_forward_pre_hook(lambda *args: None)
    try:
        assert exploration_actions(policy, observation) is None
    finally:
        handle.remove()
