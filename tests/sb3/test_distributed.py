"""Multi-worker training: two gloo workers on CPU, one process each (tests/sb3/distributed_workers.py)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.running_mean_std import RunningMeanStd

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs import cli, launcher, launcher_stop, workers
from her_wrap.runs.errors import STOP_SIGNALS, UsageError
from her_wrap.runs.yaml_io import load_yaml_file
from her_wrap.sb3.distributed import (
    UnshareableSettingError,
    check_shared_settings,
    moments_since,
    with_distributed_training,
)

ROOT = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "distributed_workers.py"
sys.path.insert(0, str(WORKERS.parent))

from cli_processes import environment, signal_once_training  # noqa: E402
from distributed_workers import VARIANTS, one_step_data, statistics_data  # noqa: E402

#: Options that make the bit-flipping entry train every so many steps (not episodes), as workers need, and
#: pin its seed.
STEP_TRAINING = ["--seed", "1", "-params", "train_freq:[64,step]", "gradient_steps:4"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(scenario: str, out: Path, learner: str = "sac", world: int = 2) -> list[subprocess.Popen[str]]:
    port = _free_port()
    return [
        subprocess.Popen(
            [sys.executable, str(WORKERS), scenario, str(rank), str(world), str(port), str(out), learner],
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]


def _reap(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.fixture
def start_workers(tmp_path: Path) -> Iterator:
    """Start one process per rank of a scenario writing into tmp_path; whatever still runs at the end is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(scenario: str, learner: str = "sac") -> list[subprocess.Popen[str]]:
        started.extend(_start(scenario, tmp_path, learner))
        return started[-2:]

    yield start
    _reap(started)


