"""HER over SBX's JAX learners (the ``jax`` extra): built, trained, saved and loaded as the PyTorch ones.

Most runs are a few dozen env steps with one 16-unit layer: they test the wiring (HER's buffer reaches
the learner, every gradient step gets its share of relabeled goals, options SBX cannot honour are refused
at construction). One short run learns 6-bit flipping; the budget runs (15-bit flipping, FetchReach-v4)
are in tests/sb3/test_jax_learning.py. XLA is kept to the CPU and one thread, set before JAX is imported.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3 import DQN as TorchDQN

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs.model_classes import learner_parameters
from her_wrap.runs.presets import BIT_FLIPPING_DQN
from her_wrap.runs.search_spaces import SEARCH_SPACES
from her_wrap.sb3 import HerReplayBuffer
from her_wrap.sb3.evaluation import success_rate
from her_wrap.sb3.jax_learners import (
    is_jax_learner,
)
from her_wrap.sb3.learners import LEARNERS, resolve_model_class

sbx = pytest.importorskip("sbx", reason="SBX learners need the jax extra: pip install 'her_wrap[jax]'")

TINY = {"learning_starts": 20, "batch_size": 16, "buffer_size": 1_000, "policy_kwargs": {"net_arch": [16]}}


class StepCountEnv(gym.Env):
    """Episodes of 5 steps whose observation and achieved goal are the step count ``t``.

    The desired goal (15) is never reached, so a sampled row whose desired goal is below 15 was relabeled,
    and a row's next observation is its observation plus one.
    """

    def __init__(self) -> None:
        box = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.t = 0

    def _observation(self) -> dict[str, np.ndarray]:
        count = np.array([self.t], dtype=np.float32)
        return {
            "observation": count,
            "achieved_goal": count.copy(),
            "desired_goal": np.array([15.0], np.float32),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._observation(), -1.0, False, self.t >= 5, {}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return -(np.abs(achieved_goal - desired_goal).sum(axis=-1) > 0.5).astype(np.float32)


def tiny(**changes: Any) -> dict[str, Any]:
    return {**TINY, "policy_kwargs": dict(TINY["policy_kwargs"]), "seed": 0, **changes}


# --------------------------------------------------------------------------- the learner table


def test_sbx_learners_are_named_in_the_learner_table() -> None:
    assert [resolve_model_class(name) for name in ("sbx.crossq", "SBX.SAC", "sbx.dqn")] == [
        sbx.CrossQ,
        sbx.SAC,
        sbx.DQN,
    ]


def test_sbx_learners_are_told_from_torch_ones() -> None:
    assert (is_jax_learner(sbx.TQC), is_jax_learner(TorchDQN)) == (True, False)


def test_importing_her_imports_no_jax() -> None:
    """JAX stays out of a process until an SBX learner is asked for."""
    probe = "import sys, her_wrap.sb3.her, her_wrap.sb3.jax_learners; print('jax' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


# --------------------------------------------------------------------------- learn, predict, save, load


@pytest.mark.parametrize(
    ("learner", "policy"),
    [
        ("SAC", "MultiInputPolicy"),
        ("TQC", "MultiInputPolicy"),
        ("TD3", "MlpPolicy"),
        ("DDPG", "MlpPolicy"),
        ("CrossQ", "MlpPolicy"),
    ],
)
def test_continuous_sbx_learner_trains_on_hindsight_batches(learner: str, policy: str) -> None:
    env = BitFlippingEnv(n_bits=4, continuous=True)
    model = HER(policy, env, getattr(sbx, learner), gradient_steps=2, **tiny())
    model.learn(40)
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert isinstance(model.replay_buffer, HerReplayBuffer) and model.replay_buffer.shuffle_rows
    assert model.model._n_updates == 2 * (40 - 20)
    assert action.shape == (4,)


def test_sbx_dqn_trains_with_a_flat_policy() -> None:
    env = BitFlippingEnv(n_bits=4)
    model = HER("MlpPolicy", env, sbx.DQN, train_freq=1, **tiny())
    model.learn(40)
    action, _ = model.predict(env.reset(seed=1)[0], deterministic=True)
    assert (model.model._n_updates, action.shape) == (20, ())


def test_sbx_model_saved_and_loaded_acts_the_same(tmp_path: Path) -> None:
    env = BitFlippingEnv(n_bits=4, continuous=True)
    model = HER("MlpPolicy", env, sbx.SAC, **tiny()).learn(30)
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=env)
    obs, _ = env.reset(seed=2)
    assert type(loaded.model).__bases__[-1] is sbx.SAC
    np.testing.assert_allclose(
        loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0]
    )
    loaded.learn(10, reset_num_timesteps=False)
    assert loaded.replay_buffer.size() == 10


# --------------------------------------------------------------------------- learning


def test_her_sbx_dqn_learns_6_bit_flipping() -> None:
    """A short real run: sbx.DQN with the HER paper's settings solves 6-bit flipping in 2,000 env steps."""
    settings = {**BIT_FLIPPING_DQN, "learning_starts": 200, "target_update_interval": 100}
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=6), sbx.DQN, n_sampled_goal=4, seed=0, **settings)
    model.learn(2_000)
    assert success_rate(model, BitFlippingEnv(n_bits=6), 100, seed=12_345) >= 0.9


