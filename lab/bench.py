"""The harness the benchmarks share: options, clocks, workers, ratios and the page.

A benchmark (a module of :mod:`lab.benchmarks`, run as ``python scripts/bench_NAME.py``) times her_wrap
and the reference implementation (stable-baselines3, cpprb, PyTorch against JAX) side by side in one run
on one machine, prints their ratio, and writes a markdown page that names the command and the machine. The parts that do not depend on what is measured live here:

- :func:`parser`: the script's command line, its docstring as the help;
- :class:`Stopwatch`, :func:`seconds_per_call`, :func:`alternated_medians`: wall-clock and CPU time, and
  rounds that take turns so that a shared machine's slow spells fall on both sides alike;
- :func:`run_worker` / :func:`report_to_parent`: one measurement in a fresh interpreter, its result back
  as the last line of its output;
- :func:`ratio`, :func:`targets_table`: the side-by-side figures;
- :func:`page`, :func:`write_page`: the markdown page, with the command that wrote it and
  :func:`~lab.doc_sections.machine_note`;
- :func:`matmul_peak_gflops`, :func:`matmul_wall_gflops`, :func:`host_reading`: how fast this machine is
  now, for figures taken on different days.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from lab.doc_sections import command_lines, cpu_model

#: The repository's root: scripts' default pages go under its ``docs/``.
ROOT = Path(__file__).resolve().parents[1]


def parser(
    doc: str | None, *, env: str | None = None, seed: bool = False, quick: str | None = None
) -> argparse.ArgumentParser:
    """The argument parser of a bench script whose ``--help`` shows the script's docstring as written.

    :param doc: the script's ``__doc__`` (its usage examples keep their line breaks)
    :param env: when given, an ``--env`` option with this default goal env id
    :param seed: whether to add ``--seed`` (default 0), the seed of every learner and env of the run
    :param quick: when given, a ``--quick`` flag (a smoke run) with this text saying what it runs
    """
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if env is not None:
        made.add_argument("--env", default=env, help=f"goal env id (default: {env})")
    if seed:
        made.add_argument("--seed", type=int, default=0, help="seed of the learners and envs (default: 0)")
    if quick is not None:
        made.add_argument("--quick", action="store_true", help=quick)
    return made


class Stopwatch:
    """Wall-clock seconds and this process's CPU seconds of every block run under it, summed.

    CPU time is the figure to compare on a shared machine: other processes inflate wall-clock time
    unevenly, not this process's CPU time. ``laps`` holds the wall-clock seconds of each block::

        clock = Stopwatch()
        with clock:
            model.learn(1_000)
        clock.wall, clock.cpu, clock.laps
    """

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.laps: list[float] = []
        self._started = (0.0, 0.0)

    def __enter__(self) -> Stopwatch:
        self._started = (time.perf_counter(), time.process_time())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        wall, cpu = self._started
        self.laps.append(time.perf_counter() - wall)
        self.wall += self.laps[-1]
        self.cpu += time.process_time() - cpu


def seconds_per_call(
    function: Callable[[], object], min_seconds: float, *, min_calls: int = 3, warmup: int = 0
) -> float:
    """Wall-clock seconds per call of ``function``, over at least ``min_seconds`` and ``min_calls`` calls.

    :param warmup: untimed calls first (first-call allocations, JIT compilation)
    """
    for _ in range(warmup):
        function()
    calls, start = 0, time.perf_counter()
    while True:
        function()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and calls >= min_calls:
            return elapsed / calls


def alternated_medians(
    functions: dict[str, Callable[[], object]], seconds: float, rounds: int, *, warmup: int = 0
) -> dict[str, float]:
    """Microseconds per call of each function: the median of ``rounds`` rounds that take turns.

    :param functions: label -> function, timed in this order within each round
    :param seconds: timed seconds of all the rounds of all the functions together
    :param warmup: untimed calls of each function first
    """
    for function in functions.values():
        for _ in range(warmup):
            function()
    share = seconds / (len(functions) * rounds)
    times: dict[str, list[float]] = {label: [] for label in functions}
    for _ in range(rounds):
        for label, function in functions.items():
            times[label].append(seconds_per_call(function, share, min_calls=20))
    return {label: 1e6 * statistics.median(values) for label, values in times.items()}


def random_stepper(env: Any, seed: int) -> Callable[[], None]:
    """A function that steps ``env`` with a random action and resets it at an episode's end (seeded)."""
    env.reset(seed=seed)
    env.action_space.seed(seed)

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()

    return step


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block on ``threads`` torch threads; this process's count is restored after."""
    import torch as th

    saved = th.get_num_threads()
    th.set_num_threads(threads)
    try:
        yield
    finally:
        th.set_num_threads(saved)


def matmul_peak_gflops(runs: int = 20, size: int = 1024) -> float:
    """fp32 GFLOPS of one thread's square matrix product (CPU time, so other processes change it little),
    the best of ``runs``; this process's torch threads are restored after."""
    import torch as th

    with torch_threads(1):
        a, b = th.randn(size, size), th.randn(size, size)
        best = 0.0
        for _ in range(runs):
            start = time.process_time()
            th.mm(a, b)
            best = max(best, 2 * size**3 / max(time.process_time() - start, 1e-9) / 1e9)
        return best


