"""Specification of HER's train step and its weighted critic losses (her_wrap.sb3.train_steps).

Each learner is trained briefly once per module (tiny nets, ~200 env steps) and deep-copied per test, so
that a stock ``model.train()`` and ``train_from_source`` start from the same parameters, optimizer state and
replay buffer. Both runs seed torch (sampled actions, TD3 noise) and numpy's global RNG (stable-baselines3
buffers sample with ``np.random``) identically.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch as th
from sb3_contrib import QRDQN, TQC
from stable_baselines3 import DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from her_wrap.sb3.batch_sources import UniformSource
from her_wrap.sb3.critic_losses import td_abs
from her_wrap.sb3.samples import Samples
from her_wrap.sb3.train_steps import train_from_source

BATCH_SIZE = 32
GRADIENT_STEPS = 3
ALGORITHMS = ["DQN", "QRDQN", "SAC", "TQC", "TD3", "DDPG"]


class LinearExtractor(BaseFeaturesExtractor):
    """A features extractor with parameters of its own (stable-baselines3's flatten has none)."""

    def __init__(self, observation_space: Any) -> None:
        super().__init__(observation_space, features_dim=8)
        self.linear = th.nn.Linear(int(np.prod(observation_space.shape)), 8)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return th.relu(self.linear(observations))


def _build(name: str) -> OffPolicyAlgorithm:
    """A learner of the named configuration whose buffer holds 200 transitions, after a few updates."""
    # 20 updates during the fill, so that optimizers and entropy coefficients are not at their initial state.
    common: dict[str, Any] = dict(learning_starts=180, buffer_size=1_000, seed=0, device="cpu", verbose=0)
    tiny: dict[str, Any] = dict(net_arch=[16])
    shared: dict[str, Any] = dict(features_extractor_class=LinearExtractor, share_features_extractor=True)
    builders: dict[str, Callable[[], OffPolicyAlgorithm]] = {
        "DQN": lambda: DQN("MlpPolicy", "CartPole-v1", policy_kwargs=tiny, **common),
        "QRDQN": lambda: QRDQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(tiny, n_quantiles=5), **common),
        "SAC": lambda: SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=tiny, **common),
        "TQC": lambda: TQC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(tiny, n_quantiles=5), **common),
        "TD3": lambda: TD3("MlpPolicy", "Pendulum-v1", policy_kwargs=tiny, **common),
        "DDPG": lambda: DDPG("MlpPolicy", "Pendulum-v1", policy_kwargs=tiny, **common),
        # n-step buffers fill the samples' `discounts` field.
        "DQN-3step": lambda: DQN("MlpPolicy", "CartPole-v1", policy_kwargs=tiny, n_steps=3, **common),
        "SAC-3step": lambda: SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=tiny, n_steps=3, **common),
        # Dict observations give DictReplayBufferSamples.
        "DQN-dict": lambda: DQN("MultiInputPolicy", BitFlippingEnv(n_bits=4), policy_kwargs=tiny, **common),
        "TD3-dict": lambda: TD3(
            "MultiInputPolicy", BitFlippingEnv(n_bits=4, continuous=True), policy_kwargs=tiny, **common
        ),
        # One features extractor with parameters, shared by actor and critic.
        "SAC-shared": lambda: SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(tiny, **shared), **common),
        "TD3-shared": lambda: TD3("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(tiny, **shared), **common),
    }
    model = builders[name]()
    model.learn(200)
    return model


@pytest.fixture(autouse=True, scope="module")
def _single_torch_thread() -> Iterator[None]:
    """Nets of 16 units gain nothing from intra-op threads, and on a busy machine the threads' spinning
    made a 200-step SAC fill take 12 s instead of 0.3 s; restored so other modules keep their setting."""
    previous = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(previous)


_BUILT: dict[str, OffPolicyAlgorithm] = {}


def fresh(name: str) -> OffPolicyAlgorithm:
    """An independent copy of the named learner, built once per test module."""
    if name not in _BUILT:
        _BUILT[name] = _build(name)
    return copy.deepcopy(_BUILT[name])


def seed_global_rngs(seed: int) -> None:
    th.manual_seed(seed)
    # stable-baselines3 buffers sample with the legacy global RNG, so only seeding it reproduces a batch.
    np.random.seed(seed)  # noqa: NPY002


def seeded(run: Callable[[], object]) -> None:
    seed_global_rngs(123)
    run()


