"""``her-wrap optimize``: tune HER settings and learner hyperparameters with Optuna.

Every trial starts from the config entry, samples the settings of :mod:`her_wrap.runs.search_spaces` (the
``-params`` keys stay fixed), trains for ``-n`` steps (default: the entry's ``n_timesteps``) and evaluates
greedily ``--n-evaluations`` times on the way. The trial's value is the mean success rate over those
evaluations (the area under the learning curve: of two agents that both end at 1.0, the faster wins), or
over the last ``--score-last K`` of them (where the budget's end is what counts, and one lucky last
evaluation should not); the pruner compares trials evaluation by evaluation and stops the weak ones early.

Storage: by default a SQLite file ``LOG_FOLDER/her/STUDY_NAME/study.db``, so a study survives the process
and ``--n-jobs`` threads share it. ``--storage postgresql://user:password@host:port/db`` puts the study in
a PostgreSQL database, where any number of ``her-wrap optimize`` workers on any number of machines share
it: start the same command (same ``--study-name``) on each; each worker runs ``--n-trials`` trials and
Optuna hands every trial number out once. ``postgresql://`` URLs use the psycopg (3) driver (the
``postgres`` extra). Any number of workers may start at once on one new SQLite file (``--storage
sqlite:///PATH``, one machine) too: the first creates the tables while the others wait for it.

A running trial sends a heartbeat every ``--heartbeat`` seconds; one silent for twice that long (its worker
was killed) is marked failed by the next trial any worker starts, and run again with the same settings.

Each worker writes ``best_hyperparams.yml`` (the entry with the best trial's settings, ready for
``her-wrap train -c``) and ``trials.csv`` to ``LOG_FOLDER/her/STUDY_NAME/``.

**Minutes to a success rate** (``--minutes-to 0.9``): the value is the wall-clock minutes a trial trained
(its evaluations left out) until an evaluation first reached that success rate, and the study minimizes it:
the cheapest recipe wins, not the best-scoring one. A trial stops at that evaluation; it also stops once it
has trained longer than the best trial so far took (it can no longer win), or at ``--max-minutes``. A trial
that never got there scores more than any that did (:func:`her_wrap.runs.trials.minutes_value`). Each trial records
``reached``, ``best_success``, ``train_minutes`` and ``env_steps`` as user attributes (in ``trials.csv``).
``--space FILE`` samples the keys of a search-space file instead of the learner's space
(:func:`her_wrap.runs.search_spaces.load_search_space`).

**The entry beside the trials**: ``--start-from-entry`` queues the entry's own values of the searched keys
as a new study's first trial (:func:`~her_wrap.runs.studies.queue_entry_trial`; its ``entry`` user
attribute is true), so the recipe as it ships is timed in the same conditions as the settings that would replace it. Each trial
trains on ``--seed`` plus its number; ``--same-seed`` trains every one on ``--seed``, so that two trials
differ in their settings alone (a winner is then checked on other seeds before it ships).

**Trials on several workers**: for an entry with ``workers: N`` (or ``--workers N``), each trial trains as
``her-wrap train --workers N`` does, in worker processes of its own (its run folder under
``LOG_FOLDER/her/STUDY_NAME/trials/`` while it runs, kept with its output if it fails), so that a trial
measures the recipe as the entry ships it, minutes included; ``-n`` counts each worker's env steps, as
the entry's ``n_timesteps`` does, and ``env_steps`` every worker's. ``--workers 1`` trains each trial in
the ``her-wrap optimize`` process.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from her_wrap.lazy_imports import deprecated_names
from her_wrap.runs import arguments, studies
from her_wrap.runs.atomic import atomic_write_text
from her_wrap.runs.config import ConfigEntry, load_entry
from her_wrap.runs.env_factory import check_env_id, ensure_registered
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_layout import ALGO_FOLDER, folder_name
from her_wrap.runs.search_spaces import (
    Distribution,
    KeyPath,
    entry_params,
    load_search_space,
    sample_settings,
)
from her_wrap.runs.study_storage import DEFAULT_HEARTBEAT_S, hide_password, open_storage
from her_wrap.runs.trials import (
    TrialEvaluation,
    check_worker_trials,
    minutes_trial,
    train_trial_with,
    trial_value,
)
from her_wrap.runs.yaml_io import write_yaml_file
from her_wrap.runs.zoo_translation import parse_override, set_in


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_run_arguments(parser)
    parser.add_argument(
        "--n-trials", type=arguments.positive_int, default=10, help="trials this worker runs (default: 10)"
    )
    parser.add_argument(
        "--n-jobs", type=arguments.positive_int, default=1, help="trials run at once, in threads (default: 1)"
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="stop starting trials after this many seconds"
    )
    parser.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL, e.g. postgresql://user:pw@host/db (default: SQLite file)",
    )
    parser.add_argument(
        "--study-name", default=None, help="study to create or join (default: her-ENV_ID-ALGO)"
    )
    parser.add_argument(
        "--heartbeat",
        type=int,
        default=DEFAULT_HEARTBEAT_S,
        metavar="SECONDS",
        help="seconds between a running trial's heartbeats; a trial silent for twice that long is failed and "
        f"run again (default: {DEFAULT_HEARTBEAT_S}; 0 turns heartbeats off)",
    )
    parser.add_argument(
        "--sampler",
        choices=studies.SAMPLERS,
        default="tpe",
        help="tpe (default), random, or grid: every combination of a --space file's choices once, in random "
        "order (the study stops when all ran)",
    )
    parser.add_argument(
        "--pruner",
        choices=studies.PRUNERS,
        default="median",
        help="median (default), halving, hyperband, none",
    )
    parser.add_argument(
        "--n-startup-trials",
        type=int,
        default=5,
        help="trials before the sampler and pruner act (default: 5)",
    )
    parser.add_argument(
        "--n-evaluations", type=arguments.positive_int, default=4, help="evaluations per trial (default: 4)"
    )
    parser.add_argument(
        "--score-last",
        type=arguments.positive_int,
        default=None,
        metavar="K",
        help="a trial's value is its mean success over its last K evaluations (default: all of them)",
    )
    parser.add_argument(
        "--minutes-to",
        type=arguments.unit_fraction,
        default=None,
        metavar="SUCCESS",
        help="a trial's value is its training minutes until an evaluation reaches this success rate, and the "
        "study minimizes it (default: off, the mean success is maximized)",
    )
    parser.add_argument(
        "--max-minutes",
        type=arguments.positive_float,
        default=None,
        metavar="M",
        help="stop a trial after M minutes of training, evaluations left out (default: no limit but -n)",
    )
    parser.add_argument(
        "--workers",
        type=arguments.positive_int,
        default=None,
        metavar="N",
        help="train each trial on N worker processes, as her-wrap train --workers N (default: the entry's "
        "workers; 1 trains each trial in this process)",
    )
    parser.add_argument(
        "--oversubscribe",
        action="store_true",
        help="allow trials on more workers than this machine has CPU cores",
    )
    parser.add_argument(
        "--start-from-entry",
        action="store_true",
        help="a new study's first trial runs the entry's own values of the searched keys, so the recipe as "
        "it ships is measured beside the others (each must be one of the space's choices)",
    )
    parser.add_argument(
        "--same-seed",
        action="store_true",
        help="train every trial on --seed instead of --seed plus the trial's number, so that trials differ "
        "in their settings alone (needs --seed)",
    )
    parser.add_argument(
        "--space",
        default=None,
        metavar="FILE",
        help="YAML search space: dotted keys to lists of choices or {low, high, log} ranges (default: the "
        "learner's own space)",
    )


def make_objective(
    base: ConfigEntry,
    fixed: Collection[KeyPath],
    args: argparse.Namespace,
    n_timesteps: int,
    space: Mapping[KeyPath, Distribution] | None = None,
    *,
    workers: int = 1,
    study_dir: Path | None = None,
) -> Callable[[Any], float]:
    """The Optuna objective of ``her-wrap optimize`` (see the module docstring).

    With ``workers`` above 1, each trial trains on that many worker processes, its run in
    ``study_dir/trials/N`` while it runs (:func:`her_wrap.runs.trials.train_trial_in_workers`).
    """
    import optuna

    model_class = base.validate().model_class
    trials_dir = Path(study_dir if study_dir is not None else ".") / "trials"

    def objective(trial: Any) -> float:
        entry = trial_entry(base, trial, fixed, model_class, space)
        config = base.validate(entry)
        seed = (args.seed if args.seed is not None else arguments.draw_seed()) + (
            0 if args.same_seed else trial.number
        )
        folder = trials_dir / str(trial.number)
        if args.minutes_to is not None:
            return minutes_trial(trial, config, args, n_timesteps, seed, workers=workers, folder=folder)

        def report(evaluation: TrialEvaluation) -> bool:
            trial.report(evaluation.result.success_rate, step=evaluation.index)
            return not trial.should_prune()

        evaluations = train_trial_with(
            args, config, n_timesteps, seed, report, workers=workers, folder=folder
        )
        if trial.should_prune():
            raise optuna.TrialPruned()
        return trial_value([evaluation.result.success_rate for evaluation in evaluations], args.score_last)

    return objective


def trial_entry(
    base: ConfigEntry,
    trial: Any,
    fixed: Collection[KeyPath],
    model_class: str,
    space: Mapping[KeyPath, Distribution] | None = None,
) -> dict[str, Any]:
    """The base entry with a trial's sampled settings set in it (a new dict)."""
    entry = copy.deepcopy(base.entry)
    for path, value in sample_settings(trial, model_class, fixed, current=entry, space=space).items():
        set_in(entry, path, value)
    return entry


