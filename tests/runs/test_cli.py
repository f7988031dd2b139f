"""``her-wrap`` end to end, as subprocesses on tiny budgets: train, enjoy, plot, optimize, resume, bad input."""

from __future__ import annotations

import io
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
from test_optimize import POSTGRES_URL, needs_postgres

from her_wrap.runs.arguments import progress_bar_enabled
from her_wrap.runs.checkpoints import checkpoint_timesteps
from her_wrap.runs.yaml_io import load_yaml_file

REPO = Path(__file__).resolve().parents[2]
ZOO_FILE = Path(__file__).resolve().parents[1] / "data" / "tqc.yml"
ENV_ID = "BitFlipping-v0"

# A network of 16 units on 4 bits: every run learns something within a few hundred steps.
TINY = [
    "-params",
    "policy_kwargs.net_arch:[16]",
    "batch_size:16",
    "learning_starts:32",
    "buffer_size:2000",
    "env_kwargs.n_bits:4",
    "train_freq:1",
    "gradient_steps:1",
    "--num-threads",
    "1",
]


def her_wrap(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``her-wrap`` (as ``python -m her_wrap.runs.cli``) in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "her_wrap.runs.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_her_wrap(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "her_wrap.runs.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def report(completed: subprocess.CompletedProcess[str]) -> str:
    return f"exit {completed.returncode}\nstdout:\n{completed.stdout[-3000:]}\nstderr:\n{completed.stderr[-3000:]}"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One BitFlipping run (no -c: configs/her.yml of the checkout), shared by the train/enjoy/plot tests."""
    workdir = tmp_path_factory.mktemp("trained")
    completed = her_wrap(
        "train", "--env", ENV_ID, "-n", "300", "--eval-freq", "100", "--eval-episodes", "3", "--save-freq", "150",
        "--seed", "0", "--verbose", "0", *TINY, cwd=workdir,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    return workdir, completed


def run_dir_of(workdir: Path, number: int = 1) -> Path:
    return workdir / "logs" / "her" / f"{ENV_ID}_{number}"


# --------------------------------------------------------------------------- train


def test_train_writes_the_zoo_layout(trained: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    run_dir = run_dir_of(trained[0])
    expected = [
        "0.monitor.csv",
        f"{ENV_ID}.zip",
        f"{ENV_ID}/args.yml",
        f"{ENV_ID}/config.yml",
        "best_model.zip",
        "evaluations.npz",
        "rl_model_150_steps.zip",
        "rl_model_300_steps.zip",
        "rl_model_replay_buffer_300_steps.pkl",
    ]
    present = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.is_file())
    assert present == expected


def test_a_checkpoint_is_the_agent_a_run_of_its_budget_ends_with(
    trained: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """The 300-step checkpoint is saved after the gradient step of step 300, so it holds the final agent's
    parameters; the 150-step one an agent 150 updates behind."""
    run_dir = run_dir_of(trained[0])

    def parameters(name: str) -> dict[str, torch.Tensor]:
        with zipfile.ZipFile(run_dir / name) as archive, archive.open("policy.pth") as file:
            return torch.load(io.BytesIO(file.read()), map_location="cpu")

    final, last, first = (
        parameters(name) for name in (f"{ENV_ID}.zip", "rl_model_300_steps.zip", "rl_model_150_steps.zip")
    )
    assert sorted(final) == sorted(last)
    assert (
        all(torch.equal(final[key], last[key]) for key in final),
        all(torch.equal(final[key], first[key]) for key in final),
    ) == (True, False)


def test_train_monitor_records_is_success(trained: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    lines = (run_dir_of(trained[0]) / "0.monitor.csv").read_text().splitlines()
    assert lines[1] == "r,l,t,is_success"


def test_train_evaluations_hold_successes(trained: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    with np.load(run_dir_of(trained[0]) / "evaluations.npz") as data:
        assert (data["timesteps"].tolist(), data["successes"].shape) == ([100, 200, 300], (3, 3))


def test_train_evaluations_hold_training_wall_time(
    trained: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    with np.load(run_dir_of(trained[0]) / "evaluations.npz") as data:
        seconds = data["train_seconds"]
    assert seconds.shape == (3,) and seconds[0] > 0 and np.all(np.diff(seconds) > 0), seconds


def test_train_records_resolved_config_and_arguments(
    trained: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    params = run_dir_of(trained[0]) / ENV_ID
    config = load_yaml_file(params / "config.yml")[ENV_ID]
    args = load_yaml_file(params / "args.yml")
    assert (config["env_kwargs"], config["n_timesteps"], args["seed"], args["initial_timesteps"]) == (
        {"n_bits": 4},
        300,
        0,
        0,
    )


def test_train_takes_torch_threads_from_the_entry(tmp_path: Path) -> None:
    """Without --num-threads a run uses the entry's num_threads, and records what it used."""
    completed = her_wrap(
        "train", "--env", ENV_ID, "-n", "40", "--eval-freq", "0", "--verbose", "0", "--seed", "0",
        *TINY[:-2], "num_threads:2", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    params = run_dir_of(tmp_path) / ENV_ID
    assert load_yaml_file(params / "args.yml")["num_threads"] == 2
    assert load_yaml_file(params / "config.yml")[ENV_ID]["num_threads"] == 2


def test_train_with_a_zoo_file_normalization_and_subprocess_envs(tmp_path: Path) -> None:
    completed = her_wrap(
        "train", "--env", "BitFlippingContinuous-v0", "-c", str(ZOO_FILE), "-n", "120", "--n-envs", "2",
        "--vec-env", "subproc", "--eval-freq", "60", "--eval-episodes", "2", "--verbose", "0", "--seed", "1",
        "-params", "normalize:true", "learning_starts:20", "--num-threads", "1", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    run_dir = tmp_path / "logs" / "her" / "BitFlippingContinuous-v0_1"
    files = sorted(
        str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.suffix in (".csv", ".pkl")
    )
    assert files == ["0.monitor.csv", "1.monitor.csv", "BitFlippingContinuous-v0/vecnormalize.pkl"]


def test_progress_bar_defaults_to_terminals_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert (progress_bar_enabled(None), progress_bar_enabled(True), progress_bar_enabled(False)) == (
        False,
        True,
        False,
    )


# --------------------------------------------------------------------------- enjoy and plot


@pytest.mark.parametrize(
    "which", [[], ["--load-best"], ["--load-checkpoint", "150"]], ids=["final", "best", "checkpoint"]
)
def test_enjoy_prints_the_success_rate(
    which: list[str], trained: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    completed = her_wrap("enjoy", "--env", ENV_ID, "-n", "4", *which, cwd=trained[0])
    assert (
        completed.returncode,
        bool(re.search(r"success rate \d\.\d{3} \(\d/4 episodes\)", completed.stdout)),
    ) == (
        0,
        True,
    ), report(completed)


def test_plot_the_trained_run(trained: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    completed = her_wrap("plot", "--env", ENV_ID, "-o", "curve.png", cwd=trained[0])
    assert (completed.returncode, (trained[0] / "curve.png").read_bytes()[:4]) == (0, b"\x89PNG"), report(
        completed
    )


# --------------------------------------------------------------------------- kill and resume


def test_sigkill_mid_training_then_resume_from_the_last_checkpoint(tmp_path: Path) -> None:
    run_dir = run_dir_of(tmp_path)
    process = start_her_wrap(
        "train", "--env", ENV_ID, "-n", "1000000", "--save-freq", "100", "--eval-freq", "-1", "--seed", "2",
        "--verbose", "0", *TINY, cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while len(checkpoint_timesteps(run_dir)) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    saved = checkpoint_timesteps(run_dir)
    assert len(saved) >= 3 and not (run_dir / f"{ENV_ID}.zip").exists(), (
        process.stdout.read() if process.stdout else ""
    )

    target = saved[-1] + 150
    completed = her_wrap(
        "train", "--env", ENV_ID, "-i", str(run_dir), "-n", str(target), "--eval-freq", "100", "--eval-episodes", "2",
        "--verbose", "0", "--num-threads", "1", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    resumed = run_dir_of(tmp_path, 2)
    args = load_yaml_file(resumed / ENV_ID / "args.yml")
    with np.load(resumed / "evaluations.npz") as data:
        last_evaluation = int(data["timesteps"][-1])
    outcome = (
        args["initial_timesteps"],
        Path(args["trained_agent"]).name,
        last_evaluation,
        "Loaded the replay buffer" in completed.stdout,
    )
    assert outcome == (saved[-1], f"rl_model_{saved[-1]}_steps.zip", target, True)


def test_a_resumed_run_is_read_across_both_run_folders(tmp_path: Path) -> None:
    """What ``her-wrap train -i`` writes lets a results record follow the run back to the folder it resumed:
    the first folder's curve up to the checkpoint, then the second's. A resume without the checkpoint's
    replay buffer is not the same run, and is refused."""
    from her_wrap.runs.checkpoints import checkpoint_paths
    from her_wrap.runs.errors import UsageError
    from lab.experiments import EntryTask, check_run

    command = (
        "train",
        "--env",
        ENV_ID,
        "-n",
        "300",
        "--eval-freq",
        "100",
        "--eval-episodes",
        "2",
        "--seed",
        "0",
    )
    first = her_wrap(*command, "--save-freq", "100", "--verbose", "0", *TINY, cwd=tmp_path)
    assert first.returncode == 0, report(first)
    checkpoint, buffer = checkpoint_paths(run_dir_of(tmp_path), 100)
    # Only the latest checkpoint (300) keeps its replay buffer: this resume continues with an empty one.
    without = her_wrap(*command, "-i", str(checkpoint), "--verbose", "0", *TINY, cwd=tmp_path)
    assert without.returncode == 0, report(without)
    # As a run stopped after its 100-step checkpoint would have left it: that checkpoint with a buffer.
    shutil.copyfile(checkpoint_paths(run_dir_of(tmp_path), 300)[1], buffer)
    second = her_wrap(*command, "-i", str(checkpoint), "--verbose", "0", *TINY, cwd=tmp_path)
    assert second.returncode == 0, report(second)

    task = EntryTask(ENV_ID, 300, eval_freq=100, eval_episodes=2)
    overrides = tuple(TINY[1 : TINY.index("--num-threads")])
    with pytest.raises(UsageError, match="without its replay buffer"):
        check_run(task, run_dir_of(tmp_path, 2), overrides)
    chain = check_run(task, run_dir_of(tmp_path, 3), overrides)
    steps, _, seconds = chain.curve()
    with np.load(run_dir_of(tmp_path) / "evaluations.npz") as data:
        first_seconds = float(data["train_seconds"][0])
    assert [part.layout.run_dir for part in chain.parts] == [run_dir_of(tmp_path), run_dir_of(tmp_path, 3)]
    assert (steps, chain.resumed_at, seconds[0]) == ([100, 200, 300], [100], first_seconds)
    assert seconds[1] > first_seconds
    assert chain.checkpoint_model_path(100) == checkpoint


# --------------------------------------------------------------------------- optimize


def test_optimize_with_the_default_sqlite_storage(tmp_path: Path) -> None:
    completed = her_wrap(
        "optimize", "--env", ENV_ID, "-n", "100", "--n-trials", "2", "--n-evaluations", "2", "--eval-episodes", "2",
        "--sampler", "random", "--pruner", "none", "--seed", "3", "--verbose", "0", *TINY, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    study_dir = tmp_path / "logs" / "her" / f"her-{ENV_ID}-dqn"
    best = load_yaml_file(study_dir / "best_hyperparams.yml")[ENV_ID]
    outcome = (
        sorted(path.name for path in study_dir.iterdir()),
        best["env_kwargs"],
        best["policy_kwargs"]["net_arch"],
    )
    assert outcome == (["best_hyperparams.yml", "study.db", "trials.csv"], {"n_bits": 4}, [16])


@pytest.mark.postgres
@needs_postgres
def test_two_optimize_workers_share_one_postgresql_study(tmp_path: Path) -> None:
    import optuna

    from her_wrap.runs.study_storage import open_storage

    assert POSTGRES_URL is not None
    study_name = f"test-cli-{uuid.uuid4().hex[:12]}"
    command = [
        "optimize", "--env", ENV_ID, "-n", "100", "--n-trials", "2", "--n-evaluations", "2", "--eval-episodes", "2",
        "--storage", POSTGRES_URL, "--study-name", study_name, "--sampler", "random", "--pruner", "none",
        "--verbose", "0", *TINY,
    ]  # fmt: skip
    workers = [
        start_her_wrap(*command, "-f", str(tmp_path / f"worker{index}"), cwd=tmp_path) for index in range(2)
    ]
    outputs = [worker.communicate(timeout=300)[0] for worker in workers]
    storage = open_storage(POSTGRES_URL)
    try:
        assert [worker.returncode for worker in workers] == [0, 0], outputs
        trials = optuna.load_study(study_name=study_name, storage=storage).trials
        reported = sorted(
            int(number) for output in outputs for number in re.findall(r"^Trial (\d+) complete", output, re.M)
        )
        workers_seen = {trial.user_attrs["worker"] for trial in trials}
        outcome = (
            sorted(trial.number for trial in trials),
            reported,
            {trial.state.name for trial in trials},
            len(workers_seen),
        )
        assert outcome == ([0, 1, 2, 3], [0, 1, 2, 3], {"COMPLETE"}, 2)
    finally:
        optuna.delete_study(study_name=study_name, storage=storage)


# --------------------------------------------------------------------------- bad input


class BadInputCase(NamedTuple):
    """A command that must fail with one line naming the problem, exit status 2 and no traceback."""

    name: str
    args: tuple[str, ...]
    fragment: str


BAD_YAML = "BitFlipping-v0:\n  model_class: dqn\n  n_timesteps: [100\n"
NOT_A_GOAL_ENV = "CartPole-v1: {model_class: dqn, n_timesteps: 100}\n"

BAD_INPUT_CASES = [
    BadInputCase(
        "unknown env id",
        ("train", "--env", "BitFliping-v0"),
        "unknown env id 'BitFliping-v0'; did you mean BitFlipping-v0",
    ),
    BadInputCase(
        "env id missing from the config",
        ("train", "--env", "CartPole-v1"),
        "has no entry for 'CartPole-v1'; its entries: BitFlipping-v0",
    ),
    BadInputCase("malformed YAML", ("train", "--env", ENV_ID, "-c", "bad.yml"), "bad.yml, line 4"),
    BadInputCase(
        "unknown hyperparameter",
        ("train", "--env", ENV_ID, "-params", "learnin_rate:1e-3"),
        "unknown hyperparameter 'learnin_rate' for dqn (did you mean 'learning_rate'?); valid: ",
    ),
    BadInputCase(
        "not a goal env",
        ("train", "--env", "CartPole-v1", "-c", "cartpole.yml"),
        "CartPole-v1 cannot be used with HER",
    ),
    BadInputCase(
        "learner does not fit the actions",
        ("train", "--env", "BitFlippingContinuous-v0", "--algo", "dqn", "-n", "10"),
        "needs Discrete actions",
    ),
    BadInputCase(
        "unreachable storage",
        ("optimize", "--env", ENV_ID, "--storage", "postgresql://u:secret@127.0.0.1:1/db"),
        "cannot open the Optuna storage postgresql://u:***@127.0.0.1:1/db",
    ),
    BadInputCase("enjoy without runs", ("enjoy", "--env", ENV_ID), "no runs of BitFlipping-v0 in logs/her"),
    BadInputCase(
        "resume from a missing path",
        ("train", "--env", ENV_ID, "-i", "nowhere.zip"),
        "no saved agent at nowhere.zip",
    ),
    BadInputCase("plot without runs", ("plot",), "nothing to plot"),
]


@pytest.mark.parametrize("case", BAD_INPUT_CASES, ids=lambda case: case.name)
def test_bad_input_is_one_line_and_exit_2(case: BadInputCase, tmp_path: Path) -> None:
    (tmp_path / "bad.yml").write_text(BAD_YAML)
    (tmp_path / "cartpole.yml").write_text(NOT_A_GOAL_ENV)
    completed = her_wrap(*case.args, cwd=tmp_path, timeout=120)
    command = case.args[0]
    assert (completed.returncode, completed.stderr.count("\n"), "Traceback" in completed.stderr) == (
        2,
        1,
        False,
    ), report(completed)
    assert (
        completed.stderr.startswith(f"her-wrap {command}: error: ") and case.fragment in completed.stderr
    ), report(completed)


def test_resuming_a_finished_agent_asks_for_a_larger_budget(
    trained: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    completed = her_wrap("train", "--env", ENV_ID, "-i", str(run_dir_of(trained[0])), cwd=trained[0])
    assert (completed.returncode, "pass a larger -n" in completed.stderr) == (2, True), report(completed)
    assert not run_dir_of(trained[0], 2).exists()


def test_the_command_starts_without_torch() -> None:
    """Bad input is reported before torch, stable-baselines3, Optuna or matplotlib are imported."""
    probe = "import sys, her_wrap.runs.cli; print(sorted(m for m in ('torch', 'stable_baselines3', 'optuna', 'matplotlib') if m in sys.modules))"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert completed.stdout.strip() == "[]", report(completed)


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "her-wrap"
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (package not installed in this environment)")
    completed = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert (
        completed.returncode,
        all(name in completed.stdout for name in ("train", "enjoy", "plot", "optimize")),
    ) == (0, True)


@pytest.mark.parametrize("budget", [["--max-minutes", "0.02"], ["-params", "max_minutes:0.02"]])
def test_train_stops_after_max_minutes_as_a_finished_run(budget: list[str], tmp_path: Path) -> None:
    """The flag and the entry's key: a last evaluation, the final agent saved, short of n_timesteps."""
    completed = her_wrap(
        "train", "--env", ENV_ID, "-n", "10000000", "--eval-freq", "100000", "--eval-episodes", "2",
        "--verbose", "0", "--seed", "0", *TINY, *budget, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, report(completed)
    match = re.search(
        r"Trained 0\.02 minutes \(max_minutes\), .* stopped at step (\d+) of 10000000", completed.stdout
    )
    assert match, report(completed)
    steps = int(match.group(1))
    run_dir = run_dir_of(tmp_path)
    assert 0 < steps < 10_000_000
    with zipfile.ZipFile(run_dir / f"{ENV_ID}.zip") as saved:
        assert json.loads(saved.read("data"))["num_timesteps"] == steps
    assert np.load(run_dir / "evaluations.npz")["timesteps"].tolist() == [steps]
    assert load_yaml_file(run_dir / ENV_ID / "config.yml")[ENV_ID]["max_minutes"] == 0.02
