"""Result records of seeded runs and the tables made of them: every seed on its own, then median and worst.

A record is one run of one seed, a JSON object with at least ``kind`` (``preset``, ``entry`` or
``reference``), ``env_id``, ``learner``, ``seed``, ``steps``, ``final_success`` (the final agent's greedy
success on fresh episodes), the curve ``curve_steps`` / ``curve_success`` / ``curve_seconds`` (training
wall time at each point, evaluations left out), ``train_seconds`` and ``command``. A results file maps
``LABEL/SEED`` to records; records of one label are the seeds of one recipe. A seed that lags is shown as
it is: the summary rows are the median and the *worst* seed, never a mean.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from her_wrap.runs.arguments import DEFAULT_CONFIG

Record = dict[str, Any]

#: Greedy success levels of the manipulation tables.
MILESTONES = (0.5, 0.8, 0.9)

#: Env steps to 0.9 greedy success read from mrl's published DDPG+HER curves (3 seeds, the v1 Fetch
#: envs; 8 envs, 3 x 512 networks with LayerNorm), by task name without its version; absent: none published.
MRL_STEPS_TO_09: dict[str, str] = {
    "FetchPush": "~0.25M with future + desired goals (2 + 2), ~0.4M with future alone",
    "FetchPickAndPlace": "~0.55-0.6M",
    "FetchSlide": "never (~0.88 at 2.5M)",
}


def load_results(path: Path) -> dict[str, Record]:
    """The records of a results file (none when it does not exist)."""
    return json.loads(path.read_text()) if path.exists() else {}


def save_results(path: Path, results: Mapping[str, Record]) -> None:
    """Write the records of a results file, in their order."""
    path.write_text(json.dumps(results, indent=1))


def save_record(path: Path, key: str, record: Record) -> None:
    """Add or replace one record, re-reading the file first (other runs may have written meanwhile)."""
    results = load_results(path)
    results[key] = record
    save_results(path, results)


def record_label(task: str, variant: str | None) -> str:
    """The label of a task's records, ``TASK+VARIANT`` for a variant."""
    return f"{task}+{variant}" if variant else task


def group_records(results: Mapping[str, Record]) -> dict[str, list[Record]]:
    """Records by label (``LABEL/SEED`` keys), each group sorted by seed, in the file's order of labels."""
    groups: dict[str, list[Record]] = {}
    for key, record in results.items():
        groups.setdefault(key.rsplit("/", 1)[0], []).append(record)
    for records in groups.values():
        records.sort(key=lambda record: record["seed"])
    return groups


def first_reaching(record: Record, threshold: float) -> tuple[int, float] | None:
    """(env steps, training minutes) at the first point of the curve with success >= ``threshold``.

    Minutes are ``nan`` for a record without ``curve_seconds`` (reach records written before they had it).
    """
    seconds_of = record.get("curve_seconds") or [math.nan] * len(record["curve_steps"])
    for steps, success, seconds in zip(
        record["curve_steps"], record["curve_success"], seconds_of, strict=True
    ):
        if success >= threshold:
            return int(steps), seconds / 60
    return None


def ms_per_step(record: Record) -> float:
    """Training wall-clock milliseconds per env step, evaluations excluded."""
    return 1000 * record["train_seconds"] / record["steps"]


def reproduce_command(records: Sequence[Record]) -> str:
    """The command of the records' runs, all their seeds in one."""
    seeds = " ".join(str(record["seed"]) for record in records)
    return re.sub(r"--seeds \d+", f"--seeds {seeds}", records[0]["command"])


def _steps_text(steps: float) -> str:
    return "-" if math.isinf(steps) else f"{steps / 1000:.0f}k"


def _minutes_text(minutes: float) -> str:
    return "-" if math.isinf(minutes) else f"{minutes:.0f}"


def _reached(record: Record) -> list[tuple[float, float]]:
    """(env steps, minutes) to each milestone, ``inf`` where the curve never gets there."""
    points = (first_reaching(record, threshold) for threshold in MILESTONES)
    return [(math.inf, math.inf) if point is None else (float(point[0]), point[1]) for point in points]


def _median(values: Iterable[float]) -> float:
    return statistics.median(values)


