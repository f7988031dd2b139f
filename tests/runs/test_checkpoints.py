"""Run folders, atomic files and checkpoints: a kill at any moment leaves a loadable previous state."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

from her_wrap.runs.atomic import TEMPORARY_PREFIX, atomic_write, atomic_write_text, remove_stale_temporaries
from her_wrap.runs.checkpoints import (
    checkpoint_model_path,
    checkpoint_paths,
    checkpoint_timesteps,
    resolve_saved_agent,
    save_checkpoint,
    save_normalizer,
    worker_replay_buffer_path,
)
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_layout import RunLayout, find_run, new_run

ENV_ID = "BitFlipping-v0"


class FakeAgent:
    """Writes what HER's save methods write, as marker text."""

    def __init__(self, label: str) -> None:
        self.label = label

    def save(self, path: str) -> None:
        Path(path).write_text(f"model {self.label}")

    def save_replay_buffer(self, path: str) -> None:
        Path(path).write_text(f"buffer {self.label}")


class FakeNormalizer:
    def save(self, path: str) -> None:
        Path(path).write_text("statistics")


def make_run(tmp_path: Path) -> RunLayout:
    layout = new_run(tmp_path / "logs", ENV_ID)
    layout.config_path.write_text(f"{ENV_ID}: {{model_class: dqn, n_timesteps: 100}}\n")
    return layout


# --------------------------------------------------------------------------- atomic files


def test_a_failing_writer_leaves_the_previous_file(tmp_path: Path) -> None:
    destination = tmp_path / "model.zip"
    destination.write_text("previous")

    def fail_halfway(path: Path) -> None:
        path.write_text("half a")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(destination, fail_halfway)
    assert (destination.read_text(), sorted(path.name for path in tmp_path.iterdir())) == (
        "previous",
        ["model.zip"],
    )


def test_a_writer_that_saves_elsewhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "model.zip", lambda path: (tmp_path / "other.zip").write_text("x"))


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from her_wrap.runs.atomic import atomic_write

    def slow_writer(path):
        with open(path, "w") as handle:
            handle.write("half of the new checkpoint")
            handle.flush()
            print("writing", flush=True)
            time.sleep(60)  # killed here

    atomic_write(Path(sys.argv[1]), slow_writer)
    """
)


def test_sigkill_during_a_save_leaves_the_previous_file(tmp_path: Path) -> None:
    destination = tmp_path / "rl_model_100_steps.zip"
    atomic_write_text(destination, "complete checkpoint")
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(destination)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    left_over = [path.name for path in tmp_path.iterdir() if path.name.startswith(TEMPORARY_PREFIX)]
    assert (destination.read_text(), len(left_over), checkpoint_timesteps(tmp_path)) == (
        "complete checkpoint",
        1,
        [100],
    )


def test_stale_temporaries_are_removed(tmp_path: Path) -> None:
    (tmp_path / f"{TEMPORARY_PREFIX}model-abc.zip").write_text("partial")
    (tmp_path / "model.zip").write_text("whole")
    remove_stale_temporaries(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["model.zip"]


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_writes_agent_and_buffer(tmp_path: Path) -> None:
    saved = save_checkpoint(FakeAgent("a"), tmp_path, 500)
    assert (saved.model.read_text(), saved.replay_buffer and saved.replay_buffer.read_text()) == (
        "model a",
        "buffer a",
    )


@pytest.mark.parametrize("normalizes", [True, False])
def test_normalizer_copy_only_for_a_normalizing_agent(normalizes: bool, tmp_path: Path) -> None:
    agent = FakeAgent("a")
    agent.normalizer = FakeNormalizer() if normalizes else None  # type: ignore[attr-defined]
    written = save_normalizer(agent, tmp_path / "vecnormalize.pkl")
    assert (written, (tmp_path / "vecnormalize.pkl").exists()) == (normalizes, normalizes)


def test_only_the_latest_checkpoint_keeps_its_replay_buffer(tmp_path: Path) -> None:
    for timesteps in (100, 200, 300):
        save_checkpoint(FakeAgent(str(timesteps)), tmp_path, timesteps)
    buffers = sorted(path.name for path in tmp_path.glob("rl_model_replay_buffer_*"))
    assert (checkpoint_timesteps(tmp_path), buffers) == (
        [100, 200, 300],
        ["rl_model_replay_buffer_300_steps.pkl"],
    )


def test_a_workers_checkpoint_holds_each_workers_buffer_before_worker_0s_zip(tmp_path: Path) -> None:
    """Worker 1 writes its own buffer and drops its older ones; worker 0's zip waits for the barrier."""
    seen: list[tuple[str, bool, bool]] = []

    def barrier(rank: int, timesteps: int) -> None:
        model, buffer = checkpoint_paths(tmp_path, timesteps)
        seen.append((f"worker {rank}", model.exists(), worker_replay_buffer_path(buffer, 1).exists()))

    for timesteps in (100, 200):
        for rank in (1, 0):
            synchronize = functools.partial(barrier, rank, timesteps)
            save_checkpoint(
                FakeAgent(f"{rank} at {timesteps}"), tmp_path, timesteps, rank=rank, synchronize=synchronize
            )
    buffers = {path.name: path.read_text() for path in tmp_path.glob("rl_model_replay_buffer_*")}
    assert buffers == {
        "rl_model_replay_buffer_200_steps.pkl": "buffer 0 at 200",
        "rl_model_replay_buffer_200_steps.worker1.pkl": "buffer 1 at 200",
    }
    # At each barrier worker 1's buffer is written and worker 0's zip is not yet.
    assert seen == [("worker 1", False, True), ("worker 0", False, True)] * 2


