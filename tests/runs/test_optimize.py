"""Optuna plumbing of ``her-wrap optimize`` with stand-in objectives: storages, shared studies, samplers.

The PostgreSQL tests need a server: ``.ci/postgres.sh`` starts one and prints its URL, which CI exports as
``HER_WRAP_TEST_POSTGRES_URL``. Without it they are skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import optuna
import pytest

from her_wrap.runs.config import load_entry, load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.optimize import trial_entry, trial_value, write_results
from her_wrap.runs.search_spaces import NET_ARCHS, sample_settings
from her_wrap.runs.studies import open_study, run_study
from her_wrap.runs.study_storage import hide_password, open_storage, sqlalchemy_url

POSTGRES_URL = os.environ.get("HER_WRAP_TEST_POSTGRES_URL")
needs_postgres = pytest.mark.skipif(
    not POSTGRES_URL,
    reason="HER_WRAP_TEST_POSTGRES_URL is unset: start a server with `.ci/postgres.sh` and export the URL it prints",
)
REPO = Path(__file__).resolve().parents[2]

optuna.logging.set_verbosity(optuna.logging.WARNING)


def quadratic(trial: Any) -> float:
    """A stand-in objective: no training, one sampled parameter."""
    return -(trial.suggest_float("x", -1.0, 1.0) ** 2)


@pytest.fixture
def postgres_study_name() -> Iterator[str]:
    """A fresh study name, deleted from the PostgreSQL database afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    assert POSTGRES_URL is not None
    try:
        optuna.delete_study(study_name=name, storage=open_storage(POSTGRES_URL))
    except KeyError:
        pass


# --------------------------------------------------------------------------- URLs


class UrlCase(NamedTuple):
    name: str
    url: str
    expected: str


HIDE_PASSWORD_CASES = [
    UrlCase(
        "password hidden",
        "postgresql://user:secret@db.example:5432/optuna",
        "postgresql://user:***@db.example:5432/optuna",
    ),
    UrlCase("no password", "postgresql://db.example/optuna", "postgresql://db.example/optuna"),
    UrlCase("sqlite path untouched", "sqlite:////tmp/logs/study.db", "sqlite:////tmp/logs/study.db"),
]


@pytest.mark.parametrize("case", HIDE_PASSWORD_CASES, ids=lambda case: case.name)
def test_hide_password(case: UrlCase) -> None:
    assert hide_password(case.url) == case.expected


SQLALCHEMY_URL_CASES = [
    UrlCase(
        "postgresql uses psycopg 3 (psycopg2 absent)",
        "postgresql://u:p@h/db",
        "postgresql+psycopg://u:p@h/db",
    ),
    UrlCase("postgres alias", "postgres://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
    UrlCase("explicit driver kept", "postgresql+pg8000://u:p@h/db", "postgresql+pg8000://u:p@h/db"),
    UrlCase("sqlite kept", "sqlite:///study.db", "sqlite:///study.db"),
]


@pytest.mark.parametrize("case", SQLALCHEMY_URL_CASES, ids=lambda case: case.name)
def test_sqlalchemy_url(case: UrlCase) -> None:
    pytest.importorskip("psycopg")
    if case.name.startswith("postgres") and importlib.util.find_spec("psycopg2") is not None:
        pytest.skip("psycopg2 is installed, so it is SQLAlchemy's driver")
    assert sqlalchemy_url(case.url) == case.expected


def test_unreachable_storage_is_one_line_without_the_password() -> None:
    with pytest.raises(UsageError) as caught:
        open_storage("postgresql://her_wrap:topsecret@127.0.0.1:1/nothing")
    message = str(caught.value)
    assert ("cannot open the Optuna storage" in message, "topsecret" in message, "\n" in message) == (
        True,
        False,
        False,
    )


def test_malformed_storage_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="cannot open the Optuna storage"):
        open_storage("nosuchdialect://whatever")


# --------------------------------------------------------------------------- studies


def test_sqlite_study_records_each_trial_and_its_worker(tmp_path: Path) -> None:
    study = open_study(open_storage(f"sqlite:///{tmp_path / 'study.db'}"), "stand-in")
    run_study(study, quadratic, n_trials=4)
    reloaded = optuna.load_study(study_name="stand-in", storage=f"sqlite:///{tmp_path / 'study.db'}")
    rows = [
        (trial.number, trial.state.name, trial.user_attrs.get("worker") is not None)
        for trial in reloaded.trials
    ]
    assert rows == [(number, "COMPLETE", True) for number in range(4)]


def test_a_trial_the_learner_rejects_fails_without_stopping_the_worker(tmp_path: Path) -> None:
    def sometimes_rejected(trial: Any) -> float:
        if trial.number == 1:
            raise UsageError("learner rejects these settings")
        return quadratic(trial)

    study = open_study(open_storage(f"sqlite:///{tmp_path / 'study.db'}"), "rejections")
    run_study(study, sometimes_rejected, n_trials=3)
    assert [trial.state.name for trial in study.trials] == ["COMPLETE", "FAIL", "COMPLETE"]


