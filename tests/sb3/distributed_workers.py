"""Worker programs of tests/sb3/test_distributed.py, one process per rank (gloo on CPU).

Usage: ``python tests/sb3/distributed_workers.py SCENARIO RANK WORLD_SIZE PORT OUT_DIR``; each writes what the
test checks into ``OUT_DIR/rank{RANK}.npz`` (or a model zip).
"""

from __future__ import annotations

import datetime
import faulthandler
import sys
import time
from pathlib import Path

import numpy as np
import torch as th
import torch.distributed as dist


def _init(rank: int, world: int, port: int, timeout_s: float = 60.0) -> None:
    th.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


#: HER's weighted train step with the manipulation entry's update options (and a running average of the
#: actor, which every worker must keep alike), and LaBER's per-worker weights.
VARIANTS = {
    "ddpg-update-options": (
        "ddpg",
        dict(
            clip_target=True,
            action_l2=1.0,
            target_update_per_cycle=True,
            policy_kwargs=dict(net_arch=[16], actor_average=0.1),
        ),
    ),
    "sac-laber": ("sac", dict(laber="mean")),
    # 3 gradient steps per call, so that some of TD3's delayed actor steps are not a call's last.
    "td3-per-cycle": ("td3", dict(target_update_per_cycle=True, gradient_steps=3)),
}

#: Learners trained with one all-reduce per optimizer step, even where the train step could average the
#: actor's and the critic's gradients together: the reference for the joint all-reduce.
SEPARATE = "-separate"


def _count_all_reduces() -> tuple[list[int], list[int]]:
    """Record the size of every all-reduce this process makes from now on, and for each the number of
    batches drawn while it was in flight (started, not yet waited for)."""
    sizes: list[int] = []
    draws_in_flight: list[int] = []
    all_reduce = dist.all_reduce
    from her_wrap.sb3.batch_sources import UniformSource

    draw = UniformSource.draw
    watched: set[int] = set()  # the all-reduces in flight, by index

    def counted(tensor, *args, **kwargs):
        sizes.append(tensor.numel())
        draws_in_flight.append(0)
        work = all_reduce(tensor, *args, **kwargs)
        if not kwargs.get("async_op"):
            return work
        index, wait = len(draws_in_flight) - 1, work.wait

        class Watched:
            def wait(self):
                watched.remove(index)
                return wait()

        watched.add(index)
        return Watched()

    def counted_draw(self, model, batch_size):
        for index in watched:
            draws_in_flight[index] += 1
        return draw(self, model, batch_size)

    dist.all_reduce = counted
    UniformSource.draw = counted_draw  # type: ignore[method-assign]
    return sizes, draws_in_flight


def _model(learner: str, rank: int, normalize: bool, batch_size: int = 8):
    from her_wrap import HER, BitFlippingEnv

    learner, options = VARIANTS.get(learner, (learner, {}))
    continuous = learner != "dqn"
    env = BitFlippingEnv(n_bits=4, continuous=continuous, max_steps=4)
    settings = dict(
        n_sampled_goal=2,
        normalize=normalize,
        learning_starts=16,
        batch_size=batch_size,
        buffer_size=1000,
        train_freq=4,
        gradient_steps=2,
        policy_kwargs=dict(net_arch=[16]),
        seed=100 + rank,
    )
    return HER("MultiInputPolicy", env, learner, **{**settings, **options})  # type: ignore[arg-type]


def _flat_parameters(her) -> np.ndarray:
    tensors = [t.detach().reshape(-1).double() for t in her.model.policy.state_dict().values()]
    log_ent_coef = getattr(her.model, "log_ent_coef", None)
    if isinstance(log_ent_coef, th.Tensor):
        tensors.append(log_ent_coef.detach().reshape(-1).double())
    return th.cat(tensors).numpy()


def train(rank: int, world: int, out: Path, learner: str) -> None:
    """Train a tiny HER learner for a few gradient steps; save its parameters, normalizer statistics and
    the sizes of its all-reduces."""
    if learner.endswith(SEPARATE):
        import her_wrap.sb3.train_steps

        learner = learner.removesuffix(SEPARATE)
        her_wrap.sb3.train_steps.joint_averager = lambda first, second: None  # type: ignore[assignment]
    her = _model(learner, rank, normalize=True)
    all_reduces, draws_in_flight = _count_all_reduces()
    her.learn(64)
    statistics = her.normalizer.obs_rms if her.normalizer is not None else {}
    np.savez(
        out / f"rank{rank}.npz",
        parameters=_flat_parameters(her),
        n_updates=her.model._n_updates,
        all_reduce_sizes=np.array(all_reduces, dtype=np.int64),
        draws_in_flight=np.array(draws_in_flight, dtype=np.int64),
        **{f"mean_{key}": statistics[key].mean for key in sorted(statistics)},
        **{f"count_{key}": statistics[key].count for key in sorted(statistics)},
    )
    if rank == 0:
        her.save(out / "model.zip")


