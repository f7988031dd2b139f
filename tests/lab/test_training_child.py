"""A runner's child training process: a stop signal to the runner, the child or both saves once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab import training_child

ROOT = Path(__file__).resolve().parents[2]

#: A stand-in for ``her-wrap train``: it stops on SIGINT or SIGTERM as SignalStop does (announcing the
#: first signal, exiting without saving on a second), "saves" for two seconds and prints its stop line.
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time

    received = []

    def handle(signum, frame):
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) > 1:
            print(f"{name} again: exiting at once, without saving", flush=True)
            os._exit(128 + signum)
        print(f"{name}: stopping after this step to save the agent", flush=True)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    print(f"Run folder: /runs/child-{os.getpid()}", flush=True)
    for step in range(2000):
        if received:
            time.sleep(2.0)
            print(f"Stopped by {signal.Signals(received[0]).name} at step {step}: saved", flush=True)
            sys.exit(128 + received[0])
        print(f"step {step}", flush=True)
        time.sleep(0.01)
    print("finished", flush=True)
    """
)

#: The runner's wait for the child's own announcement: shorter than CHILD's save, so that a signal passed on
#: blindly would reach a child that is saving.
GRACE = 1.0

#: A runner: trains CHILD through train_in_child, echoing its run folder line only.
RUNNER = textwrap.dedent(
    """
    import sys
    from her_wrap.runs.errors import StoppedBySignal
    from lab import training_child
    from lab.training_child import train_in_child

    training_child.RELAY_GRACE_SECONDS = {grace}
    try:
        completed = train_in_child([sys.executable, "-c", sys.argv[1]], echo=lambda line: line.startswith("Run"))
    except StoppedBySignal as stop:
        print(f"runner: stopped ({stop.status})", flush=True)
        sys.exit(stop.status)
    print(f"runner: child exited with {completed.returncode}", flush=True)
    """
).replace("{grace}", str(GRACE))


def start_runner() -> tuple[subprocess.Popen[str], int]:
    """Start RUNNER on CHILD, in a session of its own (as a terminal's job); return it and the child's pid
    once the child is training."""
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, CHILD],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=os.environ,
        start_new_session=True,
    )
    assert runner.stdout is not None
    first = runner.stdout.readline()
    assert first.startswith("Training in process"), first
    child = int(first.split()[3].rstrip(":"))
    assert runner.stdout.readline().strip().startswith("Run folder: /runs/child-")
    return runner, child


def finish(runner: subprocess.Popen[str]) -> list[str]:
    """The runner's lines once it ends, its exit status last (``status N``)."""
    out, _ = runner.communicate(timeout=60)
    return [*out.splitlines(), f"status {runner.returncode}"]


def assert_saved_once(lines: list[str], signum: int) -> None:
    """The runner's lines show the child's one stop on ``signum``, saved, and the runner's matching status."""
    name = signal.Signals(signum).name
    assert lines[-1] == f"status {128 + signum}", lines
    assert any(line.startswith(f"  Stopped by {name} at step") for line in lines), lines
    assert not any("again" in line for line in lines), lines


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_runner_alone_reaches_the_child_which_saves_and_says_so(signum: int) -> None:
    runner, _ = start_runner()
    runner.send_signal(signum)
    lines = finish(runner)
    assert_saved_once(lines, signum)
    # the child's handler may print inside one of its step lines (``step 12SIGINT: stopping ...``)
    assert any(
        f"{signal.Signals(signum).name}: stopping after this step to save the agent" in line for line in lines
    )
    assert lines[-2] == f"runner: stopped ({128 + signum})"


@pytest.mark.parametrize("runner_too", [True, False], ids=["runner-and-child", "child-alone"])
def test_a_signal_to_the_child_with_or_without_the_runner_stops_it_once_so_that_it_saves(
    runner_too: bool,
) -> None:
    runner, child = start_runner()
    os.kill(child, signal.SIGTERM)
    if runner_too:
        runner.send_signal(signal.SIGTERM)
    assert_saved_once(finish(runner), signal.SIGTERM)


def test_ctrl_c_in_the_terminal_stops_the_child_once_so_that_it_saves() -> None:
    runner, _ = start_runner()
    os.killpg(runner.pid, signal.SIGINT)  # the terminal's foreground group: the runner's
    assert_saved_once(finish(runner), signal.SIGINT)


def test_a_second_signal_to_the_runner_makes_the_child_exit_at_once() -> None:
    runner, _ = start_runner()
    runner.send_signal(signal.SIGTERM)
    assert runner.stdout is not None
    started = time.monotonic()
    announced = runner.stdout.readline()  # the first signal passed on: the child is saving
    assert announced.strip() == "SIGTERM: stopping after this step to save the agent"
    assert time.monotonic() - started >= GRACE - 0.1
    runner.send_signal(signal.SIGTERM)
    lines = finish(runner)
    assert "  SIGTERM again: exiting at once, without saving" in lines, lines
    assert not any(line.startswith("  Stopped by") for line in lines), lines


def test_a_child_that_finishes_returns_its_status_and_output_and_restores_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    completed = training_child.train_in_child(
        [sys.executable, "-c", "print('Run folder: x'); print('done')"], echo=lambda line: False
    )
    assert completed.returncode == 0
    assert completed.stdout == "Run folder: x\ndone\n"
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_child_that_fails_returns_its_status_not_a_stop() -> None:
    completed = training_child.train_in_child([sys.executable, "-c", "raise SystemExit(143)"], echo=bool)
    assert completed.returncode == 143  # a status alone, with no stop signal seen, is a failure to report


def test_the_childs_announcement_is_recognised_inside_a_line_it_interrupted() -> None:
    """A handler's print can land between another print's text and its line end: the child still saves."""
    relay = training_child._Relay(process=None)  # type: ignore[arg-type]
    relay.saw("step 12\n")
    assert not relay.child_stopping
    relay.saw("step 13SIGTERM: stopping after this step to save the agent (SIGTERM again exits at once)\n")
    assert relay.child_stopping
