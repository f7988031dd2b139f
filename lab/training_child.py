"""Run ``her-wrap train`` in a child process that a SIGINT or SIGTERM to the caller stops and saves.

A runner such as ``scripts/robotics_results.py run`` trains in a child process and reads its output. The
child runs in a session of its own, so that a Ctrl-C in the terminal reaches the runner alone; the runner
passes a SIGINT or SIGTERM it receives on to the child, which saves a checkpoint at its next step and
prints where (``Stopped by SIGTERM at step N: saved the agent to ... (resume with -i RUN_FOLDER)``).

A job scheduler may signal the runner and the child both. A second signal makes the child exit without
saving, so the runner waits :data:`RELAY_GRACE_SECONDS` and passes the signal on only when the child has
not said it received one. A second signal to the runner is passed on at once, to stop a save that hangs.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable, Sequence

from her_wrap.runs.callbacks import announces_stop
from her_wrap.runs.errors import STOP_SIGNALS, StoppedBySignal, signal_status

#: Seconds the runner waits, after a signal, for the child to say it received the same signal.
RELAY_GRACE_SECONDS = 2.0


class _Relay:
    """Passes the runner's stop signals on to ``process`` (see the module's docstring)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        #: the signal the runner received first, or None
        self.received: int | None = None
        self._child_announced = threading.Event()
        self._timer: threading.Timer | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
            self._timer = threading.Timer(RELAY_GRACE_SECONDS, self._pass_on_unless_announced, (signum,))
            self._timer.daemon = True
            self._timer.start()
        else:
            self._send(signum)

    @property
    def child_stopping(self) -> bool:
        """Whether the child said it received a stop signal (it saves, then prints its stop line)."""
        return self._child_announced.is_set()

    def saw(self, line: str) -> None:
        """Note one line of the child's output: whether it says the child received a stop signal."""
        if announces_stop(line):
            self._child_announced.set()

    def _pass_on_unless_announced(self, signum: int) -> None:
        if not self._child_announced.is_set():
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def train_in_child(command: Sequence[str], echo: Callable[[str], bool]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (``her-wrap train ...``), print the lines ``echo`` selects, and return its exit status
    and output.

    The runner's SIGINT and SIGTERM are passed on to the child while it runs (from the main thread only);
    once the child says it stops on one, every line it prints is echoed, its stop line among them.

    :raises StoppedBySignal: when the child stopped on SIGINT or SIGTERM, the runner's or its own (it saved
        what it had, as its echoed lines say)
    """
    lines: list[str] = []
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as process:
        print(f"Training in process {process.pid}: stop it with SIGINT or SIGTERM to this one", flush=True)
        relay = _Relay(process)
        relaying = threading.current_thread() is threading.main_thread()
        previous = (
            {signum: signal.signal(signum, relay.handle) for signum in STOP_SIGNALS} if relaying else {}
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                relay.saw(line)
                if relay.child_stopping or echo(line):
                    print("  " + line.rstrip(), flush=True)
            process.wait()
        finally:
            relay.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    stopped_by = {signal_status(signum): signum for signum in STOP_SIGNALS}.get(process.returncode)
    if stopped_by is not None and (relay.received is not None or relay.child_stopping):
        raise StoppedBySignal(stopped_by)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout="".join(lines))