def summary_cells(records: Sequence[Record], combine: Any) -> tuple[str, str, str]:
    """Steps and minutes to each milestone and the final success of ``combine`` over the seeds.

    :param combine: ``statistics.median`` or ``max`` (the worst seed takes longest: a seed that never gets
        there makes it never); the final success takes the median or the lowest alike
    """
    reached = [_reached(record) for record in records]
    steps = " / ".join(_steps_text(combine(row[i][0] for row in reached)) for i in range(len(MILESTONES)))
    minutes = " / ".join(_minutes_text(combine(row[i][1] for row in reached)) for i in range(len(MILESTONES)))
    finals = [record["final_success"] for record in records]
    final = _median(finals) if combine is _median else min(finals)
    return steps, minutes, f"{final:.2f}"


def seed_cells(record: Record) -> tuple[str, str, str]:
    """Steps and minutes to each milestone and the final success of one seed."""
    reached = _reached(record)
    return (
        " / ".join(_steps_text(steps) for steps, _ in reached),
        " / ".join(_minutes_text(minutes) for _, minutes in reached),
        f"{record['final_success']:.2f}",
    )


def seed_text(record: Record) -> str:
    """A row's seed, and where its run was resumed from a checkpoint (``0, resumed at 1200k``)."""
    resumed = record.get("resumed_at") or []
    if not resumed:
        return str(record["seed"])
    return f"{record['seed']}, resumed at " + ", ".join(_steps_text(steps) for steps in resumed)


def recipe_name(record: Record) -> str:
    """What a record ran: ``HER(DDPG), `configs/her.yml` with ...`` or the reference's description."""
    if record["kind"] != "entry":
        return str(record["learner"])
    recipe = f"HER({record['learner']}), `configs/{record.get('config', DEFAULT_CONFIG.name)}`"
    if record.get("workers", 1) > 1:
        recipe += f" on {record['workers']} workers"
    from lab.experiments import variant_budget  # here: experiments loads the learners (torch)

    budget = variant_budget(record.get("variant"))
    changes = [*record.get("overrides", ()), *([f"-n {budget}"] if budget is not None else [])]
    if changes:
        recipe += " with " + ", ".join(f"`{item}`" for item in changes)
    return recipe


def mrl_steps(env_id: str) -> str:
    """mrl's published env steps to 0.9 for a task (:data:`MRL_STEPS_TO_09`), ``-`` when none."""
    return MRL_STEPS_TO_09.get(env_id.split("-")[0], "-")


MANIPULATION_HEADER = (
    "| task | recipe | seed | env steps to 0.5 / 0.8 / 0.9 | training minutes to 0.5 / 0.8 / 0.9 | "
    "greedy success of the final agent, 100 fresh episodes | env steps | ms per env step | "
    "mrl's env steps to 0.9 (published) | reproduce |\n"
    "|---|---|---|---|---|---:|---:|---:|---|---|"
)


def manipulation_rows(records: Sequence[Record], *, first_of_task: bool = True) -> list[str]:
    """One row per seed, then the median and the worst seed when there are several.

    :param first_of_task: whether these are the task's first rows (they carry mrl's figure)
    """
    first = records[0]
    recipe = recipe_name(first)
    mrl = mrl_steps(first["env_id"]) if first_of_task else ""
    rows = []
    for index, record in enumerate(records):
        steps, minutes, final = seed_cells(record)
        rows.append(
            f"| {first['env_id']} | {recipe} | {seed_text(record)} | {steps} | {minutes} | {final} | "
            f"{record['steps']:,} | {ms_per_step(record):.1f} | {mrl if index == 0 else ''} | "
            f"`{record['command']}` |"
        )
    if len(records) > 1:
        for name, combine in (("median", _median), ("**worst**", max)):
            steps, minutes, final = summary_cells(records, combine)
            cost = _median(ms_per_step(record) for record in records)
            rows.append(
                f"| {first['env_id']} | {recipe} | {name} of {len(records)} | {steps} | {minutes} | {final} | "
                f"{max(record['steps'] for record in records):,} | {cost:.1f} | | "
                f"`{reproduce_command(records)}` |"
            )
    return rows