def matmul_wall_gflops(threads: int, rows: int = 2048, width: int = 256, seconds: float = 1.0) -> float:
    """fp32 GFLOPS of a ``rows x width`` by ``width x width`` product (a batch through one hidden layer of
    an update) on ``threads`` torch threads, in wall-clock time: the median of 5 spells of ``seconds`` / 5.

    :func:`matmul_peak_gflops` times CPU time, which a slower wall clock (another tenant on the host, a
    thread waiting for its sibling) leaves unchanged; this reading moves with it. This process's torch
    threads are restored after.
    """
    import torch as th

    with torch_threads(threads):
        a, b = th.randn(rows, width), th.randn(width, width)
        spells = [
            seconds_per_call(lambda: th.mm(a, b), seconds / 5, min_calls=20, warmup=20) for _ in range(5)
        ]
        return 2 * rows * width * width / statistics.median(spells) / 1e9


#: The packages whose versions :func:`host_reading` records: what a run's speed depends on.
SPEED_PACKAGES = ("torch", "numpy", "mujoco", "gymnasium", "gymnasium-robotics", "stable-baselines3")


def host_reading(env_id: str | None = None, seconds: float = 1.0) -> dict[str, Any]:
    """How fast this machine runs now, for a run's record: the CPU's model and count
    (:func:`~lab.doc_sections.cpu_model`), whether it has bfloat16 dot products
    (:func:`her_wrap.sb3.policies.cpu_has_bfloat16_products`: what ``hidden_dtype: auto`` resolves to), one
    thread's fp32 matmul peak
    (:func:`matmul_peak_gflops`), an update's product in wall-clock time on one thread and on every core
    (:func:`matmul_wall_gflops`, keyed by the thread count), the load average, the versions of
    :data:`SPEED_PACKAGES`, and with ``env_id`` the wall-clock ms of one env step with random actions
    (physics and the env's own code, the median of 5 spells of ``seconds`` / 5).

    Figures of runs on different days differ by more than their recipes when the host's speed moves;
    this says which of the two moved.
    """
    from her_wrap.sb3.policies import cpu_has_bfloat16_products

    reading: dict[str, Any] = {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "bfloat16_products": cpu_has_bfloat16_products(),
        "matmul_gflops_one_thread": round(matmul_peak_gflops(), 1),
        "update_matmul_gflops_wall": {
            str(threads): round(matmul_wall_gflops(threads, seconds=seconds), 1)
            for threads in sorted({1, os.cpu_count() or 1})
        },
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "versions": {name: _version(name) for name in SPEED_PACKAGES},
    }
    if env_id is not None:
        from her_wrap.envs.registry import make_goal_env

        env = make_goal_env(env_id)
        try:
            step = random_stepper(env, seed=0)
            spells = [seconds_per_call(step, seconds / 5, min_calls=20, warmup=20) for _ in range(5)]
        finally:
            env.close()
        reading["env_step_ms"] = round(1e3 * statistics.median(spells), 3)
    return reading


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_flops(function: Callable[[], object]) -> float:
    """Floating-point operations of the torch matrix products one call of ``function`` runs (forward
    and backward), as :class:`torch.utils.flop_counter.FlopCounterMode` counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        function()
    return float(counter.get_total_flops())


def run_worker(module: str, arguments: Sequence[str]) -> dict[str, Any] | None:
    """Run ``python -m MODULE --worker ARGUMENTS`` in a fresh interpreter, from the repository's root,
    and return the JSON of its last line.

    A fresh interpreter per measurement keeps one implementation's allocations, threads and imports out
    of another's figures. The worker's stderr (progress, a traceback) goes through to this one's.

    :param module: the benchmark's module, ``"lab.benchmarks.replay"``
    :return: the worker's result (see :func:`report_to_parent`), or None when it failed (said on stderr)
    """
    command = [sys.executable, "-m", module, "--worker", *arguments]
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False, cwd=ROOT)
    if completed.returncode != 0:
        print(f"worker {' '.join(arguments)} failed (exit {completed.returncode})", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def report_to_parent(result: dict[str, Any]) -> None:
    """Print a worker's result as the one JSON line :func:`run_worker` reads (its last line of output);
    values JSON has no type for are written as their ``str``."""
    print(json.dumps(result, default=str), flush=True)


def ratio(ours: float, reference: float) -> str:
    """``ours / reference`` as the pages write it, ``"0.83x"``."""
    return f"{ours / reference:.2f}x"


def targets_table(targets: Iterable[tuple[str, str, bool]], *, heading: str = "target") -> list[str]:
    """A markdown table of targets: each a label, what was measured (text) and whether it was met."""
    lines = [f"| {heading} | measured | met |", "|---|---:|:---:|"]
    lines += [f"| {label} | {measured} | {'yes' if met else 'no'} |" for label, measured, met in targets]
    return lines


def page(title: str, command: str, body: Sequence[str], machine: str) -> str:
    """A benchmark's markdown page: its title, the command that wrote it, ``body`` and the machine note.

    :param command: the command line, ``python scripts/NAME.py ...``, rerun to refresh the page
    :param machine: one sentence on the machine (:func:`~lab.doc_sections.machine_note`)
    """
    script = command.split()[1]
    lines = [f"# {title}", "", f"Written by `{script}`; rerun it to refresh this page:"]
    return "\n".join([*lines, *command_lines(command), *body, "", machine, ""])


def write_page(path: Path, text: str) -> None:
    """Write a page (and the folders above it) and say where it went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
