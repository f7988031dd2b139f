"""``her-wrap`` as a child process: its environment, and a signal sent once it trains."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict[str, str]:
    """The test process's environment, with the checkout importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def signal_once_training(
    command: list[str], signum: int, settle_s: float, every_process: bool | str = False
) -> tuple[int, str, str]:
    """Run ``command`` (a ``her-wrap train``), send it ``signum`` ``settle_s`` seconds after it prints
    ``Training HER``, and return its exit status with its stdout from there on and its stderr.

    :param every_process: send the signal to the workers the launcher started too, as a job scheduler
        that signals every process of a job does; ``"workers"``: to those workers alone
    """
    process = subprocess.Popen(
        command, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    workers: list[int] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            started = re.match(r"Started \d+ workers \(pids ([\d, ]+)", line)
            if started:
                workers = [int(pid) for pid in started[1].replace(",", " ").split()]
            if line.startswith("Training HER"):
                break
        time.sleep(settle_s)  # into the training loop
        if every_process:
            assert workers, "the command started no workers"
            for pid in workers:
                os.kill(pid, signum)
            # Apart enough that a worker handles the two deliveries one by one (Python runs one handler for
            # signals that arrive together), as a worker busy in Python code when they arrive would.
            time.sleep(0.3)
        if every_process != "workers":
            process.send_signal(signum)
        rest, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, rest, err