def write_results(
    study: Any,
    base: ConfigEntry,
    fixed: Collection[KeyPath],
    study_dir: Path,
    space: Mapping[KeyPath, Distribution] | None = None,
) -> Path | None:
    """Write ``best_hyperparams.yml`` and ``trials.csv``; return the former, or ``None`` before any trial completed."""
    import optuna

    atomic_write_text(study_dir / "trials.csv", study.trials_dataframe().to_csv(index=False))
    completed = [trial for trial in study.trials if trial.state == optuna.trial.TrialState.COMPLETE]
    if not completed:
        return None
    best = study.best_trial
    model_class = base.validate().model_class
    trial = optuna.trial.FixedTrial(best.params, number=best.number)
    entry = trial_entry(base, trial, fixed, model_class, space)
    path = study_dir / "best_hyperparams.yml"
    write_yaml_file(path, {base.env_id: base.validate(entry).to_entry()})
    return path


def optimize(args: argparse.Namespace) -> Any:
    """Run ``her-wrap optimize`` with parsed arguments; return the Optuna study."""
    import optuna

    if args.same_seed and args.seed is None:
        raise UsageError("--same-seed trains every trial on one seed: give it with --seed N")
    if args.score_last is not None and args.score_last > args.n_evaluations:
        raise UsageError(
            f"--score-last {args.score_last} is more than the {args.n_evaluations} evaluations of a trial: "
            "lower it or raise --n-evaluations"
        )
    ensure_registered(args.env)
    base = load_entry(
        args.conf or arguments.default_config_path(),
        args.env,
        algo=args.algo,
        overrides=args.hyperparams,
        n_envs=args.n_envs,
    )
    base_config = base.validate()
    check_env_id(base_config.env_id, base_config.env_kwargs)
    fixed = {parse_override(text)[0] for text in args.hyperparams}
    space = None if args.space is None else load_search_space(args.space)
    sampled_space = None if space is None else {path: d for path, d in space.items() if path not in fixed}
    # Checked before the study opens: an entry the space cannot sample leaves no empty study behind.
    entry_trial = (
        entry_params(base.entry, base_config.model_class, fixed, space) if args.start_from_entry else None
    )
    n_timesteps = args.n_timesteps or base_config.n_timesteps
    arguments.set_torch_threads(arguments.torch_threads(args.num_threads, base_config.num_threads))
    workers = args.workers or base_config.workers or 1
    if workers > 1:
        check_worker_trials(args, workers)
        source = "--workers" if args.workers else "the entry's workers"
        print(
            f"{args.env}: each trial trains on {workers} workers ({source}: her-wrap train --workers {workers}),"
            " -n counting each worker's env steps",
            flush=True,
        )

    study_name = args.study_name or f"her-{folder_name(args.env)}-{base_config.model_class}"
    study_dir = Path(args.log_folder) / ALGO_FOLDER / folder_name(study_name)
    study_dir.mkdir(parents=True, exist_ok=True)
    storage_url = args.storage or f"sqlite:///{(study_dir / 'study.db').resolve()}"
    if args.verbose < 2:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.heartbeat < 0:
        raise UsageError(f"--heartbeat must be 0 (off) or a number of seconds, got {args.heartbeat}")
    storage = open_storage(storage_url, heartbeat_interval=args.heartbeat or None)
    study = studies.open_study(
        storage,
        study_name,
        studies.make_sampler(args.sampler, args.n_startup_trials, args.seed, sampled_space),
        studies.make_pruner(args.pruner, args.n_startup_trials, args.n_evaluations),
        direction="maximize" if args.minutes_to is None else "minimize",
    )
    if entry_trial is not None:
        studies.queue_entry_trial(study, entry_trial)
    print(
        f"Study {study_name!r} in {hide_password(storage_url)}: {args.n_trials} trials of {n_timesteps} steps "
        f"(HER({base_config.model_class}) on {args.env}, worker {studies.worker_name()})",
        flush=True,
    )
    studies.run_study(
        study,
        make_objective(base, fixed, args, n_timesteps, space, workers=workers, study_dir=study_dir),
        n_trials=args.n_trials,
        n_jobs=args.n_jobs,
        timeout=args.timeout,
    )
    best_path = write_results(study, base, fixed, study_dir, space)
    if best_path is None:
        print("No trial completed yet (all pruned or failed); see trials.csv", flush=True)
        return study
    best = study.best_trial
    unit = "" if args.minutes_to is None else f" (training minutes to success {args.minutes_to})"
    if args.minutes_to is not None and not best.user_attrs.get("reached"):
        unit += ": no trial reached it yet, so this is the one that came closest"
    print(f"Best trial {best.number}: value {best.value:.4f}{unit}, params {best.params}", flush=True)
    print(f"Saved {best_path} (train with: her-wrap train --env {args.env} -c {best_path})", flush=True)
    return study


def run(args: argparse.Namespace) -> int:
    optimize(args)
    return 0


#: Names of 0.1.0 that moved to :mod:`her_wrap.runs.studies`: read here, they warn and return the new home's.
__getattr__ = deprecated_names(
    __name__,
    {
        name: ("her_wrap.runs.studies", name)
        for name in (
            "SAMPLERS",
            "PRUNERS",
            "make_sampler",
            "make_pruner",
            "open_study",
            "worker_name",
            "print_trial",
            "run_study",
        )
    },
)
