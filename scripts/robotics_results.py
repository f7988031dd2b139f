"""Reproduce the robotics results of ``docs/robotics.md``: HER on FetchReach, PandaReach and FetchPush.

Every run trains one learner on one seed, evaluates greedy success on fresh episodes along the way (the
curve) and at the end (the figure of the table), and merges its record into a JSON file; ``report``
turns that file into the README-ready table and PNG curves::

    python scripts/robotics_results.py run fetch-reach-sac --seeds 0 1 2
    python scripts/robotics_results.py run fetch-reach-ddpg --seeds 0 1 2
    python scripts/robotics_results.py run panda-reach-sac --seeds 0 1 2
    python scripts/robotics_results.py run fetch-push-sac --seeds 0 --minutes 35
    python scripts/robotics_results.py report --write

Settings come from :mod:`her_wrap.sb3.presets`; ``--set key=value`` (YAML values, dotted keys for nested
dicts: ``--set policy_kwargs.net_arch=[64,64] n_sampled_goal=8``) overrides them for tuning runs, which
should go to another ``--results`` file. Torch runs on one thread (2-core machines).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch as th
import yaml
from stable_baselines3 import DDPG, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.noise import NormalActionNoise

from her_wrap import HER
from her_wrap.envs.registry import make_goal_env
from her_wrap.sb3 import presets
from her_wrap.sb3.evaluation import success_rate

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = ROOT / "docs" / "robotics_results.json"
DOCS = ROOT / "docs"


@dataclass(frozen=True)
class Task:
    """One row of the results table.

    :param env_id: gymnasium id
    :param learner: SB3 learner class
    :param settings: keyword arguments of :class:`~her_wrap.HER` (HER's and the learner's)
    :param steps: env steps of a run
    :param eval_freq: env steps between two points of the curve
    :param target: greedy success to reach by ``steps`` (None: the best curve in the budget)
    """

    env_id: str
    learner: type
    settings: dict[str, Any]
    steps: int
    eval_freq: int
    target: float | None = None
    policy: str = "MultiInputPolicy"
    action_noise_std: float | None = None
    notes: list[str] = field(default_factory=list)


# The FetchPush run of docs/robotics.md: SAC with the reach settings, 1,000 random steps first (the
# manipulation recipe that learns FetchPush is configs/her.yml's, run with her-wrap train: docs/manipulation.md).
FETCH_PUSH_SAC: dict[str, Any] = {
    **presets.FETCH_REACH_SAC,
    "buffer_size": 1_000_000,
    "learning_starts": 1_000,
}

TASKS: dict[str, Task] = {
    "fetch-reach-sac": Task("FetchReach-v4", SAC, presets.FETCH_REACH_SAC, 5_000, 500, 0.95),
    "fetch-reach-ddpg": Task("FetchReach-v4", DDPG, presets.FETCH_REACH_DDPG, 5_000, 500, 0.95),
    "panda-reach-sac": Task("PandaReach-v3", SAC, presets.PANDA_REACH_SAC, 5_000, 500, 0.95),
    "fetch-push-sac": Task("FetchPush-v4", SAC, FETCH_PUSH_SAC, 1_000_000, 5_000),
}


class SuccessCurve(BaseCallback):
    """Greedy success on fresh episodes every ``eval_freq`` env steps; its time is kept apart.

    With ``max_seconds``, training stops once its wall time (evaluations left out) passes that budget.
    """

    def __init__(
        self, her: HER, env_id: str, eval_freq: int, n_episodes: int, seed: int, max_seconds: float | None
    ) -> None:
        super().__init__()
        self.max_seconds = max_seconds
        self.start = time.perf_counter()
        self.her = her
        self.eval_env = make_goal_env(env_id)
        self.eval_freq = eval_freq
        self.n_episodes = n_episodes
        self.seed = seed
        self.steps: list[int] = []
        self.successes: list[float] = []
        self.eval_seconds = 0.0

    def evaluate(self) -> None:
        start = time.perf_counter()
        rate = success_rate(self.her, self.eval_env, self.n_episodes, seed=self.seed + len(self.steps))
        self.eval_seconds += time.perf_counter() - start
        self.steps.append(self.her.num_timesteps)
        self.successes.append(rate)
        print(f"  {self.her.num_timesteps:>7} steps: greedy success {rate:.2f}", flush=True)

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        if self.num_timesteps % self.eval_freq == 0:
            self.evaluate()
        if self.max_seconds is None:
            return True
        return time.perf_counter() - self.start - self.eval_seconds < self.max_seconds


def settings_with(base: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``base`` with ``key=value`` overrides (YAML values; dotted keys reach into nested dicts)."""
    settings = copy.deepcopy(base)
    for item in overrides:
        key, _, text = item.partition("=")
        target = settings
        *parents, last = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[last] = yaml.safe_load(text)
    return settings


