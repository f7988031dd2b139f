"""``her-wrap plot`` on synthetic run folders: reading evaluations and monitors, averaging seeds, the PNG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from her_wrap.runs.errors import UsageError
from her_wrap.runs.plot import Curve, aggregate, read_evaluations, read_monitors
from her_wrap.runs.run_layout import RunLayout, new_run
from her_wrap.runs.yaml_io import write_yaml_file

ENV_ID = "BitFlipping-v0"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic_run(
    log_folder: Path,
    successes: list[list[bool]],
    eval_every: int = 100,
    seconds_per_evaluation: float | None = 30.0,
) -> RunLayout:
    """A run folder with a config, an ``evaluations.npz`` (one row per evaluation; ``train_seconds`` unless
    ``seconds_per_evaluation`` is None) and one monitor."""
    layout = new_run(log_folder, ENV_ID)
    write_yaml_file(layout.config_path, {ENV_ID: {"model_class": "dqn", "n_timesteps": 100}})
    results = np.where(np.array(successes), -2.0, -10.0)
    evaluations = {
        "timesteps": np.arange(1, len(successes) + 1) * eval_every,
        "results": results,
        "ep_lengths": np.full(results.shape, 5),
        "successes": np.array(successes),
    }
    if seconds_per_evaluation is not None:
        evaluations["train_seconds"] = np.arange(1, len(successes) + 1) * seconds_per_evaluation
    np.savez(layout.evaluations_path, **evaluations)
    write_monitor(layout.run_dir / "0.monitor.csv", [(-10.0, 10, 1.0, False), (-3.0, 4, 2.0, True)])
    return layout


def write_monitor(path: Path, episodes: list[tuple[float, int, float, bool]]) -> None:
    lines = ["#" + json.dumps({"t_start": 0.0, "env_id": ENV_ID}), "r,l,t,is_success"]
    lines += [f"{reward},{length},{time},{success}" for reward, length, time, success in episodes]
    path.write_text("\n".join(lines) + "\n")


def test_read_evaluations_success_rate_per_evaluation(tmp_path: Path) -> None:
    layout = synthetic_run(tmp_path, [[False, False], [True, False], [True, True]])
    curve = read_evaluations(layout.run_dir)
    assert curve is not None
    assert (curve.x.tolist(), curve.success_rate.tolist(), curve.returns.tolist()) == (
        [100, 200, 300],
        [0.0, 0.5, 1.0],
        [-10.0, -6.0, -2.0],
    )


def test_read_evaluations_against_training_minutes(tmp_path: Path) -> None:
    layout = synthetic_run(tmp_path, [[False], [True]], seconds_per_evaluation=90.0)
    curve = read_evaluations(layout.run_dir, "minutes")
    assert curve is not None
    assert (curve.x.tolist(), curve.success_rate.tolist()) == ([1.5, 3.0], [0.0, 1.0])


def test_minutes_of_evaluations_without_training_time_is_a_usage_error(tmp_path: Path) -> None:
    layout = synthetic_run(tmp_path, [[True]], seconds_per_evaluation=None)
    with pytest.raises(UsageError, match=r"records no training time.*--x-axis steps"):
        read_evaluations(layout.run_dir, "minutes")


def test_read_monitors_against_minutes(tmp_path: Path) -> None:
    write_monitor(tmp_path / "0.monitor.csv", [(-10.0, 10, 60.0, False), (-1.0, 2, 180.0, True)])
    curve = read_monitors(tmp_path, window=1, x_axis="minutes")
    assert curve is not None
    assert (curve.x.tolist(), curve.success_rate.tolist()) == ([1.0, 3.0], [0.0, 1.0])


def test_read_evaluations_without_a_file(tmp_path: Path) -> None:
    assert read_evaluations(tmp_path) is None


def test_read_monitors_merges_envs_in_time_order(tmp_path: Path) -> None:
    write_monitor(tmp_path / "0.monitor.csv", [(-10.0, 10, 1.0, False), (-1.0, 2, 3.0, True)])
    write_monitor(tmp_path / "1.monitor.csv", [(-4.0, 5, 2.0, True)])
    curve = read_monitors(tmp_path, window=1)
    assert curve is not None
    assert (curve.x.tolist(), curve.success_rate.tolist()) == ([10, 15, 17], [0.0, 1.0, 1.0])


def test_read_monitors_of_a_resumed_run_start_at_its_initial_step(tmp_path: Path) -> None:
    layout = synthetic_run(tmp_path, [[True]])
    write_yaml_file(layout.args_path, {"env": ENV_ID, "initial_timesteps": 600})
    curve = read_monitors(layout.run_dir, window=2)
    assert curve is not None
    assert (curve.x.tolist(), curve.success_rate.tolist()) == ([610, 614], [0.0, 0.5])


def test_aggregate_two_seeds_on_the_same_steps() -> None:
    steps = np.array([100.0, 200.0])
    band = aggregate(
        [
            Curve(steps, np.array([0.0, 0.5]), np.array([-10.0, -6.0])),
            Curve(steps, np.array([1.0, 0.5]), np.array([-2.0, -6.0])),
        ]
    )
    assert (band.success_mean.tolist(), band.success_std.tolist(), band.return_mean.tolist()) == (
        [0.5, 0.5],
        [0.5, 0.0],
        [-6.0, -6.0],
    )


def test_aggregate_runs_of_different_lengths() -> None:
    long = Curve(np.array([0.0, 100.0, 200.0]), np.array([0.0, 0.5, 1.0]), np.zeros(3))
    short = Curve(np.array([0.0, 100.0]), np.array([0.0, 0.0]), np.zeros(2))
    band = aggregate([long, short])
    assert (band.x.tolist(), band.success_mean.tolist()) == ([0.0, 100.0, 200.0], [0.0, 0.25, 1.0])


def test_aggregate_interpolates_between_steps() -> None:
    band = aggregate(
        [
            Curve(np.array([0.0, 100.0]), np.array([0.0, 1.0]), np.zeros(2)),
            Curve(np.array([50.0]), np.array([0.5]), np.zeros(1)),
        ]
    )
    assert band.success_mean.tolist() == [0.0, 0.5, 1.0]


@pytest.mark.parametrize("x_axis", ["steps", "minutes"])
@pytest.mark.parametrize("source", ["eval", "train"])
def test_plot_command_writes_a_png(source: str, x_axis: str, tmp_path: Path) -> None:
    for successes in ([[False], [True]], [[True], [True]]):
        synthetic_run(tmp_path / "logs", successes)
    output = tmp_path / "curves.png"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "her_wrap.runs.cli",
            "plot",
            "--env",
            ENV_ID,
            "-f",
            str(tmp_path / "logs"),
            "--source",
            source,
            "--x-axis",
            x_axis,
            "-o",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (completed.returncode, output.read_bytes()[:8], "2 run(s)" in completed.stdout) == (
        0,
        PNG_MAGIC,
        True,
    ), completed.stderr


def test_plot_explicit_run_folders_and_default_output(tmp_path: Path) -> None:
    layout = synthetic_run(tmp_path / "logs", [[True]])
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "her_wrap.runs.cli",
            "plot",
            str(layout.run_dir),
            "-f",
            str(tmp_path / "logs"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (completed.returncode, (tmp_path / "logs" / "her" / f"{ENV_ID}_eval.png").is_file()) == (
        0,
        True,
    ), completed.stderr
