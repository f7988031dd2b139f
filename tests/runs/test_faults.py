"""What a run does when the machine or the env lets it down: signals, truncated checkpoints, a full disk,
NaN from the env, a diverged learner. Each ends in one line and a documented exit status, nothing lost."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from cli_processes import environment, signal_once_training

from her_wrap import HER, BitFlippingEnv
from her_wrap.envs.checks import NonFiniteDataError, check_finite_step
from her_wrap.runs import cli
from her_wrap.runs import train as train_module
from her_wrap.runs.atomic import TEMPORARY_PREFIX, atomic_write, atomic_write_text
from her_wrap.runs.callbacks import FiniteParameters, SignalStop, announces_stop
from her_wrap.runs.checkpoints import checkpoint_timesteps, resolve_saved_agent
from her_wrap.runs.errors import RunError
from her_wrap.runs.workers import Worker

ROOT = Path(__file__).resolve().parents[2]
#: The shipped bit-flipping entry, small enough to train in seconds.
SMALL_BITS = [
    "-params",
    "env_kwargs.n_bits:4",
    "learning_starts:50",
    "train_freq:[4,step]",
    "gradient_steps:1",
]


def _train_command(log_folder: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "her_wrap.runs.cli", "train", "--env", "BitFlipping-v0", "--seed", "0",
        "--eval-freq", "0", "--no-progress", "-f", str(log_folder), *SMALL_BITS, *extra,
    ]  # fmt: skip


def _run_folder(log_folder: Path) -> Path:
    (folder,) = (log_folder / "her").glob("BitFlipping-v0_*")
    return folder


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_train_with_a_loadable_checkpoint(signum: int, status: int, tmp_path: Path) -> None:
    returncode, rest, err = signal_once_training(
        _train_command(tmp_path, "-n", "1e7", "--save-replay-buffer"), signum, settle_s=2.0
    )
    assert returncode == status, err
    saved_lines = [line for line in rest.splitlines() if line.startswith("Stopped by")]
    assert len(saved_lines) == 1 and signal.Signals(signum).name in saved_lines[0]
    assert "Traceback" not in err
    run_dir = _run_folder(tmp_path)
    (timesteps,) = checkpoint_timesteps(run_dir)
    assert (run_dir / f"rl_model_replay_buffer_{timesteps}_steps.pkl").is_file()
    model = HER.load(str(run_dir / f"rl_model_{timesteps}_steps.zip"))
    assert model.num_timesteps == timesteps > 0
    obs, _ = BitFlippingEnv(n_bits=4).reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert 0 <= int(np.asarray(action)) < 4


@pytest.mark.parametrize(("extra", "kept"), [(("--save-freq", "300"), True), ((), False)])
def test_a_stopped_run_that_checkpoints_keeps_its_replay_buffer_with_the_stop(
    extra: tuple[str, ...], kept: bool, tmp_path: Path
) -> None:
    """Resuming takes the newest checkpoint, the stop's: in a run that checkpoints its replay buffer, that
    one keeps it too (else the resumed run would start on an empty buffer)."""
    returncode, rest, err = signal_once_training(
        _train_command(tmp_path, "-n", "1e7", *extra), signal.SIGTERM, settle_s=2.0
    )
    assert returncode == 143, err
    (line,) = [line for line in rest.splitlines() if line.startswith("Stopped by")]
    run_dir = _run_folder(tmp_path)
    stopped_at = int(line.split(" at step ")[1].split(":")[0])
    assert checkpoint_timesteps(run_dir)[-1] == stopped_at
    assert (run_dir / f"rl_model_replay_buffer_{stopped_at}_steps.pkl").is_file() is kept
    assert sorted(path.name for path in run_dir.glob("rl_model_replay_buffer_*")) == (
        [f"rl_model_replay_buffer_{stopped_at}_steps.pkl"] if kept else []
    )


def test_train_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for fragment in ("SIGTERM", "143", "130", "second signal", "status 3", "status 2"):
        assert fragment in help_text, fragment


def test_a_second_signal_exits_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    stop = SignalStop()
    stop._handle(signal.SIGTERM, None)
    assert stop.received == signal.SIGTERM and not stop._on_step()
    assert exits == []
    stop._handle(signal.SIGTERM, None)
    assert exits == [143]


def test_a_worker_takes_the_same_signal_again_for_the_same_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler that signals every process of a job, while the launcher passes the signal on, reaches
    each worker twice: that is one stop. Another signal still exits at once; alone, so does a repeat."""
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    worker = SignalStop(synchronized=True, announce=False)
    worker._handle(signal.SIGTERM, None)
    worker._handle(signal.SIGTERM, None)
    assert exits == [] and worker.received == signal.SIGTERM
    worker._handle(signal.SIGINT, None)  # another signal
    assert exits == [130]
    one_process = SignalStop()
    one_process._handle(signal.SIGTERM, None)
    one_process._handle(signal.SIGTERM, None)
    assert exits == [130, 143]


