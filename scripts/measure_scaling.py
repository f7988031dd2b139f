"""The two costs behind the scaling model of docs/scaling.md: one gradient all-reduce and one update.

- all-reduce: two gloo workers on this machine (one torch thread each) all-reduce, as
  ``her_wrap.sb3.distributed`` does at every optimizer step, one buffer the size of the actor's and one
  the size of the critic's gradients of the FetchPush-v4 entry's learner (DDPG, 3 x 256); median of
  ``--repeats``;
- update: one gradient step of that learner (HER's train step with the entry's update options), timed
  over ``--steps`` steps after filling the buffer with ``--fill`` random-action env steps, at each batch
  size and torch thread count given.

Usage::

    python scripts/measure_scaling.py                       # prints a Markdown table
    python scripts/measure_scaling.py --batch-sizes 1024 2048 --threads 1 2 --steps 40
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=40, help="gradient steps timed per setting")
    parser.add_argument("--fill", type=int, default=2000, help="env steps in the buffer before timing")
    parser.add_argument("--repeats", type=int, default=200, help="all-reduces timed per buffer")
    args = parser.parse_args()

    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}; torch {th.__version__}")
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
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
