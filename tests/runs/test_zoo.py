"""rl-baselines3-zoo's own train and enjoy scripts with her_wrap's drop-in HerReplayBuffer.

The hyperparameter file ``tests/data/zoo_her.yml`` names the buffer in ``replay_buffer_class``; runs are a
few hundred steps, one torch thread, no evaluation, nothing downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rl_zoo3")

HYPERPARAMETERS = Path(__file__).parents[1] / "data" / "zoo_her.yml"

RUNS = {
    # env id: (algo, modules that register the env id, extra zoo arguments)
    "FetchReach-v4": ("sac", ["gymnasium_robotics"], []),
    "BitFlipping-v0": ("dqn", ["her_wrap.envs"], ["--env-kwargs", "n_bits:4"]),
}


def zoo(script: str, env_id: str, log_folder: Path, *arguments: str) -> str:
    """Run ``python -m rl_zoo3.<script>`` on ``env_id`` and return its output (failing on a non-zero exit)."""
    algo, packages, extra = RUNS[env_id]
    command = [sys.executable, "-m", f"rl_zoo3.{script}", "--algo", algo, "--env", env_id]
    command += [
        "--gym-packages",
        *packages,
        *extra,
        "-f" if script == "enjoy" else "--log-folder",
        str(log_folder),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [*command, *arguments], capture_output=True, text=True, env=environment, timeout=240, check=False
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return completed.stdout


def train(env_id: str, log_folder: Path, *arguments: str) -> str:
    return zoo(
        "train",
        env_id,
        log_folder,
        "-conf",
        str(HYPERPARAMETERS),
        "--seed",
        "0",
        "--eval-freq",
        "-1",
        *arguments,
    )


@pytest.mark.parametrize("env_id", list(RUNS))
def test_zoo_trains_with_the_drop_in_buffer_and_enjoy_loads_the_agent(env_id, tmp_path):
    if env_id.startswith("Fetch"):
        pytest.importorskip("gymnasium_robotics")
    train(env_id, tmp_path, "-n", "300")
    algo = RUNS[env_id][0]
    run = tmp_path / algo / f"{env_id}_1"
    config = (run / env_id / "config.yml").read_text()
    output = zoo("enjoy", env_id, tmp_path, "--exp-id", "1", "-n", "60", "--no-render")
    assert 'import_module("her_wrap.sb3").HerReplayBuffer' in config and "Mean reward" in output


def test_zoo_saves_the_drop_in_buffer_class_and_continues_from_the_agent_and_its_replay_buffer(tmp_path):
    from stable_baselines3.common.save_util import load_from_zip_file

    from her_wrap.sb3 import HerReplayBuffer

    train("BitFlipping-v0", tmp_path, "-n", "200", "--save-replay-buffer")
    first = tmp_path / "dqn" / "BitFlipping-v0_1"
    data, _, _ = load_from_zip_file(first / "BitFlipping-v0.zip")
    assert data["replay_buffer_class"] is HerReplayBuffer and (first / "replay_buffer.pkl").exists()
    train("BitFlipping-v0", tmp_path, "-n", "200", "-i", str(first / "BitFlipping-v0.zip"))
    assert (tmp_path / "dqn" / "BitFlipping-v0_2" / "BitFlipping-v0.zip").exists()
