"""``her-wrap optimize --start-from-entry`` (the entry's own settings as the first trial) and ``--same-seed``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from her_wrap.runs import cli, optimize
from her_wrap.runs.errors import UsageError
from her_wrap.runs.search_spaces import Categorical, Uniform, entry_params, sample_settings
from her_wrap.runs.study_storage import open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {
    ("batch_size",): Categorical((64, 256)),
    ("policy_kwargs", "net_arch"): Categorical(([64, 64], [32, 32, 32])),
    ("learning_rate",): Uniform(1e-4, 3e-3, log=True),
}
ENTRY = {"batch_size": 256, "learning_rate": 1e-3, "policy_kwargs": {"net_arch": [32, 32, 32]}}


def test_entry_params_sample_the_entrys_own_settings_back() -> None:
    params = entry_params(ENTRY, "dqn", space=SPACE)
    assert params == {"batch_size": 256, "policy_kwargs.net_arch": "[32, 32, 32]", "learning_rate": 1e-3}
    replayed = sample_settings(optuna.trial.FixedTrial(params), "dqn", space=SPACE)
    assert replayed == {
        ("batch_size",): 256,
        ("policy_kwargs", "net_arch"): [32, 32, 32],
        ("learning_rate",): 1e-3,
    }


def test_entry_params_leave_the_fixed_keys_out() -> None:
    params = entry_params({**ENTRY, "batch_size": 999}, "dqn", fixed={("batch_size",)}, space=SPACE)
    assert "batch_size" not in params


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({**ENTRY, "batch_size": 128}, "batch_size: the entry's 128 is not in the space"),
        ({**ENTRY, "learning_rate": 0.01}, "learning_rate: the entry's 0.01 is not in the space"),
        ({**ENTRY, "policy_kwargs": {"net_arch": [64]}}, "policy_kwargs.net_arch: the entry's [64] is not"),
        ({"batch_size": 64, "learning_rate": 1e-3}, "policy_kwargs.net_arch is not set in the entry"),
    ],
)
def test_an_entry_the_space_cannot_sample_is_refused_naming_the_key_and_the_fix(
    entry: dict[str, Any], named: str
) -> None:
    with pytest.raises(UsageError, match="add those values to the --space file") as error:
        entry_params(entry, "dqn", space=SPACE)
    assert named in str(error.value)


def test_a_boolean_is_not_taken_for_the_number_it_equals() -> None:
    space = {("her", "n_sampled_goal"): Categorical((1, 2))}
    with pytest.raises(UsageError, match=r"her\.n_sampled_goal: the entry's True is not in the space"):
        entry_params({"her": {"n_sampled_goal": True}}, "dqn", space=space)
    assert entry_params({"her": {"n_sampled_goal": 1}}, "dqn", space=space) == {"her.n_sampled_goal": 1}


def test_in_the_learners_own_space_a_network_is_its_size_name() -> None:
    entry = {
        "her": {"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        "learning_rate": 1e-3,
        "batch_size": 256,
        "gamma": 0.98,
        "train_freq": 4,
        "policy_kwargs": {"net_arch": [256, 256, 256]},
        "tau": 0.05,
        "noise_std": 0.2,
    }
    params = entry_params(entry, "sbx.td3")
    assert params["policy_kwargs.net_arch"] == "big"
    assert params["her.goal_selection_strategy"] == "future"


def write_space(tmp_path: Path) -> Path:
    path = tmp_path / "space.yml"
    path.write_text("batch_size: [64, 128]\nlearning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n")
    return path


def test_the_first_trial_of_a_new_study_runs_the_entry_and_a_rejoin_queues_it_no_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["optimize", "--env", "BitFlipping-v0", "-params", "env_kwargs.n_bits:4", "-n", "3000",
            "--n-evaluations", "10", "--n-trials", "1", "--minutes-to", "0.9", "--seed", "0",
            "--start-from-entry", "--space", str(write_space(tmp_path)), "-f", str(tmp_path / "logs")]  # fmt: skip
    assert cli.main(argv) == 0
    assert "trial 0 runs the entry's own settings" in capsys.readouterr().out
    assert cli.main(argv) == 0
    assert "already has trials, so the entry's settings are not queued again" in capsys.readouterr().out
    storage = open_storage(f"sqlite:///{tmp_path / 'logs/her/her-BitFlipping-v0-dqn/study.db'}")
    first, second = optuna.load_study(study_name="her-BitFlipping-v0-dqn", storage=storage).trials
    # the BitFlipping entry trains on batches of 128 with a learning rate of 1e-3
    assert first.params == {"batch_size": 128, "learning_rate": 1e-3}
    assert first.user_attrs["entry"] is True and "entry" not in second.user_attrs


def test_an_entry_outside_the_space_stops_the_command_before_the_study_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yml"
    space.write_text("batch_size: [64, 256]\n")
    shared = tmp_path / "shared.db"
    argv = ["optimize", "--env", "BitFlipping-v0", "--n-trials", "1", "--start-from-entry", "--space", str(space),
            "-f", str(tmp_path / "logs")]  # fmt: skip
    assert cli.main(argv) != 0
    assert "batch_size" in capsys.readouterr().err
    # no study file in the log folder, and no empty study left in a storage given with --storage
    assert not (tmp_path / "logs/her/her-BitFlipping-v0-dqn/study.db").exists()
    assert cli.main([*argv, "--storage", f"sqlite:///{shared}"]) != 0
    assert optuna.get_all_study_names(storage=open_storage(f"sqlite:///{shared}")) == []


@pytest.mark.parametrize(("same_seed", "expected"), [(True, [7, 7, 7]), (False, [7, 8, 9])])
def test_same_seed_trains_every_trial_on_the_given_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_seed: bool, expected: list[int]
) -> None:
    seeds: list[int] = []

    def recorded(trial: Any, config: Any, args: Any, n_timesteps: int, seed: int, **_: Any) -> float:
        seeds.append(seed)
        return 1.0

    monkeypatch.setattr(optimize, "minutes_trial", recorded)
    argv = ["optimize", "--env", "BitFlipping-v0", "--n-trials", "3", "--minutes-to", "0.9", "--seed", "7",
            "--space", str(write_space(tmp_path)), "-f", str(tmp_path / "logs")]  # fmt: skip
    assert cli.main([*argv, "--same-seed"] if same_seed else argv) == 0
    assert seeds == expected


def test_same_seed_needs_a_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["optimize", "--env", "BitFlipping-v0", "--same-seed", "-f", str(tmp_path)])
    assert status != 0
    assert "--same-seed trains every trial on one seed: give it with --seed N" in capsys.readouterr().err