@pytest.mark.parametrize("synchronized", [False, True])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_is_announced_in_the_words_a_reader_of_the_run_recognises(
    signum: int, synchronized: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process that runs ``her-wrap train`` (the lab's results runner) tells by the run's first line
    after a signal that the run saves on its own; a second signal's line is not that announcement."""
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    stop = SignalStop(synchronized=synchronized)
    stop._handle(signum, None)
    (first,) = capsys.readouterr().out.splitlines()
    assert announces_stop(first), first
    other = signal.SIGINT if signum == signal.SIGTERM else signal.SIGTERM
    stop._handle(other, None)
    again = capsys.readouterr().out.splitlines()[0]
    assert exits and "again" in again and not announces_stop(again), again
    assert not announces_stop("Saved checkpoint /runs/rl_model_100_steps.zip")
    assert announces_stop(f"| time/ {first}")  # printed between another line's text and its end


class _WriteInProgress:
    """A stdout that a signal interrupted inside a write: writing again raises, as CPython's buffered
    writer does for a reentrant call, and its file descriptor is ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stdout>'>")

    def flush(self) -> None:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stdout>'>")

    def fileno(self) -> int:
        return self.fd


def test_a_signal_inside_a_write_to_stdout_is_still_announced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler's ``print`` that lands inside a print raises ``RuntimeError: reentrant call`` into the
    training loop: the announcement goes to stdout's file descriptor instead, and the run goes on to save."""
    read_end, write_end = os.pipe()
    try:
        monkeypatch.setattr(sys, "stdout", _WriteInProgress(write_end))
        stop = SignalStop()
        stop._handle(signal.SIGTERM, None)
        os.close(write_end)
        write_end = -1
        with os.fdopen(read_end) as announced:
            read_end = -1
            lines = announced.read().splitlines()
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    assert stop.received == signal.SIGTERM and not stop._on_step()
    assert len(lines) == 1 and announces_stop(lines[0]), lines


class _SettingUp(Exception):
    """Where the test ends a worker's setup."""


def test_a_worker_of_several_takes_a_stop_that_comes_while_it_sets_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The launcher passes a stop on to every worker: one still building its envs stops with the others at
    their first training cycle instead of dying of the signal (and leaving them without a partner)."""
    monkeypatch.setattr(train_module.workers, "join_workers", lambda args: Worker(rank=1, world=2))
    monkeypatch.setattr(train_module.workers, "resume_restarted_run", lambda args: None)
    # One of two workers with no group to talk to: rank 0's seed and run folder are its own.
    monkeypatch.setattr(Worker, "seed", lambda self, seed: seed)
    monkeypatch.setattr(Worker, "run_dir", lambda self, create: tmp_path / "her" / "BitFlipping-v0_1")
    handled_by: list[Any] = []

    def setting_up(*args: Any, **kwargs: Any) -> None:
        signal.raise_signal(signal.SIGTERM)  # the launcher's stop, passed on
        handled_by.append(signal.getsignal(signal.SIGTERM))
        raise _SettingUp

    monkeypatch.setattr(train_module, "make_training_envs", setting_up)
    reached_the_process: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: reached_the_process.append(signum))
    try:
        args = cli.build_parser().parse_args(
            ["train", "--env", "BitFlipping-v0", "-f", str(tmp_path), *SMALL_BITS]
        )
        with pytest.raises(_SettingUp):
            train_module.train(args)
        assert reached_the_process == []
        (handler,) = handled_by
        assert isinstance(handler.__self__, SignalStop) and handler.__self__.received == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is not handler  # the process's own again
    finally:
        signal.signal(signal.SIGTERM, before)


def test_signal_handlers_are_restored_after_training() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with SignalStop().handling() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._handle
    assert signal.getsignal(signal.SIGTERM) == before


# --------------------------------------------------------------------------- truncated checkpoints


@pytest.fixture(scope="module")
def run_with_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log_folder = tmp_path_factory.mktemp("logs")
    subprocess.run(
        _train_command(log_folder, "-n", "600", "--save-freq", "200"),
        env=environment(),
        check=True,
        capture_output=True,
    )
    return _run_folder(log_folder)


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of a run folder under ``tmp_path``, in the same ``her/ENV_ID_N`` layout."""
    copy = tmp_path / run_dir.parent.name / run_dir.name
    copy.parent.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(run_dir), str(copy)], check=True)
    return copy


