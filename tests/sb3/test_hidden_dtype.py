"""``policy_kwargs.hidden_dtype``: DDPG's and TD3's hidden layers in bfloat16 under torch.autocast
(her_wrap.sb3.policies)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch as th
from core_trajectories import assert_same_state
from stable_baselines3 import DDPG, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from test_layer_norm_policy import batch_observation, bit_env, make_her

from her_wrap import HER
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.model_factory import build_agent
from her_wrap.sb3 import policies
from her_wrap.sb3.policies import (
    AUTOCAST_MIN_ROWS,
    AutocastHiddenNetwork,
    LayerNormMultiInputPolicy,
    with_policy_defaults,
)


def networks(learner: Any) -> list[th.nn.Module]:
    """The actor's and every critic's network, targets included."""
    found = [learner.actor.mu, learner.actor_target.mu]
    for critic in (learner.critic, learner.critic_target):
        found += list(critic.q_networks)
    return found


def linear_output_dtypes(network: th.nn.Module, features: th.Tensor) -> list[th.dtype]:
    """The dtype of each ``Linear`` layer's output in one forward pass of ``network``."""
    dtypes: list[th.dtype] = []
    hooks = [
        layer.register_forward_hook(lambda _module, _inputs, output: dtypes.append(output.dtype))
        for layer in network
        if isinstance(layer, th.nn.Linear)
    ]
    try:
        network(features)
    finally:
        for hook in hooks:
            hook.remove()
    return dtypes


@pytest.mark.parametrize("model_class", [DDPG, TD3])
@pytest.mark.parametrize("layer_norm", [True, False])
def test_bfloat16_runs_the_hidden_layers_in_bfloat16_and_the_output_layer_in_float32(model_class, layer_norm):
    learner = make_her(model_class=model_class, layer_norm=layer_norm, hidden_dtype="bfloat16").model
    for network in networks(learner):
        assert type(network) is AutocastHiddenNetwork
        assert any(isinstance(layer, th.nn.LayerNorm) for layer in network) is layer_norm
        features = th.zeros(AUTOCAST_MIN_ROWS, network[0].in_features)
        assert linear_output_dtypes(network, features) == [th.bfloat16, th.bfloat16, th.float32]
        assert network(features).dtype == th.float32
        # A batch of an env's action or two runs in float32.
        assert linear_output_dtypes(network, features[: AUTOCAST_MIN_ROWS - 1]) == [th.float32] * 3
    # The critic modules the state dict names are the networks the critic runs.
    assert learner.critic.qf0 is learner.critic.q_networks[0]
    assert all(parameter.dtype == th.float32 for parameter in learner.policy.parameters())


def test_bfloat16_trains_float32_weights_with_float32_gradients():
    model = make_her(layer_norm=True, hidden_dtype="bfloat16")
    before = th.nn.utils.parameters_to_vector(model.model.actor.parameters()).detach().clone()
    model.learn(80)
    actor = model.model.actor
    assert not th.equal(th.nn.utils.parameters_to_vector(actor.parameters()), before)
    assert all(p.grad is not None and p.grad.dtype == th.float32 for p in actor.parameters())
    assert np.isfinite(model.predict(batch_observation(), deterministic=True)[0]).all()


def test_float32_is_the_network_without_the_key_bit_for_bit():
    plain = make_her(layer_norm=True)
    float32 = make_her(layer_norm=True, hidden_dtype="float32")
    assert not any(isinstance(module, AutocastHiddenNetwork) for module in float32.model.policy.modules())
    plain.learn(80)
    float32.learn(80)
    assert_same_state(plain.model.policy.state_dict(), float32.model.policy.state_dict())


def test_bfloat16_rounds_the_same_weights_close_to_float32_but_not_equal():
    float32 = make_her(layer_norm=True).model.policy
    bfloat16 = make_her(layer_norm=True, hidden_dtype="bfloat16").model.policy
    bfloat16.load_state_dict(float32.state_dict())  # the same parameter names
    width = float32.actor.mu[0].in_features
    rows = np.random.default_rng(0).normal(size=(AUTOCAST_MIN_ROWS, width))
    observation = th.as_tensor(rows, dtype=th.float32)
    with th.no_grad():
        exact = float32.actor.mu(observation)
        rounded = bfloat16.actor.mu(observation)
        assert th.equal(bfloat16.actor.mu(observation[:3]), float32.actor.mu(observation[:3]))  # float32
    assert not th.equal(exact, rounded)
    assert th.allclose(exact, rounded, atol=0.05)


def test_the_key_alone_keeps_sb3s_networks():
    policy = make_her(hidden_dtype="bfloat16").model.policy
    assert type(policy) is LayerNormMultiInputPolicy and policy.layer_norm is False
    assert not any(isinstance(module, th.nn.LayerNorm) for module in policy.modules())
    assert_same_state(make_her().model.policy.actor.state_dict(), policy.actor.state_dict())
    assert with_policy_defaults({"hidden_dtype": "bfloat16"}) == {
        "layer_norm": False,
        "hidden_dtype": "bfloat16",
    }


