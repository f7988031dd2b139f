"""``her-wrap train --workers N``: start N worker processes on this machine and watch them.

``her-wrap train --env ID --workers N`` checks its input, then starts N processes here, each a worker of
one ``torch.distributed`` process group (gloo on CPU, NCCL when the workers use CUDA) that meets at
``127.0.0.1:--rendezvous-port``. It watches them: when one fails, it stops the others and names it, and
with ``--max-restarts K`` starts the group again (up to K times), which resumes from the run's newest
checkpoint (:func:`her_wrap.runs.workers.resume_restarted_run`). A stop (SIGINT, SIGTERM) reaches the
launcher alone, which passes it on to the workers (:mod:`her_wrap.runs.launcher_stop`). Under
``torchrun`` (several machines) none of this runs: torchrun starts and restarts the workers, and each
joins the group as :mod:`her_wrap.runs.workers` describes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from her_wrap.runs.arguments import positive_int
from her_wrap.runs.errors import EXIT_USAGE, STOP_SIGNALS, StoppedBySignal, UsageError, signal_status
from her_wrap.runs.launcher_stop import Signalled, raise_signalled, start_workers, stop_and_save
from her_wrap.runs.workers import (
    DEFAULT_TIMEOUT_S,
    EXIT_PEER_LOST,
    EXIT_WORKER_FAILED,
    LAUNCHER_ENV,
    RESTART_COUNT_ENV,
    RUN_ID_ENV,
    exit_with_launcher,
    exit_worker,
    started_by_launch,
)

#: Seconds the launcher gives the other workers to stop after one failed, before it kills them.
STOP_GRACE_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workers``, ``--oversubscribe``, ``--pin-workers``, ``--rendezvous-port``, ``--max-restarts`` and
    ``--worker-timeout``."""
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="train with N worker processes on this machine, gradients averaged at every step "
        "(default: 1; under torchrun leave it out)",
    )
    parser.add_argument(
        "--oversubscribe", action="store_true", help="allow more workers than this machine has CPU cores"
    )
    parser.add_argument(
        "--pin-workers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bind worker r to the r-th CPU core this process may use (default: when the workers take every "
        "core, one each)",
    )
    parser.add_argument(
        "--rendezvous-port",
        type=int,
        default=None,
        metavar="PORT",
        help="TCP port where the workers meet on 127.0.0.1 (default: a free one)",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="K",
        help="when a worker fails, restart all of them up to K times, from the run's last checkpoint "
        "(--save-freq) (default: 0; under torchrun use its --max-restarts)",
    )
    parser.add_argument(
        "--worker-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"seconds a worker waits for the others before it fails (default: {DEFAULT_TIMEOUT_S:g})",
    )


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def worker_cores(workers: int, pin: bool | None) -> list[int] | None:
    """The core each of ``workers`` workers is bound to (worker ``r`` to the ``r``-th), or ``None`` for none.

    ``pin=None`` binds them when they take every core this process may use, one each: the OS then has
    nowhere better to run them, and a worker that stays on its core keeps its caches (two workers on two
    cores ran 1.17x one worker with two threads pinned, 1.15x not; docs/scaling.md). Fewer workers than
    cores are left to the OS, so that two runs on one machine do not share the first cores while the
    others idle. ``pin=True`` binds any count up to the cores; ``pin=False`` never binds.

    :raises UsageError: when ``pin`` is ``True`` and there are more workers than cores
    """
    if pin is False:
        return None
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows cannot bind a process to a core
        if pin:
            raise UsageError("--pin-workers needs Linux (sched_setaffinity): leave it out here") from None
        return None
    if workers > len(cores):
        if pin:
            raise UsageError(
                f"--pin-workers binds each worker to a core of its own, and {workers} workers are more than "
                f"the {len(cores)} cores here: leave --pin-workers out or use fewer workers"
            )
        return None
    if pin is None and workers < len(cores):
        return None
    return cores[:workers]


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check_port_free(port: int) -> None:
    """:raises UsageError: when ``port`` cannot be listened on here."""
    if not 0 < port < 65536:
        raise UsageError(f"--rendezvous-port {port} is not a TCP port (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise UsageError(
                f"--rendezvous-port {port} is in use ({error.strerror}): pick another port or leave the "
                "option out for a free one"
            ) from None


