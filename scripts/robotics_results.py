"""Reproduce the robotics results of ``docs/robotics.md``: HER on the Fetch and Panda goal tasks.

Every run trains one learner on one seed, evaluates greedy success on fresh episodes along the way (the
curve, against env steps and against wall-clock minutes of training) and at the end on 100 fresh episodes
(the figure of the table), and merges its record into a JSON file; ``report`` turns that file into the
tables of ``docs/robotics.md`` and PNG curves. Three kinds of task:

- reach tasks, from :mod:`her_wrap.sb3.presets` (``--set key=value`` overrides a setting: YAML values,
  dotted keys for nested dicts, ``--set policy_kwargs.net_arch=[64,64]``; tuning runs should go to another
  ``--results`` file)::

    python scripts/robotics_results.py run fetch-reach-sac --seeds 0 1 2

- manipulation tasks, trained by ``her-wrap train`` with the shipped ``configs/her.yml`` entry (the
  command a user runs); ``record`` adds a finished ``her-wrap train`` run folder of the same command::

    python scripts/robotics_results.py run fetch-push-ddpg --seeds 0 1 2
    python scripts/robotics_results.py record fetch-push-ddpg logs/her/FetchPush-v4_1

- references: stable-baselines3's own learner and ``HerReplayBuffer`` with rl-baselines3-zoo's entry for
  the same task (read from the installed ``rl_zoo3`` package), for a wall-clock budget::

    python scripts/robotics_results.py run fetch-push-zoo-tqc --seeds 0 --minutes 30

``python scripts/robotics_results.py report --write`` rewrites the tables and figures.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
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
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.literals import looks_like_python_mapping, parse_python_literal
from her_wrap.runs.run_layout import layout_of
from her_wrap.runs.yaml_io import load_yaml_file
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


TASKS: dict[str, Task] = {
    "fetch-reach-sac": Task("FetchReach-v4", SAC, presets.FETCH_REACH_SAC, 5_000, 500, 0.95),
    "fetch-reach-ddpg": Task("FetchReach-v4", DDPG, presets.FETCH_REACH_DDPG, 5_000, 500, 0.95),
    "panda-reach-sac": Task("PandaReach-v3", SAC, presets.PANDA_REACH_SAC, 5_000, 500, 0.95),
}


@dataclass(frozen=True)
class EntryTask:
    """A manipulation row: ``her-wrap train`` with the shipped ``configs/her.yml`` entry of ``env_id``.

    :param steps: env steps of a run (``-n``)
    :param eval_freq: env steps between two points of the curve
    :param eval_episodes: fresh episodes per point
    """

    env_id: str
    steps: int
    eval_freq: int = 20_000
    eval_episodes: int = 50

    def train_arguments(self, seed: int, overrides: tuple[str, ...] = ()) -> list[str]:
        """The ``her-wrap train`` arguments of one seed (what ``record`` checks a run folder against)."""
        return [
            "--env", self.env_id, "--seed", str(seed), "-n", str(self.steps),
            "--eval-freq", str(self.eval_freq), "--eval-episodes", str(self.eval_episodes),
            "--save-freq", "100000", *(["-params", *overrides] if overrides else []),
        ]  # fmt: skip


ENTRY_TASKS: dict[str, EntryTask] = {
    "fetch-push-ddpg": EntryTask("FetchPush-v4", 600_000),
    "fetch-pick-and-place-ddpg": EntryTask("FetchPickAndPlace-v4", 1_500_000),
    "fetch-slide-ddpg": EntryTask("FetchSlide-v4", 1_500_000),
    "panda-push-ddpg": EntryTask("PandaPush-v3", 600_000),
    "panda-pick-and-place-ddpg": EntryTask("PandaPickAndPlace-v3", 800_000),
}


#: Changes to the shipped entry that a manipulation row can measure (``--variant NAME``): ``-params`` of
#: ``her-wrap train``. Rows of a variant are keyed ``TASK+NAME``.
VARIANTS: dict[str, tuple[str, ...]] = {
    # Half of the relabeled goals from other episodes' desired goals (mrl's "futureactual").
    "goal-mix": ("her.goal_mix:{future: 0.5, desired: 0.5}",),
    # LaBER over the recipe's batch: score 4 x 2048 transitions, train on 2048 of them.
    "laber-mean": ("her.laber:LaBERmean", "her.laber_m:4"),
    # LaBER's premise at the recipe's cost: score a large batch of 2048, back-propagate through 512.
    "laber-mean-512": ("her.laber:LaBERmean", "her.laber_m:4", "batch_size:512"),
    # Prioritized replay (proportional, alpha 0.6, beta 0.4).
    "per": ("her.prioritized:true",),
    # Twice the gradient steps per cycle: 40 of batch 2048 every 500 env steps (0.08 per env step).
    "updates-40": ("gradient_steps:40",),
    # TD3 instead of DDPG (twin critics, target policy smoothing, the actor updated every second step).
    "td3": ("model_class:td3",),
    # Eight relabeled goals per kept one: 8/9 of each batch relabeled instead of 4/5.
    "n-sampled-goal-8": ("her.n_sampled_goal:8",),
}


@dataclass(frozen=True)
class ReferenceTask:
    """What a user would pick instead: SB3's learner and ``HerReplayBuffer`` with the zoo's entry.

    :param zoo_algo: the zoo's hyperparameter file (``tqc`` reads ``rl_zoo3/hyperparams/tqc.yml``)
    :param zoo_entry: the entry's key there (the zoo keeps the Fetch tasks under their v1 ids)
    :param minutes: wall-clock budget of training, evaluations left out
    :param eval_freq: env steps between two points of the curve
    """

    env_id: str
    zoo_algo: str
    zoo_entry: str
    minutes: float
    eval_freq: int
    eval_episodes: int = 20


#: Each budget is the shipped entry's training minutes on seed 0 to its target: 0.8 for FetchPickAndPlace,
#: 0.5 for FetchSlide, 0.9 for PandaPush (for FetchPush, its whole 600k-step run), so a row shows where the
#: zoo's recipe stands when her_wrap's gets there.
REFERENCE_TASKS: dict[str, ReferenceTask] = {
    "fetch-push-zoo-tqc": ReferenceTask("FetchPush-v4", "tqc", "FetchPush-v1", 25.0, 1_000),
    "fetch-pick-and-place-zoo-tqc": ReferenceTask(
        "FetchPickAndPlace-v4", "tqc", "FetchPickAndPlace-v1", 48.0, 2_000
    ),
    "fetch-slide-zoo-tqc": ReferenceTask("FetchSlide-v4", "tqc", "FetchSlide-v1", 33.0, 1_000),
    "panda-push-zoo-tqc": ReferenceTask("PandaPush-v3", "tqc", "PandaPush-v1", 19.0, 1_000),
}


class SuccessCurve(BaseCallback):
    """Greedy success on fresh episodes every ``eval_freq`` env steps; its time is kept apart.

    With ``max_seconds``, training stops once its wall time (evaluations left out) passes that budget.
    """

    def __init__(
        self, her: Any, env_id: str, eval_freq: int, n_episodes: int, seed: int, max_seconds: float | None
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
        self.seconds: list[float] = []  # training wall time at each point, evaluations left out
        self.eval_seconds = 0.0

    def evaluate(self) -> None:
        start = time.perf_counter()
        self.seconds.append(max(start - self.start - self.eval_seconds, 0.0))
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


def final_success(model: Any, env_id: str, seed: int) -> float:
    """Greedy success of a trained agent on 100 fresh episodes (the figure of a table row)."""
    final = success_rate(model, make_goal_env(env_id), 100, seed=1_000_000 + seed)
    print(f"  final greedy success on 100 fresh episodes: {final:.2f}", flush=True)
    return final


def finish(curve: SuccessCurve, model: Any, env_id: str, seed: int) -> float:
    """Close the curve with a point at the last step, then return the agent's :func:`final_success`."""
    if not curve.steps or curve.steps[-1] != model.num_timesteps:
        curve.evaluate()
    return final_success(model, env_id, seed)


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
    final = finish(curve, model, task.env_id, seed)
    return {
        "kind": "preset",
        "env_id": task.env_id,
        "learner": task.learner.__name__,
        "seed": seed,
        "steps": model.num_timesteps,
        "final_success": final,
        "curve_steps": curve.steps,
        "curve_success": curve.successes,
        "curve_seconds": curve.seconds,
        "train_seconds": wall - curve.eval_seconds,
        "train_cpu_seconds": cpu,  # evaluations included
        "eval_seconds": curve.eval_seconds,
        "load_average": os.getloadavg(),
        "settings": json.loads(json.dumps(settings, default=str)),
    }


