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

A row ran a part it does not name when its run was already as the part sets it, on the row's host: a
``bf16`` row of a host with bfloat16 dot products ran ``auto`` (:func:`~lab.experiments.entry_differences`),
and a row without a limit that trained less than ``minutes-115``'s 115 minutes ran as with that limit, which
would not have fired. A part the renamed row still names but that changes nothing in the entry on its host
is left out of its name (``bf16`` once the entry is ``auto``). A row stopped by its entry's ``max_minutes``
ran fewer env steps than its command's budget.

Run it after the entry (``configs/her.yml``) and its task (:data:`~lab.experiments.ENTRY_TASKS`)
have changed: it refuses a change that the shipped entry does not make yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_config import build_run_config
from her_wrap.runs.zoo_translation import apply_overrides
from lab.experiments import (
    EntryTask,
    budget_of,
    entry_differences,
    reproducing_commands,
    row_bfloat16_products,
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


def _row_differences(first: dict[str, Any], second: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """:func:`~lab.experiments.entry_differences` of two entries on a row's workers and host."""
    workers = int(record.get("workers") or 1)
    return entry_differences(first, second, workers, row_bfloat16_products(record))


def _ran_unnamed(task: EntryTask, record: dict[str, Any], part: str) -> bool:
    """Whether a row ran ``part`` (a variant name other than a budget) without naming it: applied to the
    settings the row ran, it changes nothing on the row's host, or only adds a ``max_minutes`` limit that
    the row's training time (``train_seconds``) stayed under."""
    settings = record.get("settings")
    if budget_of(part) is not None or not isinstance(settings, dict):
        return False
    try:
        ran = build_run_config(settings, task.env_id, "a recorded row").to_entry()
        named = build_run_config(
            apply_overrides(settings, variant_overrides(part)), task.env_id, "a recorded row"
        ).to_entry()
    except UsageError:
        return False
    limit, seconds = named.get("max_minutes"), record.get("train_seconds")
    if limit is not None and ran.get("max_minutes") is None and seconds is not None and seconds < 60 * limit:
        named = {**named, "max_minutes": None}
    return not _row_differences(ran, named, record)


def _without_unchanging(
    task: EntryTask, record: dict[str, Any], parts: list[str], own: list[str]
) -> list[str]:
    """``parts`` without those of the row's ``own`` that change nothing in the entry on the row's host
    (``bf16`` where the entry is ``auto`` and the host has bfloat16 dot products); budget parts, and the
    parts that name the entry before, stay."""
    kept = list(parts)
    named = _entry_settings(task, variant_overrides("+".join(kept) or None))
    for part in parts:
        if budget_of(part) is not None or part not in own:
            continue
        without = [other for other in kept if other != part]
        unnamed = _entry_settings(task, variant_overrides("+".join(without) or None))
        if not _row_differences(named, unnamed, record):
            kept, named = without, unnamed
    return kept


def _cycle_steps(record: dict[str, Any]) -> int:
    """Env steps of one collection cycle of a row's run, all workers' together (1 when its settings do not
    say): a run ends on a whole cycle, so it may train up to a cycle past its budget."""
    settings = record.get("settings") or {}
    frequency = settings.get("train_freq", 1)
    steps = frequency[0] if isinstance(frequency, (list, tuple)) else frequency
    try:
        return max(1, int(steps) * int(settings.get("n_envs") or 1) * int(record.get("workers") or 1))
    except (TypeError, ValueError):
        return 1


def _steps_as_commanded(task: EntryTask, record: dict[str, Any], variant: str | None) -> bool:
    """Whether a row's env steps are its command's budget, up to the rest of a cycle past it, or fewer
    where the command's ``max_minutes`` stopped it (:func:`_stopped_by_limit`)."""
    steps, budget = record.get("steps"), task.with_variant(variant).steps
    if isinstance(steps, int) and budget <= steps < budget + _cycle_steps(record):
        return True
    return _stopped_by_limit(task, record, variant)


def _stopped_by_limit(task: EntryTask, record: dict[str, Any], variant: str | None) -> bool:
    """Whether a row of fewer env steps than its command's budget was stopped by that command's
    ``max_minutes``: it trained for the limit (within a minute)."""
    limit = _entry_settings(task, variant_overrides(variant)).get("max_minutes")
    seconds, steps = record.get("train_seconds"), record.get("steps")
    return (
        limit is not None
        and seconds is not None
        and isinstance(steps, int)
        and steps < task.with_variant(variant).steps
        and seconds >= 60 * (limit - 1)
    )


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
    - A row ran a part it does not name when the settings it ran already make that part's change on its
      host (:func:`_ran_unnamed`), and a renamed row's name leaves out a part that changes nothing in the
      entry on its host (:func:`_without_unchanging`).
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
        a renamed row's env steps (unless its command's ``max_minutes`` stopped it) or workers are not its
        new command's, or two rows would share a key
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
        ran = [part for part in promoted_parts if part in parts or _ran_unnamed(task, record, part)]
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
        variant = "+".join(_budget_last(_without_unchanging(task, record, new_parts, parts))) or None
        row_task = task.with_variant(variant)
        if not _steps_as_commanded(task, record, variant):
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