def train_forever(rank: int, world: int, out: Path, learner: str) -> None:
    """Train until killed; say when training has started (the test kills one worker then)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Ready(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= 40:
                (out / f"ready{rank}").touch()
            return True

    her = _model(learner, rank, normalize=False)
    try:
        her.learn(10_000_000, callback=Ready())
    except RuntimeError as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        _exit(3)


def one_step_data(rank: int) -> tuple[th.Tensor, th.Tensor]:
    """Rank ``rank``'s batch for :func:`one_step` (the test rebuilds both ranks' batches)."""
    generator = th.Generator().manual_seed(rank)
    return th.randn(16, 5, generator=generator), th.randn(16, 2, generator=generator)


def statistics_data(rank: int, part: int) -> np.ndarray:
    """Rank ``rank``'s observations of rollout ``part`` for :func:`statistics`."""
    return np.random.default_rng(10 * rank + part).normal(rank, 1.0 + part, size=(7 + 5 * rank + part, 3))


def units(rank: int, world: int, out: Path, learner: str) -> None:
    """One averaged Adam step of a linear model, and normalizer statistics combined after two rollouts."""
    from types import SimpleNamespace

    from stable_baselines3.common.running_mean_std import RunningMeanStd

    from her_wrap.sb3.distributed import GradientAverager, NormalizerSync

    th.manual_seed(0)
    model = th.nn.Linear(5, 2)
    optimizer = th.optim.Adam(model.parameters(), lr=0.01)
    GradientAverager([optimizer]).attach()
    inputs, targets = one_step_data(rank)
    optimizer.zero_grad()
    th.nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()

    normalizer = SimpleNamespace(
        norm_obs=True, norm_reward=False, obs_rms={"observation": RunningMeanStd(shape=(3,))}
    )
    sync = NormalizerSync(normalizer)  # type: ignore[arg-type]
    sync.broadcast()
    for part in range(2):
        normalizer.obs_rms["observation"].update(statistics_data(rank, part))
        sync.combine()
    statistics = normalizer.obs_rms["observation"]
    np.savez(
        out / f"rank{rank}.npz",
        weight=model.weight.detach().numpy(),
        bias=model.bias.detach().numpy(),
        mean=statistics.mean,
        var=statistics.var,
        count=statistics.count,
    )


def mismatched(rank: int, world: int, out: Path, learner: str) -> None:
    """Workers with different batch sizes: both must refuse to train."""
    her = _model(learner, rank, normalize=False, batch_size=8 * (rank + 1))
    try:
        her.learn(32)
    except ValueError as error:
        print(f"ValueError: {error}", file=sys.stderr, flush=True)
        _exit(4)


def entry_prints_and_succeeds(args) -> int:
    """A worker entry for :func:`her_wrap.runs.launcher._worker_main` that leaves its output unflushed."""
    print(f"worker output of {args.name}", end="")
    return 0


def entry_prints_its_cores(args) -> int:
    """A worker entry that prints the cores it may run on, and those of a thread it starts."""
    import os
    import threading

    seen = []
    thread = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
    thread.start()
    thread.join()
    print(f"cores {sorted(os.sched_getaffinity(0))} thread {seen[0]}", end="")
    return 0


def entry_writes_through_tqdm(args) -> int:
    """A worker entry that prints as SB3's logger does, through ``tqdm.write``: tqdm makes a named
    semaphore for its lock the first time."""
    from tqdm import tqdm

    tqdm.write("logged through tqdm")
    return 0


def entry_fails(args) -> int:
    """A worker entry that fails in a way the launcher does not know."""
    raise RuntimeError(f"{args.name} went wrong")


def entry_loses_its_peers(args) -> int:
    """A worker entry whose collective failed because another worker was lost."""
    from her_wrap.sb3.distributed import WorkerLostError

    raise WorkerLostError(f"{args.name} lost the other workers")


def entry_refuses_its_input(args) -> int:
    """A worker entry that refuses its input."""
    from her_wrap.runs.errors import UsageError

    raise UsageError(f"{args.name} has no such option")


def _exit(status: int) -> None:
    """End the worker as her-wrap's own workers do, without the interpreter's teardown: a process that used
    gloo can abort in it (SIGABRT, then a bus error), which the tests would read as a crash."""
    from her_wrap.runs.workers import exit_worker

    exit_worker(status)


def main() -> None:
    faulthandler.enable()  # a native abort prints where each Python thread was
    scenario, rank, world, port, out = sys.argv[1], *map(int, sys.argv[2:5]), Path(sys.argv[5])
    learner = sys.argv[6] if len(sys.argv) > 6 else "sac"
    _init(rank, world, port)
    started = time.time()
    {"train": train, "train_forever": train_forever, "units": units, "mismatched": mismatched}[scenario](
        rank, world, out, learner
    )
    print(f"rank {rank} done in {time.time() - started:.1f} s", flush=True)
    dist.destroy_process_group()
    _exit(0)


if __name__ == "__main__":
    main()