@pytest.fixture(scope="module", params=["sac", "td3", "dqn", "tqc", "ddpg-update-options", "sac-laber"])
def trained(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """Two workers trained a tiny learner for 64 steps each (a few gradient steps): its name and their files."""
    out = tmp_path_factory.mktemp(f"trained_{request.param}")
    processes = _start("train", out, request.param)
    try:
        for status, err in _finish(processes):
            assert status == 0, err
    finally:
        _reap(processes)
    yield request.param, out


def _finish(processes: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[int, str]]:
    """Each worker's exit status and what it wrote (stderr, then the end of stdout, for assertion messages)."""
    results = []
    for process in processes:
        out, err = process.communicate(timeout=timeout)
        results.append((process.returncode, f"{err}\n--- stdout (end) ---\n{out[-2000:]}"))
    return results


def test_parameters_stay_bit_identical_across_workers(trained: tuple[str, Path]) -> None:
    _, out = trained
    ranks = [np.load(out / f"rank{rank}.npz") for rank in range(2)]
    assert ranks[0]["n_updates"] > 0
    np.testing.assert_array_equal(ranks[0]["parameters"], ranks[1]["parameters"])


def test_normalizer_statistics_are_the_same_on_every_worker_and_count_everyones_data(
    trained: tuple[str, Path],
) -> None:
    _, out = trained
    ranks = [np.load(out / f"rank{rank}.npz") for rank in range(2)]
    for key in ("observation", "achieved_goal", "desired_goal"):
        np.testing.assert_array_equal(ranks[0][f"mean_{key}"], ranks[1][f"mean_{key}"])
        # 64 steps on each worker, and rank 0's first reset observation.
        assert ranks[0][f"count_{key}"] == pytest.approx(2 * 64 + 1, abs=1e-3)


def test_model_trained_by_two_workers_loads_in_one_process(trained: tuple[str, Path]) -> None:
    learner, out = trained
    env = BitFlippingEnv(n_bits=4, continuous=learner != "dqn", max_steps=4)
    her = HER.load(out / "model.zip", env=env)
    observation, _ = env.reset(seed=0)
    action, _ = her.predict(observation, deterministic=True)
    assert np.shape(action) == ((4,) if learner != "dqn" else ())
    assert her.normalizer is not None and her.normalizer.obs_rms["observation"].count > 64


def _train_two_workers(out: Path, learner: str) -> list[dict[str, np.ndarray]]:
    out.mkdir()
    processes = _start("train", out, learner)
    try:
        for status, err in _finish(processes):
            assert status == 0, err
    finally:
        _reap(processes)
    return [dict(np.load(out / f"rank{rank}.npz")) for rank in range(2)]


@pytest.mark.parametrize("learner", ["ddpg-update-options", "td3-per-cycle"])
def test_actor_and_critic_gradients_share_one_all_reduce_and_take_the_same_steps(
    learner: str, tmp_path: Path
) -> None:
    joint = _train_two_workers(tmp_path / "joint", learner)
    separate = _train_two_workers(tmp_path / "separate", learner + "-separate")
    for rank in range(2):
        np.testing.assert_array_equal(joint[rank]["parameters"], separate[rank]["parameters"])
    updates = int(joint[0]["n_updates"])
    assert updates == int(separate[0]["n_updates"]) > 0
    her = HER.load(tmp_path / "joint" / "model.zip")
    actor, critic = (
        sum(p.numel() for p in module.optimizer.param_groups[0]["params"])
        for module in (her.model.actor, her.model.critic)
    )
    sizes_joint, sizes_separate = joint[0]["all_reduce_sizes"], separate[0]["all_reduce_sizes"]
    actor_steps = int(np.sum(sizes_separate == actor))
    assert int(np.sum(sizes_separate == critic)) == updates
    assert int(np.sum(sizes_separate == actor + critic)) == 0
    # A train call's last actor step is averaged alone (the targets move after it); every other actor
    # step rides with the next critic step, whose gradients are then not averaged on their own.
    fused = int(np.sum(sizes_joint == actor + critic))
    lone_actor = int(np.sum(sizes_joint == actor))
    assert fused > 0 and fused + lone_actor == actor_steps
    assert int(np.sum(sizes_joint == critic)) + fused == updates
    assert len(sizes_joint) == len(sizes_separate) - fused
    if learner.startswith("ddpg"):  # an actor step at each of the 2 gradient steps of a call
        assert actor_steps == updates and fused == updates // 2
    # While each all-reduce of a call but its last is in flight, the next step's batch is drawn (one
    # draw); the steps above are bit-identical to those that drew it after.
    gradient_steps = VARIANTS[learner][1].get("gradient_steps", 2)
    calls = updates // gradient_steps
    for rank in range(2):
        in_flight = joint[rank]["draws_in_flight"]
        assert set(in_flight.tolist()) == {0, 1}
        assert int(in_flight.sum()) == updates - calls
        assert int(separate[rank]["draws_in_flight"].sum()) == 0


def test_averaged_step_equals_one_step_on_the_mean_gradient_and_statistics_equal_the_union(
    start_workers, tmp_path: Path
) -> None:
    for status, err in _finish(start_workers("units")):
        assert status == 0, err
    ranks = [np.load(tmp_path / f"rank{rank}.npz") for rank in range(2)]

    th.manual_seed(0)
    model = th.nn.Linear(5, 2)
    optimizer = th.optim.Adam(model.parameters(), lr=0.01)
    gradients = []
    for rank in range(2):
        inputs, targets = one_step_data(rank)
        model.zero_grad()
        th.nn.functional.mse_loss(model(inputs), targets).backward()
        gradients.append([param.grad.clone() for param in model.parameters()])  # type: ignore[union-attr]
    for param, first, second in zip(model.parameters(), *gradients, strict=True):
        param.grad = (first + second) / 2
    optimizer.step()
    for rank in ranks:
        np.testing.assert_array_equal(rank["weight"], model.weight.detach().numpy())
        np.testing.assert_array_equal(rank["bias"], model.bias.detach().numpy())

    union = RunningMeanStd(shape=(3,))
    union.update(np.concatenate([statistics_data(rank, part) for rank in range(2) for part in range(2)]))
    for rank in ranks:
        np.testing.assert_allclose(rank["mean"], union.mean, rtol=1e-10)
        np.testing.assert_allclose(rank["var"], union.var, rtol=1e-10)
        assert rank["count"] == pytest.approx(union.count)


def test_moments_since_undoes_a_merge() -> None:
    rng = np.random.default_rng(0)
    base, both = RunningMeanStd(shape=(2,)), RunningMeanStd(shape=(2,))
    first, added = rng.normal(size=(9, 2)), rng.normal(3.0, 2.0, size=(13, 2))
    base.update(first)
    both.update(first)
    both.update(added)
    mean, var, count = moments_since((base.mean, base.var, base.count), (both.mean, both.var, both.count))
    assert count == pytest.approx(13)
    np.testing.assert_allclose(mean, added.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(var, added.var(axis=0), rtol=1e-10)


def test_workers_that_disagree_on_batch_size_refuse_to_train(start_workers) -> None:
    for status, err in _finish(start_workers("mismatched")):
        assert status == 4, err
        assert "disagree on batch_size" in err


def test_killed_worker_makes_the_other_exit_with_an_error_within_30_seconds(
    start_workers, tmp_path: Path
) -> None:
    survivor, victim = start_workers("train_forever", "td3")
    deadline = time.monotonic() + 90
    while not (tmp_path / "ready1").exists():
        assert victim.poll() is None and survivor.poll() is None, "a worker ended before training"
        assert time.monotonic() < deadline, "the workers did not start training"
        time.sleep(0.1)
    victim.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    _, err = survivor.communicate(timeout=30)
    assert time.monotonic() - killed < 30
    assert survivor.returncode != 0
    assert "WorkerLostError" in err and "lost the other workers" in err


def test_train_frequency_in_episodes_cannot_be_shared() -> None:
    her = HER(
        "MultiInputPolicy", BitFlippingEnv(n_bits=4), "dqn", train_freq=(1, "episode"), learning_starts=8
    )
    with pytest.raises(ValueError, match="train_freq counted in episodes"):
        check_shared_settings(her.model)


def test_one_process_trains_without_the_distributed_callback() -> None:
    assert with_distributed_training(None, None) is None


def _train_error(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    status = cli.main(["train", "--env", "BitFlipping-v0", "-n", "100", "--seed", "1", *extra])
    assert status == 2
    return capsys.readouterr().err


def test_zero_workers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--env", "BitFlipping-v0", "--workers", "0"])
    assert exit_info.value.code == 2
    assert "--workers: expected a positive integer, got '0'" in capsys.readouterr().err


def test_more_workers_than_cores_needs_oversubscribe(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    many = str(launcher.available_cores() + 1)
    err = _train_error(capsys, "--workers", many, "-f", str(tmp_path))
    assert f"--workers {many} is more than the" in err and "--oversubscribe" in err
    assert not (tmp_path / "her").exists()


def test_rendezvous_port_in_use_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _train_error(capsys, "--workers", "2", "--oversubscribe", "--rendezvous-port", str(port))
    assert f"--rendezvous-port {port} is in use" in err


def test_workers_refuse_a_gpu_device(capsys: pytest.CaptureFixture[str]) -> None:
    err = _train_error(capsys, "--workers", "2", "--oversubscribe", "--device", "cuda")
    assert "--device cuda" in err and "torchrun" in err


def test_train_frequency_in_episodes_is_refused_before_workers_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = _train_error(capsys, "--workers", "2", "--oversubscribe", "-params", "train_freq:[1,episode]")
    assert "train_freq [1, 'episode'] counts episodes" in err


def test_workers_option_under_torchrun_must_match(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    err = _train_error(capsys, "--workers", "3", "-f", str(tmp_path))
    assert "leave --workers out under torchrun" in err


def test_entry_workers_start_that_many_workers_and_the_option_replaces_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from her_wrap.runs import train

    launched: list[int] = []
    trained: list[int | None] = []
    monkeypatch.setattr(launcher, "launch", lambda args, entry: launched.append(args.workers) or 0)
    monkeypatch.setattr(train, "train", lambda args: trained.append(args.workers))
    entry = ["train", "--env", "BitFlipping-v0", "-f", str(tmp_path), "-params", "workers:2"]
    assert cli.main(entry) == 0
    assert cli.main([*entry, "--workers", "1"]) == 0
    assert cli.main([*entry, "--workers", "3", "--oversubscribe"]) == 0
    assert cli.main(["train", "--env", "BitFlipping-v0", "-f", str(tmp_path)]) == 0
    assert launched == [2, 3] and trained == [1, None]


def test_bad_entry_workers_is_refused_before_any_worker_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = _train_error(capsys, "-f", str(tmp_path), "-params", "workers:0")
    assert "workers must be at least 1, got 0" in err
    assert not (tmp_path / "her").exists()


def test_a_setting_every_worker_refuses_exits_2_without_a_restart(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(
        ["train", "--env", "BitFlipping-v0", "-n", "100", "--workers", "2", "--max-restarts", "2",
         "-f", str(tmp_path), *STEP_TRAINING, "policy_kwargs.actor_average:0.1"]
    )  # fmt: skip
    assert status == 2  # as one process exits for a usage error
    err = capfd.readouterr().err
    assert "DQN takes no actor_average" in err and "restarting" not in err


def _two_workers_command(tmp_path: Path, budget: str, option: str) -> list[str]:
    """``her-wrap train --workers 2 OPTION`` on bit flipping for ``budget`` env steps, without evaluations."""
    command = ["train", "--env", "BitFlipping-v0", "-n", budget, "--workers", "2", option, *STEP_TRAINING]
    return [sys.executable, "-m", "her_wrap.runs.cli", *command, "--eval-freq", "0", "-f", str(tmp_path)]


def _launch_two_workers(tmp_path: Path, stderr: int) -> subprocess.Popen[str]:
    """``her-wrap train --workers 2`` on a budget it never reaches, without evaluations."""
    return subprocess.Popen(
        _two_workers_command(tmp_path, "1e7", "--oversubscribe"),
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def test_launcher_names_a_killed_worker_and_stops_the_others(tmp_path: Path) -> None:
    launcher = _launch_two_workers(tmp_path, stderr=subprocess.PIPE)
    try:
        assert launcher.stdout is not None
        started = launcher.stdout.readline()
        match = re.search(r"pids (\d+), (\d+)", started)
        assert match, started
        pids = [int(pid) for pid in match.groups()]
        deadline = time.monotonic() + 90
        while not list(tmp_path.glob("her/*/*.monitor.csv")):
            assert launcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(2)  # into training
        os.kill(pids[1], signal.SIGKILL)
        _, err = launcher.communicate(timeout=30)
        assert launcher.returncode == 1
        assert f"worker 1 (pid {pids[1]}) was killed by signal 9" in err
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()


def test_launcher_names_the_killed_worker_before_the_one_that_lost_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both ended before the launcher looked: the kill is the cause, the peer's lost collective its consequence."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    survivor = context.Process(target=os._exit, args=(workers.EXIT_PEER_LOST,))
    victim = context.Process(target=time.sleep, args=(60,))
    for process in (survivor, victim):
        process.start()
    survivor.join(30)
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(30)
    assert launcher._watch([survivor, victim]) == workers.EXIT_WORKER_FAILED
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"her-wrap train: error: worker 1 (pid {victim.pid}) was killed by signal 9; stopping the other workers",
        f"her-wrap train: error: worker 0 (pid {survivor.pid}) exited with status 3 (it lost the other workers); "
        "stopping the other workers",
    ]


def test_launcher_returns_0_when_every_worker_succeeds() -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=time.sleep, args=(delay,)) for delay in (0.0, 0.5)]
    for process in processes:
        process.start()
    assert launcher._watch(processes) == 0
    assert [process.exitcode for process in processes] == [0, 0]


@pytest.mark.parametrize(
    "entry, status, output",
    [
        ("entry_prints_and_succeeds", 0, "worker output of run-7"),
        ("entry_fails", workers.EXIT_WORKER_FAILED, "RuntimeError: run-7 went wrong"),
        ("entry_loses_its_peers", workers.EXIT_PEER_LOST, "her-wrap train: error: run-7 lost the other"),
        ("entry_refuses_its_input", 2, "her-wrap train: error: worker 1: run-7 has no such option"),
    ],
)
def test_worker_process_ends_with_the_status_of_its_entry_and_its_output_flushed(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, entry: str, status: int, output: str
) -> None:
    """A worker leaves without the interpreter's teardown (os._exit): its status and output must survive that."""
    import argparse
    import multiprocessing

    import distributed_workers

    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # the worker's output is buffered, as in a pipe

    context = multiprocessing.get_context("spawn")
    worker = context.Process(
        target=launcher._worker_main,
        args=(getattr(distributed_workers, entry), argparse.Namespace(name="run-7"), 1, 2, _free_port()),
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == status
    captured = capfd.readouterr()
    assert output in captured.out + captured.err


LAUNCH_ONE_WORKER = """
import argparse, multiprocessing, sys
import distributed_workers
from her_wrap.runs import launcher, workers
worker = multiprocessing.get_context("spawn").Process(
    target=launcher._worker_main,
    args=(distributed_workers.entry_writes_through_tqdm, argparse.Namespace(), 1, 2, int(sys.argv[1])),
)
worker.start()
worker.join(60)
sys.exit(worker.exitcode)
"""


def test_a_worker_leaves_no_semaphore_behind() -> None:
    """A worker leaves through os._exit; the semaphore tqdm made in it is removed on the way, so that the
    launcher's resource tracker does not warn of it as leaked when the run ends."""
    completed = subprocess.run(
        [sys.executable, "-c", LAUNCH_ONE_WORKER, str(_free_port())],
        cwd=WORKERS.parent,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "logged through tqdm" in completed.stdout
    assert "leaked semaphore" not in completed.stderr


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="binding to cores needs Linux")
def test_a_worker_given_a_core_runs_there_with_its_threads(capfd: pytest.CaptureFixture[str]) -> None:
    import argparse
    import multiprocessing

    import distributed_workers

    core = max(os.sched_getaffinity(0))
    context = multiprocessing.get_context("spawn")
    worker = context.Process(
        target=launcher._worker_main,
        args=(distributed_workers.entry_prints_its_cores, argparse.Namespace(), 1, 2, _free_port(), core),
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    assert f"cores [{core}] thread [{core}]" in capfd.readouterr().out


@pytest.mark.parametrize(
    "allowed, count, pin, cores",
    [
        ({0, 1}, 2, None, [0, 1]),  # the workers take every core: bound by default
        ({0, 1}, 1, None, None),  # fewer workers than cores: left to the OS, so two runs do not collide
        ({0, 1}, 1, True, [0]),
        ({0, 1}, 2, False, None),
        ({0, 1}, 3, None, None),  # oversubscribed: cores shared, not bound
        ({3, 5, 9, 12}, 4, None, [3, 5, 9, 12]),  # the cores this process may use (taskset), in order
        ({3, 5, 9, 12}, 2, True, [3, 5]),
    ],
)
def test_worker_cores(
    monkeypatch: pytest.MonkeyPatch,
    allowed: set[int],
    count: int,
    pin: bool | None,
    cores: list[int] | None,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: allowed, raising=False)
    assert launcher.worker_cores(count, pin) == cores


def test_pinning_more_workers_than_cores_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    many = str(launcher.available_cores() + 1)
    err = _train_error(capsys, "--workers", many, "--oversubscribe", "--pin-workers", "-f", str(tmp_path))
    assert f"{many} workers are more than the" in err and "leave --pin-workers out" in err
    assert not (tmp_path / "her").exists()


def test_pinning_without_worker_processes_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(workers.LAUNCHER_ENV, raising=False)
    err = _train_error(capsys, "--workers", "1", "--pin-workers", "-f", str(tmp_path))
    assert "--pin-workers binds the worker processes that --workers N (N > 1) starts" in err
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    err = _train_error(capsys, "--pin-workers", "-f", str(tmp_path))
    assert "a worker of torchrun, which binds with its own options" in err
    assert not (tmp_path / "her").exists()


def test_oversubscribing_without_worker_processes_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(workers.LAUNCHER_ENV, raising=False)
    err = _train_error(capsys, "--oversubscribe", "-f", str(tmp_path))
    assert "--oversubscribe allows --workers N (N > 1) to start more workers than cores" in err
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    err = _train_error(capsys, "--oversubscribe", "-f", str(tmp_path))
    assert "a worker of torchrun, which counts its own" in err
    assert not (tmp_path / "her").exists()


@pytest.mark.parametrize("option", ["--pin-workers", "--oversubscribe"])
def test_the_launchers_options_pass_in_the_workers_it_starts(
    option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = argparse.Namespace(
        pin_workers=option == "--pin-workers", oversubscribe=option == "--oversubscribe"
    )
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv(workers.LAUNCHER_ENV, raising=False)
    with pytest.raises(UsageError, match=option):
        launcher.check_launcher_options(args)  # torchrun's worker
    monkeypatch.setenv(workers.LAUNCHER_ENV, "1234")
    launcher.check_launcher_options(args)  # a worker of her-wrap train --workers 2


@pytest.mark.skipif(launcher.available_cores() < 2, reason="binds two workers to two cores")
def test_two_workers_bound_on_request_train_to_the_end(tmp_path: Path) -> None:
    trained = subprocess.run(
        _two_workers_command(tmp_path, "256", "--pin-workers"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stderr
    assert "bound to cores" in trained.stdout
    assert list(tmp_path.glob("her/BitFlipping-v0_1/BitFlipping-v0.zip"))


def test_workers_stop_when_their_launcher_is_killed(tmp_path: Path) -> None:
    launcher = _launch_two_workers(tmp_path, stderr=subprocess.DEVNULL)
    assert launcher.stdout is not None
    match = re.search(r"pids (\d+), (\d+)", launcher.stdout.readline())
    assert match
    pids = [int(pid) for pid in match.groups()]
    try:
        line = launcher.stdout.readline()
        while "Training HER" not in line:
            assert launcher.poll() is None
            line = launcher.stdout.readline()
        # -n counts each worker's env steps; the line says so, and the run's total.
        assert "for 10000000 steps on each of 2 workers (20000000 in all)" in line, line
        launcher.kill()
        launcher.communicate()
        deadline = time.monotonic() + 30
        while any(_running(pid) for pid in pids):
            assert time.monotonic() < deadline, "workers outlived their launcher by 30 s"
            time.sleep(0.2)
    finally:
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether a process runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _kill_a_worker_after_the_first_checkpoint(launcher: subprocess.Popen[str], log_folder: Path) -> int:
    """Wait until the run saved a checkpoint, then kill its worker 1; return that worker's pid."""
    assert launcher.stdout is not None
    started = launcher.stdout.readline()
    match = re.search(r"pids (\d+), (\d+)", started)
    assert match, started
    deadline = time.monotonic() + 120
    while not list(log_folder.glob("her/*/rl_model_*_steps.zip")):
        assert launcher.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.1)
    os.kill(int(match.group(2)), signal.SIGKILL)
    return int(match.group(2))


def test_a_killed_worker_restarts_the_workers_from_the_last_checkpoint_and_the_run_finishes(
    tmp_path: Path,
) -> None:
    command = _two_workers_command(tmp_path, "6000", "--oversubscribe")
    launcher = subprocess.Popen(
        [*command, "--max-restarts", "1", "--save-freq", "256"],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        killed = _kill_a_worker_after_the_first_checkpoint(launcher, tmp_path)
        out, err = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == 0, err
    assert f"worker 1 (pid {killed}) was killed by signal 9" in err and "restart 1 of 1" in err
    first, resumed = sorted(tmp_path.glob("her/BitFlipping-v0_*"))
    recorded = load_yaml_file(resumed / "BitFlipping-v0" / "args.yml")
    outcome = (
        Path(recorded["trained_agent"]).parent == first,
        0 < recorded["initial_timesteps"] < 6000,
        (resumed / "BitFlipping-v0.zip").exists(),
    )
    assert outcome == (True, True, True), out


def _two_workers_run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = _two_workers_command(tmp_path, "1024", "--oversubscribe")
    done = subprocess.run(
        [*command, *options], env=environment(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done


def test_every_worker_saves_its_own_replay_buffer_with_each_checkpoint_and_loads_it_on_resume(
    tmp_path: Path,
) -> None:
    _two_workers_run(tmp_path, "--save-freq", "512", "--save-replay-buffer")
    (run,) = tmp_path.glob("her/BitFlipping-v0_*")
    files = {path.name for path in run.iterdir() if "replay_buffer" in path.name}
    assert files == {
        "rl_model_replay_buffer_1024_steps.pkl",
        "rl_model_replay_buffer_1024_steps.worker1.pkl",  # the 512-step ones were dropped
        "replay_buffer.pkl",
        "replay_buffer.worker1.pkl",
    }
    # Each holds the transitions of its own worker's envs, seeded apart.
    assert (run / "replay_buffer.pkl").read_bytes() != (run / "replay_buffer.worker1.pkl").read_bytes()

    resumed = _two_workers_run(tmp_path / "again", "-i", str(run / "rl_model_1024_steps.zip"), "-n", "1536")
    loaded = re.findall(r"Loaded the replay buffer (\S+)", resumed.stdout)
    assert sorted(Path(path).name for path in loaded) == [
        "rl_model_replay_buffer_1024_steps.pkl",
        "rl_model_replay_buffer_1024_steps.worker1.pkl",
    ]


def test_a_worker_without_its_own_saved_replay_buffer_resumes_with_worker_0s(tmp_path: Path) -> None:
    _two_workers_run(tmp_path, "--save-freq", "1024")
    (run,) = tmp_path.glob("her/BitFlipping-v0_*")
    (
        run / "rl_model_replay_buffer_1024_steps.worker1.pkl"
    ).unlink()  # as a run saved before workers kept theirs
    resumed = _two_workers_run(tmp_path / "again", "-i", str(run / "rl_model_1024_steps.zip"), "-n", "1536")
    assert "Note: worker 1 has no replay buffer saved" in resumed.stdout
    loaded = re.findall(r"Loaded the replay buffer (\S+)", resumed.stdout)
    assert [Path(path).name for path in loaded] == ["rl_model_replay_buffer_1024_steps.pkl"] * 2


@pytest.mark.parametrize(
    ("signum", "status", "every_process", "settle_s"),
    [
        # The default run keeps the case a job scheduler makes (each worker gets the signal twice).
        pytest.param(signal.SIGTERM, 143, False, 3.0, id="SIGTERM", marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, 130, False, 3.0, id="SIGINT", marks=pytest.mark.slow),
        pytest.param(signal.SIGTERM, 143, True, 3.0, id="SIGTERM-to-every-process"),
        pytest.param(
            signal.SIGTERM, 143, "workers", 3.0, id="SIGTERM-to-the-workers", marks=pytest.mark.slow
        ),
        # On the line that says training starts, as an optimize trial's budget can: worker 1 may be setting up.
        pytest.param(signal.SIGTERM, 143, False, 0.0, id="SIGTERM-as-training-starts"),
    ],
)
def test_a_signal_to_the_launcher_stops_every_worker_at_one_step_and_saves_the_run(
    signum: int, status: int, every_process: bool | str, settle_s: float, tmp_path: Path
) -> None:
    """Also when a job scheduler signals the workers too (Slurm's ``scancel``), so that each gets it twice,
    when only the workers get it, and when it comes as training starts: no restart, and the launcher reports
    no failure."""
    command = _two_workers_command(tmp_path, "1e7", "--oversubscribe")
    returncode, rest, err = signal_once_training(
        [*command, "--save-replay-buffer", "--max-restarts", "1"],
        signum,
        settle_s=settle_s,
        every_process=every_process,
    )
    name = signal.Signals(signum).name
    saved = re.findall(rf"Stopped by {name} at step (\d+): saved the agent", rest)
    announced = rest.count(f"{name}: stopping at the workers' next training cycle")  # worker 0's line alone
    outcome = (returncode, len(saved), announced, "Traceback" in err, "restarting" in err, "error:" in err)
    assert outcome == (status, 1, 1, False, False, False), err
    (run,) = tmp_path.glob("her/BitFlipping-v0_*")
    steps = int(saved[0])
    assert {path.name for path in run.glob(f"rl_model*_{steps}_steps*")} == {
        f"rl_model_{steps}_steps.zip",
        f"rl_model_replay_buffer_{steps}_steps.pkl",
        f"rl_model_replay_buffer_{steps}_steps.worker1.pkl",
    }
    assert HER.load(str(run / f"rl_model_{steps}_steps.zip")).num_timesteps == steps > 0


@pytest.mark.parametrize(
    ("signum", "status", "after"),
    [
        # The same path as Ctrl-C's, which also covers the workers' Ctrl-C ignored at start: slow only.
        pytest.param(signal.SIGTERM, 143, 0.0, id="SIGTERM", marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, 130, 0.3, id="SIGINT-while-importing"),
    ],
)
def test_a_stop_before_the_workers_join_ends_the_run_in_one_line_with_nothing_to_save(
    tmp_path: Path, signum: int, status: int, after: float
) -> None:
    """A scheduler's SIGTERM, or Ctrl-C, as the workers start (Python still importing the package) ends
    each of them as the signal does, without a traceback; the launcher says that nothing was trained, so
    nothing is saved, and exits as a stopped run."""
    process = _launch_two_workers(tmp_path, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("Started 2 workers"):
                break
        time.sleep(after)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    last = err.strip().splitlines()[-1]
    name = signal.Signals(signum).name
    assert (process.returncode, last) == (
        status,
        f"{name}: stopped before the workers started training: nothing to save",
    )
    assert "Traceback" not in err and "error:" not in err
    assert not list(tmp_path.glob("her/BitFlipping-v0_*"))


class _Child:
    """A shell process seen through the part of ``multiprocessing.Process`` the launcher uses."""

    def __init__(self, script: str) -> None:
        self.popen = subprocess.Popen(["sh", "-c", script])
        self.pid = self.popen.pid

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def test_the_launcher_names_the_workers_that_do_not_stop_after_a_signal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(launcher_stop, "SAVE_GRACE_S", 1.0)
    stopping = _Child("sleep 30")
    stubborn = _Child("trap '' TERM; sleep 30 & wait")  # ignores SIGTERM
    try:
        time.sleep(0.2)  # the trap is set
        launcher_stop.stop_and_save([stopping, stubborn], signal.SIGTERM)
        err = capsys.readouterr().err
        assert (stopping.is_alive(), stubborn.is_alive()) == (False, True)
        assert "worker(s) 1 did not stop within 1 s" in err and "SIGTERM again stops them at once" in err
    finally:
        for child in (stopping, stubborn):
            child.popen.kill()
            child.popen.wait()


@pytest.mark.parametrize(
    ("scripts", "said"),
    [
        (
            ["sleep 30", "trap 'exit 143' TERM; sleep 30 & wait"],
            "SIGTERM: worker(s) 0 stopped before joining",
        ),
        (["sleep 30", "sleep 30"], "SIGTERM: stopped before the workers started training: nothing to save"),
        (["trap 'exit 143' TERM; sleep 30 & wait"] * 2, None),
    ],
    ids=["one-before-joining", "all-before-joining", "all-saved"],
)
def test_the_launcher_says_which_workers_a_stop_ended_before_they_joined(
    scripts: list[str], said: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker that has not joined the others dies of the stop's signal (a shell's default here); one that
    stopped as a run does exits with 128 + the signal."""
    children = [_Child(script) for script in scripts]
    try:
        time.sleep(0.2)  # the traps are set
        launcher_stop.stop_and_save(children, signal.SIGTERM)
        last = capsys.readouterr().err.strip().splitlines()[-1]
        if said is None:
            assert last.startswith("SIGTERM: the workers stop at their next training cycle"), last
        else:
            assert last.startswith(said), last
    finally:
        for child in children:
            child.popen.kill()
            child.popen.wait()


class _Starting:
    """A worker whose start notes how the launcher takes Ctrl-C meanwhile, and may send the launcher a
    stop's signal; one not started has no pid, as with ``multiprocessing``."""

    def __init__(self, seen: list[Any], signum: int | None = None) -> None:
        self.seen = seen
        self.signum = signum
        self.pid: int | None = None
        self.exitcode: int | None = None

    def start(self) -> None:
        self.seen.append(signal.getsignal(signal.SIGINT))
        self.pid = os.getpid()
        self.exitcode = -signal.SIGTERM  # as a worker still importing when the stop comes
        if self.signum is not None:
            os.kill(os.getpid(), self.signum)

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        assert self.pid is not None, "can only join a started process"


def test_the_workers_start_with_ctrl_c_ignored_and_a_stop_as_they_start_ends_the_run_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A process keeps an ignored signal across exec: each worker starts with Ctrl-C ignored, and the
    launcher takes SIGINT again right after. A SIGTERM while it starts them ends the run with those
    started, and says that nothing was trained."""
    seen: list[Any] = []
    workers = [_Starting(seen, signal.SIGTERM), _Starting(seen), _Starting(seen)]
    previous = {stop: signal.signal(stop, launcher_stop.raise_signalled) for stop in STOP_SIGNALS}
    try:
        with pytest.raises(launcher_stop.Signalled) as raised:
            launcher_stop.start_workers(workers)
            time.sleep(1)  # the handler runs in the main thread: it may not have run yet
        assert signal.getsignal(signal.SIGINT) is launcher_stop.raise_signalled
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    assert raised.value.signum == signal.SIGTERM and seen[0] == signal.SIG_IGN
    assert set(seen) == {signal.SIG_IGN} and workers[-1].pid is None
    launcher_stop.stop_and_save(workers, signal.SIGTERM)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == "SIGTERM: stopped before the workers started training: nothing to save"


class _SignalledWhileWaiting(_Child):
    """A child whose first wait is cut short by a second signal to the launcher."""

    def join(self, timeout: float | None = None) -> None:
        if not getattr(self, "signalled", False):
            self.signalled = True
            raise launcher_stop.Signalled(signal.SIGTERM)
        super().join(timeout)


def test_a_second_signal_to_the_launcher_kills_the_workers_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Even workers that would take the repeated signal for the same stop end at once."""
    stubborn = _SignalledWhileWaiting("trap '' TERM; sleep 30 & wait")  # ignores SIGTERM
    try:
        time.sleep(0.2)  # the trap is set
        started = time.monotonic()
        launcher_stop.stop_and_save([stubborn], signal.SIGTERM)
        stubborn.popen.wait(5)
        err = capsys.readouterr().err
        assert stubborn.popen.returncode == -signal.SIGKILL and time.monotonic() - started < 5
        assert "SIGTERM again: stopping the workers at once, without saving" in err
        assert "did not stop within" not in err
    finally:
        if stubborn.is_alive():
            stubborn.popen.kill()
        stubborn.popen.wait()


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_two_workers_learn_15_bit_flipping(tmp_path: Path) -> None:
    """The shipped BitFlipping-v0 entry (15 bits, DQN) with 2 workers, each its full budget: greedy success.

    The entry's updates counted in steps: 40 gradient steps every 240 env steps (16 episodes of 15 steps).
    """
    command = ["--env", "BitFlipping-v0", "--seed", "0", "--eval-freq", "0", "-f", str(tmp_path)]
    command += ["-params", "train_freq:[240,step]", "gradient_steps:40", "workers:2"]  # undivided
    trained = subprocess.run(
        [sys.executable, "-m", "her_wrap.runs.cli", "train", *command, "--workers", "2", "--oversubscribe"],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert trained.returncode == 0, trained.stderr
    enjoyed = subprocess.run(
        [
            sys.executable,
            "-m",
            "her_wrap.runs.cli",
            "enjoy",
            "--env",
            "BitFlipping-v0",
            "-n",
            "100",
            "-f",
            str(tmp_path),
        ],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert enjoyed.returncode == 0, enjoyed.stderr
    rate = float(re.search(r"success rate (\d\.\d+)", enjoyed.stdout).group(1))  # type: ignore[union-attr]
    assert rate >= 0.95, enjoyed.stdout


def test_a_jax_learner_is_refused_for_several_workers_naming_the_fix() -> None:
    sbx = pytest.importorskip("sbx", reason="SBX learners need the jax extra: pip install 'her_wrap[jax]'")
    model = HER("MultiInputPolicy", BitFlippingEnv(n_bits=4, continuous=True), sbx.SAC, learning_starts=10)
    with pytest.raises(UnshareableSettingError, match="PyTorch learner"):
        check_shared_settings(model.model)


def test_two_torchrun_launchers_on_one_host_train_as_two_machines(tmp_path: Path) -> None:
    """``torchrun --nnodes 2`` twice, meeting through a c10d rendezvous, as on two machines: one run
    folder, written by rank 0, holding the agent both trained."""
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not beside this Python")
    rendezvous = [
        "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "two-machines",
    ]  # fmt: skip
    train = [
        "-m", "her_wrap.runs.cli", "train", "--env", "BitFlipping-v0", "--seed", "0", "--eval-freq", "0",
        "-n", "600", "--no-progress", "-f", str(tmp_path / "logs"), "-params", "env_kwargs.n_bits:4",
        "learning_starts:50", "train_freq:[4,step]", "gradient_steps:1",
    ]  # fmt: skip
    launchers = [
        subprocess.Popen(
            [str(torchrun), *rendezvous, *train],
            env=environment(),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [launcher.communicate(timeout=240)[0] for launcher in launchers]
    assert [launcher.returncode for launcher in launchers] == [0, 0], outputs
    (run_dir,) = (tmp_path / "logs" / "her").glob("BitFlipping-v0_*")
    recorded = load_yaml_file(run_dir / "BitFlipping-v0" / "args.yml")
    assert recorded["workers"] == 2
    assert HER.load(str(run_dir / "BitFlipping-v0.zip")).num_timesteps == 600


def test_two_workers_stop_together_after_max_minutes_and_save_the_final_agent(tmp_path: Path) -> None:
    command = [*_two_workers_command(tmp_path, "1e7", "--oversubscribe"), "--max-minutes", "0.05"]
    completed = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stderr[-3000:]
    match = re.search(r"stopped at step (\d+) of 10000000 on each worker", completed.stdout)
    assert match, completed.stdout[-3000:]
    (run_dir,) = tmp_path.glob("her/BitFlipping-v0_*")
    assert (run_dir / "BitFlipping-v0.zip").is_file()