# --------------------------------------------------------------------------- one-call sampling


def test_every_gradient_step_of_a_one_call_sample_gets_its_share_of_hindsight_goals() -> None:
    """SBX cuts one sample of ``batch_size * gradient_steps`` rows into consecutive batches: each batch
    holds about k / (k + 1) relabeled rows, and rows keep their fields together."""
    model = HER("MultiInputPolicy", StepCountEnv(), sbx.SAC, n_sampled_goal=4, **tiny(learning_starts=1_000))
    model.learn(200)
    samples = model.replay_buffer.sample(64 * 10)
    relabeled = (samples.observations["desired_goal"].numpy() < 15).reshape(10, 64).mean(axis=1)
    steps = samples.observations["observation"].numpy()
    assert relabeled.min() > 0.55, relabeled
    assert relabeled.max() < 1.0, relabeled
    np.testing.assert_array_equal(samples.next_observations["observation"].numpy(), steps + 1)


def test_drop_in_buffer_is_the_replay_buffer_class_of_an_sbx_learner() -> None:
    model = sbx.SAC(
        "MultiInputPolicy",
        BitFlippingEnv(n_bits=4, continuous=True),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future", "shuffle_rows": True},
        gradient_steps=2,
        **tiny(),
    )
    model.learn(40)
    assert (type(model.replay_buffer), model._n_updates) == (HerReplayBuffer, 40)


# --------------------------------------------------------------------------- refused at construction


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("laber", "mean"),
        ("prioritized", True),
        ("clip_target", True),
        ("action_l2", 1.0),
        ("target_update_per_cycle", True),
        ("random_action_prob", 0.3),
    ],
)
def test_options_of_the_weighted_torch_update_are_refused_for_sbx(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"{option}=.*sbx\.SAC.*sb3-contrib"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4, continuous=True), sbx.SAC, **{option: value}, **tiny())


def test_a_policy_the_sbx_learner_lacks_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValueError, match=r"sbx\.DQN has no MultiInputPolicy: use one of MlpPolicy"):
        HER("MultiInputPolicy", BitFlippingEnv(n_bits=4), sbx.DQN, **tiny())


def test_an_on_policy_sbx_learner_is_refused_listing_the_supported_ones() -> None:
    with pytest.raises(TypeError, match=r"sbx\.CrossQ\); PPO is not one"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4, continuous=True), sbx.PPO)


@pytest.mark.parametrize("droq", ["sbx.DroQ", "sbx.droq"])
def test_sbx_droq_is_refused_naming_sac_with_its_dropout_options(droq: str) -> None:
    """SBX's ``DroQ`` is a function that raises (SAC took its options), not a learner class."""
    model_class = sbx.DroQ if droq == "sbx.DroQ" else droq
    fix = r"use sbx\.SAC with policy_kwargs=dict\(dropout_rate=0\.01, layer_norm=True\)"
    with pytest.raises((TypeError, ValueError), match=fix):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4, continuous=True), model_class)


def test_sbx_sac_with_droq_options_trains_with_dropout_critics() -> None:
    """The configuration the DroQ error names is accepted and reaches SBX's critics."""
    kwargs = tiny(policy_kwargs={"net_arch": [16], "dropout_rate": 0.01, "layer_norm": True})
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=4, continuous=True), sbx.SAC, gradient_steps=2, **kwargs)
    model.learn(24)
    assert (model.policy.dropout_rate, model.policy.layer_norm, model.model._n_updates) == (0.01, True, 8)