def build(task: Task, settings: dict[str, Any], seed: int) -> HER:
    """A fresh HER model for ``task``."""
    kwargs = copy.deepcopy(settings)
    noise_std = kwargs.pop("action_noise_std", task.action_noise_std)
    if noise_std is not None:
        n_actions = make_goal_env(task.env_id).action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n_actions), noise_std * np.ones(n_actions))
    policy = kwargs.pop("policy", task.policy)
    return HER(policy, task.env_id, task.learner, seed=seed, **kwargs)


def run_one(
    task: Task,
    settings: dict[str, Any],
    seed: int,
    steps: int,
    eval_episodes: int,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Train one seed; return its record (curve, final success, wall times)."""
    th.manual_seed(seed)
    model = build(task, settings, seed)
    curve = SuccessCurve(
        model, task.env_id, task.eval_freq, eval_episodes, seed=10_000 * (seed + 1), max_seconds=max_seconds
    )
    curve.evaluate()
    curve.eval_seconds = 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(steps, callback=curve)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if curve.steps[-1] != model.num_timesteps:
        curve.evaluate()
    final = success_rate(model, make_goal_env(task.env_id), 100, seed=1_000_000 + seed)
    print(f"  final greedy success on 100 fresh episodes: {final:.2f}", flush=True)
    return {
        "env_id": task.env_id,
        "learner": task.learner.__name__,
        "seed": seed,
        "steps": model.num_timesteps,
        "final_success": final,
        "curve_steps": curve.steps,
        "curve_success": curve.successes,
        "train_seconds": wall - curve.eval_seconds,
        "train_cpu_seconds": cpu,  # evaluations included
        "eval_seconds": curve.eval_seconds,
        "load_average": os.getloadavg(),
        "settings": json.loads(json.dumps(settings, default=str)),
    }


def load_results(path: pathlib.Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else {}


def command_run(args: argparse.Namespace) -> None:
    task = TASKS[args.task]
    settings = settings_with(task.settings, args.set)
    steps = args.steps or task.steps
    for seed in args.seeds:
        print(f"{args.task} seed {seed}: {steps} steps of {task.env_id}", flush=True)
        max_seconds = None if args.minutes is None else 60 * args.minutes
        record = run_one(task, settings, seed, steps, args.eval_episodes, max_seconds)
        record["command"] = " ".join(
            ["python scripts/robotics_results.py run", args.task, "--seeds", str(seed)]
            + (["--steps", str(steps)] if args.steps else [])
            + (["--minutes", str(args.minutes)] if args.minutes else [])
            + [f"--set {item}" for item in args.set]
        )
        results = load_results(args.results)  # re-read: other runs may have written meanwhile
        results[f"{args.label or args.task}/{seed}"] = record
        args.results.write_text(json.dumps(results, indent=1))


TABLE_START, TABLE_END = "<!-- results table: start -->", "<!-- results table: end -->"


def reproduce_command(records: list[dict[str, Any]]) -> str:
    """The command of the records' runs, all their seeds in one."""
    seeds = " ".join(str(record["seed"]) for record in records)
    return re.sub(r"--seeds \d+", f"--seeds {seeds}", records[0]["command"])


def first_solved(record: dict[str, Any], threshold: float = 0.95) -> int | None:
    """Env steps at the first point of the curve with greedy success >= ``threshold``."""
    for steps, success in zip(record["curve_steps"], record["curve_success"], strict=True):
        if success >= threshold:
            return int(steps)
    return None


def table_row(records: list[dict[str, Any]]) -> str:
    finals = np.array([record["final_success"] for record in records])
    walls = np.array([record["train_seconds"] for record in records])
    cpus = np.array([record["train_cpu_seconds"] for record in records])
    solved = [first_solved(record) for record in records]
    solved_text = ", ".join("never" if steps is None else f"{steps:,}" for steps in solved)
    steps = sorted({record["steps"] for record in records})
    return (
        f"| {records[0]['env_id']} | HER({records[0]['learner']}) | {', '.join(f'{n:,}' for n in steps)} | "
        f"{finals.mean():.2f} ± {finals.std():.2f} ({', '.join(f'{value:.2f}' for value in finals)}) | "
        f"{solved_text} | {walls.mean():.0f} s ({cpus.mean():.0f} s) | `{reproduce_command(records)}` |"
    )


def plot_curves(label: str, records: list[dict[str, Any]]) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for record in records:
        axis.plot(record["curve_steps"], record["curve_success"], marker="o", label=f"seed {record['seed']}")
    axis.set_xlabel("env steps")
    axis.set_ylabel("greedy success (20 fresh episodes)")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"HER({records[0]['learner']}) on {records[0]['env_id']}")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = DOCS / f"robotics_{label}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def command_report(args: argparse.Namespace) -> None:
    results = load_results(args.results)
    groups: dict[str, list[dict[str, Any]]] = {}
    for key, record in results.items():
        groups.setdefault(key.rsplit("/", 1)[0], []).append(record)
    lines = [
        TABLE_START,
        "| task | learner | env steps | greedy success at the end, mean ± std (each seed) | "
        "first curve point >= 0.95 (each seed) | wall time per run, evaluations excluded (CPU time, included) | reproduce |",
        "|---|---|---:|---|---|---:|---|",
    ]
    for label, records in groups.items():
        records.sort(key=lambda record: record["seed"])
        lines.append(table_row(records))
        plot_curves(label, records)
    lines.append(TABLE_END)
    table = "\n".join(lines)
    print(table)
    page = DOCS / "robotics.md"
    if args.write and page.exists():
        text = page.read_text()
        before, _, rest = text.partition(TABLE_START)
        _, _, after = rest.partition(TABLE_END)
        page.write_text(before + table + after)
        print(f"wrote the table into {page}")


def main() -> None:
    th.set_num_threads(1)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--results", type=pathlib.Path, default=DEFAULT_RESULTS, help="JSON file of run records"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train and evaluate one task over seeds")
    run.add_argument("task", choices=sorted(TASKS))
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    run.add_argument("--steps", type=int, default=None, help="env steps (default: the task's)")
    run.add_argument("--minutes", type=float, default=None, help="stop training after this wall time")
    run.add_argument("--eval-episodes", type=int, default=20, help="fresh episodes per point of the curve")
    run.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override a preset setting")
    run.add_argument("--label", default=None, help="key of the records (default: the task name)")
    run.set_defaults(handler=command_run)
    report = commands.add_parser("report", help="print the results table and write PNG curves under docs/")
    report.add_argument("--write", action="store_true", help="replace the table in docs/robotics.md")
    report.set_defaults(handler=command_report)
    args = parser.parse_args()
    args.handler(args)


if __name__ == "__main__":
    main()
