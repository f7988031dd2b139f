"""Reproduce the robotics results of ``docs/results.md`` and the research log's ``docs/research/robotics.md``:
HER on the Fetch and Panda goal tasks.

Every run trains one learner on one seed, evaluates greedy success on fresh episodes along the way (the
curve, against env steps and against wall-clock minutes of training) and at the end on 100 fresh episodes
(the figure of the table), and merges its record into a JSON file; ``report`` turns that file into the
tables of those pages and README.md, and PNG curves. Three kinds of task:

- reach tasks, from :mod:`her_wrap.runs.presets` (``--set key=value`` overrides a setting: YAML values,
  dotted keys for nested dicts, ``--set policy_kwargs.net_arch=[64,64]``; tuning runs should go to another
  ``--results`` file)::

    python scripts/robotics_results.py run fetch-reach-sac --seeds 0 1 2

- manipulation tasks, trained by ``her-wrap train`` with the shipped ``configs/her.yml`` entry (the
  command a user runs); ``record`` adds a finished ``her-wrap train`` run folder of the same command::

    python scripts/robotics_results.py run fetch-push-ddpg --seeds 0 1 2
    python scripts/robotics_results.py record fetch-push-ddpg logs/her/FetchPush-v4_1

  ``--variant NAME`` changes the entry (``experiments.VARIANTS``); ``budget-1m`` trains for 1M env steps
  in all instead of the entry's; ``workers-2`` trains on two workers (``her-wrap train --workers 2``, every
  step count halved, the curve counting both workers' env steps), as FetchPush's entry does (its
  ``workers: 2``; ``one-process`` trains it in one process); ``fetch-push-sbx-crossq`` runs the SBX entry
  of ``configs/her_jax.yml``. A run stopped before its
  budget is no row; ``stopped`` writes its curve (and a checkpoint's success on 100 fresh episodes) to a
  file of ``docs/experiments/``::

    python scripts/robotics_results.py stopped fetch-pick-and-place-ddpg logs/her/FetchPickAndPlace-v4_2 \
        --checkpoint 300000 --out docs/experiments/fetch_pick_and_place_seed0.json

  A run longer than one sitting is stopped with SIGTERM or Ctrl-C to this script, which passes it on to its
  ``her-wrap train`` (:mod:`lab.training_child`): that saves a checkpoint and prints where, and the script
  exits with 143 (130). It is resumed with ``her-wrap train`` (the row's command and seed, plus ``-i`` on
  the stopped run folder's checkpoint); ``record`` and ``stopped`` of the new folder take the run across
  both folders (``experiments.check_run``). Resumed with a larger ``-n``, the run is that budget's row
  (``--variant ...+budget-2.5m``).

- references: stable-baselines3's own learner and ``HerReplayBuffer`` with rl-baselines3-zoo's entry for
  the same task (read from the installed ``rl_zoo3`` package), for a wall-clock budget::

    python scripts/robotics_results.py run fetch-push-zoo-tqc --seeds 0 --minutes 30

``budget`` evaluates the checkpoints of a row's recorded seeds at smaller budgets (what a shorter
``n_timesteps`` would have given, each seed on 100 fresh episodes; ``--seeds`` takes only some of them,
e.g. when a seed's run folder is gone; ``--greedy target-actor`` plays each agent's target actor, the final
agents' too: what ``actor_average`` at the learner's ``tau`` would have given)::

    python scripts/robotics_results.py budget fetch-push-ddpg --steps 200000 300000
    python scripts/robotics_results.py budget fetch-slide-ddpg --steps 2000000 --greedy target-actor

When the shipped entry takes a change that a variant measured, ``rename`` renames the task's rows: those
that ran it become the entry's, the others take the variant that gives the entry before (change
``configs/her.yml`` and ``ENTRY_TASKS`` first)::

    python scripts/robotics_results.py rename panda-push-ddpg --promoted movement+budget-440k \
        --previous no-movement+budget-600k
    python scripts/robotics_results.py rename fetch-push-ddpg \
        --promoted n-steps-3+net-2x256+workers-2-envs-2+budget-400k \
        --previous n-steps-1+net-3x256+one-process+budget-600k

``pace`` compares a run still training with recorded rows at its last evaluation (its training minutes
against theirs, and when it would end at that pace)::

    python scripts/robotics_results.py pace fetch-slide-ddpg logs/her/FetchSlide-v4_7 --variant bf16

``python scripts/robotics_results.py report --write`` rewrites the tables and figures.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import time
from dataclasses import dataclass
from typing import Any

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)
import torch as th
from stable_baselines3 import DDPG, SAC

from her_wrap import HER
from her_wrap.envs.registry import make_goal_env
from her_wrap.runs import presets
from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.callbacks import SuccessEvalCallback
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import StoppedBySignal, UsageError
from her_wrap.runs.model_factory import make_action_noise
from her_wrap.runs.zoo_translation import parse_override_value, set_in
from lab.doc_sections import replace_section
from lab.experiments import (
    ENTRY_TASKS,
    GREEDY_ACTORS,
    REFERENCE_TASKS,
    VARIANTS,
    ReferenceTask,
    budget_record,
    budget_table,
    check_run,
    final_success,
    record_entry_run,
    run_entry,
    stopped_run_record,
    variant_argument,
    variant_overrides,
    zoo_entry,
)
from lab.results import (
    group_records,
    load_results,
    manipulation_table,
    pace_table,
    reach_table,
    readme_table,
    record_label,
    save_record,
    save_results,
)
from lab.row_renames import rename_entry_rows

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = ROOT / "docs" / "robotics_results.json"
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: The user page of results (the shipped entries' table, the reach table) and the research log's page
#: (every row, variants included).
RESULTS_PAGE = DOCS / "results.md"
RESEARCH_PAGE = DOCS / "research" / "robotics.md"


@dataclass(frozen=True)
class Task:
    """One row of the reach table.

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


