"""What the command line does to an entry beyond its keys: ``--workers`` shares, ``--algo`` on another
learner's entry, and ``-c`` naming a file shipped with her_wrap."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from her_wrap.runs.arguments import add_config_arguments, config_path, shipped_configs
from her_wrap.runs.config import load_entry, load_run_config
from her_wrap.runs.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "configs" / "her.yml"

#: What two workers of the FetchPush entry tuned for one process trained on for the results table (and the
#: settings FetchPush's entry now ships on its two workers, but for its batch of 512): each worker its 2
#: envs, half the batch, half the env steps per cycle, half the warm-up and half the budget.
TWO_WORKER_SHARES = ("batch_size:1024", "learning_starts:500", "train_freq:[125,step]")


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "her.yml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- --workers


#: A shipped entry tuned for one process: FetchPickAndPlace merges the one-process manipulation settings.
ONE_PROCESS_ENTRY = "FetchPickAndPlace-v4"


def test_two_workers_divide_an_entry_tuned_for_one_process_as_the_two_worker_rows_ran() -> None:
    split = load_run_config(SHIPPED, ONE_PROCESS_ENTRY, workers=2)
    budget = load_run_config(SHIPPED, ONE_PROCESS_ENTRY).n_timesteps
    measured = load_run_config(
        SHIPPED, ONE_PROCESS_ENTRY, overrides=TWO_WORKER_SHARES, n_timesteps=budget // 2
    )
    assert split.learner_kwargs == measured.learner_kwargs
    assert (split.n_envs, split.n_timesteps, split.hindsight) == (
        measured.n_envs,
        measured.n_timesteps,
        measured.hindsight,
    )
    assert split.workers == 2


def test_workers_split_says_what_it_set() -> None:
    notes: list[str] = []
    load_run_config(SHIPPED, ONE_PROCESS_ENTRY, workers=2, notes=notes)
    assert len(notes) == 1
    for part in ("2 workers", "batch_size 1024", "learning_starts 500", "train_freq [125, step]"):
        assert part in notes[0]


def test_fetch_push_ships_each_of_its_two_workers_share_of_the_one_process_regime() -> None:
    """FetchPush's entry names its workers: ``--workers 2`` (what ``her-wrap train --env FetchPush-v4``
    passes for it) keeps it as it stands, each worker's share of what the one-process entries train on."""
    notes: list[str] = []
    shipped = load_run_config(SHIPPED, "FetchPush-v4")
    assert load_run_config(SHIPPED, "FetchPush-v4", workers=2, notes=notes) == shipped and notes == []
    one_process_split = load_run_config(SHIPPED, ONE_PROCESS_ENTRY, workers=2)
    # Five envs for 50 steps where a split steps two for 125: the same 250 env steps per worker and cycle.
    assert shipped.workers == 2 and (shipped.n_envs, one_process_split.n_envs) == (5, 2)
    cycle = [
        config.learner_kwargs["train_freq"][0] * config.n_envs for config in (shipped, one_process_split)
    ]
    assert cycle == [250, 250]
    for key in ("learning_starts", "gradient_steps"):
        assert shipped.learner_kwargs[key] == one_process_split.learner_kwargs[key], key
    # Its batch is half a split's: each update averages 2 x 512 rows, not the one-process entry's 2048.
    assert shipped.learner_kwargs["batch_size"] == one_process_split.learner_kwargs["batch_size"] // 2 == 512
    assert shipped.n_timesteps == 250_000  # each worker's: 500k env steps in all


def test_fetch_slide_ships_two_workers_each_with_half_the_one_process_batch_and_cycle() -> None:
    """FetchSlide's entry names its two workers: ``--workers 2`` keeps it as it stands, each worker the
    one-process schedule's share (its 2 envs for 125 steps, 1024 rows per update) with its own 40 gradient
    steps per cycle, for 1M env steps each, stopped after 115 training minutes."""
    notes: list[str] = []
    shipped = load_run_config(SHIPPED, "FetchSlide-v4")
    assert load_run_config(SHIPPED, "FetchSlide-v4", workers=2, notes=notes) == shipped and notes == []
    split = load_run_config(SHIPPED, ONE_PROCESS_ENTRY, workers=2)
    assert (shipped.workers, shipped.n_envs, shipped.n_timesteps, shipped.max_minutes) == (
        2,
        2,
        1_000_000,
        115,
    )
    for key in ("batch_size", "learning_starts", "train_freq"):
        assert shipped.learner_kwargs[key] == split.learner_kwargs[key], key
    assert (shipped.learner_kwargs["gradient_steps"], split.learner_kwargs["gradient_steps"]) == (40, 20)


ONE_WORKER_ENTRY = """
    Pendulum-v1:
      model_class: sac
      n_timesteps: 3000
      batch_size: 255
      learning_starts: 100
      train_freq: 4
"""


def test_settings_the_command_line_gives_are_not_split(tmp_path: Path) -> None:
    path = write_config(tmp_path, ONE_WORKER_ENTRY)
    config = load_run_config(
        path, "Pendulum-v1", workers=2, overrides=("learning_starts:60",), n_timesteps=500
    )
    assert config.learner_kwargs["learning_starts"] == 60
    assert config.n_timesteps == 500


def test_settings_that_do_not_divide_are_kept_and_named(tmp_path: Path) -> None:
    path = write_config(tmp_path, ONE_WORKER_ENTRY)
    notes: list[str] = []
    config = load_run_config(path, "Pendulum-v1", workers=2, notes=notes)
    assert config.learner_kwargs["batch_size"] == 255
    assert config.learner_kwargs["learning_starts"] == 50
    assert config.learner_kwargs["train_freq"] == [2, "step"]
    assert config.n_timesteps == 1500
    assert "kept as in the entry: batch_size" in notes[0]


