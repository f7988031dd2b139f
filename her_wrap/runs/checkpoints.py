"""Checkpoints that survive a kill, and finding the saved agent a path stands for.

A checkpoint is up to three files, named as rl-baselines3-zoo names them::

    rl_model_5000_steps.zip                   the agent
    rl_model_replay_buffer_5000_steps.pkl     its replay buffer
    rl_model_vecnormalize_5000_steps.pkl      its normalization statistics (when normalizing)

Each file is written atomically (:mod:`her_wrap.runs.atomic`), and the agent's zip last: a checkpoint
counts only once its zip exists, and by then its other files are complete. A kill during a save therefore
leaves the previous checkpoint as the latest complete one. Replay buffers are large, so only the latest
checkpoint keeps its own; older checkpoints keep their agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from her_wrap.runs.atomic import atomic_write
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_layout import RunLayout, layout_of

_CHECKPOINT = re.compile(r"^rl_model_(\d+)_steps\.zip$")


@dataclass(frozen=True)
class SavedAgent:
    """The files of a saved agent; optional files are ``None`` when absent.

    :param model: the agent's zip
    :param replay_buffer: its replay buffer, when saved
    :param vecnormalize: its ``VecNormalize`` statistics, when normalizing
    :param run: the run folder it belongs to, when it is in one
    """

    model: Path
    replay_buffer: Path | None = None
    vecnormalize: Path | None = None
    run: RunLayout | None = None


def checkpoint_paths(run_dir: Path, timesteps: int) -> tuple[Path, Path, Path]:
    """The agent, replay buffer and statistics paths of the checkpoint at ``timesteps``."""
    return (
        run_dir / f"rl_model_{timesteps}_steps.zip",
        run_dir / f"rl_model_replay_buffer_{timesteps}_steps.pkl",
        run_dir / f"rl_model_vecnormalize_{timesteps}_steps.pkl",
    )


def checkpoint_timesteps(run_dir: Path) -> list[int]:
    """Timesteps of the complete checkpoints in ``run_dir`` (their zip exists), ascending."""
    if not Path(run_dir).is_dir():
        return []
    return sorted(
        int(match.group(1)) for path in Path(run_dir).iterdir() if (match := _CHECKPOINT.match(path.name))
    )


def save_agent(
    agent: Any,
    model_path: Path,
    *,
    replay_buffer_path: Path | None = None,
    vec_normalize: Any = None,
    vecnormalize_path: Path | None = None,
) -> None:
    """Save an agent (and optionally its replay buffer and statistics), every file atomically, zip last.

    :param agent: a :class:`her_wrap.HER`
    :param model_path: destination of the agent's zip
    :param replay_buffer_path: destination of the replay buffer, or ``None`` to skip it
    :param vec_normalize: the ``VecNormalize`` env whose statistics to save, or ``None``
    :param vecnormalize_path: destination of the statistics (needed with ``vec_normalize``)
    """
    if replay_buffer_path is not None:
        atomic_write(replay_buffer_path, lambda path: agent.save_replay_buffer(str(path)))
    if vec_normalize is not None and vecnormalize_path is not None:
        atomic_write(vecnormalize_path, lambda path: vec_normalize.save(str(path)))
    atomic_write(model_path, lambda path: agent.save(str(path)))


def save_checkpoint(agent: Any, run_dir: Path, timesteps: int, vec_normalize: Any = None) -> SavedAgent:
    """Write the checkpoint at ``timesteps`` and drop the replay buffers of older checkpoints.

    :param agent: a :class:`her_wrap.HER`
    :param run_dir: the run folder
    :param timesteps: the agent's env steps so far (names the files)
    :param vec_normalize: the training ``VecNormalize``, or ``None``
    """
    model, replay_buffer, vecnormalize = checkpoint_paths(run_dir, timesteps)
    save_agent(
        agent,
        model,
        replay_buffer_path=replay_buffer,
        vec_normalize=vec_normalize,
        vecnormalize_path=vecnormalize,
    )
    for older in checkpoint_timesteps(run_dir):
        if older < timesteps:
            checkpoint_paths(run_dir, older)[1].unlink(missing_ok=True)
    return SavedAgent(model, replay_buffer, vecnormalize if vec_normalize is not None else None)


def _existing(path: Path) -> Path | None:
    return path if path.is_file() else None


def _saved_checkpoint(run: RunLayout, timesteps: int) -> SavedAgent:
    model, replay_buffer, vecnormalize = checkpoint_paths(run.run_dir, timesteps)
    return SavedAgent(model, _existing(replay_buffer), _existing(vecnormalize), run)


def latest_saved_agent(run: RunLayout) -> SavedAgent | None:
    """The most recent state of a run: its final agent when training finished, else its latest checkpoint."""
    if run.final_model_path.is_file():
        return SavedAgent(
            run.final_model_path, _existing(run.replay_buffer_path), _existing(run.vecnormalize_path), run
        )
    timesteps = checkpoint_timesteps(run.run_dir)
    return _saved_checkpoint(run, timesteps[-1]) if timesteps else None


def resolve_saved_agent(path: Path) -> SavedAgent:
    """The saved agent a ``-i`` path stands for, with the replay buffer and statistics saved beside it.

    - a run folder: its final agent, or its latest checkpoint when training did not finish;
    - ``rl_model_N_steps.zip``: that checkpoint;
    - ``ENV_ID.zip`` of a run: the final agent with ``replay_buffer.pkl`` and ``ENV_ID/vecnormalize.pkl``;
    - ``best_model.zip``: the best agent with ``best_model_vecnormalize.pkl`` (no replay buffer is saved
      with it);
    - any other zip: that agent alone.

    :raises UsageError: when the path does not exist or a run folder holds no saved agent
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
            raise UsageError(f"{path} holds no saved agent yet (neither a final model nor a checkpoint)")
        return saved
    if run is None:
        return SavedAgent(path)
    match = _CHECKPOINT.match(path.name)
    if match and path.parent == run.run_dir:
        return _saved_checkpoint(run, int(match.group(1)))
    if path == run.final_model_path:
        return SavedAgent(path, _existing(run.replay_buffer_path), _existing(run.vecnormalize_path), run)
    if path == run.best_model_path:
        return SavedAgent(path, None, _existing(run.best_vecnormalize_path), run)
    return SavedAgent(path, run=run)