def trainable_state(model: OffPolicyAlgorithm) -> dict[str, th.Tensor]:
    """Every network (online and target) plus SAC/TQC's learned entropy coefficient."""
    state = {key: value.detach().clone() for key, value in model.policy.state_dict().items()}
    log_ent_coef = getattr(model, "log_ent_coef", None)
    if log_ent_coef is not None:
        state["log_ent_coef"] = log_ent_coef.detach().clone()
    return state


def differing(a: dict[str, th.Tensor], b: dict[str, th.Tensor], atol: float = 1e-6) -> list[str]:
    assert a.keys() == b.keys()
    return [key for key in a if not th.allclose(a[key], b[key], atol=atol)]


def critic_state(model: OffPolicyAlgorithm) -> dict[str, th.Tensor]:
    """The network(s) whose loss is weighted: the Q / quantile network or the critic ensemble."""
    module: th.nn.Module
    if isinstance(model, DQN):
        module = model.q_net
    elif isinstance(model, QRDQN):
        module = model.quantile_net
    else:
        assert isinstance(model, SAC | TQC | TD3)
        module = model.critic
    return {key: value.detach().clone() for key, value in module.state_dict().items()}


class FixedBatch:
    """A BatchSource that always returns the same batch and weights and records the reports."""

    def __init__(self, samples: Samples, weights: th.Tensor | None) -> None:
        self.samples = samples
        self.weights = weights
        self.reports: list[np.ndarray] = []

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        return self.samples, self.weights

    def report(self, td_abs: np.ndarray) -> None:
        self.reports.append(td_abs)


class WeightedUniform(UniformSource):
    """Uniform batches with weights from a function of the batch size; records the reports."""

    def __init__(self, model: OffPolicyAlgorithm, weights: Callable[[int], th.Tensor]) -> None:
        assert model.replay_buffer is not None
        super().__init__(model.replay_buffer)
        self.weights = weights
        self.reports: list[np.ndarray] = []

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        samples, _ = super().draw(model, batch_size)
        return samples, self.weights(batch_size)

    def report(self, td_abs: np.ndarray) -> None:
        self.reports.append(td_abs)


def uniform(model: OffPolicyAlgorithm) -> UniformSource:
    assert model.replay_buffer is not None
    return UniformSource(model.replay_buffer)


def sample(model: OffPolicyAlgorithm, batch_size: int = BATCH_SIZE) -> Samples:
    assert model.replay_buffer is not None
    return model.replay_buffer.sample(batch_size)


def seeded_sample(model: OffPolicyAlgorithm, batch_size: int = BATCH_SIZE) -> Samples:
    seed_global_rngs(0)
    return sample(model, batch_size)


# --- weights=None is stock train() -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", [*ALGORITHMS, "DQN-3step", "SAC-3step", "DQN-dict", "TD3-dict", "SAC-shared", "TD3-shared"]
)
def test_unweighted_steps_give_the_parameters_of_stock_train(name: str) -> None:
    stock, weighted = fresh(name), fresh(name)
    seeded(lambda: stock.train(gradient_steps=GRADIENT_STEPS, batch_size=BATCH_SIZE))
    seeded(lambda: train_from_source(weighted, GRADIENT_STEPS, BATCH_SIZE, uniform(weighted)))
    assert differing(trainable_state(stock), trainable_state(weighted)) == []


@pytest.mark.parametrize("name", ["SAC", "TQC", "TD3", "DDPG", "SAC-shared", "TD3-shared"])
def test_the_actor_step_computes_no_gradient_of_the_critic_weights(name: str) -> None:
    """The critic's own weights get a gradient from the critic loss alone (once per gradient step): the
    actor loss runs through the critic but skips its weights' gradients. A shared extractor keeps the
    gradient of the actor's own pass through it (stable-baselines3's critic does not back-propagate into a
    shared extractor)."""
    model = fresh(name)
    assert isinstance(model, SAC | TQC | TD3)
    actor_parameters = {id(parameter) for parameter in model.actor.parameters()}
    own, shared = [], []
    for parameter in model.critic.parameters():
        calls = shared if id(parameter) in actor_parameters else own
        parameter.register_hook(lambda grad, calls=calls: calls.append(1))
    seeded(lambda: train_from_source(model, GRADIENT_STEPS, BATCH_SIZE, uniform(model)))
    own_parameters = sum(id(parameter) not in actor_parameters for parameter in model.critic.parameters())
    assert len(own) == GRADIENT_STEPS * own_parameters
    actor_steps = GRADIENT_STEPS if isinstance(model, SAC | TQC) else GRADIENT_STEPS // model.policy_delay
    shared_parameters = len(list(model.critic.parameters())) - own_parameters
    assert len(shared) == actor_steps * shared_parameters
    assert all(parameter.requires_grad for parameter in model.critic.parameters())


