"""The costs behind the scaling model of docs/research/scaling.md, and the model's predictions from them.

- all-reduce: two gloo workers on this machine (one torch thread each) all-reduce, as
  ``her_wrap.sb3.distributed`` does, one buffer the size of the actor's and one the size of the critic's
  gradients of the one-process FetchPush-v4 entry's learner (DDPG, 3 x 256; :data:`MEASURED_ENTRY_VARIANT`
  on the shipped two-worker entry), one of both together (the joint all-reduce of HER's DDPG step), and
  one float (the latency of a collective); median of ``--repeats``;
- update: one gradient step of that learner (HER's train step with the entry's update options), timed
  over ``--steps`` steps after filling the buffer with ``--fill`` random-action env steps, at each batch
  size and torch thread count given;
- env step: ``--env-steps`` steps of one worker's single env (env step, the policy's prediction, storing),
  one torch thread, no update;
- co-running (``--parts corun``): the one-thread update of ``--corun-batch`` rows timed alone, then in two
  processes at once (started together behind a barrier): how much two busy cores slow each other, which
  bounds what two workers can gain on this machine;
- model: from those figures (one-thread updates fitted as ``a + c * batch`` over the batch sizes given), the
  cycle time, env steps per second and minutes to ``--steps-to-goal`` env steps of :class:`ScalingModel`
  for 1, 2, 8, 16 and 64 workers, in both regimes: total batch kept, and the HER paper's (each worker the
  whole recipe); first with the joint all-reduce her_wrap makes, then with one all-reduce per optimizer;
- throughput (``--parts throughput``): ``her-wrap train`` with that entry, ``--throughput-steps``
  env steps in all, as 1 worker x 2 threads, as 2 workers x 1 thread with the per-worker batch, envs and
  ``learning_starts`` halved (the same total batch, env steps per update and random steps), and as 2 workers
  that each keep the entry's 2 envs with ``train_freq`` halved instead of the envs (the same again), the
  last also with ``--no-pin-workers`` (each worker bound to a core, as ``--workers`` does on two cores, and
  not); env steps per second of training time (``train_seconds`` of the run's last evaluation: evaluations
  left out), and each one's ratio to the first; ``--throughput-rounds`` repeats the four, in reverse order
  every other round so that a host whose speed drifts steadily favours none of them over an even number of
  rounds, then summarizes each layout's ratio over the rounds (median of the rounds' ratios, and the ratio
  of the mean rates).

Usage::

    python scripts/measure_scaling.py                       # prints a Markdown table
    python scripts/measure_scaling.py --batch-sizes 1024 2048 --threads 1 2 --steps 40
    python scripts/measure_scaling.py --parts throughput --throughput-steps 20000 --throughput-rounds 2
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)
import numpy as np
import torch as th
import torch.distributed as dist
import torch.multiprocessing as mp

ENV_ID = "FetchPush-v4"

#: The FetchPush entry measured here, the one docs/research/scaling.md models: the one-process entry of
#: 3 x 256 that FetchPush shipped before it took two workers (the lab's variant that gives it back).
MEASURED_ENTRY_VARIANT = "envs-2-steps-125+float32+no-actor-average+n-steps-1+net-3x256+one-process"


def measured_entry_overrides() -> tuple[str, ...]:
    """``-params`` items that make FetchPush's shipped entry the one measured here
    (:data:`MEASURED_ENTRY_VARIANT`)."""
    from lab.experiments import variant_overrides

    return variant_overrides(MEASURED_ENTRY_VARIANT)


#: Name of the one-float all-reduce, whose time is the latency of a collective (no data to speak of).
LATENCY = "latency (1 float)"

#: Name of the all-reduce of the actor's and the critic's gradients together (one per gradient step of
#: HER's DDPG step on several workers); printed beside the others, not used by the fit (the model adds
#: the buffers' transfer times instead, which this figure checks).
JOINT = "actor + critic, one all-reduce"

#: Worker counts the model predicts for.
MODEL_WORKERS = (1, 2, 8, 16, 64)


@dataclass(frozen=True)
class ScalingModel:
    """Time of one training cycle of the FetchPush entry on ``N`` workers, one core each.

    A cycle is ``cycle_env_steps`` env steps over all workers, then ``cycle_updates`` gradient steps, each
    followed on every worker by one ring all-reduce per gradient buffer. With the total batch kept, each worker
    steps ``cycle_env_steps / N`` env steps and updates on ``total_batch / N`` rows; in the HER paper's regime
    (``paper=True``) each worker keeps the whole recipe, so a cycle gathers ``N`` times the env steps for the
    same updates. A ring all-reduce of a buffer over ``N`` workers takes ``2 (N - 1)`` latency-bound steps
    and moves ``2 (N - 1) / N`` times the buffer. No straggler: a cycle waits for no slow worker.

    With ``joint=True`` (HER's DDPG/TD3 step with the targets moved once per cycle), each gradient step's
    actor gradients ride in one all-reduce with the next step's critic gradients: a cycle of ``U`` updates
    makes ``U - 1`` all-reduces of every buffer together, one of the critic's and one of the actor's, so it
    pays the latency ``U + 1`` times instead of ``2 U`` and moves the same data.

    :param env_ms: one env step of one worker (env, prediction, storing)
    :param update_a_ms: fixed cost of a gradient step
    :param update_c_ms: cost per row of the batch
    :param latency_ms: latency of one step of a ring all-reduce (``alpha``)
    :param buffer_ms: transfer time of each gradient buffer between two workers (``tau``), one per optimizer
    :param joint: one all-reduce per gradient step for all buffers (see above), not one per buffer
    """

    env_ms: float
    update_a_ms: float
    update_c_ms: float
    latency_ms: float
    buffer_ms: tuple[float, ...]
    cycle_env_steps: int = 500
    cycle_updates: int = 20
    total_batch: int = 2048
    joint: bool = False

    def allreduce_ms(self, workers: int) -> float:
        """The all-reduces of one gradient step (0 for one worker); :meth:`cycle_ms` adds a joint cycle's
        extra latency."""
        if workers <= 1:
            return 0.0
        steps = 2 * (workers - 1)
        transfer = sum(steps / workers * tau for tau in self.buffer_ms)
        return steps * self.latency_ms * (1 if self.joint else len(self.buffer_ms)) + transfer

    def update_ms(self, batch_size: float) -> float:
        """One gradient step on ``batch_size`` rows."""
        return self.update_a_ms + self.update_c_ms * batch_size

    def worker_batch(self, workers: int, paper: bool = False) -> float:
        """Rows of one worker's batch."""
        return self.total_batch if paper else self.total_batch / workers

    def cycle_ms(self, workers: int, paper: bool = False) -> float:
        """One cycle: the env steps of one worker, then the gradient steps with their all-reduces."""
        env_steps = self.cycle_env_steps if paper else self.cycle_env_steps / workers
        update = self.update_ms(self.worker_batch(workers, paper)) + self.allreduce_ms(workers)
        # A joint cycle's first critic and last actor all-reduce each pay the latency on their own.
        extra = 2 * (workers - 1) * self.latency_ms if self.joint and workers > 1 else 0.0
        return env_steps * self.env_ms + self.cycle_updates * update + extra

    def env_steps_per_second(self, workers: int, paper: bool = False) -> float:
        """Env steps of all workers per second."""
        env_steps = self.cycle_env_steps * (workers if paper else 1)
        return 1000.0 * env_steps / self.cycle_ms(workers, paper)

    def minutes_to(self, env_steps: float, workers: int, paper: bool = False) -> float:
        """Training minutes to ``env_steps`` env steps in all."""
        return env_steps / self.env_steps_per_second(workers, paper) / 60.0

    @classmethod
    def fitted(
        cls,
        env_ms: float,
        updates_ms: dict[int, float],
        allreduce_ms: dict[str, float],
        joint: bool = False,
    ) -> ScalingModel:
        """The model of measured figures: one-thread update times by batch size (least squares over them),
        and two-worker all-reduce times by buffer, :data:`LATENCY` among them (:data:`JOINT` is left out).

        On two workers an all-reduce takes ``2 alpha + tau``: ``alpha`` is half the one-float time, and each
        buffer's ``tau`` its time less ``2 alpha``.

        :raises ValueError: for fewer than two batch sizes, or no latency figure
        """
        if len(updates_ms) < 2:
            raise ValueError("fitting a + c * batch needs update times at two batch sizes at least")
        if LATENCY not in allreduce_ms:
            raise ValueError(f"the all-reduce times need the {LATENCY!r} figure")
        batches = np.array(sorted(updates_ms), dtype=np.float64)
        times = np.array([updates_ms[int(batch)] for batch in batches])
        slope, intercept = np.polyfit(batches, times, 1)
        latency = allreduce_ms[LATENCY] / 2.0
        buffers = tuple(
            max(0.0, time_ms - 2.0 * latency)
            for name, time_ms in allreduce_ms.items()
            if name not in (LATENCY, JOINT)
        )
        return cls(env_ms, float(intercept), float(slope), latency, buffers, joint=joint)


def build_agent(batch_size: int, seed: int = 0, overrides: tuple[str, ...] = ()):
    """The measured FetchPush-v4 entry (:data:`MEASURED_ENTRY_VARIANT`) as ``her-wrap train`` builds it, with
    ``batch_size``."""
    from her_wrap.runs.arguments import default_config_path
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.env_factory import ensure_registered, make_training_envs
    from her_wrap.runs.model_factory import build_agent as build

    ensure_registered(ENV_ID)
    config = load_run_config(
        default_config_path(),
        ENV_ID,
        overrides=[*measured_entry_overrides(), f"batch_size:{batch_size}", *overrides],
    )
    envs = make_training_envs(config, seed)
    return build(config, envs.train, seed=seed, verbose=0), config


def gradient_sizes() -> dict[str, int]:
    """Parameters per optimizer of the entry's learner (what one all-reduce carries)."""
    from her_wrap.sb3.distributed import learner_optimizers

    agent, _ = build_agent(256)
    names = ["actor", "critic", "entropy"]
    sizes = {
        names[index]: sum(p.numel() for group in optimizer.param_groups for p in group["params"])
        for index, optimizer in enumerate(learner_optimizers(agent.model))
    }
    return {**sizes, JOINT: sizes["actor"] + sizes["critic"], LATENCY: 1}


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
    from her_wrap.runs.launcher import free_port

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


def update_seconds(
    batch_size: int, threads: int, fill: int, steps: int, before_timing: Callable[[], object] | None = None
) -> float:
    """Seconds per gradient step of the entry's learner at ``batch_size`` on ``threads`` torch threads.

    :param before_timing: called once the buffer is filled and the update warmed up, just before the timed
        steps (the co-running processes wait there for each other)
    """
    th.set_num_threads(threads)
    agent, _ = build_agent(batch_size)
    agent.model.learning_starts = fill
    agent.learn(fill)  # random actions before learning_starts: fills the buffer, no update
    agent.model._setup_learn(steps, reset_num_timesteps=False)
    agent.model.train(gradient_steps=2, batch_size=batch_size)  # warm-up
    if before_timing is not None:
        before_timing()
    started = time.perf_counter()
    agent.model.train(gradient_steps=steps, batch_size=batch_size)
    return (time.perf_counter() - started) / steps


def env_step_seconds(steps: int) -> float:
    """Seconds per env step of one worker of the entry: one env, one torch thread, predicting, no update."""
    th.set_num_threads(1)
    agent, _ = build_agent(1024, overrides=("n_envs:1",))
    agent.model.learning_starts = 0
    agent.model.gradient_steps = 0
    agent.learn(200)  # warm-up
    started = time.perf_counter()
    agent.learn(steps, reset_num_timesteps=False)
    return (time.perf_counter() - started) / steps


def _corun_worker(batch_size: int, fill: int, steps: int, barrier, queue) -> None:
    queue.put(update_seconds(batch_size, 1, fill, steps, before_timing=barrier.wait))


def corun_update_seconds(batch_size: int, fill: int, steps: int, copies: int) -> list[float]:
    """Seconds per one-thread update of ``copies`` processes that time the same update at the same moment."""
    context = mp.get_context("spawn")
    barrier = context.Barrier(copies)
    queue = context.Queue()
    processes = [
        context.Process(target=_corun_worker, args=(batch_size, fill, steps, barrier, queue))
        for _ in range(copies)
    ]
    for process in processes:
        process.start()
    times = [queue.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    return times


def print_corun(args: argparse.Namespace) -> None:
    """One-thread updates alone and two at once."""
    alone = corun_update_seconds(args.corun_batch, args.fill, args.steps, 1)[0]
    together = corun_update_seconds(args.corun_batch, args.fill, args.steps, 2)
    print(
        f"\n| one-thread update of batch {args.corun_batch} | ms each | slowdown |\n|---|---:|---:|\n"
        f"| alone | {1000 * alone:.1f} | 1.00x |"
    )
    for index, seconds in enumerate(together):
        print(f"| process {index + 1} of 2 at once | {1000 * seconds:.1f} | {seconds / alone:.2f}x |")


def throughput_runs() -> list[tuple[str, list[str], int]]:
    """The runs of the throughput comparison: label, extra ``her-wrap train`` options, workers.

    The 2-worker runs are the manipulation rows' workers variants (``scripts/robotics_results.py``), which
    keep the entry's env steps, rows and random steps per gradient step; every run trains the measured
    entry (:data:`MEASURED_ENTRY_VARIANT`), the workers variant's changes after it.
    """
    from lab.experiments import VARIANT_WORKERS, VARIANTS

    measured = list(measured_entry_overrides())
    runs = [("1 worker x 2 threads", ["--num-threads", "2", "-params", *measured], 1)]
    for label, variant, binding in (
        ("2 workers x 1 thread", "workers-2", []),
        ("2 workers x 1 thread, 2 envs each", "workers-2-envs-2", []),
        ("2 workers x 1 thread, 2 envs each, not bound to cores", "workers-2-envs-2", ["--no-pin-workers"]),
    ):
        workers = VARIANT_WORKERS[variant]
        extra = ["--workers", str(workers), *binding, "-params", *measured, *VARIANTS[variant]]
        runs.append((label, extra, workers))
    return runs


def throughput_command(total_steps: int, extra: list[str], workers: int) -> list[str]:
    """``her-wrap train`` of FetchPush's shipped entry, changed by ``extra``'s ``-params``, for
    ``total_steps`` env steps over ``workers`` workers."""
    return [
        *("her-wrap", "train", "--env", ENV_ID, "--seed", "1"),
        *("-n", str(total_steps // workers), "--eval-freq", str(10 * total_steps), "--eval-episodes", "1"),
        *extra,
    ]


def round_order(round_index: int, runs: int) -> list[int]:
    """The order of the runs in a round: as listed in even rounds (0, 2, ...), reversed in odd ones."""
    order = list(range(runs))
    return order[::-1] if round_index % 2 else order


def throughput(total_steps: int, round_index: int = 0) -> list[tuple[str, str, float]]:
    """Env steps per training second of each run of :func:`throughput_runs` (label, command, rate), listed
    in their order, measured in :func:`round_order`'s."""
    runs = [
        (label, throughput_command(total_steps, extra, workers))
        for label, extra, workers in throughput_runs()
    ]
    rates: dict[int, float] = {}
    for index in round_order(round_index, len(runs)):
        command = runs[index][1]
        with tempfile.TemporaryDirectory() as folder:
            runner = [sys.executable, "-m", "her_wrap.runs.cli", *command[1:], "-f", folder]
            subprocess.run(runner, check=True, stdout=subprocess.DEVNULL)
            (evaluations,) = Path(folder).glob("her/*/evaluations.npz")
            seconds = float(np.load(evaluations)["train_seconds"][-1])
        rates[index] = total_steps / seconds
    return [(label, " ".join(command), rates[index]) for index, (label, command) in enumerate(runs)]


def throughput_summary(rounds: list[list[float]]) -> list[tuple[float, float]]:
    """For each run after the first, over the rounds (each a list of rates, the 1-worker run first): the
    median of the rounds' ratios to the 1-worker run, and the ratio of the mean rates."""
    summary = []
    for index in range(1, len(rounds[0])):
        ratios = [rates[index] / rates[0] for rates in rounds]
        means = float(np.mean([rates[index] for rates in rounds]) / np.mean([rates[0] for rates in rounds]))
        summary.append((float(np.median(ratios)), means))
    return summary


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
        choices=("costs", "corun", "throughput"),
        default=["costs"],
        help="what to measure: the all-reduce, update and env-step costs with the model; one-thread updates "
        "alone and two at once; the throughput of 1 and 2 workers",
    )
    parser.add_argument("--corun-batch", type=int, default=1024, help="batch of the co-running updates")
    parser.add_argument(
        "--throughput-steps", type=int, default=20_000, help="env steps in all of each throughput run"
    )
    parser.add_argument(
        "--throughput-rounds",
        type=int,
        default=1,
        help="times to run the throughput comparison, its runs in turn each time (the host's speed drifts)",
    )
    parser.add_argument("--env-steps", type=int, default=2000, help="env steps timed for the model's t_env")
    parser.add_argument(
        "--steps-to-goal",
        type=int,
        default=360_000,
        help="env steps to 0.9 the model's minutes count (default: the FetchPush entry's median over seeds)",
    )
    args = parser.parse_args()

    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}; torch {th.__version__}")
    if "costs" in args.parts:
        print_costs(args)
    if "corun" in args.parts:
        print_corun(args)
    if "throughput" in args.parts:
        print_throughput(args.throughput_steps, args.throughput_rounds)
    print(f"\nload average after: {os.getloadavg()}")


def print_throughput(total_steps: int, rounds: int) -> None:
    """Each round's env steps per second of every run, and each 2-worker run's ratio to the 1-worker one;
    after several rounds, each layout's ratio over them (:func:`throughput_summary`)."""
    measured = []
    for round_index in range(rounds):
        rows = throughput(total_steps, round_index)
        measured.append([rate for _, _, rate in rows])
        order = "listed" if round_index % 2 == 0 else "reverse"
        print(f"\nRound {round_index + 1} of {rounds} (run in {order} order)\n")
        print("| run | command | env steps / s | ratio |\n|---|---|---:|---:|")
        for label, command, rate in rows:
            print(f"| {label} | `{command}` | {rate:.1f} | {rate / rows[0][2]:.2f}x |")
    if rounds > 1:
        print(f"\nOver {rounds} rounds\n\n| run | median ratio | ratio of mean rates |\n|---|---:|---:|")
        labels = [label for label, _, _ in rows]
        for label, (median, means) in zip(labels[1:], throughput_summary(measured), strict=True):
            print(f"| {label} | {median:.2f}x | {means:.2f}x |")


def print_costs(args: argparse.Namespace) -> None:
    """The all-reduce, update and env-step tables, then the model's predictions from them."""
    sizes = gradient_sizes()
    reduce = allreduce_seconds(sizes, args.repeats)
    print("\n| gradient all-reduce (gloo, 2 workers) | floats | median ms |\n|---|---|---|")
    for name, size in sizes.items():
        print(f"| {name} | {size:,} | {1000 * reduce[name]:.3f} |")
    print("\n| update (one gradient step) | batch | threads | ms |\n|---|---|---|---|")
    one_thread: dict[int, float] = {}
    for batch_size in args.batch_sizes:
        for threads in args.threads:
            seconds = update_seconds(batch_size, threads, args.fill, args.steps)
            if threads == 1:
                one_thread[batch_size] = 1000 * seconds
            print(f"| {ENV_ID} DDPG 3x256 | {batch_size} | {threads} | {1000 * seconds:.1f} |")
    env_ms = 1000 * env_step_seconds(args.env_steps)
    print(f"\none env step of one worker (1 env, 1 thread, predicting, storing): {env_ms:.2f} ms")
    if len(one_thread) < 2:
        print("\n(the model needs one-thread update times at two batch sizes at least: none printed)")
        return
    reduce_ms = {name: 1000 * value for name, value in reduce.items()}
    model = ScalingModel.fitted(env_ms, one_thread, reduce_ms, joint=True)
    print_model(model, args.steps_to_goal)
    print_model(dataclasses.replace(model, joint=False), args.steps_to_goal)


def print_model(model: ScalingModel, steps_to_goal: int) -> None:
    """The model's parameters and its table for :data:`MODEL_WORKERS`, in both regimes."""
    taus = ", ".join(f"{tau:.3f}" for tau in model.buffer_ms)
    form = "one joint all-reduce per gradient step" if model.joint else "one all-reduce per optimizer step"
    print(
        f"\nmodel ({form}): t_env {model.env_ms:.2f} ms; t_update(b) = {model.update_a_ms:.2f} + "
        f"{model.update_c_ms:.4f} b ms; alpha {model.latency_ms:.3f} ms; tau {taus} ms"
    )
    print(
        "\n| workers | regime | rows per worker | update ms | all-reduce ms | cycle ms | env steps / s "
        f"| minutes to {steps_to_goal // 1000}k |\n|---:|---|---:|---:|---:|---:|---:|---:|"
    )
    for paper in (False, True):
        for workers in MODEL_WORKERS:
            batch = model.worker_batch(workers, paper)
            minutes = model.minutes_to(steps_to_goal, workers, paper)
            print(
                f"| {workers} | {'paper' if paper else 'batch kept'} | {math.ceil(batch)} "
                f"| {model.update_ms(batch):.1f} | {model.allreduce_ms(workers):.1f} "
                f"| {model.cycle_ms(workers, paper):.0f} | {model.env_steps_per_second(workers, paper):.0f} "
                f"| {minutes:.1f} |"
            )


if __name__ == "__main__":
    main()
