"""How the launcher of ``her-wrap train --workers N`` passes a stop (SIGINT, SIGTERM) on to its workers.

The workers run in a process group of their own, so a stop's signal reaches the launcher alone: it passes
the signal on once, waits up to :data:`SAVE_GRACE_S` for the workers to stop at one step and save, and
says in one line how the run ended. A second signal while it waits kills the workers at once, unsaved.
Workers start with Ctrl-C ignored (:func:`start_workers`), so that one still importing the package ends
quietly when the stop comes, instead of with a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

#: Seconds the launcher waits, after SIGINT (Ctrl-C) or SIGTERM, for the workers to stop and save before it
#: kills them.
SAVE_GRACE_S = 120.0


class Signalled(Exception):
    """The launcher received one of :data:`her_wrap.runs.errors.STOP_SIGNALS`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_signalled(signum: int, frame: Any) -> None:
    """A signal handler that turns the stop's signal into :class:`Signalled` in the launcher's main thread."""
    raise Signalled(signum)


def start_workers(processes: list[Any]) -> None:
    """Start the workers, each with Ctrl-C ignored until it has left the launcher's process group
    (:func:`her_wrap.runs.launcher._worker_main`).

    A process keeps an ignored signal across ``exec``, and Python then leaves it ignored instead of raising
    KeyboardInterrupt, so a Ctrl-C while a worker still imports the package (a second or more) no longer
    ends it with a traceback: the launcher takes the Ctrl-C and passes the stop on, which ends the worker
    as soon as it takes SIGINT again. The launcher ignores SIGINT only while it starts one worker (about
    10 ms, fork and exec): a Ctrl-C in that instant is not seen, and the next one stops the run.
    """
    for process in processes:
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process.start()
        finally:
            signal.signal(signal.SIGINT, handler)


def stop_and_save(processes: list[Any], signum: int) -> None:
    """Pass ``signum`` on to the workers and wait for them to save and end; a second signal kills them at
    once, without saving (a worker takes a repeat of its signal for the same stop delivered twice, so the
    launcher does not pass the second one on)."""
    name = signal.Signals(signum).name
    signal_running(processes, signum)
    print(
        f"{name}: the workers stop at their next training cycle and save (waiting up to {SAVE_GRACE_S:g} s; "
        f"{name} again stops them at once)",
        file=sys.stderr,
        flush=True,
    )
    try:
        deadline = time.monotonic() + SAVE_GRACE_S
        for process in processes:
            if process.pid is not None:  # started: the stop may come while the launcher starts them
                process.join(max(0.0, deadline - time.monotonic()))
    except Signalled as again:
        print(
            f"{signal.Signals(again.signum).name} again: stopping the workers at once, without saving",
            file=sys.stderr,
            flush=True,
        )
        signal_running(processes, signal.SIGKILL)
        return
    late = [rank for rank, process in enumerate(processes) if process.is_alive()]
    if late:
        print(
            f"her-wrap train: error: worker(s) {', '.join(map(str, late))} did not stop within {SAVE_GRACE_S:g} s; "
            "killing them (resume from the newest checkpoint)",
            file=sys.stderr,
            flush=True,
        )
    # A worker takes the stop's signals from the moment it joins the others; before, the signal ends it.
    early = [
        rank for rank, process in enumerate(processes) if process.pid is None or process.exitcode == -signum
    ]
    if early == list(range(len(processes))):
        print(
            f"{name}: stopped before the workers started training: nothing to save",
            file=sys.stderr,
            flush=True,
        )
    elif early:
        print(
            f"{name}: worker(s) {', '.join(map(str, early))} stopped before joining the others "
            "(nothing of theirs to save)",
            file=sys.stderr,
            flush=True,
        )


def signal_running(processes: list[Any], signum: int) -> None:
    """Send ``signum`` to every worker still running."""
    for process in processes:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signum)