def check_launcher_options(args: argparse.Namespace) -> None:
    """Refuse the options of :func:`launch` in a run that starts no worker processes.

    A worker started by :func:`launch` carries the launcher's options and passes.

    :raises UsageError: for ``--pin-workers`` or ``--oversubscribe`` in one process or under torchrun
    """
    if started_by_launch():
        return
    if args.pin_workers:
        raise UsageError(
            "--pin-workers binds the worker processes that --workers N (N > 1) starts, and this run has none "
            "(one process, or a worker of torchrun, which binds with its own options): leave it out"
        )
    if args.oversubscribe:
        raise UsageError(
            "--oversubscribe allows --workers N (N > 1) to start more workers than cores, and this run starts "
            "none (one process, or a worker of torchrun, which counts its own): leave it out"
        )


def check_launch(args: argparse.Namespace) -> None:
    """Reject, before any worker starts, a ``--workers`` run that cannot work.

    :raises UsageError: naming the problem and the fix
    """
    workers = args.workers
    cores = available_cores()
    if workers > cores and not args.oversubscribe:
        raise UsageError(
            f"--workers {workers} is more than the {cores} CPU cores here: each worker wants a core of its "
            "own; use fewer workers or pass --oversubscribe"
        )
    if args.max_restarts < 0:
        raise UsageError(f"--max-restarts must be 0 or more, got {args.max_restarts}")
    if args.worker_timeout <= 0:
        raise UsageError(f"--worker-timeout must be positive, got {args.worker_timeout:g}")
    if getattr(args, "device", "cpu") not in ("cpu", "auto"):
        raise UsageError(
            f"--workers starts CPU workers; --device {args.device} needs one GPU per worker: launch them "
            "with torchrun (see docs/scaling.md)"
        )
    worker_cores(workers, args.pin_workers)
    if args.rendezvous_port is not None:
        check_port_free(args.rendezvous_port)
    if args.trained_agent is None:  # a resumed run's entry is its run folder's, checked when it starts
        check_entry_shareable(args)


def check_entry_shareable(args: argparse.Namespace) -> None:
    """Load the run's config entry as ``her-wrap train`` will, and refuse settings workers cannot share.

    :raises UsageError: for a bad entry, or a ``train_freq`` that counts episodes
    """
    from her_wrap.runs.arguments import command_config
    from her_wrap.runs.env_factory import ensure_registered

    ensure_registered(args.env)
    config = command_config(args)
    train_freq = config.learner_kwargs.get("train_freq") or ()
    counts = train_freq[1] if isinstance(train_freq, list | tuple) and len(train_freq) == 2 else "step"
    if str(counts).startswith("episode"):
        raise UsageError(
            f"{config.env_id}: train_freq {list(train_freq)} counts episodes, which several workers cannot "
            "share (their episodes end at different steps): give it in steps, e.g. -params "
            "train_freq:[250,step]"
        )


def launch(args: argparse.Namespace, entry: Callable[[argparse.Namespace], int]) -> int:
    """Start ``args.workers`` processes that each run ``entry(args)`` as one worker; return the exit status.

    The seed is drawn here when not given, so every worker derives its own from the same one. When a worker
    fails, the others are stopped and the worker is named on stderr; with ``--max-restarts K`` the group
    then starts again (not after refused settings, status 2), up to K times, from the last checkpoint.
    """
    from her_wrap.runs.arguments import draw_seed

    check_launch(args)
    if args.seed is None:
        args.seed = draw_seed()
    if args.num_threads is None:
        args.num_threads = 1
    run_id = uuid.uuid4().hex
    for restart in range(args.max_restarts + 1):
        if restart:
            print(
                f"her-wrap train: restarting the {args.workers} workers from the last checkpoint "
                f"(restart {restart} of {args.max_restarts})",
                file=sys.stderr,
                flush=True,
            )
        status = _launch_once(args, entry, run_id, restart)
        if status in (0, EXIT_USAGE):  # a setting a worker refused stays refused: no restart
            break
    return status


def _launch_once(
    args: argparse.Namespace, entry: Callable[[argparse.Namespace], int], run_id: str, restart: int
) -> int:
    port = args.rendezvous_port if args.rendezvous_port is not None else free_port()
    cores = worker_cores(args.workers, args.pin_workers)
    context = multiprocessing.get_context("spawn")
    stop_signal = context.Value("i", 0, lock=False)  # the stop the launcher passed on (0: none yet)
    processes = [
        context.Process(
            target=_worker_main,
            args=(entry, args, rank, args.workers, port, None if cores is None else cores[rank], stop_signal),
            kwargs={RUN_ID_ENV: run_id, RESTART_COUNT_ENV: str(restart)},
            name=f"worker{rank}",
        )
        for rank in range(args.workers)
    ]
    # SIGINT (Ctrl-C) and SIGTERM (a job scheduler, kill) reach the launcher alone (the workers run in a
    # process group of their own), which passes them on once: the workers stop together and save.
    previous_handlers = {signum: signal.signal(signum, raise_signalled) for signum in STOP_SIGNALS}
    try:
        start_workers(processes)
        pinned = "" if cores is None else f", bound to cores {', '.join(map(str, cores))}"
        print(
            f"Started {args.workers} workers (pids {', '.join(str(p.pid) for p in processes)}{pinned})",
            flush=True,
        )
        return _watch(processes)
    except Signalled as signalled:
        stop_signal.value = signalled.signum  # for a worker that still ignored Ctrl-C when it came
        stop_and_save(processes, signalled.signum)
        raise StoppedBySignal(signalled.signum) from None
    finally:
        _stop(processes)
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)