def _run_folder_arguments(run_dir: pathlib.Path) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    layout = layout_of(run_dir)
    if layout is None:
        raise SystemExit(f"{run_dir} is not a her-wrap train run folder (no <env id>/args.yml in it)")
    args = load_yaml_file(layout.args_path)
    (entry,) = load_yaml_file(layout.config_path).values()
    return layout, args, entry


def check_shipped_entry(
    task: EntryTask, run_dir: pathlib.Path, overrides: tuple[str, ...] = ()
) -> tuple[Any, dict[str, Any]]:
    """The run folder's layout and arguments, once its run is the task's command with the shipped entry
    (changed by ``overrides``, a variant's ``-params``).

    :raises SystemExit: naming the first difference (another entry, budget or evaluation schedule)
    """
    layout, args, entry = _run_folder_arguments(run_dir)
    shipped = load_run_config(
        default_config_path(), task.env_id, overrides=overrides, n_timesteps=task.steps
    ).to_entry()
    if args.get("env") != task.env_id:
        raise SystemExit(f"{run_dir} trained {args.get('env')}, not {task.env_id}")
    for name, value in (("n_timesteps", task.steps), ("eval_freq", task.eval_freq)):
        recorded = entry.get(name) if name == "n_timesteps" else args.get(name)
        if recorded != value:
            raise SystemExit(f"{run_dir}: {name} is {recorded}, the task's is {value}")
    if args.get("eval_episodes") != task.eval_episodes:
        raise SystemExit(f"{run_dir}: eval_episodes is {args.get('eval_episodes')}, not {task.eval_episodes}")
    differences = sorted(key for key in {*shipped, *entry} if shipped.get(key) != entry.get(key))
    if differences:
        raise SystemExit(
            f"{run_dir} ran another entry than the shipped configs/her.yml one for {task.env_id}"
            f"{' with ' + ' '.join(overrides) if overrides else ''} (differs in {', '.join(differences)}); "
            "pass the --variant it ran"
        )
    return layout, args