def test_an_entry_tuned_for_its_workers_is_not_split(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, ONE_WORKER_ENTRY.replace("train_freq: 4", "train_freq: 4\n      workers: 2")
    )
    notes: list[str] = []
    config = load_run_config(path, "Pendulum-v1", workers=2, notes=notes)
    assert config.learner_kwargs["learning_starts"] == 100
    assert notes == []


def test_a_saved_split_entry_is_not_split_again(tmp_path: Path) -> None:
    # A resumed run reads its own config.yml, which records the workers it was split for.
    from her_wrap.runs.yaml_io import write_yaml_file

    path = write_config(tmp_path, ONE_WORKER_ENTRY)
    split = load_run_config(path, "Pendulum-v1", workers=2)
    saved = tmp_path / "config.yml"
    write_yaml_file(saved, {"Pendulum-v1": split.to_entry()})
    again = load_run_config(saved, "Pendulum-v1", workers=2)
    assert again.learner_kwargs == split.learner_kwargs
    assert again.n_timesteps == split.n_timesteps


def test_one_worker_leaves_the_entry_alone(tmp_path: Path) -> None:
    path = write_config(tmp_path, ONE_WORKER_ENTRY)
    assert load_entry(path, "Pendulum-v1", workers=1).entry == load_entry(path, "Pendulum-v1").entry


# --------------------------------------------------------------------------- --algo


def test_algo_leaves_out_the_arguments_the_new_learner_lacks() -> None:
    pytest.importorskip("sbx")
    notes: list[str] = []
    config = load_run_config(SHIPPED, "FetchReach-v4", algo="sbx.crossq", notes=notes)
    assert "tau" not in config.learner_kwargs
    assert config.learner_kwargs["batch_size"] == 256
    assert len(notes) == 1 and "sbx.crossq takes no tau" in notes[0]


def test_algo_keeps_an_argument_the_command_line_gives_and_refuses_it() -> None:
    pytest.importorskip("sbx")
    with pytest.raises(UsageError, match=r"unknown hyperparameter 'tau' for sbx\.crossq"):
        load_run_config(SHIPPED, "FetchReach-v4", algo="sbx.crossq", overrides=("tau:0.01",))


def test_algo_onto_a_learner_without_the_entrys_policy_flattens_the_goal_dict() -> None:
    pytest.importorskip("sbx")
    notes: list[str] = []
    config = load_run_config(SHIPPED, "FetchReach-v4", algo="sbx.ddpg", notes=notes)
    assert config.policy == "MlpPolicy"
    assert any("sbx.ddpg has no MultiInputPolicy: MlpPolicy instead" in note for note in notes)


def test_algo_of_the_same_learner_changes_nothing() -> None:
    assert load_entry(SHIPPED, "FetchReach-v4", algo="sac").notes == ()


# --------------------------------------------------------------------------- -c NAME


def test_conf_names_a_file_shipped_with_her_wrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert parser.parse_args(["-c", "her_jax.yml"]).conf == shipped_configs()["her_jax.yml"]
    assert parser.parse_args(["-c", "her_jax"]).conf == shipped_configs()["her_jax.yml"]


def test_conf_prefers_a_file_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "her_jax.yml").write_text("{}\n", encoding="utf-8")
    assert config_path("her_jax.yml") == Path("her_jax.yml")


def test_conf_that_is_neither_names_the_shipped_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match=r"her\.yml, her_jax\.yml"):
        config_path("hers.yml")


# --------------------------------------------------------------------------- the SBX entries, trained


#: ``her-wrap train --env FetchReach-v4 -c her_jax.yml --algo LEARNER``: every SBX learner on the shipped
#: entry (DDPG and TD3 with Gaussian noise, as the PyTorch entry's DDPG form).
SBX_FETCH_REACH = [
    ("sbx.sac", ()),
    ("sbx.tqc", ()),
    ("sbx.crossq", ()),
    ("sbx.td3", ("-params", "noise_type:normal", "noise_std:0.2")),
    ("sbx.ddpg", ("-params", "noise_type:normal", "noise_std:0.2")),
]


@pytest.mark.slow
@pytest.mark.robotics
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("learner", "extra"), SBX_FETCH_REACH, ids=[name for name, _ in SBX_FETCH_REACH])
def test_shipped_sbx_entry_reaches_90_percent_on_fetch_reach(
    learner: str, extra: tuple[str, ...], tmp_path: Path
) -> None:
    if importlib.util.find_spec("sbx") is None or importlib.util.find_spec("gymnasium_robotics") is None:
        pytest.skip("needs the jax and robotics extras")
    command = [sys.executable, "-m", "her_wrap.runs.cli"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    common = ["--env", "FetchReach-v4", "-f", str(tmp_path / "logs")]
    subprocess.run(
        [*command, "train", *common, "-c", "her_jax.yml", "--algo", learner, "--seed", "0", "--no-progress",
         "--eval-freq", "100000", *extra],
        check=True, cwd=tmp_path, env=env, capture_output=True,
    )  # fmt: skip
    enjoyed = subprocess.run(
        [*command, "enjoy", *common, "-n", "100", "--seed", "1000"],
        check=True, cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    rate = float(re.search(r"success rate ([0-9.]+)", enjoyed.stdout).group(1))  # type: ignore[union-attr]
    assert rate >= 0.9, enjoyed.stdout
