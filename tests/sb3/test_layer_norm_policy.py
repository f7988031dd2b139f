"""DDPG's and TD3's policy with LayerNorm in the actor and the critics (her_wrap.sb3.policies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch as th
from core_trajectories import assert_same_state
from stable_baselines3 import DDPG, SAC, TD3
from stable_baselines3.td3.policies import TD3Policy

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_factory import build_agent
from her_wrap.sb3.policies import LayerNormMultiInputPolicy, LayerNormPolicy

NET_ARCH = [16, 8]


def bit_env() -> BitFlippingEnv:
    return BitFlippingEnv(n_bits=4, continuous=True, max_steps=4)


def make_her(policy: Any = "MultiInputPolicy", model_class: Any = DDPG, **policy_kwargs: Any) -> HER:
    return HER(
        policy,
        bit_env(),
        model_class,
        seed=3,
        learning_starts=20,
        batch_size=8,
        policy_kwargs={"net_arch": NET_ARCH, **policy_kwargs},
    )


def layer_types(network: th.nn.Module) -> list[tuple[str, Any]]:
    """Each module of a ``Sequential`` as (class name, its width: out_features or normalized_shape)."""
    described = []
    for module in network:
        if isinstance(module, th.nn.Linear):
            described.append(("Linear", module.out_features))
        elif isinstance(module, th.nn.LayerNorm):
            described.append(("LayerNorm", module.normalized_shape[0]))
        else:
            described.append((type(module).__name__, None))
    return described


@pytest.mark.parametrize("model_class", [DDPG, TD3])
@pytest.mark.parametrize(
    ("policy", "expected_class"),
    [("MultiInputPolicy", LayerNormMultiInputPolicy), ("MlpPolicy", LayerNormPolicy)],
)
def test_layer_norm_follows_every_hidden_layer_of_actor_and_critics(model_class, policy, expected_class):
    learner = make_her(policy, model_class, layer_norm=True).model
    assert type(learner.policy) is expected_class
    hidden = [
        ("Linear", 16),
        ("LayerNorm", 16),
        ("ReLU", None),
        ("Linear", 8),
        ("LayerNorm", 8),
        ("ReLU", None),
    ]
    for actor in (learner.actor, learner.actor_target):
        assert layer_types(actor.mu) == [*hidden, ("Linear", 4), ("Tanh", None)]  # 4 bits, 4 actions
    for critic in (learner.critic, learner.critic_target):
        assert len(critic.q_networks) == learner.policy.critic_kwargs["n_critics"]
        for index, q_net in enumerate(critic.q_networks):
            assert getattr(critic, f"qf{index}") is q_net  # SB3's module names hold the new networks
            assert layer_types(q_net) == [*hidden, ("Linear", 1)]
    # The targets start as copies; the optimizers hold the norms' scales and shifts too.
    for online, target in ((learner.actor, learner.actor_target), (learner.critic, learner.critic_target)):
        assert_same_state(online.state_dict(), target.state_dict())
    optimized = {
        id(parameter) for group in learner.actor.optimizer.param_groups for parameter in group["params"]
    }
    assert {id(parameter) for parameter in learner.actor.mu[1].parameters()} <= optimized
    optimized = {
        id(parameter) for group in learner.critic.optimizer.param_groups for parameter in group["params"]
    }
    assert {id(parameter) for parameter in learner.critic.q_networks[0][1].parameters()} <= optimized


def test_layer_norm_false_builds_sb3s_networks_with_the_same_weights():
    plain = make_her().model
    unnormed = make_her(LayerNormMultiInputPolicy, layer_norm=False).model
    assert not any(isinstance(module, th.nn.LayerNorm) for module in unnormed.policy.modules())
    assert_same_state(plain.policy.state_dict(), unnormed.policy.state_dict())


def test_a_policy_class_given_directly_is_used_and_reads_dict_observations():
    model = make_her(LayerNormMultiInputPolicy, TD3)
    assert type(model.model.policy) is LayerNormMultiInputPolicy
    assert model.policy_argument is LayerNormMultiInputPolicy and not model.flat
    assert any(isinstance(module, th.nn.LayerNorm) for module in model.model.actor.mu)


def test_a_trained_layer_norm_agent_saves_and_loads_with_its_networks(tmp_path):
    model = HER(
        "MultiInputPolicy",
        bit_env(),
        DDPG,
        seed=0,
        learning_starts=16,
        batch_size=8,
        train_freq=4,
        gradient_steps=4,
        action_l2=1.0,
        clip_target=True,
        target_update_per_cycle=True,
        policy_kwargs={"net_arch": NET_ARCH, "layer_norm": True},
    )
    initial_scale = model.model.actor.mu[1].weight.detach().clone()
    model.learn(80)
    assert not th.equal(model.model.actor.mu[1].weight, initial_scale)  # the norms are trained
    model.save(tmp_path / "agent")
    loaded = HER.load(tmp_path / "agent", env=bit_env())
    assert type(loaded.model.policy) is LayerNormMultiInputPolicy
    assert loaded.model.policy_kwargs["layer_norm"] is True
    assert_same_state(model.model.policy.state_dict(), loaded.model.policy.state_dict())
    observation = {key: np.stack([value] * 3) for key, value in bit_env().reset(seed=5)[0].items()}
    np.testing.assert_array_equal(
        loaded.predict(observation, deterministic=True)[0], model.predict(observation, deterministic=True)[0]
    )
    loaded.learn(20)  # and trains on


def test_a_config_asks_for_layer_norm_through_policy_kwargs():
    config = load_run_config(default_config_path(), "FetchReach-v4", overrides=("model_class:ddpg",))
    assert "layer_norm" not in (config.learner_kwargs.get("policy_kwargs") or {})
    normed = load_run_config(
        default_config_path(),
        "FetchReach-v4",
        overrides=("model_class:ddpg", "policy_kwargs.layer_norm:true", "policy_kwargs.net_arch:[8]"),
    )
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(bit_env, n_envs=1)
    agent = build_agent(normed, env, seed=0, verbose=0)
    assert isinstance(agent.model.policy, LayerNormPolicy)
    sac = load_run_config(
        default_config_path(), "FetchReach-v4", overrides=("model_class:sac", "policy_kwargs.layer_norm:true")
    )
    with pytest.raises(UsageError, match="layer_norm= applies to DDPG and TD3"):
        build_agent(sac, env, seed=0, verbose=0)


class OtherPolicy(TD3Policy):
    pass


@pytest.mark.parametrize(
    ("policy", "model_class", "message"),
    [
        ("MultiInputPolicy", SAC, "layer_norm= applies to DDPG and TD3.*sbx.SAC"),
        (OtherPolicy, DDPG, "OtherPolicy does not take it.*LayerNormMultiInputPolicy"),
        ("CnnPolicy", TD3, "'CnnPolicy' has no LayerNorm form"),
    ],
)
def test_layer_norm_where_it_cannot_apply_names_the_fix(policy, model_class, message):
    with pytest.raises(ValueError, match=message):
        make_her(policy, model_class, layer_norm=True)
