"""Rename a manipulation task's result rows once its shipped entry takes a change that a variant measured.

When ``configs/her.yml`` ships a change first measured as a variant (FetchPush's ``layer-norm``;
PandaPush's ``movement`` weights with a smaller budget, ``movement+budget-440k``), the rows that ran the
change now ran the entry, and every other row of the task ran the entry *before* it, which a variant must
name (``no-layer-norm``; ``no-movement+budget-600k``). :func:`rename_entry_rows` renames the rows and
rewrites their commands from the entry as it now is, so
every row of the results file still says which command trains it::

    python scripts/robotics_results.py rename panda-push-ddpg --promoted movement+budget-440k \
        --previous no-movement+budget-600k

A change of the entry's workers renames the same way: FetchPush's entry on two workers, 2 x 256 networks and
3-step returns for 400k env steps, measured as ``n-steps-3+net-2x256+workers-2-envs-2+budget-400k``, is named
from the one-process entry before it by ``n-steps-1+net-3x256+one-process+budget-600k``.

Run it after the entry (``configs/her.yml``) and its task (:data:`~lab.experiments.ENTRY_TASKS`)
have changed: it refuses a change that the shipped entry does not make yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from lab.experiments import (
    EntryTask,
    budget_of,
    entry_differences,
    reproducing_commands,
    variant_budget,
    variant_overrides,
)
from lab.results import record_label


@dataclass(frozen=True)
class Renamed:
    """One row renamed: its key before and after, and the ``her-wrap train`` command it now gives."""

    old_key: str
    new_key: str
    train_command: str


def _parts(variant: str | None) -> list[str]:
    return variant.split("+") if variant else []


def _budget_last(parts: list[str]) -> list[str]:
    """Variant parts with the budget part, if any, moved to the end (``td3+budget-1m``)."""
    return [part for part in parts if budget_of(part) is None] + [
        part for part in parts if budget_of(part) is not None
    ]


def _entry_settings(task: EntryTask, overrides: tuple[str, ...]) -> dict[str, Any]:
    return load_run_config(task.config_path(), task.env_id, overrides=overrides).to_entry()


def _check_promoted(task_name: str, task: EntryTask, shipped: dict[str, Any], promoted: str) -> None:
    """The shipped entry (``shipped``, its settings) must already make the promoted change: applying it
    changes nothing."""
    budget = variant_budget(promoted)
    if budget is not None and budget != task.steps:
        raise UsageError(
            f"{task_name} trains {task.steps} env steps, not {budget} ({promoted}): set the entry's "
            "n_timesteps and its ENTRY_TASKS steps first"
        )
    overrides = variant_overrides(promoted)
    differences = entry_differences(shipped, _entry_settings(task, overrides))
    if differences:
        raise UsageError(
            f"the shipped {task.env_id} entry does not make {promoted} yet ({' '.join(overrides)} changes "
            f"{', '.join(differences)}): change configs/{task.config} first"
        )


def _check_previous(task_name: str, task: EntryTask, shipped: dict[str, Any], previous: str) -> None:
    """The previous entry must differ from the shipped one (``shipped``, its settings)."""
    budget = variant_budget(previous)
    if budget is not None and budget != task.steps:
        return
    overrides = variant_overrides(previous)
    if not entry_differences(shipped, _entry_settings(task, overrides)):
        raise UsageError(
            f"{previous} changes nothing in the shipped {task.env_id} entry, so it cannot name the entry "
            f"{task_name} had before"
        )


def rename_entry_rows(
    results: dict[str, dict[str, Any]],
    task_name: str,
    task: EntryTask,
    promoted: str,
    previous: str | None,
) -> tuple[dict[str, dict[str, Any]], list[Renamed]]:
    """The results with ``task_name``'s rows renamed for an entry that now makes ``promoted``'s change.

    - A row whose variant has every part of ``promoted`` ran the entry: it loses those parts
      (``layer-norm+td3`` becomes ``td3``).
    - Any other row ran the entry before: it gains ``previous``'s parts in front of its own
      (``td3`` becomes ``no-layer-norm+td3``), except a budget part where the row sets its own budget.
    - A row that ran some parts of ``promoted`` (``previous`` then names one part for each, in the same
      order) loses those and gains the previous parts of the others only: with ``movement+layer-norm``
      promoted and ``no-movement+no-layer-norm`` previous, ``movement`` becomes ``no-layer-norm``.
    - A renamed row's budget part, if any, comes last (``n-steps-1+no-layer-norm+budget-600k``).

    Each renamed row gets its ``variant``, ``overrides``, ``command`` and ``train_command`` from the entry
    as it now is; its curve, settings and figures stay as they ran. Rows of other tasks, and the file's
    order of rows, stay as they are.

    :param results: the records of a results file, keyed ``LABEL/SEED`` (not changed)
    :param task: the task as it now is (:data:`~lab.experiments.ENTRY_TASKS`)
    :param promoted: the variant the entry now ships (one name, or several joined by ``+``)
    :param previous: the variant that gives the entry before, from the entry as it now is; needed when
        any row did not run ``promoted``
    :returns: the new results and the renamed rows, in the file's order
    :raises UsageError: when the entry does not make ``promoted`` yet, ``previous`` changes nothing or is
        missing, a row ran part of ``promoted`` and ``previous`` has not one part for each of its parts,
        a renamed row's env steps or workers are not its new command's, or two rows would share a key
    """
    shipped = _entry_settings(task, ())
    _check_promoted(task_name, task, shipped, promoted)
    if previous is not None:
        _check_previous(task_name, task, shipped, previous)
    promoted_parts = _parts(promoted)
    previous_parts = _parts(previous)
    undoes = (
        dict(zip(promoted_parts, previous_parts, strict=True))
        if len(previous_parts) == len(promoted_parts)
        else None
    )
    renamed: list[Renamed] = []
    updated: dict[str, dict[str, Any]] = {}
    for key, record in results.items():
        label, seed = key.rsplit("/", 1)
        name, *parts = label.split("+")
        if name != task_name:
            updated[key] = record
            continue
        ran = [part for part in promoted_parts if part in parts]
        if len(ran) == len(promoted_parts):
            new_parts = [part for part in parts if part not in promoted_parts]
        elif previous is None:
            raise UsageError(
                f"row {key} did not run {promoted}: pass --previous, the variant that gives the entry "
                f"{task_name} had before"
            )
        elif ran and undoes is None:
            raise UsageError(
                f"row {key} ran {'+'.join(ran)}, a part of {promoted}: give --previous one part for each part "
                f"of {promoted}, in the same order, so that the row undoes only the parts it did not run"
            )
        else:
            undo = (
                _parts(previous)
                if undoes is None
                else [undoes[part] for part in promoted_parts if part not in ran]
            )
            own_budget = any(budget_of(part) is not None for part in parts)
            new_parts = [part for part in undo if not (own_budget and budget_of(part) is not None)] + [
                part for part in parts if part not in ran
            ]
        variant = "+".join(_budget_last(new_parts)) or None
        row_task = task.with_variant(variant)
        if record.get("steps") != row_task.steps:
            raise UsageError(
                f"row {key} ran {record.get('steps')} env steps, but as {record_label(task_name, variant)} "
                f"its command trains {row_task.steps}: is the budget of {task_name} (or of --previous) right?"
            )
        ran_workers = int(record.get("workers") or 1)
        if ran_workers != row_task.workers:
            raise UsageError(
                f"row {key} ran on {ran_workers} worker(s), but as {record_label(task_name, variant)} its "
                f"command trains on {row_task.workers}: do --promoted and --previous both set the workers?"
            )
        new_key = f"{record_label(task_name, variant)}/{seed}"
        if new_key in updated:
            (first,) = [item.old_key for item in renamed if item.new_key == new_key]
            raise UsageError(f"rows {first} and {key} would both become {new_key}")
        commands = reproducing_commands(task_name, row_task, int(seed), variant)
        updated[new_key] = {
            **record,
            "variant": variant,
            "overrides": list(variant_overrides(variant)),
            **commands,
        }
        renamed.append(Renamed(key, new_key, commands["train_command"]))
    return updated, renamed
