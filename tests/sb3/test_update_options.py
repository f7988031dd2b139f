"""HER's update options (target clipping, action L2, random actions, target updates per cycle)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch as th
from sb3_contrib import TQC
from stable_baselines3 import DDPG, DQN, SAC, TD3

import her_wrap.sb3.train_steps as train_steps
from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3.batch_sources import UniformSource
from her_wrap.sb3.critic_losses import td_abs
from her_wrap.sb3.train_steps import TrainFromSourceMixin, train_from_source
from her_wrap.sb3.update_options import UpdateOptions


def continuous_her(model_class: type = DDPG, **options) -> HER:
    env = BitFlippingEnv(n_bits=4, continuous=True)
    model = HER(
        "MlpPolicy",
        env,
        model_class,
        seed=0,
        learning_starts=40,
        batch_size=16,
        policy_kwargs={"net_arch": [16]},
        **options,
    )
    return model.learn(80)


def test_no_option_keeps_the_learners_own_train_where_it_is_not_a_stock_actor_critic():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN)
    assert type(model.model) is DQN

    class OwnTrainSAC(SAC):
        def train(self, gradient_steps: int, batch_size: int = 64) -> None:
            super().train(gradient_steps, batch_size)

    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3, continuous=True), OwnTrainSAC)
    assert type(model.model) is OwnTrainSAC


@pytest.mark.parametrize("model_class", [SAC, TD3, DDPG, TQC])
def test_stock_actor_critics_train_with_the_lean_actor_step_on_uniform_batches(model_class):
    """train_from_source takes stock train()'s steps with less work (tests/sb3/test_weighted.py)."""
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3, continuous=True), model_class)
    assert isinstance(model.model, model_class) and isinstance(model.model, TrainFromSourceMixin)
    assert type(model.model.batch_source) is UniformSource


def test_an_option_switches_to_train_from_source_with_uniform_batches():
    model = continuous_her(action_l2=1.0)
    assert isinstance(model.model.batch_source, UniformSource)


def test_clip_target_true_is_the_return_range_of_sparse_rewards():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3, continuous=True), TD3, clip_target=True, gamma=0.9)
    assert model.update_options.clip_target == pytest.approx((-10.0, 0.0))


def test_clip_target_true_reads_the_learners_default_gamma():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=3, continuous=True), TD3, clip_target=True)
    gamma = inspect.signature(TD3).parameters["gamma"].default
    assert model.update_options.clip_target == pytest.approx((-1.0 / (1.0 - gamma), 0.0))


@pytest.mark.parametrize("model_class", [DDPG, SAC])
def test_clipped_targets_stay_in_range(model_class):
    """Rewards of +100 on terminal steps: unclipped the target is 100, clipped it is 0."""
    clipped = continuous_her(model_class, clip_target=(-5.0, 0.0))
    plain = continuous_her(model_class)
    tds = []
    for model in (clipped, plain):
        samples = model.replay_buffer.sample(64)
        samples = samples._replace(
            rewards=th.full_like(samples.rewards, 100.0), dones=th.ones_like(samples.dones)
        )
        tds.append(td_abs(model.model, samples).mean())
    assert tds[0] < 10 < 90 < tds[1]


def test_action_l2_pulls_actions_towards_zero():
    means = []
    for weight in (0.0, 20.0):
        model = (
            continuous_her(DDPG, action_l2=weight)
            if weight
            else continuous_her(DDPG, clip_target=(-100.0, 100.0))
        )
        train_from_source(model.model, 200, 32, UniformSource(model.replay_buffer))
        observations = model.replay_buffer.sample(256).observations
        with th.no_grad():
            means.append(float(model.model.actor(observations).pow(2).mean()))
    assert means[1] < 0.1 * means[0]


def test_random_action_prob_one_replaces_every_action_within_bounds():
    model = continuous_her(DDPG, random_action_prob=1.0)
    actions = np.stack([model.model._sample_action(0, None, 1)[0][0] for _ in range(200)])
    assert (np.abs(actions) <= 1).all() and actions.std(axis=0).min() > 0.4


def test_without_random_actions_the_greedy_action_repeats():
    model = continuous_her(DDPG)
    actions = np.stack([model.model._sample_action(0, None, 1)[0][0] for _ in range(20)])
    assert np.ptp(actions, axis=0).max() == 0


