"""How a ``her-wrap train`` run ends short of the leader's normal finish, and how the other workers train.

- :func:`time_budget`: the callback that ends training after the entry's ``max_minutes``;
- :func:`end_stopped`: a run stopped by SIGINT or SIGTERM saves the checkpoint of its step and raises
  :class:`~her_wrap.runs.errors.StoppedBySignal` (every worker calls it);
- :func:`follow`: a worker other than rank 0 trains without evaluations or logs, and ends with the others.
"""

from __future__ import annotations

import argparse
import signal
from typing import TYPE_CHECKING, Any, NoReturn

from her_wrap.runs import workers
from her_wrap.runs.checkpoints import (
    checkpoint_paths,
    save_agent,
    save_checkpoint,
    save_normalizer,
    save_worker_replay_buffer,
)
from her_wrap.runs.errors import StoppedBySignal

if TYPE_CHECKING:
    from collections.abc import Callable

    from her_wrap.runs.callbacks import SignalStop, TrainingTimeBudget
    from her_wrap.runs.env_factory import TrainingEnvs
    from her_wrap.runs.run_layout import RunLayout


def time_budget(
    config: Any, worker: workers.Worker, evaluation_seconds: Callable[[], float] | None = None
) -> TrainingTimeBudget | None:
    """The callback that ends training after the entry's ``max_minutes`` (None without them). Worker 0's
    clock decides for every worker; it leaves out its evaluations (``evaluation_seconds``)."""
    from her_wrap.runs.callbacks import TrainingTimeBudget

    if config.max_minutes is None:
        return None
    return TrainingTimeBudget(
        config.max_minutes, evaluation_seconds, synchronized=worker.world > 1, leads=worker.leads
    )


def stop_keeps_replay_buffer(args: argparse.Namespace) -> bool:
    """Whether a run stopped by a signal saves its replay buffer with the agent: with
    ``--save-replay-buffer``, and in a run that checkpoints (``--save-freq``), whose checkpoints keep it, so
    that resuming from the stop's checkpoint (the newest) loses no transitions."""
    return bool(args.save_replay_buffer or args.save_freq > 0)


def end_stopped(
    agent: Any,
    envs: TrainingEnvs,
    layout: RunLayout,
    with_replay_buffer: bool,
    signum: int,
    worker: workers.Worker,
) -> NoReturn:
    """End a run stopped by a signal, saved as the checkpoint of its step count (``-i RUN_FOLDER`` resumes
    it): every worker calls it; worker 0 saves the agent, and with ``with_replay_buffer`` each its replay
    buffer.

    :raises StoppedBySignal: always, once saved
    """
    _save_stopped(agent, layout, with_replay_buffer, signum, worker)
    envs.close()
    workers.leave_workers()
    raise StoppedBySignal(signum)


def _save_stopped(
    agent: Any, layout: RunLayout, with_replay_buffer: bool, signum: int, worker: workers.Worker
) -> None:
    timesteps = int(agent.num_timesteps)
    model_path = checkpoint_paths(layout.run_dir, timesteps)[0]
    if with_replay_buffer:
        save_checkpoint(agent, layout.run_dir, timesteps, rank=worker.rank, synchronize=worker.synchronize)
    elif worker.leads:
        save_agent(agent, model_path)
    if not worker.leads:
        return
    save_normalizer(agent, layout.vecnormalize_path)
    print(
        f"Stopped by {signal.Signals(signum).name} at step {timesteps}: saved the agent to {model_path} "
        f"(resume with -i {layout.run_dir})",
        flush=True,
    )


def follow(
    agent: Any,
    envs: TrainingEnvs,
    remaining: int,
    args: argparse.Namespace,
    *,
    worker: workers.Worker,
    stop: SignalStop,
    budget: TrainingTimeBudget | None,
    reset_num_timesteps: bool,
    layout: RunLayout,
) -> RunLayout:
    """Train as a worker other than rank 0: no evaluation and no logs; its replay buffer saved with each
    checkpoint (and at the end with ``--save-replay-buffer``), beside rank 0's."""
    from her_wrap.runs.callbacks import CheckpointCallback

    if not layout.run_dir.is_dir() and (args.save_freq > 0 or args.save_replay_buffer):
        print(
            f"Note: worker {worker.rank} does not see the run folder {layout.run_dir} on this machine: "
            "its replay buffer is not saved (a resumed run gives it worker 0's)",
            flush=True,
        )
    checkpoints = CheckpointCallback(
        agent, layout.run_dir, args.save_freq, verbose=0, rank=worker.rank, synchronize=worker.synchronize
    )
    # ``stop`` handles the signals already (:func:`train`, from the moment the workers joined).
    agent.learn(
        remaining,
        callback=[checkpoints, stop, *([budget] if budget is not None else [])],
        log_interval=None,
        reset_num_timesteps=reset_num_timesteps,
    )
    if stop.stopped_by is not None:
        end_stopped(agent, envs, layout, stop_keeps_replay_buffer(args), stop.stopped_by, worker)
    if args.save_replay_buffer:
        save_worker_replay_buffer(agent, layout.replay_buffer_path, worker.rank)
    envs.close()
    workers.leave_workers()
    return layout
