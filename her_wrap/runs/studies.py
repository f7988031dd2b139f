"""Optuna's side of ``her-wrap optimize``: the sampler and pruner a command line names, opening (or joining)
a study, the entry's own settings queued as its first trial, and running trials that record the worker
that ran them. :mod:`her_wrap.runs.optimize` builds the objective and the command around these;
:mod:`her_wrap.runs.study_storage` opens the storage they live in.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from typing import Any, Literal

from her_wrap.runs.errors import UsageError
from her_wrap.runs.search_spaces import Categorical, Distribution, KeyPath, choice_label, parameter_name

SAMPLERS = ("tpe", "random", "grid")
PRUNERS = ("median", "halving", "hyperband", "none")


def make_sampler(
    name: str, n_startup_trials: int, seed: int | None, space: Mapping[KeyPath, Distribution] | None = None
) -> Any:
    """The Optuna sampler ``--sampler`` names; ``grid`` needs a ``--space`` of lists of choices alone.

    :raises UsageError: for ``grid`` without such a space
    """
    import optuna

    if name == "grid":
        if space is None or not all(isinstance(choice, Categorical) for choice in space.values()):
            raise UsageError(
                "--sampler grid runs every combination of a search space's choices: give --space FILE whose "
                "keys all list their choices (no {low, high} range)"
            )
        grid = {
            parameter_name(path): [choice_label(value) for value in choice.choices]  # type: ignore[union-attr]
            for path, choice in space.items()
        }
        return optuna.samplers.GridSampler(grid, seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(n_startup_trials=n_startup_trials, seed=seed, multivariate=True)


def make_pruner(name: str, n_startup_trials: int, n_evaluations: int) -> Any:
    import optuna

    if name == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=n_startup_trials, n_warmup_steps=n_evaluations // 3
        )
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=n_evaluations)
    return optuna.pruners.NopPruner()


def open_study(
    storage: Any,
    study_name: str,
    sampler: Any = None,
    pruner: Any = None,
    direction: Literal["maximize", "minimize"] = "maximize",
) -> Any:
    """Create the study, or join it when another worker already did.

    :param direction: ``maximize`` (success rates) or ``minimize`` (minutes to a success rate)
    :raises UsageError: when the study exists with the other direction
    """
    import optuna

    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        sampler=sampler,
        pruner=pruner,
        direction=direction,
        load_if_exists=True,
    )
    if study.direction != optuna.study.StudyDirection[direction.upper()]:
        raise UsageError(
            f"study {study_name!r} exists and does not {direction} its value: a study of --minutes-to "
            "minimizes minutes, one without it maximizes success; give another --study-name"
        )
    return study


def worker_name() -> str:
    """``host:pid``: recorded with every trial, so a shared study shows who ran what."""
    return f"{socket.gethostname()}:{os.getpid()}"


def print_trial(_study: Any, trial: Any) -> None:
    """Optuna callback: one line per trial this worker finished."""
    value = "" if trial.value is None else f" value={trial.value:.4f}"
    print(f"Trial {trial.number} {trial.state.name.lower()}{value} params={trial.params}", flush=True)


def run_study(
    study: Any,
    objective: Callable[[Any], float],
    *,
    n_trials: int,
    n_jobs: int = 1,
    timeout: float | None = None,
) -> None:
    """Run ``n_trials`` trials of ``objective`` in this worker, recording each trial's worker.

    Trials whose settings the learner rejects (:class:`UsageError`) are recorded as failed, not fatal.
    """
    name = worker_name()

    def recorded(trial: Any) -> float:
        trial.set_user_attr("worker", name)
        return objective(trial)

    study.optimize(
        recorded,
        n_trials=n_trials,
        n_jobs=n_jobs,
        timeout=timeout,
        catch=(UsageError,),
        callbacks=[print_trial],
    )


def queue_entry_trial(study: Any, params: dict[str, Any]) -> bool:
    """Queue the entry's own settings (``params``, :func:`~her_wrap.runs.search_spaces.entry_params`) as the first trial of a study that
    has none; return whether it did.

    A study that already has trials keeps them (its first trial was the entry's, or the user chose
    otherwise), and one line says so. Two workers that open a new study at the same moment may both queue
    it: the entry then runs twice, which costs a trial and loses nothing.
    """
    if study.get_trials(deepcopy=False):
        print(
            f"--start-from-entry: study {study.study_name!r} already has trials, so the entry's settings are "
            "not queued again",
            flush=True,
        )
        return False
    study.enqueue_trial(params, user_attrs={"entry": True})
    print(f"--start-from-entry: trial 0 runs the entry's own settings {params}", flush=True)
    return True
