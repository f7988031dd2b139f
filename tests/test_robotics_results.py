"""``scripts/robotics_results.py`` records only runs of the recipe its table names.

A manipulation row must be the shipped ``configs/her.yml`` entry (or a named variant of it) run with the
row's command; these tests build run folders as ``her-wrap train`` writes them and check which are taken.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType
from typing import Any

import pytest

from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.yaml_io import write_yaml_file

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "robotics_results.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("robotics_results", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["robotics_results"] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def fake_run(
    tmp_path: pathlib.Path, entry: dict[str, Any], *, eval_freq: int = 20_000, env_id: str = "FetchPush-v4"
) -> pathlib.Path:
    """A run folder holding what ``her-wrap train`` records: the resolved entry and the arguments."""
    run_dir = tmp_path / "logs" / "her" / f"{env_id}_1"
    (run_dir / env_id).mkdir(parents=True)
    write_yaml_file(run_dir / env_id / "config.yml", {env_id: entry})
    write_yaml_file(
        run_dir / env_id / "args.yml", {"env": env_id, "seed": 3, "eval_freq": eval_freq, "eval_episodes": 50}
    )
    return run_dir


def shipped_entry(steps: int, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    return load_run_config(
        default_config_path(), "FetchPush-v4", n_timesteps=steps, overrides=overrides
    ).to_entry()


def test_a_run_of_the_shipped_entry_is_taken(script: ModuleType, tmp_path: pathlib.Path) -> None:
    task = script.ENTRY_TASKS["fetch-push-ddpg"]
    _, args = script.check_shipped_entry(task, fake_run(tmp_path, shipped_entry(task.steps)))
    assert args["seed"] == 3


def test_a_changed_entry_is_refused_naming_the_difference(script: ModuleType, tmp_path: pathlib.Path) -> None:
    task = script.ENTRY_TASKS["fetch-push-ddpg"]
    entry = {**shipped_entry(task.steps), "batch_size": 256}
    with pytest.raises(SystemExit, match="differs in batch_size"):
        script.check_shipped_entry(task, fake_run(tmp_path, entry))


def test_another_budget_or_schedule_is_refused(script: ModuleType, tmp_path: pathlib.Path) -> None:
    task = script.ENTRY_TASKS["fetch-push-ddpg"]
    with pytest.raises(SystemExit, match="n_timesteps is 1000"):
        script.check_shipped_entry(task, fake_run(tmp_path / "a", shipped_entry(1000)))
    with pytest.raises(SystemExit, match="eval_freq is 5000"):
        script.check_shipped_entry(task, fake_run(tmp_path / "b", shipped_entry(task.steps), eval_freq=5000))


def test_a_variant_run_is_taken_only_as_that_variant(script: ModuleType, tmp_path: pathlib.Path) -> None:
    task = script.ENTRY_TASKS["fetch-push-ddpg"]
    assert script.VARIANTS  # the loop below is not empty
    for variant, overrides in script.VARIANTS.items():
        run_dir = fake_run(tmp_path / variant, shipped_entry(task.steps, overrides))
        script.check_shipped_entry(task, run_dir, overrides)
        with pytest.raises(SystemExit, match="pass the --variant it ran"):
            script.check_shipped_entry(task, run_dir)


def test_minutes_to_a_success_level_come_from_the_first_point_reaching_it(script: ModuleType) -> None:
    record = {
        "curve_steps": [0, 20_000, 40_000],
        "curve_success": [0.0, 0.6, 0.95],
        "curve_seconds": [0, 60, 150],
    }
    assert script.first_reaching(record, 0.5) == (20_000, 1.0)
    assert script.first_reaching(record, 0.9) == (40_000, 2.5)
    assert script.first_reaching(record, 0.99) is None


def test_median_minutes_counts_a_seed_that_never_gets_there(script: ModuleType) -> None:
    def curve(minutes_to_09: float | None) -> dict[str, Any]:
        success = [0.0, 0.95] if minutes_to_09 is not None else [0.0, 0.5]
        return {
            "curve_steps": [0, 1],
            "curve_success": success,
            "curve_seconds": [0, 60 * (minutes_to_09 or 9)],
        }

    assert script._median_minutes([curve(20), curve(30), curve(None)], 0.9) == "30"
    assert script._median_minutes([curve(20), curve(None), curve(None)], 0.9) == "never"


def test_a_manipulation_row_gives_steps_and_minutes_to_each_milestone(script: ModuleType) -> None:
    record = {
        "kind": "entry",
        "env_id": "FetchPickAndPlace-v4",
        "learner": "DDPG",
        "seed": 0,
        "steps": 60_000,
        "final_success": 0.77,
        "train_seconds": 180.0,
        "curve_steps": [0, 20_000, 40_000, 60_000],
        "curve_success": [0.0, 0.6, 0.82, 0.84],
        "curve_seconds": [0, 60, 120, 180],
        "command": "python scripts/robotics_results.py run fetch-pick-and-place-ddpg --seeds 0",
    }
    cells = [cell.strip() for cell in script.manipulation_row([record]).split("|")[1:-1]]
    assert script.MILESTONES == (0.5, 0.8, 0.9)
    assert cells[3] == "20k / 40k / -"
    assert cells[4] == "1 / 2 / -"
    assert cells[5] == "2 / never"
    assert cells[6] == "0.77"
    assert cells[8] == "3.0"


def test_every_reference_reads_an_unnormalized_her_entry_of_the_zoo_for_a_shipped_task(
    script: ModuleType,
) -> None:
    for name, task in script.REFERENCE_TASKS.items():
        entry = script.zoo_entry(task)
        assert entry["replay_buffer_class"] == "HerReplayBuffer", name
        assert not entry.get("normalize", False), name
        assert isinstance(entry["replay_buffer_kwargs"], dict), name
        assert task.env_id in {entry_task.env_id for entry_task in script.ENTRY_TASKS.values()}, name