def test_an_actor_average_on_an_sbx_learner_names_the_torch_learners() -> None:
    kwargs = tiny(policy_kwargs={"net_arch": [16], "actor_average": 0.01})
    with pytest.raises(
        ValueError, match=r"actor_average= applies to SB3's DDPG and TD3; \w*TD3 \(SBX\).*train torch's"
    ):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4, continuous=True), sbx.TD3, **kwargs)


class OwnBufferDQN(TorchDQN):
    """A learner that builds a buffer of its own whatever is set, as SBX's do."""

    def _setup_model(self) -> None:
        self.replay_buffer = None
        super()._setup_model()


def test_a_learner_that_replaces_hers_buffer_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r"OwnBufferDQN builds a replay buffer of its own.*sbx\.SAC"):
        HER("MlpPolicy", BitFlippingEnv(n_bits=4), OwnBufferDQN, **tiny())


# --------------------------------------------------------------------------- the her-wrap command


def her_wrap_command(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "her_wrap.runs.cli", *arguments]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def sbx_run_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``her-wrap train --algo sbx.crossq`` on 4-bit continuous flipping, 60 steps: the folder and the run."""
    folder = tmp_path_factory.mktemp("sbx_run")
    completed = her_wrap_command(
        "train", "--env", "BitFlippingContinuous-v0", "--algo", "sbx.crossq", "-n", "60", "--eval-freq", "0",
        "--verbose", "0", "--seed", "0", "-params", "policy_kwargs.net_arch:[16]", "batch_size:16",
        "learning_starts:32", "buffer_size:2000", "env_kwargs.n_bits:4", "--num-threads", "1",
        cwd=folder,
    )  # fmt: skip
    return folder, completed


def test_her_wrap_train_takes_an_sbx_learner(
    sbx_run_folder: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, completed = sbx_run_folder
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Training HER(sbx.crossq, MlpPolicy)" in completed.stdout
    zips = sorted(path.name for path in (folder / "logs" / "her").rglob("*.zip"))
    assert zips == ["BitFlippingContinuous-v0.zip"]


def test_her_wrap_enjoy_runs_the_agent_of_an_sbx_run(
    sbx_run_folder: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, trained = sbx_run_folder
    assert trained.returncode == 0, trained.stderr[-3000:]
    completed = her_wrap_command("enjoy", "--env", "BitFlippingContinuous-v0", "-n", "3", cwd=folder)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert re.search(r"success rate \d\.\d{3} \(\d/3 episodes\)", completed.stdout), completed.stdout


@pytest.mark.parametrize("name", [name for name in LEARNERS if name.startswith("sbx.")])
def test_optuna_search_space_of_an_sbx_learner_names_only_what_it_takes(name: str) -> None:
    space = SEARCH_SPACES[name]
    learner_keys = {path[0] for path in space if path[0] not in ("her", "noise_std")}
    assert learner_keys <= set(learner_parameters(name))
    assert ("her", "laber") not in space


def test_activation_and_optimizer_names_of_a_config_become_flax_and_optax_functions() -> None:
    import flax.linen
    import optax
    from stable_baselines3.common.vec_env import DummyVecEnv

    from her_wrap.runs.model_factory import build_agent, resolve_policy_kwargs
    from her_wrap.runs.run_config import RunConfig

    resolved = resolve_policy_kwargs({"activation_fn": "nn.Tanh", "optimizer_class": "adamw"}, jax=True)
    assert resolved == {"activation_fn": flax.linen.tanh, "optimizer_class": optax.adamw}
    config = RunConfig(
        "BitFlippingContinuous-v0",
        "sbx.sac",
        64,
        policy="MlpPolicy",
        learner_kwargs={"policy_kwargs": {"net_arch": [16], "activation_fn": "elu"}, "learning_starts": 8},
    )
    env = DummyVecEnv([lambda: BitFlippingEnv(n_bits=4, continuous=True, max_steps=4)])
    agent = build_agent(config, env, seed=0, verbose=0)
    activation = agent.model.policy.activation_fn  # a copy of the function (HER copies its arguments)
    inputs = np.array([-1.0, 0.5], dtype=np.float32)
    np.testing.assert_allclose(np.asarray(activation(inputs)), np.asarray(flax.linen.elu(inputs)))
    agent.learn(16)  # the flax function runs in the networks