TASKS: dict[str, Task] = {
    "fetch-reach-sac": Task("FetchReach-v4", SAC, presets.FETCH_REACH_SAC, 5_000, 500, 0.95),
    "fetch-reach-ddpg": Task("FetchReach-v4", DDPG, presets.FETCH_REACH_DDPG, 5_000, 500, 0.95),
    "panda-reach-sac": Task("PandaReach-v3", SAC, presets.PANDA_REACH_SAC, 5_000, 500, 0.95),
}


def settings_with(base: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``base`` with ``key=value`` overrides (YAML values; dotted keys reach into nested dicts)."""
    settings = copy.deepcopy(base)
    for item in overrides:
        key, _, text = item.partition("=")
        set_in(settings, key.split("."), parse_override_value(text, key))
    return settings


def success_curve(model: Any, env_id: str, eval_freq: int, episodes: int, seed: int, **kwargs: Any) -> Any:
    """Greedy success on fresh episodes every ``eval_freq`` env steps (``her_wrap.runs``' evaluation)."""
    eval_env = make_goal_env(env_id)
    eval_env.reset(seed=seed)
    return SuccessEvalCallback(model, eval_env, eval_freq=eval_freq, n_eval_episodes=episodes, **kwargs)


def curve_fields(curve: Any) -> dict[str, Any]:
    steps, successes, seconds = curve.curve()
    return {"curve_steps": steps, "curve_success": successes, "curve_seconds": seconds}


def run_one(
    task: Task,
    settings: dict[str, Any],
    seed: int,
    steps: int,
    eval_episodes: int,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Train one seed of a reach task; return its record (curve, final success, wall times)."""
    th.manual_seed(seed)
    kwargs = dict(settings)
    noise_std = kwargs.pop("action_noise_std", None)
    if noise_std is not None:
        kwargs["action_noise"] = make_action_noise(
            "normal", noise_std, make_goal_env(task.env_id).action_space
        )
    policy = kwargs.pop("policy", task.policy)
    model = HER(policy, task.env_id, task.learner, seed=seed, **kwargs)
    curve = success_curve(
        model, task.env_id, task.eval_freq, eval_episodes, 10_000 * (seed + 1), max_train_seconds=max_seconds
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(steps, callback=curve)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "kind": "preset",
        "env_id": task.env_id,
        "learner": task.learner.__name__,
        "seed": seed,
        "steps": model.num_timesteps,
        "final_success": final_success(model, task.env_id, seed),
        **curve_fields(curve),
        "train_seconds": wall - curve.evaluation_seconds,
        "train_cpu_seconds": cpu,  # evaluations included
        "eval_seconds": curve.evaluation_seconds,
        "load_average": os.getloadavg(),
        "settings": json.loads(json.dumps(settings, default=str)),
    }


def run_reference(task_name: str, task: ReferenceTask, seed: int, minutes: float) -> dict[str, Any]:
    """Train SB3's learner with ``HerReplayBuffer`` and the zoo's entry for ``minutes`` of wall time, on as
    many torch threads as the shipped entry of the same task uses."""
    from stable_baselines3 import HerReplayBuffer

    from her_wrap.sb3.learners import learner_class

    entry = zoo_entry(task)
    if entry.pop("normalize", False):
        raise UsageError(f"the zoo entry {task.zoo_entry} normalizes; this reference runs unnormalized ones")
    if entry.pop("replay_buffer_class") != "HerReplayBuffer":
        raise UsageError(f"the zoo entry {task.zoo_entry} does not use HerReplayBuffer")
    steps = int(entry.pop("n_timesteps"))
    policy = entry.pop("policy")
    learner = learner_class(task.zoo_algo)
    th.set_num_threads(load_run_config(default_config_path(), task.env_id).num_threads or 1)
    th.manual_seed(seed)
    model = learner(
        policy, make_goal_env(task.env_id), replay_buffer_class=HerReplayBuffer, seed=seed, verbose=0, **entry
    )
    curve = success_curve(
        model,
        task.env_id,
        task.eval_freq,
        task.eval_episodes,
        10_000 * (seed + 1),
        max_train_seconds=60 * minutes,
    )
    model.learn(steps, callback=curve)
    fields = curve_fields(curve)
    return {
        "kind": "reference",
        "env_id": task.env_id,
        "learner": f"SB3 {learner.__name__} + HerReplayBuffer, rl-zoo3's {task.zoo_entry} entry",
        "seed": seed,
        "steps": model.num_timesteps,
        "final_success": final_success(model, task.env_id, seed),
        **fields,
        "train_seconds": fields["curve_seconds"][-1],
        "eval_episodes": task.eval_episodes,
        "num_threads": th.get_num_threads(),
        "load_average": os.getloadavg(),
        "settings": json.loads(json.dumps(entry, default=str)),
        "command": f"python scripts/robotics_results.py run {task_name} --seeds {seed} --minutes {minutes:g}",
    }


def command_run(args: argparse.Namespace) -> None:
    if args.variant and args.task not in ENTRY_TASKS:
        raise UsageError(
            f"--variant changes a manipulation entry; {args.task} is not one ({', '.join(ENTRY_TASKS)})"
        )
    for seed in args.seeds:
        if args.task in ENTRY_TASKS:
            if args.set or args.steps or args.minutes is not None:
                raise UsageError(
                    f"{args.task} runs the shipped entry as it is: no --set, --steps or --minutes"
                )
            record = run_entry(args.task, ENTRY_TASKS[args.task], seed, args.log_folder, args.variant)
        elif args.task in REFERENCE_TASKS:
            task = REFERENCE_TASKS[args.task]
            minutes = args.minutes or task.minutes
            print(f"{args.task} seed {seed}: {task.env_id} for {minutes} minutes", flush=True)
            record = run_reference(args.task, task, seed, minutes)
        else:
            record = run_preset(args, TASKS[args.task], seed)
        save_record(args.results, f"{args.label or record_label(args.task, args.variant)}/{seed}", record)


def command_record(args: argparse.Namespace) -> None:
    task = ENTRY_TASKS[args.task]
    for run_dir in args.run_dirs:
        record = record_entry_run(args.task, task, run_dir, args.variant)
        save_record(args.results, f"{record_label(args.task, args.variant)}/{record['seed']}", record)


def command_stopped(args: argparse.Namespace) -> None:
    record = stopped_run_record(
        args.task, ENTRY_TASKS[args.task], args.run_dir, args.variant, args.checkpoint, args.note
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote the curve of {args.run_dir} (stopped at {record['stopped_at']} env steps) to {args.out}")


def command_pace(args: argparse.Namespace) -> None:
    task = ENTRY_TASKS[args.task].with_variant(args.variant)
    steps, successes, seconds = check_run(task, args.run_dir, variant_overrides(args.variant)).curve()
    results = load_results(args.results)
    labels = {record_label(args.task, args.variant), args.task}
    keys = args.against or [key for key in results if key.rsplit("/", 1)[0] in labels]
    missing = [key for key in keys if key not in results]
    if missing:
        rows = ", ".join(key for key in results if key.split("/")[0].split("+")[0] == args.task)
        raise UsageError(f"no row {', '.join(missing)} in {args.results}; {args.task}'s rows: {rows}")
    try:
        print(pace_table(steps, successes, seconds, {key: results[key] for key in keys}))
    except ValueError as error:
        raise UsageError(str(error)) from None


def command_budget(args: argparse.Namespace) -> None:
    label = record_label(args.task, args.variant)
    records = group_records(load_results(args.results)).get(label, [])
    record = budget_record(args.task, records, args.steps, args.variant, args.seeds, args.greedy)
    print(budget_table(record))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


def command_rename(args: argparse.Namespace) -> None:
    updated, renamed = rename_entry_rows(
        load_results(args.results), args.task, ENTRY_TASKS[args.task], args.promoted, args.previous
    )
    for item in renamed:
        print(f"{item.old_key} -> {item.new_key}: {item.train_command}")
    if args.dry_run:
        print(f"(--dry-run: {args.results} left as it is)")
        return
    save_results(args.results, updated)
    print(f"renamed {len(renamed)} rows of {args.task} in {args.results}; next: report --write")


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
MANIPULATION_START, MANIPULATION_END = (
    "<!-- manipulation table: start -->",
    "<!-- manipulation table: end -->",
)
README_START, README_END = "<!-- robotics table: start -->", "<!-- robotics table: end -->"


def plot_curves(path: pathlib.Path, title: str, groups: list[list[dict[str, Any]]], *, minutes: bool) -> None:
    """Success against env steps (and, with ``minutes``, against training minutes), every seed of every
    group; dashed lines are references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axes = plt.subplots(1, 2 if minutes else 1, figsize=(11 if minutes else 6, 4), squeeze=False)
    by_steps = axes[0][0]
    for index, records in enumerate(groups):
        for record in records:
            name = f"HER({record['learner']})" + (f" {record['variant']}" if record.get("variant") else "")
            if record.get("kind") == "reference":
                name = record["learner"].split(",")[0]
            style = "--" if record.get("kind") == "reference" else "-"
            label = f"{name}, seed {record['seed']}" if minutes else f"seed {record['seed']}"
            color = f"C{index}" if minutes else None
            by_steps.plot(record["curve_steps"], record["curve_success"], style, color=color, label=label)
            if minutes:
                axes[0][1].plot(
                    np.array(record["curve_seconds"]) / 60, record["curve_success"], style, color=color
                )
    by_steps.set_xlabel("env steps")
    by_steps.set_ylabel("greedy success on fresh episodes")
    if minutes:
        axes[0][1].set_xlabel("training wall-clock minutes (evaluations excluded)")
    for axis in axes[0]:
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    by_steps.legend(fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    print(f"wrote {path}")


def command_report(args: argparse.Namespace) -> None:
    from lab.results import by_task, figure_groups

    groups = group_records(load_results(args.results))
    tables = {
        "reach": reach_table(groups),
        "manipulation": manipulation_table(groups),
        "readme": readme_table(groups),
    }
    print(*tables.values(), sep="\n\n")
    if not args.write:
        return
    for label, records in groups.items():
        if records[0].get("kind", "preset") == "preset":
            title = f"HER({records[0]['learner']}) on {records[0]['env_id']}"
            plot_curves(DOCS / f"robotics_{label}.png", title, [records], minutes=False)
    for env_id, env_groups in by_task(groups).items():
        path = DOCS / f"robotics_{env_id.split('-')[0].lower()}.png"
        plot_curves(path, env_id, figure_groups(env_groups), minutes=True)
    sections = {
        RESULTS_PAGE: [(TABLE_START, TABLE_END, "reach"), (README_START, README_END, "readme")],
        RESEARCH_PAGE: [(MANIPULATION_START, MANIPULATION_END, "manipulation")],
        README: [(README_START, README_END, "readme")],
    }
    for page, parts in sections.items():
        text = page.read_text()
        for start, end, table in parts:
            text = replace_section(text, start, end, tables[table])
        page.write_text(text)
    print(f"wrote the tables into {', '.join(str(page) for page in sections)}")


def main() -> None:
    th.set_num_threads(1)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--results", type=pathlib.Path, default=DEFAULT_RESULTS, help="JSON file of run records"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def entry_command(name: str, help: str, handler: Any) -> argparse.ArgumentParser:
        """A subcommand over one manipulation task of the shipped entries (its first argument)."""
        command = commands.add_parser(name, help=help)
        command.add_argument("task", choices=sorted(ENTRY_TASKS))
        command.set_defaults(handler=handler)
        return command

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
        type=variant_argument,
        default=None,
        help="a change to the shipped entry (manipulation tasks): "
        f"{', '.join(sorted(VARIANTS))}, budget-N (N env steps instead of the entry's, e.g. budget-1m), "
        "or several joined by +",
    )
    run.set_defaults(handler=command_run)
    record = entry_command(
        "record",
        "add finished her-wrap train run folders of a manipulation task",
        command_record,
    )
    record.add_argument("run_dirs", type=pathlib.Path, nargs="+", metavar="RUN_DIR")
    record.add_argument("--variant", type=variant_argument, default=None, help="the change the runs made")
    stopped = entry_command(
        "stopped",
        "write the curve of a manipulation run stopped before its budget (not a table row) to a JSON "
        "file, and evaluate one of its checkpoints",
        command_stopped,
    )
    stopped.add_argument("run_dir", type=pathlib.Path, metavar="RUN_DIR")
    stopped.add_argument("--out", type=pathlib.Path, required=True, help="the JSON file to write")
    stopped.add_argument("--variant", type=variant_argument, default=None, help="the change the run made")
    stopped.add_argument(
        "--checkpoint",
        type=int,
        default=None,
        metavar="STEPS",
        help="evaluate the checkpoint saved at these env steps (one worker's, as --save-freq counts them) "
        "on 100 fresh episodes",
    )
    stopped.add_argument("--note", default=None, help="why the run stopped, what shared the machine")
    pace = entry_command(
        "pace",
        "a run still training against recorded rows at its last evaluation: minutes, success, and when it "
        "would end at that pace",
        command_pace,
    )
    pace.add_argument("run_dir", type=pathlib.Path, metavar="RUN_DIR")
    pace.add_argument("--variant", type=variant_argument, default=None, help="the change the run makes")
    pace.add_argument(
        "--against",
        nargs="+",
        default=None,
        metavar="KEY",
        help="rows (LABEL/SEED) to compare with (default: every row of the task's entry and of --variant)",
    )
    budget = entry_command(
        "budget",
        "what smaller budgets would have given: every recorded seed of a manipulation row, its "
        "checkpoints at these env steps on 100 fresh episodes, with the training minutes to each",
        command_budget,
    )
    budget.add_argument(
        "--steps",
        type=int,
        nargs="+",
        required=True,
        help="env steps of all workers, at checkpoints of the runs",
    )
    budget.add_argument("--variant", type=variant_argument, default=None, help="the row's change")
    budget.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="only these recorded seeds (default: every one)"
    )
    budget.add_argument(
        "--greedy",
        choices=GREEDY_ACTORS,
        default="agent",
        help="whose weights act greedily: each saved agent's own (default), or its target actor's (what "
        "policy_kwargs actor_average at the learner's tau plays); with target-actor the final agents too",
    )
    budget.add_argument("--out", type=pathlib.Path, default=None, help="a JSON file to write")
    rename = entry_command(
        "rename",
        "rename a manipulation task's rows once its shipped entry makes a variant's change: rows that "
        "ran it become the entry's, the others take --previous (lab.row_renames)",
        command_rename,
    )
    rename.add_argument(
        "--promoted", type=variant_argument, required=True, help="the variant the entry now ships"
    )
    rename.add_argument(
        "--previous",
        type=variant_argument,
        default=None,
        help="the variant that gives the entry before (needed when a row did not run --promoted)",
    )
    rename.add_argument("--dry-run", action="store_true", help="print the new names, write nothing")
    report = commands.add_parser("report", help="print the results tables and write PNG curves under docs/")
    report.add_argument(
        "--write",
        action="store_true",
        help="replace the tables in docs/results.md, docs/research/robotics.md and README.md",
    )
    report.set_defaults(handler=command_report)
    args = parser.parse_args()
    try:
        args.handler(args)
    except UsageError as error:
        raise SystemExit(str(error)) from None
    except StoppedBySignal as stop:  # the child saved a checkpoint and said where; the runner said what next
        raise SystemExit(stop.status) from None


if __name__ == "__main__":
    main()
