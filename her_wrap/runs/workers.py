"""One worker of several: joining the process group, its seed and run folder, leaving it, and resuming
after a restart. The processes are started by :mod:`her_wrap.runs.launcher` (``her-wrap train --workers N``)
or by ``torchrun``.

Two ways to start a multi-worker run, one training entry:

- ``her-wrap train --env ID --workers N`` checks its input, then starts N processes here, each a worker of
  one ``torch.distributed`` process group (gloo on CPU, NCCL when the workers use CUDA) that meets at
  ``127.0.0.1:--rendezvous-port``. It watches them: when one fails, it stops the others and names it.
- ``torchrun ... -m her_wrap.runs.cli train --env ID`` (several machines, or torchrun's own launcher):
  torchrun sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` and each process joins the
  group from them (``env://``); ``--workers`` is left out there.

A config entry's ``workers: N`` starts N workers as ``--workers N`` does; ``--workers`` replaces it (``--workers
1`` trains in one process), and under torchrun the launch's count does.

Each worker steps its own envs (seeded ``seed + rank * SEED_STRIDE``) into its own replay buffer; the learner's training
is shared as :mod:`her_wrap.sb3.distributed` describes. Rank 0 writes the run folder (config, args,
monitor files of its envs, evaluations, checkpoints, the final agent); the other workers log nothing and
save only their replay buffers, beside rank 0's (:func:`~her_wrap.runs.checkpoints.worker_replay_buffer_path`),
which each loads again when the run resumes.
Every step count of the run (``n_timesteps``, ``--eval-freq``, ``--save-freq``, ``timesteps`` in
``evaluations.npz``) counts one worker's env steps: the run's total is N times that.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import multiprocessing
import multiprocessing.connection
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from her_wrap.runs.atomic import atomic_write_text
from her_wrap.runs.errors import UsageError

#: Seconds a collective may wait for the other workers before it fails. A dead worker is noticed at once
#: (its connections close); this bounds a worker that hangs, and must exceed rank 0's longest evaluation
#: or checkpoint, during which the others wait.
DEFAULT_TIMEOUT_S = 600.0


EXIT_WORKER_FAILED = 1


#: A worker's exit status when a collective failed because another worker was lost: a consequence, which the
#: launcher names after the failure that caused it.
EXIT_PEER_LOST = 3


#: Worker ``r`` of a run seeded ``s`` is seeded ``s + r * SEED_STRIDE`` (its envs ``s + r * SEED_STRIDE + i``):
#: distinct streams for fewer than ``SEED_STRIDE`` envs per worker, clear of the evaluation env's offset.
SEED_STRIDE = 100_000


#: Set in the environment of the workers that :func:`~her_wrap.runs.launcher.launch` starts (to the launcher's pid).
LAUNCHER_ENV = "HER_WRAP_LAUNCHER_PID"


def started_by_launch() -> bool:
    """Whether this process is a worker that ``her-wrap train --workers N`` started (not torchrun's)."""
    return under_torchrun() and LAUNCHER_ENV in os.environ


def under_torchrun() -> bool:
    """Whether this process was started as one worker of several (by torchrun or by :func:`~her_wrap.runs.launcher.launch`)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


def exit_worker(status: int) -> NoReturn:
    """End a worker process with ``status``, its output flushed, without the interpreter's teardown.

    Teardown can destroy torch.distributed's native threads while one of them still waits (after a lost
    peer) or hands a tensor back to Python, and such a thread aborts the process (SIGABRT, "terminate called
    without an active exception"): a worker that had finished its work would then be reported killed. The
    worker's files are written and closed by then; only its output streams and ``logging`` need flushing,
    and the named semaphores it made (tqdm's lock, made when SB3's logger first prints) need removing, as
    a multiprocessing child's own exit would (else the resource tracker warns of them as leaked).
    """
    import multiprocessing.util

    # What the interpreter's exit runs first: the semaphores' cleanup (not in typeshed).
    multiprocessing.util._run_finalizers(0)  # type: ignore[attr-defined]
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def exit_with_launcher(rank: int) -> None:
    """End this worker when the launcher that started it is gone (killed with no chance to stop it)."""
    launcher = multiprocessing.parent_process()
    if launcher is None:
        return
    multiprocessing.connection.wait([launcher.sentinel])
    print(f"her-wrap train: error: worker {rank}: the launcher died; stopping", file=sys.stderr, flush=True)
    os._exit(EXIT_WORKER_FAILED)


@dataclass(frozen=True)
class Worker:
    """This process's place in a run: rank 0 of 1 when training alone."""

    rank: int = 0
    world: int = 1

    @property
    def leads(self) -> bool:
        """Rank 0: the worker that evaluates, logs and saves."""
        return self.rank == 0

    @property
    def synchronize(self) -> Callable[[], None] | None:
        """A barrier of the run's workers (each waits until all reach it), or ``None`` when training alone."""
        if self.world == 1:
            return None
        import torch.distributed as dist

        return dist.barrier

    def seed(self, seed: int) -> int:
        """This worker's seed: rank 0's seed (shared by all workers) plus ``rank * SEED_STRIDE``."""
        if self.world > 1:
            import torch.distributed as dist

            shared = [seed]
            dist.broadcast_object_list(shared, src=0)
            seed = int(shared[0])
        return seed + self.rank * SEED_STRIDE

    def run_dir(self, create: Callable[[], Path]) -> Path:
        """Rank 0's new run folder (``create`` runs on rank 0 only), known to every worker."""
        if self.world == 1:
            return create()
        import torch.distributed as dist

        shared: list[Any] = [create() if self.leads else None]
        dist.broadcast_object_list(shared, src=0)
        record = _restart_record(Path(shared[0]).parents[1])
        if self.leads and record is not None:
            atomic_write_text(record, f"{shared[0]}\n")  # where a restart of this group resumes
        return Path(shared[0])


#: Set by torchrun's elastic agent, and by :func:`~her_wrap.runs.launcher.launch`: the run's id and how often its workers restarted.
RUN_ID_ENV, RESTART_COUNT_ENV = "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"


def _restart_record(log_folder: str | Path) -> Path | None:
    """The file naming the run folder of this launch's newest start, or ``None`` when not several workers."""
    from her_wrap.runs.run_layout import ALGO_FOLDER, folder_name

    if not under_torchrun() or RUN_ID_ENV not in os.environ:
        return None
    return Path(log_folder) / ALGO_FOLDER / f".workers-{folder_name(os.environ[RUN_ID_ENV])}"


def resume_restarted_run(args: argparse.Namespace) -> None:
    """In a restarted worker group (torchrun's or :func:`~her_wrap.runs.launcher.launch`'s), resume from the last checkpoint.

    A collective: every worker calls it once it has joined the group (:func:`join_workers`).

    The run folder of the group's previous start is the one rank 0 recorded (:meth:`Worker.run_dir`); its
    newest checkpoint becomes ``-i``, so that the run goes on into a new run folder up to its
    ``n_timesteps``. Without a checkpoint there, the run starts over. Under torchrun give each launch its own
    ``--rdzv-id`` (the record is kept by it) and a log folder every machine sees.
    """
    from her_wrap.runs.checkpoints import resolve_saved_agent

    record = _restart_record(args.log_folder)
    if record is None:
        return
    # Every worker of a restarted group resumes, or none: under torchrun a node whose workers did not fail
    # restarts them with its restart count unchanged, so the group takes the largest count of its workers.
    if largest(int(os.environ.get(RESTART_COUNT_ENV, "0"))) == 0 or not record.exists():
        return
    previous = Path(record.read_text().strip())
    try:
        saved = resolve_saved_agent(previous)
    except UsageError:
        print(f"Restarted: {previous} has no checkpoint; starting over", flush=True)
        return
    args.trained_agent = saved.model
    print(f"Restarted: resuming from {saved.model}", flush=True)


def join_workers(args: argparse.Namespace) -> Worker:
    """Join the process group this process was started into (by :func:`~her_wrap.runs.launcher.launch` or torchrun), if any.

    Also settles the worker's torch threads: 1 per worker unless ``--num-threads`` says otherwise.

    :raises UsageError: for ``--workers`` under torchrun with another count
    """
    if not under_torchrun():
        return Worker()
    import torch
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    if args.workers is not None and args.workers != world:
        raise UsageError(
            f"--workers {args.workers} under a launch of {world} workers: leave --workers out under torchrun "
            "(its --nnodes and --nproc-per-node set the count)"
        )
    args.workers = world  # recorded in args.yml
    if args.num_threads is None:
        args.num_threads = 1
    if not dist.is_initialized():
        cuda = torch.cuda.is_available() and args.device not in ("cpu",)
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            timeout=datetime.timedelta(seconds=getattr(args, "worker_timeout", DEFAULT_TIMEOUT_S)),
        )
    worker = Worker(rank=dist.get_rank(), world=dist.get_world_size())
    if not worker.leads:
        args.verbose, args.tensorboard, args.progress = 0, None, False
    return worker


def largest(value: int) -> int:
    """The largest of the workers' ``value`` (a collective: every worker calls it at the same point)."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([int(value)])
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def leave_workers() -> None:
    """Leave the process group joined by :func:`join_workers`."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
