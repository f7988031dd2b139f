"""Sampling options under HER, same budget, several seeds: uniform vs LaBER-mean vs prioritized replay
(the default), or any of n-step returns and goal mixes (``--methods``, ``--name``).

Greedy success on fresh episodes is measured every ``--eval-every`` env steps; the script writes a
markdown table (steps to 0.9 success, final success, wall time per gradient update) and a PNG of the
mean ± std curves.

    python scripts/bench_laber.py --task bitflip --n-bits 25 --timesteps 150000 --seeds 5
    python scripts/bench_laber.py --task fetchreach --timesteps 6000 --seeds 5
    python scripts/bench_laber.py --quick          # a one-minute smoke run
    python scripts/bench_laber.py --task bitflip --n-bits 20 --timesteps 30000 --eval-every 3000 --seeds 3 \
        --methods uniform n-step-3 goal-mix --name sampling
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs.callbacks import SuccessEvalCallback
from her_wrap.runs.presets import BIT_FLIPPING_DQN
from lab import bench
from lab.doc_sections import machine_note

METHODS: dict[str, dict[str, Any]] = {
    "uniform": {},
    "laber-mean": {"laber": "mean", "laber_m": 4},
    "per": {"prioritized": True, "alpha": 0.6, "beta": 0.4},
    "n-step-3": {"n_steps": 3},
    "goal-mix": {"goal_mix": {"future": 0.6, "desired": 0.2, "random": 0.2}},
}


@dataclass
class Run:
    method: str
    seed: int
    steps: list[int] = field(default_factory=list)
    success: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    updates: int = 0
    wall_seconds: float = 0.0

    def steps_to(self, threshold: float) -> int | None:
        for steps, success in zip(self.steps, self.success, strict=True):
            if success >= threshold:
                return steps
        return None


class TrainTimer:
    """Counts the wall time the learner spends in its gradient updates (``clock.wall``)."""

    def __init__(self, learner: Any) -> None:
        self.clock = bench.Stopwatch()
        self._train = learner.train
        learner.train = self

    def __call__(self, gradient_steps: int, batch_size: int = 100) -> None:
        with self.clock:
            self._train(gradient_steps, batch_size)


def make_task(task: str, n_bits: int) -> tuple[Any, Any, str, dict[str, Any]]:
    """Env factory, learner class, policy and learner settings of a task."""
    if task == "bitflip":
        from stable_baselines3 import DQN

        return (lambda: BitFlippingEnv(n_bits=n_bits)), DQN, "MlpPolicy", dict(BIT_FLIPPING_DQN)
    if task == "fetchreach":
        from stable_baselines3 import SAC

        from her_wrap.envs.registry import make_goal_env

        settings = {
            "learning_rate": 1e-3,
            "batch_size": 256,
            "gamma": 0.95,
            "buffer_size": 100_000,
            "learning_starts": 500,
            "policy_kwargs": {"net_arch": [256, 256]},
        }
        return (lambda: make_goal_env("FetchReach-v4")), SAC, "MultiInputPolicy", settings
    from stable_baselines3 import SAC

    settings = {
        "learning_rate": 1e-3,
        "batch_size": 128,
        "gamma": 0.95,
        "learning_starts": 300,
        "policy_kwargs": {"net_arch": [64, 64]},
    }
    return (lambda: BitFlippingEnv(n_bits=n_bits, continuous=True)), SAC, "MlpPolicy", settings


def run_one(
    task: str, n_bits: int, method: str, seed: int, timesteps: int, eval_every: int, episodes: int
) -> Run:
    make_env, learner, policy, settings = make_task(task, n_bits)
    model = HER(policy, make_env(), learner, n_sampled_goal=4, seed=seed, **settings, **METHODS[method])
    timer = TrainTimer(model.model)
    eval_env = make_env()
    eval_env.reset(seed=10_000 + seed)
    run = Run(method, seed)

    def report(result: Any) -> bool:
        print(f"  {method:<10} seed {seed} {model.num_timesteps:>8} steps: success {result.success_rate:.2f}")
        return True

    evaluation = SuccessEvalCallback(
        model, eval_env, eval_freq=eval_every, n_eval_episodes=episodes, after_evaluation=report, verbose=0
    )
    with bench.Stopwatch() as clock:
        model.learn(timesteps, callback=evaluation)
    run.steps, run.success, _ = evaluation.curve()
    run.wall_seconds = clock.wall
    run.train_seconds = timer.clock.wall
    run.updates = int(model.model._n_updates)
    return run


def summarize(runs: list[Run], timesteps: int) -> list[dict[str, Any]]:
    rows = []
    for method in METHODS:
        mine = [run for run in runs if run.method == method]
        if not mine:
            continue
        reached = [run.steps_to(0.9) for run in mine]
        hits = [steps for steps in reached if steps is not None]
        rows.append(
            {
                "method": method,
                "seeds": len(mine),
                "reached": len(hits),
                "steps_to_0.9_mean": float(np.mean(hits)) if hits else None,
                "steps_to_0.9_std": float(np.std(hits)) if hits else None,
                "final_mean": float(np.mean([run.success[-1] for run in mine])),
                "final_std": float(np.std([run.success[-1] for run in mine])),
                "ms_per_update": 1000
                * sum(run.train_seconds for run in mine)
                / max(1, sum(run.updates for run in mine)),
                "budget": timesteps,
            }
        )
    uniform = next((row for row in rows if row["method"] == "uniform"), None)
    for row in rows:
        row["update_cost_vs_uniform"] = row["ms_per_update"] / uniform["ms_per_update"] if uniform else None
        both = uniform and uniform["steps_to_0.9_mean"] and row["steps_to_0.9_mean"]
        row["steps_vs_uniform"] = row["steps_to_0.9_mean"] / uniform["steps_to_0.9_mean"] if both else None
    return rows


def markdown(rows: list[dict[str, Any]], title: str, command: str) -> str:
    def fmt(mean: float | None, std: float | None) -> str:
        return "not reached" if mean is None else f"{mean:,.0f} ± {std:,.0f}"

    lines = [
        f"### {title}",
        "",
        "| sampling | seeds reaching 0.9 | env steps to 0.9 (mean ± std) | vs uniform | final success | ms / update | vs uniform |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = "" if row["steps_vs_uniform"] is None else bench.ratio(row["steps_vs_uniform"], 1.0)
        cost = (
            "" if row["update_cost_vs_uniform"] is None else bench.ratio(row["update_cost_vs_uniform"], 1.0)
        )
        lines.append(
            f"| {row['method']} | {row['reached']}/{row['seeds']} | "
            f"{fmt(row['steps_to_0.9_mean'], row['steps_to_0.9_std'])} | {ratio} | "
            f"{row['final_mean']:.2f} ± {row['final_std']:.2f} | {row['ms_per_update']:.2f} | {cost} |"
        )
    lines += ["", f"Budget {rows[0]['budget']:,} env steps. Reproduce: `{command}`", ""]
    lines += [machine_note(("torch", "stable_baselines3"), threads="one torch thread"), ""]
    return "\n".join(lines)


def plot(runs: list[Run], title: str, path: pathlib.Path) -> None:
    figure, axis = plt.subplots(figsize=(6.5, 4))
    for method in METHODS:
        mine = [run for run in runs if run.method == method]
        if not mine:
            continue
        length = min(len(run.success) for run in mine)
        steps = np.asarray(mine[0].steps[:length])
        curves = np.asarray([run.success[:length] for run in mine])
        mean, std = curves.mean(axis=0), curves.std(axis=0)
        axis.plot(steps, mean, label=method)
        axis.fill_between(steps, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1), alpha=0.2)
    axis.set_xlabel("env steps")
    axis.set_ylabel("greedy success (fresh episodes)")
    axis.set_title(title)
    axis.set_ylim(-0.02, 1.02)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = bench.parser(__doc__, quick="tiny budget smoke run")
    parser.add_argument("--task", choices=["bitflip", "fetchreach", "continuous-bitflip"], default="bitflip")
    parser.add_argument("--n-bits", type=int, default=25)
    parser.add_argument("--timesteps", type=int, default=150_000)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--methods", nargs="+", choices=list(METHODS), default=["uniform", "laber-mean", "per"]
    )
    parser.add_argument(
        "--name", default="laber", help="pages are written as docs/bench_<name>_<task>.md (and .png, .json)"
    )
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("docs"))
    args = parser.parse_args()
    torch.set_num_threads(1)  # small MLPs: one thread is fastest on a 2-core machine
    if args.task == "fetchreach":
        try:
            import gymnasium_robotics  # noqa: F401
        except ImportError:
            print("gymnasium-robotics is not installed: running continuous bit flipping instead.")
            args.task = "continuous-bitflip"
    if args.quick:
        args.n_bits, args.timesteps, args.eval_every, args.seeds, args.eval_episodes = 10, 6_000, 2_000, 2, 20
    name = args.task if args.task != "bitflip" else f"bitflip{args.n_bits}"
    title = {
        "bitflip": f"HER(DQN), {args.n_bits}-bit flipping",
        "fetchreach": "HER(SAC), FetchReach-v4",
        "continuous-bitflip": f"HER(SAC), {args.n_bits}-bit continuous flipping",
    }[args.task]
    runs = []
    for method in args.methods:
        for seed in range(args.seeds):
            runs.append(
                run_one(
                    args.task, args.n_bits, method, seed, args.timesteps, args.eval_every, args.eval_episodes
                )
            )
    rows = summarize(runs, args.timesteps)
    command = (
        f"python scripts/bench_laber.py --task {args.task} --n-bits {args.n_bits} --timesteps {args.timesteps} "
        f"--eval-every {args.eval_every} --seeds {args.seeds}"
        + ("" if args.name == "laber" else f" --methods {' '.join(args.methods)} --name {args.name}")
        + (" --quick" if args.quick else "")
    )
    text = markdown(rows, title, command)
    print(text)
    if not args.quick:
        stem = args.out / f"bench_{args.name}_{name}"
        bench.write_page(stem.with_suffix(".md"), text)
        records = {"rows": rows, "runs": [run.__dict__ for run in runs]}
        bench.write_page(stem.with_suffix(".json"), json.dumps(records, indent=1))
        plot(runs, title, stem.with_suffix(".png"))


if __name__ == "__main__":
    main()
