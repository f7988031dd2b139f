"""Worker programs of tests/test_distributed.py, one process per rank (gloo on CPU).

Usage: ``python tests/distributed_workers.py SCENARIO RANK WORLD_SIZE PORT OUT_DIR``; each writes what the
test checks into ``OUT_DIR/rank{RANK}.npz`` (or a model zip).
"""

from __future__ import annotations

import datetime
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


def _model(learner: str, rank: int, normalize: bool):
    from her_wrap import HER, BitFlippingEnv

    continuous = learner != "dqn"
    env = BitFlippingEnv(n_bits=4, continuous=continuous, max_steps=4)
    return HER(
        "MultiInputPolicy",
        env,
        learner,
        n_sampled_goal=2,
        normalize=normalize,
        learning_starts=16,
        batch_size=8,
        buffer_size=1000,
        train_freq=4,
        gradient_steps=2,
        policy_kwargs=dict(net_arch=[16]),
        seed=100 + rank,
    )


def _flat_parameters(her) -> np.ndarray:
    tensors = [t.detach().reshape(-1).double() for t in her.model.policy.state_dict().values()]
    log_ent_coef = getattr(her.model, "log_ent_coef", None)
    if isinstance(log_ent_coef, th.Tensor):
        tensors.append(log_ent_coef.detach().reshape(-1).double())
    return th.cat(tensors).numpy()


def train(rank: int, world: int, out: Path, learner: str) -> None:
    """Train a tiny HER learner for a few gradient steps; save its parameters and normalizer statistics."""
    her = _model(learner, rank, normalize=True)
    her.learn(64)
    statistics = her.normalizer.obs_rms if her.normalizer is not None else {}
    np.savez(
        out / f"rank{rank}.npz",
        parameters=_flat_parameters(her),
        n_updates=her.model._n_updates,
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
        sys.exit(3)


def main() -> None:
    scenario, rank, world, port, out = sys.argv[1], *map(int, sys.argv[2:5]), Path(sys.argv[5])
    learner = sys.argv[6] if len(sys.argv) > 6 else "sac"
    _init(rank, world, port)
    started = time.time()
    {"train": train, "train_forever": train_forever}[scenario](rank, world, out, learner)
    print(f"rank {rank} done in {time.time() - started:.1f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