def _resume(run_dir: Path, log_folder: Path) -> subprocess.CompletedProcess[str]:
    """``her-wrap train -i RUN_DIR`` on to 700 steps, into ``log_folder``; it must succeed."""
    resumed = subprocess.run(
        _train_command(log_folder, "-n", "700", "-i", str(run_dir)),
        env=environment(),
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    return resumed


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_resuming_a_folder_skips_a_truncated_newest_agent(
    run_with_checkpoints: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = copy_run(run_with_checkpoints, tmp_path)
    _truncate(run_dir / "BitFlipping-v0.zip")
    _truncate(run_dir / "rl_model_600_steps.zip")
    saved = resolve_saved_agent(run_dir)
    assert saved.model == (run_dir / "rl_model_400_steps.zip").resolve()
    out = capsys.readouterr().out
    assert out.count("Skipping") == 2
    assert "BitFlipping-v0.zip: not a" in out and "rl_model_600_steps.zip: not a" in out


def test_train_resuming_a_folder_says_once_what_it_skips(run_with_checkpoints: Path, tmp_path: Path) -> None:
    run_dir = copy_run(run_with_checkpoints, tmp_path)
    _truncate(run_dir / "BitFlipping-v0.zip")
    resumed = _resume(run_dir, tmp_path / "again")
    skipped = [line for line in resumed.stdout.splitlines() if line.startswith("Skipping")]
    assert len(skipped) == 1 and "BitFlipping-v0.zip: not a" in skipped[0]
    (args_file,) = (tmp_path / "again" / "her").glob("BitFlipping-v0_*/BitFlipping-v0/args.yml")
    assert f"trained_agent: {run_dir / 'rl_model_600_steps.zip'}" in args_file.read_text()


def test_a_truncated_agent_given_directly_is_one_line_naming_the_newest_good_one(
    run_with_checkpoints: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(run_with_checkpoints, tmp_path)
    broken = run_dir / "rl_model_600_steps.zip"
    _truncate(broken)
    resumed = subprocess.run(
        _train_command(tmp_path / "again", "-n", "800", "-i", str(broken)),
        env=environment(),
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 3
    assert "Traceback" not in resumed.stderr
    (line,) = resumed.stderr.strip().splitlines()
    assert str(broken) in line and "rl_model_400_steps.zip" in line


def test_a_corrupt_zip_outside_a_run_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "agent.zip"
    fake.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(RunError, match=r"cannot load the agent .*agent\.zip: not a complete zip file"):
        resolve_saved_agent(fake)


# --------------------------------------------------------------------------- a full disk


def _full_disk_writer(partial: bytes) -> Any:
    def write(path: Path) -> None:
        path.write_bytes(partial)
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def test_a_full_disk_is_one_line_and_keeps_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "agent.zip"
    atomic_write_text(target, "previous version " * 1000)
    with pytest.raises(RunError) as raised:
        atomic_write(target, _full_disk_writer(b"x" * 10))
    message = str(raised.value)
    assert str(target) in message and "no space left" in message and "it needs about 17 kB" in message
    assert "\n" not in message
    assert target.read_text() == "previous version " * 1000
    assert not list(tmp_path.glob(f"{TEMPORARY_PREFIX}*"))


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path: Path) -> None:
    def refuse(path: Path) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        atomic_write(tmp_path / "a.txt", refuse)


def test_train_on_a_full_disk_ends_in_one_line_with_the_last_checkpoint_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    saves = []
    original_save = HER.save

    def save(self: HER, path: Any, *args: Any, **kwargs: Any) -> None:
        saves.append(path)
        if len(saves) > 1:
            Path(str(path)).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        original_save(self, path, *args, **kwargs)

    monkeypatch.setattr(HER, "save", save)
    argv = _train_command(tmp_path, "-n", "600", "--save-freq", "200")[3:]
    assert cli.main(argv) == cli.EXIT_RUN_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left" in err[0] and "rl_model_400_steps.zip" in err[0]
    run_dir = _run_folder(tmp_path)
    assert checkpoint_timesteps(run_dir) == [200]
    # the replay buffer written for the failed checkpoint would only take space: it goes too
    assert sorted(path.name for path in run_dir.glob("rl_model_replay_buffer_*")) == [
        "rl_model_replay_buffer_200_steps.pkl"
    ]
    assert HER.load(str(run_dir / "rl_model_200_steps.zip")).num_timesteps == 200
    assert not list(run_dir.glob(f"{TEMPORARY_PREFIX}*"))


# --------------------------------------------------------------------------- a broken env


class NaNAfter(gym.Wrapper):
    """A goal env whose observations turn NaN after ``steps`` steps."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        super().__init__(env)
        self.steps = steps
        self.taken = 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.taken += 1
        if self.taken > self.steps:
            obs = {**obs, "observation": np.full_like(obs["observation"], np.nan, dtype=np.float32)}
        return obs, reward, terminated, truncated, info


def _nan_env() -> gym.Env:
    return NaNAfter(BitFlippingEnv(n_bits=4, continuous=True), steps=30)


def test_nan_from_the_env_is_refused_before_it_is_stored() -> None:
    model = HER("MultiInputPolicy", _nan_env(), "sac", learning_starts=10_000, seed=0)
    with pytest.raises(NonFiniteDataError, match=r"env column 0 returned observation = nan at step 30"):
        model.learn(100)
    assert model.replay_buffer.steps_added == 30
    batch = model.replay_buffer.sample(16)
    assert all(bool(np.isfinite(tensor.numpy()).all()) for tensor in batch.observations.values())


def test_nan_from_the_env_is_stored_when_the_check_is_off() -> None:
    model = HER("MultiInputPolicy", _nan_env(), "sac", learning_starts=10_000, seed=0, check_finite=False)
    model.learn(60)
    assert model.replay_buffer.steps_added == 60


@pytest.mark.parametrize(
    ("field", "values", "fragment"),
    [
        ("reward", {"reward": np.array([0.0, np.inf])}, "env column 1 returned reward = inf at step 7"),
        ("goal", {"desired_goal": np.array([[0.0], [np.nan]])}, "env column 1 returned desired_goal = nan"),
    ],
)
def test_the_check_names_the_column_and_field(field: str, values: dict[str, Any], fragment: str) -> None:
    obs = {"observation": np.zeros((2, 3)), "desired_goal": np.zeros((2, 1))}
    obs.update({key: value for key, value in values.items() if key != "reward"})
    reward = values.get("reward", np.zeros(2))
    with pytest.raises(NonFiniteDataError, match=fragment):
        check_finite_step(obs, reward, 7)
    check_finite_step({"observation": np.zeros((2, 3))}, np.zeros(2), 7)  # finite: no error


def test_train_on_a_nan_env_ends_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gym.register("NaNBits-v0", entry_point=_nan_env, max_episode_steps=4)
    try:
        config = tmp_path / "nan.yml"
        config.write_text(
            "NaNBits-v0:\n  model_class: sac\n  n_timesteps: 200\n  learning_starts: 1000\n", encoding="utf-8"
        )
        status = cli.main(
            ["train", "--env", "NaNBits-v0", "-c", str(config), "-f", str(tmp_path), "--seed", "0"]
        )
    finally:
        gym.registry.pop("NaNBits-v0")
    assert status == cli.EXIT_RUN_FAILED
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("her-wrap train: error: NaNBits-v0: env column 0 returned observation = nan")
    assert "check_finite" in line


# --------------------------------------------------------------------------- a diverged learner


def test_non_finite_parameters_stop_the_run_naming_the_last_checkpoint(tmp_path: Path) -> None:
    import torch

    model = HER("MultiInputPolicy", BitFlippingEnv(n_bits=4, continuous=True), "sac", seed=0)
    kept = tmp_path / "rl_model_200_steps.zip"
    check = FiniteParameters(every=100, last_checkpoint=lambda: kept)
    check.init_callback(model.model)
    check.check()  # finite: nothing raised
    with torch.no_grad():
        next(model.policy.parameters()).fill_(float("nan"))
    with pytest.raises(RunError, match=rf"NaN or infinite .*last good checkpoint: {kept}"):
        check.check()


def test_the_drop_in_buffer_refuses_nan_before_a_sample_reads_it() -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from her_wrap.sb3 import HerReplayBuffer

    env = DummyVecEnv([lambda: BitFlippingEnv(n_bits=4, continuous=True)])
    buffer = HerReplayBuffer(1000, env.observation_space, env.action_space, env, n_sampled_goal=4)
    obs = env.reset()
    for step in range(8):
        next_obs = {key: value.copy() for key, value in obs.items()}
        if step == 5:
            next_obs["achieved_goal"][:] = np.inf
        buffer.add(obs, next_obs, np.zeros((1, 4)), np.zeros(1), np.array([False]), [{}])
        obs = next_obs
    with pytest.raises(NonFiniteDataError, match="env column 0 returned achieved_goal = inf at step 5"):
        buffer.sample(4)
    assert buffer.replay.storage.n_transitions == 5  # the steps before it, nothing of it or after it


def test_resuming_a_folder_removes_what_a_kill_left_half_written(
    run_with_checkpoints: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(run_with_checkpoints, tmp_path)
    (run_dir / "BitFlipping-v0.zip").unlink()  # killed before the end
    stale = run_dir / f"{TEMPORARY_PREFIX}rl_model_800_steps-x1y2.zip"
    stale.write_bytes(b"PK half a zip")
    _resume(run_dir, tmp_path / "again")
    assert not stale.exists()
    assert sorted(path.name for path in run_dir.glob("rl_model_*_steps.zip")) == [
        "rl_model_200_steps.zip",
        "rl_model_400_steps.zip",
        "rl_model_600_steps.zip",
    ]