def record_entry_run(
    task_name: str, task: EntryTask, run_dir: pathlib.Path, variant: str | None = None
) -> dict[str, Any]:
    """The record of a finished ``her-wrap train`` run of ``task`` (with ``variant``'s changes): its curve,
    and its final agent on 100 fresh episodes."""
    overrides = VARIANTS[variant] if variant else ()
    layout, args = check_shipped_entry(task, run_dir, overrides)
    seed = int(args["seed"])
    with np.load(layout.evaluations_path) as data:
        steps = [int(value) for value in data["timesteps"]]
        successes = [float(row.mean()) for row in data["successes"]]
        seconds = [float(value) for value in data["train_seconds"]]
    model = HER.load(str(layout.final_model_path), env=make_goal_env(task.env_id), device="cpu")
    final = final_success(model, task.env_id, seed)
    config = load_run_config(layout.config_path, task.env_id)
    return {
        "kind": "entry",
        "env_id": task.env_id,
        "learner": config.model_class.upper(),
        "seed": seed,
        "steps": steps[-1],
        "final_success": final,
        "curve_steps": steps,
        "curve_success": successes,
        "curve_seconds": seconds,
        "train_seconds": seconds[-1],
        "eval_episodes": task.eval_episodes,
        "num_threads": args.get("num_threads"),
        "load_average": os.getloadavg(),
        "run_dir": str(run_dir),
        "settings": config.to_entry(),
        "variant": variant,
        "overrides": list(overrides),
        "command": f"python scripts/robotics_results.py run {task_name} --seeds {seed}"
        + (f" --variant {variant}" if variant else ""),
        "train_command": "her-wrap train " + " ".join(task.train_arguments(seed, overrides)),
    }


def run_entry(
    task_name: str, task: EntryTask, seed: int, log_folder: pathlib.Path, variant: str | None = None
) -> dict[str, Any]:
    """Train one seed with ``her-wrap train`` and return its record."""
    command = [
        sys.executable,
        "-m",
        "her_wrap.runs.cli",
        "train",
        *task.train_arguments(seed, VARIANTS[variant] if variant else ()),
        "-f",
        str(log_folder),
    ]
    print(" ".join(command), flush=True)
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith(("Run folder:", "Eval num_timesteps")):
                print("  " + line.rstrip(), flush=True)
    if process.returncode != 0:
        raise SystemExit(f"her-wrap train failed:\n{''.join(lines[-20:])}")
    run_dir = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("Run folder:"))
    return record_entry_run(task_name, task, pathlib.Path(run_dir), variant)


