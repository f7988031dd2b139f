"""``her-wrap train -i``: a resumed run goes on with new env, exploration and sampling streams."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from her_wrap.runs.train import resumed_seed

ENTRY = """BitFlipping-v0:
  model_class: dqn
  policy: MlpPolicy
  n_timesteps: 64
  n_envs: 2
  env_kwargs: {n_bits: 12}
  buffer_size: 1000
  batch_size: 16
  learning_starts: 16
  train_freq: 1
  gradient_steps: 1
  policy_kwargs: {net_arch: [16]}
"""


def test_resumed_seed_depends_on_the_seed_and_the_resume_point() -> None:
    seeds = {resumed_seed(seed, steps) for seed in (0, 1, 2) for steps in (1_000, 2_000, 3_000)}
    assert len(seeds) == 9
    assert resumed_seed(1, 2_000) == resumed_seed(1, 2_000)
    assert all(0 <= seed < 2**31 for seed in seeds)
    # a negative seed (as torch and NumPy would refuse it) still gives a valid one
    assert 0 <= resumed_seed(-1, 1_000) < 2**31
    with pytest.raises(ValueError, match="timesteps must be >= 0, got -5"):
        resumed_seed(1, -5)


def _first_observations(config, seed: int, saved=None) -> tuple[np.ndarray, np.ndarray]:
    """The first training and evaluation observations of envs made for ``seed``, after loading ``saved``
    onto them as ``her-wrap train -i`` does."""
    from her_wrap.runs import train
    from her_wrap.runs.env_factory import make_training_envs

    envs = make_training_envs(config, seed)
    try:
        if saved is not None:
            args = argparse.Namespace(device="cpu", verbose=0, tensorboard=None)
            train._load_agent(saved, envs, args, seed)
        return envs.train.reset()["observation"], envs.evaluate.reset()["observation"]
    finally:
        envs.close()


def test_a_resumed_run_does_not_replay_its_first_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before, a resume reseeded everything with the run's own seed: its envs started again from the
    initial states of the run's first episodes, and its evaluations from the first evaluation's."""
    from her_wrap.runs.checkpoints import SavedAgent
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.env_factory import make_training_envs
    from her_wrap.runs.model_factory import build_agent

    path = tmp_path / "her.yml"
    path.write_text(ENTRY)
    config = load_run_config(path, "BitFlipping-v0")
    seed = 3
    envs = make_training_envs(config, seed)
    try:
        agent = build_agent(config, envs.train, seed=seed, verbose=0, device="cpu")
        agent.learn(64)
        agent.save(tmp_path / "agent.zip")
        steps = int(agent.model.num_timesteps)
    finally:
        envs.close()
    saved = SavedAgent(model=tmp_path / "agent.zip")

    start_train, start_eval = _first_observations(config, seed)
    resumed_train, resumed_eval = _first_observations(config, seed, saved)
    again_train, again_eval = _first_observations(config, seed, saved)

    assert not np.array_equal(resumed_train, start_train)
    assert not np.array_equal(resumed_eval, start_eval)
    # The same checkpoint resumed again gives the same episodes: a resume is still repeatable.
    assert np.array_equal(resumed_train, again_train) and np.array_equal(resumed_eval, again_eval)
    # ... and they are those of envs seeded with resumed_seed, which the run prints.
    derived = resumed_seed(seed, steps)
    expected_train, _ = _first_observations(config, derived)
    assert np.array_equal(resumed_train, expected_train)
    assert f"go on with seed {derived}" in capsys.readouterr().out