def by_task(groups: Mapping[str, list[Record]]) -> dict[str, list[list[Record]]]:
    """Manipulation groups by env id: the shipped entry first, then its variants, then the references."""
    order = {"entry": 0, "reference": 2}
    tasks: dict[str, list[list[Record]]] = {}
    for records in groups.values():
        if records[0].get("kind", "preset") != "preset":
            tasks.setdefault(records[0]["env_id"], []).append(records)
    for env_groups in tasks.values():
        env_groups.sort(key=lambda records: order[records[0]["kind"]] + (not _is_shipped(records[0])))
    return tasks


def figure_groups(env_groups: list[list[Record]]) -> list[list[Record]]:
    """The groups a task's figure plots: its shipped entry's seeds and the references (the zoo's), in
    :func:`by_task`'s order. The variants stay in the research tables; a task with no shipped entry plots
    every group, so that its runs still show."""
    if _shipped_entry(env_groups) is None:
        return env_groups
    return [records for records in env_groups if _is_shipped(records[0]) or records[0]["kind"] == "reference"]


def manipulation_table(groups: Mapping[str, list[Record]]) -> str:
    """The manipulation table: per task, every seed of every recipe, its median and worst seed."""
    lines = [MANIPULATION_HEADER]
    for env_groups in by_task(groups).values():
        for index, records in enumerate(env_groups):
            lines.extend(manipulation_rows(records, first_of_task=index == 0))
    return "\n".join(lines)


def readme_table(groups: Mapping[str, list[Record]]) -> str:
    """Per task, the shipped entry's seeds in columns of their own, the worst seed, and the references.

    A seed's cell is its final agent's greedy success on 100 fresh episodes and where its curve first
    reached 0.9 (env steps, training minutes).
    """
    tasks = by_task(groups)
    shipped = {env_id: _shipped_entry(env_groups) for env_id, env_groups in tasks.items()}
    n_seeds = max((len(records) for records in shipped.values() if records), default=1)
    seed_columns = " | ".join(f"run {index + 1}" for index in range(n_seeds))
    lines = [
        f"| task | {seed_columns} | worst seed | zoo's TQC recipe in the same minutes | "
        "mrl's env steps to 0.9 (published) | reproduce |",
        "|---|" + "---|" * n_seeds + "---|---|---|---|",
    ]
    for env_id, records in shipped.items():
        if records is None:
            continue
        cells = [_readme_seed_cell(record) for record in records]
        cells += [""] * (n_seeds - len(cells))
        worst = min(records, key=lambda record: (record["final_success"], -_reached(record)[2][0]))
        references = [g[0] for g in tasks[env_id] if g[0]["kind"] == "reference"]
        zoo = "; ".join(
            f"{ref['final_success']:.2f} after {ref['steps']:,} env steps, {ms_per_step(ref):.0f} ms each "
            f"({ref['train_seconds'] / 60:.0f} min)"
            for ref in references
        )
        lines.append(
            f"| {env_id} | {' | '.join(cells)} | {_readme_seed_cell(worst)} | "
            f"{zoo or '-'} | {mrl_steps(env_id)} | `{reproduce_command(records)}` |"
        )
    return "\n".join(lines)


def _is_shipped(record: Record) -> bool:
    """Whether a record ran a task's shipped entry: ``configs/her.yml``'s, without a variant."""
    return (
        record["kind"] == "entry"
        and not record.get("variant")
        and record.get("config", DEFAULT_CONFIG.name) == DEFAULT_CONFIG.name
    )


def _shipped_entry(env_groups: list[list[Record]]) -> list[Record] | None:
    """The seeds of the shipped entry among a task's groups, or None."""
    for records in env_groups:
        if _is_shipped(records[0]):
            return records
    return None


def _readme_seed_cell(record: Record) -> str:
    point = first_reaching(record, 0.9)
    reached = (
        f"0.9 at {point[0] / 1000:.0f}k, {point[1]:.0f} min"
        if point
        else f"0.9 not reached in {record['steps'] / 1000:.0f}k"
    )
    return f"seed {record['seed']}: **{record['final_success']:.2f}** ({reached})"


