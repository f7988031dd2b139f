"""The exceptions the ``her-wrap`` command turns into a one-line message and a non-zero exit status."""

from __future__ import annotations

import signal

#: Exit status of ``her-wrap`` for a :class:`UsageError`.
EXIT_USAGE = 2
#: Exit status of ``her-wrap`` for a :class:`RunError`.
EXIT_RUN_FAILED = 3


class UsageError(Exception):
    """Bad input from the user: an unknown env id, a config entry that is missing or malformed, a storage
    URL that cannot be reached, ...

    The message is one line that names the problem and, where there is one, the fix. ``her-wrap`` prints
    it without a traceback and exits with status 2; anything else that goes wrong is a bug and keeps its
    traceback.
    """


class RunError(Exception):
    """A run that cannot go on through no fault of its command line: a corrupt or unreadable saved agent,
    a full disk, an env that returned a NaN, a learner whose parameters turned non-finite.

    The message is one line that names the file, path, env column or step, and what to do. ``her-wrap``
    prints it without a traceback and exits with status 3; the run folder keeps every file completed
    before it (the previous checkpoint included).
    """


#: The signals that stop a run after it saves what it has (:class:`her_wrap.runs.callbacks.SignalStop`): Ctrl-C's
#: and a job scheduler's.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_status(signum: int) -> int:
    """The exit status of a process that a signal ended on purpose: ``128 +`` its number, as shells
    report it (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


class StoppedBySignal(Exception):
    """A run stopped by SIGINT or SIGTERM after saving what it had: ``her-wrap`` exits with :attr:`status`
    (``128 +`` the signal's number, as shells report it: 130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.status = signal_status(signum)
