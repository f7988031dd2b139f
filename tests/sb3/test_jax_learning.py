"""Learning with SBX's JAX learners at the step budgets of their PyTorch counterparts (all ``slow``).

Each run trains once with a fixed seed and scores the greedy policy on 100 fresh episodes from a seed
training never used, as ``tests/sb3/test_learning.py`` (15-bit flipping, 12,000 env steps, HER(DQN)) and
``tests/sb3/test_robotics.py`` (FetchReach-v4, 5,000 env steps, HER(SAC) and HER(DDPG)) do for the PyTorch
learners, with the same shipped recipes. A run prints what it reached (``pytest -s``); the results are in
docs/jax.md. XLA is kept to the CPU and one thread, set before JAX is imported.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import importlib.util
import time
from typing import Any

import pytest

from her_wrap import HER, BitFlippingEnv
from her_wrap.envs.registry import make_goal_env
from her_wrap.runs.presets import BIT_FLIPPING_DQN, FETCH_REACH_DDPG, FETCH_REACH_SAC
from her_wrap.sb3.evaluation import success_rate

sbx = pytest.importorskip("sbx", reason="SBX learners need the jax extra: pip install 'her_wrap[jax]'")

pytestmark = pytest.mark.slow

EVAL_EPISODES = 100
needs_robotics = [
    pytest.mark.robotics,
    pytest.mark.skipif(
        importlib.util.find_spec("gymnasium_robotics") is None,
        reason="needs the robotics extra (pip install 'her_wrap[robotics]'): gymnasium_robotics is not installed",
    ),
]

#: CrossQ has no target networks, so FetchReach's recipe without ``tau``.
FETCH_REACH_CROSSQ = {key: value for key, value in FETCH_REACH_SAC.items() if key != "tau"}
#: DroQ: SBX's SAC with dropout and layer normalization in its critics, at SAC's budget and recipe (one
#: update per env step, not DroQ's paper's 20).
FETCH_REACH_DROQ = {
    **FETCH_REACH_SAC,
    "policy_kwargs": {**FETCH_REACH_SAC["policy_kwargs"], "dropout_rate": 0.01, "layer_norm": True},
}

FETCH_REACH = [
    pytest.param("SAC", FETCH_REACH_SAC, id="SAC", marks=needs_robotics),
    pytest.param("TQC", FETCH_REACH_SAC, id="TQC", marks=needs_robotics),
    pytest.param("TD3", FETCH_REACH_DDPG, id="TD3", marks=needs_robotics),
    pytest.param("DDPG", FETCH_REACH_DDPG, id="DDPG", marks=needs_robotics),
    pytest.param("CrossQ", FETCH_REACH_CROSSQ, id="CrossQ", marks=needs_robotics),
    pytest.param("SAC", FETCH_REACH_DROQ, id="DroQ", marks=needs_robotics),
]


def report(learner: str, env_id: str, steps: int, rate: float, started: float) -> None:
    print(f"\nsbx.{learner} {env_id} seed 0: {steps} env steps, greedy success {rate:.2f} on "
          f"{EVAL_EPISODES} fresh episodes, {(time.perf_counter() - started) / 60:.1f} min")  # fmt: skip


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("learner", "settings"), FETCH_REACH)
def test_sbx_learner_reaches_95_percent_on_fetch_reach_within_5000_steps(
    learner: str, settings: dict[str, Any]
) -> None:
    """The budget and recipe of HER(SAC) / HER(DDPG) in tests/sb3/test_robotics.py (TQC, CrossQ and DroQ take
    SAC's, TD3 DDPG's Gaussian exploration noise); sbx.DDPG has no MultiInputPolicy, so HER flattens the dict."""
    started = time.perf_counter()
    model_class = getattr(sbx, learner)
    policy = "MultiInputPolicy" if "MultiInputPolicy" in model_class.policy_aliases else "MlpPolicy"
    model = HER(policy, "FetchReach-v4", model_class, seed=0, **settings)
    model.learn(5_000)
    rate = success_rate(model, make_goal_env("FetchReach-v4"), EVAL_EPISODES, seed=1_000_000)
    report(learner, "FetchReach-v4", 5_000, rate, started)
    assert rate >= 0.95


@pytest.mark.timeout(1800)
def test_sbx_dqn_reaches_95_percent_on_15_bit_flipping_within_12000_steps() -> None:
    """The budget and recipe (BIT_FLIPPING_DQN) of HER(DQN) in tests/sb3/test_learning.py."""
    started = time.perf_counter()
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=15), sbx.DQN, n_sampled_goal=4, seed=0, **BIT_FLIPPING_DQN)
    model.learn(12_000)
    rate = success_rate(model, BitFlippingEnv(n_bits=15), EVAL_EPISODES, seed=12_345)
    report("DQN", "15-bit flipping", 12_000, rate, started)
    assert rate >= 0.95