def pace_table(
    steps: Sequence[int], successes: Sequence[float], seconds: Sequence[float], rows: Mapping[str, Record]
) -> str:
    """How a run still training compares with recorded rows at its last point of the curve: a Markdown table.

    For each row (``LABEL/SEED`` -> record), its training minutes and greedy success at the run's env steps
    (minutes read off its curve, linearly between two points), the run's time over the row's there, and the
    row's whole run scaled by that ratio: when the run would end if it kept the pace it has against that row.

    :param steps: the run's curve so far, env steps of all workers (:func:`lab.experiments.entry_curve`)
    :param successes: greedy success at each point
    :param seconds: training seconds at each point, evaluations left out
    :raises ValueError: when the run has no point yet, or a row's curve ends before the run's last point
    """
    if not steps:
        raise ValueError("the run has no evaluation yet: wait for its first point of the curve")
    at, minutes, success = steps[-1], seconds[-1] / 60, successes[-1]
    lines = [
        f"The run at {at / 1000:g}k env steps: {minutes:.1f} training minutes, greedy success {success:.2f} "
        f"(mean of its last 5 points {statistics.fmean(successes[-5:]):.3f}).",
        "",
        f"| row | minutes at {at / 1000:g}k | run / row | success at {at / 1000:g}k | the row's whole run, "
        "minutes | the run's at this pace |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, record in rows.items():
        curve_steps, curve_seconds = record["curve_steps"], record["curve_seconds"]
        if at > curve_steps[-1]:
            raise ValueError(f"row {key} ends at {curve_steps[-1]} env steps, before the run's {at}")
        row_minutes = _interpolated(at, curve_steps, curve_seconds) / 60
        row_success = dict(zip(curve_steps, record["curve_success"], strict=True)).get(at)
        ratio = minutes / row_minutes
        whole = record["train_seconds"] / 60
        lines.append(
            f"| {key} | {row_minutes:.1f} | {ratio:.2f} | "
            f"{'-' if row_success is None else f'{row_success:.2f}'} | {whole:.0f} | {whole * ratio:.0f} |"
        )
    return "\n".join(lines)


def _interpolated(at: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """``ys`` at ``at`` on the piecewise-linear curve through (``xs``, ``ys``), from (0, 0)."""
    previous_x, previous_y = 0.0, 0.0
    for x, y in zip(xs, ys, strict=True):
        if at <= x:
            return previous_y + (y - previous_y) * (at - previous_x) / (x - previous_x)
        previous_x, previous_y = x, y
    raise ValueError(f"{at} lies beyond the curve's last point, {previous_x}")


def first_solved(record: Record, threshold: float = 0.95) -> int | None:
    """Env steps at the first point of the curve with greedy success >= ``threshold``."""
    point = first_reaching(record, threshold)
    return None if point is None else point[0]


def reach_row(records: Sequence[Record]) -> str:
    """A row of the reach table: final success over seeds and each seed's first point >= 0.95."""
    finals = [record["final_success"] for record in records]
    mean = statistics.fmean(finals)
    std = statistics.pstdev(finals)
    walls = statistics.fmean(record["train_seconds"] for record in records)
    cpus = statistics.fmean(record["train_cpu_seconds"] for record in records)
    solved = ", ".join("never" if s is None else f"{s:,}" for s in map(first_solved, records))
    steps = ", ".join(f"{n:,}" for n in sorted({record["steps"] for record in records}))
    return (
        f"| {records[0]['env_id']} | HER({records[0]['learner']}) | {steps} | "
        f"{mean:.2f} ± {std:.2f} ({', '.join(f'{value:.2f}' for value in finals)}) | "
        f"{solved} | {walls:.0f} s ({cpus:.0f} s) | `{reproduce_command(records)}` |"
    )


REACH_HEADER = (
    "| task | learner | env steps | greedy success at the end, mean ± std (each seed) | "
    "first curve point >= 0.95 (each seed) | wall time per run, evaluations excluded (CPU time, included) | "
    "reproduce |\n|---|---|---:|---|---|---:|---|"
)


def reach_table(groups: Mapping[str, list[Record]]) -> str:
    """The reach table: one row per preset task."""
    rows = [reach_row(records) for records in groups.values() if records[0].get("kind", "preset") == "preset"]
    return "\n".join([REACH_HEADER, *rows])