def zoo_entry(task: ReferenceTask) -> dict[str, Any]:
    """The zoo's hyperparameters of ``task`` from the installed rl_zoo3, ``dict(...)`` strings parsed."""
    import rl_zoo3

    path = pathlib.Path(rl_zoo3.__file__).parent / "hyperparams" / f"{task.zoo_algo}.yml"
    entry = dict(yaml.safe_load(path.read_text())[task.zoo_entry])
    return {
        key: parse_python_literal(value) if looks_like_python_mapping(value) else value
        for key, value in entry.items()
    }


def run_reference(task_name: str, task: ReferenceTask, seed: int, minutes: float) -> dict[str, Any]:
    """Train SB3's learner with ``HerReplayBuffer`` and the zoo's entry for ``minutes`` of wall time, on as
    many torch threads as the shipped entry of the same task uses."""
    from stable_baselines3 import HerReplayBuffer

    from her_wrap.sb3.learners import learner_class

    entry = zoo_entry(task)
    if entry.pop("normalize", False):
        raise SystemExit(
            f"the zoo entry {task.zoo_entry} normalizes; this reference runs unnormalized entries only"
        )
    if entry.pop("replay_buffer_class") != "HerReplayBuffer":
        raise SystemExit(f"the zoo entry {task.zoo_entry} does not use HerReplayBuffer")
    steps = int(entry.pop("n_timesteps"))
    policy = entry.pop("policy")
    learner = learner_class(task.zoo_algo)
    th.set_num_threads(load_run_config(default_config_path(), task.env_id).num_threads or 1)
    th.manual_seed(seed)
    model = learner(
        policy, make_goal_env(task.env_id), replay_buffer_class=HerReplayBuffer, seed=seed, verbose=0, **entry
    )
    curve = SuccessCurve(
        model,
        task.env_id,
        task.eval_freq,
        task.eval_episodes,
        seed=10_000 * (seed + 1),
        max_seconds=60 * minutes,
    )
    model.learn(steps, callback=curve)
    final = finish(curve, model, task.env_id, seed)
    return {
        "kind": "reference",
        "env_id": task.env_id,
        "learner": f"SB3 {learner.__name__} + HerReplayBuffer, rl-zoo3's {task.zoo_entry} entry",
        "seed": seed,
        "steps": model.num_timesteps,
        "final_success": final,
        "curve_steps": curve.steps,
        "curve_success": curve.successes,
        "curve_seconds": curve.seconds,
        "train_seconds": curve.seconds[-1],
        "eval_episodes": task.eval_episodes,
        "num_threads": th.get_num_threads(),
        "load_average": os.getloadavg(),
        "settings": json.loads(json.dumps(entry, default=str)),
        "command": f"python scripts/robotics_results.py run {task_name} --seeds {seed} --minutes {minutes:g}",
    }


