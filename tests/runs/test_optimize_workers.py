"""``her-wrap optimize`` trials on several workers: each trial is a ``her-wrap train --workers N`` run that the
trial follows through its evaluations and stops (tests/sb3/test_distributed.py covers the workers)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import optuna
import pytest

from her_wrap.runs import cli
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import RunError
from her_wrap.runs.run_config import RunConfig
from her_wrap.runs.study_storage import open_storage
from her_wrap.runs.trials import TrialEvaluation, train_trial_in_workers

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: Bit flipping on 4 bits, trained every 64 steps (workers share no episode-counted train_freq).
STEP_TRAINING = ("env_kwargs.n_bits:4", "train_freq:[64,step]", "gradient_steps:4")


def _config(*overrides: str) -> RunConfig:
    return load_run_config(default_config_path(), "BitFlipping-v0", overrides=[*STEP_TRAINING, *overrides])


def _study(log_folder: Path) -> optuna.Study:
    storage = open_storage(f"sqlite:///{log_folder / 'her/her-BitFlipping-v0-dqn/study.db'}")
    return optuna.load_study(study_name="her-BitFlipping-v0-dqn", storage=storage)


def test_a_worker_trial_reports_every_workers_env_steps_and_stops_when_report_says_so(tmp_path: Path) -> None:
    seen: list[TrialEvaluation] = []

    def report(evaluation: TrialEvaluation) -> bool:
        seen.append(evaluation)
        return evaluation.index < 1  # stop after the second

    folder = tmp_path / "trials" / "0"
    evaluations = train_trial_in_workers(
        _config(), workers=2, folder=folder, n_timesteps=20_000, n_evaluations=50, eval_episodes=5, seed=0,
        report=report,
    )  # fmt: skip
    assert evaluations == seen
    assert [evaluation.index for evaluation in seen] == [0, 1]
    # Evaluations every 400 steps of each worker, 800 of the two together.
    assert [evaluation.env_steps for evaluation in seen] == [800, 1600]
    assert 0 < seen[0].train_seconds <= seen[1].train_seconds
    assert all(len(evaluation.result.successes) == 5 for evaluation in seen)
    assert not folder.exists()  # the run ended well: nothing of it is kept


def test_a_worker_trial_stops_at_its_training_time_budget(tmp_path: Path) -> None:
    started = time.monotonic()
    evaluations = train_trial_in_workers(
        _config(), workers=2, folder=tmp_path / "trial", n_timesteps=1_000_000, n_evaluations=2_500,
        eval_episodes=2, seed=0, report=lambda evaluation: True, max_train_seconds=2.0,
    )  # fmt: skip
    # Stopped long before its million steps; the evaluation made as it stopped closes the curve.
    assert evaluations and evaluations[-1].env_steps < 2 * 1_000_000
    assert evaluations[-1].train_seconds >= 2.0 - 1.0
    assert time.monotonic() - started < 120


def test_a_worker_trial_whose_budget_ends_as_it_starts_training_still_ends_with_an_evaluation(
    tmp_path: Path,
) -> None:
    """A budget spent before the workers are in their training loop (a loaded machine) still stops the run
    well: the stop comes at their first step at the latest, with its evaluation."""
    evaluations = train_trial_in_workers(
        _config(), workers=2, folder=tmp_path / "trial", n_timesteps=1_000_000, n_evaluations=2_500,
        eval_episodes=2, seed=0, report=lambda evaluation: True, max_train_seconds=0.0,
    )  # fmt: skip
    assert evaluations, "the run ended without the evaluation of its stop"
    assert evaluations[-1].env_steps < 2 * 1_000_000  # stopped


def test_a_failed_worker_trials_run_is_kept_with_its_output(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    with pytest.raises(RunError, match="a trial's run on 2 workers failed with status") as failure:
        # A learning rate the entry takes and the learner fails on (SB3 asserts it is a number).
        train_trial_in_workers(
            _config("learning_rate:abc"), workers=2, folder=folder, n_timesteps=1_000, n_evaluations=2,
            eval_episodes=2, seed=0, report=lambda evaluation: True,
        )  # fmt: skip
    assert str(folder / "train.log") in str(failure.value)
    assert (folder / "train.log").is_file() and (folder / "config.yml").is_file()


def test_minutes_to_on_two_workers_trains_each_trial_as_her_wrap_train_workers_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yml"
    space.write_text("batch_size: [256]\n")  # the entry otherwise, which learns 4 bits within 3000 steps
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "-params", *STEP_TRAINING, "-n", "3000", "--workers", "2",
         "--n-evaluations", "10", "--n-trials", "1", "--minutes-to", "0.9", "--seed", "0",
         "--space", str(space), "-f", str(tmp_path / "logs")]
    )  # fmt: skip
    assert status == 0
    assert "each trial trains on 2 workers (--workers: her-wrap train --workers 2)" in capsys.readouterr().out
    [trial] = _study(tmp_path / "logs").trials
    assert trial.state.name == "COMPLETE" and trial.user_attrs["reached"] is True
    # Stopped at the evaluation that reached 0.9: every 300 steps of each worker, counted for both.
    assert trial.user_attrs["env_steps"] % 600 == 0 and trial.user_attrs["env_steps"] < 6000
    assert not (tmp_path / "logs/her/her-BitFlipping-v0-dqn/trials/0").exists()


def test_a_setting_the_workers_refuse_fails_that_trial_and_the_study_goes_on(tmp_path: Path) -> None:
    status = cli.main(
        ["optimize", "--env", "BitFlipping-v0", "-params", *STEP_TRAINING, "policy_kwargs.actor_average:0.1",
         "-n", "1000", "--workers", "2", "--n-evaluations", "2", "--n-trials", "2", "-f", str(tmp_path / "logs")]
    )  # fmt: skip
    assert status == 0
    assert [trial.state.name for trial in _study(tmp_path / "logs").trials] == ["FAIL", "FAIL"]
    log = tmp_path / "logs/her/her-BitFlipping-v0-dqn/trials/1/train.log"
    assert "takes no actor_average" in log.read_text()


#: More workers, or trials at once, than this machine has cores.
MANY = len(os.sched_getaffinity(0)) + 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--workers", "2"], r"train_freq \[16, 'episode'\] counts episodes"),
        (["--workers", str(MANY), "-params", "train_freq:[64,step]"], f"--workers {MANY} is more than the"),
        (
            ["--workers", "2", "--n-jobs", str(MANY), "-params", "train_freq:[64,step]"],
            rf"--n-jobs {MANY} trials at once on 2 workers each take {2 * MANY} CPU cores",
        ),
    ],
)
def test_worker_trials_that_cannot_run_are_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    status = cli.main(["optimize", "--env", "BitFlipping-v0", "-f", str(tmp_path), "-n", "1000", *options])
    assert status == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "her/her-BitFlipping-v0-dqn/trials").exists()