def test_checkpoint_timesteps_ignores_other_files(tmp_path: Path) -> None:
    for name in (
        "rl_model_50_steps.zip",
        "rl_model_replay_buffer_60_steps.pkl",
        f"{TEMPORARY_PREFIX}rl_model_70_steps-x.zip",
        "best_model.zip",
    ):
        (tmp_path / name).write_text("x")
    assert checkpoint_timesteps(tmp_path) == [50]


# --------------------------------------------------------------------------- what -i PATH stands for


class SavedCase(NamedTuple):
    name: str
    files: tuple[str, ...]
    target: str
    expected: tuple[str, str | None]  # model and replay buffer, relative to the run


SAVED_CASES = [
    SavedCase(
        "finished run folder: the final agent with its buffer",
        (
            f"{ENV_ID}.zip",
            "replay_buffer.pkl",
            "rl_model_100_steps.zip",
            "rl_model_replay_buffer_100_steps.pkl",
        ),
        ".",
        (f"{ENV_ID}.zip", "replay_buffer.pkl"),
    ),
    SavedCase(
        "killed run folder: the latest checkpoint",
        ("rl_model_100_steps.zip", "rl_model_200_steps.zip", "rl_model_replay_buffer_200_steps.pkl"),
        ".",
        ("rl_model_200_steps.zip", "rl_model_replay_buffer_200_steps.pkl"),
    ),
    SavedCase(
        "an older checkpoint: its buffer is gone",
        ("rl_model_100_steps.zip", "rl_model_200_steps.zip", "rl_model_replay_buffer_200_steps.pkl"),
        "rl_model_100_steps.zip",
        ("rl_model_100_steps.zip", None),
    ),
    SavedCase(
        "best model: no buffer",
        ("best_model.zip", "replay_buffer.pkl"),
        "best_model.zip",
        ("best_model.zip", None),
    ),
    SavedCase("zip named without its suffix", (f"{ENV_ID}.zip",), ENV_ID, (f"{ENV_ID}.zip", None)),
]