def test_joining_a_study_continues_its_numbering(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    run_study(open_study(open_storage(url), "joined"), quadratic, n_trials=2)
    study = open_study(open_storage(url), "joined")
    run_study(study, quadratic, n_trials=2)
    assert [trial.number for trial in study.trials] == [0, 1, 2, 3]


WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import optuna
    from her_wrap.runs.studies import open_study, run_study
    from her_wrap.runs.study_storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, name, n_trials = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def objective(trial):
        time.sleep(0.05)  # long enough for the two workers' trials to interleave
        return -trial.suggest_float("x", -1.0, 1.0) ** 2

    run_study(open_study(open_storage(url), name), objective, n_trials=n_trials)
    """
)


SIMULTANEOUS_WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import optuna
    from her_wrap.runs.studies import open_study, run_study
    from her_wrap.runs.study_storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, name, n_trials, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

    def objective(trial):
        time.sleep(0.02)
        return -trial.suggest_float("x", -1.0, 1.0) ** 2

    time.sleep(max(start_at - time.time(), 0.0))  # every worker opens the new storage in the same instant
    run_study(open_study(open_storage(url), name), objective, n_trials=n_trials)
    """
)


def _trials_of_simultaneous_workers(url: str, study_name: str, workers: int, n_trials: int) -> list[Any]:
    """Start ``workers`` processes that open ``url`` at the same moment and run ``n_trials`` trials each."""
    start_at = time.time() + 8.0  # after every interpreter has imported optuna
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SIMULTANEOUS_WORKER_SCRIPT, url, study_name, str(n_trials), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(workers)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0] * workers, outputs
    return optuna.load_study(study_name=study_name, storage=url).trials


def test_four_workers_starting_at_once_on_a_new_sqlite_file_lose_no_trial(tmp_path: Path) -> None:
    trials = _trials_of_simultaneous_workers(f"sqlite:///{tmp_path / 'study.db'}", "shared", 4, 6)
    outcome = (sorted(trial.number for trial in trials), {trial.state.name for trial in trials})
    assert outcome == (list(range(24)), {"COMPLETE"})


#: ``her-wrap optimize`` trials of 64 steps on 4 bits with a 16-unit network: about a second each.
TINY_TRIALS = [
    "--env", "BitFlipping-v0", "-n", "64", "--n-evaluations", "1", "--eval-episodes", "1", "--sampler", "random",
    "--pruner", "none", "--verbose", "0", "--num-threads", "1", "-params", "policy_kwargs.net_arch:[16]",
    "batch_size:8", "learning_starts:16", "buffer_size:500", "env_kwargs.n_bits:4", "train_freq:4",
    "gradient_steps:1",
]  # fmt: skip


