"""DDPG's and TD3's policy with LayerNorm in the actor and the critics, and its running average of the
actor for greedy actions (her_wrap.sb3.policies)."""

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
from her_wrap.sb3.exploration import actor_plan, exploration_actions
from her_wrap.sb3.policies import (
    LayerNormMultiInputPolicy,
    LayerNormPolicy,
    greedy_actor,
    with_policy_defaults,
)

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


# --------------------------------------------------------------------------- the actor's running average


def flat(module: th.nn.Module) -> th.Tensor:
    return th.nn.utils.parameters_to_vector(module.parameters()).detach().clone()


def batch_observation(n: int = 3) -> dict[str, np.ndarray]:
    return {key: np.stack([value] * n) for key, value in bit_env().reset(seed=5)[0].items()}


def test_the_actor_average_moves_by_its_rate_after_each_step_of_the_actors_optimizer():
    rate = 0.25
    policy = make_her(actor_average=rate).model.policy
    assert_same_state(policy.actor.state_dict(), policy.actor_average.state_dict())  # starts as a copy
    assert not any(parameter.requires_grad for parameter in policy.actor_average.parameters())
    optimized = {
        id(parameter) for group in policy.actor.optimizer.param_groups for parameter in group["params"]
    }
    assert not optimized & {id(parameter) for parameter in policy.actor_average.parameters()}
    for _ in range(3):
        before = flat(policy.actor_average)
        observation, _ = policy.obs_to_tensor(batch_observation())
        loss = policy.actor(observation).pow(2).sum() - policy.actor(observation).sum()
        policy.actor.optimizer.zero_grad()
        loss.backward()
        policy.actor.optimizer.step()
        actor = flat(policy.actor)
        th.testing.assert_close(flat(policy.actor_average), (1 - rate) * before + rate * actor)
    assert not th.equal(flat(policy.actor_average), flat(policy.actor))


@pytest.mark.parametrize("model_class", [DDPG, TD3])
def test_greedy_actions_come_from_the_average_and_exploration_from_the_actor(model_class):
    model = make_her(model_class=model_class, actor_average=0.05)
    model.learn(120)
    policy = model.model.policy
    assert not th.equal(flat(policy.actor), flat(policy.actor_average))  # training moved them apart
    observation = batch_observation()
    tensor, _ = policy.obs_to_tensor(observation)
    with th.no_grad():
        average_actions = policy.unscale_action(policy.actor_average(tensor).numpy())
        actor_actions = policy.unscale_action(policy.actor(tensor).numpy())
    assert not np.allclose(average_actions, actor_actions)
    np.testing.assert_allclose(model.predict(observation, deterministic=True)[0], average_actions, rtol=1e-6)
    assert greedy_actor(policy) is policy.actor_average
    plain = make_her(model_class=model_class).model.policy
    assert greedy_actor(plain) is plain.actor  # no average: the actor acts greedily
    np.testing.assert_allclose(model.model.policy.predict(observation)[0], actor_actions, rtol=1e-6)
    # Exploration keeps the lean forward of the actor itself.
    assert actor_plan(policy) is not None
    np.testing.assert_allclose(exploration_actions(policy, observation), actor_actions, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_class", [DDPG, TD3])
def test_an_average_at_the_learners_tau_is_its_target_actor_weight_for_weight(model_class):
    # So an agent's target actor reads as what actor_average=tau would have played, and the other way round.
    model = make_her(model_class=model_class, layer_norm=True, actor_average=0.02)
    model.model.tau = 0.02
    model.learn(120)
    policy = model.model.policy
    assert not th.equal(flat(policy.actor), flat(policy.actor_target))  # both moved away from the actor
    assert th.equal(flat(policy.actor_average), flat(policy.actor_target))
    other = make_her(model_class=model_class, layer_norm=True, actor_average=0.03)
    other.model.tau = 0.02
    other.learn(120)
    assert not th.equal(flat(other.model.policy.actor_average), flat(other.model.policy.actor_target))


def test_the_average_alone_keeps_sb3s_networks_and_with_layer_norm_averages_the_norms_too():
    plain = make_her(actor_average=0.01).model.policy
    assert type(plain) is LayerNormMultiInputPolicy and plain.layer_norm is False
    assert not any(isinstance(module, th.nn.LayerNorm) for module in plain.modules())
    assert_same_state(make_her().model.policy.actor.state_dict(), plain.actor.state_dict())  # SB3's weights
    normed = make_her(layer_norm=True, actor_average=0.01).model.policy
    assert layer_types(normed.actor_average.mu) == layer_types(normed.actor.mu)
    assert with_policy_defaults({"actor_average": 0.01}) == {"layer_norm": False, "actor_average": 0.01}
    assert with_policy_defaults({"actor_average": 0.01, "layer_norm": True})["layer_norm"] is True
    caller = {"net_arch": NET_ARCH, "actor_average": 0.01}
    make_her(**caller)
    assert caller == {"net_arch": NET_ARCH, "actor_average": 0.01}  # the caller's dict is not changed


def test_a_trained_agent_with_an_actor_average_saves_and_loads_it(tmp_path):
    model = make_her(layer_norm=True, actor_average=0.05)
    model.learn(120)
    model.save(tmp_path / "agent")
    loaded = HER.load(tmp_path / "agent", env=bit_env())
    assert loaded.model.policy.actor_average_rate == 0.05
    assert_same_state(model.model.policy.state_dict(), loaded.model.policy.state_dict())
    observation = batch_observation()
    np.testing.assert_array_equal(
        loaded.predict(observation, deterministic=True)[0], model.predict(observation, deterministic=True)[0]
    )
    before = flat(loaded.model.policy.actor_average)
    loaded.learn(40)  # the loaded optimizer moves the loaded average on
    assert not th.equal(flat(loaded.model.policy.actor_average), before)


def test_a_config_asks_for_an_actor_average_through_policy_kwargs():
    from stable_baselines3.common.env_util import make_vec_env

    config = load_run_config(
        default_config_path(),
        "FetchReach-v4",
        overrides=("model_class:ddpg", "policy_kwargs.actor_average:0.001", "policy_kwargs.net_arch:[8]"),
    )
    agent = build_agent(config, make_vec_env(bit_env, n_envs=1), seed=0, verbose=0)
    assert agent.model.policy.actor_average_rate == 0.001 and agent.model.policy.actor_average is not None


@pytest.mark.parametrize("rate", [1.0, -0.1, "0.1", True, float("nan")])
def test_an_actor_average_outside_its_range_names_the_range(rate):
    with pytest.raises(ValueError, match=r"actor_average= must be a number in \[0, 1\)"):
        make_her(actor_average=rate)


def test_an_actor_average_where_it_cannot_apply_names_the_fix():
    with pytest.raises(ValueError, match=r"actor_average= applies to DDPG and TD3; SAC.*or train ddpg / td3"):
        make_her(model_class=SAC, actor_average=0.01)
    with pytest.raises(ValueError, match="OtherPolicy does not take it"):
        make_her(OtherPolicy, actor_average=0.01)