def test_a_bfloat16_agent_saves_and_loads_with_its_dtype(tmp_path):
    model = make_her(layer_norm=True, actor_average=0.05, hidden_dtype="bfloat16")
    model.learn(80)
    model.save(tmp_path / "agent")
    loaded = HER.load(tmp_path / "agent", env=bit_env())
    assert loaded.model.policy.hidden_dtype == "bfloat16"
    assert type(loaded.model.policy.actor_average.mu) is AutocastHiddenNetwork
    assert_same_state(model.model.policy.state_dict(), loaded.model.policy.state_dict())
    observation = batch_observation()
    np.testing.assert_array_equal(
        loaded.predict(observation, deterministic=True)[0], model.predict(observation, deterministic=True)[0]
    )


def test_a_config_asks_for_bfloat16_through_policy_kwargs():
    config = load_run_config(
        default_config_path(),
        "FetchReach-v4",
        overrides=("model_class:ddpg", "policy_kwargs.hidden_dtype:bfloat16", "policy_kwargs.net_arch:[8]"),
    )
    agent = build_agent(config, make_vec_env(bit_env, n_envs=1), seed=0, verbose=0)
    assert agent.model.policy.hidden_dtype == "bfloat16"
    assert type(agent.model.actor.mu) is AutocastHiddenNetwork


@pytest.mark.parametrize("name", ["bf16", "float16", 16, None])
def test_an_unknown_hidden_dtype_names_the_choices(name):
    with pytest.raises(ValueError, match=r"hidden_dtype= must be one of 'float32', 'bfloat16'.*got"):
        make_her(hidden_dtype=name)


def test_a_network_without_a_linear_output_layer_is_refused():
    with pytest.raises(ValueError, match="needs a Linear output layer"):
        AutocastHiddenNetwork(th.nn.Sequential(th.nn.ReLU()), th.bfloat16)
    with pytest.raises(TypeError, match=r"wraps an nn\.Sequential, got Linear"):
        AutocastHiddenNetwork(th.nn.Linear(2, 2), th.bfloat16)


def test_a_hidden_dtype_where_it_cannot_apply_names_the_fix():
    with pytest.raises(ValueError, match=r"hidden_dtype= applies to DDPG and TD3; SAC.*or train ddpg / td3"):
        make_her(model_class=SAC, hidden_dtype="bfloat16")


@pytest.mark.parametrize("supported", [True, False])
def test_bfloat16_on_a_cpu_that_emulates_it_warns_naming_auto(monkeypatch, supported):
    monkeypatch.setattr(policies, "cpu_has_bfloat16_products", lambda: supported)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_her(layer_norm=True, hidden_dtype="bfloat16")
        make_her(layer_norm=True, hidden_dtype="float32")
    emulated = [str(warning.message) for warning in caught if "emulates them" in str(warning.message)]
    assert len(emulated) == (0 if supported else 1)
    assert all("policy_kwargs.hidden_dtype:auto" in message for message in emulated)


@pytest.mark.parametrize("supported", [True, False])
def test_auto_takes_bfloat16_only_on_a_cpu_with_bfloat16_products_and_never_warns(monkeypatch, supported):
    monkeypatch.setattr(policies, "cpu_has_bfloat16_products", lambda: supported)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        auto = make_her(layer_norm=True, hidden_dtype="auto")
    assert not [warning for warning in caught if "bfloat16" in str(warning.message)]
    assert auto.model.policy.hidden_dtype == "auto"
    for network in networks(auto.model):
        assert (type(network) is AutocastHiddenNetwork) is supported
        features = th.zeros(AUTOCAST_MIN_ROWS, network[0].in_features)
        expected = [th.bfloat16, th.bfloat16, th.float32] if supported else [th.float32] * 3
        assert linear_output_dtypes(network, features) == expected
    if not supported:  # float32: the network without the key, bit for bit
        plain = make_her(layer_norm=True)
        plain.learn(80)
        auto.learn(80)
        assert_same_state(plain.model.policy.state_dict(), auto.model.policy.state_dict())


def test_an_auto_agent_saved_on_one_cpu_plays_in_the_dtype_of_the_cpu_that_loads_it(monkeypatch, tmp_path):
    monkeypatch.setattr(policies, "cpu_has_bfloat16_products", lambda: True)
    model = make_her(layer_norm=True, hidden_dtype="auto")
    model.learn(80)
    model.save(tmp_path / "agent")
    monkeypatch.setattr(policies, "cpu_has_bfloat16_products", lambda: False)
    loaded = HER.load(tmp_path / "agent", env=bit_env())
    assert loaded.model.policy.hidden_dtype == "auto"
    assert type(loaded.model.actor.mu) is not AutocastHiddenNetwork
    assert_same_state(model.model.policy.state_dict(), loaded.model.policy.state_dict())