@pytest.mark.parametrize("name", ALGORITHMS)
def test_unweighted_steps_log_what_stock_train_logs(name: str) -> None:
    """Same keys, losses and `train/n_updates` (TD3 counts inside its loop, the others after it)."""
    stock, weighted = fresh(name), fresh(name)
    seeded(lambda: stock.train(gradient_steps=GRADIENT_STEPS, batch_size=BATCH_SIZE))
    seeded(lambda: train_from_source(weighted, GRADIENT_STEPS, BATCH_SIZE, uniform(weighted)))
    assert dict(weighted.logger.name_to_value) == pytest.approx(dict(stock.logger.name_to_value), abs=1e-6)


# --- weights reach the critic loss -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ALGORITHMS)
def test_all_ones_weights_give_the_unweighted_update(name: str) -> None:
    ones, unweighted = fresh(name), fresh(name)
    seeded(lambda: train_from_source(ones, GRADIENT_STEPS, BATCH_SIZE, WeightedUniform(ones, th.ones)))
    seeded(lambda: train_from_source(unweighted, GRADIENT_STEPS, BATCH_SIZE, uniform(unweighted)))
    assert differing(trainable_state(ones), trainable_state(unweighted)) == []


@pytest.mark.parametrize("name", ALGORITHMS)
def test_non_uniform_weights_change_the_critic_update(name: str) -> None:
    """Control for the test below: the weights do reach the loss."""
    reweighted, unweighted = fresh(name), fresh(name)
    batch = seeded_sample(reweighted)
    weights = th.linspace(0.0, 2.0, BATCH_SIZE)
    seeded(lambda: train_from_source(reweighted, 1, BATCH_SIZE, FixedBatch(batch, weights)))
    seeded(lambda: train_from_source(unweighted, 1, BATCH_SIZE, FixedBatch(batch, None)))
    assert differing(critic_state(reweighted), critic_state(unweighted)) != []


def _replace_first_sample(batch: Samples, other: Samples) -> ReplayBufferSamples:
    """`batch` with its first transition taken from `other`, and a reward no stored transition has."""
    assert isinstance(batch, ReplayBufferSamples) and isinstance(other, ReplayBufferSamples)

    def splice(mine: th.Tensor, theirs: th.Tensor) -> th.Tensor:
        spliced = mine.clone()
        spliced[0] = theirs[0]
        return spliced

    rewards = splice(batch.rewards, other.rewards)
    rewards[0] += 10.0
    return batch._replace(
        observations=splice(batch.observations, other.observations),
        actions=splice(batch.actions, other.actions),
        next_observations=splice(batch.next_observations, other.next_observations),
        dones=splice(batch.dones, 1 - batch.dones),
        rewards=rewards,
    )


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_zero_weight_sample_does_not_change_the_critic_update(name: str) -> None:
    """The critic ignores a zero-weighted sample; the actor, unweighted by design, is not compared."""
    original, replaced = fresh(name), fresh(name)
    batch, other = seeded_sample(original), sample(original)
    weights = th.linspace(0.5, 1.5, BATCH_SIZE)
    weights[0] = 0.0
    seeded(lambda: train_from_source(original, 1, BATCH_SIZE, FixedBatch(batch, weights)))
    seeded(
        lambda: train_from_source(
            replaced, 1, BATCH_SIZE, FixedBatch(_replace_first_sample(batch, other), weights)
        )
    )
    assert differing(critic_state(original), critic_state(replaced)) == []


def test_weights_of_the_wrong_length_raise() -> None:
    model = fresh("DQN")
    with pytest.raises(ValueError, match="one weight per sample"):
        train_from_source(model, 1, BATCH_SIZE, FixedBatch(seeded_sample(model), th.ones(BATCH_SIZE + 1)))


# --- |TD| ------------------------------------------------------------------------------------------------