def load_results(path: pathlib.Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else {}


def save_record(path: pathlib.Path, key: str, record: dict[str, Any]) -> None:
    results = load_results(path)  # re-read: other runs may have written meanwhile
    results[key] = record
    path.write_text(json.dumps(results, indent=1))


def command_run(args: argparse.Namespace) -> None:
    if args.variant and args.task not in ENTRY_TASKS:
        raise SystemExit(
            f"--variant changes a manipulation entry; {args.task} is not one ({', '.join(ENTRY_TASKS)})"
        )
    for seed in args.seeds:
        if args.task in ENTRY_TASKS:
            if args.set or args.steps or args.minutes is not None:
                raise SystemExit(
                    f"{args.task} runs the shipped entry as it is: no --set, --steps or --minutes"
                )
            record = run_entry(args.task, ENTRY_TASKS[args.task], seed, args.log_folder, args.variant)
        elif args.task in REFERENCE_TASKS:
            task = REFERENCE_TASKS[args.task]
            print(
                f"{args.task} seed {seed}: {task.env_id} for {args.minutes or task.minutes} minutes",
                flush=True,
            )
            record = run_reference(args.task, task, seed, args.minutes or task.minutes)
        else:
            record = run_preset(args, TASKS[args.task], seed)
        save_record(args.results, f"{args.label or record_label(args.task, args.variant)}/{seed}", record)


def record_label(task: str, variant: str | None) -> str:
    return f"{task}+{variant}" if variant else task


def command_record(args: argparse.Namespace) -> None:
    task = ENTRY_TASKS[args.task]
    for run_dir in args.run_dirs:
        record = record_entry_run(args.task, task, run_dir, args.variant)
        save_record(args.results, f"{record_label(args.task, args.variant)}/{record['seed']}", record)


def run_preset(args: argparse.Namespace, task: Task, seed: int) -> dict[str, Any]:
    settings = settings_with(task.settings, args.set)
    steps = args.steps or task.steps
    print(f"{args.task} seed {seed}: {steps} steps of {task.env_id}", flush=True)
    max_seconds = None if args.minutes is None else 60 * args.minutes
    record = run_one(task, settings, seed, steps, args.eval_episodes, max_seconds)
    record["command"] = " ".join(
        ["python scripts/robotics_results.py run", args.task, "--seeds", str(seed)]
        + (["--steps", str(steps)] if args.steps else [])
        + (["--minutes", str(args.minutes)] if args.minutes else [])
        + [f"--set {item}" for item in args.set]
    )
    return record


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


MANIPULATION_START, MANIPULATION_END = (
    "<!-- manipulation table: start -->",
    "<!-- manipulation table: end -->",
)


def first_reaching(record: dict[str, Any], threshold: float) -> tuple[int, float] | None:
    """(env steps, training minutes) at the first point of the curve with success >= ``threshold``."""
    for steps, success, seconds in zip(
        record["curve_steps"], record["curve_success"], record["curve_seconds"], strict=True
    ):
        if success >= threshold:
            return int(steps), seconds / 60
    return None


#: Greedy success levels of the manipulation table: 0.5, and the targets (0.8 PickAndPlace, 0.9 Push).
MILESTONES = (0.5, 0.8, 0.9)


def _per_seed(records: list[dict[str, Any]], threshold: float) -> tuple[str, str]:
    reached = [first_reaching(record, threshold) for record in records]
    steps = ", ".join("-" if point is None else f"{point[0] / 1000:.0f}k" for point in reached)
    minutes = ", ".join("-" if point is None else f"{point[1]:.0f}" for point in reached)
    return steps, minutes


def _median_minutes(records: list[dict[str, Any]], threshold: float) -> str:
    """The median over seeds of the minutes to ``threshold`` (a seed that never reaches it counts as never)."""
    points = (first_reaching(record, threshold) for record in records)
    median = statistics.median(math.inf if point is None else point[1] for point in points)
    return "never" if math.isinf(median) else f"{median:.0f}"


def manipulation_row(records: list[dict[str, Any]]) -> str:
    first = records[0]
    if first["kind"] == "entry":
        recipe = f"HER({first['learner']}), `configs/her.yml`"
        if first.get("overrides"):
            recipe += " with " + ", ".join(f"`{item}`" for item in first["overrides"])
    else:
        recipe = first["learner"]
    reached = [_per_seed(records, threshold) for threshold in MILESTONES]
    medians = " / ".join(_median_minutes(records, threshold) for threshold in MILESTONES[1:])
    finals = ", ".join(f"{record['final_success']:.2f}" for record in records)
    ms_per_step = np.mean([1000 * record["train_seconds"] / record["steps"] for record in records])
    seeds = " ".join(str(record["seed"]) for record in records)
    command = re.sub(r"--seeds \d+", f"--seeds {seeds}", first["command"])
    return (
        f"| {first['env_id']} | {recipe} | {len(records)} | {' / '.join(steps for steps, _ in reached)} | "
        f"{' / '.join(minutes for _, minutes in reached)} | {medians} | {finals} | "
        f"{max(record['steps'] for record in records):,} | {ms_per_step:.1f} | `{command}` |"
    )


def plot_manipulation(env_id: str, groups: list[list[dict[str, Any]]]) -> pathlib.Path:
    """Success against env steps and against training minutes, every seed of every recipe for ``env_id``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_steps, by_minutes) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for index, records in enumerate(groups):
        color = f"C{index}"
        for record in records:
            if record["kind"] == "entry":
                name = f"HER({record['learner']})" + (
                    f" {record['variant']}" if record.get("variant") else ""
                )
            else:
                name = record["learner"].split(",")[0]
            label = f"{name}, seed {record['seed']}"
            style = "-" if record["kind"] == "entry" else "--"
            by_steps.plot(
                record["curve_steps"], record["curve_success"], style, color=color, alpha=0.8, label=label
            )
            by_minutes.plot(
                np.array(record["curve_seconds"]) / 60, record["curve_success"], style, color=color, alpha=0.8
            )
    by_steps.set_xlabel("env steps")
    by_minutes.set_xlabel("training wall-clock minutes (evaluations excluded)")
    by_steps.set_ylabel("greedy success on fresh episodes")
    for axis in (by_steps, by_minutes):
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    by_steps.legend(fontsize=7)
    figure.suptitle(env_id)
    figure.tight_layout()
    path = DOCS / f"robotics_{env_id.split('-')[0].lower()}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _replace_between(text: str, start: str, end: str, table: str) -> str:
    before, _, rest = text.partition(start)
    _, _, after = rest.partition(end)
    return before + table + after


def command_report(args: argparse.Namespace) -> None:
    results = load_results(args.results)
    groups: dict[str, list[dict[str, Any]]] = {}
    for key, record in results.items():
        groups.setdefault(key.rsplit("/", 1)[0], []).append(record)
    for records in groups.values():
        records.sort(key=lambda record: record["seed"])
    reach = {
        label: records for label, records in groups.items() if records[0].get("kind", "preset") == "preset"
    }
    manipulation = {label: records for label, records in groups.items() if label not in reach}

    lines = [
        TABLE_START,
        "| task | learner | env steps | greedy success at the end, mean ± std (each seed) | "
        "first curve point >= 0.95 (each seed) | wall time per run, evaluations excluded (CPU time, included) | reproduce |",
        "|---|---|---:|---|---|---:|---|",
    ]
    for label, records in reach.items():
        lines.append(table_row(records))
        plot_curves(label, records)
    lines.append(TABLE_END)
    table = "\n".join(lines)

    manipulation_lines = [
        MANIPULATION_START,
        "| task | recipe | seeds | env steps to 0.5 / 0.8 / 0.9 (each seed) | "
        "training minutes to 0.5 / 0.8 / 0.9 (each seed) | median minutes to 0.8 / 0.9 | greedy success at the end, 100 fresh episodes (each seed) | env steps | "
        "ms per env step | reproduce |",
        "|---|---|---:|---|---|---:|---|---:|---:|---|",
    ]
    by_env: dict[str, list[list[dict[str, Any]]]] = {}
    for records in manipulation.values():
        manipulation_lines.append(manipulation_row(records))
        by_env.setdefault(records[0]["env_id"], []).append(records)
    for env_id, env_groups in by_env.items():
        print(f"wrote {plot_manipulation(env_id, env_groups)}")
    manipulation_lines.append(MANIPULATION_END)
    manipulation_table = "\n".join(manipulation_lines)
    print(table, manipulation_table, sep="\n\n")
    page = DOCS / "robotics.md"
    if args.write and page.exists():
        text = _replace_between(page.read_text(), TABLE_START, TABLE_END, table)
        if MANIPULATION_START in text:
            text = _replace_between(text, MANIPULATION_START, MANIPULATION_END, manipulation_table)
        page.write_text(text)
        print(f"wrote the tables into {page}")


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
    run.add_argument("task", choices=sorted({*TASKS, *ENTRY_TASKS, *REFERENCE_TASKS}))
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    run.add_argument("--steps", type=int, default=None, help="env steps (default: the task's)")
    run.add_argument("--minutes", type=float, default=None, help="stop training after this wall time")
    run.add_argument("--eval-episodes", type=int, default=20, help="fresh episodes per point of the curve")
    run.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override a preset setting")
    run.add_argument("--label", default=None, help="key of the records (default: the task name)")
    run.add_argument(
        "--log-folder",
        type=pathlib.Path,
        default=ROOT / "logs",
        help="her-wrap train's -f (manipulation tasks)",
    )
    run.add_argument(
        "--variant",
        choices=sorted(VARIANTS),
        default=None,
        help="a change to the shipped entry (manipulation tasks)",
    )
    run.set_defaults(handler=command_run)
    record = commands.add_parser(
        "record", help="add finished her-wrap train run folders of a manipulation task"
    )
    record.add_argument("task", choices=sorted(ENTRY_TASKS))
    record.add_argument("run_dirs", type=pathlib.Path, nargs="+", metavar="RUN_DIR")
    record.add_argument("--variant", choices=sorted(VARIANTS), default=None, help="the change the runs made")
    record.set_defaults(handler=command_record)
    report = commands.add_parser("report", help="print the results tables and write PNG curves under docs/")
    report.add_argument("--write", action="store_true", help="replace the tables in docs/robotics.md")
    report.set_defaults(handler=command_report)
    args = parser.parse_args()
    args.handler(args)


if __name__ == "__main__":
    main()
