"""Checkpoints that survive a kill, and finding the saved agent a path stands for.

A checkpoint is two files, named as rl-baselines3-zoo names them::

    rl_model_5000_steps.zip                   the agent (normalization statistics included)
    rl_model_replay_buffer_5000_steps.pkl     its replay buffer

In a run of several workers each worker keeps its own replay buffer, and worker ``r`` (from 1) saves it
beside worker 0's as ``rl_model_replay_buffer_5000_steps.worker{r}.pkl`` (``replay_buffer.worker{r}.pkl``
for the final agent's): a resumed worker goes on with the transitions it gathered itself.

Each file is written atomically (:mod:`her_wrap.runs.atomic`), and the agent's zip last, once every
worker's replay buffer is written: a checkpoint counts only once its zip exists, and by then its replay
buffers are complete. A kill during a save therefore leaves the previous checkpoint as the latest complete
one. Replay buffers are large, so only the latest checkpoint keeps its own; older checkpoints keep their
agent.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from her_wrap.runs.atomic import atomic_write
from her_wrap.runs.errors import RunError, UsageError
from her_wrap.runs.run_layout import RunLayout, layout_of

if TYPE_CHECKING:
    from her_wrap.sb3.her import HER

_CHECKPOINT = re.compile(r"^rl_model_(\d+)_steps\.zip$")


@dataclass(frozen=True)
class SavedAgent:
    """The files of a saved agent; optional files are ``None`` when absent.

    :param model: the agent's zip (HER keeps its normalization statistics inside)
    :param replay_buffer: its replay buffer, when saved
    :param run: the run folder it belongs to, when it is in one
    """

    model: Path
    replay_buffer: Path | None = None
    run: RunLayout | None = None


def checkpoint_paths(run_dir: Path, timesteps: int) -> tuple[Path, Path]:
    """The agent and replay buffer paths of the checkpoint at ``timesteps``."""
    return (
        run_dir / f"rl_model_{timesteps}_steps.zip",
        run_dir / f"rl_model_replay_buffer_{timesteps}_steps.pkl",
    )


def worker_replay_buffer_path(path: Path, rank: int) -> Path:
    """The file where worker ``rank`` keeps the replay buffer that worker 0 keeps at ``path``."""
    path = Path(path)
    return path if rank == 0 else path.with_name(f"{path.stem}.worker{rank}{path.suffix}")


def save_worker_replay_buffer(agent: HER, path: Path, rank: int) -> None:
    """Write worker ``rank``'s replay buffer beside worker 0's ``path`` (:func:`worker_replay_buffer_path`),
    atomically; nothing on a machine that does not see that folder (the run folder is worker 0's)."""
    own = worker_replay_buffer_path(path, rank)
    if own.parent.is_dir():
        atomic_write(own, lambda temporary: agent.save_replay_buffer(str(temporary)))


def checkpoint_timesteps(run_dir: Path) -> list[int]:
    """Timesteps of the complete checkpoints in ``run_dir`` (their zip exists), ascending."""
    if not Path(run_dir).is_dir():
        return []
    return sorted(
        int(match.group(1)) for path in Path(run_dir).iterdir() if (match := _CHECKPOINT.match(path.name))
    )


def checkpoint_model_path(run_dir: Path, timesteps: int) -> Path:
    """The agent's zip of the checkpoint at ``timesteps`` in ``run_dir``.

    :raises UsageError: when ``run_dir`` has no complete checkpoint there, naming the ones it has
    """
    saved = checkpoint_timesteps(run_dir)
    if timesteps not in saved:
        listed = ", ".join(map(str, saved)) or "none"
        raise UsageError(f"{run_dir} has no checkpoint at {timesteps} steps; checkpoints: {listed}")
    return checkpoint_paths(run_dir, timesteps)[0]


def save_agent(
    agent: HER,
    model_path: Path,
    *,
    replay_buffer_path: Path | None = None,
    before_zip: Callable[[], None] | None = None,
) -> None:
    """Save an agent (and optionally its replay buffer), every file atomically, the zip last; when the zip
    cannot be written, a replay buffer this call created is removed again.

    :param agent: a :class:`her_wrap.HER`
    :param model_path: destination of the agent's zip
    :param replay_buffer_path: destination of the replay buffer, or ``None`` to skip it
    :param before_zip: called between the replay buffer and the zip (the other workers' buffers are
        written by then)
    """
    new_replay_buffer = replay_buffer_path is not None and not replay_buffer_path.exists()
    if replay_buffer_path is not None:
        atomic_write(replay_buffer_path, lambda path: agent.save_replay_buffer(str(path)))
    if before_zip is not None:
        before_zip()
    try:
        atomic_write(model_path, lambda path: agent.save(str(path)))
    except BaseException:
        # A replay buffer without its agent cannot be resumed, and on a full disk it holds space.
        if new_replay_buffer and replay_buffer_path is not None:
            replay_buffer_path.unlink(missing_ok=True)
        raise


def save_normalizer(agent: HER, path: Path) -> bool:
    """Write the agent's normalization statistics as a ``VecNormalize`` pickle (the zoo's
    ``vecnormalize.pkl``, for tools that read it; HER itself keeps them in the agent's zip).

    :return: whether the agent normalizes (and the file was written)
    """
    normalizer = getattr(agent, "normalizer", None)
    if normalizer is None:
        return False
    atomic_write(path, lambda temporary: normalizer.save(str(temporary)))
    return True


def save_checkpoint(
    agent: HER, run_dir: Path, timesteps: int, *, rank: int = 0, synchronize: Callable[[], None] | None = None
) -> SavedAgent:
    """Write the checkpoint at ``timesteps`` and drop the replay buffers of older checkpoints.

    With several workers every worker calls it at the same step: worker 0 writes the agent and its replay
    buffer, each other worker its own replay buffer (:func:`worker_replay_buffer_path`), and worker 0's
    zip waits until they all have. A worker on a machine that does not see the run folder saves nothing.

    :param agent: a :class:`her_wrap.HER`
    :param run_dir: the run folder
    :param timesteps: the env steps that name the files (see :class:`her_wrap.runs.callbacks.CheckpointCallback`)
    :param rank: this worker's rank
    :param synchronize: a barrier of the workers (``None`` when training alone)
    """
    model, replay_buffer = checkpoint_paths(run_dir, timesteps)
    if rank == 0:
        save_agent(agent, model, replay_buffer_path=replay_buffer, before_zip=synchronize)
    else:
        save_worker_replay_buffer(agent, replay_buffer, rank)
        if synchronize is not None:
            synchronize()
    for older in checkpoint_timesteps(run_dir):
        if older < timesteps:
            worker_replay_buffer_path(checkpoint_paths(run_dir, older)[1], rank).unlink(missing_ok=True)
    return SavedAgent(model, replay_buffer)


def unreadable_zip(path: Path) -> str | None:
    """Why the agent zip at ``path`` cannot be loaded (truncated, corrupt, not one of HER's), or None.

    Reads the whole archive and checks every member's CRC: a file cut short by a full disk or a copy
    that stopped half way fails here, before any loading starts.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return f"not a complete zip file ({error})"
    if broken is not None:
        return f"its member {broken} is corrupt"
    if "data" not in names:
        return "not an agent saved by HER.save (no 'data' member)"
    return None


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint zip of ``run_dir`` that loads (see :func:`unreadable_zip`), or None."""
    for timesteps in reversed(checkpoint_timesteps(run_dir)):
        model = checkpoint_paths(run_dir, timesteps)[0]
        if unreadable_zip(model) is None:
            return model
    return None


def _existing(path: Path) -> Path | None:
    return path if path.is_file() else None


def _saved_checkpoint(run: RunLayout, timesteps: int) -> SavedAgent:
    model, replay_buffer = checkpoint_paths(run.run_dir, timesteps)
    return SavedAgent(model, _existing(replay_buffer), run)


def latest_saved_agent(run: RunLayout) -> SavedAgent | None:
    """The most recent state of a run that loads: its final agent when training finished, else its newest
    checkpoint; a truncated or corrupt zip is skipped with one printed line."""
    if run.final_model_path.is_file():
        problem = unreadable_zip(run.final_model_path)
        if problem is None:
            return SavedAgent(run.final_model_path, _existing(run.replay_buffer_path), run)
        print(f"Skipping {run.final_model_path}: {problem}", flush=True)
    for timesteps in reversed(checkpoint_timesteps(run.run_dir)):
        saved = _saved_checkpoint(run, timesteps)
        problem = unreadable_zip(saved.model)
        if problem is None:
            return saved
        print(f"Skipping {saved.model}: {problem}", flush=True)
    return None


def resolve_saved_agent(path: Path) -> SavedAgent:
    """The saved agent a ``-i`` path stands for, with the replay buffer saved beside it.

    - a run folder: its final agent, or its latest checkpoint when training did not finish;
    - ``rl_model_N_steps.zip``: that checkpoint;
    - ``ENV_ID.zip`` of a run: the final agent with ``replay_buffer.pkl`` (``--save-replay-buffer``);
    - any other zip (``best_model.zip`` included): that agent alone.

    :raises UsageError: when the path does not exist or a run folder holds no saved agent
    :raises RunError: when the zip given is truncated or corrupt, naming the newest good checkpoint
    """
    path = Path(path)
    if not path.exists() and path.suffix != ".zip" and path.with_suffix(".zip").is_file():
        path = path.with_suffix(".zip")
    if not path.exists():
        raise UsageError(f"no saved agent at {path}")
    path = path.resolve()
    run = layout_of(path)
    if path.is_dir():
        if run is None:
            raise UsageError(f"{path} is not a run folder (no ENV_ID/config.yml in it)")
        saved = latest_saved_agent(run)
        if saved is None:
            raise UsageError(
                f"{path} holds no saved agent yet (neither a final model nor a checkpoint that loads)"
            )
        return saved
    problem = unreadable_zip(path)
    if problem is not None:
        good = newest_checkpoint(run.run_dir) if run is not None else None
        hint = f"; the newest good checkpoint of its run: {good}" if good else ""
        raise RunError(f"cannot load the agent {path}: {problem}{hint}")
    if run is None:
        return SavedAgent(path)
    match = _CHECKPOINT.match(path.name)
    if match and path.parent == run.run_dir:
        return _saved_checkpoint(run, int(match.group(1)))
    if path == run.final_model_path:
        return SavedAgent(path, _existing(run.replay_buffer_path), run)
    return SavedAgent(path, run=run)