def test_four_optimize_commands_on_one_new_sqlite_study_finish_every_trial(tmp_path: Path) -> None:
    url, n_trials = f"sqlite:///{tmp_path / 'study.db'}", 2
    command = [sys.executable, "-m", "her_wrap.runs.cli", "optimize", *TINY_TRIALS, "--storage", url]
    workers = [
        subprocess.Popen(
            [
                *command,
                "--study-name",
                "s1",
                "--n-trials",
                str(n_trials),
                "-f",
                str(tmp_path / f"logs{index}"),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(4)
    ]
    outputs = [worker.communicate(timeout=240)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4, outputs
    trials = optuna.load_study(study_name="s1", storage=url).trials
    outcome = (sorted(trial.number for trial in trials), {trial.state.name for trial in trials})
    assert outcome == (list(range(4 * n_trials)), {"COMPLETE"})


HANGING_WORKER_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, time
    from her_wrap.runs.studies import open_study, run_study
    from her_wrap.runs.study_storage import open_storage

    url, name, ready = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])

    def objective(trial):
        trial.suggest_float("x", -1.0, 1.0)
        ready.write_text(str(trial.number))
        time.sleep(600)

    run_study(open_study(open_storage(url, heartbeat_interval=1), name), objective, n_trials=1)
    """
)


def test_a_killed_workers_running_trial_is_failed_and_run_again_by_another_worker(tmp_path: Path) -> None:
    url, ready = f"sqlite:///{tmp_path / 'study.db'}", tmp_path / "running"
    hanging = subprocess.Popen([sys.executable, "-c", HANGING_WORKER_SCRIPT, url, "killed", str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert hanging.poll() is None and time.monotonic() < deadline, (
                "the first worker never ran a trial"
            )
            time.sleep(0.1)
    finally:
        hanging.kill()
        hanging.wait()
    study = open_study(open_storage(url, heartbeat_interval=1), "killed")
    # Once two heartbeats are missed the trial is stale: what a worker starting a trial checks first (the
    # time it takes depends on the machine's load, so the check is repeated until it holds).
    deadline = time.monotonic() + 60
    while study.trials[0].state == optuna.trial.TrialState.RUNNING:
        assert time.monotonic() < deadline, "the killed worker's trial never went stale"
        time.sleep(0.5)
        optuna.storages.fail_stale_trials(study)
    run_study(study, quadratic, n_trials=2)
    trials = study.trials
    outcome = (
        [trial.state.name for trial in trials],
        trials[1].system_attrs.get("failed_trial"),
        trials[1].params == trials[0].params,
    )
    assert outcome == (["FAIL", "COMPLETE", "COMPLETE"], 0, True)


@pytest.mark.postgres
@needs_postgres
def test_two_worker_processes_share_a_postgresql_study(postgres_study_name: str) -> None:
    assert POSTGRES_URL is not None
    n_trials = 6
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, POSTGRES_URL, postgres_study_name, str(n_trials)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    trials = optuna.load_study(study_name=postgres_study_name, storage=open_storage(POSTGRES_URL)).trials
    per_worker: dict[str, int] = {}
    for trial in trials:
        per_worker[trial.user_attrs["worker"]] = per_worker.get(trial.user_attrs["worker"], 0) + 1
    summary = (
        sorted(trial.number for trial in trials),
        {trial.state.name for trial in trials},
        sorted(per_worker.values()),
    )
    assert summary == (list(range(2 * n_trials)), {"COMPLETE"}, [n_trials, n_trials])


@pytest.mark.postgres
@needs_postgres
def test_postgresql_storage_opens_twice_once_tables_exist(postgres_study_name: str) -> None:
    assert POSTGRES_URL is not None
    run_study(open_study(open_storage(POSTGRES_URL), postgres_study_name), quadratic, n_trials=1)
    study = open_study(open_storage(POSTGRES_URL), postgres_study_name)
    assert len(study.trials) == 1


# --------------------------------------------------------------------------- search spaces


def test_fixed_keys_are_not_sampled() -> None:
    trial = optuna.create_study().ask()
    settings = sample_settings(trial, "dqn", fixed={("learning_rate",), ("her", "n_sampled_goal")})
    assert (
        ("learning_rate",) in settings,
        ("her", "n_sampled_goal") in settings,
        "learning_rate" in trial.params,
    ) == (
        False,
        False,
        False,
    )


def test_train_freq_sets_gradient_steps_and_net_arch_is_a_size_name() -> None:
    trial = optuna.trial.FixedTrial(
        {
            "her.n_sampled_goal": 4,
            "her.goal_selection_strategy": "future",
            "her.laber": "mean",
            "learning_rate": 1e-3,
            "batch_size": 128,
            "gamma": 0.98,
            "train_freq": 16,
            "policy_kwargs.net_arch": "medium",
            "tau": 0.02,
            "noise_std": 0.1,
        }
    )
    settings = sample_settings(trial, "td3")
    picked = (
        settings[("gradient_steps",)],
        settings[("policy_kwargs", "net_arch")],
        settings[("noise_type",)],
    )
    assert picked == (16, NET_ARCHS["medium"], "normal")


def test_best_hyperparams_file_trains_as_a_config(tmp_path: Path) -> None:
    base = load_entry(REPO / "configs" / "her.yml", "BitFlipping-v0")
    study = optuna.create_study(direction="maximize")

    def objective(trial: Any) -> float:
        base.validate(trial_entry(base, trial, (), "dqn"))
        return trial.params["learning_rate"]

    study.optimize(objective, n_trials=3)
    path = write_results(study, base, (), tmp_path)
    assert path is not None
    config = load_run_config(path, "BitFlipping-v0")
    assert config.learner_kwargs["learning_rate"] == study.best_trial.params["learning_rate"]


def test_search_space_samples_laber_and_the_random_strategy() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = {
        (trial_settings[("her", "laber")], trial_settings[("her", "goal_selection_strategy")])
        for trial_settings in (sample_settings(study.ask(), "dqn") for _ in range(60))
    }
    assert {laber for laber, _ in seen} == {None, "mean", "max"} and "random" in {s for _, s in seen}


def test_trial_value_is_the_mean_of_all_evaluations_or_of_the_last_k() -> None:
    rates = [0.0, 0.2, 0.6, 1.0]
    assert trial_value(rates) == pytest.approx(0.45)
    assert trial_value(rates, score_last=2) == pytest.approx(0.8)
    assert trial_value(rates, score_last=1) == 1.0


def test_score_last_beyond_the_evaluations_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from her_wrap.runs import cli

    status = cli.main(["optimize", "--env", "BitFlipping-v0", "--n-evaluations", "3", "--score-last", "4"])
    assert status == 2
    assert "--score-last 4 is more than the 3 evaluations of a trial" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    [
        "SAMPLERS",
        "PRUNERS",
        "make_sampler",
        "make_pruner",
        "open_study",
        "worker_name",
        "print_trial",
        "run_study",
    ],
)
def test_the_study_names_of_0_1_0_still_read_from_optimize_with_a_warning_naming_their_new_home(
    name: str,
) -> None:
    from her_wrap.runs import optimize, studies

    with pytest.warns(
        DeprecationWarning,
        match=rf"her_wrap\.runs\.optimize\.{name} is deprecated: use her_wrap\.runs\.studies\.{name}",
    ):
        assert getattr(optimize, name) is getattr(studies, name)
