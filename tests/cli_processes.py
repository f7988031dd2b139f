"""``her-wrap`` as a child process: its environment, and a signal sent once it trains."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict[str, str]:
    """The test process's environment, with the checkout importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def signal_once_training(command: list[str], signum: int, settle_s: float) -> tuple[int, str, str]:
    """Run ``command`` (a ``her-wrap train``), send it ``signum`` ``settle_s`` seconds after it prints
    ``Training HER``, and return its exit status with its stdout from there on and its stderr."""
    process = subprocess.Popen(
        command, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("Training HER"):
                break
        time.sleep(settle_s)  # into the training loop
        process.send_signal(signum)
        rest, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, rest, err