@pytest.mark.parametrize("model_class", [DDPG, SAC])
def test_exploration_predicts_on_one_torch_thread_and_gives_the_threads_back(model_class, monkeypatch):
    """DDPG predicts by the lean forward (her_wrap.sb3.exploration), SAC by its policy's predict."""
    import her_wrap.sb3.exploration as exploration

    model = continuous_her(model_class, random_action_prob=0.3)
    seen: list[int] = []
    owner, name = (
        (exploration, "exploration_actions") if model_class is DDPG else (model.model.policy, "predict")
    )
    predict = getattr(owner, name)

    def recording_predict(*args, **kwargs):
        seen.append(th.get_num_threads())
        return predict(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording_predict)
    threads = th.get_num_threads()
    th.set_num_threads(2)
    try:
        model.model._sample_action(0, None, 1)
        assert seen == [1]
        assert th.get_num_threads() == 2

        def failing_predict(*args, **kwargs):
            raise RuntimeError("no prediction")

        monkeypatch.setattr(owner, name, failing_predict)
        with pytest.raises(RuntimeError, match="no prediction"):
            model.model._sample_action(0, None, 1)
        assert th.get_num_threads() == 2
        assert model.model._exploring is False
    finally:
        th.set_num_threads(threads)


def test_one_torch_thread_leaves_a_single_thread_alone():
    from her_wrap.sb3.exploration import one_torch_thread

    threads = th.get_num_threads()
    th.set_num_threads(1)
    try:
        with one_torch_thread():
            assert th.get_num_threads() == 1
        assert th.get_num_threads() == 1
    finally:
        th.set_num_threads(threads)


def test_random_actions_are_refused_for_discrete_learners():
    with pytest.raises(ValueError, match="random_action_prob applies to continuous actions"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=3), DQN, random_action_prob=0.3)


@pytest.mark.parametrize(("per_cycle", "expected"), [(False, 5), (True, 1)])
def test_targets_move_once_per_cycle_when_asked(monkeypatch, per_cycle, expected):
    model = continuous_her(SAC, target_update_per_cycle=per_cycle, action_l2=0.01)
    moves = []
    original = train_steps.polyak_update
    monkeypatch.setattr(
        train_steps,
        "polyak_update",
        lambda params, targets, tau: moves.append(tau) or original(params, targets, tau),
    )
    train_from_source(model.model, 5, 16, UniformSource(model.replay_buffer))
    # Two polyak calls per target update: the critic's parameters and the batch-norm statistics.
    assert len(moves) == 2 * expected


def test_options_survive_save_and_load(tmp_path):
    model = continuous_her(
        TD3, clip_target=True, action_l2=0.5, random_action_prob=0.2, target_update_per_cycle=True
    )
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=BitFlippingEnv(n_bits=4, continuous=True))
    assert (loaded.update_options, loaded.model.update_options) == (
        model.update_options,
        model.update_options,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clip_target": (0.0, -1.0)}, "low < high"),
        ({"clip_target": "wide"}, "pair"),
        ({"action_l2": -1}, "action_l2 must be a number >= 0"),
        ({"random_action_prob": 1.5}, r"random_action_prob must lie in \[0, 1\]"),
    ],
)
def test_bad_option_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        UpdateOptions(**options)


def test_config_her_section_sets_the_update_options(tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.model_factory import build_agent

    path = tmp_path / "her.yml"
    path.write_text(
        "BitFlippingContinuous-v0:\n"
        "  model_class: td3\n  n_timesteps: 100\n  gamma: 0.8\n"
        "  her: {clip_target: true, action_l2: 1.0, random_action_prob: 0.3, target_update_per_cycle: true}\n"
    )
    config = load_run_config(path, "BitFlippingContinuous-v0")
    agent = build_agent(config, DummyVecEnv([lambda: BitFlippingEnv(n_bits=3, continuous=True)]), seed=0)
    assert agent.update_options == UpdateOptions(
        clip_target=UpdateOptions.sparse_reward_bounds(0.8),
        action_l2=1.0,
        random_action_prob=0.3,
        target_update_per_cycle=True,
    )


def test_config_with_a_bad_update_option_is_a_usage_error(tmp_path):
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.errors import UsageError

    path = tmp_path / "her.yml"
    path.write_text(
        "BitFlippingContinuous-v0:\n  model_class: td3\n  n_timesteps: 100\n  her: {action_l2: -2}\n"
    )
    with pytest.raises(UsageError, match="action_l2 must be a number >= 0"):
        load_run_config(path, "BitFlippingContinuous-v0")
