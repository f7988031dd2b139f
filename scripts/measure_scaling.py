"""The two costs behind the scaling model of docs/scaling.md: one gradient all-reduce and one update.

- all-reduce: two gloo workers on this machine (one torch thread each) all-reduce, as
  ``her_wrap.sb3.distributed`` does at every optimizer step, one buffer the size of the actor's and one
  the size of the critic's gradients of the FetchPush-v4 entry's learner (DDPG, 3 x 256); median of
  ``--repeats``;
- update: one gradient step of that learner (HER's train step with the entry's update options), timed
  over ``--steps`` steps after filling the buffer with ``--fill`` random-action env steps, at each batch
  size and torch thread count given;
- throughput (``--parts throughput``): ``her-wrap train`` with the shipped entry, ``--throughput-steps``
  env steps in all, as 1 worker x 2 threads and as 2 workers x 1 thread with the per-worker batch, envs and
  ``learning_starts`` halved (the same total batch, env steps per update and random steps); env steps per
  second of training time (``train_seconds`` of the run's last evaluation: evaluations left out), and
  their ratio.

Usage::

    python scripts/measure_scaling.py                       # prints a Markdown table
    python scripts/measure_scaling.py --batch-sizes 1024 2048 --threads 1 2 --steps 40
    python scripts/measure_scaling.py --parts throughput --throughput-steps 20000
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch as th
import torch.distributed as dist
import torch.multiprocessing as mp

ENV_ID = "FetchPush-v4"


def build_agent(batch_size: int, seed: int = 0):
    """The FetchPush-v4 entry of configs/her.yml as ``her-wrap train`` builds it, with ``batch_size``."""
    from her_wrap.runs.arguments import default_config_path
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.env_factory import ensure_registered, make_training_envs
    from her_wrap.runs.model_factory import build_agent as build

    ensure_registered(ENV_ID)
    config = load_run_config(default_config_path(), ENV_ID, overrides=[f"batch_size:{batch_size}"])
    envs = make_training_envs(config, seed)
    return build(config, envs.train, seed=seed, verbose=0), config


def gradient_sizes() -> dict[str, int]:
    """Parameters per optimizer of the entry's learner (what one all-reduce carries)."""
    from her_wrap.sb3.distributed import learner_optimizers

    agent, _ = build_agent(256)
    names = ["actor", "critic", "entropy"]
    return {
        names[index]: sum(p.numel() for group in optimizer.param_groups for p in group["params"])
        for index, optimizer in enumerate(learner_optimizers(agent.model))
    }


def _allreduce_worker(rank: int, port: int, sizes: dict[str, int], repeats: int, queue) -> None:
    th.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=120),
    )
    result = {}
    for name, size in sizes.items():
        buffer = th.randn(size)
        for _ in range(10):
            dist.all_reduce(buffer)
        times = []
        for _ in range(repeats):
            dist.barrier()
            started = time.perf_counter()
            dist.all_reduce(buffer)
            times.append(time.perf_counter() - started)
        result[name] = statistics.median(times)
    if rank == 0:
        queue.put(result)
    dist.destroy_process_group()


def allreduce_seconds(sizes: dict[str, int], repeats: int) -> dict[str, float]:
    from her_wrap.runs.distributed import free_port

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=_allreduce_worker, args=(rank, port, sizes, repeats, queue))
        for rank in range(2)
    ]
    for process in processes:
        process.start()
    result = queue.get(timeout=600)
    for process in processes:
        process.join()
    return result


def update_seconds(batch_size: int, threads: int, fill: int, steps: int) -> float:
    """Seconds per gradient step of the entry's learner at ``batch_size`` on ``threads`` torch threads."""
    th.set_num_threads(threads)
    agent, _ = build_agent(batch_size)
    agent.model.learning_starts = fill
    agent.learn(fill)  # random actions before learning_starts: fills the buffer, no update
    agent.model._setup_learn(steps, reset_num_timesteps=False)
    agent.model.train(gradient_steps=2, batch_size=batch_size)  # warm-up
    started = time.perf_counter()
    agent.model.train(gradient_steps=steps, batch_size=batch_size)
    return (time.perf_counter() - started) / steps


#: The two runs of the throughput comparison: label, extra ``her-wrap train`` options, workers.
THROUGHPUT_RUNS = (
    ("1 worker x 2 threads", ["--num-threads", "2"], 1),
    (
        "2 workers x 1 thread",
        ["--workers", "2", "--n-envs", "1", "-params", "batch_size:1024", "learning_starts:500"],
        2,
    ),
)


def throughput_command(total_steps: int, extra: list[str], workers: int) -> list[str]:
    """``her-wrap train`` of the shipped entry for ``total_steps`` env steps over ``workers`` workers."""
    return [
        *("her-wrap", "train", "--env", ENV_ID, "--seed", "1"),
        *("-n", str(total_steps // workers), "--eval-freq", str(10 * total_steps), "--eval-episodes", "1"),
        *extra,
    ]


def throughput(total_steps: int) -> list[tuple[str, str, float]]:
    """Env steps per training second of each run of :data:`THROUGHPUT_RUNS`: (label, command, rate)."""
    rows = []
    for label, extra, workers in THROUGHPUT_RUNS:
        command = throughput_command(total_steps, extra, workers)
        with tempfile.TemporaryDirectory() as folder:
            runner = [sys.executable, "-m", "her_wrap.runs.cli", *command[1:], "-f", folder]
            subprocess.run(runner, check=True, stdout=subprocess.DEVNULL)
            (evaluations,) = Path(folder).glob("her/*/evaluations.npz")
            seconds = float(np.load(evaluations)["train_seconds"][-1])
        rows.append((label, " ".join(command), total_steps / seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=40, help="gradient steps timed per setting")
    parser.add_argument("--fill", type=int, default=2000, help="env steps in the buffer before timing")
    parser.add_argument("--repeats", type=int, default=200, help="all-reduces timed per buffer")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=("costs", "throughput"),
        default=["costs"],
        help="what to measure: the all-reduce and update costs, the throughput of 1 and 2 workers",
    )
    parser.add_argument(
        "--throughput-steps", type=int, default=20_000, help="env steps in all of each throughput run"
    )
    args = parser.parse_args()

    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}; torch {th.__version__}")
    if "costs" in args.parts:
        print_costs(args)
    if "throughput" in args.parts:
        rows = throughput(args.throughput_steps)
        print("\n| run | command | env steps / s |\n|---|---|---:|")
        for label, command, rate in rows:
            print(f"| {label} | `{command}` | {rate:.1f} |")
        print(f"\n2 workers / 1 worker: {rows[1][2] / rows[0][2]:.2f}x")
    print(f"\nload average after: {os.getloadavg()}")


def print_costs(args: argparse.Namespace) -> None:
    """The all-reduce and update tables."""
    sizes = gradient_sizes()
    reduce = allreduce_seconds(sizes, args.repeats)
    print("\n| gradient all-reduce (gloo, 2 workers) | floats | median ms |\n|---|---|---|")
    for name, size in sizes.items():
        print(f"| {name} | {size:,} | {1000 * reduce[name]:.2f} |")
    print("\n| update (one gradient step) | batch | threads | ms |\n|---|---|---|---|")
    for batch_size in args.batch_sizes:
        for threads in args.threads:
            seconds = update_seconds(batch_size, threads, args.fill, args.steps)
            print(f"| {ENV_ID} DDPG 3x256 | {batch_size} | {threads} | {1000 * seconds:.1f} |")


if __name__ == "__main__":
    main()