def write_saved(path: Path) -> None:
    """A file of a saved agent: a zip with the ``data`` member every agent zip has, or a plain file."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("data", "{}")
    else:
        path.write_text("x")


@pytest.mark.parametrize("case", SAVED_CASES, ids=lambda case: case.name)
def test_resolve_saved_agent(case: SavedCase, tmp_path: Path) -> None:
    layout = make_run(tmp_path)
    for name in case.files:
        write_saved(layout.run_dir / name)
    saved = resolve_saved_agent(layout.run_dir / case.target)
    run_dir = layout.run_dir.resolve()

    def relative(path: Path | None) -> str | None:
        return None if path is None else str(path.resolve().relative_to(run_dir))

    assert (relative(saved.model), relative(saved.replay_buffer)) == case.expected


def test_zip_outside_a_run_stands_alone(tmp_path: Path) -> None:
    write_saved(tmp_path / "agent.zip")
    saved = resolve_saved_agent(tmp_path / "agent.zip")
    assert (saved.replay_buffer, saved.run) == (None, None)


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("missing", "no saved agent at"),
        ("empty run", "holds no saved agent yet"),
        ("plain folder", "is not a run folder"),
    ],
)
def test_resolve_saved_agent_errors(setup: str, fragment: str, tmp_path: Path) -> None:
    target = tmp_path / "absent.zip"
    if setup == "empty run":
        target = make_run(tmp_path).run_dir
    elif setup == "plain folder":
        target = tmp_path
    with pytest.raises(UsageError, match=fragment):
        resolve_saved_agent(target)


# --------------------------------------------------------------------------- run folders


def test_run_folders_are_numbered_from_one(tmp_path: Path) -> None:
    names = [new_run(tmp_path, ENV_ID).run_dir.name for _ in range(3)]
    assert names == [f"{ENV_ID}_1", f"{ENV_ID}_2", f"{ENV_ID}_3"]


def test_find_run_latest_and_by_number(tmp_path: Path) -> None:
    for _ in range(2):
        new_run(tmp_path, ENV_ID)
    assert (find_run(tmp_path, ENV_ID).run_dir.name, find_run(tmp_path, ENV_ID, 1).run_dir.name) == (
        f"{ENV_ID}_2",
        f"{ENV_ID}_1",
    )


def test_find_run_missing_lists_the_runs(tmp_path: Path) -> None:
    new_run(tmp_path, ENV_ID)
    with pytest.raises(UsageError, match="there are: 1"):
        find_run(tmp_path, ENV_ID, 5)


def test_checkpoint_paths_use_the_zoo_names(tmp_path: Path) -> None:
    assert [path.name for path in checkpoint_paths(tmp_path, 42)] == [
        "rl_model_42_steps.zip",
        "rl_model_replay_buffer_42_steps.pkl",
    ]


def test_a_checkpoint_is_found_by_its_steps_and_a_missing_one_names_those_there(tmp_path: Path) -> None:
    (tmp_path / "rl_model_500_steps.zip").write_bytes(b"")
    (tmp_path / "rl_model_replay_buffer_900_steps.pkl").write_bytes(b"")  # no zip: not a checkpoint
    assert checkpoint_model_path(tmp_path, 500) == tmp_path / "rl_model_500_steps.zip"
    with pytest.raises(UsageError, match=r"has no checkpoint at 900 steps; checkpoints: 500$"):
        checkpoint_model_path(tmp_path, 900)
    with pytest.raises(UsageError, match=r"checkpoints: none$"):
        checkpoint_model_path(tmp_path / "empty", 500)


def test_checkpoints_are_saved_once_their_cycle_has_trained(tmp_path: Path) -> None:
    """Cycles of 20 env steps, a checkpoint due every 10: each cycle's two checkpoints hold the agent after
    its gradient step (all 20 steps stored), and the last one is the final agent."""
    import torch
    from stable_baselines3 import DQN

    from her_wrap import HER, BitFlippingEnv
    from her_wrap.runs.callbacks import CheckpointCallback

    agent = HER(
        "MlpPolicy", BitFlippingEnv(n_bits=4), DQN, seed=0, learning_starts=0, train_freq=(20, "step"),
        gradient_steps=1, batch_size=8, policy_kwargs=dict(net_arch=[8]),
    )  # fmt: skip
    agent.learn(40, callback=CheckpointCallback(agent, tmp_path, save_freq=10, verbose=0))
    loaded = {
        steps: HER.load(checkpoint_paths(tmp_path, steps)[0]) for steps in checkpoint_timesteps(tmp_path)
    }

    def weights(her: HER) -> list[torch.Tensor]:
        return list(her.model.policy.parameters())

    def same(first: HER, second: HER) -> bool:
        return all(torch.equal(a, b) for a, b in zip(weights(first), weights(second), strict=True))

    buffers = sorted(path.name for path in tmp_path.glob("rl_model_replay_buffer_*"))
    assert (sorted(loaded), buffers) == ([10, 20, 30, 40], ["rl_model_replay_buffer_40_steps.pkl"])
    assert [her.model.num_timesteps for her in loaded.values()] == [20, 20, 40, 40]
    assert [her.model._n_updates for her in loaded.values()] == [1, 1, 2, 2]
    assert (same(loaded[10], loaded[20]), same(loaded[20], loaded[30]), same(loaded[40], agent)) == (
        True,
        False,
        True,
    )