def test_td_abs_of_dqn_is_the_q_learning_td_error() -> None:
    model = fresh("DQN")
    assert isinstance(model, DQN)
    batch = seeded_sample(model)
    with th.no_grad():
        q_taken = model.q_net(batch.observations).gather(1, batch.actions.long()).squeeze(1)
        next_q = model.q_net_target(batch.next_observations).max(dim=1).values
        target = batch.rewards.squeeze(1) + (1 - batch.dones.squeeze(1)) * model.gamma * next_q
    np.testing.assert_allclose(td_abs(model, batch), (target - q_taken).abs().numpy(), atol=1e-5)


def test_td_abs_of_n_step_dqn_discounts_by_the_samples_discounts() -> None:
    """An n-step buffer returns gamma**n per sample (less where the episode ended), not gamma."""
    model = fresh("DQN-3step")
    assert isinstance(model, DQN)
    batch = seeded_sample(model)
    assert batch.discounts is not None
    with th.no_grad():
        q_taken = model.q_net(batch.observations).gather(1, batch.actions.long())
        next_q = model.q_net_target(batch.next_observations).max(dim=1, keepdim=True).values
        target = batch.rewards + (1 - batch.dones) * batch.discounts * next_q
    np.testing.assert_allclose(td_abs(model, batch), (target - q_taken).abs().squeeze(1).numpy(), atol=1e-5)


def test_td_abs_of_sac_is_the_soft_td_error_averaged_over_critics() -> None:
    """Both computations seed torch the same way: SAC's target samples the next action."""
    model = fresh("SAC")
    assert isinstance(model, SAC) and model.log_ent_coef is not None
    batch = seeded_sample(model)
    th.manual_seed(7)
    result = td_abs(model, batch)
    th.manual_seed(7)
    with th.no_grad():
        alpha = model.log_ent_coef.exp()
        next_actions, next_log_prob = model.actor.action_log_prob(batch.next_observations)
        q1_next, q2_next = model.critic_target(batch.next_observations, next_actions)
        soft_next = th.minimum(q1_next, q2_next).squeeze(1) - alpha * next_log_prob
        target = batch.rewards.squeeze(1) + (1 - batch.dones.squeeze(1)) * model.gamma * soft_next
        q1, q2 = model.critic(batch.observations, batch.actions)
        expected = ((target - q1.squeeze(1)).abs() + (target - q2.squeeze(1)).abs()) / 2
    np.testing.assert_allclose(result, expected.numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_td_abs_scores_batches_of_any_size(name: str) -> None:
    """LaBER scores m * B samples, a batch larger than the one trained on."""
    model = fresh(name)
    result = td_abs(model, seeded_sample(model, 4 * BATCH_SIZE))
    assert result.shape == (4 * BATCH_SIZE,) and np.all(np.isfinite(result)) and np.all(result >= 0)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_td_abs_leaves_the_networks_unchanged(name: str) -> None:
    model = fresh(name)
    before, was_training = trainable_state(model), model.policy.training
    td_abs(model, seeded_sample(model))
    assert (differing(before, trainable_state(model)), model.policy.training) == ([], was_training)


# --- report() --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALGORITHMS)
def test_report_gets_one_finite_non_negative_td_per_sample_after_each_step(name: str) -> None:
    model = fresh(name)
    source = WeightedUniform(model, th.ones)
    train_from_source(model, GRADIENT_STEPS, BATCH_SIZE, source)
    assert [(td.shape, bool(np.all(np.isfinite(td))), bool(np.all(td >= 0))) for td in source.reports] == [
        ((BATCH_SIZE,), True, True)
    ] * GRADIENT_STEPS


@pytest.mark.parametrize("name", ["DQN", "QRDQN"])
def test_report_gets_the_td_abs_of_the_networks_before_the_step(name: str) -> None:
    """DQN and QRDQN targets draw no random numbers, so td_abs before the step reproduces the report."""
    model = fresh(name)
    batch = seeded_sample(model)
    expected = td_abs(model, batch)
    source = FixedBatch(batch, None)
    train_from_source(model, 1, BATCH_SIZE, source)
    np.testing.assert_allclose(source.reports[0], expected, atol=1e-6)


# --- unsupported learners --------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [train_from_source, td_abs], ids=["train_from_source", "td_abs"])
def test_ppo_is_rejected_with_the_supported_classes_and_the_fix(call: Callable[..., object]) -> None:
    ppo: BaseAlgorithm = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, device="cpu")
    args = (1, BATCH_SIZE, None) if call is train_from_source else (None,)
    with pytest.raises(TypeError, match=r"does not support PPO.*DQN, QRDQN.*SAC, TQC.*TD3 and DDPG.*Fix:"):
        call(ppo, *args)
