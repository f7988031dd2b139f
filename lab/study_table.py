"""A markdown table of an ``her-wrap optimize`` study, best trial first, for the research log.

    python scripts/study_table.py logs/her/fetch-push-minutes/study.db [--study-name NAME]

One row per trial: its state, its value, each sampled setting and the user attributes a trial records
(``--minutes-to`` studies: whether it reached the target, its training minutes, env steps and best
success). Trials that did not finish (running, failed) come last.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

#: The user attributes of a ``--minutes-to`` trial, in the order the table shows them.
ATTRIBUTE_COLUMNS = ("reached", "train_minutes", "env_steps", "best_success")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def study_rows(study: Any) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``study``'s table: finished trials by value (the study's direction), then the rest."""
    import optuna

    finished = [trial for trial in study.trials if trial.state == optuna.trial.TrialState.COMPLETE]
    finished.sort(
        key=lambda trial: trial.value, reverse=study.direction == optuna.study.StudyDirection.MAXIMIZE
    )
    others = [trial for trial in study.trials if trial.state != optuna.trial.TrialState.COMPLETE]
    params = sorted({name for trial in study.trials for name in trial.params})
    attributes = [
        name for name in ATTRIBUTE_COLUMNS if any(name in trial.user_attrs for trial in study.trials)
    ]
    header = ["trial", "state", "value", *params, *attributes]
    rows = [
        [
            str(trial.number),
            trial.state.name.lower(),
            _cell(trial.value),
            *(_cell(trial.params.get(name)) for name in params),
            *(_cell(trial.user_attrs.get(name)) for name in attributes),
        ]
        for trial in finished + others
    ]
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    import optuna

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("database", type=Path, help="the study's SQLite file (study.db)")
    parser.add_argument("--study-name", default=None, help="the study (default: the file's only study)")
    args = parser.parse_args(argv)
    if not args.database.is_file():
        parser.error(f"{args.database} is no file: give the study.db of an her-wrap optimize study")
    storage = f"sqlite:///{args.database.resolve()}"
    names = [summary.study_name for summary in optuna.get_all_study_summaries(storage)]
    name = args.study_name or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        parser.error(f"{args.database} holds the studies {names}: pass one with --study-name")
    print(markdown_table(*study_rows(optuna.load_study(study_name=name, storage=storage))), end="")