def _watch(processes: list[Any]) -> int:
    """Wait for the workers; on the first failure, report it and return non-zero (``EXIT_USAGE``: refused).

    The launcher wakes as soon as a worker ends, so the worker that failed first is the one named. Workers that
    ended in the same instant are all named, a worker's own failure before the loss of its peers it caused.

    :raises Signalled: when a worker ended as a run stopped by a signal does (status 128 + the signal):
        the workers were signalled, not the launcher, and the run stops as if the launcher had been
    """
    pending = {process.sentinel: rank for rank, process in enumerate(processes)}
    while pending:
        ready = multiprocessing.connection.wait(list(pending), timeout=1.0)
        ended = [pending.pop(sentinel) for sentinel in ready]
        for rank in ended:
            processes[rank].join()
        for rank in ended:
            for signum in STOP_SIGNALS:
                if processes[rank].exitcode == signal_status(signum):
                    raise Signalled(signum)
        failed = sorted(
            (rank for rank in ended if processes[rank].exitcode != 0),
            key=lambda rank: (processes[rank].exitcode == EXIT_PEER_LOST, rank),
        )
        for rank in failed:
            process = processes[rank]
            print(
                f"her-wrap train: error: worker {rank} (pid {process.pid}) {_how_it_ended(process.exitcode)}; "
                "stopping the other workers",
                file=sys.stderr,
                flush=True,
            )
        if failed:
            statuses = {processes[rank].exitcode for rank in failed}
            # Refused settings (status 2, the rest lost their peers) exit as one process does.
            refused = EXIT_USAGE in statuses and statuses <= {EXIT_USAGE, EXIT_PEER_LOST}
            return EXIT_USAGE if refused else EXIT_WORKER_FAILED
    return 0


def _how_it_ended(exitcode: int) -> str:
    if exitcode < 0:
        return f"was killed by signal {-exitcode}"
    if exitcode == EXIT_PEER_LOST:
        return f"exited with status {exitcode} (it lost the other workers)"
    return f"exited with status {exitcode}"


def _stop(processes: list[Any]) -> None:
    """Terminate the workers still running, then kill those that ignore it."""
    processes = [process for process in processes if process.pid is not None]  # those started
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _worker_main(
    entry: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
    rank: int,
    world: int,
    port: int,
    core: int | None = None,
    stop_signal: Any = None,
    **elastic: str,
) -> None:
    """One worker started by :func:`launch`: bound to ``core`` (when given, before any thread starts, so
    that torch's and gloo's threads stay there too), torchrun's environment (``elastic``: the run's id and
    restart count), then the training entry. ``stop_signal`` (shared with the launcher) holds the stop the
    launcher passed on, or 0."""
    os.setpgrp()  # signals to the launcher's group (Ctrl-C) reach the launcher, which passes them on once
    # Until it joins the others (and takes them to stop at a step), a stop's signal ends the worker as SIGTERM
    # does. It started with Ctrl-C ignored (:func:`start_workers`): a stop passed on before now ends it here.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if stop_signal is not None and stop_signal.value:
        os.kill(os.getpid(), stop_signal.value)
    if core is not None:
        os.sched_setaffinity(0, {core})
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        **elastic,
    )
    os.environ[LAUNCHER_ENV] = str(os.getppid())
    from her_wrap.sb3.distributed import UnshareableSettingError, WorkerLostError

    threading.Thread(target=exit_with_launcher, args=(rank,), daemon=True).start()
    try:
        status = entry(args)
    except (UsageError, UnshareableSettingError) as error:
        print(f"her-wrap train: error: worker {rank}: {error}", file=sys.stderr, flush=True)
        status = EXIT_USAGE
    except WorkerLostError as error:
        print(f"her-wrap train: error: {error}", file=sys.stderr, flush=True)
        status = EXIT_PEER_LOST
    except StoppedBySignal as stop:
        status = stop.status  # saved, as worker 0 printed
    except KeyboardInterrupt:
        status = 130
    except BaseException:
        traceback.print_exc()
        status = EXIT_WORKER_FAILED
    exit_worker(status)
